"""Low-rank (EGGROLL-style) ES noise: every matrix W (m x n) of a direction gets
eps = A B^T / sqrt(r), A (m x r) and B (n x r) standard normals from the counter-based
noise (streams f"{name}/lowrank_A", f"{name}/lowrank_B"), so an element of eps has mean 0
and variance 1 as full-rank noise does (its excess kurtosis is 6/r: it tends to a normal
as r grows). The other tensors (1-D: norms, biases) get the full-rank noise of
esopt.es.noise when `full_rank_vectors` (EGGROLL's default: its reference perturbs every
non-matrix parameter with full-rank Gaussian noise unless `freeze_nonlora`;
ESHyperscale/HyperscaleES, src/hyperscalees/noiser/eggroll.py), else they are not
perturbed. The population-batched forward (x W^T + s (x B) A^T,
esopt.backends.lowrank_batch) evaluates the matrices' terms by hooks and gives each row
its member's perturbed vectors.

A B^T is summed as r outer products, each rounded on its own in a fixed order (no matmul,
whose blocking and so rounding differ across machines and thread counts): the same bits
everywhere, as the full-rank noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

import torch

from esopt.es.noise import NOISE_BLOCK, draw, noise_sum_chunks


def is_lowrank(shape: Sequence[int]) -> bool:
    """Tensors that get low-rank noise: matrices (the others full-rank noise, or none)."""
    return len(shape) == 2


def factors(seed: int, name: str, shape: Sequence[int], rank: int
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) of the matrix `name` (m x n) under direction `seed`: (m, r), (n, r) float32."""
    m, n = (int(d) for d in shape)
    a = draw(seed, f"{name}/lowrank_A", 0, m * rank).view(m, rank)
    b = draw(seed, f"{name}/lowrank_B", 0, n * rank).view(n, rank)
    return a, b


def lowrank_rows(a: torch.Tensor, b: torch.Tensor, r0: int, r1: int,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Rows [r0, r1) of eps = A B^T / sqrt(r), float32, one outer product at a time."""
    rank = a.shape[1]
    rows = a[r0:r1]
    if out is None:
        out = torch.empty((r1 - r0, b.shape[0]), dtype=torch.float32)
    torch.mul(rows[:, :1], b[:, 0][None, :], out=out)
    tmp = torch.empty_like(out) if rank > 1 else None
    for j in range(1, rank):
        torch.mul(rows[:, j : j + 1], b[:, j][None, :], out=tmp)
        out.add_(tmp)
    return out.mul_(1.0 / math.sqrt(rank))


def lowrank_chunks(seed: int, name: str, shape: Sequence[int], rank: int,
                   max_elements: int = NOISE_BLOCK) -> Iterator[tuple[int, torch.Tensor]]:
    """(first row, eps rows) of a matrix's low-rank noise, at most max_elements at a time."""
    a, b = factors(seed, name, shape, rank)
    m, n = a.shape[0], b.shape[0]
    per = max(1, max_elements // max(n, 1))
    scratch = torch.empty(min(per, m) * n, dtype=torch.float32)
    for r in range(0, m, per):
        k = min(per, m - r)
        yield r, lowrank_rows(a, b, r, r + k, out=scratch[: k * n].view(k, n))


def lowrank_noise(seed: int, name: str, shape: Sequence[int], rank: int) -> torch.Tensor:
    """The whole low-rank noise matrix (tests, small tensors)."""
    a, b = factors(seed, name, shape, rank)
    return lowrank_rows(a, b, 0, a.shape[0])


def add_lowrank_sum_(tensors: Mapping[str, torch.Tensor], seeds: Sequence[int],
                     coeffs: Sequence[float], scale: float, rank: int,
                     full_rank_vectors: bool = False) -> None:
    """tensors[name] += scale * sum_i coeffs[i] * A_i B_i^T / sqrt(r) for every matrix, in
    place, float32, row chunks at a time (memory G * chunk); the other tensors get the
    full-rank noise sum when `full_rank_vectors`, else stay unchanged."""
    for _, target, delta in lowrank_sum_chunks(tensors, seeds, coeffs, scale, rank,
                                               full_rank_vectors):
        target.add_(delta)


def lowrank_sum_chunks(tensors: Mapping[str, torch.Tensor], seeds: Sequence[int],
                       coeffs: Sequence[float], scale: float, rank: int,
                       full_rank_vectors: bool = False
                       ) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, rows of tensors[name], their delta) chunk by chunk: what add_lowrank_sum_
    adds (the caller adds each delta to its view before taking the next chunk)."""
    if len(seeds) != len(coeffs):
        raise ValueError(f"{len(seeds)} seeds but {len(coeffs)} coefficients")
    for name, tensor in tensors.items():
        if not is_lowrank(tensor.shape):
            if full_rank_vectors:
                yield from noise_sum_chunks({name: tensor}, seeds, coeffs, scale)
            continue
        if tensor.dtype != torch.float32 or not tensor.is_contiguous():
            raise ValueError(f"{name}: the update needs a contiguous float32 tensor")
        streams = [lowrank_chunks(s, name, tensor.shape, rank) for s in seeds]
        for chunks in zip(*streams, strict=True):
            r = chunks[0][0]
            target = tensor[r : r + chunks[0][1].shape[0]]
            acc = torch.zeros_like(target)
            for (_, eps), c in zip(chunks, coeffs, strict=True):
                if c:
                    acc.add_(eps.mul_(c))
            yield name, target, acc.mul_(scale)
