"""Independent reference for distzo's first ZO (MeZO/SPSA) training steps on stories260K + SST-2.

Run (from the repository root; ~10 s, torch + numpy):
    /work/venv/bin/python tools/ref_zo_step.py [--assets DIR] [--out tests/data/zo/stories260k_steps.json]
DIR defaults to $DISTZO_ASSETS or ../shared/assets (stories260K/stories260K.bin, tok512.bin,
sst2/train.tsv). Writes the JSON (a few KB) that tests/test_zo_reference.c compares `dz_train` with.

What it computes, for each configuration (batch 4, 32 train + 8 dev examples, data seed 42, run
seed 7, lr 1e-3, eps 1e-3, constant lr, no weight decay, label words " bad"/" good"):
  gaussian q=1 (3 steps), rademacher q=1 (2 steps), gaussian q=2 (2 steps), per step: the
  training-example indices, per draw d = step*q + j: L+ (theta + eps z), L- (theta - eps z),
  g = float32((L+ - L-) / (2 eps)), and the step's loss = mean over draws of (L+ + L-)/2;
  also dloss_plus_dg / dloss_minus_dg: d L+/- / d g_k for every earlier draw k (central
  differences, step H in g, the other g fixed). Later steps' weights depend on the earlier g,
  and distzo's float32 g differ from these by forward rounding (~1e-5 relative); with lr 1e-3 and
  |g| ~ 10-100 that moves later losses by up to ~3e-5 relative, so the test corrects the
  expected values to first order to distzo's own logged g before comparing at 1e-5.

Independent pieces (nothing is taken from the C code):
  - data: tools/sample_reference.py (MeZO-style subsample), its own epoch shuffle
    (splitmix64 seeded data_seed ^ (0xd1b54a32d192ed03 * (epoch + 1)), Fisher-Yates from the top);
  - prompt: sentence.strip() + " It was"; candidate tokens = encode(prompt + word, bos) after
    the common prefix with encode(prompt, bos) (tools/ref_llama2c_tokenizer.py);
  - model: the llama2.c checkpoint read with tools/ref_llama2c.py's loader, wq/wk rows
    permuted to HF's half-split rotary layout (within a head row 2i+r -> r*hd/2+i) because
    that is the layout distzo perturbs (z is indexed by element of distzo's tensors), then an
    HF-style LLaMA forward written here (rotary on (i, i+hd/2)); checked against
    ref_llama2c.Llama2c's interleaved forward on the unpermuted weights;
  - z and the update: tools/ref_zo_rng.py (z_fill, update_f32), per docs/ZO_RNG.md;
    tensor ids follow distzo's parameter table (per layer: input_layernorm, q, k, v, o,
    post_attention_layernorm, up (w3), gate (w1), down (w2); then embed_tokens, norm).
The perturbed weights are built in float32 exactly as the spec says (e = eps*z; theta +/- e), so
they are bitwise what distzo uses; the forward runs in float64 on them (the reported numbers) and
also in float32 (g_f32: shows how much float32 forward rounding moves g).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ref_llama2c  # noqa: E402
import ref_llama2c_tokenizer as tm  # noqa: E402
import ref_zo_rng as R  # noqa: E402
import sample_reference as S  # noqa: E402

F32 = np.float32
MASK64 = (1 << 64) - 1

BASE = dict(batch=4, train_examples=32, dev_examples=8, data_seed=42, seed=7, lr=1e-3, eps=1e-3,
            template=" It was", labels=(" bad", " good"))
H = 0.05  # central-difference step in g for the derivatives of later losses (|g| ~ 10-100)
SHAPE = None  # model shape, set by main
CONFIGS = [  # name, distribution, q, steps
    ("gaussian_q1", "gaussian", 1, 3),
    ("rademacher_q1", "rademacher", 1, 2),
    ("gaussian_q2", "gaussian", 2, 2),
]


# ---- data -------------------------------------------------------------------------------------

def load_sst2(path):
    """GLUE tsv rows (sentence kept verbatim, as distzo stores it), label as int."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "sentence\tlabel", lines[0]
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        sent, label = line.split("\t")
        rows.append((sent, int(label)))
    return rows


