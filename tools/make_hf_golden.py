#!/usr/bin/env python3
"""Make tiny random HF models and their golden logits for the C model tests.

Run (from the repo root, any venv with torch + transformers 5.x, e.g. tools/.venv
made by tools/setup_venv.sh, or /work/venv):

    python tools/make_hf_golden.py [--out tests/data/hf]

Writes, for each model NAME below, tests/data/hf/NAME/:
    config.json, generation_config.json, model.safetensors
        (or model-0000k-of-0000n.safetensors + model.safetensors.index.json)
    golden.bin   logits of HF transformers on a fixed right-padded batch
and tests/data/hf/manifest.json (shapes, dtypes, max |logit|, per model; info only).

Models (seeded, deterministic; weights re-initialised with large std so that an
error in any part of the forward pass shows in the logits):
    opt_preln            OPTForCausalLM, pre-LN, biases, tied head, final LayerNorm
    opt_preln_bf16       same weights stored as BF16
    opt_postln_proj      OPT-350m style: post-LN (no final LayerNorm),
                         word_embed_proj_dim != hidden (project_in / project_out)
    llama_gqa_untied     LlamaForCausalLM, 4 heads / 2 kv heads, untied lm_head,
                         rope_theta 5e5, rms_norm_eps 1e-5 (config.json as written by
                         transformers 5: "rope_parameters": {"rope_theta": ...})
    llama_gqa_untied_bf16 / _f16   same weights stored as BF16 / F16
    llama_gqa_untied_sharded       same fp32 weights in >= 2 shards + index.json
    llama_tied_mha       n_kv_heads = n_heads, tied embeddings, rope_theta 1e4,
                         config.json in the legacy (transformers 4 / Hub) style:
                         top-level "rope_theta", no "rope_parameters"
    qwen2_bias           Qwen2ForCausalLM (q/k/v biases), 2 kv heads, untied,
                         legacy-style top-level "rope_theta" 1e6

Inputs: B=3 sequences of lengths 7, 12, 4 right-padded to T=12 with the pad id
(config pad_token_id, or 1 when the config has none); attention_mask = 1 on real
tokens.  OPT sequences start with </s> (id 2) like real OPT inputs.
The model runs in fp32 with eager attention.  For the _bf16/_f16 copies the
stored half-precision weights are loaded and upcast to fp32 before the forward
(distzo keeps weights in bf16/f16 and computes in fp32).
Positions: HF OPT derives them from the mask, pos = cumsum(mask) - 1, and adds
the learned-embedding offset 2 (so real token t uses row t + 2 of
embed_positions; pad positions use row 1).  LLaMA / Qwen2 use arange(T).  For
real tokens of right-padded rows both rules give the same result.

golden.bin format (little endian, no padding between fields):
    int32   B, T, V
    int32   tokens[B*T]        (row-major, pad id after each sequence's length)
    int32   lengths[B]
    float32 logits[B*T*V]      (padded positions included; compare only t < lengths[b])
    float32 logprobs[B*T]      logprobs[b,t] = log_softmax(logits[b,t])[tokens[b,t+1]]
                               for t < lengths[b]-1, else 0
"""
import argparse
import copy
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch
from torch import nn
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM,
                          OPTConfig, OPTForCausalLM, Qwen2Config, Qwen2ForCausalLM)

SEED = 1234
LENGTHS = [7, 12, 4]
T = 12

# Std of the re-initialisation; large enough that every part matters.
STD_LINEAR = 0.2
STD_BIAS = 0.1
STD_EMBED = 0.5
STD_NORM = 0.2  # norm weights are 1 + STD_NORM * randn, biases STD_BIAS * randn


def common_llama(**kw):
    base = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64, hidden_act="silu", bos_token_id=1,
                eos_token_id=2)
    base.update(kw)
    return base


def make_configs():
    """name -> (model class, config, legacy_rope_json)."""
    opt_common = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=64, activation_function="relu",
                      dropout=0.0, attention_dropout=0.0, enable_bias=True,
                      pad_token_id=1, bos_token_id=2, eos_token_id=2,
                      tie_word_embeddings=True)
    return {
        "opt_preln": (OPTForCausalLM, OPTConfig(
            vocab_size=273, ffn_dim=128, do_layer_norm_before=True,
            word_embed_proj_dim=48, **opt_common), False),
        "opt_postln_proj": (OPTForCausalLM, OPTConfig(
            vocab_size=301, ffn_dim=112, do_layer_norm_before=False,
            word_embed_proj_dim=32, **opt_common), False),
        "llama_gqa_untied": (LlamaForCausalLM, LlamaConfig(**common_llama(
            vocab_size=259, intermediate_size=96, num_key_value_heads=2,
            tie_word_embeddings=False, rope_theta=500000.0, rms_norm_eps=1e-5)), False),
        "llama_tied_mha": (LlamaForCausalLM, LlamaConfig(**common_llama(
            vocab_size=283, intermediate_size=112, num_key_value_heads=4,
            tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-6)), True),
        "qwen2_bias": (Qwen2ForCausalLM, Qwen2Config(
            vocab_size=267, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=96, max_position_embeddings=64,
            tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6,
            use_sliding_window=False, bos_token_id=1, eos_token_id=2), True),
    }


