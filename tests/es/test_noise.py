import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from esopt.es import philox
from esopt.es.noise import (
    NOISE_BLOCK,
    add_noise_sum_,
    draw,
    draw_rows,
    noise_chunks,
    noise_fingerprint,
    region_chunks,
    region_noise,
    stream_key,
    tensor_noise,
)
from tests.es import noise_reference

GOLDEN = json.loads((Path(__file__).parent / "noise_golden.json").read_text())


def _flat(seed, name, numel, chunk_blocks):
    out = torch.empty(numel)
    for start, chunk in noise_chunks(seed, name, numel, chunk_blocks):
        out[start : start + chunk.numel()] = chunk
    return out


def _bits(x: torch.Tensor) -> list[str]:
    return [f"{v:08x}" for v in x.contiguous().view(torch.int32).numpy().view(np.uint32)]


# ------------------------------------------------------------------ the definition
def test_philox_matches_random123_known_answers():
    # Random123's kat_vectors for philox4x32_10: zeros, all ones, digits of pi.
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2,
              (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, expected in cases:
        words = philox.philox4x32(tuple(torch.tensor([c]) for c in ctr), key)
        assert tuple(int(w) for w in words) == expected
        ref = noise_reference.philox4x32_10(np.array([ctr], dtype=np.uint64), key)
        assert tuple(int(w) for w in ref[0]) == expected


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['name']}@{c['start']}")
def test_golden_vectors(case):
    """Numbers computed once by the independent numpy implementation, committed."""
    expected = case["float32_bits"].split()
    args = (case["seed"], case["name"], case["start"], case["count"])
    assert _bits(draw(*args)) == expected  # the compiled CPU loop
    offsets = torch.arange(case["start"], case["start"] + case["count"])
    assert _bits(philox.normals_at(offsets, stream_key(case["seed"], case["name"]))) == expected
    assert _bits(torch.from_numpy(noise_reference.noise(*args))) == expected  # regenerates


def test_compiled_loop_equals_tensor_ops_on_many_values():
    n = 1 << 18
    key = stream_key(99, "model.layers.3.mlp.up_proj.weight")
    for start in (0, 1, 2**35 + 3):
        compiled = draw(99, "model.layers.3.mlp.up_proj.weight", start, n)
        ops = philox.normals_at(torch.arange(start, start + n), key)
        assert torch.equal(compiled.view(torch.int32), ops.view(torch.int32))


def test_every_radius_input_matches_the_reference():
    """All 2^24 values of the radius word (the log and sqrt steps), bit for bit."""
    a = torch.arange(0, 1 << 24, dtype=torch.int64) << 8
    b = torch.full_like(a, 0x5A5A5A5A)
    z0, _ = philox.normal_pair(a, b)
    r0, _ = noise_reference.box_muller(a.numpy().astype(np.uint64), b.numpy().astype(np.uint64))
    assert np.array_equal(z0.numpy().view(np.uint32), r0.view(np.uint32))


def test_sqrt_is_correctly_rounded():
    x = torch.cat([torch.rand(1 << 20) * 40, torch.tensor([0.0, 1.0, 2.0, 4.0, 2.0**-20])])
    assert np.array_equal(philox._sqrt_rounded(x).numpy(), np.sqrt(x.numpy()))


# ------------------------------------------------------------------ addressing
def test_slices_equal_the_whole():
    shape = (37, 1031)
    whole = tensor_noise(5, "w", shape)
    assert torch.equal(draw(5, "w", 1234, 999), whole.view(-1)[1234:2233])
    for region in [(slice(3, 20), slice(None)), (slice(None), slice(100, 613)),
                   (slice(10, 11), slice(1027, 1031)), (slice(0, 37), slice(1, 2))]:
        assert torch.equal(region_noise(5, "w", shape, region), whole[region])
    assert torch.equal(region_noise(5, "v", (500,), (slice(7, 400),)),
                       tensor_noise(5, "v", (500,))[7:400])


def test_region_chunks_are_bounded_and_complete():
    shape, region = (64, 300), (slice(None), slice(150, 300))  # a row-parallel shard
    whole = tensor_noise(2, "w", shape)[region]
    got = torch.empty_like(whole)
    sizes = []
    for r, block in region_chunks(2, "w", shape, region, max_elements=1000):
        sizes.append(block.numel())
        got[r : r + block.shape[0]] = block
    assert torch.equal(got, whole)
    assert max(sizes) <= 1000


def test_chunk_size_does_not_change_the_noise():
    numel = 3 * NOISE_BLOCK + 12345  # several chunks and a ragged tail
    ref = _flat(3, "embed", numel, chunk_blocks=1)
    for chunk_blocks in (2, 3, 7):
        assert torch.equal(_flat(3, "embed", numel, chunk_blocks), ref)


def test_chunks_bound_scratch_memory():
    numel = 5 * NOISE_BLOCK
    sizes = [c.numel() for _, c in noise_chunks(0, "x", numel, chunk_blocks=2)]
    assert max(sizes) == 2 * NOISE_BLOCK
    assert sum(sizes) == numel


def test_stream_keys_use_the_whole_seed_and_name():
    keys = {stream_key(s, n) for s in (0, 1, 2**62, 2**62 + 1) for n in ("a", "b", "a.b")}
    assert len(keys) == 12
    with pytest.raises(ValueError, match="non-negative"):
        stream_key(-1, "w")