def epoch_order(n, data_seed, epoch):
    """Fisher-Yates from the top, splitmix64 seeded per epoch."""
    rng = S.SplitMix64(data_seed ^ ((0xD1B54A32D192ED03 * (epoch + 1)) & MASK64))
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = S.uniform_below(rng, i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def step_examples(step, batch, n, data_seed):
    out = []
    for b in range(batch):
        k = step * batch + b
        out.append(epoch_order(n, data_seed, k // n)[k % n])
    return out


def build_examples(tok, train, labels, max_len):
    """Per example: [(tokens, cand_len)] per label word."""
    ex = []
    for sent, label in train:
        prompt = sent.strip() + BASE["template"]
        ctx = tm.encode(tok, prompt, True)
        cands = []
        for w in labels:
            full = tm.encode(tok, prompt + w, True)
            pre = 0
            while pre < len(ctx) and pre < len(full) and ctx[pre] == full[pre]:
                pre += 1
            assert 1 <= pre < len(full)
            assert len(full) <= max_len, "no truncation expected for these examples"
            cands.append((full, len(full) - pre))
        ex.append((cands, label))
    return ex


# ---- model in distzo's parameter-table order ----------------------------------------------------

def distzo_params(path):
    """[(name, float32 array 2-D)] in distzo's table order, wq/wk in HF half-split layout."""
    m = ref_llama2c.Llama2c(path, torch.float32)
    assert m.shared, "stories260K has a tied head"
    hd, half = m.hd, m.hd // 2

    def permute(w, heads):
        w = w.numpy().reshape(heads, half, 2, -1)       # row h*hd + 2i + r
        return np.ascontiguousarray(w.transpose(0, 2, 1, 3).reshape(heads * hd, -1))  # -> r*half + i

    ps = []
    for l in range(m.n_layers):
        ps += [(f"layers.{l}.input_layernorm", m.w["rms_att"][l].numpy()[None, :]),
               (f"layers.{l}.q_proj", permute(m.w["wq"][l], m.n_heads)),
               (f"layers.{l}.k_proj", permute(m.w["wk"][l], m.n_kv)),
               (f"layers.{l}.v_proj", m.w["wv"][l].numpy()),
               (f"layers.{l}.o_proj", m.w["wo"][l].numpy()),
               (f"layers.{l}.post_attention_layernorm", m.w["rms_ffn"][l].numpy()[None, :]),
               (f"layers.{l}.up_proj", m.w["w3"][l].numpy()),
               (f"layers.{l}.gate_proj", m.w["w1"][l].numpy()),
               (f"layers.{l}.down_proj", m.w["w2"][l].numpy())]
    ps += [("embed_tokens", m.w["tok"].numpy()), ("norm", m.w["rms_final"].numpy()[None, :])]
    ps = [(n, np.ascontiguousarray(a, dtype=F32).copy()) for n, a in ps]
    shape = dict(n_layers=m.n_layers, n_heads=m.n_heads, n_kv=m.n_kv, hd=hd)
    return m, ps, shape


def forward_logprobs(ws, shape, tokens, dtype):
    """HF LLaMA forward of one sequence; returns log_softmax [T, V] (dtype)."""
    L, H, KV, hd = shape["n_layers"], shape["n_heads"], shape["n_kv"], shape["hd"]
    W = [torch.from_numpy(w).to(dtype) for w in ws]
    T = len(tokens)
    half = hd // 2
    inv = 1.0 / (10000.0 ** (torch.arange(0, half, dtype=torch.float64) * 2 / hd))
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = ang.cos().to(dtype)[:, None, :], ang.sin().to(dtype)[:, None, :]

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w[0]

    def rope(x):  # pairs (i, i + hd/2)
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

    emb, fnorm = W[9 * L], W[9 * L + 1]
    x = emb[torch.as_tensor(tokens)]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        an, wq, wk, wv, wo, fn, up, gate, down = W[9 * l:9 * l + 9]
        h = rms(x, an)
        q = rope((h @ wq.T).view(T, H, hd))
        k = rope((h @ wk.T).view(T, KV, hd)).repeat_interleave(H // KV, dim=1)
        v = (h @ wv.T).view(T, KV, hd).repeat_interleave(H // KV, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + torch.einsum("hts,shd->thd", att, v).reshape(T, H * hd) @ wo.T
        h = rms(x, fn)
        x = x + (torch.nn.functional.silu(h @ gate.T) * (h @ up.T)) @ down.T
    return torch.log_softmax(rms(x, fnorm) @ emb.T, -1)


def class_loss(ws, shape, examples, idx, dtype):
    """MeZO loss: mean over examples of logsumexp(scores) - scores[label], scores float32 as distzo."""
    total = 0.0
    for e in idx:
        cands, label = examples[e]
        sc = []
        for toks, n in cands:
            lp = forward_logprobs(ws, shape, toks, dtype)
            T = len(toks)
            s = sum(float(F32(lp[t - 1, toks[t]].item())) for t in range(T - n, T))  # float32 log-probs
            sc.append(float(F32(s / n)))
        mx = max(sc)
        total += mx + math.log(sum(math.exp(s - mx) for s in sc)) - sc[label]
    return total / len(idx)


# ---- the steps ----------------------------------------------------------------------------------

def theta_after(theta0, gs, q, dist, n_steps):
    """theta after the updates of steps 0..n_steps-1 with the projected gradients gs[step][j]:
    theta <- theta - lr * mean_j(g_j z_j), no weight decay (docs/ZO_RNG.md; ref_zo_rng.update_f32)."""
    theta = [t.copy() for t in theta0]
    for step in range(n_steps):
        theta = [R.update_f32(th.reshape(-1), gs[step], q, F32(BASE["lr"]), 0.0, BASE["seed"], tid, step, 0,
                              dist).reshape(th.shape) for tid, th in enumerate(theta)]
    return theta


def draw_losses(theta, draw, dist, examples, idx, dtype):
    """(L+, L-) of one draw: every tensor at theta + e and theta - e, e = eps * z (float32)."""
    plus, minus = [], []
    for tid, th in enumerate(theta):
        wp, wm = R.perturb_pair(th.reshape(-1), F32(BASE["eps"]), BASE["seed"], tid, draw, 0, dist)
        plus.append(wp.reshape(th.shape))
        minus.append(wm.reshape(th.shape))
    return class_loss(plus, SHAPE, examples, idx, dtype), class_loss(minus, SHAPE, examples, idx, dtype)


def run_config(theta0, examples, dist, q, steps, h):
    """The reference trajectory, and for each draw the derivatives of L+ and L- with respect
    to every earlier draw's g (central differences, step h, the other g held fixed). The
    trajectory after step 0 depends on the float32 g values distzo logged, which differ from
    the reference's by forward rounding (~1e-5 relative) and move later losses by more than
    1e-5 (lr 1e-3 with |g| ~ 30 is a large step); the test corrects to first order with these."""
    eps = float(F32(BASE["eps"]))
    gs, out = [], []
    for step in range(steps):
        idx = step_examples(step, BASE["batch"], len(examples), BASE["data_seed"])
        theta = theta_after(theta0, gs, q, dist, step)
        draws, g_step = [], []
        for j in range(q):
            d = step * q + j
            lp, lm = draw_losses(theta, d, dist, examples, idx, torch.float64)
            g = F32((lp - lm) / (2.0 * eps))
            lp32, lm32 = draw_losses(theta, d, dist, examples, idx, torch.float32)
            g32 = F32((lp32 - lm32) / (2.0 * eps))
            dp, dm = [], []
            for k in range(step * q):  # earlier draws
                vals = []
                for sign in (1, -1):
                    gk = [list(x) for x in gs]
                    gk[k // q][k % q] = F32(gk[k // q][k % q] + sign * h)
                    vals.append(draw_losses(theta_after(theta0, gk, q, dist, step), d, dist, examples, idx,
                                            torch.float64))
                dp.append((vals[0][0] - vals[1][0]) / (2 * h))
                dm.append((vals[0][1] - vals[1][1]) / (2 * h))
            draws.append({"draw": d, "loss_plus": lp, "loss_minus": lm, "g": float(g),
                          "dloss_plus_dg": dp, "dloss_minus_dg": dm,
                          "loss_plus_f32": lp32, "loss_minus_f32": lm32, "g_f32": float(g32)})
            g_step.append(g)
        gs.append(g_step)
        loss = sum(0.5 * (x["loss_plus"] + x["loss_minus"]) / q for x in draws)
        out.append({"step": step, "examples": idx, "labels": [examples[e][1] for e in idx],
                    "loss": loss, "draws": draws})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--assets", default=os.environ.get("DISTZO_ASSETS",
                                                       os.path.join(HERE, "..", "..", "shared", "assets")))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "zo", "stories260k_steps.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    mpath = os.path.join(args.assets, "stories260K", "stories260K.bin")
    tok = tm.load(os.path.join(args.assets, "stories260K", "tok512.bin"))
    global SHAPE
    m, params, SHAPE = distzo_params(mpath)
    names, theta0 = [n for n, _ in params], [a for _, a in params]

    # The HF-layout forward on permuted weights must equal llama2.c's interleaved forward.
    probe = [1] + tm.encode(tok, "Once upon a time, there was a little girl", False)
    ref = torch.log_softmax(m.forward(probe).double(), -1)
    mine = forward_logprobs(theta0, SHAPE, probe, torch.float64)
    dev = float((ref - mine).abs().max())
    assert dev < 1e-4, f"HF-layout forward differs from ref_llama2c by {dev}"

    pool = load_sst2(os.path.join(args.assets, "sst2", "train.tsv"))
    drawn = S.sample(len(pool), BASE["train_examples"] + BASE["dev_examples"], BASE["data_seed"])
    train = [pool[i] for i in drawn[:BASE["train_examples"]]]
    examples = build_examples(tok, train, BASE["labels"], m.seq_len)

    result = {"note": "tools/ref_zo_step.py: distzo's first ZO steps on stories260K + SST-2 train",
              "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in BASE.items()}, "derivative_step": H,
              "tensors": names, "pool_indices": drawn, "hf_vs_llama2c_forward_max_abs": dev, "runs": []}
    for name, dist, q, steps in CONFIGS:
        steps_out = run_config(theta0, examples, dist, q, steps, H)
        result["runs"].append({"name": name, "dist": dist, "q": q, "steps": steps_out})
        for s in steps_out:
            for d in s["draws"]:
                print(f"{name} step {s['step']} ex {s['examples']} draw {d['draw']}: L+ {d['loss_plus']:.9f} "
                      f"L- {d['loss_minus']:.9f} g {d['g']:.7g} (f32 forward: g {d['g_f32']:.7g})")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
