"""Bounded-staleness asynchronous ES as a deterministic event schedule.

At version t (theta_t, before update t) directions (t, 0), (t, 1), ... are dispatched
with the synchronous seeds direction_seed(run, t, i), each scored on theta_t. A result
dispatched at version v and used at update t has lag t - v; update t uses the results
that have arrived with lag <= L, at most N (the population size) of them, oldest dispatch
first; results with lag > L are discarded (logged and recorded); an arrived result beyond
the N waits for the next update (its lag grows). The accepted rewards are z-scored as one
cohort and their seeds replayed onto theta_t, with no off-policy correction (the
bounded-staleness asynchronous ES of the companion paper: stale fitness measurements used
as they are, lag at most L).

When a result arrives is one of two models (`AsyncConfig.arrivals`):
- "stragglers", the controlled stress tests: every version dispatches N directions (one per
  worker); a hash-chosen fraction `delayed_fraction` of them arrives `delay` updates late,
  the rest in time for their own version's update. delayed_fraction = 1 makes every
  fitness measurement stale: the first `delay` updates then have nothing to use (zero
  updates, logged) and every later one uses results of lag `delay`.
- "natural": N workers, always busy, with completion times that vary: a direction's
  evaluation takes exp(duration_spread * z) update periods, z a standard normal drawn
  by hash from (run, version, index). Each worker takes a new direction of the current
  version as soon as it reports; the coordinator updates as soon as N results with lag
  <= L are in, so a result is stale when its worker started it before the last update.
  Results that arrive at the same instant are handled together; with duration_spread 0
  every evaluation takes one period and the run is synchronous ES.

The schedule is a pure function of the config and the run seed, so a run is reproducible
bit for bit; L = 0 with no delays is synchronous ES exactly. A direction whose result
would arrive after the last update is never scored (the run ends before it reports).
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

from esopt.es.seeds import direction_seed, mix
from esopt.es.strategy import ES, Direction, ESConfig, Update, shaped_update

log = logging.getLogger(__name__)

ARRIVALS = ("stragglers", "natural")


@dataclass(frozen=True)
class AsyncConfig:
    """Staleness bound, and when results arrive (the stress tests' delays or natural
    completion times)."""

    max_lag: int = 1
    """L: results with lag <= L are accepted (L = 0: synchronous ES)."""
    delayed_fraction: float = 0.0
    """stragglers: fraction of dispatched directions (chosen by hash) whose result arrives
    `delay` updates late (1: every fitness measurement is stale)."""
    delay: int = 4
    """stragglers: D, updates a delayed result arrives after its dispatch."""
    arrivals: str = "stragglers"
    """stragglers (the controlled stress tests) or natural (completion times that vary)."""
    duration_spread: float = 0.5
    """natural: standard deviation of the log of an evaluation's duration (in update
    periods; median one period)."""

    def __post_init__(self) -> None:
        if self.max_lag < 0 or self.delay < 1 or not 0 <= self.delayed_fraction <= 1:
            raise ValueError(f"need max_lag >= 0, delay >= 1, 0 <= delayed_fraction <= 1; "
                             f"got {self}")
        if self.arrivals not in ARRIVALS:
            raise ValueError(f"arrivals must be one of {ARRIVALS}, got {self.arrivals!r}")
        if not (self.duration_spread >= 0 and math.isfinite(self.duration_spread)):
            raise ValueError(f"duration_spread must be a finite number >= 0, "
                             f"got {self.duration_spread}")


@dataclass(frozen=True)
class Dispatch:
    """Direction `index` dispatched at version `version` (scored on theta_version); its
    result arrives for update `arrives`."""

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

    @property
    def stale(self) -> int:
        """Accepted results of an earlier version (lag >= 1)."""
        return sum(lag > 0 for lag in self.lags(self.accepted))


def is_delayed(run_seed: int, version: int, index: int, fraction: float) -> bool:
    """Whether dispatch (version, index) is a straggler (a hash, never a draw)."""
    return mix("async-delay", run_seed, version, index) < fraction * 2**63


def duration(run_seed: int, version: int, index: int, spread: float) -> float:
    """natural: how many update periods evaluating dispatch (version, index) takes, a
    log-normal of median 1 drawn by hash (exactly 1.0 when spread is 0)."""
    u = (mix("async-duration", run_seed, version, index) + 0.5) / 2**63
    return math.exp(spread * NormalDist().inv_cdf(u))


def schedule(config: ESConfig, acfg: AsyncConfig, generations: int | None = None
             ) -> list[Step]:
    """The whole run's events, update by update (pure function of its arguments)."""
    t_end = config.generations if generations is None else generations
    events = _natural_steps if acfg.arrivals == "natural" else _straggler_steps
    return _scored_only(list(events(config, acfg, t_end)))


