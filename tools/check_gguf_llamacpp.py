#!/usr/bin/env python3
"""llama.cpp itself as the reference for distzo's GGUF export (tests/test_gguf_llamacpp.c).

    /work/venv/bin/python tools/check_gguf_llamacpp.py [--distzo build/distzo] [--assets DIR]
        [--out tests/data/gguf_llamacpp] [--test-data tests/data] [--cases NAME,...]

needs llama-cpp-python (pip install llama-cpp-python; it builds llama.cpp) and numpy.
(The committed recordings came from llama-cpp-python 0.3.36's own sources and the libllama /
libggml it had built, put on PYTHONPATH with the libraries in llama_cpp/lib/: the same
package as a finished pip install, whose optional tools were still compiling.)
For each case, distzo exports a model from the assets as a .gguf (`distzo export --model
SRC -o X.gguf --type TYPE`); llama.cpp (CPU) loads it and, for each prompt:
  - tokenizes it with the file's own tokenizer (add_special=True: BOS where the file says
    add_bos_token; special=True for the chat prompt: <|im_start|> is one id),
  - decodes GREEDY tokens greedily (argmax of its logits, no sampler),
  - records the top TOP logits (id, value) at every position of prompt + generated
    tokens (logits_all=True).
The K/V cache is f32 (llama.cpp defaults to f16), so what differs from distzo is only how
llama.cpp's matmuls treat the weights' type. Writes <case>.json: the file's size and CRC-32 (zlib), so the C test can check that the
file it regenerates with distzo is the one llama.cpp ran, llama_cpp version, and per prompt
the ids, the greedy text and the logits. The C test runs distzo's forward on the same ids
and compares (no Python at test time).
"""
import argparse
import json
import os
import subprocess
import tempfile
import unicodedata
import zlib

import numpy as np
import llama_cpp
from llama_cpp import Llama

GREEDY, TOP = 16, 20
F32 = 0  # GGML_TYPE_F32
STORIES = ("stories260K/stories260K.bin", [("Once upon a time, there was a", False), ("The cat sat on the", False)])
SMOL = ("smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf",
        [("The capital of France is", False),
         ("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", True)])
# A run trained with `distzo train` (these settings; the C test trains the same with
# dz_train), exported with `distzo export --run`: the trained weights in llama.cpp.
TRAIN = {"steps": 2, "lr": 3e-4, "eps": 1e-3, "batch": 4, "train_examples": 16, "dev_examples": 8, "seed": 0,
         "data_seed": 42, "template": "{text} It was", "label_words": "terrible,great", "data": "sst2/train.tsv"}
CASES = {
    "stories260k_trained_f32": (STORIES, "f32"),
    "stories260k_f32": (STORIES, "f32"),
    "stories260k_f16": (STORIES, "f16"),
    "stories260k_bf16": (STORIES, "bf16"),
    "stories260k_q8_0": (STORIES, "q8_0"),
    "smollm2_f32": (SMOL, "f32"),
    "smollm2_f16": (SMOL, "f16"),
    "smollm2_bf16": (SMOL, "bf16"),
    "smollm2_q8_0": (SMOL, "q8_0"),
    # the q8_0 export's weights as f32 (distzo export --model X_q8_0.gguf --type f32): llama.cpp
    # then runs exactly the weights distzo reads from the q8_0 file, with f32 matmuls, which
    # separates how Q8_0 is read (the same) from how llama.cpp multiplies by it (q8_0 activations)
    "smollm2_q8_0_as_f32": (SMOL, "f32"),
}
VIA = {"smollm2_q8_0_as_f32": "q8_0"}
# Random models of the Qwen2 and Llama-2 families (`distzo init`) carrying the small tokenizer.json
# fixtures of tests/data/tokenizer/hf_small: the Qwen2 architecture (q/k/v biases, NEOX rotary)
# and a SentencePiece-style tokenizer.json (Metaspace, byte fallback, merges without scores)
# exported as llama.cpp's "llama" tokenizer. llama.cpp also tokenizes every row of the
# tokenizer's golden file (Hugging Face's ids): the rows where it differs are recorded.
INIT = {
    "qwen2_tiny_f32": ({"preset": "qwen2-tiny", "seed": 1, "tokenizer": "tokenizer/hf_small/qwen2",
                        "golden": "tokenizer/hf_qwen2_golden.jsonl"},
                       [("The capital of France is", False), ("a<|endoftext|>b", True)]),
    "llama_tiny_spm_f32": ({"preset": "llama-tiny", "layers": 2, "seed": 1, "tokenizer": "tokenizer/hf_small/llama2",
                            "golden": "tokenizer/hf_llama2_golden.jsonl"},
                           [("Once upon a time, there was a", False), ("The cat sat on the", False)]),
}
for _name, (_init, _prompts) in INIT.items():
    CASES[_name] = ((None, _prompts), "f32")


def crc32_file(path):
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            crc = zlib.crc32(chunk, crc)
    return crc


def run_prompt(llm, text, special):
    ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
    prompt = list(ids)
    llm.reset()
    llm.eval(prompt)
    seq = list(prompt)
    for _ in range(GREEDY):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        seq.append(tok)
        if tok == llm.token_eos():
            break
        llm.eval([tok])
    rows = np.array(llm.scores[: llm.n_tokens], dtype=np.float32)  # every evaluated position
    top = []
    for r in rows:
        idx = np.argsort(-r, kind="stable")[:TOP]
        top.append([[int(i), float(r[i])] for i in idx])
    gen = seq[len(prompt):]
    return {
        "text": text,
        "special": special,
        "prompt_ids": prompt,
        "ids": seq,
        "greedy_text": llm.detokenize(gen).decode("utf-8", errors="replace"),
        "top": top,  # top[i]: logits at position i (predicting ids[i+1]); len(top) = positions evaluated
    }


