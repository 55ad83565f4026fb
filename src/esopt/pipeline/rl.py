"""The Agentic RL baselines as pipeline runs, and the resource ledger of every run.

An RL run (grpo, grpo_b, ppo) is one job: load the base model, take `rl.steps` optimiser
steps, and write the kept checkpoints (the same `gen{k:03d}` numbering as ES generations,
so evaluation, curves and tables treat both alike), the run's trajectories and its
ledger. A killed RL job restarts from the base model: unlike an ES generation, an RL
step's state (optimiser moments, the value head) is not in a checkpoint.

The ledger (`ledger.parquet`, one row per step or generation) is what Table 1's memory
column, Table 2 and Figure 7 read, for ES and RL runs alike; the training-reward figure
reads its reward spread (reward_std, reward_min, reward_max over an ES generation's
directions; NaN for an RL step, which has no population).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from esopt.agent.evaluate import task_seeds
from esopt.agent.trajectories import episodes_table, write_parquet_atomic
from esopt.pipeline.spec import ES_METHODS, RL_METHODS, RunSpec
from esopt.runtime.checkpoint import checkpoint_sha256
from esopt.runtime.ledger import NO_SPREAD, Ledger, reward_spread
from esopt.runtime.memory import peak_memory_mb
from esopt.runtime.progress import Progress

log = logging.getLogger(__name__)

LEDGER = "ledger.parquet"
TRAJECTORIES = "trajectories.parquet"


def make_trainer(spec: RunSpec, policy):
    """The RL trainer of the run's method, configured from spec.rl."""
    from esopt.baselines.grpo import GRPOConfig, GRPOTrainer
    from esopt.baselines.ppo import PPOConfig, PPOTrainer

    rl = spec.rl
    common = dict(lr=rl.lr, beta=rl.beta, clip_eps=rl.clip_eps, micro_batch=rl.micro_batch,
                  train_decoder=spec.train_decoder, seed=spec.seed)
    if spec.method in ("grpo", "grpo_b"):
        return GRPOTrainer(policy, GRPOConfig(group_size=rl.group_size, **common))
    if spec.method == "ppo":
        return PPOTrainer(policy, PPOConfig(episodes_per_task=rl.group_size, **common))
    raise ValueError(f"method {spec.method!r} is not an RL method {list(RL_METHODS)}")


def rl_tasks(spec: RunSpec, step: int) -> list[int]:
    """Step k's training tasks (same hash family as ES generations: disjoint from test)."""
    return task_seeds(f"train/{spec.seed}/{step}", spec.rl.tasks_per_step)


def train_rl(spec: RunSpec, out_dir: str | Path, threads: int = 2) -> Path:
    """Train one RL run; returns the ledger path. Writes out_dir/gen{k:03d}/ (kept steps),
    out_dir/../trajectories.parquet and out_dir/../ledger.parquet."""
    import torch

    from esopt.pipeline.stages import load_policy

    torch.set_num_threads(threads)
    torch.manual_seed(spec.seed)  # the PPO value head's initialisation
    out_dir, run_dir = Path(out_dir), Path(spec.run_dir)
    t_run = time.perf_counter()
    policy, load_s = load_policy(spec.model, spec, backend="hf")
    parent = checkpoint_sha256(spec.model)
    trainer = make_trainer(spec, policy)
    ledger = Ledger(spec.run_dir, spec.method)
    trajectories = []
    kept = set(spec.kept_generations())
    progress = Progress(spec.rl.steps, f"{spec.run_dir} {spec.method}", "step")
    for k in range(spec.rl.steps):
        stats = trainer.step(spec.env, spec.env_kwargs, rl_tasks(spec, k))
        trajectories.append(episodes_table(trainer.last_episodes, {"step": k + 1}))
        save_s = 0.0
        if k + 1 in kept:
            t0 = time.perf_counter()
            policy.save(out_dir / f"gen{k + 1:03d}", {
                "generation": k + 1, "parent_sha256": parent, "method": spec.method,
                "config": json.loads(spec.to_json()), "step": stats})
            save_s = time.perf_counter() - t0
        now = time.perf_counter()
        # Wall-clock of the step (the first also loads the model): one process, so this is
        # the run's elapsed time, whatever the phases add up to.
        wall_s, t_run = now - t_run, now
        row = ledger.end_step(
            k + 1, peak_memory_mb=peak_memory_mb(), flops=stats["flops"], wall_s=wall_s,
            load_s=load_s if k == 0 else 0.0, generate_s=stats["generate_s"],
            score_s=stats["score_s"], update_s=stats["update_s"], noise_s=0.0,
            save_s=save_s, flops_generate=stats["flops_generate"],
            flops_score=stats["flops_score"], flops_train=stats["flops_train"],
            episodes=stats["episodes"], reward_mean=stats["reward_mean"], **NO_SPREAD,
            success=stats["success"], turns=stats["turns"], tokens=stats["tokens"],
            failed_episodes=sum(e.failed for e in trainer.last_episodes),
            excluded_directions=0)
        log.info("%s step %d/%d: reward %.3f, success %.3f, turns %.2f, %.1fs "
                 "(generate %.1f, score %.1f, update %.1f), peak %.0f MB", spec.run_dir, k + 1,
                 spec.rl.steps, stats["reward_mean"], stats["success"], stats["turns"],
                 stats["generate_s"] + stats["score_s"] + stats["update_s"],
                 stats["generate_s"], stats["score_s"], stats["update_s"],
                 row["peak_memory_mb"])
        progress.update()
    meta = {"config": spec.to_json()}
    write_parquet_atomic(pa.concat_tables(trajectories, promote_options="default"),
                         run_dir / TRAJECTORIES, metadata=meta)
    return write_parquet_atomic(ledger.table(), run_dir / LEDGER, metadata=meta)


