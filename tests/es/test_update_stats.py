"""The update's arithmetic (unchanged by measuring it) and what the served precision keeps
of it: the realised update's norm, its cosine with the float32 update, the weights left
unchanged."""

import math

import numpy as np
import pytest
import torch

from esopt.backends.hf import served_dtypes
from esopt.es.apply import UpdateStats, add_update_
from esopt.es.copes import subspace_ranges
from esopt.es.lowrank import lowrank_noise
from esopt.es.noise import tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig
from tests.es.companions import params

REWARDS = [0.3, 0.1, 0.9, 0.4, 0.0, 0.7]
METHODS = {"plain": {}, "antithetic": {"antithetic": True},
           "copes": {"subspaces": 2, "subspace_chunk": 100},
           "lowrank": {"rank": 2}, "lowrank-matrices": {"rank": 2, "full_rank_vectors": False}}


def update_of(alpha=1e-2, **kw):
    es = ES(ESConfig(population_size=6, alpha=alpha, run_seed=9,
                     sigma=SigmaSchedule("constant", 1e-3, 1e-3, 2), **kw))
    return es.tell(es.init(), REWARDS)[0]


def reference(theta, update):
    """theta + the update, summed as the update has always been: per element, a float32
    accumulator of c_i * eps_i in direction order, times the scale, added once."""
    out = {}
    numels = {n: t.numel() for n, t in theta.items()}
    for name, t in theta.items():
        acc = torch.zeros_like(t)
        for i, (seed, c) in enumerate(zip(update.seeds, update.coeffs, strict=True)):
            if update.rank is not None and t.dim() == 2:
                eps = lowrank_noise(seed, name, t.shape, update.rank)
            elif update.rank is not None and not update.full_rank_vectors:
                continue
            else:
                eps = tensor_noise(seed, name, t.shape)
            if update.subspaces:
                mask = torch.zeros(t.numel(), dtype=torch.bool)
                for a, b in subspace_ranges(update.subspaces[i], numels).get(name, []):
                    mask[a:b] = True
                eps = torch.where(mask.view(t.shape), eps, torch.zeros_like(eps))
            if c:
                acc.add_(eps.mul_(c))
        out[name] = t + acc.mul_(update.scale) if acc.any() else t.clone()
    return out


@pytest.mark.parametrize("method", METHODS)
def test_measuring_leaves_the_update_bit_for_bit(method):
    update = update_of(**METHODS[method])
    theta = params()
    stats = add_update_(theta, update)
    ref = reference(params(), update)
    for name in theta:
        assert torch.equal(theta[name], ref[name]), name
    assert stats.parameters == sum(t.numel() for t in theta.values())


@pytest.mark.parametrize("method", METHODS)
def test_served_in_float32_the_realised_update_is_the_intended_one(method):
    update = update_of(**METHODS[method])
    theta = params()
    stats = add_update_(theta, update)
    delta = {n: (theta[n].double() - t.double()) for n, t in params().items()}
    assert stats.realised_norm == pytest.approx(
        math.sqrt(sum(float(d.square().sum()) for d in delta.values())), rel=1e-12)
    assert stats.intended_norm == pytest.approx(stats.realised_norm, rel=1e-6)
    assert stats.realised_cosine == pytest.approx(1.0, abs=1e-9)
    unchanged = sum(int((d == 0).sum()) for d in delta.values()) / stats.parameters
    assert stats.unchanged_fraction == pytest.approx(unchanged, abs=1e-12)
    vectors = sum(t.numel() for t in params().values() if t.dim() == 1) / stats.parameters
    if method == "lowrank-matrices":  # the vectors are never perturbed
        assert stats.unchanged_fraction >= vectors
    else:
        assert stats.unchanged_fraction < 0.01


def test_served_in_bfloat16_most_of_a_small_update_is_rounded_away():
    """What changed in the bf16-rounded weights: here alpha 5e-5 against weights ~0.02
    (bf16 spacing ~1e-4), so most weights stay put and the realised update points
    elsewhere than the intended one."""
    update = update_of(alpha=5e-5)
    theta = params()
    stats = add_update_(theta, update, dict.fromkeys(theta, torch.bfloat16))
    moved = {n: theta[n].bfloat16().double() - t.bfloat16().double()
             for n, t in params().items()}
    intended = {n: reference(params(), update)[n].double() - t.double()
                for n, t in params().items()}
    dot = sum(float((moved[n] * intended[n]).sum()) for n in moved)
    realised = math.sqrt(sum(float(m.square().sum()) for m in moved.values()))
    assert stats.realised_norm == pytest.approx(realised, rel=1e-12)
    assert stats.realised_cosine == pytest.approx(dot / realised / stats.intended_norm,
                                                  rel=1e-5)
    changed = sum(int((m != 0).sum()) for m in moved.values())
    assert stats.unchanged_fraction == pytest.approx(1 - changed / stats.parameters)
    assert 0.5 < stats.unchanged_fraction < 1 and stats.realised_cosine < 0.9
    f32 = add_update_(params(), update)
    assert f32.unchanged_fraction < 0.01 < stats.unchanged_fraction


def test_a_zero_update_changes_nothing():
    es = ES(ESConfig(population_size=4, run_seed=1))
    update, _ = es.tell(es.init(), np.ones(4))  # every direction tied: no signal
    theta = params()
    stats = add_update_(theta, update)
    assert stats == UpdateStats.zero(stats.parameters) and stats.unchanged_fraction == 1.0
    assert all(torch.equal(theta[n], t) for n, t in params().items())


def test_served_dtypes_follow_the_serving_dtype():
    shapes = {"lin.weight": (4, 3), "lin.bias": (4,), "norm.weight": (3,),
              "ln.weight": (3,), "ln.bias": (3,), "emb.weight": (10, 3)}
    assert set(served_dtypes("float32", shapes).values()) == {torch.float32}
    assert set(served_dtypes("bfloat16", shapes).values()) == {torch.bfloat16}
    mixed = served_dtypes("bfloat16-weights", shapes)  # nn.Linear and nn.Embedding in bf16
    assert {n for n, d in mixed.items() if d == torch.bfloat16} == {
        "lin.weight", "lin.bias", "emb.weight"}
