#!/usr/bin/env python3
"""Reference for the federated one-byte code (src/federated/byte_code.h), written from
its definition, and its golden file tests/data/federated/byte_code.json:
  b = sign (bit 7) | k, k = 0: g = 0 (b = 0x80: no value), k = 1..127: |g| = clip * e^((k - 127) / 16);
  encoding: k = 127 + round_half_even(16 ln(|g| / clip)), above 127 clipped, below 1 -> 0.
usage: tools/ref_fed_byte_code.py > tests/data/federated/byte_code.json"""
import json
import math
import struct


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def decode(b, clip):
    if b == 0x80:
        return None
    k = b & 0x7F
    if k == 0:
        return 0.0
    m = struct.unpack("<f", struct.pack("<f", clip * math.exp((k - 127) / 16.0)))[0]
    return -m if b & 0x80 else m


def encode(g, clip):
    if math.isnan(g) or math.isinf(g):
        return 0x80
    if g == 0:
        return 0
    k = 127 + round(16.0 * math.log(abs(g) / clip))  # Python's round: half to even
    k = min(k, 127)
    if k < 1:
        return 0
    return (0x80 if g < 0 else 0) | k


def main():
    out = {"decode": {}, "encode": []}
    for clip in (64.0, 1.0):
        out["decode"][repr(clip)] = [None if decode(b, clip) is None else f32_bits(decode(b, clip)) for b in range(256)]
    gs = [0.0, -0.0, 1e-9, -1e-9, 0.01, -0.01, 0.0244, 0.5, -0.5, 1.0, -1.0, 3.14159, 63.9, 64.0, 64.1, -1000.0,
          1e30, 0.025, 0.0123, 7.77, -42.0]
    for clip in (64.0, 1.0):
        for g in gs:
            g32 = struct.unpack("<f", struct.pack("<f", g))[0]
            out["encode"].append({"clip": clip, "g_bits": f32_bits(g32), "code": encode(g32, clip)})
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
