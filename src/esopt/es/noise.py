"""Gaussian noise addressed by (direction seed, logical tensor name, element offset).

Element `o` of the noise of tensor `name` under direction seed `s` is a pure function of
(s, name, o): a counter-based generator (Philox4x32-10 + a float32 Box-Muller, specified
in `esopt.es.philox`) keyed by a 128-bit hash of (s, name), counting over the flattened
row-major tensor. Consequences:
- every machine, device and torch version draws the same bits (no torch RNG involved);
- any slice is drawable alone (a tensor-parallel shard, a fused vLLM slice, a chunk), so
  scratch memory is bounded by the chunk, never by the tensor;
- each tensor has its own stream: same-shaped layers never share noise.
NOISE_SPEC names this definition; manifests and direction files record it, and a run
drawn under another spec is refused, never replayed with different noise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import torch

from esopt.es import philox

# Changing anything in esopt.es.philox or in stream_key changes every run's noise: give
# it a new NOISE_SPEC. Spec 1 was torch.randn on an mt19937 seeded per 2^20-element block.
NOISE_SPEC = "esopt-noise/2: philox4x32-10, float32 box-muller, blake2b-128 stream keys"

# Scratch granularity of the chunked loops (elements); not part of the noise definition.
NOISE_BLOCK = 1 << 20
DEFAULT_CHUNK_BLOCKS = 4


def stream_key(seed: int, name: str) -> tuple[int, int, int, int]:
    """(k0, k1, c2, c3): the Philox key and the two high counter words of a tensor's stream.

    128 bits of a keyed hash of (seed, name): streams of distinct tensors or directions
    collide with probability ~n^2 / 2^129, negligible at any scale."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"noise seed must be a non-negative int, got {seed!r}")
    h = hashlib.blake2b(digest_size=16, person=b"esopt-noise-v2")
    h.update(seed.to_bytes(16, "little"))
    h.update(name.encode())
    d = h.digest()
    return tuple(int.from_bytes(d[i : i + 4], "little") for i in range(0, 16, 4))


def draw(seed: int, name: str, start: int, count: int, *, out: torch.Tensor | None = None,
         device: str | torch.device = "cpu") -> torch.Tensor:
    """Elements [start, start + count) of the flat noise of tensor `name`, float32."""
    return draw_rows(seed, name, start, 1, count, count, out=None if out is None
                     else out.view(1, count), device=device).view(count)


def draw_rows(seed: int, name: str, start: int, rows: int, cols: int, row_stride: int, *,
              out: torch.Tensor | None = None, device: str | torch.device = "cpu"
              ) -> torch.Tensor:
    """A (rows, cols) block: element [i, j] is flat element start + i*row_stride + j (a 2-D
    slice of a row-major tensor with row_stride columns), float32.

    On CPU a compiled loop fills it; on other devices the tensor-op definition runs there.
    """
    if start < 0 or rows < 0 or cols < 0 or row_stride < 0:
        raise ValueError(f"negative noise range: start {start}, rows {rows}, cols {cols}, "
                         f"row stride {row_stride}")
    key = stream_key(seed, name)
    device = torch.device(device)
    if out is None:
        out = torch.empty((rows, cols), dtype=torch.float32, device=device)
    elif out.shape != (rows, cols) or out.dtype != torch.float32 or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous float32 ({rows}, {cols}) tensor")
    if out.numel() == 0:
        return out
    if out.device.type == "cpu":
        from esopt.es.philox_cpu import fill_rows

        fill_rows(out.numpy(), start, row_stride, *key)
    else:
        offsets = (start + row_stride * torch.arange(rows, device=out.device)[:, None]
                   + torch.arange(cols, device=out.device)[None, :])
        out.copy_(philox.normals_at(offsets, key))
    return out


