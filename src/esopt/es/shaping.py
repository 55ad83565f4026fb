"""Fitness shaping: raw rewards of the valid directions -> update weights w_i."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# The paper's population z-score: (r - mean) / (std + eps), population std (ddof 0).
ZSCORE_EPS = 1e-8


def zscore(rewards_n: np.ndarray, eps: float = ZSCORE_EPS) -> np.ndarray:
    """Population z-score with ddof 0; all-equal rewards give exactly zero weights."""
    r = np.asarray(rewards_n, dtype=np.float64)
    assert r.ndim == 1, f"rewards must be 1-D, got shape {r.shape}"
    centered = r - r.mean()
    std = r.std(ddof=0)
    if std == 0.0:
        # mean of equal floats can differ from them by an ulp; the intent is exact zeros.
        return np.zeros_like(r)
    return centered / (std + eps)


def centered_ranks(rewards_n: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5] (Salimans et al.); ties share their average rank."""
    r = np.asarray(rewards_n, dtype=np.float64)
    assert r.ndim == 1, f"rewards must be 1-D, got shape {r.shape}"
    n = r.size
    if n < 2:
        return np.zeros_like(r)
    order = np.argsort(r, kind="stable")
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n, dtype=np.float64)
    # Average the ranks of tied values so equal rewards get equal weights (and an
    # all-equal population gets a zero update, as with the z-score).
    _, inverse, counts = np.unique(r, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    ranks = sums[inverse] / counts[inverse]
    return ranks / (n - 1) - 0.5


SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "zscore": zscore,
    "centered_rank": centered_ranks,
}


def get_shaping(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Look a shaping function up by name."""
    try:
        return SHAPINGS[name]
    except KeyError:
        raise ValueError(f"shaping: unknown {name!r}; choose one of {sorted(SHAPINGS)}") from None
