"""AHD problems: generators, exact references against brute force, the paper's rows."""

import itertools

import numpy as np
import pytest

from esopt.ahd import asp, kp, tsp
from esopt.ahd.problems import PROBLEMS, evaluate, get_problem
from esopt.runtime.sandbox import InvalidSolution, Outcome

# Table 5 of the paper (Greedy Construct and Optimal rows) and its 0.5% tolerance.
PAPER_GREEDY = {("kp_constructive", "test50"): 19.9850, ("kp_constructive", "test100"): 40.2250,
                ("tsp_constructive", "test20"): 4.4797}
PAPER_OPTIMUM = {"test50": 20.037, "test100": 40.271}


@pytest.mark.parametrize("n", [5, 7, 8])
def test_held_karp_equals_brute_force(n):
    rng = np.random.default_rng(n)
    for _ in range(3):
        dist = tsp.distance_matrix(rng.random((n, 2)))
        assert tsp.held_karp(dist) == pytest.approx(tsp.brute_force(dist), rel=1e-12)


def test_lkh_finds_the_held_karp_optimum_on_small_instances():
    rng = np.random.default_rng(0)
    for _ in range(3):
        coords = rng.random((12, 2))
        assert tsp.lkh_length(coords) == pytest.approx(tsp.held_karp(tsp.distance_matrix(coords)))


def test_tsp_splits_follow_the_generation_order():
    coords = np.random.RandomState(1234)
    train, val, test20 = coords.rand(64, 50, 2), coords.rand(64, 50, 2), coords.rand(64, 20, 2)
    np.testing.assert_array_equal(tsp.instances("train"), train)
    np.testing.assert_array_equal(tsp.instances("val"), val)
    np.testing.assert_array_equal(tsp.instances("test20"), test20)
    with pytest.raises(ValueError, match="unknown TSP split"):
        tsp.instances("test7")


def test_kp_dp_optimum_equals_brute_force():
    rng = np.random.default_rng(1)
    for n in (6, 10, 13):
        items = np.round(rng.random((n, 2)), 4)  # on the DP's 1e-4 grid: the DP is exact
        cap = n / 4
        assert kp.optimum(items, cap) == pytest.approx(kp.brute_force(items, cap), abs=1e-12)


@pytest.mark.parametrize("split", ["test50", "test100"])
def test_kp_optimum_row_is_reproduced(split):
    data = kp.instances(split)
    assert data.shape == (1000, int(split[4:]), 2)
    mean_optimum = np.mean([kp.optimum(items, kp.capacity(len(items))) for items in data])
    assert mean_optimum == pytest.approx(PAPER_OPTIMUM[split], abs=0.0015)


@pytest.mark.parametrize("problem, split", sorted(PAPER_GREEDY))
def test_greedy_rows_are_within_half_a_percent(problem, split):
    problem = get_problem(problem)
    result = evaluate(problem, problem.greedy_source, split)
    assert result.ok, result.detail
    assert result.objective == pytest.approx(PAPER_GREEDY[(problem.name, split)], rel=5e-3)


def _slow_admissible_size(n, w, scores):
    """FunSearch's loop-based greedy, written plainly, as the reference for the vector one."""
    weight = asp.INT_TO_WEIGHT.tolist()
    bad = set(asp.BAD_TRIPLES)
    children = [tuple(c) for c in asp.valid_children(n, w).tolist()]
    alive = list(range(len(children)))
    kept = []
    while alive:
        best = max(alive, key=lambda i: (scores[i], -i))
        new = children[best]
        survivors = []
        for i in alive:
            c = children[i]
            if all(weight[x] <= weight[y] for x, y in zip(new, c, strict=True)):
                continue
            if all(weight[x] >= weight[y] for x, y in zip(new, c, strict=True)):
                continue
            triples = (zip(children[k], new, c, strict=True) for k in kept)
            if any(all(tuple(sorted(t)) in bad for t in group) for group in triples):
                continue
            survivors.append(i)
        kept.append(best)
        alive = survivors
    return sum(3 ** sum(1 <= x <= 4 for x in children[k]) for k in kept)


