#!/usr/bin/env python3
"""Tiny random GGUF models and their logits from Hugging Face transformers' own GGUF
loading, for tests/test_gguf.c (architectures and tensor types the real SmolLM2 file
does not have).

    tools/.venv/bin/python tools/make_gguf_tiny.py [--out tests/data/gguf]
    (needs torch, transformers 5, accelerate, gguf, numpy)

Each model is a seeded random Hugging Face model (hidden 64, 2 layers, 4 heads, 2 KV
heads, FFN 128, vocab 160) written as GGUF here the way llama.cpp's convert_hf_to_gguf.py
writes it (tensor names, metadata keys, Q/K rows of llama permuted to interleaved
rotary pairs, none for qwen2), quantized with gguf-py. The reference logits come from
AutoModelForCausalLM.from_pretrained(dir, gguf_file=...), i.e. transformers' reading of
the file (its dequantization and its reverse permutation); the script also checks that
they match the original model's within quantization error.

  tiny_llama.gguf   llama, untied head (output.weight), rope base 5e5; Q/K Q8_0, V Q5_1,
                    attn_output Q4_0, FFN gate/up Q4_1 / Q5_0, ffn_down F16, embeddings BF16
  tiny_qwen2.gguf   qwen2, tied head, q/k/v biases (F32), rope base 1e6, matrices F16
  tiny_*.logits     int32 T, int32 V, int32 tokens[T], float32 logits[T*V] (transformers, fp32)
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

V, D, F, L, H, KV = 160, 64, 128, 2, 4, 2
TOKENS = [1, 17, 42, 99, 5, 150, 3, 77, 64, 12, 131, 8]


def permute(w, n_head):  # convert_hf_to_gguf.py LlamaModel.permute (K: n_head = KV heads)
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add(w, name, t, qtype):
    t = np.ascontiguousarray(t.astype(np.float32))
    if qtype == T.F32:
        w.add_tensor(name, t)
    elif qtype == T.F16:
        w.add_tensor(name, t.astype(np.float16))
    else:
        w.add_tensor(name, quantize(t, qtype), raw_dtype=qtype)


def write_gguf(path, arch, model, types, theta):
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(path, arch)
    w.add_name("tiny-" + arch)
    w.add_context_length(256)
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_block_count(L)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(V)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["t%d" % i for i in range(V)])
    w.add_token_merges([])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    emb = sd["model.embed_tokens.weight"]
    add(w, "token_embd.weight", emb, types["emb"])
    for l in range(L):
        p, b = "model.layers.%d." % l, "blk.%d." % l
        q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            q, k = permute(q, H), permute(k, KV)
        add(w, b + "attn_norm.weight", sd[p + "input_layernorm.weight"], T.F32)
        add(w, b + "attn_q.weight", q, types["q"])
        add(w, b + "attn_k.weight", k, types["k"])
        add(w, b + "attn_v.weight", sd[p + "self_attn.v_proj.weight"], types["v"])
        if arch == "qwen2":
            for n in "qkv":
                add(w, b + "attn_%s.bias" % n, sd[p + "self_attn.%s_proj.bias" % n], T.F32)
        add(w, b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"], types["o"])
        add(w, b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"], T.F32)
        add(w, b + "ffn_gate.weight", sd[p + "mlp.gate_proj.weight"], types["gate"])
        add(w, b + "ffn_up.weight", sd[p + "mlp.up_proj.weight"], types["up"])
        add(w, b + "ffn_down.weight", sd[p + "mlp.down_proj.weight"], types["down"])
    add(w, "output_norm.weight", sd["model.norm.weight"], T.F32)
    if "lm_head.weight" in sd and not model.config.tie_word_embeddings:
        add(w, "output.weight", sd["lm_head.weight"], types["head"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make(out, name, cfg, types, theta):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        for n, prm in model.named_parameters():
            if "norm" in n:
                prm.copy_(1 + 0.2 * torch.randn_like(prm))
            elif n.endswith("bias"):
                prm.copy_(0.1 * torch.randn_like(prm))
            else:
                prm.copy_(0.15 * torch.randn_like(prm))
    ids = torch.tensor([TOKENS])

    def through_gguf(folder, file_types):
        write_gguf(os.path.join(folder, name + ".gguf"), cfg.model_type, model, file_types, theta)
        back = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name + ".gguf", torch_dtype=torch.float32)
        with torch.no_grad():
            return back.eval()(ids).logits[0].numpy()

    with torch.no_grad():
        orig = model(ids).logits[0].numpy()
    with tempfile.TemporaryDirectory() as tmp:  # the same model all in F32: must round-trip exactly
        exact = through_gguf(tmp, {k: T.F32 for k in types})
    assert np.abs(exact - orig).max() < 1e-5, "the GGUF is written wrongly"
    ref = through_gguf(out, types)
    print("%s: max |logit| %.2f; transformers on the F32 GGUF vs the original %.2g, on the quantized one %.2g"
          % (name, np.abs(ref).max(), np.abs(exact - orig).max(), np.abs(ref - orig).max()))
    with open(os.path.join(out, name + ".logits"), "wb") as f:
        np.array([len(TOKENS), V] + TOKENS, dtype=np.int32).tofile(f)
        ref.astype(np.float32).tofile(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/gguf")
    a = ap.parse_args()
    common = dict(vocab_size=V, hidden_size=D, intermediate_size=F, num_hidden_layers=L, num_attention_heads=H,
                  num_key_value_heads=KV, max_position_embeddings=256, rms_norm_eps=1e-5)
    make(a.out, "tiny_llama", LlamaConfig(**common, rope_theta=5e5, tie_word_embeddings=False),
         dict(emb=T.BF16, q=T.Q8_0, k=T.Q8_0, v=T.Q5_1, o=T.Q4_0, gate=T.Q4_1, up=T.Q5_0, down=T.F16, head=T.Q8_0),
         5e5)
    make(a.out, "tiny_qwen2", Qwen2Config(**common, rope_theta=1e6, tie_word_embeddings=True),
         dict(emb=T.F16, q=T.F16, k=T.F16, v=T.F16, o=T.F16, gate=T.F16, up=T.F16, down=T.F16, head=T.F16), 1e6)


if __name__ == "__main__":
    main()
