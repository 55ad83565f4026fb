import logging

import pytest
import torch

from esopt.es.apply import add_update_
from esopt.es.async_es import AsyncConfig, duration, run_async, schedule, step_record
from esopt.es.noise import draw
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig
from tests.es.companions import params, sha256

CFG = ESConfig(population_size=6, alpha=5e-2, run_seed=2,
               sigma=SigmaSchedule("cosine", 1e-2, 1e-3, 6))


def reward(theta, direction) -> float:
    """A reward that depends on theta and on the direction (a fixed linear objective)."""
    w = theta["layer.0.w"].view(-1)[:64]
    return float((w + direction.sigma * draw(direction.seed, "layer.0.w", 0, 64))
                 @ draw(99, "target", 0, 64))


def run(acfg, cfg=CFG):
    theta = params()
    steps = run_async(ES(cfg), acfg, lambda d, v: reward(theta, d),
                      lambda s, u: add_update_(theta, u))
    return theta, steps


def synchronous_es(cfg=CFG):
    es, theta = ES(cfg), params()
    updates = []
    for t in range(cfg.generations):
        state = es.state_at(t)
        update, _ = es.tell(state, [reward(theta, d) for d in es.ask(state)])
        add_update_(theta, update)
        updates.append(update)
    return theta, updates


@pytest.mark.parametrize("acfg", [AsyncConfig(max_lag=0),
                                  AsyncConfig(max_lag=0, arrivals="natural",
                                              duration_spread=0.0),
                                  AsyncConfig(max_lag=3, arrivals="natural",
                                              duration_spread=0.0)])
def test_without_delays_async_is_synchronous_es_same_sha256(acfg):
    theta, sync = synchronous_es()
    async_theta, steps = run(acfg)
    assert [u for _, u in steps] == sync
    assert sha256(async_theta) == sha256(theta) != sha256(params())


def test_stale_results_over_the_bound_are_discarded_and_logged(caplog):
    acfg = AsyncConfig(max_lag=1, delayed_fraction=0.3, delay=4)
    with caplog.at_level(logging.WARNING):
        _, steps = run(acfg)
    discarded = [(s.version, s.lags(s.discarded)) for s, _ in steps if s.discarded]
    assert discarded and all(lag == [4] * len(lag) for _, lag in discarded)
    # nothing refills a straggler's place: each update uses its version's prompt results
    for s, u in steps:
        assert max(s.lags(s.accepted)) == 0
        assert len(s.accepted) == len(u.seeds) == sum(d.arrives == s.version
                                                      for d in s.dispatched)
    assert "discarded" in caplog.text
    rec = step_record(steps[discarded[0][0]][0])
    assert rec["discarded"] and rec["discarded"][0]["lag"] == 4


def test_delayed_results_within_the_bound_are_accepted_with_their_lag():
    steps = schedule(CFG, AsyncConfig(max_lag=4, delayed_fraction=0.3, delay=4))
    lags = [lag for s in steps for lag in s.lags(s.accepted)]
    assert 4 in lags and set(lags) <= {0, 4}
    assert sum(s.stale for s in steps) == lags.count(4) > 0
    # N dispatches per version, less those that would report after the last update
    assert all(len(s.dispatched) == 6 for s in steps[:2])
    assert all(d.arrives < CFG.generations for s in steps for d in s.dispatched)


def test_every_fitness_measurement_stale(caplog):
    """delayed_fraction 1: the first D updates have nothing (zero updates, logged), every
    later one uses N results of lag D."""
    acfg = AsyncConfig(max_lag=2, delayed_fraction=1.0, delay=2)
    with caplog.at_level(logging.WARNING):
        theta, steps = run(acfg)
    assert [len(s.accepted) for s, _ in steps] == [0, 0, 6, 6, 6, 6]
    assert all(u.is_zero for _, u in steps[:2]) and not steps[2][1].is_zero
    assert all(s.lags(s.accepted) == [2] * 6 for s, _ in steps[2:])
    assert "no result has arrived" in caplog.text
    # the last D versions' results would arrive after the run: never scored
    assert [len(s.dispatched) for s, _ in steps] == [6, 6, 6, 6, 0, 0]
    assert sha256(theta) != sha256(params())


