"""The noise spec: Philox4x32-10 words turned into float32 normals by Box-Muller.

This module is the definition, written in torch integer and float32 tensor ops so that
it runs unchanged on every device; `esopt.es.philox_cpu` is the same arithmetic fused in
one compiled loop for speed on CPUs, tested bit-identical to this one.

Element `o` of a noise stream with key (k0, k1) and stream words (c2, c3) is lane `o % 4`
of group `g = o // 4`:
  (w0, w1, w2, w3) = Philox4x32-10(counter=(g mod 2^32, g div 2^32, c2, c3), key=(k0, k1))
  (z0, z1) = pair(w0, w1), (z2, z3) = pair(w2, w3)
with pair(a, b), every step one IEEE float32 operation (round to nearest):
  radius: m = (a >> 8) + 1 in [1, 2^24]; u = m * 2^-24 in (0, 1] (exact);
          ln u = (e - 24) ln2 + ln f, where m = f * 2^e exactly, f in [1, 2), folded to
          [sqrt(1/2), sqrt(2)] (f > sqrt2 -> f/2, e+1); ln f = 2s(1 + s^2/3 + ... + s^8/9),
          s = (f - 1)/(f + 1), by Horner; r = sqrt(-2 ln u)
  angle:  phi = (2 (b >> 9) + 1) * 2^-24 * pi/2 in (0, pi/2); sin and cos by Taylor
          polynomials of degree 11 and 12 in Horner form
  z0 = r cos(phi), negated if bit 0 of b is set; z1 = r sin(phi), negated if bit 1 is set
(uniform angles on a quarter turn reflected into the four quadrants by two sign bits:
a uniform angle on the circle, so (z0, z1) is a standard normal pair).

Only exactly rounded operations appear: +, -, *, / of two tensors, the IEEE square root
(which torch's vectorised CPU kernel is not: corrected here), conversions of integers
below 2^24, frexp. No transcendental library function, whose last bit differs between
CPUs, GPUs and library versions, and no fused multiply-add (torch's `alpha=` arguments
may fuse; never used here). So CPU and CUDA, and every torch version, draw the same bits.
"""

from __future__ import annotations

import math

import numpy as np
import torch

# Random123's Philox4x32 constants (Salmon et al., SC'11).
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10
MASK32 = 0xFFFFFFFF


def _f32(x: float) -> float:
    """x rounded to float32 (so a Python scalar reaches every kernel exactly)."""
    return float(np.float32(x))


# Constants of the transform, each rounded to float32 once; part of the spec.
LN2 = _f32(math.log(2.0))
SQRT2 = _f32(math.sqrt(2.0))
HALF_PI = _f32(math.pi / 2)
TWO_M24 = 2.0**-24
LOG_COEFFS = tuple(_f32(1 / k) for k in (9, 7, 5, 3))  # Horner order, then + 1
SIN_COEFFS = tuple(_f32((-1) ** (k // 2) / math.factorial(k)) for k in (11, 9, 7, 5, 3))
COS_COEFFS = tuple(_f32((-1) ** (k // 2) / math.factorial(k)) for k in (12, 10, 8, 6, 4, 2))


def _mulhilo(x: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit words of x * m for 32-bit x (int64 tensor) and constant m.

    Split into 16-bit halves so that no int64 product overflows (x * m can exceed 2^63)."""
    m_hi, m_lo = m >> 16, m & 0xFFFF
    low_part = x * m_lo  # < 2^48
    mid = x * m_hi + (low_part >> 16)  # < 2^49
    lo = ((mid & 0xFFFF) << 16) | (low_part & 0xFFFF)
    return mid >> 16, lo


def philox4x32(counter: tuple[torch.Tensor, ...], key: tuple[int, int]
               ) -> tuple[torch.Tensor, ...]:
    """Philox4x32-10 of int64 tensors holding 32-bit counter words, under a 64-bit key."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(PHILOX_ROUNDS):
        hi0, lo0 = _mulhilo(c0, PHILOX_M0)
        hi1, lo1 = _mulhilo(c2, PHILOX_M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + PHILOX_W0) & MASK32, (k1 + PHILOX_W1) & MASK32
    return c0, c1, c2, c3


def _horner(z: torch.Tensor, coeffs: tuple[float, ...]) -> torch.Tensor:
    """((c0 z + c1) z + ...) z + 1, one rounding per operation."""
    p = z * coeffs[0] + coeffs[1]
    for c in coeffs[2:]:
        p = p * z + c
    return p * z + 1.0


def _sqrt_rounded(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded float32 square root of x >= 0 (IEEE sqrt).

    torch's vectorised CPU sqrt is not correctly rounded (it differed from IEEE in the last
    bit for 16% of float32 inputs here), so its result is only a first guess, corrected by
    one ulp where the exact test says so: the midpoints between y and its neighbours are
    exact in float64, and so are their squares (50 significant bits), so comparing them with
    x decides the rounding exactly (a float32 square root never falls on a midpoint)."""
    y = torch.sqrt(x)
    up = torch.nextafter(y, torch.full_like(y, math.inf))
    down = torch.nextafter(y, torch.zeros_like(y))
    x64, y64 = x.double(), y.double()
    low_mid, high_mid = (y64 + down.double()) * 0.5, (y64 + up.double()) * 0.5
    y = torch.where(low_mid * low_mid > x64, down, y)
    return torch.where(high_mid * high_mid < x64, up, y)


def normal_pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two float32 standard normals from two 32-bit words (int64 tensors), as specified."""
    m = ((a >> 8) + 1).to(torch.float32)  # exact: m <= 2^24
    mant, exp = torch.frexp(m)  # m = mant * 2^exp, mant in [0.5, 1): exact
    f = mant + mant
    e = exp.to(torch.float32) - 1.0
    big = f > SQRT2
    f = torch.where(big, f * 0.5, f)
    e = e + big.to(torch.float32)
    s = (f - 1.0) / (f + 1.0)
    log_u = (e - 24.0) * LN2 + (s + s) * _horner(s * s, LOG_COEFFS)
    r = _sqrt_rounded(log_u * -2.0)
    phi = ((b >> 9) * 2 + 1).to(torch.float32) * TWO_M24 * HALF_PI
    z = phi * phi
    sin = phi * _horner(z, SIN_COEFFS)
    cos = _horner(z, COS_COEFFS)
    z0, z1 = r * cos, r * sin
    return (torch.where((b & 1).bool(), -z0, z0), torch.where((b & 2).bool(), -z1, z1))


def normals_at(offsets: torch.Tensor, stream: tuple[int, int, int, int]) -> torch.Tensor:
    """The noise values at the given element offsets (int64 tensor, any device) of the
    stream (k0, k1, c2, c3); float32, same shape and device as `offsets`."""
    k0, k1, s2, s3 = stream
    group = offsets >> 2
    lane = offsets & 3
    c0, c1 = group & MASK32, group >> 32
    words = philox4x32((c0, c1, torch.full_like(c0, s2), torch.full_like(c0, s3)), (k0, k1))
    first = lane < 2
    a = torch.where(first, words[0], words[2])
    b = torch.where(first, words[1], words[3])
    z0, z1 = normal_pair(a, b)
    return torch.where((lane & 1).bool(), z1, z0)
