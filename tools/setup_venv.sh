#!/usr/bin/env bash
# Creates tools/.venv with the Python packages used to (re)generate the golden files
# under tests/data/ (tools/make_hf_golden.py, tools/ref_llama2c.py and the other
# reference scripts in tools/). It is ONLY for regenerating golden files: building and
# testing distzo needs no Python at all, and the committed goldens are what CTest uses.
#
# Usage:  tools/setup_venv.sh            (then e.g. tools/.venv/bin/python tools/make_hf_golden.py)
#         PYTHON=python3.11 tools/setup_venv.sh
#
# Pinned to the versions the committed goldens were made with (Python 3.11). Torch comes
# from the CPU-only wheel index; the goldens are computed on CPU in fp32/fp64.
# Other versions should give the same tokens and logits to ~1e-6, but the HF models'
# config.json layout is transformers-5 specific ("rope_parameters", "dtype").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install --index-url https://download.pytorch.org/whl/cpu torch==2.15.0
"$venv/bin/pip" install \
    transformers==5.24.0 \
    huggingface_hub==2.4.0 \
    safetensors==0.8.0 \
    tokenizers==0.23.3 \
    sentencepiece==0.2.3 \
    numpy==2.4.6 \
    gguf==0.19.0 \
    accelerate==1.15.0
echo "ready: $venv/bin/python"
