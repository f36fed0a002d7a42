#!/usr/bin/env python3
"""Independent PyTorch reference of the llama2.c Transformer (stories260K) and its goldens.

Run (from the repo root, torch + numpy, e.g. /work/venv/bin/python or tools/.venv):

    python tools/ref_llama2c.py [--assets DIR] [--out tests/data/stories260k] [--skip-sst2]

DIR defaults to $DISTZO_ASSETS or ../shared/assets.  Reads DIR/stories260K/stories260K.bin
(llama2.c legacy format), DIR/stories260K/tok512.bin (via tools/ref_llama2c_tokenizer.py)
and DIR/sst2/dev.tsv.  Writes into --out:

    greedy200.json          {"tokens": [200 greedy ids after BOS], "text": decoded text, ...}
                            (full forward each step, no KV cache; fp32, re-checked in fp64)
    logits_first.bin        logits for BOS + the first 16 greedy tokens, at every position,
                            in the golden.bin format of tools/make_hf_golden.py (B=1, T=17, V=512)
    sst2_dev_zeroshot.tsv   zero-shot SST-2 dev predictions, one row per dev example
                            (see write_sst2 for the columns; accuracies in the '#' header)

The model follows upstream llama2.c model.py: RMSNorm (eps 1e-5, x * rsqrt(mean(x^2)+eps) * w),
rotary embedding on interleaved pairs (x[2i], x[2i+1]) of each head (complex view), theta 10000,
GQA where query head h uses kv head h // (n_heads / n_kv_heads), causal softmax attention with
scale 1/sqrt(head_dim), SwiGLU FFN w2(silu(w1 x) * w3 x), final RMSNorm, classifier = the token
embedding when the header's vocab_size is positive.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

N_GREEDY = 200
N_FIRST = 16
EPS = 1e-5
THETA = 10000.0


class Llama2c:
    """Weights as plain tensors; forward(tokens) -> logits [T, V] for one sequence."""

    def __init__(self, path, dtype=torch.float32):
        with open(path, "rb") as f:
            raw = f.read()
        hdr = struct.unpack("<7i", raw[:28])
        self.dim, self.hidden, self.n_layers, self.n_heads, self.n_kv, vocab, self.seq_len = hdr
        self.shared = vocab > 0
        self.vocab = abs(vocab)
        self.hd = self.dim // self.n_heads
        data = np.frombuffer(raw, dtype="<f4", offset=28)
        L, d, hd, kvd = self.n_layers, self.dim, self.hd, self.n_kv * self.hd
        shapes = [("tok", (self.vocab, d)), ("rms_att", (L, d)), ("wq", (L, d, d)),
                  ("wk", (L, kvd, d)), ("wv", (L, kvd, d)), ("wo", (L, d, d)),
                  ("rms_ffn", (L, d)), ("w1", (L, self.hidden, d)), ("w2", (L, d, self.hidden)),
                  ("w3", (L, self.hidden, d)), ("rms_final", (d,)),
                  ("fcr", (self.seq_len, hd // 2)), ("fci", (self.seq_len, hd // 2))]
        if not self.shared:
            shapes.append(("wcls", (self.vocab, d)))
        off = 0
        self.w = {}
        for name, shp in shapes:
            n = int(np.prod(shp))
            self.w[name] = torch.from_numpy(data[off:off + n].copy()).reshape(shp).to(dtype)
            off += n
        if off != data.size:
            raise ValueError(f"{path}: {data.size} floats after the header, expected {off}")
        if self.shared:
            self.w["wcls"] = self.w["tok"]
        # Recompute the rotary tables (theta 10000) and check them against the file's.
        freqs = 1.0 / (THETA ** (torch.arange(0, hd, 2, dtype=torch.float64)[: hd // 2] / hd))
        ang = torch.outer(torch.arange(self.seq_len, dtype=torch.float64), freqs)
        self.cos, self.sin = ang.cos().to(dtype), ang.sin().to(dtype)
        assert torch.allclose(self.cos.double(), self.w["fcr"].double(), atol=1e-5)
        assert torch.allclose(self.sin.double(), self.w["fci"].double(), atol=1e-5)
        self.dtype = dtype

    @staticmethod
    def rmsnorm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w

    def rope(self, x):
        """x [T, H, hd]: rotate each consecutive pair (x0, x1) by the position's angle."""
        T = x.shape[0]
        c, s = self.cos[:T, None, :], self.sin[:T, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    @torch.no_grad()
    def forward(self, tokens):
        w, T, H, KV, hd = self.w, len(tokens), self.n_heads, self.n_kv, self.hd
        assert T <= self.seq_len
        x = w["tok"][torch.as_tensor(tokens, dtype=torch.long)]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(self.n_layers):
            h = self.rmsnorm(x, w["rms_att"][l])
            q = self.rope((h @ w["wq"][l].T).view(T, H, hd))
            k = self.rope((h @ w["wk"][l].T).view(T, KV, hd))
            v = (h @ w["wv"][l].T).view(T, KV, hd)
            rep = H // KV
            k = k.repeat_interleave(rep, dim=1)  # head h -> kv head h // rep
            v = v.repeat_interleave(rep, dim=1)
            att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
            att = att.masked_fill(~causal, float("-inf")).softmax(-1)
            o = torch.einsum("hts,shd->thd", att, v).reshape(T, H * hd)
            x = x + o @ w["wo"][l].T
            h = self.rmsnorm(x, w["rms_ffn"][l])
            x = x + (F.silu(h @ w["w1"][l].T) * (h @ w["w3"][l].T)) @ w["w2"][l].T
        return self.rmsnorm(x, w["rms_final"]) @ w["wcls"].T


def greedy(model, n):
    """Greedy decode from BOS, recomputing the full forward each step.

    Returns (tokens after BOS, (smallest top1-top2 logit margin seen, its step))."""
    toks, margin = [1], (float("inf"), -1)
    for step in range(n):
        logits = model.forward(toks)[-1]
        top = torch.topk(logits.double(), 2).values
        margin = min(margin, (float(top[0] - top[1]), step))
        toks.append(int(logits.argmax()))
    return toks[1:], margin


def decode_text(tok, tm, ids):
    """Concatenate llama2.c decode(prev, tok) pieces, as run.c prints them."""
    out, prev = b"", 1  # the sequence follows BOS
    for t in ids:
        out += tm.decode(tok, prev, t)
        prev = t
    return out.decode("utf-8", errors="replace")


def write_golden(path, tokens, logits):
    """golden.bin format (see tools/make_hf_golden.py) with B=1."""
    T, V = logits.shape
    lp = torch.log_softmax(logits.double(), -1)
    logprobs = torch.zeros(T, dtype=torch.float64)
    for t in range(T - 1):
        logprobs[t] = lp[t, tokens[t + 1]]
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", 1, T, V))
        f.write(np.asarray(tokens, dtype="<i4").tobytes())
        f.write(struct.pack("<i", T))
        f.write(logits.float().numpy().astype("<f4").tobytes())
        f.write(logprobs.float().numpy().astype("<f4").tobytes())


def candidate_tokens(tok, tm, prompt, word):
    """(ctx, cand): ctx = encode(prompt, bos), cand = encode(prompt+word, bos)[len(ctx):].

    Returns ok=False when full does not start with ctx; cand then falls back to the
    word encoded on its own without the dummy-prefix token."""
    ctx = tm.encode(tok, prompt, True)
    full = tm.encode(tok, prompt + word, True)
    if full[:len(ctx)] == ctx:
        return ctx, full[len(ctx):], True
    alone = tm.encode(tok, word, False)
    space = tok.lookup.get(b" ")
    assert alone[0] == space, "dummy prefix merged into the word; no clean fallback"
    return ctx, alone[1:], False


def score(model, ctx, cand):
    """Mean log p(cand[i] | ctx + cand[:i]) over the candidate's tokens."""
    seq = ctx + cand
    lp = torch.log_softmax(model.forward(seq).double(), -1)
    n = len(ctx)
    return float(sum(lp[n - 1 + i, c] for i, c in enumerate(cand)) / len(cand))


def run_sst2(model, model64, tok, tm, dev_path, label_sets):
    rows = []
    with open(dev_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].rstrip("\r") == "sentence\tlabel"
    n_fallback, n_fwd, t_fwd, flips, min_gap = 0, 0, 0.0, 0, float("inf")
    for i, line in enumerate(l for l in lines[1:] if l):
        sent, label = line.rstrip("\r").split("\t")
        # MeZO's template strips the sentence (GLUE rows end with a space).
        prompt = sent.strip() + " It was"
        row = [i, int(label)]
        for words in label_sets:
            sc, sc64 = [], []
            for w in words:
                ctx, cand, ok = candidate_tokens(tok, tm, prompt, w)
                n_fallback += not ok
                t0 = time.perf_counter()
                sc.append(score(model, ctx, cand))
                t_fwd += time.perf_counter() - t0
                n_fwd += 1
                sc64.append(score(model64, ctx, cand))
            pred = 0 if sc[0] >= sc[1] else 1  # ties -> lower index
            pred64 = 0 if sc64[0] >= sc64[1] else 1
            flips += pred != pred64
            min_gap = min(min_gap, abs(sc[0] - sc[1]))
            row += [pred, sc[0], sc[1]]
        rows.append(row)
    return rows, {"fallbacks": n_fallback, "forwards": n_fwd,
                  "ms_per_forward_fp32": round(1000 * t_fwd / n_fwd, 3),
                  "fp32_vs_fp64_prediction_flips": flips,
                  "min_abs_score_gap": min_gap}


def write_sst2(path, rows, label_sets, info):
    n = len(rows)
    accs = []
    for k in range(len(label_sets)):
        accs.append(sum(r[2 + 3 * k] == r[1] for r in rows) / n)
    with open(path, "w") as f:
        f.write("# stories260K zero-shot SST-2 dev (tools/ref_llama2c.py): prompt = sentence.strip()"
                " + ' It was'; score = mean log-prob of the label word's tokens; pred = argmax,"
                " ties -> 0\n")
        f.write("# accuracy terrible/great = %.6f (%d/%d); bad/good = %.6f (%d/%d); prefix fallbacks %d;"
                " fp32 vs fp64 prediction flips %d; min |score0-score1| %.6f\n"
                % (accs[0], round(accs[0] * n), n, accs[1], round(accs[1] * n), n, info["fallbacks"],
                   info["fp32_vs_fp64_prediction_flips"], info["min_abs_score_gap"]))
        f.write("index\tlabel\tpred_terrible_great\tscore_terrible\tscore_great"
                "\tpred_bad_good\tscore_bad\tscore_good\n")
        for r in rows:
            f.write("%d\t%d\t%d\t%.6f\t%.6f\t%d\t%.6f\t%.6f\n" % tuple(r))
    return accs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--assets", default=os.environ.get("DISTZO_ASSETS",
                                                       os.path.join(here, "..", "..", "shared", "assets")))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "stories260k"))
    ap.add_argument("--skip-sst2", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    import ref_llama2c_tokenizer as tm
    os.makedirs(args.out, exist_ok=True)
    mpath = os.path.join(args.assets, "stories260K", "stories260K.bin")
    tok = tm.load(os.path.join(args.assets, "stories260K", "tok512.bin"))
    model = Llama2c(mpath, torch.float32)
    model64 = Llama2c(mpath, torch.float64)

    ids, margin = greedy(model, N_GREEDY)
    ids64, margin64 = greedy(model64, N_GREEDY)
    text = decode_text(tok, tm, ids)
    expect = ("Once upon a time, there was a little girl named Lily. "
              "She loved to play outside in the park.")
    ok = text.startswith(expect)
    print("greedy fp32 == fp64:", ids == ids64,
          "min top1-top2 margin %.4f at step %d (fp64 %.4f)" % (margin[0], margin[1], margin64[0]))
    print("greedy text matches upstream:", ok)
    print(text)
    if not ok:
        sys.exit("greedy text does not begin with the upstream expected text; not writing goldens")
    if ids != ids64:
        print("WARNING: fp32 and fp64 greedy tokens differ (near tie)")
    with open(os.path.join(args.out, "greedy200.json"), "w") as f:
        json.dump({"tokens": ids, "text": text, "prompt": [1],
                   "note": "greedy from BOS (id 1), 200 new tokens, no stop token; "
                           "tokens exclude the BOS; tools/ref_llama2c.py",
                   "fp64_same_tokens": ids == ids64,
                   "min_top1_top2_logit_margin": round(margin[0], 6),
                   "min_margin_step": margin[1]}, f)
        f.write("\n")

    first = [1] + ids[:N_FIRST]
    write_golden(os.path.join(args.out, "logits_first.bin"), first, model.forward(first))

    if not args.skip_sst2:
        label_sets = [(" terrible", " great"), (" bad", " good")]
        rows, info = run_sst2(model, model64, tok, tm, os.path.join(args.assets, "sst2", "dev.tsv"),
                              label_sets)
        accs = write_sst2(os.path.join(args.out, "sst2_dev_zeroshot.tsv"), rows, label_sets, info)
        print("sst2 dev zero-shot accuracy terrible/great %.4f bad/good %.4f" % tuple(accs))
        print("sst2 info", json.dumps(info))


if __name__ == "__main__":
    main()
