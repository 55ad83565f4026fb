"""The Agentic RL baselines as pipeline runs.

An RL run (grpo, grpo_b, ppo) is one job: load the base model, take `rl.steps` optimiser
steps, and write the kept checkpoints (the same `gen{k:03d}` numbering as ES generations,
so evaluation, curves and tables treat both alike), the run's trajectories and its
ledger. A killed RL job restarts from the base model: unlike an ES generation, an RL
step's state (optimiser moments, PPO's critic) is not in a checkpoint.

Its ledger (`ledger.parquet`, one `LedgerRow` per step; esopt.pipeline.ledgers builds an
ES run's) is what Table 1's memory column, Table 2 and Figure 7 read.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from esopt.agent.evaluate import task_seeds
from esopt.agent.trajectories import episodes_table
from esopt.es.seeds import mix
from esopt.pipeline.spec import RL_METHODS, RunSpec
from esopt.runtime.atomic import write_parquet_atomic
from esopt.runtime.ledger import NO_SPREAD, Ledger
from esopt.runtime.memory import peak_memory_mb
from esopt.runtime.progress import Progress

log = logging.getLogger(__name__)

LEDGER = "ledger.parquet"
TRAJECTORIES = "trajectories.parquet"


def make_trainer(spec: RunSpec, policy):
    """The RL trainer of the run's method, configured from spec.rl."""
    from esopt.baselines.grpo import GRPOConfig, GRPOTrainer
    from esopt.baselines.ppo import PPOConfig, PPOTrainer
    from esopt.envs.base import make_env

    rl = spec.rl
    common = dict(lr=rl.lr, beta=rl.beta, clip_eps=rl.clip_eps, micro_batch=rl.micro_batch,
                  train_decoder=spec.train_decoder, seed=spec.seed)
    if spec.method in ("grpo", "grpo_b"):
        # dr_grpo's constant: the policy tokens an episode may write (every turn's budget).
        turns = getattr(make_env(spec.env, **spec.env_kwargs), "max_turns", 1)
        return GRPOTrainer(policy, GRPOConfig(
            group_size=rl.group_size, loss_type=rl.loss_type,
            max_completion_length=turns * spec.train_decoder.max_new_tokens, **common))
    if spec.method == "ppo":
        return PPOTrainer(policy, PPOConfig(episodes_per_task=rl.group_size, **common))
    raise ValueError(f"method {spec.method!r} is not an RL method {list(RL_METHODS)}")


def rl_tasks(spec: RunSpec, step: int, num_tasks: int | None = None) -> list[int]:
    """Step k's training tasks. An environment over a fixed problem file (`num_tasks`
    problems: the math file's 400 records) trains in epochs: each problem once per epoch,
    in an order seeded by (run seed, epoch), steps taking consecutive slices of it (an
    epoch boundary may fall inside a step). Generated tasks (no file) are drawn by hash,
    as ES generations draw them (disjoint from the held-out ones)."""
    k = spec.rl.tasks_per_step
    if num_tasks is None:
        return task_seeds(f"train/{spec.seed}/{step}", k)
    out = []
    for position in range(step * k, (step + 1) * k):
        epoch, index = divmod(position, num_tasks)
        out.append(int(epoch_order(spec.seed, epoch, num_tasks)[index]))
    return out


@functools.lru_cache(maxsize=4)
def epoch_order(seed: int, epoch: int, num_tasks: int) -> tuple[int, ...]:
    """The problems of an epoch, a permutation of range(num_tasks) seeded by (seed, epoch)."""
    rng = np.random.default_rng(mix("rl-epoch", seed, epoch))
    return tuple(int(i) for i in rng.permutation(num_tasks))


def training_task_count(spec: RunSpec) -> int | None:
    """How many problems the training data holds (an environment with indexed tasks:
    a problem file), or None for generated tasks."""
    from esopt.envs.base import make_env

    env = make_env(spec.env, **spec.env_kwargs)
    return env.num_tasks if getattr(env, "indexed_tasks", False) else None


def train_rl(spec: RunSpec, out_dir: str | Path, threads: int = 2) -> Path:
    """Train one RL run; returns the ledger path. Writes out_dir/gen{k:03d}/ (kept steps),
    out_dir/../trajectories.parquet and out_dir/../ledger.parquet."""
    import torch

    from esopt.backends.factory import load_policy

    torch.set_num_threads(threads)
    torch.manual_seed(spec.seed)  # any random initialisation (PPO's critic)
    out_dir, run_dir = Path(out_dir), Path(spec.run_dir)
    t_run = time.perf_counter()
    policy, load_s = load_policy(spec.model, "hf", spec.serving_dtype, spec.runtime)
    parent = policy.checkpoint_sha256
    trainer = make_trainer(spec, policy)
    ledger = Ledger(spec.run_dir, spec.method)
    trajectories = []
    kept = set(spec.kept_generations())
    progress = Progress(spec.rl.steps, f"{spec.run_dir} {spec.method}", "step")
    num_tasks = training_task_count(spec)
    for k in range(spec.rl.steps):
        stats = trainer.step(spec.env, spec.env_kwargs, rl_tasks(spec, k, num_tasks))
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
            k + 1, peak_memory_mb=peak_memory_mb(policy), flops=stats["flops"], wall_s=wall_s,
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
                 row.peak_memory_mb)
        progress.update()
    meta = {"config": spec.to_json()}
    write_parquet_atomic(pa.concat_tables(trajectories, promote_options="default"),
                         run_dir / TRAJECTORIES, metadata=meta)
    return ledger.write(run_dir / LEDGER, spec.to_json())
