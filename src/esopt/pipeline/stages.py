"""The pipeline's stages, one function each; the `esopt stage ...` CLI calls them.

Per generation t of a run:
  evaluate_directions: G perturbed policies, each on the generation's shared tasks
                       -> gen{t}/directions/{i:03d}.parquet (atomic, one per direction)
  reduce_rewards:      -> gen{t}/rewards.parquet (one row per direction)
  update_checkpoint:   checkpoint t + rewards t -> checkpoint t+1 (manifest: lineage)
and for kept checkpoints, evaluate_checkpoint -> eval/gen{t}.parquet.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from submitit.helpers import Checkpointable

from esopt.agent.evaluate import evaluate, task_seeds
from esopt.agent.rollout import run_episodes
from esopt.agent.trajectories import episodes_table, write_parquet_atomic
from esopt.envs.base import make_env
from esopt.es.apply import add_update_
from esopt.es.noise import NOISE_SPEC, noise_fingerprint
from esopt.es.seeds import mix
from esopt.es.strategy import ES
from esopt.pipeline.spec import RunSpec
from esopt.runtime.checkpoint import (
    MANIFEST_NAME,
    check_noise_lineage,
    checkpoint_sha256,
    read_master,
    write_checkpoint,
)
from esopt.runtime.fanout import map_shards
from esopt.runtime.ledger import ModelShape, rollout_flops
from esopt.runtime.memory import peak_memory_mb, peak_rss_mb
from esopt.runtime.progress import Progress

log = logging.getLogger(__name__)


def load_policy(checkpoint: str, spec: RunSpec, backend: str | None = None):
    """(policy, seconds spent importing and loading): model loading is the DAG's hidden tax.

    `backend` overrides the spec's (the RL baselines train on hf whatever rolls out ES)."""
    return load_backend_policy(checkpoint, backend or spec.backend, spec.serving_dtype,
                               spec.runtime)


