"""An independent numpy implementation of the noise spec (esopt.es.philox's docstring),
written from the spec, not from the library's code: it made the committed golden vectors
(tests/es/noise_golden.json) and the tests compare both library implementations with it.

Regenerate the golden file (only when NOISE_SPEC changes):
    python -m tests.es.noise_reference > tests/es/noise_golden.json
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np

U64 = np.uint64
F32 = np.float32


def philox4x32_10(ctr: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Random123 Philox4x32-10: ctr (n, 4) uint64 words < 2^32 -> (n, 4) words."""
    c = [ctr[:, i].astype(U64) for i in range(4)]
    k0, k1 = U64(key[0]), U64(key[1])
    for _ in range(10):
        p0 = c[0] * U64(0xD2511F53)
        p1 = c[2] * U64(0xCD9E8D57)
        c = [(p1 >> U64(32)) ^ c[1] ^ k0, p1 & U64(0xFFFFFFFF),
             (p0 >> U64(32)) ^ c[3] ^ k1, p0 & U64(0xFFFFFFFF)]
        k0 = (k0 + U64(0x9E3779B9)) & U64(0xFFFFFFFF)
        k1 = (k1 + U64(0xBB67AE85)) & U64(0xFFFFFFFF)
    return np.stack(c, axis=1)


def _poly(z: np.ndarray, degrees: tuple[int, ...], coeff) -> np.ndarray:
    p = z * F32(coeff(degrees[0])) + F32(coeff(degrees[1]))
    for d in degrees[2:]:
        p = p * z + F32(coeff(d))
    return p * z + F32(1.0)


def box_muller(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spec's pair: 32-bit words a, b (uint64 arrays) -> two float32 normals."""
    m = (a >> U64(8)) + U64(1)
    mf = m.astype(F32)
    e = np.floor(np.log2(m.astype(np.float64))).astype(np.int64)  # exact for m <= 2^24
    f = mf / np.exp2(e).astype(F32)  # a power of two: exact
    big = f > F32(math.sqrt(2.0))
    f = np.where(big, f * F32(0.5), f)
    e = e + big
    s = (f - F32(1.0)) / (f + F32(1.0))
    log_poly = _poly(s * s, (9, 7, 5, 3), lambda k: 1.0 / k)
    log_u = (e.astype(F32) - F32(24.0)) * F32(math.log(2.0)) + (s + s) * log_poly
    r = np.sqrt(log_u * F32(-2.0))
    phi = ((b >> U64(9)) * U64(2) + U64(1)).astype(F32) * F32(2.0**-24) * F32(math.pi / 2)
    z = phi * phi
    taylor = lambda k: (-1) ** (k // 2) / math.factorial(k)  # noqa: E731
    sin = phi * _poly(z, (11, 9, 7, 5, 3), taylor)
    cos = _poly(z, (12, 10, 8, 6, 4, 2), taylor)
    z0, z1 = r * cos, r * sin
    return np.where(b & U64(1), -z0, z0), np.where(b & U64(2), -z1, z1)


def stream(seed: int, name: str) -> tuple[int, int, int, int]:
    d = hashlib.blake2b(seed.to_bytes(16, "little") + name.encode(), digest_size=16,
                        person=b"esopt-noise-v2").digest()
    return tuple(int.from_bytes(d[i : i + 4], "little") for i in range(0, 16, 4))


def noise(seed: int, name: str, start: int, count: int) -> np.ndarray:
    """Elements [start, start + count) of the flat noise of tensor `name`."""
    k0, k1, s2, s3 = stream(seed, name)
    groups = np.arange(start // 4, (start + count + 3) // 4, dtype=np.uint64)
    ctr = np.stack([groups & U64(0xFFFFFFFF), groups >> U64(32),
                    np.full_like(groups, s2), np.full_like(groups, s3)], axis=1)
    w = philox4x32_10(ctr, (k0, k1))
    z0, z1 = box_muller(w[:, 0], w[:, 1])
    z2, z3 = box_muller(w[:, 2], w[:, 3])
    flat = np.stack([z0, z1, z2, z3], axis=1).reshape(-1)
    return flat[start - 4 * (start // 4):][:count]


# (seed, tensor name, start, count): block starts, unaligned edges, and offsets past 2^32
# elements (the counter's high word).
GOLDEN_CASES = [
    (0, "model.embed_tokens.weight", 0, 64),
    (7, "model.layers.0.self_attn.q_proj.weight", 1_048_573, 11),
    (2**63 - 1, "model.norm.weight", 5, 3),
    (123456789, "lm_head.weight", 2**32 * 4 - 6, 12),
    (42, "x", 2**40 + 1, 9),
]


def golden() -> dict:
    cases = []
    for seed, name, start, count in GOLDEN_CASES:
        values = noise(seed, name, start, count)
        cases.append({"seed": seed, "name": name, "start": start, "count": count,
                      "float32_bits": " ".join(f"{int(v):08x}" for v in values.view(np.uint32))})
    return {"spec": "esopt-noise/2", "cases": cases}


if __name__ == "__main__":
    print(json.dumps(golden(), indent=1))
