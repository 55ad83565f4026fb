"""Uncertainty of held-out results: a two-level (cluster) percentile bootstrap.

The unit of a held-out result is a (seed, task) cell: every training seed is a model of
its own, and every seed plays the same held-out tasks (boards, problems, documents), so
neither seeds nor evaluation repeats are independent episodes. A cell's value is the mean
of its repeats (repeats nested within the task, never resampled as episodes); a bootstrap
replicate draws seeds with replacement (the clusters: between-seed variance, the training
run's randomness) and, independently, tasks with replacement (the same resampled tasks for
every seed: task difficulty is shared). With one seed it is the plain bootstrap over
tasks. Pooling seeds as more tasks (seed x task "tasks") would drop the between-seed
variance and count every board once per seed: intervals too narrow by up to sqrt(seeds).

A claimed improvement is a paired difference: the same held-out tasks, played by the
method and by the base model with the same sampling seeds, so the task-to-task spread
(some boards are easy for every model) cancels: the bootstrap runs on the (seed, task)
differences. Hand-written rather than scipy.stats: scipy's bootstrap resamples one level,
and scipy is not otherwise a dependency of the library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A mean with its (level) percentile-bootstrap confidence interval over `seeds`
    clusters x n tasks."""

    mean: float
    lo: float
    hi: float
    n: int
    level: float = 0.95
    seeds: int = 1

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def __str__(self) -> str:
        return f"{self.mean:+.3f} [{self.lo:+.3f}, {self.hi:+.3f}]"


def cluster_bootstrap(values_st, *, level: float = 0.95, resamples: int = RESAMPLES,
                      seed: int = 0) -> Interval:
    """Mean of a (seeds, tasks) matrix of per-cell values (each cell the mean of its
    repeats) and its percentile-bootstrap CI, resampling seeds and tasks independently
    with replacement (see the module docstring)."""
    x = np.asarray(values_st, dtype=np.float64)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"need a non-empty (seeds, tasks) matrix, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("every (seed, task) cell needs a value (some are missing or NaN)")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n_seeds, n_tasks = x.shape
    rng = np.random.default_rng(seed)
    # How often each seed / task is drawn per replicate: the replicate's mean is then
    # counts_s @ x @ counts_t / (S T), without materialising the resampled matrices.
    seed_counts = rng.multinomial(n_seeds, [1 / n_seeds] * n_seeds, size=resamples)
    task_counts = rng.multinomial(n_tasks, [1 / n_tasks] * n_tasks, size=resamples)
    means = np.einsum("bs,st,bt->b", seed_counts, x, task_counts) / (n_seeds * n_tasks)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return Interval(float(x.mean()), float(lo), float(hi), n_tasks, level, n_seeds)


def mean_ci(values: Sequence[float], **kwargs) -> Interval:
    """Mean of per-task values of one seed (e.g. success 0/1) and its bootstrap CI over
    tasks (cluster_bootstrap with one seed)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"need a non-empty 1-D sequence of per-task values, got shape {x.shape}")
    return cluster_bootstrap(x[None, :], **kwargs)


def paired_difference(treatment, control, **kwargs) -> Interval:
    """treatment - control, cell by cell (index i, or (seed, task), is the same task and
    seed in both), with the bootstrap CI of the mean difference: 1-D values are one seed's
    tasks, 2-D a (seeds, tasks) matrix."""
    a = np.asarray(treatment, dtype=np.float64)
    b = np.asarray(control, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same tasks: shapes {a.shape} vs {b.shape}")
    d = a - b
    return mean_ci(d, **kwargs) if d.ndim == 1 else cluster_bootstrap(d, **kwargs)


def per_task(task_ids: Sequence, values: Sequence[float]) -> dict:
    """Mean value per task id (repeats of a task averaged), in first-seen order."""
    sums: dict = {}
    for t, v in zip(task_ids, values, strict=True):
        s, n = sums.get(t, (0.0, 0))
        sums[t] = (s + float(v), n + 1)
    return {t: s / n for t, (s, n) in sums.items()}


def cell_matrix(episodes: dict[int, tuple[Sequence, Sequence[float]]]
                ) -> tuple[list, list, np.ndarray]:
    """(seeds, tasks, (S, T) matrix) from {seed: (task ids, values) per episode}: each cell
    the mean of that seed's repeats of the task. Every seed must have played the same
    tasks (they are the same held-out tasks); refuses otherwise, naming the seeds."""
    cells = {s: per_task(*ep) for s, ep in sorted(episodes.items())}
    if not cells:
        raise ValueError("no seeds")
    seeds = list(cells)
    tasks = sorted(cells[seeds[0]])
    for s in seeds[1:]:
        if set(cells[s]) != set(tasks):
            raise ValueError(f"seed {s} played other tasks than seed {seeds[0]}: "
                             f"{len(set(cells[s]) ^ set(tasks))} differ")
    return seeds, tasks, np.array([[cells[s][t] for t in tasks] for s in seeds])


def paired_by_task(treatment: dict[int, tuple[Sequence, Sequence[float]]],
                   control: dict[int, tuple[Sequence, Sequence[float]]],
                   **kwargs) -> Interval:
    """paired_difference over the (seed, task) cells both played: each argument is
    {seed: (task ids, values) per episode}, repeats averaged per cell. Refuses seed or
    task sets that differ."""
    a_seeds, a_tasks, a = cell_matrix(treatment)
    b_seeds, b_tasks, b = cell_matrix(control)
    if a_seeds != b_seeds:
        raise ValueError(f"paired comparison over different seeds: {a_seeds} vs {b_seeds}")
    if a_tasks != b_tasks:
        raise ValueError(f"paired comparison over different task sets: "
                         f"{len(set(a_tasks) - set(b_tasks))} tasks only in treatment, "
                         f"{len(set(b_tasks) - set(a_tasks))} only in control")
    return paired_difference(a, b, **kwargs)
