"""TSP, constructive: `select_next_node(current_node, destination_node, unvisited_nodes,
distance_matrix) -> int`, tour from node 0, length minimised.

Instances follow the ReEvo/MCTS-AHD generator: points uniform in [0, 1]^2 drawn from one
`np.random.seed(1234)` stream in this order: train (64 x N=50), val (64 x N=50), then test
sets of 64 instances for N = 20, 50, 100, 200. The order matters: test20 is the third draw.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from esopt.ahd.common import as_index, call_many, frozen, index_array, uniform_split
from esopt.runtime.sandbox import InvalidSolution, WrongType

SEED = 1234
# (split, n_instances, n_nodes), in generation order.
SPLITS = (("train", 64, 50), ("val", 64, 50), ("test20", 64, 20), ("test50", 64, 50),
          ("test100", 64, 100), ("test200", 64, 200))

GREEDY_SOURCE = '''\
def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    """Nearest neighbour."""
    return min(unvisited_nodes, key=lambda node: distance_matrix[current_node][node])
'''


@functools.cache
def instances(split: str) -> np.ndarray:
    """Node coordinates of a split, (n_instances, n_nodes, 2) float64."""
    return uniform_split(SEED, SPLITS, split, "TSP")


def distance_matrix(coords: np.ndarray) -> np.ndarray:
    """Euclidean distances, (n, n)."""
    assert coords.ndim == 2 and coords.shape[1] == 2, coords.shape
    diff = coords[:, None, :] - coords[None, :, :]
    return np.sqrt((diff**2).sum(-1))


def harness(namespace: dict, payload: dict) -> list[list[int]]:
    """Trusted side: build one tour per instance with the candidate's select_next_node,
    one step of every instance per round trip into the sandbox (the instances are
    interleaved: a heuristic that keeps state between calls sees them in that order)."""
    select = namespace.get("select_next_node")
    if not callable(select):
        raise WrongType("the code defines no function 'select_next_node'")
    dists = [frozen(distance_matrix(coords)) for coords in payload["instances"]]
    tours = [[0] for _ in dists]
    unvisited = [set(range(1, len(d))) for d in dists]
    for _ in range(max((len(d) for d in dists), default=1) - 1):
        active = [i for i, u in enumerate(unvisited) if u]
        calls = [((), {"current_node": tours[i][-1], "destination_node": 0,
                       "unvisited_nodes": set(unvisited[i]), "distance_matrix": dists[i]})
                 for i in active]
        for i, chosen in zip(active, call_many(select, calls), strict=True):
            node = as_index(chosen, "select_next_node")
            if node not in unvisited[i]:
                raise InvalidSolution(f"node {node} is visited or out of range")
            tours[i].append(node)
            unvisited[i].remove(node)
    return tours


def tour_lengths(coords: np.ndarray, tours) -> np.ndarray:
    """Parent side: validate that each tour is a permutation from 0 and return its length."""
    if not isinstance(tours, list) or len(tours) != len(coords):
        raise InvalidSolution(f"{len(tours) if isinstance(tours, list) else 'no'} tours for "
                              f"{len(coords)} instances")
    lengths = np.empty(len(coords))
    for i, (points, tour) in enumerate(zip(coords, tours, strict=True)):
        tour = index_array(tour, f"instance {i}")
        n = len(points)
        if tour.shape != (n,) or tour[0] != 0 or sorted(tour.tolist()) != list(range(n)):
            raise InvalidSolution(f"instance {i}: not a tour from node 0 over {n} nodes")
        dist = distance_matrix(points)
        lengths[i] = dist[tour, np.roll(tour, -1)].sum()
    return lengths


def held_karp(dist: np.ndarray) -> float:
    """Exact shortest tour length by the Held-Karp dynamic programme (n <= ~21)."""
    n = len(dist)
    assert dist.shape == (n, n) and n >= 2, dist.shape
    if n == 2:
        return float(dist[0, 1] + dist[1, 0])
    m = n - 1  # nodes 1..n-1 are bits 0..m-1; the tour starts and ends at node 0
    d = dist[1:, 1:]
    best = np.full((1 << m, m), np.inf)
    best[1 << np.arange(m), np.arange(m)] = dist[0, 1:]  # paths 0 -> j
    masks = np.arange(1 << m)
    popcount = np.array([bin(x).count("1") for x in range(1 << m)])
    for size in range(2, m + 1):
        layer = masks[popcount == size]
        for j in range(m):
            ends_j = layer[(layer >> j) & 1 == 1]
            prev = ends_j ^ (1 << j)
            best[ends_j, j] = (best[prev] + d[:, j]).min(axis=1)
    return float((best[(1 << m) - 1] + dist[1:, 0]).min())


def brute_force(dist: np.ndarray) -> float:
    """Exact tour length by enumeration (tests only, n <= 9)."""
    best = np.inf
    for order in itertools.permutations(range(1, len(dist))):
        route = (0, *order, 0)
        best = min(best, sum(dist[a, b] for a, b in itertools.pairwise(route)))
    return float(best)


def lkh_length(coords: np.ndarray, runs: int = 10, scale: float = 1e6) -> float:
    """A strong (near-optimal) tour from LKH-3 (the `elkai` package), float length."""
    import elkai  # optional at import time: only the reference rows need it

    dist = distance_matrix(coords)
    # LKH works on integers: scale so that rounding moves a 50-node tour by < 1e-4.
    tour = elkai.DistanceMatrix(np.rint(dist * scale).astype(np.int64).tolist()).solve_tsp(runs)
    tour = np.asarray(tour[:-1])
    return float(dist[tour, np.roll(tour, -1)].sum())
