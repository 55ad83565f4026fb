"""Bounded-staleness asynchronous ES as a deterministic event schedule.

At version t (theta_t, before update t) the coordinator dispatches directions
(t, 0), (t, 1), ... with the synchronous seeds direction_seed(run, t, i); each is scored on
theta_t when dispatched. A hash-chosen fraction is delayed: its result arrives D updates
later (the stress tests: a straggler); the rest arrive for update t. At update t the
arrived results, in (dispatch version, index) order, have lag = t - v: lag > L is
discarded (logged and recorded), the first N of the others are accepted, leftovers wait
(their lag grows); fresh directions are dispatched at t until N are accepted. The N
accepted rewards are z-scored as one cohort and their seeds replayed onto theta_t (no
off-policy correction). The schedule is a pure function of the config and the run seed,
so a run is reproducible bit for bit; L = 0 with no delays is synchronous ES exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from esopt.es.seeds import direction_seed, mix
from esopt.es.strategy import ES, Direction, ESConfig, Update, shaped_update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AsyncConfig:
    """Staleness bound and the stress-test delays."""

    max_lag: int = 1
    """L: results with lag <= L are accepted (L = 0: synchronous ES)."""
    delayed_fraction: float = 0.0
    """Fraction of dispatched directions (chosen by hash) whose result arrives late."""
    delay: int = 4
    """D: updates a delayed result arrives after its dispatch."""

    def __post_init__(self) -> None:
        if self.max_lag < 0 or self.delay < 1 or not 0 <= self.delayed_fraction < 1:
            raise ValueError(f"need max_lag >= 0, delay >= 1, 0 <= delayed_fraction < 1; "
                             f"got {self}")


@dataclass(frozen=True)
class Dispatch:
    """Direction `index` dispatched at version `version` (scored on theta_version)."""

    version: int
    index: int
    seed: int
    arrives: int


@dataclass(frozen=True)
class Step:
    """Update t of the schedule: what is dispatched at t, accepted and discarded."""

    version: int
    dispatched: tuple[Dispatch, ...]
    accepted: tuple[Dispatch, ...]
    discarded: tuple[Dispatch, ...]

    def lags(self, which: tuple[Dispatch, ...]) -> list[int]:
        return [self.version - d.version for d in which]


def is_delayed(run_seed: int, version: int, index: int, fraction: float) -> bool:
    """Whether dispatch (version, index) is a straggler (a hash, never a draw)."""
    return mix("async-delay", run_seed, version, index) < fraction * 2**63


def schedule(config: ESConfig, acfg: AsyncConfig, generations: int | None = None
             ) -> list[Step]:
    """The whole run's events, update by update (pure function of its arguments)."""
    n, run = config.population_size, config.run_seed
    steps, waiting = [], []
    for t in range(config.generations if generations is None else generations):
        arrived = sorted((d for d in waiting if d.arrives <= t),
                         key=lambda d: (d.version, d.index))
        waiting = [d for d in waiting if d.arrives > t]
        accepted, discarded = [], []
        for d in arrived:
            if t - d.version > acfg.max_lag:
                discarded.append(d)
            elif len(accepted) < n:
                accepted.append(d)
            else:
                waiting.append(d)  # leftover: retried at the next update
        dispatched, i = [], 0
        while len(accepted) < n:
            late = is_delayed(run, t, i, acfg.delayed_fraction)
            d = Dispatch(t, i, direction_seed(run, t, i), t + acfg.delay if late else t)
            dispatched.append(d)
            (waiting if late else accepted).append(d)
            i += 1
        steps.append(Step(t, tuple(dispatched), tuple(accepted), tuple(discarded)))
    return steps


def step_update(es: ES, step: Step, rewards: dict[tuple[int, int], float]) -> Update:
    """Update t from its accepted cohort's rewards ({(version, index): reward})."""
    directions = [Direction(k, d.seed, 1, es.config.sigma(d.version))
                  for k, d in enumerate(step.accepted)]
    if step.discarded:
        log.warning("update %d: %d stale result(s) discarded (lag > L): %s", step.version,
                    len(step.discarded), [(d.version, d.index, step.version - d.version)
                                          for d in step.discarded])
    return shaped_update(directions, [rewards[(d.version, d.index)] for d in step.accepted],
                         step.version, es.config.sigma(step.version), es.config.alpha,
                         es._shape)


def step_record(step: Step) -> dict:
    """What a manifest records of update t (enough to replay it with the rewards)."""
    return {"dispatch_versions": [d.version for d in step.accepted],
            "dispatch_indices": [d.index for d in step.accepted],
            "lags": step.lags(step.accepted),
            "discarded": [{"version": d.version, "index": d.index,
                           "lag": step.version - d.version} for d in step.discarded],
            "dispatched": len(step.dispatched)}


def run_async(es: ES, acfg: AsyncConfig, score: Callable[[Direction, int], float],
              apply: Callable[[Step, Update], None], generations: int | None = None
              ) -> list[tuple[Step, Update]]:
    """The coordinator: at each version score the dispatched directions on the current
    theta (`score(direction, version)`), then `apply(step, update)` of the accepted cohort
    (theta_t -> theta_{t+1})."""
    rewards: dict[tuple[int, int], float] = {}
    out = []
    for step in schedule(es.config, acfg, generations):
        sigma = es.config.sigma(step.version)
        for d in step.dispatched:
            rewards[(d.version, d.index)] = score(Direction(d.index, d.seed, 1, sigma),
                                                  d.version)
        update = step_update(es, step, rewards)
        apply(step, update)
        out.append((step, update))
    return out
