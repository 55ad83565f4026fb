"""The population-batched low-rank forward equals the sequential perturbed forwards (both
tiny architectures: the Qwen2's biased q/k/v and untied head ride on the same hooks)."""

import torch

from esopt.backends.lowrank_batch import population
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, ESConfig


def test_batched_lowrank_forward_equals_sequential_perturbations(tiny_arch_policy):
    es = ES(ESConfig(population_size=3, rank=2, run_seed=4,
                     sigma=SigmaSchedule("constant", 3e-2, 3e-2, 1)))
    directions = es.ask(es.init())
    ids = torch.tensor([[5, 17, 300, 42, 7, 99]])
    with torch.inference_mode():
        base = tiny_arch_policy.model(input_ids=ids).logits[0]
        seq = []
        for d in directions:
            with tiny_arch_policy.perturbed(d):
                seq.append(tiny_arch_policy.model(input_ids=ids).logits[0])
        with population(tiny_arch_policy, directions) as set_members:
            set_members([2, 0, 1, 0])
            batched = tiny_arch_policy.model(input_ids=ids.repeat(4, 1)).logits
        after = tiny_arch_policy.model(input_ids=ids).logits[0]
    for row, member in enumerate([2, 0, 1, 0]):
        assert (seq[member] - base).abs().max() > 1e-3  # the perturbation shows
        torch.testing.assert_close(batched[row], seq[member], atol=2e-5, rtol=1e-4)
    assert torch.equal(after, base)  # hooks removed: theta again
