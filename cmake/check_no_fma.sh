#!/usr/bin/env bash
# The ZO kernels' PTX has no fused multiply-add, and no float multiply, add or subtract that
# ptxas could still contract into one (those without a rounding modifier such as .rn): the
# GPU then rounds every operation as the CPU does (docs/ZO_RNG.md, docs/CUDA.md). Run on the
# PTX of src/backend/cuda/zo_kernels.cu at every -DDZ_CUDA=ON build (cmake/cuda.cmake).
# Usage: cmake/check_no_fma.sh FILE.ptx
set -u
ptx=${1:?usage: check_no_fma.sh FILE.ptx}
[ -s "$ptx" ] || { echo "check_no_fma: $ptx is missing or empty" >&2; exit 1; }
bad=$(grep -nE '^\s*(fma|mad)\.|^\s*(mul|add|sub)\.(f32|f64)\s' "$ptx")
if [ -n "$bad" ]; then
    echo "check_no_fma: $ptx has contracted or contractible float operations:" >&2
    echo "$bad" | head -n 20 >&2
    exit 1
fi
echo "check_no_fma: $(grep -cE '^\s*(mul|add|sub|div|sqrt)\.rn\.f32' "$ptx") float operations, each rounded on its own"
