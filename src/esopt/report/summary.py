"""The report's first page: what ran and what it shows.

Per (experiment, H*, method): the held-out score (success; ANLS for DocVQA, the paper's
metric) with its 95% two-level bootstrap CI (seeds as clusters, tasks shared by the
seeds, repeats averaged within a task: esopt.report.stats), the paired difference to the
base model on the same tasks (same sampling seeds) with its CI, and the training reward of
the first and last generation; then the git commit, the wall time of the DAG and the
config hash (the runs' specs without their runtime settings, which are not part of an
experiment's identity).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from esopt.pipeline.records import EvalRecord
from esopt.pipeline.spec import METHODS, RunSpec
from esopt.report.results import ledger, ledger_path
from esopt.report.stats import Interval, cell_matrix, cluster_bootstrap, paired_by_task
from esopt.report.tables import duration


@dataclass(frozen=True)
class FirstPage:
    """The report's first page: what ran (runs, commit, config hash, wall time), the
    headline sentences and the per-method table (header, rows)."""

    ran: str
    headline: str
    table: tuple[list[str], list[list[str]]]


# The held-out score of the first page per environment: (evaluation column, its name);
# success elsewhere. DocVQA's `success` is exact match; the paper reports ANLS.
SCORES = {"docvqa": ("anls", "ANLS")}
# What a held-out task is called, per environment (the headline counts them).
UNITS = {"sudoku": "boards", "countdown": "puzzles", "math_tool": "problems",
         "docvqa": "documents", "web": "tasks"}


def score_of(env: str) -> tuple[str, str]:
    """(evaluation column, name) of an environment's first-page score."""
    return SCORES.get(env, ("success", "success"))


@dataclass(frozen=True)
class MethodResult:
    experiment: str
    horizon: int
    method: str
    """The method, or base_<slug> of an evaluation-only model (its own row)."""
    seeds: int
    tasks: int
    """Distinct held-out tasks (every seed plays the same ones)."""
    success: Interval
    """The held-out score (score_of(env): success, or ANLS) and its CI."""
    vs_base: Interval | None
    """Paired difference to the base model (None for the base model, or without one)."""
    train_reward: tuple[float, float] | None
    """Mean training reward (over seeds) of the first and the last k updates (k: a quarter
    of the run, at most 5)."""
    env: str = ""
    label: str = ""
    vs_esopt: Interval | None = None
    """Agentic ESOpt minus this method, paired by seed and task over the seeds both ran
    (None for ESOpt itself, or when ESOpt did not run at those seeds)."""

    @property
    def score(self) -> str:
        return score_of(self.env)[1]

    @property
    def unit(self) -> str:
        return UNITS.get(self.env, "tasks")


def _final_episodes(spec: RunSpec) -> tuple[list, list[float]]:
    """(task ids, score) of the final evaluation's episodes (a failed episode's missing
    score counts 0, as its success does)."""
    column = score_of(spec.env)[0]
    t = EvalRecord.read_columns(Path(spec.run_dir) / "final" / "eval.parquet",
                                ["task_seed", column])
    return [int(x) for x in t["task_seed"]], [float(x or 0.0) for x in t[column]]


def _by_seed(specs: list[RunSpec]) -> dict[int, tuple[list, list[float]]]:
    """{seed: (task ids, scores) per episode}: one run per seed."""
    out = {}
    for s in specs:
        if s.seed in out:
            raise ValueError(f"{s.run_dir}: two runs of seed {s.seed} in one result")
        out[s.seed] = _final_episodes(s)
    return out


