"""Independent numpy reference for the ZO perturbation RNG and update rules (the backends'
ZO ops: contract src/backend/zo_ops.h, CPU src/backend/cpu_philox.c and cpu_zo.c), following
docs/ZO_RNG.md op by op.

Run (from the repository root):
    /work/venv/bin/python tools/ref_zo_rng.py              # writes tests/data/zo/rng_golden.json (~40 KB, ~8 s; v2 needs scipy)
    /work/venv/bin/python tools/ref_zo_rng.py --accuracy   # prints max error of dz_logf / dz_sincos2pi
                                                           # over all inputs Box-Muller gives them (writes nothing)
    /work/venv/bin/python tools/ref_zo_rng.py --v2-table   # writes src/backend/zo_rng_v2_table.h (needs scipy)
Also importable (e.g. `sys.path.insert(0, "tools"); import ref_zo_rng as R`):
    philox4x32(ctr, key)                         Philox4x32-10, arrays of shape (..., 4) / (..., 2) -> (..., 4) uint32
    philox_bits(seed, purpose, tensor, draw, i0, n)   the uint32 word of each element i0..i0+n-1
    z_fill(seed, tensor, draw, i0, n, dist)      z as float32 (dist 0/"gaussian" or 1/"rademacher"; ZO_RNG v2
                                                 (docs/ZO_RNG.md section 10): 2/"gaussian-v2", 3/"rademacher-v2")
    v2_table()                                   v2's 2^15 quantiles (float32; scipy's ndtri)
    logf(x), sincos2pi(u)                        the float32 polynomials (bitwise equal to the C ones)
    sr_bf16(v, bits)                             stochastic rounding float32 -> bf16 bits (uint16)
    perturb_pair(theta, eps, seed, tensor, draw, i0, dist)             -> (w_plus, w_minus) float32
    perturb_pair_bf16(theta_u16, eps, seed, tensor, draw, i0, dist)     -> (w_plus, w_minus) float32
    update_f32(theta, g, q, lr, wd, seed, tensor, step, i0, dist)       -> new theta float32
    update_bf16(theta_u16, g, q, lr, wd, seed, tensor, step, i0, dist)  -> new theta bf16 bits (uint16)

Written from the published algorithms (Salmon et al. 2011, Random123 constants; Cephes logf;
Box-Muller), not from the C code: every float op is an np.float32 op on arrays (numpy never
fuses multiply-add), integer ops are uint32/uint64 with wrap-around. Known-answer vectors of
Philox are from Random123's tests/kat_vectors.
"""

import argparse
import functools
import json
import os
import sys

import numpy as np

F = np.float32
U32 = np.uint32
U64 = np.uint64

# Random123 Philox4x32 constants.
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PURPOSE_Z, PURPOSE_SR = 0, 1
GAUSSIAN, RADEMACHER = 0, 1
GAUSSIAN_V2, RADEMACHER_V2 = 2, 3  # ZO_RNG v2 (docs/ZO_RNG.md section 10)
V2_ROUNDS = 7
V2_TABLE_HEADER = "src/backend/zo_rng_v2_table.h"

