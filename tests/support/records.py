"""Typed records for tests that craft a generation's files by hand."""

from __future__ import annotations

from pathlib import Path

from esopt.es.noise import noise_fingerprint
from esopt.es.strategy import ES
from esopt.pipeline.records import RewardRow, RewardTable


def reward_table(spec, generation: int, fitness, names: list[str],
                 fingerprints: list[str] | None = None, tasks: int = 2) -> RewardTable:
    """The reward table of `generation` of `spec` with the given fitness per direction, as
    reduce writes it: the run's direction seeds and their noise fingerprints over `names`
    (unless `fingerprints` says otherwise)."""
    directions = ES(spec.es).ask(ES(spec.es).state_at(generation))
    fingerprints = fingerprints or [noise_fingerprint(d.seed, names) for d in directions]
    return RewardTable(tuple(RewardRow(
        generation=generation, direction=d.index, direction_seed=d.seed, sign=d.sign,
        sigma=d.sigma, fitness=float(f), failed=f != f, failed_episodes=int(f != f),
        success=0.0, task_seeds=list(range(tasks)), task_rewards=[float(f)] * tasks,
        task_failed=[False] * tasks, turns=1.0, prompt_tokens=10, completion_tokens=4,
        wall_s=1.0, worker="test", worker_load_s=0.0, worker_shard=[d.index],
        peak_rss_mb=0.0, peak_memory_mb=0.0, generate_s=1.0, flops=0.0,
        noise_fingerprint=fp)
        for d, f, fp in zip(directions, fitness, fingerprints, strict=True)))


def write_reward_table(spec, path: str | Path, fitness, names: list[str],
                       fingerprints: list[str] | None = None, generation: int = 0) -> str:
    """reward_table(...) written where the update stage reads it; returns the path."""
    reward_table(spec, generation, fitness, names, fingerprints).write(path, spec)
    return str(path)


def write_eval_file(path: str | Path, episodes, **summary) -> Path:
    """An evaluation file of `episodes` (a pyarrow table, or columns as a dict) whose summary
    has the given fields and neutral values for the others (accounting the report does not
    read in these tests)."""
    import pyarrow as pa

    from esopt.pipeline.records import EvalRecord, EvalSummary

    table = episodes if isinstance(episodes, pa.Table) else pa.table(episodes)
    per_repeat = summary.get("per_repeat", [0.0])
    fields = {"experiment": "sudoku", "horizon": 1, "method": "base", "seed": 0,
              "generation": 0, "success_mean": sum(per_repeat) / len(per_repeat),
              "success_std": 0.0, "failed": 0, "reward_mean": 0.0, "per_repeat": per_repeat,
              "peak_rss_mb": 0.0, "peak_memory_mb": 0.0, "wall_s": 0.0, "load_s": 0.0,
              "checkpoint_sha256": None, **summary}
    return EvalRecord(EvalSummary(**fields), table).write(path)


def eval_summary_json(**fields) -> str:
    """An evaluation file's `summary` metadata: a complete EvalSummary (the record reads
    every field) with placeholder values for what a report test does not set."""
    import dataclasses
    import json

    from esopt.pipeline.records import EvalSummary

    defaults = dict(experiment="sudoku", horizon=1, method="base", seed=0, generation=0,
                    success_mean=0.0, success_std=0.0, failed=0, reward_mean=0.0,
                    per_repeat=[0.0], peak_rss_mb=0.0, peak_memory_mb=0.0, wall_s=0.0,
                    load_s=0.0, checkpoint_sha256=None)
    return json.dumps(dataclasses.asdict(EvalSummary(**{**defaults, **fields})))


def update_manifest(**fields):
    """An UpdateManifest with neutral values for what a test does not set."""
    from esopt.pipeline.records import UpdateManifest

    defaults = dict(generation=1, parent_sha256="p", seeds=[], signs=[], weights=[],
                    excluded=[], sigma=1e-3, alpha=1e-3, scale=0.0, subspaces=[], rank=None,
                    rewards=[], failed_directions=[], config={}, identity="",
                    update_wall_s=0.0, load_s=0.0, peak_rss_mb=0.0, peak_memory_mb=0.0)
    return UpdateManifest(**{**defaults, **fields})
