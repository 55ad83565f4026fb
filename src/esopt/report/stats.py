"""Uncertainty of held-out results: percentile bootstrap over tasks.

A claimed improvement is a paired difference: the same held-out tasks, played by the
method and by the base model with the same sampling seeds, so the task-to-task spread
(some boards are easy for every model) cancels. Hand-written rather than scipy.stats:
the percentile bootstrap of a mean is a few lines of numpy, and scipy is not otherwise a
dependency of the library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A mean with its (level) percentile-bootstrap confidence interval over n tasks."""

    mean: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def __str__(self) -> str:
        return f"{self.mean:+.3f} [{self.lo:+.3f}, {self.hi:+.3f}]"


def _bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(resamples, values.size))
    return values[idx].mean(axis=1)


def mean_ci(values: Sequence[float], *, level: float = 0.95, resamples: int = RESAMPLES,
            seed: int = 0) -> Interval:
    """Mean of per-task values (e.g. success 0/1) and its bootstrap CI over tasks."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"need a non-empty 1-D sequence of per-task values, got shape {x.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    means = _bootstrap_means(x, resamples, seed)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return Interval(float(x.mean()), float(lo), float(hi), int(x.size), level)


def paired_difference(treatment: Sequence[float], control: Sequence[float], *,
                      level: float = 0.95, resamples: int = RESAMPLES,
                      seed: int = 0) -> Interval:
    """treatment - control, task by task (index i is the same task in both), with the
    bootstrap CI of the mean difference (tasks resampled together)."""
    a = np.asarray(treatment, dtype=np.float64)
    b = np.asarray(control, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need the same tasks: shapes {a.shape} vs {b.shape}")
    return mean_ci(a - b, level=level, resamples=resamples, seed=seed)


def per_task(task_ids: Sequence, values: Sequence[float]) -> dict:
    """Mean value per task id (repeats of a task averaged), in first-seen order."""
    sums: dict = {}
    for t, v in zip(task_ids, values, strict=True):
        s, n = sums.get(t, (0.0, 0))
        sums[t] = (s + float(v), n + 1)
    return {t: s / n for t, (s, n) in sums.items()}


def paired_by_task(treatment: tuple[Sequence, Sequence[float]],
                   control: tuple[Sequence, Sequence[float]], **kwargs) -> Interval:
    """paired_difference over the tasks both played: each argument is (task ids, values)
    per episode, repeats averaged per task. Refuses task sets that differ."""
    a, b = per_task(*treatment), per_task(*control)
    if set(a) != set(b):
        raise ValueError(f"paired comparison over different task sets: {len(set(a) - set(b))} "
                         f"tasks only in treatment, {len(set(b) - set(a))} only in control")
    keys = list(b)
    return paired_difference([a[k] for k in keys], [b[k] for k in keys], **kwargs)
