"""The report's first page: what ran and what it shows.

Per (experiment, H*, method): held-out success with its 95% bootstrap CI over tasks, the
paired difference to the base model on the same tasks (same sampling seeds) with its CI,
and the training reward of the first and last generation; then the git commit, the wall
time of the DAG and the config hash (the runs' specs without their runtime settings,
which are not part of an experiment's identity).
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
from esopt.report.stats import Interval, mean_ci, paired_by_task
from esopt.report.tables import duration


@dataclass(frozen=True)
class FirstPage:
    """The report's first page: what ran (runs, commit, config hash, wall time), the
    headline sentences and the per-method table (header, rows)."""

    ran: str
    headline: str
    table: tuple[list[str], list[list[str]]]


@dataclass(frozen=True)
class MethodResult:
    experiment: str
    horizon: int
    method: str
    seeds: int
    tasks: int
    success: Interval
    vs_base: Interval | None
    """Paired difference to the base model (None for the base model, or without one)."""
    train_reward: tuple[float, float] | None
    """Mean training reward (over seeds) of the first and the last k updates (k: a quarter
    of the run, at most 5)."""


def _final_episodes(spec: RunSpec) -> tuple[list, list[float]]:
    """(task ids, success) of the final evaluation's episodes; a task id is the task seed
    with the training seed, so seeds pool as more tasks, never as repeats of one."""
    t = EvalRecord.read_columns(Path(spec.run_dir) / "final" / "eval.parquet",
                                ["task_seed", "success"])
    return [int(x) for x in t["task_seed"]], [float(x) for x in t["success"]]


def _pooled(specs: list[RunSpec]) -> tuple[list, list[float]]:
    ids, values = [], []
    for s in specs:
        t, v = _final_episodes(s)
        ids += [(s.seed, x) for x in t]
        values += v
    return ids, values


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
    """One result per (experiment, H*, method) with a final evaluation, methods in the
    tables' order; seeds pooled (task ids carry the seed)."""
    groups: dict[tuple, list[RunSpec]] = {}
    for s in specs:
        if (Path(s.run_dir) / "final" / "eval.parquet").exists():
            groups.setdefault((s.experiment, s.horizon, s.method), []).append(s)
    out = []
    order = {m: i for i, m in enumerate(METHODS)}
    for (exp, h, method), runs in sorted(groups.items(),
                                         key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]])):
        ids, values = _pooled(runs)
        base = groups.get((exp, h, "base"))
        vs_base = None
        if method != "base" and base:
            base_runs = [b for b in base if b.seed in {r.seed for r in runs}]
            if {b.seed for b in base_runs} == {r.seed for r in runs}:
                vs_base = paired_by_task((ids, values), _pooled(base_runs))
        out.append(MethodResult(exp, h, method, len(runs), len(set(ids)), mean_ci(values),
                                vs_base, _train_reward(runs)))
    return out


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
    """The first page's table: header and rows (success and differences x100)."""
    header = ["Experiment", "H*", "Method", "Seeds x tasks", "Held-out success [95% CI]",
              "Minus base [95% CI]", "Train reward first -> last (k gens)"]
    rows = []
    for r in results:
        s = r.success
        diff = "–" if r.vs_base is None else (
            f"{100 * r.vs_base.mean:+.1f} [{100 * r.vs_base.lo:+.1f}, {100 * r.vs_base.hi:+.1f}]"
            + (" *" if r.vs_base.excludes_zero else ""))
        train = "–" if r.train_reward is None else (
            f"{r.train_reward[0]:.3f} -> {r.train_reward[1]:.3f}")
        rows.append([r.experiment, str(r.horizon), LABELS.get(r.method, r.method),
                     f"{r.seeds} x {r.tasks // max(1, r.seeds)}",
                     f"{100 * s.mean:.1f} [{100 * s.lo:.1f}, {100 * s.hi:.1f}]", diff, train])
    return header, rows


def headline(results: list[MethodResult]) -> str:
    """One sentence per trained method and H*: its difference to base and whether the CI
    excludes zero (the claim the run supports, or that it is inside the noise)."""
    lines = []
    for r in results:
        if r.vs_base is None:
            continue
        d = r.vs_base
        verdict = ("better than base" if d.lo > 0 else "worse than base" if d.hi < 0
                   else "inside the noise")
        lines.append(f"{LABELS.get(r.method, r.method)} at H*={r.horizon} "
                     f"({r.experiment}): {100 * d.mean:+.1f} points vs base "
                     f"[{100 * d.lo:+.1f}, {100 * d.hi:+.1f}] over {r.tasks} tasks: {verdict}.")
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
