import numpy as np
import pytest
import torch

from esopt.es.apply import add_update_
from esopt.es.copes import assignment, chunk_list, subspace_ranges
from esopt.es.noise import tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.shaping import zscore
from esopt.es.strategy import ES, ESConfig, Subspace
from tests.es.companions import params, sha256

NUMELS = {n: t.numel() for n, t in params().items()}


def copes(k, g=8, chunk=100, **kw):
    return ES(ESConfig(population_size=g, alpha=1e-2, subspaces=k, subspace_chunk=chunk,
                       sigma=SigmaSchedule("constant", 1e-3, 1e-3, 3), run_seed=5, **kw))


@pytest.mark.parametrize("k", [1, 3, 4])
def test_subspaces_are_disjoint_cover_everything_and_are_equal_sized(k):
    seen = {n: np.zeros(v, dtype=int) for n, v in NUMELS.items()}
    n_chunks = len(chunk_list(NUMELS, 100))
    for j in range(k):
        ranges = subspace_ranges(Subspace(123, j, k, 100), NUMELS)
        chunks = sum(1 for c, s in assignment(Subspace(123, j, k, 100), NUMELS).items()
                     if s == j)
        assert chunks in (n_chunks // k, -(-n_chunks // k))
        for name, rs in ranges.items():
            for a, b in rs:
                seen[name][a:b] += 1
    assert all((v == 1).all() for v in seen.values())  # each element in exactly one


def test_small_tensor_is_one_chunk_and_partition_changes_per_generation():
    assert [c for c in chunk_list(NUMELS, 100) if c[0] == "norm"] == [("norm", 0)]
    es = copes(4)
    a, b = (es.ask(es.state_at(t))[0].subspace for t in (0, 1))
    assert a.partition_seed != b.partition_seed
    assert assignment(a, NUMELS) != assignment(b, NUMELS)


def test_ask_gives_n_over_k_directions_per_subspace_at_sigma_sqrt_k():
    ds = copes(4).ask(copes(4).init())
    assert [d.subspace.k for d in ds] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(d.sigma == pytest.approx(2e-3) for d in ds)
    assert len({d.subspace.partition_seed for d in ds}) == 1


def test_update_equals_float64_reference():
    es = copes(4, g=8)
    state = es.init()
    rewards = np.array([0.1, 0.5, 0.2, 0.9, 0.0, 0.4, 0.7, 0.3])
    update, _ = es.tell(state, rewards)
    theta = params()
    ref = {n: t.double().clone() for n, t in theta.items()}
    z = zscore(rewards)
    for d, zi in zip(es.ask(state), z, strict=True):
        ranges = subspace_ranges(d.subspace, NUMELS)
        for name, t in ref.items():
            eps = tensor_noise(d.seed, name, t.shape).double().view(-1)
            mask = torch.zeros_like(eps)
            for a, b in ranges.get(name, []):
                mask[a:b] = 1
            t.view(-1).add_(1e-2 * zi / 2 * eps * mask)  # alpha * z / N_k, N_k = 2
    add_update_(theta, update)
    for name in theta:
        delta, ref_delta = theta[name].double() - params()[name].double(), \
            ref[name] - params()[name].double()
        assert ref_delta.abs().max() > 0
        torch.testing.assert_close(delta, ref_delta, atol=1e-8, rtol=1e-4)


@pytest.mark.parametrize("normalisation", ["paper", "matched"])
def test_k1_is_plain_es_bit_for_bit(normalisation):
    plain = ES(ESConfig(population_size=6, alpha=1e-2, run_seed=5,
                        sigma=SigmaSchedule("constant", 1e-3, 1e-3, 3)))
    k1 = copes(1, g=6, subspace_normalisation=normalisation)
    rewards = [0.3, 0.1, 0.9, 0.4, 0.4, 0.0]
    (u_plain, _), (u_k1, _) = plain.tell(plain.init(), rewards), k1.tell(k1.init(), rewards)
    assert u_k1.subspaces and u_k1.weights == u_plain.weights
    assert [d.sigma for d in k1.ask(k1.init())] == [d.sigma for d in plain.ask(plain.init())]
    a, b = params(), params()
    add_update_(a, u_plain)
    add_update_(b, u_k1)
    assert sha256(a) == sha256(b) != sha256(params())


def test_config_rejects_k_not_dividing_population():
    with pytest.raises(ValueError, match="subspaces"):
        copes(3, g=8)


def per_element_step(es: ES, rewards) -> tuple[float, float]:
    """(std of the update per element / alpha, the directions' sigma / the schedule's) of
    one generation on a 256k-element tensor."""
    update, _ = es.tell(es.init(), rewards)
    delta = {"w": torch.zeros(64, 4096)}
    add_update_(delta, update)
    return (float(delta["w"].double().std()) / es.config.alpha,
            es.ask(es.init())[0].sigma / es.config.sigma(0))


def test_copes_step_per_element_against_plain_es():
    """Issue 36: at G=16, K=4 the paper's normalisation (sigma sqrt(K), alpha z / N_k)
    steps sqrt(K) = 2 times further per element than plain ES at the same alpha (and
    perturbs 2 sigma); `matched` steps and perturbs as plain ES does."""
    rewards = np.random.default_rng(0).normal(size=16)
    cfg = dict(population_size=16, alpha=1.0, run_seed=5,
               sigma=SigmaSchedule("constant", 1e-3, 1e-3, 1))
    plain, plain_sigma = per_element_step(ES(ESConfig(**cfg)), rewards)
    paper, paper_sigma = per_element_step(
        ES(ESConfig(**cfg, subspaces=4, subspace_chunk=1024)), rewards)
    matched, matched_sigma = per_element_step(
        ES(ESConfig(**cfg, subspaces=4, subspace_chunk=1024,
                    subspace_normalisation="matched")), rewards)
    assert plain == pytest.approx(0.25, rel=0.02)  # alpha / sqrt(G), z-scored rewards
    assert paper == pytest.approx(2 * plain, rel=0.03) and paper_sigma == 2.0
    assert matched == pytest.approx(plain, rel=0.03) and matched_sigma == 1.0


def test_unknown_normalisation_is_refused():
    with pytest.raises(ValueError, match="subspace_normalisation"):
        copes(2, subspace_normalisation="unit")
