"""0/1 knapsack, constructive: `select_next_item(remaining_capacity, weights, values) -> int`
over the items still unpacked; total value maximised.

Instances follow MCTS-AHD: weights and values U(0, 1) from one `np.random.seed(3333)`
stream in this order: train (64 x N=100), val (64 each for N = 50, 100, 200), test (1000
each for N = 50, 100, 200, 500). Capacity is 12.5 for N=50 and 25 otherwise. A pick is
legal when it fits within a 1e-3 tolerance, and packing goes on while the lightest
remaining item fits (the MCTS-AHD evaluator's rule).
"""

from __future__ import annotations

import functools

import numpy as np

from esopt.ahd.common import as_index, call_many, frozen, index_array, uniform_split
from esopt.runtime.sandbox import InvalidSolution, WrongType

SEED = 3333
TOLERANCE = 1e-3
SPLITS = (("train", 64, 100), ("val50", 64, 50), ("val100", 64, 100), ("val200", 64, 200),
          ("test50", 1000, 50), ("test100", 1000, 100), ("test200", 1000, 200),
          ("test500", 1000, 500))

GREEDY_SOURCE = '''\
import numpy as np

def select_next_item(remaining_capacity, weights, values):
    """Best value per weight among the items that fit."""
    ratio = np.where(weights <= remaining_capacity + 1e-3, values / weights, -np.inf)
    return int(np.argmax(ratio))
'''


def capacity(n_items: int) -> float:
    return 12.5 if n_items == 50 else 25.0


@functools.cache
def instances(split: str) -> np.ndarray:
    """(n_instances, n_items, 2) float64: [..., 0] is weight, [..., 1] is value."""
    return uniform_split(SEED, SPLITS, split, "KP")


def harness(namespace: dict, payload: dict) -> list[list[int]]:
    """Trusted side: pack each instance with the candidate; returns the packed item
    indices. One step of every unfinished instance per round trip into the sandbox."""
    select = namespace.get("select_next_item")
    if not callable(select):
        raise WrongType("the code defines no function 'select_next_item'")
    states = []
    for items in payload["instances"]:
        states.append({"weights": items[:, 0].copy(), "values": items[:, 1].copy(),
                       "index": np.arange(len(items)), "remaining": capacity(len(items)),
                       "packed": []})

    def open_(s):
        return len(s["weights"]) and s["remaining"] + TOLERANCE > s["weights"].min()

    while active := [s for s in states if open_(s)]:
        calls = [((), {"remaining_capacity": s["remaining"], "weights": frozen(s["weights"]),
                       "values": frozen(s["values"])}) for s in active]
        for s, chosen in zip(active, call_many(select, calls), strict=True):
            choice = as_index(chosen, "select_next_item")
            weights = s["weights"]
            if not 0 <= choice < len(weights) or weights[choice] > s["remaining"] + TOLERANCE:
                raise InvalidSolution(f"item {choice} does not fit or does not exist")
            s["packed"].append(int(s["index"][choice]))
            s["remaining"] -= weights[choice]
            keep = np.arange(len(weights)) != choice
            s["weights"], s["values"] = weights[keep], s["values"][keep]
            s["index"] = s["index"][keep]
    return [s["packed"] for s in states]


def packing_values(data: np.ndarray, packings) -> np.ndarray:
    """Parent side: validate each packing (distinct items, within capacity) and sum values."""
    if not isinstance(packings, list) or len(packings) != len(data):
        raise InvalidSolution(f"{len(packings) if isinstance(packings, list) else 'no'} "
                              f"packings for {len(data)} instances")
    totals = np.empty(len(data))
    for i, (items, packed) in enumerate(zip(data, packings, strict=True)):
        packed = index_array(packed, f"instance {i}")
        if packed.size and (packed.min() < 0 or packed.max() >= len(items)):
            raise InvalidSolution(f"instance {i}: item index out of range")
        if len(set(packed.tolist())) != packed.size:
            raise InvalidSolution(f"instance {i}: an item is packed twice")
        if items[packed, 0].sum() > capacity(len(items)) + TOLERANCE:
            raise InvalidSolution(f"instance {i}: over capacity")
        totals[i] = items[packed, 1].sum()
    return totals


def optimum(items: np.ndarray, cap: float, scale: int = 10_000) -> float:
    """Optimum by integer DP over weights rounded to 1/`scale` (the paper's reference rows).

    Exact for the instance with weights rounded to 1e-4; against the real weights the
    packing may overshoot the capacity by at most n * 0.5e-4, the size of the rounding.
    """
    weights = np.rint(items[:, 0] * scale).astype(np.int64)
    values = items[:, 1]
    c = int(round(cap * scale))
    best = np.zeros(c + 1)
    for w, v in zip(weights, values, strict=True):
        if w == 0:
            best += v
        elif w <= c:
            np.maximum(best[w:], best[:-w] + v, out=best[w:])
    return float(best[-1])


def brute_force(items: np.ndarray, cap: float) -> float:
    """Exact optimum by enumeration of subsets (tests only, n <= 16)."""
    n = len(items)
    masks = np.arange(1 << n)[:, None] >> np.arange(n) & 1
    weight, value = masks @ items[:, 0], masks @ items[:, 1]
    return float(value[weight <= cap].max())
