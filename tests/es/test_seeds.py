import pytest

from esopt.es.seeds import direction_seed, mix


def test_direction_seed_is_a_pure_function_of_its_coordinates():
    assert direction_seed(7, 3, 5) == direction_seed(7, 3, 5)
    seeds = {direction_seed(r, t, i) for r in range(3) for t in range(20) for i in range(32)}
    assert len(seeds) == 3 * 20 * 32


def test_seeds_fit_in_63_bits():
    for i in range(1000):
        assert 0 <= direction_seed(0, 0, i) < 2**63


def test_mix_separates_parts_unambiguously():
    assert mix("ab", "c") != mix("a", "bc")
    assert mix(1, 23) != mix(12, 3)
    assert mix(1) != mix("1")


@pytest.mark.parametrize("bad", [1.5, None, True, b"x"])
def test_mix_rejects_other_types(bad):
    with pytest.raises(TypeError):
        mix(bad)


def test_negative_coordinates_are_rejected():
    with pytest.raises(ValueError, match="generation"):
        direction_seed(0, -1, 0)
