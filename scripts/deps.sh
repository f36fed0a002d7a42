#!/usr/bin/env bash
# Installs what distzo needs to build and test on Debian 12 (bookworm) or newer.
# Used by the README quickstart and by CI (.ci/run).
set -euo pipefail
packages=(
  build-essential cmake pkg-config  # toolchain
  libopenblas-openmp-dev            # GEMM (loaded at run time, see src/backend/blas.c)
  libcjson-dev                      # JSON: config.json, safetensors headers, tokenizers, jsonl
  libcmocka-dev                     # the C test framework under CTest
  clang libclang-rt-14-dev          # libFuzzer target (CI runs it for a bounded time)
  gnuplot-nox                       # `distzo plot` (loss.png, accuracy.png)
  libopenmpi-dev openmpi-bin        # DistZO2: mpirun -np N distzo train ... (src/parallel)
  libmicrohttpd-dev libcurl4-openssl-dev  # federated ZO: distzo serve (HTTP server) / join (client)
  openssl iproute2                  # tests: the HTTPS certificate; separate hosts as network namespaces
  python3-dev python3-venv          # the Python package: pip install . (the extension) in a virtual environment
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
