"""Gaussian noise addressed by (direction seed, logical tensor name).

The noise of a tensor is defined in fixed blocks of NOISE_BLOCK elements of its
flattened (row-major) view; block b is `torch.randn(NOISE_BLOCK)` from a CPU generator
seeded with mix(tensor_seed, b), truncated at the end of the tensor. Consequences:
- the noise does not depend on how many blocks a caller draws at once (its chunk), so
  temporary memory is bounded by the chunk, not by the largest tensor;
- each tensor has its own stream: same-shaped layers never share noise;
- a slice of a tensor (a vLLM fused or sharded slice) can be drawn on its own.
Noise is always drawn in float32 on the CPU generator: same seeds, same numbers, whatever
device or dtype serves the model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch

from esopt.es.seeds import mix, tensor_seed

# 2**20 float32 = 4 MiB: large enough that generator seeding is negligible next to
# drawing, small enough to bound scratch memory. Part of the noise definition: changing
# it changes every run's noise.
NOISE_BLOCK = 1 << 20
DEFAULT_CHUNK_BLOCKS = 4


def _block_generator(stream_seed: int, block: int) -> torch.Generator:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(mix(stream_seed, block))
    return gen


def noise_chunks(
    seed: int, name: str, numel: int, chunk_blocks: int = DEFAULT_CHUNK_BLOCKS
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield (start, noise) over the flat tensor `name`, chunk_blocks * NOISE_BLOCK at a time.

    The yielded tensor is a view of a reused scratch buffer: consume it before the next step.
    """
    if chunk_blocks < 1:
        raise ValueError(f"chunk_blocks must be >= 1, got {chunk_blocks}")
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    stream = tensor_seed(seed, name)
    chunk = chunk_blocks * NOISE_BLOCK
    scratch = torch.empty(min(chunk, numel), dtype=torch.float32)
    for start in range(0, numel, chunk):
        stop = min(start + chunk, numel)
        out = scratch[: stop - start]
        for b_start in range(start, stop, NOISE_BLOCK):
            b_stop = min(b_start + NOISE_BLOCK, stop)
            torch.randn(
                b_stop - b_start,
                generator=_block_generator(stream, b_start // NOISE_BLOCK),
                dtype=torch.float32,
                out=out[b_start - start : b_stop - start],
            )
        yield start, out


def tensor_noise(seed: int, name: str, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """The whole noise tensor of `name` (tests and small tensors; allocates the tensor)."""
    numel = 1
    for dim in shape:
        numel *= int(dim)
    flat = torch.empty(numel, dtype=torch.float32)
    for start, chunk in noise_chunks(seed, name, numel):
        flat[start : start + chunk.numel()] = chunk
    return flat.view(tuple(shape))


def add_noise_sum_(tensors: Mapping[str, torch.Tensor], seeds: Sequence[int],
                   coeffs: Sequence[float], scale: float) -> None:
    """tensors[name] += scale * sum_i coeffs[i] * eps(seeds[i], name), in place, float32.

    The ES update of a float32 master, shared by every backend and by the update stage
    (which works on checkpoint files without building a model). The sum is accumulated one
    chunk of every direction's noise at a time: memory G * chunk, not G * tensor.
    """
    if len(seeds) != len(coeffs):
        raise ValueError(f"{len(seeds)} seeds but {len(coeffs)} coefficients")
    for name, tensor in tensors.items():
        if tensor.dtype != torch.float32 or not tensor.is_contiguous():
            raise ValueError(f"{name}: the update needs a contiguous float32 tensor, "
                             f"got {tensor.dtype}")
        flat = tensor.view(-1)
        streams = [noise_chunks(seed, name, flat.numel(), 1) for seed in seeds]
        for chunks in zip(*streams, strict=True):
            start = chunks[0][0]
            acc = torch.zeros_like(chunks[0][1])
            for (_, eps), c in zip(chunks, coeffs, strict=True):
                if c:
                    acc.add_(eps, alpha=c)
            flat[start : start + acc.numel()].add_(acc, alpha=scale)
