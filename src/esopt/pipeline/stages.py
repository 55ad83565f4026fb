"""The per-generation stages of an ES run, one function each; `esopt stage ...` calls them.

Per generation t of a run:
  evaluate_directions: G perturbed policies, each on the generation's shared tasks
                       -> gen{t}/directions/{i:03d}.parquet (DirectionResult, one per direction)
  reduce_rewards:      -> gen{t}/rewards.parquet (RewardTable: one row per direction)
  update_checkpoint:   checkpoint t + rewards t -> checkpoint t+1 + update.json (UpdateManifest)
and for kept checkpoints, evaluate_checkpoint -> eval/gen{t}.parquet (EvalRecord).

A stage that resumes (the directions stage skips directions already scored) trusts only
files of this run's identity, scored on this checkpoint: anything else (another config,
another parent, a truncated file) is recomputed, and the log says which and why.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from submitit.helpers import Checkpointable

from esopt.agent.evaluate import evaluate
from esopt.agent.trajectories import episodes_table
from esopt.backends.factory import load_policy
from esopt.backends.hf import served_dtypes
from esopt.envs.base import make_env
from esopt.es.apply import add_update_
from esopt.es.noise import NOISE_SPEC, noise_fingerprint
from esopt.es.strategy import ES
from esopt.pipeline import objective
from esopt.pipeline.lineage import check_lineage, direction_path
from esopt.pipeline.records import (
    DirectionResult,
    EvalRecord,
    EvalSummary,
    RecordError,
    RewardRow,
    RewardTable,
    UpdateManifest,
    finite_or_none,
    identity_hash,
)
from esopt.pipeline.spec import ES_METHODS, RunSpec
from esopt.runtime.atomic import write_json_atomic
from esopt.runtime.checkpoint import (
    MANIFEST_NAME,
    check_noise_lineage,
    read_master,
    write_checkpoint,
)
from esopt.runtime.fanout import map_shards
from esopt.runtime.ledger import ModelShape, rollout_flops
from esopt.runtime.memory import peak_memory_mb, peak_rss_mb
from esopt.runtime.progress import Progress

log = logging.getLogger(__name__)


def scored_direction(spec: RunSpec, generation: int, index: int, checkpoint_sha: str | None,
                     out_dir: str | Path) -> bool:
    """Whether direction `index` already has a valid result: a complete record of this
    run's identity, this generation and direction, scored on this checkpoint. A file that
    is not is removed (so it is recomputed), with the reason logged."""
    path = direction_path(out_dir, index)
    if not path.exists():
        return False
    try:
        d = DirectionResult.read(path, spec)
        stale = [f"{what} {have} != {want}" for what, have, want in (
            ("generation", d.generation, generation), ("direction", d.direction, index),
            ("checkpoint", d.checkpoint_sha256, checkpoint_sha)) if have != want]
        if stale:
            raise RecordError(f"{path}: scored under another {', '.join(stale)}")
    except RecordError as e:
        log.warning("recomputing direction %d: %s", index, e)
        path.unlink(missing_ok=True)
        return False
    return True


def eval_direction_shard(spec_json: str, generation: int, checkpoint: str, checkpoint_sha,
                         out_dir: str, indices: list[int], threads: int) -> list[int]:
    """Worker: load the checkpoint once (verifying its weights), then score each direction
    of the shard that has no valid file yet (so a requeued or rerun shard resumes where it
    stopped)."""
    import torch

    torch.set_num_threads(threads)
    spec = RunSpec.from_json(spec_json)
    todo = [i for i in indices
            if not scored_direction(spec, generation, i, checkpoint_sha, out_dir)]
    if not todo:
        return []
    check_noise_lineage(checkpoint)
    policy, load_s = load_policy(checkpoint, spec.backend, spec.serving_dtype, spec.runtime)
    if policy.checkpoint_sha256 != checkpoint_sha:
        raise RecordError(f"{checkpoint}: weights sha256 {policy.checkpoint_sha256}, but the "
                          f"generation was planned on {checkpoint_sha}")
    es = ES(spec.es)
    directions = es.ask(es.state_at(generation))
    worker = f"{socket.gethostname()}:{os.getpid()}"
    shape = ModelShape.of_policy(policy)
    names = policy.parameter_names
    progress = Progress(len(todo), f"gen {generation:03d} shard {indices}", "direction")
    per_batch = objective.population_batch(policy, spec)
    for batch in [todo[k:k + per_batch] for k in range(0, len(todo), per_batch)]:
        t0 = time.perf_counter()
        scored = objective.score_directions(policy, spec, generation,
                                            [directions[i] for i in batch])
        wall_s = (time.perf_counter() - t0) / len(batch)  # shared equally by the batch
        for i, (episodes, generate_s) in zip(batch, scored, strict=True):
            d = directions[i]
            DirectionResult(
                generation=generation, direction=i, direction_seed=d.seed, sign=d.sign,
                sigma=d.sigma, checkpoint_sha256=checkpoint_sha, noise_spec=NOISE_SPEC,
                noise_fingerprint=noise_fingerprint(d.seed, names), worker=worker,
                worker_shard=tuple(indices), worker_load_s=load_s, direction_wall_s=wall_s,
                generate_s=generate_s, flops=rollout_flops(shape, episodes),
                peak_rss_mb=peak_rss_mb(), peak_memory_mb=peak_memory_mb(policy),
                episodes=episodes_table(episodes),
            ).write(direction_path(out_dir, i), spec)
            progress.update()
    return todo


class DirectionShard(Checkpointable):
    """eval_direction_shard as a submitit job that SLURM may preempt or time out: on the
    signal, submitit requeues the same call, which skips the directions already written."""

    def __call__(self, *args) -> list[int]:
        return eval_direction_shard(*args)


def evaluate_directions(spec: RunSpec, generation: int, checkpoint: str, out_dir: str,
                        marker: str) -> None:
    """Score every direction of a generation that has no valid file yet, fanned out in
    shards; the checkpoint must be generation `generation` of this run's lineage."""
    rt = spec.runtime
    sha = check_lineage(spec, generation, checkpoint)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    g = spec.es.population_size
    missing = [i for i in range(g) if not scored_direction(spec, generation, i, sha, out_dir)]
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
               [(spec.to_json(), generation, checkpoint, sha, out_dir, s,
                 int(rt.get("threads_per_worker", 1))) for s in shards],
               cluster=cluster, folder=Path(out_dir).parent / "submitit",
               timeout_min=int(rt.get("timeout_min", 60)), slurm=rt.get("slurm"),
               poll_s=rt.get("poll_s") if cluster == "slurm" else None,
               on_poll=lambda: progress.update(
                   sum(direction_path(out_dir, i).exists() for i in missing) - progress.done))
    absent = [i for i in range(g) if not direction_path(out_dir, i).exists()]
    if absent:
        raise RuntimeError(f"directions {absent} have no result file")
    write_json_atomic(marker, {"generation": generation, "directions": g,
                               "evaluated_now": missing, "checkpoint_sha256": sha,
                               "wall_s": time.perf_counter() - t0}, indent=None)


