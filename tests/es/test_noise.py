import numpy as np
import pytest
import torch

from esopt.es.noise import NOISE_BLOCK, noise_chunks, tensor_noise


def _flat(seed, name, numel, chunk_blocks):
    out = torch.empty(numel)
    for start, chunk in noise_chunks(seed, name, numel, chunk_blocks):
        out[start : start + chunk.numel()] = chunk
    return out


def test_same_seed_gives_identical_noise():
    a = tensor_noise(11, "w", (300, 70))
    b = tensor_noise(11, "w", (300, 70))
    assert torch.equal(a, b)
    assert a.dtype == torch.float32


def test_different_seeds_give_different_noise():
    assert not torch.equal(tensor_noise(1, "w", (1000,)), tensor_noise(2, "w", (1000,)))


def test_same_shaped_tensors_get_uncorrelated_noise():
    names = [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(6)]
    noise = [tensor_noise(5, n, (256, 256)).flatten().numpy() for n in names]
    corr = np.corrcoef(np.stack(noise))
    off_diag = corr[~np.eye(len(names), dtype=bool)]
    assert np.abs(off_diag).max() < 0.01


def test_chunk_size_does_not_change_the_noise():
    numel = 3 * NOISE_BLOCK + 12345  # several blocks and a ragged tail
    ref = _flat(3, "embed", numel, chunk_blocks=1)
    for chunk_blocks in (2, 3, 7):
        assert torch.equal(_flat(3, "embed", numel, chunk_blocks), ref)


def test_chunks_bound_scratch_memory():
    numel = 5 * NOISE_BLOCK
    sizes = [c.numel() for _, c in noise_chunks(0, "x", numel, chunk_blocks=2)]
    assert max(sizes) == 2 * NOISE_BLOCK
    assert sum(sizes) == numel


def test_noise_is_standard_normal():
    x = tensor_noise(0, "w", (NOISE_BLOCK + 1000,)).double()
    assert abs(x.mean().item()) < 5e-3
    assert abs(x.std().item() - 1.0) < 5e-3


def test_blocks_of_one_tensor_are_not_repeated():
    x = tensor_noise(0, "w", (2 * NOISE_BLOCK,))
    assert not torch.equal(x[:NOISE_BLOCK], x[NOISE_BLOCK:])


def test_bad_chunk_size():
    with pytest.raises(ValueError, match="chunk_blocks"):
        list(noise_chunks(0, "w", 10, 0))


def test_empty_tensor_has_no_chunks():
    assert list(noise_chunks(0, "w", 0)) == []