def _train_reward(specs: list[RunSpec]) -> tuple[float, float] | None:
    curves = [ledger(s)["reward_mean"] for s in specs if ledger_path(s).exists()]
    curves = [c for c in curves if c]
    if not curves:
        return None
    # A generation's mean moves with the boards it drew: average the first and last k
    # (a quarter of the run, at most 5) rather than quote one generation each.
    k = max(1, min(5, min(len(c) for c in curves) // 4))
    return (float(np.nanmean([np.nanmean(c[:k]) for c in curves])),
            float(np.nanmean([np.nanmean(c[-k:]) for c in curves])))


def method_results(specs: list[RunSpec]) -> list[MethodResult]:
    """One result per (experiment, H*, method) with a final evaluation (evaluation-only
    models first, then methods in the tables' order); the CIs resample seeds as clusters
    and the tasks all seeds share (stats.cluster_bootstrap)."""
    groups: dict[tuple, list[RunSpec]] = {}
    for s in specs:
        if (Path(s.run_dir) / "final" / "eval.parquet").exists():
            groups.setdefault((s.experiment, s.horizon, s.run_method), []).append(s)
    out = []
    order = {m: i for i, m in enumerate(METHODS)}

    def key(kv):
        (exp, h, _), runs = kv
        return exp, h, -1 if runs[0].eval_model else order[runs[0].method]

    for (exp, h, run_method), runs in sorted(groups.items(), key=key):
        episodes = _by_seed(runs)
        seeds, tasks, cells = cell_matrix(episodes)
        base = groups.get((exp, h, "base"))
        vs_base = None
        if run_method != "base" and base:
            base_runs = [b for b in base if b.seed in episodes]
            if {b.seed for b in base_runs} == set(episodes):
                vs_base = paired_by_task(episodes, _by_seed(base_runs))
        esopt = groups.get((exp, h, "esopt"))
        vs_esopt = (esopt_minus(_by_seed(esopt), episodes)
                    if esopt and run_method != "esopt" else None)
        first = runs[0]
        label = (f"{first.eval_model} (evaluation only)" if first.eval_model
                 else LABELS.get(first.method, first.method))
        out.append(MethodResult(exp, h, run_method, len(seeds), len(tasks),
                                cluster_bootstrap(cells), vs_base, _train_reward(runs),
                                env=first.env, label=label, vs_esopt=vs_esopt))
    return out


def esopt_minus(esopt: dict[int, tuple[list, list[float]]],
                other: dict[int, tuple[list, list[float]]]) -> Interval | None:
    """ESOpt minus another method, paired by (seed, task) over the seeds both ran (a
    training seed's evaluation uses the same sampling seeds for every method); None when
    they share no seed. The interval's `seeds` says how many were paired."""
    common = sorted(set(esopt) & set(other))
    if not common:
        return None
    return paired_by_task({s: esopt[s] for s in common}, {s: other[s] for s in common})


def config_hash(specs: list[RunSpec]) -> str:
    """sha256 (12 hex digits) of the runs' specs without their runtime settings."""
    identity = []
    for s in specs:
        d = asdict(s)
        d.pop("runtime", None)
        identity.append(d)
    blob = json.dumps(sorted(identity, key=lambda d: json.dumps(d, sort_keys=True)),
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def git_commit(root: str | Path = ".") -> str:
    """HEAD's commit (12 digits), '+dirty' when tracked files differ; 'unknown' outside git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def dag_wall_s(results: str | Path = "results") -> float:
    """Seconds from the DAG's first output (results/runs.json, written by the first job)
    to the newest file under results/: the wall time of the last `snakemake` that built
    them (a rerun of one target restarts the clock only for what it rebuilt)."""
    files = [p for p in Path(results).rglob("*") if p.is_file()]
    if not files:
        return float("nan")
    times = [p.stat().st_mtime for p in files]
    start = Path(results, "runs.json")
    first = start.stat().st_mtime if start.exists() else min(times)
    return max(times) - first


LABELS = {"base": "Base", "vanilla_es": "Vanilla ES", "esopt": "Agentic ESOpt",
          "grpo": "GRPO †", "grpo_b": "GRPO ‡", "ppo": "PPO", "copes": "CoPES",
          "async_es": "Async ES", "lowrank_es": "Low-rank ES"}


def summary_rows(results: list[MethodResult]) -> tuple[list[str], list[list[str]]]:
    """The first page's table: header and rows (scores and differences x100)."""
    header = ["Experiment", "H*", "Method", "Seeds x tasks", "Metric",
              "Held-out score [95% CI]", "Minus base [95% CI]",
              "Train reward first -> last (k gens)"]
    # ESOpt minus each other method, where ESOpt ran beside another trained method.
    versus = any(r.vs_esopt is not None and r.method != "base" for r in results)
    if versus:
        header.append("ESOpt minus [95% CI]")
    rows = []
    for r in results:
        s = r.success
        train = "–" if r.train_reward is None else (
            f"{r.train_reward[0]:.3f} -> {r.train_reward[1]:.3f}")
        rows.append([r.experiment, str(r.horizon), r.label or LABELS.get(r.method, r.method),
                     f"{r.seeds} x {r.tasks}", r.score,
                     f"{100 * s.mean:.1f} [{100 * s.lo:.1f}, {100 * s.hi:.1f}]",
                     points_ci(r.vs_base), train]
                    + ([points_ci(r.vs_esopt, r.seeds)] if versus else []))
    return header, rows


def points_ci(d: Interval | None, seeds: int | None = None) -> str:
    """A difference x100 with its CI, `*` when the CI excludes zero, the paired seeds when
    fewer than `seeds`; a dash for none."""
    if d is None:
        return "–"
    fewer = f" ({d.seeds} of {seeds} seeds)" if seeds is not None and d.seeds < seeds else ""
    return (f"{100 * d.mean:+.1f} [{100 * d.lo:+.1f}, {100 * d.hi:+.1f}]"
            + (" *" if d.excludes_zero else "") + fewer)


def _claim(subject: str, r: MethodResult, d: Interval, seeds: int, tasks: int,
           versus: str, better: str, worse: str) -> str:
    """One headline sentence: a paired difference, its CI, its units and what it supports."""
    verdict = better if d.lo > 0 else worse if d.hi < 0 else "inside the noise"
    return (f"{subject} at H*={r.horizon} ({r.experiment}): {100 * d.mean:+.1f} {r.score} "
            f"points{versus} [{100 * d.lo:+.1f}, {100 * d.hi:+.1f}] over {seeds} "
            f"seed{'s' if seeds > 1 else ''} x {tasks} {r.unit}: {verdict}.")


def headline(results: list[MethodResult]) -> str:
    """One sentence per trained method and H*: its difference to base and whether the CI
    excludes zero (the claim the run supports, or that it is inside the noise); then
    Agentic ESOpt minus each other method, where one ran beside it."""
    name = lambda r: r.label or LABELS.get(r.method, r.method)  # noqa: E731
    lines = [_claim(name(r), r, r.vs_base, r.seeds, r.tasks, " vs base", "better than base",
                    "worse than base")
             for r in results if r.vs_base is not None]
    lines += [_claim(f"Agentic ESOpt minus {name(r)}", r, r.vs_esopt, r.vs_esopt.seeds,
                     r.vs_esopt.n, "", "ESOpt better", "ESOpt worse")
              for r in results if r.vs_esopt is not None and r.method != "base"]
    return "\n".join(lines)


def first_page(specs: list[RunSpec]) -> FirstPage:
    """What ran and what it shows: the report's first page (also `esopt report summary`)."""
    if not specs:
        return FirstPage("no runs", "", ([], []))
    results = method_results(specs)
    ran = (f"{len(specs)} runs; model {specs[0].model}; experiments "
           f"{sorted({s.experiment for s in specs})}; horizons "
           f"{sorted({s.horizon for s in specs})}; methods "
           f"{sorted({s.method for s in specs})}; seeds {sorted({s.seed for s in specs})}. "
           f"Commit {git_commit()}; config hash {config_hash(specs)}; wall time of the DAG "
           f"{duration(dag_wall_s())}.")
    return FirstPage(ran, headline(results), summary_rows(results))
