"""The ES objective: what a direction is scored on, how, and what its fitness is.

Within a generation every direction plays the same tasks with the same sampling seed
(common random numbers), so reward differences come from the parameters, not from
sampling luck. A worker scores its directions one at a time (perturb, play, restore) or,
where the policy can, several in one population batch: the same episodes either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from esopt.agent.evaluate import task_seeds
from esopt.agent.rollout import Episode, run_episode_groups, run_episodes
from esopt.chat import SamplingParams
from esopt.envs.base import Environment, make_env
from esopt.es.seeds import mix
from esopt.es.strategy import Direction

log = logging.getLogger(__name__)


def train_sampling(spec, generation: int) -> SamplingParams:
    """Common random numbers: every direction of a generation gets the same sampling seed."""
    return replace(spec.train_decoder, seed=mix("crn", spec.seed, generation) % 2**31)


def train_tasks(spec, generation: int) -> list[int]:
    """The generation's tasks, shared by all its directions."""
    return task_seeds(f"train/{spec.seed}/{generation}", spec.tasks_per_direction)


def env_factory(spec) -> Callable[[], Environment]:
    """A new training environment of the run per call (one per episode)."""
    return lambda: make_env(spec.env, **spec.env_kwargs)


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


def episodes_fitness(episodes: Sequence[Episode], failed_reward: float | None = None) -> float:
    """The fitness of a direction's episodes (see `fitness`)."""
    return fitness([e.reward for e in episodes], [e.failed for e in episodes], failed_reward)


def score_direction(policy, spec, generation: int, direction: Direction
                    ) -> tuple[list[Episode], float]:
    """The episodes of one perturbed policy on the generation's shared tasks, and the
    seconds spent generating them (the rest of the direction's time is noise)."""
    with policy.perturbed(direction):
        t0 = time.perf_counter()
        episodes = run_episodes(policy, env_factory(spec), train_tasks(spec, generation),
                                train_sampling(spec, generation))
        return episodes, time.perf_counter() - t0


def score_directions(policy, spec, generation: int, directions: Sequence[Direction]
                     ) -> list[tuple[list[Episode], float]]:
    """(episodes, seconds generating) of each direction: one at a time through
    `score_direction`, or, for several, all in one population batch (the same episodes);
    a batch's time is shared equally by its directions."""
    if len(directions) == 1:
        return [score_direction(policy, spec, generation, directions[0])]
    t0 = time.perf_counter()
    per_direction = run_population_episodes(policy, directions, env_factory(spec),
                                            train_tasks(spec, generation),
                                            train_sampling(spec, generation))
    share = (time.perf_counter() - t0) / len(directions)
    return [(episodes, share) for episodes in per_direction]


def run_population_episodes(policy, directions: Sequence[Direction],
                            make_env: Callable[[], Environment], task_seeds: Sequence[int],
                            sampling: SamplingParams) -> list[list[Episode]]:
    """Each direction's episodes on the shared tasks, all directions in one lockstep batch:
    the same episodes as `policy.perturbed(d)` + `run_episodes` for each d (full rank: the
    same bits; low rank: up to the rounding of (x B) A^T against x (A B^T))."""
    from esopt.backends.hf_population import PopulationScorer, lowrank_population

    if any(d.subspace is not None for d in directions):
        raise ValueError("population batching: CoPES directions are scored one at a time")
    if all(d.rank for d in directions):
        with lowrank_population(policy, directions) as scorer:
            return run_episode_groups(scorer.generate_groups, make_env, task_seeds,
                                      sampling, groups=len(directions))
    if any(d.rank for d in directions):
        raise ValueError("population batching: low-rank and full-rank directions mixed")
    scorer = PopulationScorer(policy, directions)
    return run_episode_groups(scorer.generate_groups, make_env, task_seeds, sampling,
                              groups=len(directions))


def population_batch(policy, spec) -> int:
    """Directions a worker scores in one batch: runtime.population_batch, capped by what
    runtime.population_memory_mb (if > 0) holds in float32 weight sets; 1 (one at a time)
    unless the policy can batch a population of the run's directions
    (`policy.population_capable`, low rank: `policy.lowrank_population_capable`)."""
    rt = spec.runtime
    want = int(rt.get("population_batch", 1))
    memory_mb = float(rt.get("population_memory_mb", 0))  # 0: no cap
    # Low-rank members hold no weight set (O(r (m + n)) per matrix): no memory cap.
    if want > 1 and memory_mb > 0 and not spec.es.rank:
        from esopt.backends.hf_population import directions_per_batch

        want = min(want, directions_per_batch(policy, memory_mb))
    capable = "lowrank_population_capable" if spec.es.rank else "population_capable"
    if want > 1 and not getattr(policy, capable, False):
        log.warning("runtime.population_batch=%d: needs an HF policy on the CPU (full rank: "
                    "served in float32); scoring one direction at a time", want)
        return 1
    if want > 1 and spec.es.subspaces:
        # The population serves whole-space (full- or low-rank) perturbations only.
        log.warning("runtime.population_batch=%d: not for CoPES directions; scoring one "
                    "direction at a time", want)
        return 1
    return max(1, want)