def generation_wall_s(rewards: dict, update: dict) -> float:
    """Wall-clock of an ES generation from what its jobs measured: the shards run in
    parallel, each loading the model once and scoring its directions one after another, so
    the fan-out takes its slowest shard (load + its directions' seconds); the update job
    follows. Queue waits and job start-up outside the measured code are not in it."""
    shard_s: dict = {}
    for worker, load_s, wall_s in zip(rewards["worker"], rewards["worker_load_s"],
                                      rewards["wall_s"], strict=True):
        shard_s[worker] = shard_s.get(worker, float(load_s)) + float(wall_s)
    return max(shard_s.values(), default=0.0) + float(update["update_wall_s"])


def es_ledger(spec: RunSpec, out: str | Path) -> Path:
    """The ledger of an ES run, from what its generations wrote: per generation, the
    directions' generation and noise seconds, FLOPs, turns and peak memory, the spread of
    their rewards (mean, std, min, max over the finite ones), and the update's time and
    memory."""
    if spec.method not in ES_METHODS:
        raise ValueError(f"{spec.run_dir}: not an ES run")
    run = Path(spec.run_dir)
    ledger = Ledger(spec.run_dir, spec.method)
    for g in range(spec.generations):
        t = pq.read_table(run / f"gen{g:03d}" / "rewards.parquet").to_pydict()
        update = json.loads((run / f"gen{g + 1:03d}" / "update.json").read_text())
        generate = float(np.sum(t["generate_s"]))
        n_episodes = [len(s) for s in t["task_seeds"]]
        ledger.end_step(
            g + 1, peak_memory_mb=max(max(t["peak_memory_mb"]), update["peak_memory_mb"]),
            flops=float(np.sum(t["flops"])),
            wall_s=generation_wall_s(t, update),
            load_s=sum(dict(zip(t["worker"], t["worker_load_s"], strict=True)).values())
            + update["load_s"],
            generate_s=generate, score_s=0.0,
            update_s=update["update_wall_s"] - update["load_s"],
            noise_s=float(np.sum(t["wall_s"])) - generate, save_s=0.0,
            flops_generate=float(np.sum(t["flops"])), flops_score=0.0, flops_train=0.0,
            episodes=int(np.sum(n_episodes)),
            **reward_spread(t["reward"], n_episodes),
            success=float(np.average(t["success"], weights=n_episodes)),
            turns=float(np.average(t["turns"], weights=n_episodes)),
            tokens=int(np.sum(t["completion_tokens"])),
            # Environment errors: failed episodes, and the directions the update excluded.
            failed_episodes=int(np.sum(t.get("failed_episodes", [0]))),
            excluded_directions=len(update.get("excluded", [])))
    return write_parquet_atomic(ledger.table(), out, metadata={"config": spec.to_json()})