@pytest.mark.parametrize("n, w, seed", [(12, 7, 0), (12, 7, 1), (15, 10, 2)])
def test_vectorised_admissible_greedy_equals_the_loop(n, w, seed):
    scores = np.random.default_rng(seed).random(len(asp.valid_children(n, w)))
    assert asp.admissible_size(n, w, scores) == _slow_admissible_size(n, w, scores)


def test_admissible_sets_are_admissible():
    # Expand a greedy set and check the definition directly on every triple of vectors.
    pre = asp.greedy_admissible(asp.valid_children(6, 4), np.zeros(len(asp.valid_children(6, 4))))
    vectors = set()
    for row in pre.tolist():
        options = [{asp.TRIPLES[x][r:] + asp.TRIPLES[x][:r] for r in range(3)} for x in row]
        vectors |= {sum(p, ()) for p in itertools.product(*options)}
    assert len(vectors) == asp.expanded_size(pre)
    allowed = {(0, 1, 2), (0, 0, 1), (0, 0, 2)}  # sorted values in some coordinate
    for a, b, c in itertools.combinations(sorted(vectors), 3):
        assert any(tuple(sorted(t)) in allowed for t in zip(a, b, c, strict=True)), (a, b, c)


def test_invalid_solutions_are_rejected_in_the_parent():
    coords = tsp.instances("test20")[:1]
    with pytest.raises(InvalidSolution):
        tsp.tour_lengths(coords, [[0] * 20])
    items = kp.instances("test50")[:1]
    with pytest.raises(InvalidSolution, match="over capacity"):
        kp.packing_values(items, [list(range(50))])
    with pytest.raises(InvalidSolution, match="twice"):
        kp.packing_values(items, [[1, 1]])


@pytest.mark.parametrize(
    "name, source, outcome",
    [
        ("tsp_constructive", "def select_next_node(current_node, destination_node, "
         "unvisited_nodes, distance_matrix):\n    return current_node\n", Outcome.INVALID_SOLUTION),
        ("tsp_constructive", "def select_next_node(current_node, destination_node, "
         "unvisited_nodes, distance_matrix):\n    return 1.0\n", Outcome.WRONG_TYPE),
        ("kp_constructive", "def select_next_item(remaining_capacity, weights, values):\n"
         "    return len(weights) + 3\n", Outcome.INVALID_SOLUTION),
        ("asp_constructive", "def priority(el, n, w):\n    return 'high'\n", Outcome.WRONG_TYPE),
        ("asp_constructive", "def priority(el, n, w):\n    return sum(el)\n", Outcome.OK),
    ],
)
def test_candidate_failures_are_typed(name, source, outcome):
    problem = PROBLEMS[name]
    assert evaluate(problem, source, problem.train_split).outcome is outcome


@pytest.mark.parametrize("problem, value", [
    ("tsp_constructive", [[0.0] + [float(i) for i in range(1, 50)]] * 64),  # floats
    ("tsp_constructive", [[True] * 50] * 64),
    ("tsp_constructive", "not a list"),
    ("kp_constructive", [[0.5]] * 64),
    ("kp_constructive", [[[1, 2]]] * 64),
    ("tsp_aco", [17] * 5),  # one part's value is not a list of matrices
    ("asp_constructive", [[1, 2]] * 2432),
])
def test_a_malformed_result_is_a_typed_failure_of_that_candidate(monkeypatch, problem, value):
    from esopt.ahd import problems as problems_module
    from esopt.runtime.sandbox import SandboxResult

    monkeypatch.setattr(problems_module, "run_sandboxed",
                        lambda *a, **k: SandboxResult(Outcome.OK, value=value, mode="isolated"))
    p = problems_module.get_problem(problem)
    ev = problems_module.evaluate(p, p.greedy_source, p.train_split)
    assert ev.outcome in (Outcome.WRONG_TYPE, Outcome.INVALID_SOLUTION), ev
    assert ev.sandbox == "isolated"
