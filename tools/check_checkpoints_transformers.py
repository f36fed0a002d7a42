#!/usr/bin/env python3
"""Loads distzo's training checkpoints in Hugging Face transformers and commits what it sees.

For each case of tests/cli/roundtrip_recipes.sh (opt: a random OPT from `distzo init` with
the GPT-2/OPT tokenizer; llama: a random SmolLM2-shaped LLaMA with SmolLM2's tokenizer.json;
gguf: SmolLM2-135M-Instruct trained from its Q4_1 GGUF file) it builds the checkpoint with
that recipe (distzo train, 2 steps, fixed seeds), loads checkpoint-2/ with
AutoModelForCausalLM + AutoTokenizer (no other arguments: what a user does) and writes
tests/data/roundtrip/CASE/:
  figures.txt   sha256 of model.safetensors (the checkpoint these figures belong to);
                the tokenizer's ids of the prompt and of text1.txt (add_special_tokens as
                the tokenizer's defaults); 8 greedy tokens after the prompt (argmax, fp32)
  logprobs.tsv  log p(token | tokens before it) for every token of the prompt after the
                first, from transformers' logits (log_softmax in float64), in the format of
                `distzo eval --task lm --predictions`
and tests/data/roundtrip/text1.txt, a harder string for the tokenizers (newline, spaces,
digits, accents, CJK).

tests/cli/roundtrip.sh rebuilds the same checkpoints with distzo and compares distzo's
figures on them with these, without Python.

Usage: /work/venv/bin/python tools/check_checkpoints_transformers.py [--distzo build/distzo]
       [--assets ../shared/assets] [--cases opt,llama,gguf] [--out tests/data/roundtrip]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECIPES = os.path.join(ROOT, "tests", "cli", "roundtrip_recipes.sh")
TEXT1 = "Hello  world!\n1234567 naïve café, 東京 -- ok?  "
GREEDY = 8


def sh(cmd):
    return subprocess.run(["bash", "-c", cmd], check=True, capture_output=True, text=True).stdout


def build_checkpoint(case, distzo, assets, work):
    out = sh(f'source "{RECIPES}" && roundtrip_checkpoint {case} "{distzo}" "{assets}" "{work}"')
    prompt = sh(f'source "{RECIPES}" && roundtrip_prompt')
    return out.strip(), prompt


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def figures(ckpt, prompt):
    tok = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    model.eval()
    ids = tok(prompt)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
        lp = torch.log_softmax(logits, dim=-1)
        rows = [(i, ids[i], lp[i - 1, ids[i]].item()) for i in range(1, len(ids))]
        seq = list(ids)
        for _ in range(GREEDY):
            nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
            seq.append(nxt)
    return {
        "prompt_ids": ids,
        "text1_ids": tok(TEXT1)["input_ids"],
        "greedy": seq[len(ids):],
        "logprobs": rows,
        "eos": tok.eos_token_id,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--distzo", default=os.path.join(ROOT, "build", "distzo"))
    ap.add_argument("--assets", default=os.environ.get("DISTZO_ASSETS", os.path.join(ROOT, "..", "shared", "assets")))
    ap.add_argument("--cases", default="opt,llama,gguf")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "roundtrip"))
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory() as work:
        for case in args.cases.split(","):
            ckpt, prompt = build_checkpoint(case, os.path.abspath(args.distzo), os.path.abspath(args.assets), work)
            f = figures(ckpt, prompt)
            d = os.path.join(args.out, case)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(args.out, "text1.txt"), "w", encoding="utf-8") as o:
                o.write(TEXT1)
            with open(os.path.join(d, "figures.txt"), "w") as o:
                o.write(f"sha256 {sha256(os.path.join(ckpt, 'model.safetensors'))}\n")
                o.write("prompt_ids " + " ".join(map(str, f["prompt_ids"])) + "\n")
                o.write("text1_ids " + " ".join(map(str, f["text1_ids"])) + "\n")
                o.write("greedy " + " ".join(map(str, f["greedy"])) + "\n")
                o.write(f"eos {f['eos']}\n")
            with open(os.path.join(d, "logprobs.tsv"), "w") as o:
                o.write("example\tposition\ttoken\tlogprob\n")
                for pos, t, v in f["logprobs"]:
                    o.write(f"0\t{pos}\t{t}\t{v:.9g}\n")
            print(f"{case}: {ckpt}: {len(f['prompt_ids'])} prompt ids, greedy {f['greedy']} -> {d}")
            shutil.rmtree(os.path.dirname(ckpt), ignore_errors=True)  # the GGUF run's is 0.5 GB


if __name__ == "__main__":
    sys.exit(main())
