#!/usr/bin/env python3
"""A GGUF file with one small tensor of each type distzo dequantizes, and gguf-py's
dequantization of each (llama.cpp's Python reference), for tests/test_gguf.c.

    tools/.venv/bin/python tools/make_gguf_quants.py [--out tests/data/gguf]

Blocks are random bytes with their fp16 scale fields replaced by random finite values
(so every element is finite). Writes quants.gguf (tensors named by type: "Q4_K", ...,
2 rows of 256 elements each) and quants_f32.bin (the dequantized float32 values, tensors
in the file's order, rows in order).
"""
import argparse
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

# Byte offsets of the fp16 fields inside one block (ggml-common.h).
HALVES = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
          T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}
ROWS, COLS = 2, 256

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="tests/data/gguf")
a = ap.parse_args()
rng = np.random.default_rng(12)
w = gguf.GGUFWriter(os.path.join(a.out, "quants.gguf"), "llama")
values = []
for t in [T.F32, T.F16, T.BF16, *HALVES]:
    block, nbytes = gguf.GGML_QUANT_SIZES[t]
    if t == T.F32:
        raw = rng.standard_normal((ROWS, COLS)).astype(np.float32).view(np.uint8)
    elif t == T.F16:
        raw = rng.standard_normal((ROWS, COLS)).astype(np.float16).view(np.uint8)
    elif t == T.BF16:
        raw = (rng.standard_normal((ROWS, COLS)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    else:
        raw = rng.integers(0, 256, size=(ROWS, COLS // block, nbytes), dtype=np.uint8)
        for off in HALVES[t]:
            h = (rng.uniform(0.01, 2.0, size=raw.shape[:2]) * rng.choice([-1, 1], size=raw.shape[:2])).astype(np.float16)
            raw[:, :, off:off + 2] = h.view(np.uint8).reshape(*raw.shape[:2], 2)
        raw = raw.reshape(ROWS, -1)
    raw = np.ascontiguousarray(raw)
    w.add_tensor(t.name, raw, raw_dtype=t)
    v = dequantize(raw, t).astype(np.float32).reshape(ROWS, COLS)
    assert np.isfinite(v).all(), t.name
    values.append(v)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
np.concatenate([v.ravel() for v in values]).tofile(os.path.join(a.out, "quants_f32.bin"))
print("wrote", len(values), "tensors")