def load_backend_policy(checkpoint: str, backend: str, serving_dtype: str,
                        runtime: dict | None = None):
    """(policy, load seconds) of `checkpoint` on the configured backend: vllm with the
    runtime's `vllm` engine arguments, or hf on the runtime's `device` (auto: cuda when
    available) in `serving_dtype`. Every stage that serves a model loads it here."""
    t0 = time.perf_counter()
    import torch

    runtime = runtime or {}
    if backend == "vllm":
        from esopt.backends.vllm import VLLMPolicy

        policy = VLLMPolicy.load(checkpoint, serving_dtype=serving_dtype,
                                 **runtime.get("vllm", {}))
        return policy, time.perf_counter() - t0
    if backend != "hf":
        raise ValueError(f"backend: unknown {backend!r}; choose hf or vllm")

    from esopt.backends.hf import HFPolicy

    device = runtime.get("device", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = HFPolicy.load(checkpoint, serving_dtype=serving_dtype, device=device)
    return policy, time.perf_counter() - t0


def train_sampling(spec: RunSpec, generation: int):
    """Common random numbers: every direction of a generation gets the same sampling seed."""
    return replace(spec.train_decoder, seed=mix("crn", spec.seed, generation) % 2**31)


def train_tasks(spec: RunSpec, generation: int) -> list[int]:
    """The generation's tasks, shared by all its directions."""
    return task_seeds(f"train/{spec.seed}/{generation}", spec.tasks_per_direction)


def score_direction(policy, spec: RunSpec, generation: int, direction):
    """The episodes of one perturbed policy on the generation's shared tasks, and the
    seconds spent generating them (the rest of the direction's time is noise)."""
    with policy.perturbed(direction):
        t0 = time.perf_counter()
        episodes = run_episodes(policy, lambda: make_env(spec.env, **spec.env_kwargs),
                                train_tasks(spec, generation), train_sampling(spec, generation))
        return episodes, time.perf_counter() - t0


def fitness(rewards, failed, failed_reward: float | None = None) -> float:
    """A direction's fitness: the mean episode reward over its tasks. An episode whose
    environment raised has no reward: the fitness is NaN (ES.tell excludes the
    direction), or, with `failed_reward` set (es.failed_episode_reward), the failed
    episodes score that value."""
    rewards = np.asarray(rewards, dtype=np.float64)
    failed = np.asarray(failed, dtype=bool)
    if not rewards.size:
        return float("nan")
    if failed.any():
        if failed_reward is None:
            return float("nan")
        rewards = np.where(failed, float(failed_reward), rewards)
    return float(rewards.mean())


def direction_reward(episodes, failed_reward: float | None = None) -> float:
    """The fitness of a direction's episodes (see `fitness`)."""
    return fitness([e.reward for e in episodes], [e.failed for e in episodes], failed_reward)


def direction_path(out_dir: str | Path, index: int) -> Path:
    return Path(out_dir) / f"{index:03d}.parquet"


def eval_direction_shard(spec_json: str, generation: int, checkpoint: str, out_dir: str,
                         indices: list[int], threads: int) -> list[int]:
    """Worker: load the checkpoint once, then score each direction of the shard that has no
    file yet (so a requeued or rerun shard resumes where it stopped)."""
    import torch

    torch.set_num_threads(threads)
    todo = [i for i in indices if not direction_path(out_dir, i).exists()]
    if not todo:
        return []
    spec = RunSpec.from_json(spec_json)
    check_noise_lineage(checkpoint)
    policy, load_s = load_policy(checkpoint, spec)
    es = ES(spec.es)
    directions = es.ask(es.state_at(generation))
    worker = f"{socket.gethostname()}:{os.getpid()}"
    shape = ModelShape.of_policy(policy)
    names = policy.parameter_names
    progress = Progress(len(todo), f"gen {generation:03d} shard {indices}", "direction")
    per_batch = population_batch(policy, spec)
    for batch in [todo[k:k + per_batch] for k in range(0, len(todo), per_batch)]:
        # Fault injection for the fault-handling tests: a crash, or a slow direction.
        for i in batch:
            if os.environ.get("ESOPT_FAIL_DIRECTION") == str(i):
                raise RuntimeError(f"injected failure in direction {i}")
            time.sleep(float(os.environ.get("ESOPT_DIRECTION_DELAY_S", 0)))
        t0 = time.perf_counter()
        scored = score_directions(policy, spec, generation, [directions[i] for i in batch])
        # A batch's time is shared equally by its directions.
        wall_s = (time.perf_counter() - t0) / len(batch)
        for i, (episodes, generate_s) in zip(batch, scored, strict=True):
            d = directions[i]
            extra = {"generation": generation, "direction": i, "direction_seed": d.seed,
                     "sign": d.sign, "sigma": d.sigma, "worker": worker,
                     # What the update checks before applying this direction's noise.
                     "noise_spec": NOISE_SPEC,
                     "noise_fingerprint": noise_fingerprint(d.seed, names),
                     "direction_wall_s": wall_s,
                     "generate_s": generate_s,
                     "flops": rollout_flops(shape, episodes), "peak_rss_mb": peak_rss_mb(),
                     "peak_memory_mb": peak_memory_mb(),
                     "worker_load_s": load_s, "worker_shard": list(indices)}
            write_parquet_atomic(episodes_table(episodes, extra), direction_path(out_dir, i),
                                 metadata={"config": spec.to_json()})
            progress.update()
    return todo


def population_batch(policy, spec: RunSpec) -> int:
    """Directions a worker scores in one batch: runtime.population_batch, capped by what
    runtime.population_memory_mb (if > 0) holds in float32 weight sets; 1 (one at a time) unless
    the policy is a float32 HF policy on the CPU."""
    rt = spec.runtime
    want = int(rt.get("population_batch", 1))
    memory_mb = float(rt.get("population_memory_mb", 0))  # 0: no cap
    # Low-rank members hold no weight set (O(r (m + n)) per matrix): no memory cap.
    if want > 1 and memory_mb > 0 and not spec.es.rank:
        from esopt.backends.hf_population import directions_per_batch

        want = min(want, directions_per_batch(policy, memory_mb))
    if want > 1 and not population_capable(policy):
        log.warning("runtime.population_batch=%d: needs a float32 HF policy on the CPU; "
                    "scoring one direction at a time", want)
        return 1
    if want > 1 and spec.es.subspaces:
        # The population serves whole-space (full- or low-rank) perturbations only.
        log.warning("runtime.population_batch=%d: not for CoPES directions; scoring one "
                    "direction at a time", want)
        return 1
    return max(1, want)


def population_capable(policy) -> bool:
    """Whether `policy` can score several directions in one population batch: a float32 HF
    policy on the CPU (the batch holds float32 weight sets)."""
    import torch

    from esopt.backends.hf import HFPolicy

    return isinstance(policy, HFPolicy) and all(
        p.device.type == "cpu" and p.dtype == torch.float32 for p in policy.model.parameters())


def score_directions(policy, spec: RunSpec, generation: int, directions) -> list:
    """(episodes, seconds generating) of each direction: one at a time through
    `score_direction`, or, for several, all in one population batch (the same episodes)."""
    if len(directions) == 1:
        return [score_direction(policy, spec, generation, directions[0])]
    from esopt.backends.hf_population import run_population_episodes

    t0 = time.perf_counter()
    per_direction = run_population_episodes(
        policy, directions, lambda: make_env(spec.env, **spec.env_kwargs),
        train_tasks(spec, generation), train_sampling(spec, generation))
    share = (time.perf_counter() - t0) / len(directions)
    return [(episodes, share) for episodes in per_direction]


class DirectionShard(Checkpointable):
    """eval_direction_shard as a submitit job that SLURM may preempt or time out: on the
    signal, submitit requeues the same call, which skips the directions already written."""

    def __call__(self, *args) -> list[int]:
        return eval_direction_shard(*args)


def evaluate_directions(spec: RunSpec, generation: int, checkpoint: str, out_dir: str,
                        marker: str) -> None:
    """Score every direction of a generation that has no file yet, fanned out in shards."""
    rt = spec.runtime
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    g = spec.es.population_size
    missing = [i for i in range(g) if not direction_path(out_dir, i).exists()]
    if len(missing) < g:
        log.info("generation %d: %d of %d directions already scored; evaluating %s",
                 generation, g - len(missing), g, missing)
    workers = max(1, min(int(rt.get("workers", 1)), len(missing) or 1))
    shards = [missing[k::workers] for k in range(workers) if missing[k::workers]]
    cluster = rt.get("cluster", "local")
    if cluster == "local" and len(shards) == 1:
        # One local shard gains nothing from a subprocess but a second Python start-up
        # and model load; a crash still fails this job with its traceback.
        cluster = "inline"
    t0 = time.perf_counter()
    progress = Progress(len(missing), f"gen {generation:03d} directions", "direction")
    map_shards(DirectionShard(),
               [(spec.to_json(), generation, checkpoint, out_dir, s,
                 int(rt.get("threads_per_worker", 1))) for s in shards],
               cluster=cluster, folder=Path(out_dir).parent / "submitit",
               timeout_min=int(rt.get("timeout_min", 60)), slurm=rt.get("slurm"),
               poll_s=rt.get("poll_s") if cluster == "slurm" else None,
               on_poll=lambda: progress.update(
                   sum(direction_path(out_dir, i).exists() for i in missing) - progress.done))
    absent = [i for i in range(g) if not direction_path(out_dir, i).exists()]
    if absent:
        raise RuntimeError(f"directions {absent} have no result file")
    Path(marker).write_text(json.dumps({"generation": generation, "directions": g,
                                        "evaluated_now": missing,
                                        "wall_s": time.perf_counter() - t0}) + "\n")


def reduce_rewards(spec: RunSpec, generation: int, directions_dir: str, out: str) -> pa.Table:
    """One row per direction: its reward (mean episode reward) and accounting."""
    rows = []
    for i in range(spec.es.population_size):
        t = pq.read_table(direction_path(directions_dir, i)).to_pydict()
        rewards = np.asarray(t["reward"], dtype=np.float64)
        failed = [bool(f) for f in t.get("failed", [False] * len(rewards))]
        # Same fitness as the in-process run: the mean episode reward, NaN with a failure.
        rows.append({
            "generation": generation, "direction": i, "direction_seed": t["direction_seed"][0],
            "sign": t["sign"][0], "sigma": t["sigma"][0],
            "reward": fitness(rewards, failed, spec.failed_episode_reward),
            "failed": any(failed), "failed_episodes": int(sum(failed)),
            "success": float(np.mean(t["success"])), "task_seeds": t["task_seed"],
            "task_rewards": rewards.tolist(), "task_failed": failed,
            "turns": float(np.mean(t["num_turns"])),
            "prompt_tokens": int(np.sum(t["prompt_tokens"])),
            "completion_tokens": int(np.sum(t["completion_tokens"])),
            "wall_s": t["direction_wall_s"][0], "worker": t["worker"][0],
            "worker_load_s": t["worker_load_s"][0], "worker_shard": t["worker_shard"][0],
            "peak_rss_mb": t["peak_rss_mb"][0], "peak_memory_mb": t["peak_memory_mb"][0],
            "generate_s": t["generate_s"][0], "flops": float(t["flops"][0]),
            "noise_fingerprint": t.get("noise_fingerprint", [None])[0],
        })
    table = pa.Table.from_pylist(rows)
    write_parquet_atomic(table, out, metadata={"config": spec.to_json()})
    r = np.array([row["reward"] for row in rows])
    failed = [row["direction"] for row in rows if row["failed"]]
    if failed:
        log.warning("%s gen %03d: direction(s) %s had %d failed episode(s) (environment "
                    "errors); %s", spec.run_dir, generation, failed,
                    sum(row["failed_episodes"] for row in rows),
                    "excluded from the update" if spec.failed_episode_reward is None else
                    f"failed episodes scored {spec.failed_episode_reward}")
    log.info("%s gen %03d: reward mean %.4f std %.4f (finite), success %.3f, sigma %.3g, "
             "direction time %.1fs", spec.run_dir, generation,
             np.nanmean(r) if np.isfinite(r).any() else float("nan"),
             np.nanstd(r) if np.isfinite(r).any() else float("nan"),
             np.mean([row["success"] for row in rows]), rows[0]["sigma"],
             sum(row["wall_s"] for row in rows))
    return table


def update_checkpoint(spec: RunSpec, generation: int, checkpoint: str, rewards: str,
                      out_dir: str) -> dict:
    """Checkpoint t+1 = checkpoint t + the update of generation t; returns its manifest."""
    t0 = time.perf_counter()
    table = pq.read_table(rewards).sort_by("direction").to_pydict()
    es = ES(spec.es)
    state = es.state_at(generation)
    expected = [d.seed for d in es.ask(state)]
    if table["direction_seed"] != expected:
        raise ValueError(f"{rewards}: direction seeds do not match generation {generation} "
                         "of this run's config")
    update, _ = es.tell(state, table["reward"])
    check_noise_lineage(checkpoint)
    t_load = time.perf_counter()
    if (Path(checkpoint) / MANIFEST_NAME).is_file():
        # An esopt checkpoint holds exactly the float32 master: update the file's tensors
        # (the backends' own arithmetic), no model, no engine, no transformers import.
        master, policy = read_master(checkpoint), None
        names = list(master)
    else:  # a base model in another layout (sharded, bf16): the backend reads it
        policy, _ = load_policy(checkpoint, spec)
        names = policy.parameter_names
    load_s = time.perf_counter() - t_load
    check_fingerprints(table, names, rewards)
    if policy is not None:
        policy.apply(update)
    else:
        add_update_(master, update)
    manifest = {
        "generation": generation + 1, "parent_sha256": checkpoint_sha256(checkpoint),
        "seeds": list(update.seeds), "signs": list(update.signs),
        "weights": list(update.weights), "excluded": list(update.excluded),
        "sigma": update.sigma, "alpha": update.alpha, "scale": update.scale,
        "subspaces": [asdict(s) for s in update.subspaces], "rank": update.rank,
        # NaN (a failed direction) as null: the manifest stays strict JSON.
        "rewards": [r if np.isfinite(r) else None for r in table["reward"]],
        "failed_directions": [d for d, f in zip(table["direction"],
                                                table.get("failed", [False] * len(expected)),
                                                strict=True) if f],
        "config": json.loads(spec.to_json()),
        "update_wall_s": time.perf_counter() - t0, "load_s": load_s,
        "peak_rss_mb": peak_rss_mb(), "peak_memory_mb": peak_memory_mb(),
    }
    if policy is not None:
        return policy.save(out_dir, manifest)
    return write_checkpoint(out_dir, master, manifest=manifest, files_from=checkpoint)


def check_fingerprints(table: dict, names: list[str], source: str) -> None:
    """Refuse to apply noise that differs from the noise the directions were scored with
    (another noise spec, or a generator that draws other bits on the scoring machine)."""
    seeds = table["direction_seed"]
    for i, (seed, fp) in enumerate(zip(seeds, table.get("noise_fingerprint", [None] * len(seeds)),
                                       strict=True)):
        if fp is None:
            raise ValueError(f"{source}: direction {i} has no noise fingerprint (scored by an "
                             f"esopt before {NOISE_SPEC!r}); rerun the generation")
        here = noise_fingerprint(int(seed), names)
        if fp != here:
            raise ValueError(
                f"{source}: direction {i} was scored with noise fingerprint {fp}, but this "
                f"machine draws {here} for seed {seed} under {NOISE_SPEC!r}: the scoring "
                "and updating machines disagree on the noise; the update is refused")


def eval_tasks(env: str, env_kwargs: dict, count: int) -> list[int]:
    """Held-out task seeds: generated tasks hash apart from training; environments over a
    fixed problem file (`indexed_tasks`) take the first N problems in file order, each
    once: `count` is capped at the file's `num_tasks` (logged), never wrapped around it."""
    made = make_env(env, **env_kwargs)
    if not getattr(made, "indexed_tasks", False):
        return task_seeds("test", count)
    size = getattr(made, "num_tasks", None)
    if size is None:
        # Without a size the environment would wrap seeds modulo its file: repeats.
        raise ValueError(f"env {env!r} has indexed tasks but no num_tasks")
    if count > size:
        log.warning("eval.tasks = %d, but the evaluation data of %s has %d tasks: evaluating "
                    "all %d, each once", count, env, size, size)
    return list(range(min(count, size)))


def evaluate_checkpoint(spec: RunSpec, checkpoint: str, generation: int, out: str,
                        env_overrides: dict | None = None) -> dict:
    """Held-out evaluation of one checkpoint -> per-episode Parquet; returns the summary.

    `env_overrides` changes environment options for this evaluation only (a skill text,
    the training data for skill distillation)."""
    import torch

    torch.set_num_threads(int(spec.runtime.get("eval_threads", torch.get_num_threads())))
    t0 = time.perf_counter()
    policy, load_s = load_policy(checkpoint, spec)
    env_kwargs = {**spec.eval_env_kwargs, **(env_overrides or {})}
    table, summary = evaluate(policy, spec.env, env_kwargs,
                              eval_tasks(spec.env, env_kwargs, spec.eval_tasks),
                              spec.eval_repeats, spec.eval_decoder, seed=spec.seed)
    info = {"experiment": spec.experiment, "horizon": spec.horizon, "method": spec.method,
            "seed": spec.seed, "generation": generation}
    n = table.num_rows
    for k, v in info.items():
        table = table.append_column(k, pa.array([v] * n))
    summary_d = {**info, "success_mean": summary.success_mean,
                 "success_std": summary.success_std, "failed": summary.failed,
                 "reward_mean": summary.reward_mean,
                 "per_repeat": list(summary.per_repeat), "peak_rss_mb": peak_rss_mb(),
                 "peak_memory_mb": peak_memory_mb(),
                 "wall_s": time.perf_counter() - t0, "load_s": load_s,
                 "checkpoint_sha256": checkpoint_sha256(checkpoint)}
    write_parquet_atomic(table, out, metadata={"config": spec.to_json(),
                                               "summary": json.dumps(summary_d)})
    log.info("%s eval gen %03d: success %.3f +- %.3f, %d of %d episodes failed", spec.run_dir,
             generation, summary.success_mean, summary.success_std, summary.failed,
             summary.episodes)
    if summary.failed:
        log.warning("%s eval gen %03d: %d episode(s) failed (environment errors): counted "
                    "as unsuccessful and reported as failed", spec.run_dir, generation,
                    summary.failed)
    return summary_d
