"""Sample/EoH search mechanics and their ES co-evolution, on a real (tiny) policy."""

import math

import numpy as np
import pytest
import torch

from esopt.ahd.problems import PROBLEMS
from esopt.chat import SamplingParams
from esopt.context.search import (
    Candidate,
    SearchConfig,
    _Search,
    manage_population,
    penalised,
    rank_select,
    run_search,
)
from esopt.es.noise import add_noise_sum_
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig

KP = PROBLEMS["kp_constructive"]


def cand(index, objective, outcome="ok"):
    return Candidate(index, 0, "m1", -1, math.nan, "", "", outcome, objective, "", 0, 0.0, 0.0)


def test_penalty_is_min_minus_std_of_the_valid_rewards():
    rewards = penalised([1.0, float("nan"), 3.0, float("nan")])
    np.testing.assert_allclose(rewards, [1.0, 0.0, 3.0, 0.0])  # min 1 - std 1
    np.testing.assert_allclose(penalised([2.0, float("nan")]), [2.0, 1.0])  # one valid: -1
    np.testing.assert_array_equal(penalised([float("nan")] * 3), [0.0, 0.0, 0.0])


def test_rank_selection_prefers_better_ranks_as_eoh():
    population = [cand(i, float(i)) for i in range(10)]
    rng = np.random.default_rng(0)
    picks = np.bincount([rank_select(population, 1, rng)[0].index for _ in range(20000)],
                        minlength=10) / 20000
    expected = (1 / (np.arange(10) + 11)) / (1 / (np.arange(10) + 11)).sum()
    np.testing.assert_allclose(picks, expected, atol=0.01)
    assert len({c.index for c in rank_select(population, 2, rng)}) == 2


def test_population_is_the_best_distinct_valid_members():
    members = [cand(0, 5.0), cand(1, 7.0), cand(2, 7.0), cand(3, 9.0, "exception"), cand(4, 6.0)]
    kept = manage_population(KP, members, 2)  # KP maximises
    assert [c.index for c in kept] == [1, 4]


def test_search_config_checks_the_es_population_and_counts_updates():
    es = ESConfig(population_size=20)
    assert SearchConfig("tsp_constructive", budget=1000, batch_size=20, es=es).es_updates == 50
    eoh = SearchConfig("tsp_constructive", "eoh", budget=1000, pop_size=10,
                       es=ESConfig(population_size=10))
    assert eoh.es_updates == 50  # 25 generations x (m1 + m2), Table 13
    with pytest.raises(ValueError, match="population_size"):
        SearchConfig("tsp_constructive", budget=40, batch_size=8, es=es)
    with pytest.raises(ValueError, match="unknown AHD problem"):
        SearchConfig("vrp")


def test_eoh_k3_is_table13s_t2000_block():
    # 25 generations x 10 (2 + 2k) = 80 candidates; m1 and m2 have 30 offspring each, the
    # 30 directions of one ES update; 50 updates.
    cfg = SearchConfig("tsp_aco", "eoh", budget=2000, pop_size=10, mutation_factor=3,
                       es=ESConfig(population_size=30))
    assert cfg.directions == 30 and cfg.es_updates == 50
    assert [cfg.offspring(op) for op in ("e1", "e2", "m1", "m2")] == [10, 10, 30, 30]
    with pytest.raises(ValueError, match=r"population_size must equal .* \(30\)"):
        SearchConfig("tsp_aco", "eoh", budget=2000, pop_size=10, mutation_factor=3,
                     es=ESConfig(population_size=10))


def _es(directions, updates):
    return ESConfig(population_size=directions, alpha=1e-3,
                    sigma=SigmaSchedule("cosine", 1e-3, 1e-4, updates))


