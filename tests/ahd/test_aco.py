"""ACO heuristic design: the colony solvers against brute force, the sandboxed harnesses,
hostile heuristics, and Table 14's Delta."""

import dataclasses
import itertools

import numpy as np
import pytest

from esopt.ahd import aco, aco_problems
from esopt.ahd.problems import PROBLEMS, evaluate
from esopt.report.ahd_tables import objective_ratio_gain
from esopt.runtime.sandbox import Outcome, SandboxLimits, run_sandboxed


def test_sampler_follows_the_weights_and_never_picks_a_zero():
    rng = np.random.default_rng(0)
    weights = np.tile([0.0, 1.0, 3.0, 0.0, 6.0], (20000, 1))
    picks = aco._sample_rows(weights, rng)
    counts = np.bincount(picks, minlength=5) / len(picks)
    assert counts[0] == counts[3] == 0
    np.testing.assert_allclose(counts[[1, 2, 4]], [0.1, 0.3, 0.6], atol=0.01)
    # A row whose weights underflowed to 0 falls back to uniform over... nothing allowed is
    # left, so it still returns an index in range.
    assert 0 <= aco._sample_rows(np.zeros((1, 4)), rng)[0] < 4


def _tsp_brute(dist):
    n = len(dist)
    return min(sum(dist[a, b] for a, b in itertools.pairwise((0, *p, 0)))
               for p in itertools.permutations(range(1, n)))


@pytest.mark.parametrize("seed", [0, 1])
def test_tsp_colony_finds_the_optimum_of_small_instances(seed):
    coords = np.random.default_rng(seed).random((8, 2))
    dist = aco_problems.distances(coords)
    true = dist.copy()
    np.fill_diagonal(true, 0)
    found = aco.tsp_aco(dist, 1 / dist, aco.ACOParams(n_iterations=30), seed=seed)
    assert found == pytest.approx(_tsp_brute(true), rel=1e-12)


def _cvrp_brute(dist, demand, cap):
    """Best over customer orders of the optimal split into capacity-feasible routes."""
    n = len(demand)
    best = np.inf
    for order in itertools.permutations(range(1, n)):
        cost = [0.0] + [np.inf] * (n - 1)  # cost[i]: first i customers of the order served
        for i in range(n - 1):
            load, length = 0.0, 0.0
            for j in range(i, n - 1):
                load += demand[order[j]]
                if load > cap:
                    break
                length = (dist[0, order[i]] if j == i else
                          length - dist[order[j - 1], 0] + dist[order[j - 1], order[j]])
                length += dist[order[j], 0]
                cost[j + 1] = min(cost[j + 1], cost[i] + length)
        best = min(best, cost[-1])
    return best


def test_cvrp_colony_finds_the_optimum_of_a_small_instance():
    rng = np.random.default_rng(3)
    coords = np.vstack([[0.5, 0.5], rng.random((6, 2))])
    demand = np.array([0, 4, 3, 5, 2, 6, 4], dtype=float)
    dist = aco_problems.distances(coords)
    true = dist.copy()
    np.fill_diagonal(true, 0)
    found = aco.cvrp_aco(dist, demand, 10, 1 / dist, aco.ACOParams(n_iterations=40), seed=0)
    assert found == pytest.approx(_cvrp_brute(true, demand, 10), rel=1e-12)


def test_bpp_colony_packs_a_perfect_instance_into_the_lower_bound():
    demand = np.array([100, 50, 90, 60, 75, 75, 120, 30, 149, 1])
    found = aco.bpp_aco(demand, 150, np.ones((10, 10)), aco.ACOParams(20, 30, decay=0.95))
    assert found == 5 == int(np.ceil(demand.sum() / 150))


def _direct_matrix(name, inst):
    if name == "bpp_offline_aco":
        return np.tile(inst / inst.max(), (len(inst), 1))
    return 1 / aco_problems.distances(inst if name == "tsp_aco" else inst[:, 1:])


@pytest.mark.parametrize("name, split", [("tsp_aco", "val20"), ("cvrp_aco", "val20"),
                                         ("bpp_offline_aco", "val120")])
def test_seed_heuristics_run_sandboxed_and_score_as_in_the_parent(name, split):
    problem = PROBLEMS[name]
    data = problem.data(split)[:2]
    split = "train"  # small instances, scored with the training colony (BPP: 15 iterations)
    result = run_sandboxed(problem.greedy_source, problem.harness, problem.payload(data))
    assert result.ok, result.stderr
    sandboxed = problem.objective(result.value, data, split)
    direct = problem.objective([aco_problems._encode(_direct_matrix(name, d), len(d))
                                for d in data], data, split)
    assert sandboxed == direct and np.isfinite(sandboxed)


def test_evaluate_scores_the_whole_split_in_chunks():
    data = PROBLEMS["tsp_aco"].data("val20")[:5]
    problem = dataclasses.replace(PROBLEMS["tsp_aco"], chunk=2,
                                  data=lambda split, root=None: data)
    ev = evaluate(problem, problem.greedy_source, "val20")  # 3 sandbox calls: 2 + 2 + 1
    assert ev.ok, ev.detail
    assert ev.objective == problem.objective(
        [aco_problems._encode(_direct_matrix("tsp_aco", d), 20) for d in data], data, "val20")


HOSTILE = {
    "nan": ("def heuristics(distance_matrix):\n    return distance_matrix * float('nan')\n",
            Outcome.WRONG_TYPE),
    "shape": ("def heuristics(distance_matrix):\n    return distance_matrix[:3]\n",
              Outcome.WRONG_TYPE),
    "text": ("def heuristics(distance_matrix):\n    return 'edges'\n", Outcome.WRONG_TYPE),
    "loop": ("def heuristics(distance_matrix):\n    while True:\n        pass\n",
             Outcome.TIMEOUT),
    "write": ("def heuristics(distance_matrix):\n    open('/tmp/esopt-aco-escape', 'w')\n"
              "    return distance_matrix\n", Outcome.FORBIDDEN),
    "raise": ("def heuristics(distance_matrix):\n    raise ValueError('no')\n",
              Outcome.EXCEPTION),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_heuristics_are_contained_and_typed(case):
    source, outcome = HOSTILE[case]
    ev = evaluate(PROBLEMS["tsp_aco"], source, "train", SandboxLimits(wall_s=5, cpu_s=3))
    assert ev.outcome is outcome, ev.detail


def test_table14_delta_is_eoh_over_esopt_minus_one():
    # The paper's Table 14, T=1000: TSP50 6.030 vs 5.882 (2.53%), CVRP100 15.666 vs 16.073.
    assert objective_ratio_gain(6.030, 5.882) == pytest.approx(0.0252, abs=1e-4)
    assert objective_ratio_gain(15.666, 16.073) == pytest.approx(-0.0253, abs=1e-4)
    assert np.isnan(objective_ratio_gain(float("nan"), 5.0))
