"""Reading a finished run's outputs: final success, evaluation curves, peak memory, the
per-turn success of the held-out episodes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from esopt.pipeline.records import EvalRecord, EvalSummary
from esopt.pipeline.spec import RunSpec
from esopt.runtime.ledger import read_ledger


def load_runs(path: str | Path) -> list[RunSpec]:
    """The run specs the workflow wrote to results/runs.json."""
    return [RunSpec.from_json(json.dumps(d)) for d in json.loads(Path(path).read_text())]


def eval_summary(path: str | Path) -> EvalSummary:
    """The summary stored in an evaluation file (its metadata)."""
    return EvalRecord.read_summary(path)


def final_summary(spec: RunSpec) -> EvalSummary:
    return eval_summary(Path(spec.run_dir) / "final" / "eval.parquet")


def correct_turns(path: str | Path) -> tuple[int, int]:
    """(correct turns, turns) over every episode of an evaluation Parquet: a Sudoku turn is
    correct when it raised the number of correctly filled cells (its move was accepted and
    wrote the solution's value into a cell that did not hold it). (0, 0) when the turns
    carry no `cells_correct` (another environment, or an older file)."""
    correct = total = 0
    seen = False
    for turns in EvalRecord.read_columns(path, ["turns"])["turns"]:
        before = 0  # no blank of a board holds its value before the first move
        for turn in turns:
            info = json.loads(turn["info"])
            now = info.get("cells_correct")
            seen |= now is not None
            total += 1
            if now is not None:
                correct += now > before
                before = now
    return (correct, total) if seen else (0, 0)


def eval_curve(spec: RunSpec, specs: Iterable[RunSpec]) -> list[tuple[int, float, float]]:
    """(generation, success mean, std over repeats) at every evaluated checkpoint.

    Generation 0 of a trained run is the base model; when the run did not evaluate it, the
    matching `base` run's evaluation is used (same model, tasks and sampling seeds).
    """
    points = {}
    for p in sorted(Path(spec.run_dir, "eval").glob("gen*.parquet")):
        s = eval_summary(p)
        points[s.generation] = (s.success_mean, s.success_std)
    if 0 not in points:
        for b in specs:
            if (b.method, b.experiment, b.horizon, b.seed) == (
                    "base", spec.experiment, spec.horizon, spec.seed):
                s = final_summary(b)
                points[0] = (s.success_mean, s.success_std)
    return [(g, m, sd) for g, (m, sd) in sorted(points.items())]


def peak_memory_mb(spec: RunSpec) -> float:
    """Peak memory of the run's training phase: the largest of its ledger's rows (ES
    direction shards and updates, RL steps), each a job measured on its own (its
    process's allocator peak plus its engine workers' own; esopt.runtime.memory);
    evaluations excluded (each method's kept checkpoints are evaluated by jobs of their
    own, which are not training). A run that does not train (the base model, an
    evaluation-only model) has its evaluations as its only phase; NaN without either."""
    ledger = ledger_path(spec)
    if spec.generations:
        return max(read_ledger(ledger)["peak_memory_mb"]) if ledger.exists() else float("nan")
    peaks = [eval_summary(p).peak_memory_mb
             for p in Path(spec.run_dir, "eval").glob("*.parquet")]
    return max(peaks) if peaks else float("nan")


def ledger_path(spec: RunSpec) -> Path:
    return Path(spec.run_dir) / "ledger.parquet"


def ledger(spec: RunSpec) -> dict[str, list]:
    """The run's ledger as columns (one row per ES generation or RL step)."""
    return read_ledger(ledger_path(spec))
