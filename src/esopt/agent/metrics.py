"""Sampling metrics over k attempts per problem: Mean@k, Pass@k, unbiased best-of-k."""

from __future__ import annotations

from math import comb

import numpy as np


def mean_at_k(correct_pk: np.ndarray) -> float:
    """Mean over problems of the mean pass@1 of k samples; correct_pk is (problems, k)."""
    correct_pk = np.asarray(correct_pk, dtype=bool)
    assert correct_pk.ndim == 2, correct_pk.shape
    return float(correct_pk.mean())


def pass_at_k(correct_pk: np.ndarray) -> float:
    """Share of problems with at least one correct sample among their k."""
    correct_pk = np.asarray(correct_pk, dtype=bool)
    assert correct_pk.ndim == 2, correct_pk.shape
    return float(correct_pk.any(axis=1).mean())


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k draws without replacement from n samples, c correct, is correct).

    1 - C(n-c, k) / C(n, k) (Chen et al. 2021); requires k <= n.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def best_of_k_curve(correct_pn: np.ndarray, ks=(1, 2, 4, 8, 16, 32)) -> dict[int, float]:
    """Figure 8: mean unbiased pass@k over problems, for each k <= samples per problem."""
    correct_pn = np.asarray(correct_pn, dtype=bool)
    n = correct_pn.shape[1]
    counts = correct_pn.sum(axis=1)
    return {k: float(np.mean([unbiased_pass_at_k(n, int(c), k) for c in counts]))
            for k in ks if k <= n}


def expected_max_at_k(scores_n, k: int) -> float:
    """E[max of k of the n scores drawn without replacement]: score i of the ascending
    order is the maximum with probability C(i, k-1) / C(n, k) (i = 0..n-1). For 0/1 scores
    it is the unbiased pass@k; for ANLS, Max@k; with k = n, the plain maximum."""
    s = np.sort(np.asarray(scores_n, dtype=np.float64))
    n = s.size
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    weights = np.array([comb(i, k - 1) for i in range(n)], dtype=np.float64) / comb(n, k)
    return float(weights @ s)


def max_at_k(scores_pn, k: int) -> float:
    """Mean over problems of expected_max_at_k of each problem's n samples; scores_pn is
    (problems, n), n >= k (Max@k of ANLS, Pass@k of 0/1 accuracy)."""
    scores_pn = np.asarray(scores_pn, dtype=np.float64)
    assert scores_pn.ndim == 2, scores_pn.shape
    return float(np.mean([expected_max_at_k(row, k) for row in scores_pn]))