def test_region_refuses_steps_and_3d():
    with pytest.raises(ValueError, match="step 1"):
        region_noise(0, "w", (10, 10), (slice(0, 10, 2), slice(None)))
    with pytest.raises(ValueError, match="1-D and 2-D"):
        region_noise(0, "w", (2, 2, 2), (slice(None),) * 3)
    with pytest.raises(ValueError, match="negative"):
        draw_rows(0, "w", -1, 1, 1, 1)


# ------------------------------------------------------------------ statistics
def test_noise_is_standard_normal():
    n = 1 << 21
    x = draw(0, "w", 0, n).double()
    assert abs(x.mean().item()) < 4 / math.sqrt(n)  # 4 standard errors
    assert abs(x.var().item() - 1.0) < 4 * math.sqrt(2 / n)
    kurtosis = ((x - x.mean()) ** 4).mean().item() / x.var().item() ** 2
    assert abs(kurtosis - 3.0) < 4 * math.sqrt(24 / n)
    # Kolmogorov-Smirnov against the normal CDF: critical value at alpha = 0.001.
    xs = x.sort().values
    cdf = 0.5 * (1 + torch.erf(xs / math.sqrt(2)))
    ecdf_hi = torch.arange(1, n + 1, dtype=torch.float64) / n
    d = torch.maximum(ecdf_hi - cdf, cdf - (ecdf_hi - 1 / n)).max().item()
    assert d < 1.95 / math.sqrt(n)
    # The tails: P(|z| > 3) = 0.0027, P(|z| > 4) = 6.33e-5 (binomial, 5 standard errors).
    for t, p in ((3.0, 2.6998e-3), (4.0, 6.334e-5)):
        frac = (x.abs() > t).double().mean().item()
        assert abs(frac - p) < 5 * math.sqrt(p / n)


def test_neighbouring_blocks_and_tensors_are_uncorrelated():
    n = 1 << 16
    series = [draw(0, "w", 0, n), draw(0, "w", n, n), draw(0, "w", NOISE_BLOCK, n),
              draw(1, "w", 0, n), draw(0, "model.layers.0.self_attn.q_proj.weight", 0, n),
              draw(0, "model.layers.1.self_attn.q_proj.weight", 0, n)]
    corr = np.corrcoef(np.stack([s.numpy() for s in series]))
    assert np.abs(corr[~np.eye(len(series), dtype=bool)]).max() < 0.01
    x = series[0].double()
    for lag in (1, 2, 3, 4):  # within a Philox group and across groups
        assert abs(torch.corrcoef(torch.stack([x[:-lag], x[lag:]]))[0, 1].item()) < 0.01


def test_same_seed_gives_identical_noise_and_others_differ():
    a = tensor_noise(11, "w", (300, 70))
    assert a.dtype == torch.float32
    assert torch.equal(a, tensor_noise(11, "w", (300, 70)))
    assert not torch.equal(tensor_noise(1, "w", (1000,)), tensor_noise(2, "w", (1000,)))


# ------------------------------------------------------------------ update and fingerprint
def test_update_on_a_shard_equals_the_shard_of_the_update():
    shape = (48, 96)
    base = torch.randn(shape)
    whole = {"w": base.clone()}
    add_noise_sum_(whole, [3, 4, 5], [0.5, -1.0, 2.0], 0.1)
    region = (slice(None), slice(48, 96))
    shard = {"w": base[region].contiguous()}
    add_noise_sum_(shard, [3, 4, 5], [0.5, -1.0, 2.0], 0.1, regions={"w": (shape, region)})
    assert torch.equal(shard["w"], whole["w"][region])
    ref = base.double() + 0.1 * sum(c * tensor_noise(s, "w", shape).double()
                                    for s, c in zip([3, 4, 5], [0.5, -1.0, 2.0], strict=True))
    assert torch.allclose(whole["w"].double(), ref, atol=1e-6)


def test_the_update_has_the_same_bits_on_any_number_of_threads():
    """The directions' chunks are drawn on torch's threads; the sum keeps direction order,
    so the bits are those of the one-thread loop (written out here), chunk after chunk."""
    seeds, coeffs, scale = [7, 3, 11, 5, 2], [0.5, -1.25, 2.0, 0.0, -0.75], 0.01
    base = {"a": torch.randn(2 * NOISE_BLOCK + 1234), "b": torch.randn(3, 77)}
    expected = {}
    for name, t in base.items():
        acc = torch.zeros(t.numel())
        for seed, c in zip(seeds, coeffs, strict=True):
            if c:
                acc.add_(draw(seed, name, 0, t.numel()).mul_(c))
        expected[name] = t.view(-1) + acc.mul_(scale)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            tensors = {n: t.clone() for n, t in base.items()}
            add_noise_sum_(tensors, seeds, coeffs, scale)
            for name, t in tensors.items():
                assert torch.equal(t.view(-1), expected[name]), (threads, name)
    finally:
        torch.set_num_threads(before)


def test_fingerprint_depends_on_seed_and_names():
    names = ["a.weight", "b.weight"]
    fp = noise_fingerprint(7, names)
    assert fp == noise_fingerprint(7, list(reversed(names)))
    assert fp != noise_fingerprint(8, names)
    assert fp != noise_fingerprint(7, names + ["c.weight"])


def test_bad_chunk_size():
    with pytest.raises(ValueError, match="chunk_blocks"):
        list(noise_chunks(0, "w", 10, 0))


def test_empty_tensor_has_no_chunks():
    assert list(noise_chunks(0, "w", 0)) == []
