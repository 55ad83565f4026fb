"""The population-batched low-rank forward equals the sequential perturbed forwards (both
tiny architectures: the Qwen2's biased q/k/v and untied head ride on the same hooks)."""

import pytest
import torch

from esopt.backends.lowrank_batch import population
from esopt.es.schedules import SigmaSchedule
from esopt.es.strategy import ES, Direction, ESConfig


@pytest.mark.parametrize("rows", [[2, 0, 1, 0, 3], [0, 0, 1, 1, 2, 2, 3, 3], [3, 1, 1, 3]],
                         ids=["unordered-uneven", "member-major", "members-absent"])
@pytest.mark.parametrize("vectors", [True, False], ids=["vectors", "matrices-only"])
def test_batched_lowrank_forward_equals_sequential_perturbations(tiny_arch_policy, vectors,
                                                                 rows):
    """EGGROLL's defaults (mirrored pairs, full-rank noise on the norms' vectors and the
    Qwen2's biases) and matrices only: each row gets its member's perturbation, up to
    float rounding, whatever the rows' order: member-major with equal counts (the batched
    matmuls run on a view of the batch), unordered and uneven, or with members absent
    (both padded)."""
    es = ES(ESConfig(population_size=4, rank=2, run_seed=4, antithetic=vectors,
                     full_rank_vectors=vectors,
                     sigma=SigmaSchedule("constant", 3e-2, 3e-2, 1)))
    directions = es.ask(es.init())
    # Each row its own tokens, so a row computed in another row's place shows.
    ids = torch.randint(0, 400, (len(rows), 6), generator=torch.Generator().manual_seed(3))
    policy = tiny_arch_policy
    with torch.inference_mode():
        base = policy.model(input_ids=ids).logits
        seq = []
        for d in directions:
            with policy.perturbed(d):
                seq.append(policy.model(input_ids=ids).logits)
        with population(policy, directions) as set_members:
            set_members(rows)
            batched = policy.model(input_ids=ids).logits
        after = policy.model(input_ids=ids).logits
    for row, member in enumerate(rows):
        assert (seq[member][row] - base[row]).abs().max() > 1e-3  # the perturbation shows
        torch.testing.assert_close(batched[row], seq[member][row], atol=2e-5, rtol=1e-4)
    assert torch.equal(after, base)  # hooks removed, vectors swapped back: theta again
    assert isinstance(policy.model.model.norm.weight, torch.nn.Parameter)


def test_vector_noise_alone_shows_in_the_batch(tiny_arch_policy):
    """The vectors' full-rank noise (norms; the Qwen2's q/k/v biases) moves a member
    beyond its matrices' terms: batched rows follow their member's perturbed vectors, not
    the served ones."""
    directions = [Direction(i, 900 + i, 1, 3e-2, rank=1, full_rank_vectors=True)
                  for i in range(2)]
    ids = torch.tensor([[11, 23, 5, 8]])
    policy = tiny_arch_policy
    with torch.inference_mode():
        seq = []
        for d in directions:
            with policy.perturbed(d):
                seq.append(policy.model(input_ids=ids).logits[0])
        matrices_only = [Direction(d.index, d.seed, 1, d.sigma, rank=1) for d in directions]
        with policy.perturbed(matrices_only[0]):
            without = policy.model(input_ids=ids).logits[0]
        with population(policy, directions) as set_members:
            set_members([1, 0])
            batched = policy.model(input_ids=ids.repeat(2, 1)).logits
    assert (seq[0] - without).abs().max() > 1e-3  # the vectors' noise matters here
    torch.testing.assert_close(batched[1], seq[0], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(batched[0], seq[1], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("rows", [[0, 0, 1, 1, 2, 2, 3, 3], [2, 0, 1, 0, 3]],
                         ids=["member-major", "unordered-uneven"])
def test_bfloat16_weights_population_adds_each_members_term(tiny_arch_dir, rows):
    """Under bfloat16-weights (bf16 matrices, float32 activations) the members' terms are
    added to the float32 outputs: each row moves from the bf16 base as its member moves
    the float32 model, up to bf16 rounding (the served weights are theta rounded once, the
    term is not rounded)."""
    from esopt.backends.hf import HFPolicy

    es = ES(ESConfig(population_size=4, rank=1, run_seed=5, full_rank_vectors=True,
                     sigma=SigmaSchedule("constant", 3e-2, 3e-2, 1)))
    directions = es.ask(es.init())
    ids = torch.randint(0, 400, (len(rows), 6), generator=torch.Generator().manual_seed(4))
    f32 = HFPolicy.load(tiny_arch_dir)
    bf16w = HFPolicy.load(tiny_arch_dir, serving_dtype="bfloat16-weights")
    with torch.inference_mode():
        base32, base16 = f32.model(input_ids=ids).logits, bf16w.model(input_ids=ids).logits
        moves = []
        for d in directions:
            with f32.perturbed(d):
                moves.append(f32.model(input_ids=ids).logits - base32)
        with population(bf16w, directions) as set_members:
            set_members(rows)
            batched = bf16w.model(input_ids=ids).logits
    assert batched.dtype == torch.float32
    for row, member in enumerate(rows):
        want = moves[member][row]
        err = (batched[row] - base16[row] - want).abs().max()
        assert err < 0.1 * want.abs().max(), (row, float(err), float(want.abs().max()))
