"""Ant colony solvers in the ReEvo style, vectorised over the ants (numpy).

The LLM writes the heuristic matrix (how promising each edge / item pair is); these
trusted solvers turn it into solutions. Parameters are ReEvo's (ai4co/reevo,
problems/*_aco/aco.py and eval.py): an ant at i moves to j with probability proportional
to pheromone[i, j]**alpha * heuristic[i, j]**beta over the allowed moves; pheromone starts
at 1, evaporates by `decay` per iteration, and each ant deposits 1/cost (TSP, CVRP) or its
fitness / n_ants (BPP) on the edges (item pairs) of its solution. The best cost seen is
the result. Every run is seeded, so a heuristic's objective is a deterministic number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ACOParams:
    """One ACO configuration (ReEvo's defaults for TSP and CVRP)."""

    n_ants: int = 30
    n_iterations: int = 100
    alpha: float = 1.0
    beta: float = 1.0
    decay: float = 0.9


TSP_PARAMS = ACOParams()  # tsp_aco/eval.py: N_ANTS 30, N_ITERATIONS 100; aco.py: decay 0.9
CVRP_PARAMS = ACOParams()  # cvrp_aco/eval.py: same; capacity 50
# bpp_offline_aco/aco.py: 20 ants, decay 0.95; eval.py trains with 15 iterations, the test
# notebook runs 30 ants for 100 iterations.
BPP_TRAIN_PARAMS = ACOParams(n_ants=20, n_iterations=15, decay=0.95)
BPP_TEST_PARAMS = ACOParams(n_ants=30, n_iterations=100, decay=0.95)


def _sample_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row, with probability proportional to the row's weights (>= 0)."""
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1]
    bad = ~(np.isfinite(total) & (total > 0))
    if bad.any():  # underflow or overflow: uniform over the allowed entries
        allowed = (weights > 0) | ~np.isfinite(weights)
        cum[bad] = np.cumsum(allowed[bad], axis=1)
        total = cum[:, -1]
    u = rng.random(len(weights)) * total
    return np.minimum((cum <= u[:, None]).sum(axis=1), weights.shape[1] - 1)


def tsp_aco(dist: np.ndarray, heuristic: np.ndarray, params: ACOParams = TSP_PARAMS,
            seed: int = 0) -> float:
    """Shortest tour length found by the colony (ReEvo tsp_aco: random start per ant)."""
    n = len(dist)
    assert dist.shape == heuristic.shape == (n, n), (dist.shape, heuristic.shape)
    rng = np.random.default_rng(seed)
    pheromone = np.ones((n, n))
    heu_beta = heuristic**params.beta
    ants = np.arange(params.n_ants)
    best = np.inf
    for _ in range(params.n_iterations):
        attract = pheromone**params.alpha * heu_beta
        tours_an = np.empty((params.n_ants, n), dtype=np.int64)
        tours_an[:, 0] = rng.integers(n, size=params.n_ants)
        open_an = np.ones((params.n_ants, n), dtype=bool)
        open_an[ants, tours_an[:, 0]] = False
        for step in range(1, n):
            nxt = _sample_rows(attract[tours_an[:, step - 1]] * open_an, rng)
            tours_an[:, step] = nxt
            open_an[ants, nxt] = False
        succ_an = np.roll(tours_an, -1, axis=1)
        costs_a = dist[tours_an, succ_an].sum(axis=1)
        best = min(best, float(costs_a.min()))
        pheromone *= params.decay
        deposit = np.broadcast_to((1.0 / costs_a)[:, None], tours_an.shape)
        np.add.at(pheromone, (tours_an, succ_an), deposit)
        np.add.at(pheromone, (succ_an, tours_an), deposit)
    return best


