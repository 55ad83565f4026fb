"""An ES run's ledger, from the files its generations wrote (RL and async runs write
theirs as they train: esopt.pipeline.rl, esopt.pipeline.async_run).

One `LedgerRow` per generation: the directions' generation and noise seconds, FLOPs,
turns and peak memory, the spread of their fitness (mean, std, min, max over the finite
ones, weighted by episodes), the update's time and memory, and the diagnostics: directions
tied on fitness, the realised update where the weights are served (its norm, cosine with
the float32 update, weights left unchanged: measured by the update stage), the reward split
by the environment's components, and the diversity of the directions' outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from esopt.pipeline.diagnostics import (
    components_json,
    distinct_completions,
    mean_components,
    tied_fraction,
)
from esopt.pipeline.lineage import generation_dir, update_record_path
from esopt.pipeline.records import RewardTable, UpdateManifest
from esopt.pipeline.spec import ES_METHODS, RunSpec
from esopt.runtime.ledger import Ledger, reward_spread


def generation_wall_s(rewards: RewardTable, update: UpdateManifest) -> float:
    """Wall-clock of an ES generation from what its jobs measured: the shards run in
    parallel, each loading the model once and scoring its directions one after another, so
    the fan-out takes its slowest shard (load + its directions' seconds); the update job
    follows. Queue waits and job start-up outside the measured code are not in it."""
    shard_s: dict = {}
    for row in rewards.rows:
        shard_s[row.worker] = shard_s.get(row.worker, float(row.worker_load_s)) + row.wall_s
    return max(shard_s.values(), default=0.0) + float(update.update_wall_s)


def es_ledger(spec: RunSpec, out: str | Path) -> Path:
    """Write the ledger of an ES run (one row per generation) to `out`."""
    if spec.method not in ES_METHODS:
        raise ValueError(f"{spec.run_dir}: not an ES run")
    ledger = Ledger(spec.run_dir, spec.method)
    for g in range(spec.generations):
        t = RewardTable.read(generation_dir(spec, g) / "rewards.parquet", spec)
        update = UpdateManifest.read(update_record_path(spec, g + 1))
        generate = float(np.sum(t.column("generate_s")))
        n_episodes = [len(s) for s in t.column("task_seeds")]
        ledger.end_step(
            g + 1, peak_memory_mb=max(max(t.column("peak_memory_mb")), update.peak_memory_mb),
            flops=float(np.sum(t.column("flops"))),
            wall_s=generation_wall_s(t, update),
            load_s=sum(dict(zip(t.column("worker"), t.column("worker_load_s"),
                                strict=True)).values()) + update.load_s,
            generate_s=generate, score_s=0.0,
            update_s=update.update_wall_s - update.load_s,
            noise_s=float(np.sum(t.column("wall_s"))) - generate, save_s=0.0,
            flops_generate=float(np.sum(t.column("flops"))), flops_score=0.0, flops_train=0.0,
            episodes=int(np.sum(n_episodes)),
            **reward_spread(t.fitness, n_episodes),
            success=float(np.average(t.column("success"), weights=n_episodes)),
            turns=float(np.average(t.column("turns"), weights=n_episodes)),
            tokens=int(np.sum(t.column("completion_tokens"))),
            # Environment errors: failed episodes, and the directions the update excluded.
            failed_episodes=int(np.sum(t.column("failed_episodes"))),
            excluded_directions=len(update.excluded),
            **generation_diagnostics(t.fitness, update.weights,
                                     [json.loads(c) for c in t.column("reward_components")],
                                     n_episodes, t.column("completion_digests")),
            intended_norm=update.intended_norm, realised_norm=update.realised_norm,
            realised_cosine=update.realised_cosine,
            unchanged_fraction=update.unchanged_fraction)
    return ledger.write(out, spec.to_json())


def generation_diagnostics(fitness, weights, components, episodes, digests) -> dict:
    """The ledger's diagnostics of one generation (ES or async update) from its directions:
    fitness ties, whether the update had any signal, the reward parts (episode-weighted
    over directions) and the diversity of their outputs."""
    return {"tied_fraction": tied_fraction(fitness),
            "zero_signal": not any(weights),
            "reward_components": components_json(mean_components(components, episodes)),
            "distinct_completions": distinct_completions(digests)}