def reduce_rewards(spec: RunSpec, generation: int, directions_dir: str, out: str) -> RewardTable:
    """One row per direction: its fitness (mean episode reward) and accounting. Every
    direction file must be this run's and this generation's, scored on one checkpoint."""
    results = [DirectionResult.read(direction_path(directions_dir, i), spec)
               for i in range(spec.es.population_size)]
    for i, d in enumerate(results):
        if (d.generation, d.direction) != (generation, i):
            raise RecordError(f"{direction_path(directions_dir, i)}: generation "
                              f"{d.generation} direction {d.direction}, expected {generation} "
                              f"direction {i}")
    parents = {d.checkpoint_sha256 for d in results}
    if len(parents) > 1:
        raise RecordError(f"{directions_dir}: directions scored on different checkpoints "
                          f"{sorted(map(str, parents))}")
    table = RewardTable(tuple(RewardRow.of(d, spec.failed_episode_reward) for d in results))
    table.write(out, spec)
    r = np.array(table.fitness)
    failed = [row.direction for row in table.rows if row.failed]
    if failed:
        log.warning("%s gen %03d: direction(s) %s had %d failed episode(s) (environment "
                    "errors); %s", spec.run_dir, generation, failed,
                    sum(table.column("failed_episodes")),
                    "excluded from the update" if spec.failed_episode_reward is None else
                    f"failed episodes scored {spec.failed_episode_reward}")
    finite = np.isfinite(r).any()
    log.info("%s gen %03d: fitness mean %.4f std %.4f (finite), success %.3f, sigma %.3g, "
             "direction time %.1fs", spec.run_dir, generation,
             np.nanmean(r) if finite else float("nan"), np.nanstd(r) if finite else float("nan"),
             np.mean(table.column("success")), table.rows[0].sigma, sum(table.column("wall_s")))
    return table


