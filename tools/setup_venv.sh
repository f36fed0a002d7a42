#!/usr/bin/env bash
# Creates tools/.venv with the Python packages used to (re)generate the golden files
# under tests/data/ (tools/make_hf_golden.py, tools/ref_llama2c.py, the PEFT adapters of
# tools/make_peft_golden.py and the other reference scripts in tools/). It is ONLY for
# regenerating golden files: building and testing distzo needs no Python at all, and the
# committed goldens are what CTest uses.
#
# Usage:  tools/setup_venv.sh            (then e.g. tools/.venv/bin/python tools/make_hf_golden.py)
#         PYTHON=python3.11 tools/setup_venv.sh
#
# Pinned to the versions of the venv the newest goldens were made with (Python 3.11;
# tools/make_peft_golden.py: torch 2.15.0, transformers 5.25.0, peft 0.21.2). Everything
# comes from PyPI (the only index some build machines reach): on Linux x86_64 PyPI's torch
# wheel is the CUDA build and pulls the nvidia-* wheels (a few GB); the goldens are
# computed on the CPU in fp32/fp64 all the same. The older goldens (make_hf_golden.py and
# the others) were made with transformers 5.24.0 and accelerate 1.15.0; these versions
# give the same tokens and logits to ~1e-6, but the HF models' config.json layout is
# transformers-5 specific ("rope_parameters", "dtype").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install \
    torch==2.15.0 \
    transformers==5.25.0 \
    huggingface_hub==2.4.0 \
    safetensors==0.8.0 \
    tokenizers==0.23.3 \
    sentencepiece==0.2.3 \
    numpy==2.4.6 \
    gguf==0.19.0 \
    accelerate==1.16.0 \
    peft==0.21.2
echo "ready: $venv/bin/python"
