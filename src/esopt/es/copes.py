"""CoPES: a fresh random, equal-size partition of the parameter chunks into K subspaces.

A chunk is (tensor name, block b): elements [b*c, (b+1)*c) of the flat tensor, c =
`chunk_elements` (a tensor smaller than a block is one chunk). The chunks, listed in
sorted-name order, are sorted by a blake2b hash of (partition seed, name, b); the chunk at
position p belongs to subspace p*K // n_chunks. Pure Python on integers and hashes, so
every machine computes the same partition (never numpy's Generator.permutation, whose
stream is not promised across versions).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache

from esopt.es.strategy import Subspace


def chunk_list(numels: Mapping[str, int], chunk_elements: int) -> list[tuple[str, int]]:
    """Every (name, block) chunk of the parameters, in sorted-name, then block order."""
    return [(name, b) for name in sorted(numels)
            for b in range(max(1, -(-int(numels[name]) // chunk_elements)))]


def _chunk_hash(partition_seed: int, name: str, block: int) -> bytes:
    h = hashlib.blake2b(digest_size=16, person=b"esopt-copes-v1")
    h.update(partition_seed.to_bytes(8, "little"))
    h.update(block.to_bytes(8, "little"))
    h.update(name.encode())
    return h.digest()


@lru_cache(maxsize=64)
def _assignment(partition_seed: int, num_subspaces: int, chunk_elements: int,
                numels: tuple[tuple[str, int], ...]) -> dict[tuple[str, int], int]:
    chunks = chunk_list(dict(numels), chunk_elements)
    order = sorted(chunks, key=lambda c: _chunk_hash(partition_seed, *c))
    n = len(order)
    if n < num_subspaces:
        raise ValueError(f"{n} parameter chunks cannot fill {num_subspaces} subspaces; "
                         "lower subspace_chunk")
    return {c: p * num_subspaces // n for p, c in enumerate(order)}


def assignment(subspace: Subspace, numels: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """chunk -> its subspace index, for the partition `subspace` belongs to."""
    key = tuple(sorted((n, int(v)) for n, v in numels.items()))
    return _assignment(subspace.partition_seed, subspace.num_subspaces,
                       subspace.chunk_elements, key)


def subspace_ranges(subspace: Subspace, numels: Mapping[str, int]
                    ) -> dict[str, list[tuple[int, int]]]:
    """name -> the [start, stop) element ranges of `subspace` in that flat tensor (merged
    where consecutive; names without any chunk in the subspace are absent)."""
    c = subspace.chunk_elements
    out: dict[str, list[tuple[int, int]]] = {}
    for (name, b), k in sorted(assignment(subspace, numels).items()):
        if k != subspace.k:
            continue
        start, stop = b * c, min((b + 1) * c, int(numels[name]))
        ranges = out.setdefault(name, [])
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], stop)
        else:
            ranges.append((start, stop))
    return out