def test_sample_with_es_spends_the_budget_and_records_every_proposal(tiny_policy):
    cfg = SearchConfig("kp_constructive", budget=6, batch_size=3, prefill=True,
                       sampling=SamplingParams(max_new_tokens=8, temperature=1.0),
                       es=_es(3, 2))
    before = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    result = run_search(tiny_policy, cfg)
    assert len(result.candidates) == 6 and len(result.updates) == 2
    assert [c.direction for c in result.candidates] == [0, 1, 2, 0, 1, 2]
    assert all(c.outcome != "ok" for c in result.candidates)  # a random model writes no code
    # No valid proposal: all rewards equal, so the ES updates are zero and weights stay.
    assert all(not any(u["weights"]) for u in result.updates)
    after = tiny_policy.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_eoh_reseeds_when_nothing_is_valid_and_still_ends(tiny_policy):
    cfg = SearchConfig("kp_constructive", "eoh", budget=4, pop_size=2, init_size=2,
                       sampling=SamplingParams(max_new_tokens=4, temperature=1.0))
    result = run_search(tiny_policy, cfg)
    assert [c.operator for c in result.candidates] == ["i1"] * 6
    assert result.population == []


def _scored(objectives, parent=math.nan):
    """A batch of proposals as directions 0..n-1 wrote them (NaN: a failed proposal)."""
    return [Candidate(i, 0, "sample", i, parent, "", "", "ok" if math.isfinite(o) else
                      "exception", o, "", 0, 0.0, 0.0) for i, o in enumerate(objectives)]


def _noise(seed, like):
    eps = {n: torch.zeros_like(t) for n, t in like.items()}
    add_noise_sum_(eps, [seed], [1.0], 1.0)
    return eps


@pytest.mark.parametrize("problem, operator, objectives, parent, raw", [
    # TSP minimises: the shortest tour (direction 1) is the best proposal.
    ("tsp_constructive", "sample", [5.0, 3.0, 4.0], math.nan, [-5.0, -3.0, -4.0]),
    # KP maximises: the largest value (direction 0) is the best; a failure is penalised to
    # min(valid) - std(valid) = 2 - 1.
    ("kp_constructive", "sample", [4.0, 2.0, math.nan], math.nan, [4.0, 2.0, 1.0]),
    # m1 on TSP: improvement over the parent's 4.0, positive when shorter.
    ("tsp_constructive", "m1", [5.0, 3.0, 4.0], 4.0, [-1.0, 1.0, 0.0]),
])
def test_es_co_evolution_moves_the_weights_towards_the_better_proposals(
        tiny_policy, problem, operator, objectives, parent, raw):
    es = _es(3, 2)
    search = _Search(tiny_policy, SearchConfig(problem, budget=6, batch_size=3, es=es))
    theta0 = {n: t.clone() for n, t in tiny_policy.master.items()}
    batch = _scored(objectives, parent)
    state = ES(es).state_at(0)
    search._update(batch, state, operator)
    np.testing.assert_allclose([c.reward for c in batch], raw)
    weights = (np.array(raw) - np.mean(raw)) / np.std(raw)
    np.testing.assert_allclose(search.updates[0]["weights"], weights, rtol=1e-6)
    # theta1 = theta0 + alpha / G * sum_i w_i eps_i, so the step points along the best
    # proposal's noise and away from the worst's.
    seeds = [d.seed for d in ES(es).ask(state)]
    assert search.updates[0]["seeds"] == seeds
    expected = {n: t.clone() for n, t in theta0.items()}
    add_noise_sum_(expected, seeds, list(weights), es.alpha / 3)
    for n in theta0:
        torch.testing.assert_close(tiny_policy.master[n], expected[n], rtol=0, atol=1e-7)
    step = {n: tiny_policy.master[n] - theta0[n] for n in theta0}
    along = [sum(float((step[n] * e[n]).sum()) for n in theta0)
             for e in (_noise(s, theta0) for s in seeds)]
    best, worst = int(np.argmax(raw)), int(np.argmin(raw))
    assert along[best] > 0 > along[worst]
    assert np.argsort(along).tolist() == np.argsort(raw).tolist()
