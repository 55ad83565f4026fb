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


def test_expected_max_at_k_equals_enumerating_all_k_subsets():
    from esopt.agent.metrics import expected_max_at_k, max_at_k

    scores = [0.0, 0.25, 0.9, 0.5, 0.25, 1.0]  # ANLS-like, with a tie
    for k in range(1, 7):
        subsets = list(itertools.combinations(scores, k))
        assert expected_max_at_k(scores, k) == pytest.approx(
            sum(max(s) for s in subsets) / len(subsets))
    assert expected_max_at_k(scores, 1) == pytest.approx(np.mean(scores))
    assert expected_max_at_k(scores, 6) == 1.0
    # Hand-computed: [0.2, 0.6, 0.4], k=2: pairs' maxima 0.6, 0.4, 0.6 -> 1.6 / 3.
    assert max_at_k([[0.2, 0.6, 0.4]], 2) == pytest.approx(1.6 / 3)
    # 0/1 scores: the unbiased pass@k, row by row.
    correct = np.array([[1, 0, 0, 1, 0], [0, 0, 0, 0, 0]], dtype=bool)
    assert max_at_k(correct, 3) == pytest.approx(
        (unbiased_pass_at_k(5, 2, 3) + unbiased_pass_at_k(5, 0, 3)) / 2)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        expected_max_at_k([0.5], 2)