def test_natural_asynchrony_uses_stale_results_up_to_the_bound():
    cfg = ESConfig(population_size=4, run_seed=3, sigma=SigmaSchedule("constant", 1e-3,
                                                                      1e-3, 30))
    acfg = AsyncConfig(max_lag=1, arrivals="natural", duration_spread=0.5)
    steps = schedule(cfg, acfg)
    assert steps == schedule(cfg, acfg)  # a pure function of the config
    assert all(len(s.accepted) == 4 for s in steps)  # an update waits for N usable results
    lags = [lag for s in steps for lag in s.lags(s.accepted)]
    assert set(lags) == {0, 1} and sum(s.stale for s in steps) == lags.count(1) > 20
    assert all(lag > 1 for s in steps for lag in s.lags(s.discarded))
    # every scored direction is used or discarded, and each exactly once
    scored = [(d.version, d.index) for s in steps for d in s.dispatched]
    used = [(d.version, d.index) for s in steps for d in s.accepted + s.discarded]
    assert sorted(scored) == sorted(used) and len(set(used)) == len(used)
    # a wider bound discards nothing and accepts the older results
    wide = schedule(cfg, AsyncConfig(max_lag=3, arrivals="natural"))
    assert not any(s.discarded for s in wide)
    assert max(lag for s in wide for lag in s.lags(s.accepted)) >= 2


def test_durations_are_seeded_lognormals():
    spread = [duration(0, v, i, 0.5) for v in range(20) for i in range(50)]
    assert duration(0, 1, 2, 0.5) == duration(0, 1, 2, 0.5) != duration(1, 1, 2, 0.5)
    assert all(duration(0, v, 0, 0.0) == 1.0 for v in range(5))
    logs = torch.tensor(spread).log()
    assert abs(float(logs.mean())) < 0.05 and abs(float(logs.std()) - 0.5) < 0.05


def test_schedule_and_run_are_reproducible():
    for acfg in (AsyncConfig(max_lag=1, delayed_fraction=0.1, delay=8),
                 AsyncConfig(max_lag=1, arrivals="natural")):
        assert schedule(CFG, acfg) == schedule(CFG, acfg)
        assert sha256(run(acfg)[0]) == sha256(run(acfg)[0])


def test_bad_async_config():
    AsyncConfig(delayed_fraction=1.0)  # every measurement stale is a valid stress test
    for bad in ({"delayed_fraction": 1.5}, {"delayed_fraction": -0.1}, {"delay": 0},
                {"max_lag": -1}, {"arrivals": "poisson"}, {"duration_spread": -1.0}):
        with pytest.raises(ValueError):
            AsyncConfig(**bad)


def test_oldest_results_are_accepted_first_and_leftovers_wait():
    cfg = ESConfig(population_size=2, run_seed=0, sigma=SigmaSchedule("constant", 1e-3,
                                                                       1e-3, 12))
    steps = schedule(cfg, AsyncConfig(max_lag=8, delayed_fraction=0.6, delay=2))
    seen = [(d.version, d.index) for s in steps for d in s.accepted]
    assert len(seen) == len(set(seen)) == 21  # every result used at most once
    for s in steps:
        keys = [(d.version, d.index) for d in s.accepted]
        assert keys == sorted(keys)  # oldest dispatch first
    # more results arrived than N at some update: the extra ones waited past their arrival
    assert any(s.version > d.arrives for s in steps for d in s.accepted)
    # the schedule is a pure function (a golden value): at update 5 the stragglers of
    # version 3 go before version 5's own results, which wait for updates 6 and 7
    assert [(d.version, d.index) for d in steps[5].accepted] == [(3, 0), (3, 1)]
    assert [(d.version, d.index) for d in steps[6].accepted] == [(4, 0), (5, 0)]
    assert [(d.version, d.index) for d in steps[7].accepted] == [(5, 1), (6, 1)]