def update_checkpoint(spec: RunSpec, generation: int, checkpoint: str, rewards: str,
                      out_dir: str, record: str | None = None) -> UpdateManifest:
    """Checkpoint t+1 = checkpoint t + the update of generation t; writes its manifest into
    the checkpoint and, with `record`, beside it (update.json); returns it."""
    t0 = time.perf_counter()
    table = RewardTable.read(rewards, spec)
    es = ES(spec.es)
    state = es.state_at(generation)
    expected = [d.seed for d in es.ask(state)]
    if table.column("direction_seed") != expected:
        raise RecordError(f"{rewards}: direction seeds do not match generation {generation} "
                          "of this run's config")
    update, _ = es.tell(state, table.fitness)
    parent = check_lineage(spec, generation, checkpoint)
    check_noise_lineage(checkpoint)
    t_load = time.perf_counter()
    if (Path(checkpoint) / MANIFEST_NAME).is_file():
        # An esopt checkpoint holds exactly the float32 master: update the file's tensors
        # (the backends' own arithmetic), no model, no engine, no transformers import.
        # read_master verifies the weights against the manifest first.
        master, policy = read_master(checkpoint), None
        names = list(master)
    else:  # a base model in another layout (sharded, bf16): the backend reads it
        policy, _ = load_policy(checkpoint, spec.backend, spec.serving_dtype, spec.runtime)
        names = policy.parameter_names
        parent = policy.checkpoint_sha256
    load_s = time.perf_counter() - t_load
    check_fingerprints(table, names, rewards)
    if policy is not None:
        stats = policy.apply(update)
    else:
        stats = add_update_(master, update, served_dtypes(
            spec.serving_dtype, {n: t.shape for n, t in master.items()}))
    measured = stats.to_dict() if stats is not None else {}
    manifest = UpdateManifest(
        generation=generation + 1, parent_sha256=parent,
        seeds=list(update.seeds), signs=list(update.signs), weights=list(update.weights),
        excluded=list(update.excluded), sigma=update.sigma, alpha=update.alpha,
        scale=update.scale, subspaces=[asdict(s) for s in update.subspaces], rank=update.rank,
        full_rank_vectors=update.full_rank_vectors,
        intended_norm=measured.get("intended_norm"),
        realised_norm=measured.get("realised_norm"),
        realised_cosine=measured.get("realised_cosine"),
        unchanged_fraction=measured.get("unchanged_fraction"),
        rewards=finite_or_none(table.fitness),
        failed_directions=[r.direction for r in table.rows if r.failed],
        config=spec.config_dict(), identity=identity_hash(spec.identity_json()),
        update_wall_s=time.perf_counter() - t0, load_s=load_s,
        peak_rss_mb=peak_rss_mb(), peak_memory_mb=peak_memory_mb(policy))
    if policy is not None:
        written = policy.save(out_dir, manifest.to_dict())
    else:
        written = write_checkpoint(out_dir, master, manifest=manifest.to_dict(),
                                   files_from=checkpoint)
    manifest = UpdateManifest.from_dict(written)
    if record is not None:
        manifest.write(record)
    return manifest


def check_fingerprints(table: RewardTable, names: list[str], source: str) -> None:
    """Refuse to apply noise that differs from the noise the directions were scored with
    (another noise spec, or a generator that draws other bits on the scoring machine)."""
    for i, (seed, fp) in enumerate(zip(table.column("direction_seed"),
                                       table.column("noise_fingerprint"), strict=True)):
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
    from esopt.agent.evaluate import task_seeds

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
                        env_overrides: dict | None = None) -> EvalSummary:
    """Held-out evaluation of one checkpoint -> per-episode Parquet; returns the summary.

    `env_overrides` changes environment options for this evaluation only (a skill text,
    the training data for skill distillation). A checkpoint of an ES run's lineage is
    checked against it first; every checkpoint's weights are verified when loaded."""
    import torch

    torch.set_num_threads(int(spec.runtime.get("eval_threads", torch.get_num_threads())))
    t0 = time.perf_counter()
    if spec.method in ES_METHODS and generation > 0:
        check_lineage(spec, generation, checkpoint)
    policy, load_s = load_policy(checkpoint, spec.backend, spec.serving_dtype, spec.runtime)
    env_kwargs = {**spec.eval_env_kwargs, **(env_overrides or {})}
    table, summary = evaluate(policy, spec.env, env_kwargs,
                              eval_tasks(spec.env, env_kwargs, spec.eval_tasks),
                              spec.eval_repeats, spec.eval_decoder, seed=spec.seed)
    record = EvalRecord(EvalSummary(
        experiment=spec.experiment, horizon=spec.horizon, method=spec.method, seed=spec.seed,
        generation=generation, success_mean=summary.success_mean,
        success_std=summary.success_std, failed=summary.failed,
        reward_mean=summary.reward_mean, per_repeat=list(summary.per_repeat),
        peak_rss_mb=peak_rss_mb(), peak_memory_mb=peak_memory_mb(policy),
        wall_s=time.perf_counter() - t0, load_s=load_s,
        checkpoint_sha256=policy.checkpoint_sha256), table)
    record.write(out, spec)
    log.info("%s eval gen %03d: success %.3f +- %.3f, %d of %d episodes failed", spec.run_dir,
             generation, summary.success_mean, summary.success_std, summary.failed,
             summary.episodes)
    if summary.failed:
        log.warning("%s eval gen %03d: %d episode(s) failed (environment errors): counted "
                    "as unsuccessful and reported as failed", spec.run_dir, generation,
                    summary.failed)
    return record.summary

