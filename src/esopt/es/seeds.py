"""Seed derivation: every random stream is addressed by a hash of its coordinates.

A hash (never a draw from another RNG) so that seeds of different (run, generation,
direction) coordinates cannot collide by construction of the stream and can be
recomputed anywhere from the coordinates alone: noise is shipped as seeds, never as
vectors. The noise of a tensor under a direction seed is keyed in esopt.es.noise.
"""

from __future__ import annotations

import hashlib

# 63 bits keeps a seed a valid int64 (Parquet columns, numpy arrays).
_SEED_MASK = (1 << 63) - 1


def mix(*parts: int | str) -> int:
    """Hash an ordered tuple of ints/strings to a 63-bit seed."""
    h = hashlib.blake2b(digest_size=8, person=b"esopt-seed-v1")
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, int | str):
            raise TypeError(f"seed parts must be int or str, got {type(part).__name__}")
        tag = b"i" if isinstance(part, int) else b"s"
        data = str(part).encode()
        # Length-prefixed so ("ab", "c") and ("a", "bc") hash differently.
        h.update(tag + len(data).to_bytes(4, "little") + data)
    return int.from_bytes(h.digest(), "little") & _SEED_MASK


def direction_seed(run_seed: int, generation: int, direction: int) -> int:
    """Seed of direction `direction` in generation `generation` of run `run_seed`."""
    if generation < 0 or direction < 0:
        raise ValueError(f"generation and direction must be >= 0, got {generation}, {direction}")
    return mix("direction", run_seed, generation, direction)

