"""async_es as one coordinator job: the whole deterministic schedule in one process.

The staleness schedule (esopt.es.async_es: stragglers or natural asynchrony) is a pure
function of the config, so the job is reproducible bit for bit: each direction is scored
when dispatched, on the theta of its dispatch version and that version's shared tasks (as
a worker holding theta_v would), and its result delivered at its arrival update. Kept
checkpoints go to {run}/async/gen{k:03d} (manifest: the cohort's seeds, weights, dispatch
versions, lags, discarded results), the ledger to {run}/ledger.parquet (with the stale
results each update used), the schedule to {run}/async/schedule.json.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from esopt.backends.factory import load_policy
from esopt.es.async_es import run_async, step_record
from esopt.es.noise import NOISE_SPEC
from esopt.es.strategy import ES
from esopt.pipeline.diagnostics import episode_components, mean_components, trajectory_digest
from esopt.pipeline.ledgers import generation_diagnostics
from esopt.pipeline.objective import episodes_fitness, score_direction
from esopt.pipeline.spec import RunSpec
from esopt.runtime.atomic import write_json_atomic
from esopt.runtime.ledger import Ledger, ModelShape, reward_spread, rollout_flops
from esopt.runtime.memory import peak_memory_mb


def train_async(spec: RunSpec, out_dir: str, threads: int = 1, ledger_path: str | None = None
                ) -> list[dict]:
    """Run the coordinator; returns the per-update records."""
    import torch

    torch.set_num_threads(threads)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clock = [time.perf_counter()]  # the end of the last update (first: before loading)
    policy, load_s = load_policy(spec.model, spec.backend, spec.serving_dtype, spec.runtime)
    shape = ModelShape.of_policy(policy)
    es, kept = ES(spec.es), set(spec.kept_generations())
    ledger = Ledger(spec.run_dir, spec.method)
    parent = {"sha": policy.checkpoint_sha256}
    stats: dict = {}
    fitness: dict[tuple[int, int], float] = {}  # (version, index) -> the direction's fitness
    records: list[dict] = []

    def score(direction, version):
        t0 = time.perf_counter()
        episodes, generate_s = score_direction(policy, spec, version, direction)
        r = episodes_fitness(episodes, spec.failed_episode_reward)
        s = stats.setdefault(version, {"generate_s": 0.0, "wall_s": 0.0, "flops": 0.0,
                                       "episodes": 0, "rewards": [], "success": [],
                                       "turns": [], "tokens": 0})
        fitness[(version, direction.index)] = r
        s["generate_s"] += generate_s
        s.setdefault("failed", []).append(sum(bool(e.failed) for e in episodes))
        s["wall_s"] += time.perf_counter() - t0
        s["flops"] += rollout_flops(shape, episodes)
        s["episodes"] += len(episodes)
        s["rewards"].append(r)
        s["success"] += [e.success for e in episodes]
        s["turns"] += [len(e.turns) for e in episodes]
        s["tokens"] += sum(t.completion_tokens for e in episodes for t in e.turns)
        s.setdefault("components", []).append(mean_components(
            [episode_components(t.info for t in e.turns) for e in episodes]))
        s.setdefault("sizes", []).append(len(episodes))
        s.setdefault("digests", []).append(
            [trajectory_digest([t.completion for t in e.turns]) for e in episodes])
        return r

    def apply(step, update):
        t0 = time.perf_counter()
        measured = policy.apply(update)
        record = {"generation": step.version + 1, "seeds": list(update.seeds),
                  "weights": list(update.weights), "excluded": list(update.excluded),
                  "sigma": update.sigma, "alpha": update.alpha, "scale": update.scale,
                  **step_record(step)}
        records.append(record)
        if step.version + 1 in kept:
            manifest = policy.save(out / f"gen{step.version + 1:03d}", {
                **record, "parent_sha256": parent["sha"], "noise_spec": NOISE_SPEC,
                "config": json.loads(spec.to_json())})
            parent["sha"] = manifest["sha256"]
        else:
            parent["sha"] = None  # not saved: the lineage goes through the records
        s = stats.get(step.version, {})
        # One process scores and updates in turn: the update's wall-clock is the time
        # since the previous one ended.
        now = time.perf_counter()
        wall_s, clock[0] = now - clock[0], now
        ledger.end_step(step.version + 1, peak_memory_mb=peak_memory_mb(), wall_s=wall_s,
                        flops=s.get("flops", 0.0), load_s=load_s if not step.version else 0.0,
                        generate_s=s.get("generate_s", 0.0),
                        noise_s=s.get("wall_s", 0.0) - s.get("generate_s", 0.0),
                        update_s=time.perf_counter() - t0, score_s=0.0, save_s=0.0,
                        flops_generate=s.get("flops", 0.0), flops_score=0.0, flops_train=0.0,
                        episodes=s.get("episodes", 0),
                        **reward_spread(s.get("rewards", [])),
                        success=float(np.mean(s["success"])) if s.get("success") else 0.0,
                        turns=float(np.mean(s["turns"])) if s.get("turns") else 0.0,
                        tokens=s.get("tokens", 0),
                        failed_episodes=sum(e for e in s.get("failed", [])),
                        excluded_directions=len(update.excluded),
                        dispatched=record["dispatched"], discarded=len(record["discarded"]),
                        mean_lag=float(np.mean(record["lags"])) if record["lags"] else math.nan,
                        accepted=len(record["lags"]), stale_accepted=step.stale,
                        max_lag_used=max(record["lags"], default=0),
                        # Ties among the results the update used; parts and diversity
                        # over the directions scored at this version (its tasks).
                        **generation_diagnostics(
                            [fitness[(d.version, d.index)] for d in step.accepted],
                            update.weights, s.get("components", []), s.get("sizes", []),
                            s.get("digests", [])),
                        **({} if measured is None else {
                            k: v for k, v in measured.to_dict().items() if k != "parameters"}))

    run_async(es, spec.asynchrony, score, apply)
    write_json_atomic(out / "schedule.json", records, indent=1, sort_keys=False)
    if ledger_path:
        ledger.write(ledger_path, spec.to_json())
    return records
