#!/usr/bin/env bash
# Several GPUs, the CLI's part (docs/CUDA.md, "Several GPUs"): --gpus-per-node N and
# --share-gpus, taken by train, serve and join,
# - are refused with a backend other than cuda, saying so, before any work;
# - with cuda, pick the GPU of a rank (its rank on the machine mod N; the choice itself is
#   unit-tested in tests/test_cuda_nccl.c): under mpirun, more ranks on the machine than N
#   are refused by every rank, naming the counts and --share-gpus, also when --node-size
#   cuts the machine into simulated nodes (GPUs belong to the machine); with --share-gpus,
#   or with ranks <= N, the run goes on to the backend's own check (here: no CUDA build or
#   no GPU, which it names; on a GPU the backend is taken and the missing model is named),
#   so nothing is refused for the GPUs' sake;
# - leave no run folder behind when refused.
# usage: gpus.sh DISTZO
set -euo pipefail
bin=$1
. "$(dirname "$0")/lib.sh"
need_tool mpirun "scripts/deps.sh installs openmpi-bin"

# refused NAME PATTERN CMD...: exits non-zero at once with an error matching PATTERN
refused() {
  local name=$1 pattern=$2 rc=0
  shift 2
  timeout 60 "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
  if [ "$rc" -ne 0 ] && grep -qE -- "$pattern" "$tmp/out" "$tmp/err"; then ok "$name"; else
    bad "$name: exit $rc, said: $(head -c 300 "$tmp/err")"; fi
}

nomodel=$tmp/no-such-model
only_cuda='--gpus-per-node and --share-gpus apply to --backend cuda only \(not (cpu|ref)\)'
# (on a GPU of a CUDA build the backend is taken: then the missing model or file is what is named)
backend_says='--backend cuda: (this distzo was built without CUDA|no CUDA GPU found|GPU [0-9]+ not found)|no-such-model|none: cannot open'
refused "train --gpus-per-node without cuda" "$only_cuda" "$bin" train --model "$nomodel" --gpus-per-node 2 --out "$tmp/r"
refused "train --share-gpus with ref" "$only_cuda" "$bin" train --model "$nomodel" --backend ref --share-gpus --out "$tmp/r"
refused "serve --gpus-per-node without cuda" "$only_cuda" "$bin" serve --model "$nomodel" --out "$tmp/s" --gpus-per-node 1
refused "join --gpus-per-node without cuda" "$only_cuda" "$bin" join http://127.0.0.1:1 --data "$tmp/none" \
  --token-file "$tmp/none" --gpus-per-node 1
refused "--gpus-per-node negative" "option --gpus-per-node: -1 GPUs; give at least 1" \
  "$bin" train --model "$nomodel" --backend cuda --gpus-per-node -1 --out "$tmp/r"
# 0 was taken for "absent" (the GPUs the machine shows), and passed with cpu unremarked
refused "--gpus-per-node 0" "option --gpus-per-node: 0 GPUs; give at least 1" \
  "$bin" train --model "$nomodel" --backend cuda --gpus-per-node 0 --out "$tmp/r"
refused "serve --gpus-per-node 0" "option --gpus-per-node: 0 GPUs; give at least 1" \
  "$bin" serve --model "$nomodel" --out "$tmp/s" --backend cuda --gpus-per-node 0
refused "join --gpus-per-node 0 without cuda" "$only_cuda" "$bin" join http://127.0.0.1:1 --data "$tmp/none" \
  --token-file "$tmp/none" --gpus-per-node 0
refused "one process, one GPU: the backend's own check" "$backend_says" \
  "$bin" train --model "$nomodel" --backend cuda --gpus-per-node 1 --out "$tmp/r"
refused "serve --backend cuda --gpus-per-node 2" "$backend_says" \
  "$bin" serve --model "$nomodel" --out "$tmp/s" --backend cuda --gpus-per-node 2
refused "join --backend cuda --gpus-per-node 1 --gpu-math fp32" "$backend_says" "$bin" join http://127.0.0.1:1 \
  --data "$tmp/none" --token-file "$tmp/none" --backend cuda --gpu-math fp32 --gpus-per-node 1

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 120 mpirun --oversubscribe -np "$@"; }
# each_rank NAME PATTERN N ARGS...: every one of N ranks exits saying PATTERN (lines counted)
each_rank() {
  local name=$1 pattern=$2 n=$3 rc=0 said
  shift 3
  mpi "$n" "$bin" "$@" > "$tmp/out" 2>&1 || rc=$?
  said=$(grep -cE -- "$pattern" "$tmp/out" || true)
  if [ "$rc" -ne 0 ] && [ "$said" -eq "$n" ]; then ok "$name"; else
    bad "$name: exit $rc, $said of $n ranks said it: $(grep distzo "$tmp/out" | head -c 300)"; fi
}
each_rank "3 ranks, --gpus-per-node 2: refused" \
  "3 ranks on this machine but --gpus-per-node 2: each rank owns one GPU.*--share-gpus" 3 \
  train --model "$nomodel" --backend cuda --gpus-per-node 2 --out "$tmp/r"
each_rank "4 ranks in simulated nodes of 2, 2 GPUs: the machine's ranks count" \
  "4 ranks on this machine but --gpus-per-node 2" 4 \
  train --model "$nomodel" --backend cuda --gpus-per-node 2 --node-size 2 --out "$tmp/r"
each_rank "3 ranks sharing 2 GPUs: on to the backend's check" "$backend_says" 3 \
  train --model "$nomodel" --backend cuda --gpus-per-node 2 --share-gpus --out "$tmp/r"
each_rank "2 ranks, 2 GPUs: on to the backend's check" "$backend_says" 2 \
  train --model "$nomodel" --backend cuda --gpus-per-node 2 --out "$tmp/r"
[ -e "$tmp/r" ] || [ -e "$tmp/s" ] && bad "a refusal left a run folder" || ok "refusals leave no run folder"
finish