def noise_chunks(seed: int, name: str, numel: int, chunk_blocks: int = DEFAULT_CHUNK_BLOCKS
                 ) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield (start, noise) over the flat tensor `name`, chunk_blocks * NOISE_BLOCK at a time.

    The yielded tensor is a view of a reused scratch buffer: consume it before the next step.
    """
    if chunk_blocks < 1:
        raise ValueError(f"chunk_blocks must be >= 1, got {chunk_blocks}")
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    chunk = chunk_blocks * NOISE_BLOCK
    scratch = torch.empty(min(chunk, numel), dtype=torch.float32)
    for start in range(0, numel, chunk):
        out = scratch[: min(chunk, numel - start)]
        yield start, draw(seed, name, start, out.numel(), out=out)


def region_chunks(seed: int, name: str, shape: Sequence[int], region: tuple[slice, ...],
                  max_elements: int = DEFAULT_CHUNK_BLOCKS * NOISE_BLOCK
                  ) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield (first row, noise rows) of `tensor[region]` for a 1-D or 2-D logical tensor,
    at most max(max_elements, one row) elements at a time, without drawing the rest.

    `region` is a tuple of step-1 slices (a tensor-parallel shard or fused slice); the
    yielded (k, cols) blocks are reused scratch: consume each before the next."""
    rows_s, cols_s, stride = _region_rows(shape, region)
    rows, cols = rows_s.stop - rows_s.start, cols_s.stop - cols_s.start
    per = max(1, max_elements // max(cols, 1))
    scratch = torch.empty(min(per, rows) * cols, dtype=torch.float32)
    for r in range(0, rows, per):
        k = min(per, rows - r)
        out = scratch[: k * cols].view(k, cols)
        yield r, draw_rows(seed, name, (rows_s.start + r) * stride + cols_s.start, k, cols,
                           stride, out=out)


def region_noise(seed: int, name: str, shape: Sequence[int], region: tuple[slice, ...]
                 ) -> torch.Tensor:
    """The noise of `tensor[region]` (a new tensor of the region's shape)."""
    rows_s, cols_s, stride = _region_rows(shape, region)
    block = draw_rows(seed, name, rows_s.start * stride + cols_s.start,
                      rows_s.stop - rows_s.start, cols_s.stop - cols_s.start, stride)
    return block.view(-1) if len(shape) == 1 else block


def _region_rows(shape: Sequence[int], region: tuple[slice, ...]) -> tuple[slice, slice, int]:
    """A region of a 1-D/2-D tensor as (rows, cols, row stride) of its 2-D row view."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 1:
        shape, region = (1, shape[0]), (slice(None), *region)
    if len(shape) != 2 or len(region) != 2:
        raise ValueError(f"regions are for 1-D and 2-D tensors, got shape {shape}, "
                         f"region {region}")
    rows, cols = (slice(*s.indices(n)) for s, n in zip(region, shape, strict=True))
    if rows.step != 1 or cols.step != 1:
        raise ValueError(f"region slices must have step 1, got {region}")
    return (slice(rows.start, max(rows.start, rows.stop)),
            slice(cols.start, max(cols.start, cols.stop)), shape[1])


def tensor_noise(seed: int, name: str, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """The whole noise tensor of `name` (tests and small tensors; allocates the tensor)."""
    numel = 1
    for dim in shape:
        numel *= int(dim)
    return draw(seed, name, 0, numel).view(tuple(shape))


def noise_fingerprint(seed: int, names: Sequence[str], head: int = 16) -> str:
    """A short hash of the first `head` noise values of each tensor under `seed` (sorted
    names): two machines that agree on it draw the same noise for this direction.

    Direction files carry it; the update refuses a file whose fingerprint it cannot
    reproduce (another noise spec, or a generator broken on the scoring machine)."""
    h = hashlib.sha256(NOISE_SPEC.encode())
    for name in sorted(names):
        h.update(name.encode())
        h.update(draw(seed, name, 0, head).numpy().tobytes())
    return h.hexdigest()[:16]


def perturb_into(master: torch.Tensor, eps: torch.Tensor, step: float, out: torch.Tensor
                 ) -> None:
    """out = master + step * eps, as two separately rounded float32 operations (eps is
    overwritten).

    Never `torch.add(..., alpha=)`: its vectorised CPU kernel fuses a multiply-add that its
    scalar tail does not, so the last bit of an element would depend on where a chunk
    starts, and backends that chunk differently (HF flat, vLLM per shard) would disagree."""
    torch.add(master, eps.mul_(step), out=out)


def add_noise_sum_(tensors: Mapping[str, torch.Tensor], seeds: Sequence[int],
                   coeffs: Sequence[float], scale: float,
                   regions: Mapping[str, tuple[tuple[int, ...], tuple[slice, ...]]] | None = None,
                   subspaces: Sequence | None = None) -> None:
    """tensors[name] += scale * sum_i coeffs[i] * eps(seeds[i], name), in place, float32:
    each chunk of noise_sum_chunks added to its view."""
    for _, target, delta in noise_sum_chunks(tensors, seeds, coeffs, scale, regions,
                                             subspaces):
        target.add_(delta)


def noise_sum_chunks(tensors: Mapping[str, torch.Tensor], seeds: Sequence[int],
                     coeffs: Sequence[float], scale: float,
                     regions: Mapping[str, tuple[tuple[int, ...], tuple[slice, ...]]]
                     | None = None, subspaces: Sequence | None = None
                     ) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, a view of tensors[name], scale * sum_i coeffs[i] * eps(seeds[i], name) over
    that view), chunk by chunk, float32: what add_noise_sum_ adds (the caller adds each
    delta to its view before taking the next chunk).

    The ES update of a float32 master, shared by every backend and by the update stage
    (which works on checkpoint files without building a model). The sum is accumulated one
    chunk of every direction's noise at a time: memory G * chunk, not G * tensor; every
    product and sum is rounded on its own (see perturb_into), so any chunking gives the
    same bits.
    `regions[name] = (logical shape, region)` says that tensors[name] holds only that region
    of the logical tensor (a tensor-parallel worker's shard).
    `subspaces[i]` (CoPES, an esopt.es.strategy.Subspace) restricts direction i's noise to
    its chunks: only those elements are drawn and added (1/K of the draws of plain ES), in
    the same direction order per element, so the bits are those of adding zero noise
    elsewhere.
    """
    if len(seeds) != len(coeffs):
        raise ValueError(f"{len(seeds)} seeds but {len(coeffs)} coefficients")
    if subspaces:
        if regions is not None:
            raise ValueError("subspaces on tensor-parallel shards are not supported")
        if len(subspaces) != len(seeds):
            raise ValueError(f"{len(seeds)} seeds but {len(subspaces)} subspaces")
        from esopt.es.copes import subspace_ranges

        numels = {n: t.numel() for n, t in tensors.items()}
        ranges = [subspace_ranges(s, numels) for s in subspaces]
    threads = min(torch.get_num_threads(), len(seeds))
    # The directions' chunks are drawn on the job's threads (_in_step); CoPES's subspace
    # sums draw range by range in their own loop.
    pool = ThreadPoolExecutor(threads, "esopt-noise") if threads > 1 and not subspaces else None
    with pool or nullcontext():
        for name, tensor in tensors.items():
            if tensor.dtype != torch.float32 or not tensor.is_contiguous():
                raise ValueError(f"{name}: the update needs a contiguous float32 tensor, "
                                 f"got {tensor.dtype}")
            if subspaces:
                for target, delta in _subspace_noise_sum(
                        tensor.view(-1), name, seeds, coeffs, scale,
                        [r.get(name, []) for r in ranges]):
                    yield name, target, delta
                continue
            region = None if regions is None else regions.get(name)
            streams = [_target_chunks(s, name, tensor, region) for s in seeds]
            for chunks in _in_step(streams, pool):
                target = chunks[0][0]
                acc = torch.zeros_like(target)
                for (_, eps), c in zip(chunks, coeffs, strict=True):
                    if c:
                        acc.add_(eps.mul_(c))
                yield name, target, acc.mul_(scale)


def _in_step(streams: list[Iterator], pool: ThreadPoolExecutor | None) -> Iterator[list]:
    """zip(*streams, strict=True), the streams advanced on `pool`'s threads.

    Drawing dominates an update (16 directions of SmolLM2: ~6 of ~14 s on one core) and the
    compiled draw releases the GIL, so the directions' chunks are drawn concurrently; the
    caller still sums them in direction order, so the bits do not depend on the threads."""
    if pool is None:
        yield from zip(*streams, strict=True)
        return
    end = object()
    while True:
        chunks = list(pool.map(lambda stream: next(stream, end), streams))
        done = [c is end for c in chunks]
        if all(done):
            return
        if any(done):
            raise ValueError("noise streams of one tensor ended at different chunks")
        yield chunks


def _subspace_noise_sum(flat: torch.Tensor, name: str, seeds: Sequence[int],
                        coeffs: Sequence[float], scale: float,
                        ranges: Sequence[list[tuple[int, int]]]
                        ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """noise_sum_chunks of one flat tensor where direction i's noise lives in ranges[i]
    only: a NOISE_BLOCK of the sum at a time, each direction drawing just its overlap."""
    for start in range(0, flat.numel(), NOISE_BLOCK):
        stop = min(start + NOISE_BLOCK, flat.numel())
        acc = torch.zeros(stop - start, dtype=torch.float32)
        for seed, c, own in zip(seeds, coeffs, ranges, strict=True):
            if not c:
                continue
            for a, b in own:
                lo, hi = max(a, start), min(b, stop)
                if lo < hi:
                    acc[lo - start:hi - start].add_(draw(seed, name, lo, hi - lo).mul_(c))
        yield flat[start:stop], acc.mul_(scale)


def _target_chunks(seed: int, name: str, tensor: torch.Tensor, region=None
                   ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(view of `tensor`, its noise) one chunk at a time; `tensor` holds the whole logical
    tensor, or only `region = (logical shape, slices)` of it."""
    if region is None:
        flat = tensor.view(-1)
        for start, eps in noise_chunks(seed, name, flat.numel(), 1):
            yield flat[start : start + eps.numel()], eps
        return
    shape, slices = region
    rows = tensor.view(1, -1) if tensor.dim() == 1 else tensor
    for r, eps in region_chunks(seed, name, shape, slices, NOISE_BLOCK):
        yield rows[r : r + eps.shape[0]], eps
