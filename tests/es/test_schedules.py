import math

import pytest

from esopt.es.schedules import SigmaSchedule


def test_cosine_hits_both_ends_exactly():
    s = SigmaSchedule("cosine", 1e-3, 2.5e-4, 100)
    assert s(0) == 1e-3
    assert s(99) == 2.5e-4
    values = [s(t) for t in range(100)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_cosine_midpoint_is_the_mean():
    s = SigmaSchedule("cosine", 1e-3, 5e-4, 11)
    assert s(5) == pytest.approx(7.5e-4, rel=1e-12)
    expected = 5e-4 + 0.5 * 5e-4 * (1 + math.cos(math.pi * 2 / 10))
    assert s(2) == pytest.approx(expected, rel=1e-12)


def test_linear_and_constant():
    lin = SigmaSchedule("linear", 1e-3, 5e-4, 3)
    assert [lin(t) for t in range(3)] == [1e-3, 7.5e-4, 5e-4]
    const = SigmaSchedule("constant", 1e-3, 1.0, 5)
    assert {const(t) for t in range(5)} == {1e-3}


def test_single_generation_uses_sigma_0():
    assert SigmaSchedule("cosine", 1e-3, 5e-4, 1)(0) == 1e-3


@pytest.mark.parametrize("kwargs, field", [
    (dict(kind="exp"), "sigma.kind"),
    (dict(sigma_0=0.0), "sigma.sigma_0"),
    (dict(sigma_0=-1e-3), "sigma.sigma_0"),
    (dict(sigma_0=float("nan")), "sigma.sigma_0"),
    (dict(sigma_T=0.0), "sigma.sigma_T"),
    (dict(generations=0), "sigma.generations"),
])
def test_bad_schedules_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SigmaSchedule(**kwargs)


def test_out_of_range_generation():
    with pytest.raises(ValueError):
        SigmaSchedule(generations=3)(3)
