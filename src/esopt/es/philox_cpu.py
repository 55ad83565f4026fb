"""The noise spec of `esopt.es.philox`, fused in one compiled loop for CPUs (numba).

The same operations in the same order as the tensor version, each on float32 or 32-bit
integer scalars: LLVM vectorises the loop over Philox groups (AVX2 `vpmuludq` for the
32x32-bit products, 8 float32 lanes for the transform) without changing a bit, since numba
compiles without fast-math (no reassociation, no fused multiply-add). Measured here: about
2-3x torch.randn's numbers/s on one core (benchmarks/es_primitives.py). Tested
bit-identical to the tensor version and to golden vectors from an independent numpy
implementation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from esopt.es import philox as spec

_u64, _f32, _i32 = np.uint64, np.float32, np.int32
# Every integer is a uint64 holding (at most) 32 bits: numba widens uint32 arithmetic to
# 64 bits and mixing signed with unsigned turns to float64, so one type throughout.
# Integers reach float32 through int32 (all are below 2^25): AVX2 converts int32 lanes,
# not 64-bit ones, and one scalar conversion would stop the loop from vectorising.
_M0, _M1 = _u64(spec.PHILOX_M0), _u64(spec.PHILOX_M1)
_W0, _W1 = _u64(spec.PHILOX_W0), _u64(spec.PHILOX_W1)
_LOW32, _32 = _u64(spec.MASK32), _u64(32)
_LN2, _SQRT2, _HALF_PI = _f32(spec.LN2), _f32(spec.SQRT2), _f32(spec.HALF_PI)
_TWO_M24, _ONE, _HALF, _MINUS_TWO, _F24 = (_f32(spec.TWO_M24), _f32(1.0), _f32(0.5),
                                           _f32(-2.0), _f32(24.0))
_L9, _L7, _L5, _L3 = (_f32(c) for c in spec.LOG_COEFFS)
_S11, _S9, _S7, _S5, _S3 = (_f32(c) for c in spec.SIN_COEFFS)
_C12, _C10, _C8, _C6, _C4, _C2 = (_f32(c) for c in spec.COS_COEFFS)

_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(inline="always", **_JIT)
def _philox(c0, c1, c2, c3, k0, k1):
    for _ in range(10):
        p0 = c0 * _M0  # < 2^64: exact in uint64
        p1 = c2 * _M1
        c0, c1, c2, c3 = ((p1 >> _32) ^ c1 ^ k0, p1 & _LOW32,
                          (p0 >> _32) ^ c3 ^ k1, p0 & _LOW32)
        k0 = (k0 + _W0) & _LOW32
        k1 = (k1 + _W1) & _LOW32
    return c0, c1, c2, c3


@njit(inline="always", **_JIT)
def _bit_length_minus_one(m):
    """floor(log2 m) for 1 <= m <= 2^24, branch-free (vectorisable)."""
    t16 = _u64(m >= _u64(1 << 16)) * _u64(16)
    m8 = m >> t16
    t8 = _u64(m8 >= _u64(1 << 8)) * _u64(8)
    m4 = m8 >> t8
    t4 = _u64(m4 >= _u64(1 << 4)) * _u64(4)
    m2 = m4 >> t4
    t2 = _u64(m2 >= _u64(1 << 2)) * _u64(2)
    m1 = m2 >> t2
    return t16 + t8 + t4 + t2 + _u64(m1 >= _u64(2))


@njit(inline="always", **_JIT)
def _pair(a, b):
    m = (a >> _u64(8)) + _u64(1)
    e0 = _bit_length_minus_one(m)
    # f = m * 2^-e exactly (the tensor version's frexp), as two exact float32 products.
    f0 = _f32(_i32(m)) * (_f32(_i32(_u64(1) << (_u64(24) - e0))) * _TWO_M24)
    big = f0 > _SQRT2
    f = f0 * _HALF if big else f0
    e = e0 + _u64(big)
    s = (f - _ONE) / (f + _ONE)
    z = s * s
    p = z * _L9 + _L7
    p = p * z + _L5
    p = p * z + _L3
    p = p * z + _ONE
    log_u = (_f32(_i32(e)) - _F24) * _LN2 + (s + s) * p
    r = np.sqrt(log_u * _MINUS_TWO)
    phi = _f32(_i32((b >> _u64(9)) * _u64(2) + _u64(1))) * _TWO_M24 * _HALF_PI
    z = phi * phi
    ps = z * _S11 + _S9
    ps = ps * z + _S7
    ps = ps * z + _S5
    ps = ps * z + _S3
    ps = ps * z + _ONE
    pc = z * _C12 + _C10
    pc = pc * z + _C8
    pc = pc * z + _C6
    pc = pc * z + _C4
    pc = pc * z + _C2
    pc = pc * z + _ONE
    z0 = r * pc
    z1 = r * (phi * ps)
    return (-z0 if b & _u64(1) else z0), (-z1 if b & _u64(2) else z1)


@njit(inline="always", **_JIT)
def _group(g, k0, k1, s2, s3):
    w0, w1, w2, w3 = _philox(g & _LOW32, g >> _32, s2, s3, k0, k1)
    z0, z1 = _pair(w0, w1)
    z2, z3 = _pair(w2, w3)
    return z0, z1, z2, z3


@njit(**_JIT)
def _fill_aligned(out, group0, k0, k1, s2, s3):
    """out[4i + j] = lane j of group group0 + i (the hot loop)."""
    # Masked here so LLVM knows every word has 32 bits: the products become vpmuludq.
    k0, k1, s2, s3 = k0 & _LOW32, k1 & _LOW32, s2 & _LOW32, s3 & _LOW32
    for i in range(out.shape[0] // 4):
        z0, z1, z2, z3 = _group(_u64(group0 + i), k0, k1, s2, s3)
        out[4 * i] = z0
        out[4 * i + 1] = z1
        out[4 * i + 2] = z2
        out[4 * i + 3] = z3


@njit(**_JIT)
def _fill_edge(out, pos, start, count, k0, k1, s2, s3):
    """out[pos:pos+count] = elements [start, start+count) that share one group."""
    z = _group(_u64(start >> 2), k0, k1, s2, s3)
    for j in range(count):
        out[pos + j] = z[(start + j) & 3]


@njit(**_JIT)
def _fill_range(out, pos, start, count, k0, k1, s2, s3):
    """out[pos:pos+count] = elements [start, start+count) of the stream."""
    head = min(count, (-start) & 3)
    if head:
        _fill_edge(out, pos, start, head, k0, k1, s2, s3)
    groups = (count - head) >> 2
    _fill_aligned(out[pos + head : pos + head + 4 * groups], (start + head) >> 2, k0, k1, s2,
                  s3)
    done = head + 4 * groups
    if done < count:
        _fill_edge(out, pos + done, start + done, count - done, k0, k1, s2, s3)


@njit(**_JIT)
def fill_rows(out, start, row_stride, k0, k1, s2, s3):
    """out[i, j] = element start + i * row_stride + j of the stream (out: 2-D float32)."""
    rows, cols = out.shape
    flat = out.reshape(rows * cols)
    k0, k1, s2, s3 = _u64(k0), _u64(k1), _u64(s2), _u64(s3)
    for i in range(rows):
        _fill_range(flat, i * cols, start + i * row_stride, cols, k0, k1, s2, s3)