def cvrp_aco(dist: np.ndarray, demand: np.ndarray, capacity: float, heuristic: np.ndarray,
             params: ACOParams = CVRP_PARAMS, seed: int = 0) -> float:
    """Shortest total route length found (node 0 the depot; ReEvo cvrp_aco's moves).

    An ant may go to an unvisited customer whose demand fits its remaining load, or to
    the depot, except straight back from the depot while customers remain. ReEvo sums
    the padding steps of ants that finished early at dist[0, 0] = 1 (its diagonal
    placeholder), which inflates its costs; here the cost is the true route length.
    """
    n = len(dist)
    assert dist.shape == heuristic.shape == (n, n) and demand.shape == (n,)
    assert demand[0] == 0 and demand.max() <= capacity, "depot demand 0, customers fit"
    rng = np.random.default_rng(seed)
    pheromone = np.ones((n, n))
    heu_beta = heuristic**params.beta
    a = params.n_ants
    ants = np.arange(a)
    best = np.inf
    for _ in range(params.n_iterations):
        attract = pheromone**params.alpha * heu_beta
        pos = np.zeros(a, dtype=np.int64)
        load = np.zeros(a)
        unvisited = np.ones((a, n), dtype=bool)
        unvisited[:, 0] = False
        cost = np.zeros(a)
        steps = [pos]
        while unvisited.any() or (pos != 0).any():
            remaining = unvisited.any(axis=1)
            allowed = unvisited & (demand[None, :] <= (capacity - load)[:, None])
            allowed[:, 0] = ~((pos == 0) & remaining)
            nxt = _sample_rows(attract[pos] * allowed, rng)
            moved = nxt != pos  # finished ants wait at the depot, at no cost
            cost += np.where(moved, dist[pos, nxt], 0.0)
            load = np.where(nxt == 0, 0.0, load + demand[nxt])
            unvisited[ants, nxt] = False
            pos = nxt
            steps.append(pos)
        route_as = np.stack(steps, axis=1)
        best = min(best, float(cost.min()))
        pheromone *= params.decay
        deposit = np.broadcast_to((1.0 / cost)[:, None], route_as[:, 1:].shape)
        np.add.at(pheromone, (route_as[:, :-1], route_as[:, 1:]), deposit)
        pheromone[pheromone < 1e-10] = 1e-10
    return best


def bpp_aco(demand: np.ndarray, capacity: int, heuristic: np.ndarray,
            params: ACOParams = BPP_TEST_PARAMS, seed: int = 0) -> int:
    """Fewest bins found (ReEvo bpp_offline_aco: items are packed bin by bin).

    A new bin takes a uniformly random item; then the next item is drawn among those that
    fit with weight mean_{k in bin}(pheromone*heuristic)[k, j] + 1e-5. When nothing fits
    the bin closes. Fitness = mean over bins of (fill / capacity)**2; each ant deposits
    fitness / n_ants on every pair of items sharing a bin.
    """
    n = len(demand)
    assert heuristic.shape == (n, n) and demand.max() <= capacity
    demand = demand.astype(np.float64)
    rng = np.random.default_rng(seed)
    pheromone = np.ones((n, n))
    a = params.n_ants
    ants = np.arange(a)
    best = n
    for _ in range(params.n_iterations):
        prob = pheromone**params.alpha * heuristic**params.beta
        bin_of_an = np.full((a, n), -1, dtype=np.int64)
        unplaced = np.ones((a, n), dtype=bool)
        bin_sum = np.zeros((a, n))  # sum of prob rows of the current bin's items
        count = np.zeros(a)
        vacancy = np.full(a, float(capacity))
        bins = np.zeros(a, dtype=np.int64)
        fill_sq = np.zeros(a)
        for _ in range(n):
            fits = unplaced & (demand[None, :] <= vacancy[:, None])
            full = ~fits.any(axis=1)
            if full.any():  # close the bin, open a new one
                fill_sq[full] += ((capacity - vacancy[full]) / capacity) ** 2
                bins[full] += 1
                vacancy[full] = capacity
                count[full] = 0
                bin_sum[full] = 0.0
                fits[full] = unplaced[full]
            mean = bin_sum / np.maximum(count, 1)[:, None] + 1e-5
            weights = np.where((count == 0)[:, None], 1.0, mean) * fits
            item = _sample_rows(weights, rng)
            bin_of_an[ants, item] = bins
            unplaced[ants, item] = False
            vacancy -= demand[item]
            count += 1
            bin_sum += prob[item]
        fill_sq += ((capacity - vacancy) / capacity) ** 2
        used = bins + 1
        fitness = fill_sq / used
        best = min(best, int(used.min()))
        delta = np.zeros((n, n))
        for k in range(a):
            same = bin_of_an[k][:, None] == bin_of_an[k][None, :]
            delta += same * (fitness[k] / a)
        pheromone = pheromone * params.decay + delta
    return best