def _take(t: int, pool: list, n: int, bound: int) -> tuple[list, list, list]:
    """(accepted, discarded, left waiting) of the results `pool`, (version, index, ...)
    tuples, at update t: lag > bound discarded, the n oldest others accepted."""
    accepted, discarded, kept = [], [], []
    for d in sorted(pool, key=lambda d: (d[0], d[1])):
        if t - d[0] > bound:
            discarded.append(d)
        elif len(accepted) < n:
            accepted.append(d)
        else:
            kept.append(d)  # leftover: retried at the next update
    return accepted, discarded, kept


def _straggler_steps(config: ESConfig, acfg: AsyncConfig, t_end: int):
    """N dispatches per version, the delayed ones arriving `delay` updates later; update t
    takes what has arrived for it."""
    n, run = config.population_size, config.run_seed
    pending: dict[int, list[tuple[int, int, Dispatch]]] = {}
    waiting: list[tuple[int, int, Dispatch]] = []
    for t in range(t_end):
        dispatched = []
        for i in range(n):
            late = is_delayed(run, t, i, acfg.delayed_fraction)
            d = Dispatch(t, i, direction_seed(run, t, i), t + acfg.delay if late else t)
            dispatched.append(d)
            pending.setdefault(d.arrives, []).append((t, i, d))
        accepted, discarded, waiting = _take(t, waiting + pending.pop(t, []), n,
                                             acfg.max_lag)
        yield Step(t, tuple(dispatched), tuple(a[2] for a in accepted),
                   tuple(a[2] for a in discarded))


def _natural_steps(config: ESConfig, acfg: AsyncConfig, t_end: int):
    """N always-busy workers whose evaluations take `duration` periods; update t happens at
    the first instant when N results of lag <= L are in (leftovers included)."""
    n, run, bound = config.population_size, config.run_seed, acfg.max_lag
    queue: list[tuple[float, int, int]] = []  # (finish time, version, index)
    next_index: dict[int, int] = {}
    dispatched: dict[int, list[tuple[int, int]]] = {}

    def dispatch(version: int, now: float) -> None:
        i = next_index.get(version, 0)
        next_index[version] = i + 1
        heapq.heappush(queue, (now + duration(run, version, i, acfg.duration_spread),
                               version, i))
        dispatched.setdefault(version, []).append((version, i))

    for _ in range(n):
        dispatch(0, 0.0)
    version, pool, steps = 0, [], []
    while version < t_end:
        now, freed = queue[0][0], 0
        while queue and queue[0][0] == now:  # results of one instant are handled together
            _, v, i = heapq.heappop(queue)
            pool.append((v, i))
            freed += 1
        if sum(version - v <= bound for v, _ in pool) >= n:
            accepted, discarded, pool = _take(version, pool, n, bound)
            steps.append((version, accepted, discarded))
            version += 1
        for _ in range(freed):
            dispatch(version, now)
    arrives = {key: t for t, acc, dis in steps for key in acc + dis}

    def made(keys):
        return tuple(Dispatch(v, i, direction_seed(run, v, i), arrives.get((v, i), t_end))
                     for v, i in keys)

    for t, accepted, discarded in steps:
        yield Step(t, made(dispatched.get(t, [])), made(accepted), made(discarded))


def _scored_only(steps: list[Step]) -> list[Step]:
    """Drop from `dispatched` the directions whose result no update ever sees (it would
    arrive after the last one): the run ends before they report, so they are not scored."""
    seen = {(d.version, d.index) for s in steps for d in s.accepted + s.discarded}
    return [Step(s.version, tuple(d for d in s.dispatched if (d.version, d.index) in seen),
                 s.accepted, s.discarded) for s in steps]


def step_update(es: ES, step: Step, rewards: dict[tuple[int, int], float]) -> Update:
    """Update t from its accepted cohort's rewards ({(version, index): reward})."""
    directions = [Direction(k, d.seed, 1, es.config.sigma(d.version))
                  for k, d in enumerate(step.accepted)]
    if step.discarded:
        log.warning("update %d: %d stale result(s) discarded (lag > L): %s", step.version,
                    len(step.discarded), [(d.version, d.index, step.version - d.version)
                                          for d in step.discarded])
    if not step.accepted:
        log.warning("update %d: no result has arrived within the lag bound; zero update",
                    step.version)
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