KATS = [  # Random123 tests/kat_vectors, "philox4x32 10": ctr[4], key[2] -> out[4]
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _mulhilo(m, x):
    p = U64(m) * x.astype(U64)
    return (p >> U64(32)).astype(U32), (p & U64(0xFFFFFFFF)).astype(U32)


def philox4x32(ctr, key, rounds=10):
    """Philox4x32-R; ctr (..., 4) and key (..., 2) broadcast; returns (..., 4) uint32."""
    ctr = np.asarray(ctr, dtype=np.uint64).astype(U32)
    key = np.asarray(key, dtype=np.uint64).astype(U32)
    c = [ctr[..., k] for k in range(4)]
    k0, k1 = key[..., 0], key[..., 1]
    for r in range(rounds):
        if r:
            k0 = ((k0.astype(U64) + U64(PHILOX_W0)) & U64(0xFFFFFFFF)).astype(U32)
            k1 = ((k1.astype(U64) + U64(PHILOX_W1)) & U64(0xFFFFFFFF)).astype(U32)
        hi0, lo0 = _mulhilo(PHILOX_M0, c[0])
        hi1, lo1 = _mulhilo(PHILOX_M1, c[2])
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return np.stack(np.broadcast_arrays(*c), axis=-1).astype(U32)


def philox_bits(seed, purpose, tensor, draw, i0, n):
    """Word x[i % 4] of block j = i // 4 for i in i0..i0+n-1, counter (j, purpose, tensor, draw)."""
    i = np.arange(i0, i0 + n, dtype=np.uint64)
    j = i // U64(4)
    assert n == 0 or int(j[-1]) < 2**32, "block index must fit in 32 bits"
    ctr = np.zeros((n, 4), dtype=np.uint64)
    ctr[:, 0], ctr[:, 1], ctr[:, 2], ctr[:, 3] = j, purpose, tensor & 0xFFFFFFFF, draw & 0xFFFFFFFF
    key = np.array([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF], dtype=np.uint64)
    out = philox4x32(ctr, key)
    return out[np.arange(n), (i % U64(4)).astype(np.int64)]


def _f32(v):
    return np.asarray(v, dtype=F)


def _bits(x):
    return _f32(x).view(U32)


def _from_bits(b):
    return np.asarray(b, dtype=U32).view(F)


# dz_logf: Cephes logf (S. Moshier), branch-free reduction x = 2^e * m, m in [sqrt(1/2), sqrt(2)).
LOG_P = [float.fromhex(h) for h in (  # the Cephes coefficients rounded to float32, highest first
    "0x1.204376p-4", "-0x1.d7a370p-4", "0x1.de4a34p-4", "-0x1.fcba9ep-4", "0x1.23d37ep-3",
    "-0x1.555ca0p-3", "0x1.999d58p-3", "-0x1.fffff8p-3", "0x1.555554p-2")]
LOG_C1 = float.fromhex("0x1.630000p-1")   # 0.693359375 (exact, 9 bits): ln2 high part
LOG_C2 = float.fromhex("-0x1.bd0106p-13")  # -2.12194440e-4: ln2 - LOG_C1
SQRT_HALF_BITS = 0x3F3504F3                # float32 sqrt(1/2)


def logf(x):
    """Natural log of float32 x > 0 (normal, finite)."""
    t = ((_bits(x).astype(np.int64) - SQRT_HALF_BITS) & 0xFFFFFFFF).astype(U32)
    e = (t.view(np.int32) >> 23).astype(np.int32)            # arithmetic shift
    m = _from_bits(((t & U32(0x7FFFFF)) + U32(SQRT_HALF_BITS)).astype(U32))
    f = m - F(1.0)                                             # exact (Sterbenz)
    z = f * f
    p = F(LOG_P[0]) + np.zeros_like(f)
    for c in LOG_P[1:]:
        p = p * f + F(c)
    y = p * f
    y = y * z
    fe = e.astype(F)
    y = y + fe * F(LOG_C2)
    y = y + F(-0.5) * z
    r = f + y
    return r + fe * F(LOG_C1)


# dz_sincos2pi: u -> (sin 2 pi u, cos 2 pi u). Quarter turns n = round(4u), r = 4u - n in
# [-1/2, 1/2] exactly, then sin(pi/2 r) = r * S(r^2), cos(pi/2 r) = 1 + r^2 * C(r^2)
# (least-squares-minimax fits on [0, 1/2], rounded to float32).
SIN_S = [float.fromhex(h) for h in ("-0x1.2d9ca6p-8", "0x1.465eccp-4", "-0x1.4abbbap-1", "0x1.921fb6p+0")]
COS_C = [float.fromhex(h) for h in ("0x1.deecdcp-11", "-0x1.55d63ep-6", "0x1.03c1fap-2", "-0x1.3bd3ccp+0")]


def sincos2pi(u):
    """u float32 in [0, 1) -> (sin, cos) of 2 pi u, float32."""
    t = _f32(u) * F(4.0)
    n = (t + F(0.5)).astype(np.int32)                          # truncation: t >= 0
    r = t - n.astype(F)
    r2 = r * r
    s = F(SIN_S[0]) + np.zeros_like(r)
    for c in SIN_S[1:]:
        s = s * r2 + F(c)
    s = s * r
    c_ = F(COS_C[0]) + np.zeros_like(r)
    for c in COS_C[1:]:
        c_ = c_ * r2 + F(c)
    c_ = c_ * r2 + F(1.0)
    q = n & 3
    odd = (q & 1) == 1
    cos_v = np.where(odd, s, c_)
    sin_v = np.where(odd, c_, s)
    cos_v = np.where((q == 1) | (q == 2), -cos_v, cos_v)
    sin_v = np.where(q >= 2, -sin_v, sin_v)
    return sin_v.astype(F), cos_v.astype(F)


def _dist(d):
    if isinstance(d, str):
        return {"gaussian": GAUSSIAN, "rademacher": RADEMACHER, "gaussian-v2": GAUSSIAN_V2,
                "rademacher-v2": RADEMACHER_V2}[d]
    return int(d)


@functools.lru_cache(maxsize=1)
def v2_table():
    """The v2 quantile table: T[m] = float32(c * Phi^-1(1/2 + (m + 1/2) 2^-16)), m < 2^15, with c
    making the mean of the squares exactly 1 (in double) so that E[z^2] = 1 for the 2^16 values."""
    from scipy.special import ndtri
    q = ndtri(0.5 + (np.arange(32768, dtype=np.float64) + 0.5) * 2.0**-16)
    return (q / np.sqrt(np.mean(q * q))).astype(F)


def v2_table_c():
    """The C header with the table (bits), written by --v2-table."""
    bits = v2_table().view(U32)
    lines = ["/* Generated by tools/ref_zo_rng.py --v2-table: the ZO_RNG v2 quantile table T[m] =",
             " * float32(c Phi^-1(1/2 + (m + 1/2) 2^-16)), m = 0..32767, c = (mean of the squares)^-1/2",
             " * (docs/ZO_RNG.md section 10), as binary32 bit patterns. Do not edit. */",
             "#define DZ_ZV2_TABLE_DATA \\"]
    for k in range(0, 32768, 8):
        lines.append("    " + ", ".join(f"0x{int(b):08X}u" for b in bits[k:k + 8]) + ", \\")
    lines[-1] = lines[-1][:-3]
    return "\n".join(lines) + "\n"


def z_fill_v2(seed, tensor, draw, i0, n, dist):
    """v2: Philox4x32-7. Elements come in groups of 128 (g = i // 128, r = i % 128).
    Gaussian: 16 bits, half r // 64 (0 = low) of word (r // 16) % 4 of block 16 g + r % 16,
    through the table, top bit the sign; Rademacher: bit r % 32 of word r // 32 of block g."""
    i = np.arange(i0, i0 + n, dtype=np.uint64)
    g, r = i // U64(128), i % U64(128)
    block = g if dist == RADEMACHER_V2 else U64(16) * g + r % U64(16)
    ctr = np.zeros((n, 4), dtype=np.uint64)
    ctr[:, 0], ctr[:, 1], ctr[:, 2], ctr[:, 3] = block, PURPOSE_Z, tensor & 0xFFFFFFFF, draw & 0xFFFFFFFF
    key = np.array([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF], dtype=np.uint64)
    x = philox4x32(ctr, key, rounds=V2_ROUNDS)
    if dist == RADEMACHER_V2:
        w = x[np.arange(n), (r // U64(32)).astype(np.int64)]
        b = (w >> (r % U64(32)).astype(U32)) & U32(1)
        return (U32(0x3F800000) | (b << U32(31))).view(F)
    w = x[np.arange(n), ((r // U64(16)) % U64(4)).astype(np.int64)]
    h = (w >> (U32(16) * (r // U64(64)).astype(U32))) & U32(0xFFFF)
    return (v2_table()[h & U32(0x7FFF)].view(U32) | ((h >> U32(15)) << U32(31))).view(F)


def box_muller(xa, xb):
    """Words (x0, x1) -> (z0, z1) = r * (cos, sin)."""
    u1 = (((xa >> U32(8)) + U32(1)).astype(np.int32)).astype(F) * F(2.0**-24)
    u2 = ((xb >> U32(8)).astype(np.int32)).astype(F) * F(2.0**-24)
    r = np.sqrt(F(-2.0) * logf(u1))
    s, c = sincos2pi(u2)
    return r * c, r * s


def z_fill(seed, tensor, draw, i0, n, dist):
    """z_i for i in i0..i0+n-1 of tensor `tensor` at draw `draw` (float32 array)."""
    if n == 0:
        return np.zeros(0, dtype=F)
    dist = _dist(dist)
    if dist in (GAUSSIAN_V2, RADEMACHER_V2):
        return z_fill_v2(seed, tensor, draw, i0, n, dist)
    if dist == RADEMACHER:
        x = philox_bits(seed, PURPOSE_Z, tensor, draw, i0, n)
        return np.where((x >> U32(31)) != 0, F(-1.0), F(1.0)).astype(F)
    j0, j1 = i0 // 4, (i0 + n + 3) // 4
    x = philox_bits(seed, PURPOSE_Z, tensor, draw, 4 * j0, 4 * (j1 - j0)).reshape(-1, 4)
    z = np.empty_like(x, dtype=F)
    z[:, 0], z[:, 1] = box_muller(x[:, 0], x[:, 1])
    z[:, 2], z[:, 3] = box_muller(x[:, 2], x[:, 3])
    off = i0 - 4 * j0
    return z.reshape(-1)[off:off + n]


def bf16_to_f32(h):
    return (np.asarray(h, dtype=U32) << U32(16)).view(F)


def sr_bf16(v, bits):
    """Stochastic rounding: NaN/Inf round to nearest even (NaN made quiet), else truncate
    bits(v) + (x & 0xFFFF)."""
    u = _bits(v).astype(U32)
    a = u & U32(0x7FFFFFFF)
    sr = ((u + (np.asarray(bits, dtype=U32) & U32(0xFFFF))).astype(U32) >> U32(16)).astype(np.uint16)
    nonfin = (u >> U32(16)).astype(np.uint16) | np.where(a > U32(0x7F800000), 0x40, 0).astype(np.uint16)
    return np.where(a >= U32(0x7F800000), nonfin, sr).astype(np.uint16)


def perturb_pair(theta, eps, seed, tensor, draw, i0, dist):
    theta = _f32(theta)
    z = z_fill(seed, tensor, draw, i0, theta.size, dist)
    e = F(eps) * z
    return theta + e, theta - e


def perturb_pair_bf16(theta_u16, eps, seed, tensor, draw, i0, dist):
    return perturb_pair(bf16_to_f32(theta_u16), eps, seed, tensor, draw, i0, dist)


def _update_value(theta, g, q, lr, wd, seed, tensor, step, i0, dist):
    n = theta.size
    u = np.zeros(n, dtype=F)
    for j in range(q):
        d = (step * q + j) & 0xFFFFFFFF
        u = u + F(g[j]) * z_fill(seed, tensor, d, i0, n, dist)
    if q > 1:
        u = u / F(q)
    if F(wd) != F(0.0):
        u = u + F(wd) * theta
    return theta - F(lr) * u


def update_f32(theta, g, q, lr, wd, seed, tensor, step, i0, dist):
    return _update_value(_f32(theta), g, q, lr, wd, seed, tensor, step, i0, dist)


def update_bf16(theta_u16, g, q, lr, wd, seed, tensor, step, i0, dist):
    theta = bf16_to_f32(theta_u16)
    v = _update_value(theta, g, q, lr, wd, seed, tensor, step, i0, dist)
    bits = philox_bits(seed, PURPOSE_SR, tensor, (step * q) & 0xFFFFFFFF, i0, theta.size)
    return sr_bf16(v, bits)


def checksum(bits_u32):
    """sum_i bits[i] * (2i + 1) mod 2^64: any single changed value changes it."""
    b = np.asarray(bits_u32, dtype=U64)
    w = np.arange(b.size, dtype=U64) * U64(2) + U64(1)
    return int(np.sum(b * w, dtype=U64))


def all_u1():
    return ((np.arange(1, 2**24 + 1, dtype=np.int64)).astype(F) * F(2.0**-24)).astype(F)


def all_u2():
    return ((np.arange(0, 2**24, dtype=np.int64)).astype(F) * F(2.0**-24)).astype(F)


def accuracy():
    u1 = all_u1()
    l = logf(u1).astype(np.float64)
    ref = np.log(u1.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(F)).astype(np.float64)
    nz = ref != 0
    print(f"dz_logf over u = k 2^-24, k = 1..2^24: max |err| = {np.max(np.abs(l - ref)):.3g}, "
          f"max rel = {np.max(np.abs(l - ref)[nz] / np.abs(ref[nz])):.3g}, "
          f"max ulp = {np.max(np.abs(l - ref)[nz] / ulp[nz]):.3f}, all <= 0: {bool(np.all(l <= 0))}")
    u2 = all_u2()
    s, c = sincos2pi(u2)
    # Reference in double with the quarter turns taken out exactly (else sin(2 pi * 0.5) != 0).
    t = 4.0 * u2.astype(np.float64)
    n = np.round(t)
    a = 0.5 * np.pi * (t - n)
    q = n.astype(np.int64) & 3
    sa, ca = np.sin(a), np.cos(a)
    want_s = np.choose(q, [sa, ca, -sa, -ca])
    want_c = np.choose(q, [ca, -sa, -ca, sa])
    for name, got, want in (("sin", s, want_s), ("cos", c, want_c)):
        err = np.abs(got.astype(np.float64) - want)
        big = want != 0
        assert np.all(got[~big] == 0), "exact zeros must stay exact"
        ulp = np.spacing(np.abs(want).astype(F)).astype(np.float64)
        print(f"dz_sincos2pi {name} over u = k 2^-24, k = 0..2^24-1: max |err| = {err.max():.3g}, "
              f"max rel = {np.max(err[big] / np.abs(want[big])):.3g}, max ulp = {np.max(err[big] / ulp[big]):.3f}")
    # Whole Gaussian map on a sample of word pairs: relative error of z vs double Box-Muller.
    rng = np.random.default_rng(1)
    xa = rng.integers(0, 2**32, 2**22, dtype=np.uint64).astype(U32)
    xb = rng.integers(0, 2**32, 2**22, dtype=np.uint64).astype(U32)
    z0, z1 = box_muller(xa, xb)
    u1 = ((xa >> 8) + 1).astype(np.float64) * 2.0**-24
    u2 = (xb >> 8).astype(np.float64) * 2.0**-24
    r = np.sqrt(-2 * np.log(u1))
    for name, got, want in (("z0", z0, r * np.cos(2 * np.pi * u2)), ("z1", z1, r * np.sin(2 * np.pi * u2))):
        err = np.abs(got - want)
        print(f"Box-Muller {name} (2^22 random words): max |err| = {err.max():.3g}, "
              f"max |err| / max(|z|, 2^-10) = {np.max(err / np.maximum(np.abs(want), 2.0**-10)):.3g}")


def _bits_list(a):
    return [int(v) for v in np.asarray(a).view(U32 if np.asarray(a).dtype == F else np.uint16)]


def golden():
    rng = np.random.default_rng(20240611)
    out = {"kats": [{"ctr": list(c), "key": list(k), "out": list(o)} for c, k, o in KATS]}
    for c, k, o in KATS:
        got = philox4x32(np.array(c), np.array(k))
        assert [int(v) for v in got] == list(o), "Philox KAT failed"
    zc = []
    cases = [  # seed, tensor, draw, i0, n, dist
        (0, 0, 0, 0, 33, GAUSSIAN), (0, 0, 0, 0, 33, RADEMACHER),
        (1, 3, 1, 3, 29, GAUSSIAN), (0x0123456789ABCDEF, 7, 123456789, 1021, 40, GAUSSIAN),
        (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 2**34 - 13, 13, GAUSSIAN),
        (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 2**34 - 13, 13, RADEMACHER),
        (42, 11, 5 * 16 + 3, 999_999, 37, GAUSSIAN), (42, 12, 5 * 16 + 3, 2, 37, RADEMACHER),
        (0xDEADBEEF00000000, 1, 2, 5, 1, GAUSSIAN),
        (0, 0, 0, 0, 33, GAUSSIAN_V2), (0, 0, 0, 0, 300, RADEMACHER_V2),
        (1, 3, 1, 3, 29, GAUSSIAN_V2), (0x0123456789ABCDEF, 7, 123456789, 1021, 40, GAUSSIAN_V2),
        (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 2**34 - 13, 13, GAUSSIAN_V2),
        (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 2**34 - 13, 13, RADEMACHER_V2),
        (42, 11, 5 * 16 + 3, 999_999, 37, GAUSSIAN_V2), (42, 12, 5 * 16 + 3, 2, 261, RADEMACHER_V2),
    ]
    for seed, t, d, i0, n, dist in cases:
        zc.append({"seed": f"{seed:016x}", "tensor": t, "draw": d, "i0": i0, "n": n, "dist": dist,
                   "z": _bits_list(z_fill(seed, t, d, i0, n, dist))})
    out["z"] = zc
    out["sr_bits"] = {"seed": f"{42:016x}", "tensor": 9, "draw": 77, "i0": 6, "n": 11,
                      "x": [int(v) for v in philox_bits(42, PURPOSE_SR, 9, 77, 6, 11)]}

    def theta_f32(n):
        th = rng.normal(0, 0.05, n).astype(F)
        th[:6] = [0.0, -0.0, 1e-40, 3e38, -2.5, 1.0]  # zeros, a subnormal, near-max, exact values
        return th

    def theta_bf16(n):
        h = (theta_f32(n).view(U32) >> U32(16)).astype(np.uint16)
        h[6] = 0x7F80  # +Inf keeps the non-finite rounding path covered (update has wd = 0 then)
        return h

    ops = []
    for k, (seed, t, i0, n, dist, eps, q, lr, wd, step) in enumerate([
            (5, 2, 0, 37, GAUSSIAN, 1e-3, 1, 1e-4, 0.0, 0),
            (0x123456789, 17, 4095, 53, GAUSSIAN, 1e-3, 3, 3e-5, 0.1, 1001),
            (77, 0, 2, 21, RADEMACHER, 2e-3, 2, 1e-2, 0.01, 7),
            (0xFFFFFFFFFFFFFFFF, 400, 1_000_001, 19, GAUSSIAN, 1e-2, 4, 1e-3, 0.0, 0x3FFFFFFF),
            (0x123456789, 17, 4093, 53, GAUSSIAN_V2, 1e-3, 3, 3e-5, 0.1, 1001),
            (77, 0, 2, 141, RADEMACHER_V2, 2e-3, 2, 1e-2, 0.01, 7)]):
        g = [float(v) for v in rng.normal(0, 2, q).astype(F)]
        case = {"seed": f"{seed:016x}", "tensor": t, "i0": i0, "n": n, "dist": dist, "eps": float(F(eps)),
                "q": q, "lr": float(F(lr)), "wd": float(F(wd)), "step": step, "g": g}
        next_draw = (step + 1) * q
        th = theta_f32(n)
        if wd != 0.0:
            th[3] = 2.0  # no overflow of wd * theta paths beyond what the spec defines
        new = update_f32(th, g, q, lr, wd, seed, t, step, i0, dist)
        wp, wm = perturb_pair(new, eps, seed, t, next_draw & 0xFFFFFFFF, i0, dist)
        case["f32"] = {"theta": _bits_list(th), "updated": _bits_list(new), "w_plus": _bits_list(wp),
                       "w_minus": _bits_list(wm)}
        hb = theta_bf16(n)
        if wd != 0.0:
            hb[6] = 0x3F80
        newb = update_bf16(hb, g, q, lr, wd, seed, t, step, i0, dist)
        wpb, wmb = perturb_pair_bf16(newb, eps, seed, t, next_draw & 0xFFFFFFFF, i0, dist)
        case["bf16"] = {"theta": _bits_list(hb), "updated": _bits_list(newb), "w_plus": _bits_list(wpb),
                        "w_minus": _bits_list(wmb)}
        ops.append(case)
    out["ops"] = ops
    out["checksum_logf_all_u1"] = f"{checksum(logf(all_u1()).view(U32)):016x}"
    s, c = sincos2pi(all_u2())
    out["checksum_sin_all_u2"] = f"{checksum(s.view(U32)):016x}"
    out["checksum_cos_all_u2"] = f"{checksum(c.view(U32)):016x}"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--accuracy", action="store_true", help="print polynomial accuracy, write nothing")
    ap.add_argument("--out", default="tests/data/zo/rng_golden.json")
    ap.add_argument("--v2-table", action="store_true", help=f"write {V2_TABLE_HEADER} instead")
    args = ap.parse_args()
    if args.v2_table:
        with open(V2_TABLE_HEADER + ".tmp", "w") as f:
            f.write(v2_table_c())
        os.replace(V2_TABLE_HEADER + ".tmp", V2_TABLE_HEADER)
        return
    if args.accuracy:
        accuracy()
        return
    with np.errstate(over="ignore", invalid="ignore"):
        g = golden()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(g, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
