import numpy as np
import pytest

from esopt.es.shaping import ZSCORE_EPS, centered_ranks, get_shaping, zscore


def test_zscore_is_population_zscore():
    r = np.array([1.0, 2.0, 4.0, 9.0])
    expected = (r - r.mean()) / (np.sqrt(((r - r.mean()) ** 2).mean()) + ZSCORE_EPS)
    np.testing.assert_allclose(zscore(r), expected, rtol=1e-12)
    assert zscore(r).mean() == pytest.approx(0, abs=1e-12)
    assert zscore(r).std(ddof=0) == pytest.approx(1, abs=1e-6)


def test_zscore_of_equal_rewards_is_exactly_zero():
    assert not np.any(zscore(np.full(8, 0.1)))  # 0.1 has no exact float mean


def test_centered_ranks_span_minus_half_to_half():
    np.testing.assert_allclose(centered_ranks(np.array([10.0, -3.0, 5.0])), [0.5, -0.5, 0.0])


def test_centered_ranks_average_ties():
    w = centered_ranks(np.array([1.0, 1.0, 0.0, 2.0]))
    assert w[0] == w[1]
    np.testing.assert_allclose(w, [0.0, 0.0, -0.5, 0.5])
    assert not np.any(centered_ranks(np.ones(5)))


def test_unknown_shaping_names_the_field():
    with pytest.raises(ValueError, match="shaping"):
        get_shaping("softmax")
