import logging

import numpy as np
import pytest

from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig, Update


def make(**kw):
    kw.setdefault("sigma", SigmaSchedule("cosine", 1e-3, 2.5e-4, 10))
    return ES(ESConfig(**kw))


def test_ask_is_deterministic_and_distinct():
    es = make(population_size=8, run_seed=3)
    a, b = es.ask(es.init()), es.ask(es.init())
    assert a == b
    assert len({d.seed for d in a}) == 8
    assert all(d.sign == 1 and d.sigma == 1e-3 for d in a)


def test_generations_get_new_seeds_and_scheduled_sigma():
    es = make(population_size=4)
    s0 = es.init()
    update, s1 = es.tell(s0, [1.0, 2.0, 3.0, 4.0])
    assert s1.generation == 1 and s1.sigma == es.config.sigma(1)
    assert not {d.seed for d in es.ask(s0)} & {d.seed for d in es.ask(s1)}
    assert es.state_at(1) == s1


def test_antithetic_pairs_share_seeds_with_opposite_signs():
    ds = make(population_size=6, antithetic=True).ask(make().init())
    for a, b in zip(ds[::2], ds[1::2], strict=True):
        assert a.seed == b.seed and (a.sign, b.sign) == (1, -1)
    assert len({d.seed for d in ds}) == 3


def test_tell_zscores_rewards():
    es = make(population_size=4, alpha=1e-3)
    update, _ = es.tell(es.init(), [0.0, 1.0, 1.0, 2.0])
    std = np.std([0.0, 1.0, 1.0, 2.0])
    np.testing.assert_allclose(update.weights, np.array([-1, 0, 0, 1]) / (std + 1e-8))
    assert update.scale == pytest.approx(1e-3 / 4)
    assert update.seeds == tuple(d.seed for d in es.ask(es.init()))


def test_equal_rewards_give_zero_update_and_a_log_line(caplog):
    es = make(population_size=4)
    with caplog.at_level(logging.WARNING):
        update, _ = es.tell(es.init(), [0.5] * 4)
    assert update.is_zero
    assert "no signal" in caplog.text


def test_non_finite_rewards_are_excluded_and_reported(caplog):
    es = make(population_size=5)
    with caplog.at_level(logging.WARNING):
        update, _ = es.tell(es.init(), [1.0, float("nan"), 2.0, float("inf"), 3.0])
    assert update.excluded == (1, 3)
    assert len(update.seeds) == len(update.weights) == 3
    all_seeds = [d.seed for d in es.ask(es.init())]
    assert update.seeds == (all_seeds[0], all_seeds[2], all_seeds[4])
    assert update.scale == pytest.approx(es.config.alpha / 3)
    assert "excluded" in caplog.text


def test_reward_shape_is_checked():
    es = make(population_size=4)
    with pytest.raises(ValueError, match="shape"):
        es.tell(es.init(), [1.0, 2.0])


def test_update_roundtrips_through_a_dict():
    es = make(population_size=3)
    update, _ = es.tell(es.init(), [1.0, 2.0, 0.0])
    assert Update.from_dict(update.to_dict()) == update


def test_config_roundtrips_through_a_dict():
    cfg = make(population_size=4, antithetic=True).config
    assert ESConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("kwargs, field", [
    (dict(population_size=1), "population_size"),
    (dict(population_size=3, antithetic=True), "population_size"),
    (dict(alpha=-1e-4), "alpha"),
    (dict(alpha=float("nan")), "alpha"),
    (dict(shaping="softmax"), "shaping"),
])
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        make(**kwargs)
