"""Batched multi-turn rollouts: every live episode's next turn in one `generate` call.

Episodes run in lockstep: at each turn the prompts of all live episodes go into one
batched generate; finished episodes drop out. With greedy decoding the result equals
running the episodes one at a time (tested); with sampling, the draws depend on the
batch, and `SamplingParams.seed` + the turn index make a rollout reproducible.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from esopt.backends.base import Policy, SamplingParams
from esopt.envs.base import Environment

log = logging.getLogger(__name__)


@dataclass
class Turn:
    """One policy turn of an episode."""

    completion: str
    prompt_tokens: int
    completion_tokens: int
    reward: float
    info: dict
    prompt: list[dict] = field(default_factory=list, repr=False)
    """The conversation the policy answered (RL baselines re-score these turns)."""


@dataclass
class Episode:
    """A finished episode: outcome, accounting and the full trajectory."""

    env: str
    task_seed: int
    success: bool = False
    reward: float = 0.0
    turns: list[Turn] = field(default_factory=list)
    first_prompt: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    failed: bool = False
    """The environment raised (reset or step): the episode ended without an outcome, and
    its reward is not a measurement (ES excludes the direction; evaluation counts it)."""
    error: str = ""
    """`ExceptionType: message` of a failed episode."""

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.turns)


def run_episodes(policy: Policy, make_env: Callable[[], Environment], task_seeds: Sequence[int],
                 sampling: SamplingParams, *, progress: Callable[[str], None] | None = None
                 ) -> list[Episode]:
    """Play one episode per task seed, all in lockstep, and return them in seed order."""
    envs = [make_env() for _ in task_seeds]
    episodes = [Episode(env=e.name, task_seed=int(s)) for e, s in zip(envs, task_seeds,
                                                                     strict=True)]
    t0 = time.perf_counter()
    prompts: list = [None] * len(envs)
    for i, (env, ep) in enumerate(zip(envs, episodes, strict=True)):
        try:
            prompts[i] = ep.first_prompt = env.reset(ep.task_seed)
        except Exception as e:  # noqa: BLE001 - an environment error fails only this episode
            log.exception("environment %s raised in reset(%d)", env.name, ep.task_seed)
            _fail(ep, e, t0)
    live = [i for i, ep in enumerate(episodes) if not ep.failed]
    turn = 0
    while live:
        env0 = envs[live[0]]
        turn_sampling = replace(sampling, seed=sampling.seed + 1009 * turn,
                                max_new_tokens=min(sampling.max_new_tokens, env0.max_new_tokens),
                                stop=tuple(sampling.stop) + tuple(env0.stop))
        completions = policy.generate([prompts[i] for i in live], turn_sampling)
        still = []
        for i, c in zip(live, completions, strict=True):
            try:
                result = envs[i].step(c.text)
            except Exception as e:  # noqa: BLE001 - an environment error fails only this episode
                log.exception("environment %s raised on %r (task %d)", envs[i].name,
                              c.text[:200], episodes[i].task_seed)
                episodes[i].turns.append(Turn(c.text, c.prompt_tokens, c.completion_tokens,
                                              0.0, {"error": _error(e)}, prompts[i]))
                _fail(episodes[i], e, t0)
                continue
            episodes[i].turns.append(Turn(c.text, c.prompt_tokens, c.completion_tokens,
                                          result.reward, result.info, prompts[i]))
            episodes[i].reward += result.reward
            if result.done or episodes[i].num_turns >= envs[i].max_turns:
                episodes[i].success = bool(envs[i].success)
                episodes[i].wall_s = time.perf_counter() - t0
            else:
                prompts[i] = result.observation
                still.append(i)
        live = still
        turn += 1
        if progress:
            progress(f"turn {turn}: {len(live)} live of {len(envs)}")
    return episodes


def _error(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


def _fail(episode: Episode, e: Exception, t0: float) -> None:
    """End an episode whose environment raised: failed, never a silent reward of 0."""
    episode.failed, episode.error, episode.success = True, _error(e), False
    episode.wall_s = time.perf_counter() - t0
