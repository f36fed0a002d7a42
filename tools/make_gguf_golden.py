#!/usr/bin/env python3
"""Golden logits of SmolLM2-135M-Instruct (GGUF, Q4_1 + Q8_0 + F32) for tests/test_gguf.c.

Run from the repo root (venv: tools/.venv with numpy, gguf, tokenizers; torch and
transformers optional):

    tools/.venv/bin/python tools/make_gguf_golden.py [--gguf PATH] [--out tests/data/gguf]

The reference is independent of distzo at every step that matters:
  * weights dequantized by gguf-py (the package llama.cpp ships, gguf.quants.dequantize);
  * the forward written here in numpy float64 from the LLaMA definition, with rotary
    embeddings applied llama.cpp's way on the file's own Q/K rows (interleaved pairs
    2i, 2i+1: the converter permuted HF's rows into that layout), where distzo
    un-permutes the rows at load and rotates (i, i + head_dim/2) -- so the test checks
    the un-permutation too;
  * prompts tokenized by Hugging Face tokenizers from hf-tokenizer/tokenizer.json
    (the ids are written into the golden file, so the test needs no tokenizer).
With --transformers (needs torch + transformers), it also loads the GGUF with
transformers (AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)) and reports the
largest difference between its logits and numpy's (printed, not written).

Writes:
  golden.txt   one line per item:
                 prompt P N id...          the prompt's token ids
                 greedy P N id...          the greedy continuation (N tokens, argmax of
                                           the float64 logits, fed back one at a time)
                 topk P POS K id value ... the K largest logits at position POS
                 full R P POS              row R of logits.bin holds all logits at POS
  logits.bin   the full float32 logits of the rows named by 'full' lines.
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "In 1969, 3 astronauts flew 384400 km to the Moon",
]
GREEDY_TOKENS = 20
TOP_K = 10


def field_value(reader, key):
    f = reader.fields[key]
    v = f.parts[f.data[0]]
    if f.types[0].name == "STRING":
        return bytes(v).decode()
    return v[0].item()


class Model:
    def __init__(self, path):
        r = GGUFReader(path)
        arch = field_value(r, "general.architecture")
        assert arch == "llama", arch
        self.n_layers = field_value(r, "llama.block_count")
        self.dim = field_value(r, "llama.embedding_length")
        self.n_heads = field_value(r, "llama.attention.head_count")
        self.n_kv = field_value(r, "llama.attention.head_count_kv")
        self.theta = field_value(r, "llama.rope.freq_base")
        self.eps = field_value(r, "llama.attention.layer_norm_rms_epsilon")
        self.hd = self.dim // self.n_heads
        self.w = {}
        for t in r.tensors:
            ne = [int(x) for x in t.shape]  # ggml order: ne[0] innermost
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.w[t.name] = a.reshape(ne[::-1])  # [rows, cols]
        assert "output.weight" not in self.w  # tied head

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope_interleaved(self, x, pos):
        # x [T, heads, hd]; llama.cpp's "norm" rotary: pairs (2i, 2i+1), angle pos * theta^(-2i/hd)
        i = np.arange(self.hd // 2)
        ang = pos[:, None] * self.theta ** (-2.0 * i / self.hd)  # [T, hd/2]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = a * s + b * c
        return out

    def forward(self, ids):
        T = len(ids)
        x = self.w["token_embd.weight"][ids]
        pos = np.arange(T, dtype=np.float64)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        g = self.n_heads // self.n_kv
        for l in range(self.n_layers):
            p = "blk.%d." % l
            h = self.rms(x, self.w[p + "attn_norm.weight"])
            q = (h @ self.w[p + "attn_q.weight"].T).reshape(T, self.n_heads, self.hd)
            k = (h @ self.w[p + "attn_k.weight"].T).reshape(T, self.n_kv, self.hd)
            v = (h @ self.w[p + "attn_v.weight"].T).reshape(T, self.n_kv, self.hd)
            q, k = self.rope_interleaved(q, pos), self.rope_interleaved(k, pos)
            k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
            att = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.hd) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", att, v).reshape(T, self.dim)
            x = x + o @ self.w[p + "attn_output.weight"].T
            h = self.rms(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self.w[p + "ffn_down.weight"].T
        x = self.rms(x, self.w["output_norm.weight"])
        return x @ self.w["token_embd.weight"].T  # [T, vocab]


def main():
    ap = argparse.ArgumentParser()
    assets = os.environ.get("DISTZO_ASSETS", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "assets"))
    ap.add_argument("--gguf", default=os.path.join(assets, "smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default="tests/data/gguf")
    ap.add_argument("--transformers", action="store_true")
    a = ap.parse_args()

    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(os.path.dirname(a.gguf), "hf-tokenizer", "tokenizer.json"))
    prompts = [tok.encode(p, add_special_tokens=False).ids for p in PROMPTS]

    m = Model(a.gguf)
    os.makedirs(a.out, exist_ok=True)
    lines, full_rows = [], []
    all_logits = []
    for pi, ids in enumerate(prompts):
        lines.append("prompt %d %d %s" % (pi, len(ids), " ".join(map(str, ids))))
        logits = m.forward(ids)
        all_logits.append(logits)
        for pos in sorted({0, len(ids) // 2, len(ids) - 1}):
            top = np.argsort(-logits[pos], kind="stable")[:TOP_K]
            lines.append("topk %d %d %d %s" % (pi, pos, TOP_K,
                         " ".join("%d %.9g" % (t, logits[pos, t]) for t in top)))
        if pi < 2:  # full logits of the last position of the first two prompts
            lines.append("full %d %d %d" % (len(full_rows), pi, len(ids) - 1))
            full_rows.append(logits[-1].astype(np.float32))
        if pi == 0:
            seq = list(ids)
            for _ in range(GREEDY_TOKENS):
                seq.append(int(np.argmax(m.forward(seq)[-1])))
            gen = seq[len(ids):]
            lines.append("greedy %d %d %s" % (pi, len(gen), " ".join(map(str, gen))))
            print("greedy:", repr(tok.decode(gen)))
    with open(os.path.join(a.out, "golden.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.stack(full_rows).tofile(os.path.join(a.out, "logits.bin"))
    print("wrote", a.out, "(%d lines, %d full rows)" % (len(lines), len(full_rows)))

    if a.transformers:
        import torch
        from transformers import AutoModelForCausalLM
        hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(a.gguf), gguf_file=os.path.basename(a.gguf),
                                                  torch_dtype=torch.float32)
        hf.eval()
        worst = 0.0
        for ids, ref in zip(prompts, all_logits):
            with torch.no_grad():
                got = hf(torch.tensor([ids])).logits[0].double().numpy()
            worst = max(worst, float(np.abs(got - ref).max()))
        print("transformers vs numpy float64: max |logit difference| = %.3g" % worst)


if __name__ == "__main__":
    sys.exit(main())
