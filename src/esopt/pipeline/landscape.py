"""Figure 6: the training reward on a plane through a checkpoint's weights.

Grid point (x, y) serves theta + x sigma eps_a + y sigma eps_b (HFPolicy.combined): theta
the centre checkpoint's float32 master (the base model, as the paper's Figure 6, or the
run's final checkpoint: config landscape.centre), sigma the run's sigma_0 (the scale its
directions first explored), eps_a and eps_b the project's noise (esopt.es.noise) under two
seeds fixed by the run seed. Every point plays the same training-distribution tasks with the same
sampling seed (common random numbers, as the directions of a generation do), so the
differences between points come from the weights, not from sampling luck. The grid is
odd: its centre point is the centre checkpoint itself.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from esopt.agent.evaluate import task_seeds
from esopt.agent.rollout import Episode, run_episodes
from esopt.backends.factory import load_policy
from esopt.chat import SamplingParams
from esopt.envs.base import make_env
from esopt.es.noise import NOISE_SPEC
from esopt.es.seeds import mix
from esopt.pipeline.objective import episodes_fitness
from esopt.pipeline.sections import LANDSCAPE_CENTRES
from esopt.pipeline.spec import RunSpec
from esopt.runtime.atomic import write_parquet_atomic
from esopt.runtime.progress import Progress

log = logging.getLogger(__name__)

LANDSCAPE = "landscape.parquet"


def axis_seeds(spec: RunSpec) -> tuple[int, int]:
    """Noise seeds of the plane's two axes (a, b): hashed apart from every direction seed."""
    return mix("landscape", spec.seed, "a"), mix("landscape", spec.seed, "b")


def landscape_tasks(spec: RunSpec, count: int) -> list[int]:
    """The tasks every grid point plays: the training split's hash family (disjoint from the
    held-out tasks), apart from every generation's own tasks."""
    return task_seeds(f"train/{spec.seed}/landscape", count)


def landscape_sampling(spec: RunSpec) -> SamplingParams:
    """The run's training decoder with one sampling seed for every grid point."""
    return replace(spec.train_decoder, seed=mix("landscape", spec.seed, "sampling") % 2**31)


def grid_axis(grid: int, span: float) -> np.ndarray:
    """Coordinates along one axis in units of sigma: span * linspace(-1, 1, grid)."""
    if grid < 1 or grid % 2 == 0:
        raise ValueError(f"grid must be odd (the checkpoint is the centre), got {grid}")
    return span * np.linspace(-1.0, 1.0, grid)


def play_grid(policy, spec: RunSpec, axis, tasks: int) -> list[tuple[float, float, list[Episode]]]:
    """(x, y, episodes) at every grid point, x the outer loop; the policy (an HFPolicy) is
    exactly the checkpoint again afterwards."""
    sigma = spec.es.sigma(0)
    seed_a, seed_b = axis_seeds(spec)
    seeds, sampling = landscape_tasks(spec, tasks), landscape_sampling(spec)
    progress = Progress(len(axis) ** 2, f"{spec.run_dir} landscape", "point")
    points = []
    for x in axis:
        for y in axis:
            with policy.combined([(seed_a, float(x) * sigma), (seed_b, float(y) * sigma)]):
                episodes = run_episodes(policy, lambda: make_env(spec.env, **spec.env_kwargs),
                                        seeds, sampling)
            points.append((float(x), float(y), episodes))
            progress.update()
    return points


def landscape_table(points, failed_reward: float | None = None) -> pa.Table:
    """One row per grid point: its reward (a direction's fitness: the mean episode reward,
    NaN when an episode's environment raised, unless failed_reward is set), success,
    turns and the per-task rewards."""
    rows = []
    for x, y, episodes in points:
        rows.append({
            "x": x, "y": y, "reward": episodes_fitness(episodes, failed_reward),
            "success": float(np.mean([e.success for e in episodes])),
            "turns": float(np.mean([e.num_turns for e in episodes])),
            "completion_tokens": int(sum(e.completion_tokens for e in episodes)),
            "failed_episodes": int(sum(e.failed for e in episodes)),
            "task_seeds": [e.task_seed for e in episodes],
            "task_rewards": [float(e.reward) for e in episodes]})
    return pa.Table.from_pylist(rows)


def reward_landscape(spec: RunSpec, checkpoint: str, out: str | Path, *, grid: int = 5,
                     span: float = 2.0, tasks: int = 8, centre: str = "base") -> pa.Table:
    """Play the grid around `checkpoint` and write it to `out` (Parquet, one row per point;
    metadata: the run's config and the landscape's settings, seeds, checkpoint hash and
    which centre `checkpoint` is: base or final).

    Always on the hf backend (a combination of two directions is an HFPolicy operation),
    on the device runtime.device names."""
    import torch

    if centre not in LANDSCAPE_CENTRES:
        raise ValueError(f"centre must be one of {LANDSCAPE_CENTRES}, got {centre!r}")
    torch.set_num_threads(int(spec.runtime.get("eval_threads", torch.get_num_threads())))
    t0 = time.perf_counter()
    axis = grid_axis(grid, span)
    policy, load_s = load_policy(checkpoint, "hf", spec.serving_dtype, spec.runtime)
    table = landscape_table(play_grid(policy, spec, axis, tasks), spec.failed_episode_reward)
    settings = {"grid": grid, "span": span, "tasks": tasks, "sigma": spec.es.sigma(0),
                "axis_seeds": list(axis_seeds(spec)),
                "task_seeds": landscape_tasks(spec, tasks),
                "sampling_seed": landscape_sampling(spec).seed, "noise_spec": NOISE_SPEC,
                "centre": centre, "checkpoint": str(checkpoint),
                "checkpoint_sha256": policy.checkpoint_sha256,
                "load_s": load_s, "wall_s": time.perf_counter() - t0}
    write_parquet_atomic(table, out, metadata={"config": spec.to_json(),
                                               "landscape": json.dumps(settings)})
    rewards = np.asarray(table.column("reward").to_pylist(), dtype=float)
    finite = rewards[np.isfinite(rewards)]
    log.info("%s landscape %dx%d around the %s (span %g sigma, sigma %.3g, %d tasks): reward "
             "%.3f at the centre, %.3f .. %.3f over the grid, %.0fs", spec.run_dir, grid, grid,
             "base model" if centre == "base" else "final checkpoint", span,
             settings["sigma"], tasks, rewards[len(rewards) // 2],
             finite.min() if finite.size else np.nan, finite.max() if finite.size else np.nan,
             settings["wall_s"])
    return table
