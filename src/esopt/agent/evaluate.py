"""The evaluation protocol: N held-out tasks x k repeats with the paper's decoder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from esopt.agent.rollout import run_episodes
from esopt.agent.trajectories import episodes_table
from esopt.backends.base import Policy
from esopt.chat import SamplingParams
from esopt.envs.base import make_env
from esopt.es.seeds import mix
from esopt.runtime.progress import Progress

# The paper evaluates (and ESOpt trains) with temperature 0.7, top-p 0.8, top-k 20.
EVAL_SAMPLING = SamplingParams(max_new_tokens=64, temperature=0.7, top_p=0.8, top_k=20)


def task_seeds(split: str, count: int, start: int = 0) -> list[int]:
    """Seeds of tasks `start .. start+count-1` of a named split (e.g. "test", "train/0/12").

    Splits hash apart, so held-out tasks never coincide with training tasks by index.
    """
    return [mix("task", split, i) for i in range(start, start + count)]


@dataclass(frozen=True)
class EvalSummary:
    """Success rate over repeats: mean and population std (ddof 0) of the per-repeat rates.

    A failed episode (its environment raised) is not a success and is counted apart in
    `failed`: unsuccessful episodes are `episodes - successes`, of which `failed` crashed."""

    success_mean: float
    success_std: float
    reward_mean: float
    per_repeat: tuple[float, ...]
    episodes: int
    failed: int = 0


def evaluate(policy: Policy, env: str, env_kwargs: dict, seeds: Sequence[int], repeats: int,
             sampling: SamplingParams = EVAL_SAMPLING, seed: int = 0
             ) -> tuple[pa.Table, EvalSummary]:
    """Play every task `repeats` times; return per-episode rows and the summary."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    tables, rates, rewards, failed = [], [], [], 0
    progress = Progress(len(seeds) * repeats, f"eval {env}: {len(seeds)} tasks x {repeats}",
                        "episode")
    for k in range(repeats):
        eps = run_episodes(policy, lambda: make_env(env, **env_kwargs), seeds,
                           replace(sampling, seed=mix("eval", seed, k) % 2**31))
        rates.append(float(np.mean([e.success for e in eps])))
        rewards.append(float(np.mean([e.reward for e in eps])))
        failed += sum(e.failed for e in eps)
        tables.append(episodes_table(eps, {"repeat": k}))
        progress.update(len(seeds))
    summary = EvalSummary(float(np.mean(rates)), float(np.std(rates)), float(np.mean(rewards)),
                          tuple(rates), len(seeds) * repeats, failed)
    return pa.concat_tables(tables), summary
