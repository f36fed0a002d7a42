#!/usr/bin/env python3
"""Seed corpus for fuzz/fuzz_gguf.c: small GGUF files written by gguf-py (llama.cpp's own
writer), covering every metadata value type, string and numeric arrays, a custom alignment,
and tensors of each type distzo dequantizes (raw random blocks; values do not matter).

    tools/.venv/bin/python tools/make_gguf_seeds.py [--out fuzz/corpus/gguf]
"""
import argparse
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="fuzz/corpus/gguf")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
rng = np.random.default_rng(0)


def write(name, fill, alignment=None):
    path = os.path.join(a.out, name)
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def metadata(w):
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 700)
    w.add_int16("t.i16", -700)
    w.add_uint32("llama.block_count", 1)
    w.add_int32("t.i32", -70000)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo")
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 0.25)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "", "Ġx"])
    w.add_array("tokenizer.ggml.scores", [0.0, -1.5, 2.0])
    w.add_array("tokenizer.ggml.token_type", [1, 2, 3])


def tensors(types):
    def fill(w):
        for i, t in enumerate(types):
            block, nbytes = gguf.GGML_QUANT_SIZES[t]
            ne0 = 256 if block == 256 else 64
            rows = 2
            if t in (T.F32,):
                w.add_tensor("f%d" % i, rng.standard_normal((rows, ne0)).astype(np.float32))
            elif t == T.F16:
                w.add_tensor("f%d" % i, rng.standard_normal((rows, ne0)).astype(np.float16))
            else:
                raw = rng.integers(0, 256, size=(rows, ne0 // block * nbytes), dtype=np.uint8)
                w.add_tensor("q%d" % i, raw, raw_dtype=t)
    return fill


write("metadata.gguf", metadata)
write("plain.gguf", tensors([T.F32, T.F16, T.BF16]) if hasattr(T, "BF16") else tensors([T.F32, T.F16]))
write("legacy_quants.gguf", tensors([T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]), alignment=64)
write("k_quants.gguf", tensors([T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]))
write("empty.gguf", lambda w: None)
for f in sorted(os.listdir(a.out)):
    print(f, os.path.getsize(os.path.join(a.out, f)))
