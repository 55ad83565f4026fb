"""Matched training budgets: the RL steps that spend one ES run's training FLOPs.

The paper compares ES with GRPO at equal training FLOPs (its Table 2). In the ledger's
accounting (esopt.runtime.ledger) an ES episode costs one forward pass of its tokens (the
rollout), and an RL episode costs its rollout, the step's no-gradient scoring passes and a
forward + backward (3 forwards) of each trained model over the same tokens:
`RLPasses.episode_forwards` forward passes (GRPO 5, PPO 9). Every one of those passes
counts the same tokens with the same attention, so at equal episode lengths an RL episode
costs exactly that many ES episodes, whatever the lengths are, and the matched step count
is a function of the config alone: it is resolved when the run specs are built, before
any job runs. Episode lengths do differ a little between methods (GRPO-dagger samples at
temperature 1), so the FLOPs the runs measure (Table 2) are the check, not this count.
"""

from __future__ import annotations

from esopt.runtime.ledger import RL_PASSES


def es_run_episodes(generations: int, population_size: int, tasks_per_direction: int) -> int:
    """Training episodes of one synchronous ES run: G directions x shared tasks per
    generation (antithetic or not, G directions each play every task)."""
    for name, value in (("generations", generations), ("population_size", population_size),
                        ("tasks_per_direction", tasks_per_direction)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    return generations * population_size * tasks_per_direction


def matched_rl_steps(method: str, es_episodes: int, episodes_per_step: int) -> int:
    """The steps of RL `method` whose training FLOPs equal `es_episodes` ES episodes' (of
    equal length), rounded to the nearest step (at least 1): within half a step."""
    if method not in RL_PASSES:
        raise ValueError(f"method {method!r} is not an RL method {sorted(RL_PASSES)}")
    if es_episodes < 1 or episodes_per_step < 1:
        raise ValueError(f"need es_episodes >= 1 and episodes_per_step >= 1, got "
                         f"{es_episodes} and {episodes_per_step}")
    steps = es_episodes / (RL_PASSES[method].episode_forwards * episodes_per_step)
    # Half-up rounding (not Python's banker's rounding): the count is unambiguous.
    return max(1, int(steps + 0.5))


def matched_keep_every(steps: int, generations: int, keep_every: int) -> int:
    """The RL run's keep_every whose kept steps sit at the FLOPs of the ES run's kept
    generations (every keep_every-th of `generations`): steps x keep_every / generations,
    rounded, at least 1."""
    if min(steps, generations, keep_every) < 1:
        raise ValueError(f"need steps, generations, keep_every >= 1, got {steps}, "
                         f"{generations}, {keep_every}")
    return max(1, int(steps * keep_every / generations + 0.5))
