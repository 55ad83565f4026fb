import math

import numpy as np
import pytest
import torch

from esopt.es.apply import add_update_
from esopt.es.lowrank import factors, lowrank_chunks, lowrank_noise
from esopt.es.noise import tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.shaping import zscore
from esopt.es.strategy import ES, ESConfig
from tests.es.companions import params


def test_noise_is_a_b_transpose_over_sqrt_r_and_chunking_does_not_change_it():
    a, b = factors(7, "w", (37, 29), 3)
    eps = lowrank_noise(7, "w", (37, 29), 3)
    torch.testing.assert_close(eps.double(), a.double() @ b.double().T / math.sqrt(3))
    assert torch.linalg.matrix_rank(eps.double(), rtol=1e-5) == 3
    rows = torch.cat([e.clone() for _, e in lowrank_chunks(7, "w", (37, 29), 3, 100)])
    assert torch.equal(rows, eps)


@pytest.mark.parametrize("vectors", [True, False], ids=["vectors", "matrices-only"])
@pytest.mark.parametrize("rank", [1, 4])
def test_update_equals_float64_reference(rank, vectors):
    """Matrices get the low-rank noise sum; the 1-D tensors the full-rank noise sum
    (EGGROLL's default, full_rank_vectors) or nothing."""
    es = ES(ESConfig(population_size=5, alpha=1e-2, rank=rank, run_seed=1,
                     full_rank_vectors=vectors,
                     sigma=SigmaSchedule("constant", 1e-3, 1e-3, 2)))
    rewards = np.array([0.2, 0.9, 0.1, 0.5, 0.5])
    update, _ = es.tell(es.init(), rewards)
    assert update.rank == rank and update.full_rank_vectors == vectors
    theta = params()
    add_update_(theta, update)
    z = zscore(rewards)
    for name, t0 in params().items():
        delta = theta[name].double() - t0.double()
        if t0.dim() == 1 and not vectors:
            assert torch.equal(theta[name], t0)  # vectors are not perturbed
            continue
        ref = torch.zeros_like(delta)
        for d, zi in zip(es.ask(es.init()), z, strict=True):
            if t0.dim() == 1:
                ref += zi * tensor_noise(d.seed, name, t0.shape).double()
                continue
            a, b = factors(d.seed, name, t0.shape, rank)
            ref += zi * (a.double() @ b.double().T) / math.sqrt(rank)
        ref *= 1e-2 / 5
        assert ref.abs().max() > 0
        torch.testing.assert_close(delta, ref, atol=1e-8, rtol=1e-4)


def test_eggroll_defaults_mirrored_pairs_and_vector_noise():
    """Low-rank ES resolves to EGGROLL's reference defaults (antithetic pairs, full-rank
    noise on vectors: ESHyperscale/HyperscaleES noiser/eggroll.py); both can be turned off."""
    from esopt.pipeline.config import run_specs
    from tests.pipeline.test_companions import companion_config

    spec = next(s for s in run_specs(companion_config(population_size=4))
                if s.method == "lowrank_es")
    assert spec.es.antithetic and spec.es.full_rank_vectors
    ds = ES(spec.es).ask(ES(spec.es).init())
    assert [d.sign for d in ds] == [1, -1, 1, -1] and ds[0].seed == ds[1].seed
    assert all(d.full_rank_vectors and d.rank == spec.es.rank for d in ds)
    plain = next(s for s in run_specs(companion_config(population_size=4))
                 if s.method == "vanilla_es")
    assert not plain.es.antithetic  # the shared es.antithetic (the paper's one-sided ES)
    off = next(s for s in run_specs(companion_config(
        population_size=4, lowrank_es={"antithetic": False, "full_rank_vectors": False}))
        if s.method == "lowrank_es")
    assert not off.es.antithetic and not off.es.full_rank_vectors


def test_rank_to_full_dimension_approaches_full_rank_statistics():
    """Elements of A B^T / sqrt(r) have mean 0, variance 1 and excess kurtosis 6/r: as r
    grows to the full dimension the noise becomes the full-rank Gaussian's."""
    kurt = {}
    for r in (1, 4, 64):
        x = torch.cat([lowrank_noise(s, "w", (64, 64), r).view(-1) for s in range(40)]
                      ).double()
        assert abs(x.mean()) < 0.03 and abs(x.var() - 1) < 0.06
        kurt[r] = float(((x - x.mean()) ** 4).mean() / x.var() ** 2 - 3)
        assert kurt[r] == pytest.approx(6 / r, abs=0.25 + 0.25 * 6 / r)
    assert kurt[1] > kurt[4] > abs(kurt[64]) and abs(kurt[64]) < 0.2