@torch.no_grad()
def reinit(model, gen):
    """Large-std deterministic init of every parameter (HF's 0.02 hides bugs)."""
    def rn(p, std, mean=0.0):
        p.copy_(mean + std * torch.randn(p.shape, generator=gen))
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear):
            rn(mod.weight, STD_LINEAR)
            if mod.bias is not None:
                rn(mod.bias, STD_BIAS)
        elif isinstance(mod, nn.Embedding):
            rn(mod.weight, STD_EMBED)
        elif isinstance(mod, nn.LayerNorm):
            rn(mod.weight, STD_NORM, 1.0)
            rn(mod.bias, STD_BIAS)
        elif type(mod).__name__.endswith("RMSNorm"):
            rn(mod.weight, STD_NORM, 1.0)
    if model.config.tie_word_embeddings:
        model.tie_weights()


def make_inputs(config, vocab, gen, is_opt):
    pad = config.pad_token_id if config.pad_token_id is not None else 1
    ids = torch.full((len(LENGTHS), T), pad, dtype=torch.long)
    mask = torch.zeros((len(LENGTHS), T), dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        ids[b, :n] = torch.randint(4, vocab, (n,), generator=gen)
        if is_opt:
            ids[b, 0] = 2
        mask[b, :n] = 1
    return ids, mask


def legacy_rope(path):
    """Rewrite config.json like pre-v5 / Hub checkpoints: top-level rope_theta."""
    with open(path) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters")
    assert rp.get("rope_type", "default") == "default", rp
    cfg["rope_theta"] = rp["rope_theta"]
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def save(model, out_dir, dtype, legacy, shard=None):
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    # .to() converts in place, so cast a copy: the fp32 master weights must stay exact.
    m = copy.deepcopy(model).to(dtype)
    kw = {"max_shard_size": shard} if shard else {}
    m.save_pretrained(out_dir, safe_serialization=True, **kw)
    keep = {"config.json", "generation_config.json", "golden.bin"}
    for f in os.listdir(out_dir):
        if f not in keep and not f.endswith(".safetensors") and f != "model.safetensors.index.json":
            os.remove(os.path.join(out_dir, f))
    if legacy:
        legacy_rope(os.path.join(out_dir, "config.json"))


@torch.no_grad()
def golden(out_dir, dtype, ids, mask):
    """Reload what was saved, upcast to fp32, run, write golden.bin."""
    m = AutoModelForCausalLM.from_pretrained(out_dir, dtype=dtype,
                                             attn_implementation="eager")
    for p in m.parameters():
        assert p.dtype == dtype, (out_dir, p.dtype)
    m = m.float().eval()
    logits = m(input_ids=ids, attention_mask=mask).logits.float()
    B, Tn, V = logits.shape
    lengths = mask.sum(1)
    # Real positions must not depend on the padding (documents the position rule).
    for b in range(B):
        n = int(lengths[b])
        alone = m(input_ids=ids[b:b + 1, :n]).logits[0]
        assert torch.allclose(alone, logits[b, :n], atol=1e-4), (out_dir, b)
    lp = torch.log_softmax(logits.double(), dim=-1)
    logprobs = torch.zeros(B, Tn, dtype=torch.float64)
    for b in range(B):
        for t in range(int(lengths[b]) - 1):
            logprobs[b, t] = lp[b, t, ids[b, t + 1]]
    with open(os.path.join(out_dir, "golden.bin"), "wb") as f:
        f.write(struct.pack("<3i", B, Tn, V))
        f.write(ids.numpy().astype("<i4").tobytes())
        f.write(lengths.numpy().astype("<i4").tobytes())
        f.write(logits.numpy().astype("<f4").tobytes())
        f.write(logprobs.numpy().astype("<f4").tobytes())
    real = torch.cat([logits[b, :int(lengths[b])] for b in range(B)])
    return {"B": B, "T": Tn, "V": V, "max_abs_logit": round(float(real.abs().max()), 4),
            "std_logit": round(float(real.std()), 4), "lengths": lengths.tolist(),
            "pad_id": int(ids[0, -1]), "n_params": sum(p.numel() for p in m.parameters())}, logits


def dir_size(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "hf"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # deterministic reductions
    manifest = {}
    for i, (name, (cls, cfg, legacy)) in enumerate(make_configs().items()):
        torch.manual_seed(SEED + i)
        gen = torch.Generator().manual_seed(SEED + i)
        cfg._attn_implementation = "eager"
        model = cls(cfg).eval()
        reinit(model, gen)
        ids, mask = make_inputs(cfg, cfg.vocab_size, gen, cls is OPTForCausalLM)
        variants = [(name, torch.float32, None)]
        if name in ("opt_preln", "llama_gqa_untied"):
            variants.append((name + "_bf16", torch.bfloat16, None))
        if name == "llama_gqa_untied":
            variants.append((name + "_f16", torch.float16, None))
            variants.append((name + "_sharded", torch.float32, "150KB"))
        ref = None
        for vname, dtype, shard in variants:
            d = os.path.join(args.out, vname)
            save(model, d, dtype, legacy, shard)
            info, logits = golden(d, dtype, ids, mask)
            if ref is None:
                ref = logits
            # Same weights, so the copies must agree with fp32 up to rounding.
            info["max_abs_diff_vs_fp32"] = round(float((logits - ref).abs().max()), 6)
            info["dtype"] = str(dtype).replace("torch.", "")
            info["files"] = sorted(os.listdir(d))
            info["dir_bytes"] = dir_size(d)
            manifest[vname] = info
            print(vname, json.dumps(info), file=sys.stderr)
            if shard:
                assert sum(f.endswith(".safetensors") for f in info["files"]) >= 2, info
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"generator": "tools/make_hf_golden.py", "torch": torch.__version__,
                   "transformers": __import__("transformers").__version__,
                   "models": manifest}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
