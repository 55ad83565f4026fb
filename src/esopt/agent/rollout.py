"""Batched multi-turn rollouts: every live episode's next turn in one `generate` call.

Episodes run in lockstep: at each turn the prompts of all live episodes go into one
batched generate; finished episodes drop out. With greedy decoding the result equals
running the episodes one at a time (tested); `SamplingParams.seed` + the turn index make a
sampled rollout reproducible (the HF backend draws row by row, see backends.hf_decode).
`run_episode_groups` plays several copies of the same tasks (ES directions) in one
lockstep loop for a backend that scores them together (backends.hf_population).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

from esopt.backends.base import Policy
from esopt.chat import Completion, Conversation, SamplingParams
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
    completion_ids: tuple[int, ...] = field(default=(), repr=False)
    """The tokens the policy generated (Completion.token_ids): what RL trains on."""
    finish_reason: str = ""
    """eos, stop (a stop string) or length (Completion.finish_reason)."""


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
    """Play one episode per task seed, all in lockstep, and return them in seed order.

    A policy with a `rollout_session()` (the HF backend) keeps the shared prompt prefix's
    KV across the turns of this call."""
    session = getattr(policy, "rollout_session", None)
    with session() if session is not None else nullcontext():
        return run_episode_groups(lambda groups, s: [policy.generate(groups[0], s)], make_env,
                                  task_seeds, sampling, groups=1, progress=progress)[0]


# generate_groups(conversations of each group, sampling) -> completions of each group
GroupGenerate = Callable[[list[list[Conversation]], SamplingParams], list[list[Completion]]]


def run_episode_groups(generate_groups: GroupGenerate, make_env: Callable[[], Environment],
                       task_seeds: Sequence[int], sampling: SamplingParams, *, groups: int,
                       progress: Callable[[str], None] | None = None) -> list[list[Episode]]:
    """`groups` copies of the episodes of `task_seeds` (one per ES direction, say) in
    lockstep: each turn, every group's live episodes go to one `generate_groups` call, in
    seed order within the group, exactly as `run_episodes` hands them to a policy alone.

    An environment that raises (in reset or step) fails only its episode."""
    envs = [[make_env() for _ in task_seeds] for _ in range(groups)]
    episodes = [[Episode(env=e.name, task_seed=int(s)) for e, s in zip(g, task_seeds,
                                                                       strict=True)]
                for g in envs]
    t0 = time.perf_counter()
    prompts: list[list] = [[None] * len(task_seeds) for _ in range(groups)]
    for g in range(groups):
        for i, (env, ep) in enumerate(zip(envs[g], episodes[g], strict=True)):
            try:
                prompts[g][i] = ep.first_prompt = env.reset(ep.task_seed)
            except Exception as e:  # noqa: BLE001 - an environment error fails only this episode
                log.exception("environment %s raised in reset(%d)", env.name, ep.task_seed)
                _fail(ep, e, t0)
    live = [[i for i, ep in enumerate(g_eps) if not ep.failed] for g_eps in episodes]
    turn = 0
    while any(live):
        env0 = next(envs[g][g_live[0]] for g, g_live in enumerate(live) if g_live)
        turn_sampling = replace(sampling, seed=sampling.seed + 1009 * turn,
                                max_new_tokens=min(sampling.max_new_tokens, env0.max_new_tokens),
                                stop=tuple(sampling.stop) + tuple(env0.stop))
        completions = generate_groups([[prompts[g][i] for i in g_live]
                                       for g, g_live in enumerate(live)], turn_sampling)
        for g, g_live in enumerate(live):
            still = []
            for i, c in zip(g_live, completions[g], strict=True):
                env, ep = envs[g][i], episodes[g][i]
                try:
                    result = env.step(c.text)
                except Exception as e:  # noqa: BLE001 - an environment error fails only this episode
                    log.exception("environment %s raised on %r (task %d)", env.name,
                                  c.text[:200], ep.task_seed)
                    ep.turns.append(Turn(c.text, c.prompt_tokens, c.completion_tokens,
                                         0.0, {"error": _error(e)}, prompts[g][i],
                                         c.token_ids, c.finish_reason))
                    _fail(ep, e, t0)
                    continue
                ep.turns.append(Turn(c.text, c.prompt_tokens, c.completion_tokens,
                                     result.reward, result.info, prompts[g][i],
                                     c.token_ids, c.finish_reason))
                ep.reward += result.reward
                if result.done or ep.num_turns >= env.max_turns:
                    ep.success = bool(env.success)
                    ep.wall_s = time.perf_counter() - t0
                else:
                    prompts[g][i] = result.observation
                    still.append(i)
            live[g] = still
        turn += 1
        if progress:
            progress(f"turn {turn}: {sum(map(len, live))} live of {groups * len(task_seeds)}")
    return episodes


def _error(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


def _fail(episode: Episode, e: Exception, t0: float) -> None:
    """End an episode whose environment raised: failed, never a silent reward of 0."""
    episode.failed, episode.error, episode.success = True, _error(e), False
    episode.wall_s = time.perf_counter() - t0
