import math

import numpy as np
import pytest
import torch

from esopt.es.apply import add_update_
from esopt.es.lowrank import factors, lowrank_chunks, lowrank_noise
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


@pytest.mark.parametrize("rank", [1, 4])
def test_update_equals_float64_reference(rank):
    es = ES(ESConfig(population_size=5, alpha=1e-2, rank=rank, run_seed=1,
                     sigma=SigmaSchedule("constant", 1e-3, 1e-3, 2)))
    rewards = np.array([0.2, 0.9, 0.1, 0.5, 0.5])
    update, _ = es.tell(es.init(), rewards)
    assert update.rank == rank
    theta = params()
    add_update_(theta, update)
    z = zscore(rewards)
    for name, t0 in params().items():
        delta = theta[name].double() - t0.double()
        if t0.dim() == 1:
            assert torch.equal(theta[name], t0)  # vectors are not perturbed
            continue
        ref = torch.zeros_like(delta)
        for d, zi in zip(es.ask(es.init()), z, strict=True):
            a, b = factors(d.seed, name, t0.shape, rank)
            ref += zi * (a.double() @ b.double().T) / math.sqrt(rank)
        ref *= 1e-2 / 5
        torch.testing.assert_close(delta, ref, atol=1e-8, rtol=1e-4)


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