def tokenize_golden(llm, golden, assets):
    """llama.cpp's ids for every row of a tokenizer golden file (the text rows and the SST-2 dev
    sentences, with BOS where the file adds one). Only the rows where they are not Hugging
    Face's are kept, with why: "newer_unicode" (the text has a character Python's Unicode
    database (14.0 in Python 3.11) does not know: a letter of Unicode 15/16, which HF's Oniguruma
    tables know and llama.cpp's do not), else "nfc" (NFC normalization changes the text:
    Qwen2's tokenizer.json normalizes to NFC, llama.cpp's qwen2 tokenizer does not), else
    "unexplained"."""
    dev = dict(sst2_dev(assets))
    rows, differ = 0, []
    with open(golden, encoding="utf-8") as f:
        for k, line in enumerate(f):
            r = json.loads(line)
            text = r["text"] if "text" in r else dev[r["sst2_dev_line"]]
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            rows += 1
            if ids != r["ids"]:
                why = ("newer_unicode" if any(unicodedata.category(c) == "Cn" for c in text)
                       else "nfc" if unicodedata.normalize("NFC", text) != text else "unexplained")
                differ.append({"row": k, "ids": ids, "why": why})
    return {"golden": os.path.relpath(golden, os.path.dirname(os.path.dirname(golden))), "rows": rows,
            "differ": differ}


def sst2_dev(assets):
    with open(os.path.join(assets, "sst2", "dev.tsv"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return [(n, line.split("\t", 1)[0]) for n, line in enumerate(lines, start=1) if n > 1 and line]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--distzo", default="build/distzo")
    ap.add_argument("--assets", default=os.environ.get("DISTZO_ASSETS", "../shared/assets"))
    ap.add_argument("--out", default="tests/data/gguf_llamacpp")
    ap.add_argument("--test-data", default="tests/data")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.cases.split(","):
            (src, prompts), ty = CASES[name]
            path = os.path.join(tmp, name + ".gguf")
            trained = "trained" in name
            init = INIT.get(name, (None,))[0]
            if init:
                model = os.path.join(tmp, name, "init")  # general.name "init", as the C test names it
                subprocess.run([a.distzo, "init", "--preset", init["preset"], "--seed", str(init["seed"]),
                                "--layers", str(init.get("layers", 0)), "--tokenizer",
                                os.path.join(a.test_data, init["tokenizer"]), "-o", model, "--threads", "2"],
                               check=True, stdout=subprocess.DEVNULL)
                subprocess.run([a.distzo, "export", "--model", model, "-o", path, "--type", ty, "--threads", "2"],
                               check=True)
            elif trained:
                t, run = TRAIN, os.path.join(tmp, name + ".run")
                subprocess.run([a.distzo, "train", "--model", os.path.join(a.assets, src), "--data",
                                os.path.join(a.assets, t["data"]), "--test", os.path.join(a.assets, t["data"]),
                                "--template", t["template"], "--label-words", t["label_words"],
                                "--steps", str(t["steps"]), "--lr", str(t["lr"]), "--eps", str(t["eps"]),
                                "--batch", str(t["batch"]), "--train-examples", str(t["train_examples"]),
                                "--dev-examples", str(t["dev_examples"]), "--seed", str(t["seed"]),
                                "--data-seed", str(t["data_seed"]), "--eval-every", "0",
                                "--checkpoint-every", str(t["steps"]), "--threads", "2", "--out", run],
                               check=True, stdout=subprocess.DEVNULL)
                subprocess.run([a.distzo, "export", "--run", run, "-o", path, "--type", ty, "--threads", "2"],
                               check=True)
            elif name in VIA:
                first = os.path.join(tmp, "via.gguf")  # general.name "via", as the C test names it
                subprocess.run([a.distzo, "export", "--model", os.path.join(a.assets, src), "-o", first, "--type",
                                VIA[name], "--threads", "2"], check=True)
                subprocess.run([a.distzo, "export", "--model", first, "-o", path, "--type", ty, "--threads", "2"],
                               check=True)
                os.unlink(first)
            else:
                subprocess.run([a.distzo, "export", "--model", os.path.join(a.assets, src), "-o", path, "--type",
                                ty, "--threads", "2"], check=True)
            # K/V cache in f32 (llama.cpp's default is f16): the remaining differences are then the
            # weights' matmuls alone
            llm = Llama(model_path=path, n_ctx=256, n_batch=256, logits_all=True, n_threads=2, verbose=False,
                        type_k=F32, type_v=F32, flash_attn=False)
            res = {
                "case": name,
                **({"source": src} if src else {"init": init}),
                "type": ty,
                **({"train": TRAIN} if trained else {}),
                **({"via": VIA[name]} if name in VIA else {}),
                "file_bytes": os.path.getsize(path),
                "file_crc32": crc32_file(path),
                "llama_cpp_python": llama_cpp.__version__,
                "prompts": [run_prompt(llm, t, s) for t, s in prompts],
            }
            if init:
                res["tokenize"] = tokenize_golden(llm, os.path.join(a.test_data, init["golden"]), a.assets)
            del llm
            os.unlink(path)
            with open(os.path.join(a.out, name + ".json"), "w") as f:
                json.dump(res, f, indent=0)
            for p in res["prompts"]:
                print(f"{name}: {p['prompt_ids']} -> {p['greedy_text']!r}")


if __name__ == "__main__":
    main()
