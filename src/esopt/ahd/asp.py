"""Admissible sets (FunSearch's cap-set relative): `priority(el, n, w) -> float`.

A symmetric constant-weight admissible set I(n, w) is built from n/3 groups; each group
takes one of 7 triples, so a candidate ("child") is a vector in {0..6}^(n/3) of total
weight w. The LLM's `priority` orders the children; a greedy pass keeps each child that
stays admissible with everything kept so far; the score is the size of the expanded set
(each non-constant triple contributes its 3 rotations). Conventions follow FunSearch
(Romera-Paredes et al., Nature 625, 2024) as packaged by MCTS-AHD.

The greedy pass is vectorised over children (the (21, 15) instance has ~10^5 of them):
seconds, not minutes.
"""

from __future__ import annotations

import math

import numpy as np

from esopt.ahd.common import call_many
from esopt.runtime.sandbox import WrongType

TRIPLES = ((0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 2), (0, 2, 1), (1, 1, 1), (2, 2, 2))
INT_TO_WEIGHT = np.array([0, 1, 1, 2, 2, 3, 3])
# Sorted value triples (one per group, across three set elements) that make a triple of
# elements inadmissible in that group; 35 of the 84 sorted triples over {0..6}.
BAD_TRIPLES = (
    (0, 0, 0), (0, 1, 1), (0, 2, 2), (0, 3, 3), (0, 4, 4), (0, 5, 5), (0, 6, 6), (1, 1, 1),
    (1, 1, 2), (1, 2, 2), (1, 2, 3), (1, 2, 4), (1, 3, 3), (1, 4, 4), (1, 5, 5), (1, 6, 6),
    (2, 2, 2), (2, 3, 3), (2, 4, 4), (2, 5, 5), (2, 6, 6), (3, 3, 3), (3, 3, 4), (3, 4, 4),
    (3, 4, 5), (3, 4, 6), (3, 5, 5), (3, 6, 6), (4, 4, 4), (4, 5, 5), (4, 6, 6), (5, 5, 5),
    (5, 5, 6), (5, 6, 6), (6, 6, 6),
)
# Best known sizes, FunSearch (Romera-Paredes et al. 2024), Table/Fig. on admissible sets:
# I(12,7)=792, I(15,10)=3003, I(21,15)=43596, I(24,17)=237984.
BEST_KNOWN = {(12, 7): 792, (15, 10): 3003, (21, 15): 43596, (24, 17): 237984}
INSTANCES = {"train": (15, 10), "n15w10": (15, 10), "n21w15": (21, 15)}


def _bad_table() -> np.ndarray:
    bad = np.zeros((7, 7, 7), dtype=bool)
    for a, b, c in BAD_TRIPLES:
        for x, y, z in ((a, b, c), (a, c, b), (b, a, c), (b, c, a), (c, a, b), (c, b, a)):
            bad[x, y, z] = True
    return bad


BAD = _bad_table()
assert len(set(BAD_TRIPLES)) == 35 and all(list(t) == sorted(t) for t in BAD_TRIPLES)


def valid_children(n: int, w: int) -> np.ndarray:
    """All children of weight w, (m, n/3) int8, in itertools.product(range(7)) order."""
    if n % 3:
        raise ValueError(f"n must be a multiple of 3, got {n}")
    groups = n // 3
    codes = np.arange(7**groups)
    digits = np.stack(np.unravel_index(codes, (7,) * groups), axis=1).astype(np.int8)
    return digits[INT_TO_WEIGHT[digits].sum(axis=1) == w]


def child_elements(children: np.ndarray) -> np.ndarray:
    """Each child as the n-vector `el` passed to `priority`: its groups' triples concatenated."""
    triples = np.array(TRIPLES, dtype=np.int8)
    return triples[children].reshape(len(children), -1)


def greedy_admissible(children: np.ndarray, scores: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """Greedy pre-admissible set: repeatedly keep the best-scored surviving child."""
    m, groups = children.shape
    assert scores.shape == (m,), (scores.shape, m)
    weights = INT_TO_WEIGHT[children]
    alive = np.arange(m)
    kept: list[int] = []
    while alive.size:
        best = alive[np.argmax(scores[alive])]  # first maximum, as np.argmax in FunSearch
        new = children[best]
        w_alive = weights[alive]
        dominated = (INT_TO_WEIGHT[new] <= w_alive).all(1) | (INT_TO_WEIGHT[new] >= w_alive).all(1)
        survivors = alive[~dominated]
        if kept and survivors.size:
            # Invalid if, with some kept x, every group's (x, new, child) triple is bad.
            masks = BAD[children[kept], new]  # (k, groups, 7)
            step = max(1, chunk // (len(kept) * groups))
            bad_any = np.zeros(survivors.size, dtype=bool)
            for lo in range(0, survivors.size, step):
                block = children[survivors[lo: lo + step]]  # (a, groups)
                all_bad = np.ones((len(kept), len(block)), dtype=bool)
                for g in range(groups):
                    all_bad &= masks[:, g, block[:, g]]
                bad_any[lo: lo + step] = all_bad.any(0)
            survivors = survivors[~bad_any]
        kept.append(int(best))
        alive = survivors
    return children[kept]


def expanded_size(pre_admissible: np.ndarray) -> int:
    """Size of the admissible set that the pre-admissible rows expand to (3 rotations each)."""
    rotating = (pre_admissible >= 1) & (pre_admissible <= 4)
    return int((3 ** rotating.sum(axis=1)).sum())


def admissible_size(n: int, w: int, scores: np.ndarray) -> int:
    """Objective: size of the greedy admissible set for the given child scores (maximise)."""
    return expanded_size(greedy_admissible(valid_children(n, w), scores))


def harness(namespace: dict, payload: dict) -> list[float]:
    """Child side: the candidate's priority of every child, in enumeration order."""
    priority = namespace.get("priority")
    if not callable(priority):
        raise WrongType("the code defines no function 'priority'")
    n, w = payload["n"], payload["w"]
    scores = []
    calls = [((tuple(el), n, w), {}) for el in child_elements(valid_children(n, w)).tolist()]
    for value in call_many(priority, calls):
        try:
            value = float(value)
        except (TypeError, ValueError) as e:
            raise WrongType(f"priority returned {type(value).__name__}, not a number") from e
        if not math.isfinite(value):
            raise WrongType(f"priority returned {value}")
        scores.append(value)
    return scores


def objective(scores: list[float], n: int, w: int) -> float:
    """Parent side: validate the scores and run the trusted greedy construction."""
    scores = np.asarray(scores, dtype=np.float64)
    expected = len(valid_children(n, w))
    if scores.shape != (expected,):
        raise WrongType(f"expected {expected} scores, got shape {scores.shape}")
    return float(admissible_size(n, w, scores))
