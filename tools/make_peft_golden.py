#!/usr/bin/env python3
"""PEFT's own logits for LoRA and prefix-tuning adapters, made by distzo and by PEFT.

Run from the repository root, in a venv with torch, transformers, peft and safetensors
(tools/setup_venv.sh -> tools/.venv):

    python tools/make_peft_golden.py [--assets DIR] [--distzo build/distzo] [--out tests/data/peft]

Issue 29's check, both directions, for both adapter kinds:
  (a) distzo -> PEFT: the adapters distzo trained and exported (tests/data/peft/distzo_lora,
      distzo_prefix; made by the recipe in tests/cli/peft_recipes.sh, rerun here when
      --distzo is given, else the committed folders are used) are loaded with
      PeftModel.from_pretrained, and PEFT's logits are written beside them;
  (b) PEFT -> distzo: PEFT makes a LoRA (get_peft_model, B set nonzero from a seed) and a
      prefix (PrefixTuningConfig, its embedding set from a seed; once more with
      prefix_projection true, the MLP's weights seeded too),
      saves them with save_pretrained, and its logits are written beside them.
tests/test_peft_golden.c runs distzo with each folder (the --adapter path: dz_lora_load)
and compares its logits with these to 1e-4; tests/cli/peft_golden.sh reruns the recipe and
compares the exported adapters with the committed ones bitwise.

Bases:
  stories260K  the llama2.c checkpoint of the assets (--assets, else $DISTZO_ASSETS, else
               ../shared/assets), converted here to a LlamaForCausalLM (q and k rows
               permuted from llama2.c's interleaved rotary pairs to HF's half split, as HF's
               conversion script does; distzo permutes them so at load): 5 layers, 8 heads,
               4 key/value heads (grouped-query attention: PEFT #1901's token_dim), shared
               classifier. Its own logits are written too (base_logits.bin) so that a
               difference in the base shows apart from the adapters'.
  opt_preln    tests/data/hf/opt_preln (make_hf_golden.py): OPT's module names
               (model.decoder.layers.N..., out_proj, fc1, fc2) and learned positions;
               its LoRA's target_modules is a regex (PEFT keeps the string), so distzo
               takes the targets from the tensors.
  qwen2_bias   tests/data/hf/qwen2_bias: q/k/v with biases (the LoRA on exactly those),
               2 key/value heads, rope_theta 1e6.

Written under --out (every adapter folder holds adapter_config.json and
adapter_model.safetensors alone, as PEFT reads it; logits.bin beside them):
  stories260k_base_logits.bin   the converted base, no adapter
  distzo_lora/logits.bin, distzo_prefix/logits.bin           (a)
  peft_lora/, peft_prefix/, peft_prefix_proj/ (prefix_projection true: PEFT saves the
  MLP's output), opt_peft_lora/, opt_peft_prefix/, qwen2_peft_lora/,
  qwen2_peft_prefix/                                          (b), folders + logits.bin
logits.bin is tests/golden.h's format (the golden.bin of make_hf_golden.py): a batch of
prompts right-padded, each prompt run alone (batch 1, no padding, no attention mask: the
prefix's positions follow PEFT's, the prompt's tokens at N, N+1, ...), fp32, eager
attention; padded positions hold 0.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch
from peft import LoraConfig, PeftModel, PrefixTuningConfig, get_peft_model
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = 29

# Token ids of the prompts (B = 2, right-padded to T = 8 in logits.bin); all < 273.
PROMPTS = {
    "stories260k": [[1, 403, 407, 261, 378, 284, 339, 270], [1, 67, 300, 511, 2]],
    "opt_preln": [[2, 100, 7, 250, 31, 9, 272, 64], [2, 5, 199, 40, 11]],
    "qwen2_bias": [[17, 230, 4, 266, 90, 151, 3, 42], [8, 120, 77, 19, 200]],
}
T = 8


def read_llama2c(path):
    """stories260K.bin -> (LlamaConfig, state dict of a LlamaForCausalLM)."""
    with open(path, "rb") as f:
        raw = f.read()
    dim, hidden, L, H, KV, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared, vocab = vocab > 0, abs(vocab)
    hd, data = dim // H, np.frombuffer(raw, dtype="<f4", offset=28)
    shapes = [("tok", (vocab, dim)), ("rms_att", (L, dim)), ("wq", (L, dim, dim)), ("wk", (L, KV * hd, dim)),
              ("wv", (L, KV * hd, dim)), ("wo", (L, dim, dim)), ("rms_ffn", (L, dim)), ("w1", (L, hidden, dim)),
              ("w2", (L, dim, hidden)), ("w3", (L, hidden, dim)), ("rms_final", (dim,)),
              ("fcr", (seq_len, hd // 2)), ("fci", (seq_len, hd // 2))]
    if not shared:
        shapes.append(("wcls", (vocab, dim)))
    w, off = {}, 0
    for name, shp in shapes:
        n = int(np.prod(shp))
        w[name] = torch.from_numpy(data[off:off + n].copy()).reshape(shp)
        off += n
    assert off == data.size, f"{path}: {data.size} floats after the header, expected {off}"

    def permute(x, heads):  # interleaved pairs (2i, 2i+1) -> HF's halves (i, i + hd/2)
        return x.view(heads, hd // 2, 2, dim).transpose(1, 2).reshape(heads * hd, dim)

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=hidden, num_hidden_layers=L,
                      num_attention_heads=H, num_key_value_heads=KV, head_dim=hd, max_position_embeddings=seq_len,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=shared, bos_token_id=1,
                      eos_token_id=2, attn_implementation="eager")
    sd = {"model.embed_tokens.weight": w["tok"], "model.norm.weight": w["rms_final"],
          "lm_head.weight": w.get("wcls", w["tok"])}
    for l in range(L):
        p = f"model.layers.{l}."
        sd.update({p + "input_layernorm.weight": w["rms_att"][l], p + "post_attention_layernorm.weight": w["rms_ffn"][l],
                   p + "self_attn.q_proj.weight": permute(w["wq"][l], H),
                   p + "self_attn.k_proj.weight": permute(w["wk"][l], KV), p + "self_attn.v_proj.weight": w["wv"][l],
                   p + "self_attn.o_proj.weight": w["wo"][l], p + "mlp.gate_proj.weight": w["w1"][l],
                   p + "mlp.down_proj.weight": w["w2"][l], p + "mlp.up_proj.weight": w["w3"][l]})
    return cfg, sd


def load_base(name, assets):
    if name == "stories260k":
        cfg, sd = read_llama2c(os.path.join(assets, "stories260K", "stories260K.bin"))
        model = LlamaForCausalLM(cfg)
        missing, unexpected = model.load_state_dict(sd, strict=False)
        assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    else:
        model = AutoModelForCausalLM.from_pretrained(os.path.join(ROOT, "tests", "data", "hf", name),
                                                     dtype=torch.float32, attn_implementation="eager")
    return model.float().eval()


@torch.no_grad()
def logits_of(model, prompts):
    """[B, T, V] logits, each prompt run alone; 0 at the padded positions."""
    rows = []
    for p in prompts:
        out = model(input_ids=torch.tensor([p])).logits[0].float()
        assert out.shape[0] == len(p), out.shape  # a prefix adds no output rows
        rows.append(torch.cat([out, out.new_zeros(T - len(p), out.shape[1])]))
    return torch.stack(rows)


def write_golden(path, prompts, logits, pad):
    B, _, V = logits.shape
    tokens = np.full((B, T), pad, dtype="<i4")
    lp = np.zeros((B, T), dtype="<f4")
    for b, p in enumerate(prompts):
        tokens[b, :len(p)] = p
        ls = torch.log_softmax(logits[b].double(), -1)
        for t in range(len(p) - 1):
            lp[b, t] = ls[t, p[t + 1]]
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<3i", B, T, V))
        f.write(tokens.tobytes())
        f.write(np.array([len(p) for p in prompts], dtype="<i4").tobytes())
        f.write(logits.numpy().astype("<f4").tobytes())
        f.write(lp.tobytes())
    os.replace(path + ".tmp", path)


def keep_adapter_files(folder, base_name):
    """What PEFT reads, nothing else (save_pretrained also writes a README.md); the base's
    name in adapter_config.json without this machine's path."""
    for f in os.listdir(folder):
        if f not in ("adapter_config.json", "adapter_model.safetensors", "logits.bin"):
            os.remove(os.path.join(folder, f))
    path = os.path.join(folder, "adapter_config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["base_model_name_or_path"] = base_name
    if isinstance(cfg.get("target_modules"), list):  # a set in PEFT: its order is the hash seed's
        cfg["target_modules"] = sorted(cfg["target_modules"])
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def peft_lora(model, targets):
    """r 4, alpha 6 (scale 1.5); A as PEFT initializes it, B seeded normal (PEFT's is 0)."""
    torch.manual_seed(SEED)  # PEFT draws A from the global generator
    cfg = LoraConfig(r=4, lora_alpha=6, target_modules=targets, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
    pm = get_peft_model(model, cfg)
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return pm


def peft_prefix(model, projection=False):
    """4 virtual tokens; the embedding seeded normal * 0.5 (keys and values of that size).
    projection: 3 tokens through PEFT's reparameterization MLP (encoder_hidden_size 16),
    its weights seeded too; save_pretrained writes the MLP's output, the keys and values."""
    extra = dict(num_virtual_tokens=3, prefix_projection=True, encoder_hidden_size=16) if projection else \
        dict(num_virtual_tokens=4)
    torch.manual_seed(SEED)
    pm = get_peft_model(model, PrefixTuningConfig(task_type="CAUSAL_LM", **extra))
    g = torch.Generator().manual_seed(SEED + 1 + projection)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "prompt_encoder" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return pm


def run_recipe(distzo, assets, out):
    """The distzo adapters from tests/cli/peft_recipes.sh, copied to out/CASE."""
    work = os.path.join(out, ".work")
    for case in ("distzo_lora", "distzo_prefix"):
        script = f'. "{ROOT}/tests/cli/peft_recipes.sh" && peft_golden_adapter {case} "{distzo}" "{assets}" "{work}"'
        made = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout.strip()
        dst = os.path.join(out, case)
        os.makedirs(dst, exist_ok=True)
        for f in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(os.path.join(made, f), os.path.join(dst, f))
    shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--assets", default=os.environ.get("DISTZO_ASSETS", os.path.join(ROOT, "..", "shared", "assets")))
    ap.add_argument("--distzo", help="rerun the recipe with this binary (else use the committed distzo_* folders)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "peft"))
    args = ap.parse_args()
    torch.manual_seed(SEED)
    os.makedirs(args.out, exist_ok=True)
    if args.distzo:
        run_recipe(os.path.abspath(args.distzo), os.path.abspath(args.assets), args.out)
    info = {}

    def record(case, prompts, logits, pad, base_logits):
        path = os.path.join(args.out, case, "logits.bin") if case else os.path.join(args.out, "stories260k_base_logits.bin")
        write_golden(path, prompts, logits, pad)
        moved = float((logits - base_logits).abs().max())
        info[case or "stories260k_base"] = {"max_abs_logit": float(logits.abs().max()), "moved_from_base": moved}
        print(f"{case or 'base'}: max |logit| {info[case or 'stories260k_base']['max_abs_logit']:.3f}, "
              f"max |change from the base| {moved:.4f}")

    # (a) distzo's exported adapters under PEFT
    prompts = PROMPTS["stories260k"]
    base = load_base("stories260k", args.assets)
    base_logits = logits_of(base, prompts)
    record(None, prompts, base_logits, 0, base_logits)
    for case in ("distzo_lora", "distzo_prefix"):
        pm = PeftModel.from_pretrained(load_base("stories260k", args.assets), os.path.join(args.out, case))
        record(case, prompts, logits_of(pm.eval(), prompts), 0, base_logits)

    # (b) PEFT's own adapters
    llama_targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    # OPT's as PEFT's regex (a string: re.fullmatch on each module's path), saved as given
    opt_targets = r".*decoder\.layers\.\d+\.(self_attn\.(q|k|v|out)_proj|fc1|fc2)"
    for case, name, make in (("peft_lora", "stories260k", lambda m: peft_lora(m, llama_targets)),
                             ("peft_prefix", "stories260k", peft_prefix),
                             ("peft_prefix_proj", "stories260k", lambda m: peft_prefix(m, projection=True)),
                             ("opt_peft_lora", "opt_preln", lambda m: peft_lora(m, opt_targets)),
                             ("opt_peft_prefix", "opt_preln", peft_prefix),
                             ("qwen2_peft_lora", "qwen2_bias", lambda m: peft_lora(m, ["q_proj", "k_proj", "v_proj"])),
                             ("qwen2_peft_prefix", "qwen2_bias", peft_prefix)):
        prompts = PROMPTS[name]
        plain = logits_of(load_base(name, args.assets), prompts)
        pm = make(load_base(name, args.assets)).eval()
        folder = os.path.join(args.out, case)
        pm.save_pretrained(folder)
        keep_adapter_files(folder, "stories260K" if name == "stories260k" else "tests/data/hf/" + name)
        # what was saved is what PEFT loads back: the logits of the reloaded folder
        back = PeftModel.from_pretrained(load_base(name, args.assets), folder).eval()
        logits = logits_of(back, prompts)
        assert torch.equal(logits, logits_of(pm, prompts)), case
        record(case, prompts, logits, 1 if name == "opt_preln" else 0, plain)
    import peft
    import transformers
    info["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
