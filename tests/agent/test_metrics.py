"""Mean@k, Pass@k and the unbiased best-of-k estimator."""

import itertools

import numpy as np
import pytest

from esopt.agent.metrics import best_of_k_curve, mean_at_k, pass_at_k, unbiased_pass_at_k


def test_mean_and_pass_at_k():
    correct = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    assert mean_at_k(correct) == pytest.approx(5 / 12)
    assert pass_at_k(correct) == pytest.approx(2 / 3)


@pytest.mark.parametrize("n, c", [(5, 0), (5, 2), (6, 3), (4, 4)])
def test_unbiased_estimator_equals_enumerating_all_k_subsets(n, c):
    samples = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(samples, k))
        exact = sum(any(s) for s in subsets) / len(subsets)
        assert unbiased_pass_at_k(n, c, k) == pytest.approx(exact)


def test_best_of_k_curve_is_monotone_and_starts_at_mean_at_1():
    rng = np.random.default_rng(0)
    correct = rng.random((20, 8)) < 0.3
    curve = best_of_k_curve(correct)
    assert sorted(curve) == [1, 2, 4, 8]
    assert curve[1] == pytest.approx(mean_at_k(correct))
    assert curve[8] == pytest.approx(pass_at_k(correct))
    assert all(a <= b for a, b in zip(list(curve.values()), list(curve.values())[1:], strict=False))


def test_bad_arguments():
    with pytest.raises(ValueError):
        unbiased_pass_at_k(4, 5, 1)
