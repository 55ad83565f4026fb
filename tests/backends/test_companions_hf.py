"""The HF policy's CoPES and low-rank perturbation paths on the tiny random model."""

import pytest
import torch

from esopt.es.copes import subspace_ranges
from esopt.es.lowrank import lowrank_noise
from esopt.es.noise import tensor_noise
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig


def es(**kw):
    return ES(ESConfig(population_size=4, alpha=1e-2, run_seed=3,
                       sigma=SigmaSchedule("constant", 1e-3, 1e-3, 2), **kw))


def serving(policy):
    return {n: p.detach().clone() for n, p in policy.model.named_parameters()}


def test_copes_perturbs_only_its_subspace(tiny_policy):
    d = es(subspaces=4, subspace_chunk=4096).ask(es(subspaces=4).init())[2]
    numels = {n: t.numel() for n, t in tiny_policy.master.items()}
    ranges = subspace_ranges(d.subspace, numels)
    with tiny_policy.perturbed(d):
        now = serving(tiny_policy)
    touched = 0
    for name, master in tiny_policy.master.items():
        expected = master.clone().view(-1)
        eps = tensor_noise(d.seed, name, master.shape).view(-1)
        for a, b in ranges.get(name, []):
            expected[a:b] = master.view(-1)[a:b] + eps[a:b] * d.sigma
            touched += b - a
        assert torch.equal(now[name].view(-1), expected), name
    assert 0 < touched < sum(numels.values())
    assert touched == sum(b - a for rs in ranges.values() for a, b in rs)


def test_copes_k1_perturbs_and_updates_as_plain_es(tiny_policy, tiny_dir, tmp_path):
    from esopt.backends.hf import HFPolicy

    plain, k1 = es(), es(subspaces=1, subspace_chunk=4096)
    with tiny_policy.perturbed(plain.ask(plain.init())[1]):
        a = serving(tiny_policy)
    with tiny_policy.perturbed(k1.ask(k1.init())[1]):
        b = serving(tiny_policy)
    assert all(torch.equal(a[n], b[n]) for n in a)
    rewards = [0.1, 0.7, 0.3, 0.2]
    tiny_policy.apply(plain.tell(plain.init(), rewards)[0])
    other = HFPolicy.load(tiny_dir)
    other.apply(k1.tell(k1.init(), rewards)[0])
    assert tiny_policy.save(tmp_path / "a")["sha256"] == other.save(tmp_path / "b")["sha256"]


@pytest.mark.parametrize("vectors", [True, False], ids=["vectors", "matrices-only"])
def test_lowrank_perturbs_matrices_with_rank_r_noise_and_vectors_full_rank(tiny_policy,
                                                                           vectors):
    ask = es(rank=2, antithetic=True, full_rank_vectors=vectors)
    d = ask.ask(ask.init())[1]
    assert d.sign == -1
    with tiny_policy.perturbed(d):
        now = serving(tiny_policy)
    for name, master in tiny_policy.master.items():
        if master.dim() == 2:
            eps = lowrank_noise(d.seed, name, master.shape, 2)
        elif vectors:  # EGGROLL's default: full-rank Gaussian noise on the other tensors
            eps = tensor_noise(d.seed, name, master.shape)
        else:
            assert torch.equal(now[name], master), name
            continue
        assert torch.equal(now[name], master + eps * (d.sign * d.sigma)), name
    assert torch.equal(serving(tiny_policy)["model.norm.weight"],
                       tiny_policy.master["model.norm.weight"])  # restored
