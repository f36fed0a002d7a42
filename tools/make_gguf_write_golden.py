#!/usr/bin/env python3
"""A GGUF file written by gguf-py (llama.cpp's Python writer, GGUFWriter) that distzo's
writer must reproduce byte for byte (tests/test_gguf_write.c): one key/value of each
type distzo writes, and one tensor per type it writes (F32, F16, BF16, Q8_0), quantized by
gguf-py's quantize() (the numpy port of ggml's quantize_row_q8_0_ref).

    /work/venv/bin/python tools/make_gguf_write_golden.py [--out tests/data/gguf]

Writes written.gguf and written_input.f32 (the float32 values every tensor was made from:
ROWS x COLS, row-major). The values include Q8_0's edge cases: a block whose scale is
exactly 1 with halves (2.5 -> 3 and -2.5 -> -3, away from zero as roundf, not to even),
an all-zero block (d = 0), a block of tiny values (a subnormal fp16 scale), and fp16's
rounding ties and overflow (70000 -> inf).
"""
import argparse
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

ROWS, COLS = 4, 96  # three Q8_0 blocks per row

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="tests/data/gguf")
a = ap.parse_args()
rng = np.random.default_rng(2026)
x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
x[0, :32] = 0.0                                                     # d = 0
x[1, :32] = np.linspace(-1e-6, 1e-6, 32, dtype=np.float32)          # subnormal fp16 d
halves = np.array([127.0, 2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 126.5], dtype=np.float32)
x[2, :32] = np.resize(halves, 32)                                   # d = 1: roundf ties
x[3, :4] = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 70000.0, -3e-8], dtype=np.float32)  # fp16 ties, inf, subnormal

path = os.path.join(a.out, "written.gguf")
w = gguf.GGUFWriter(path, "llama")
w.add_uint32("test.u32", 4000000000)
w.add_int32("test.i32", -7)
w.add_float32("test.f32", 0.1)
w.add_bool("test.bool", True)
w.add_string("test.string", "h\u00e9llo")
w.add_array("test.strings", ["a", "", "\u2581the", "<0x0A>"])
w.add_array("test.f32s", [1.5, -2.25])              # python floats: F32
w.add_array("test.i32s", [3, -4, 5])                 # python ints: I32
for t in (T.F32, T.F16, T.BF16, T.Q8_0):
    q = quantize(x, t)
    w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=t)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
x.tofile(os.path.join(a.out, "written_input.f32"))
print("wrote", path)
