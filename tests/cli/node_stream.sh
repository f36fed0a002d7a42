#!/usr/bin/env bash
# ZO2 streaming over a node's GPUs with DistZO2's sliced upload (docs/CUDA.md, "Several
# GPUs"): tests/test_node_stream.c under mpirun, 2 and 3 ranks on one node, each rank a GPU
# played by a host seam: every rank's run is bitwise its run alone, uploads only its slice
# of each layer, and a dropped wait is a hazard on every rank. Then real runs of distzo on
# the device stand-in (--backend ref): a node's 2 ranks resident (each rank's device its own
# masters, the node-shared host copy written by slices at each flush) give the single
# process's checkpoint, metrics and seed log bitwise; streamed (--max-device-memory) they
# are refused, naming the sliced upload's NCCL group that ref has not.
# usage: node_stream.sh TEST_NODE_STREAM DISTZO ASSETS
set -euo pipefail
bin=$1 distzo=$2 assets=$3
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/dev.tsv
need_tool mpirun "scripts/deps.sh installs openmpi-bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# run NP: every rank passes, and the job really had NP ranks on one node
run() {
  local np=$1 rc=0
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    timeout 200 mpirun --oversubscribe -np "$np" "$bin" > "$tmp/out" 2>&1 || rc=$?
  local ranks
  ranks=$(grep -c "^test_node_stream: rank [0-9]* of $np, node rank [0-9]* of $np$" "$tmp/out" || true)
  if [ "$rc" -eq 0 ] && [ "$ranks" -eq "$np" ]; then ok "$np ranks on one node"; else
    bad "$np ranks: exit $rc, $ranks of $np ranks in one node said so: $(tail -c 800 "$tmp/out")"
  fi
}

run 2
run 3

test_set "$assets" 16
common=(--steps 6 --eval-every 3 --checkpoint-every 6 --train-examples 24 --dev-examples 8 --batch 8 --lr 1e-3
        --test "$tmp/test.tsv" --backend ref --threads 1)
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -np "$@"; }
"$distzo" train "${common[@]}" --out "$tmp/one" > "$tmp/one.txt" 2>&1 || bad "ref, one process: exit non-zero"
if mpi 2 "$distzo" train "${common[@]}" --out "$tmp/two" > "$tmp/two.txt" 2>&1 && grep -q "2 ranks on 1 node" "$tmp/two.txt" &&
   same_run "$tmp/one" "$tmp/two" 6; then ok "ref resident, a node's 2 ranks == one process"; else
  bad "ref resident, a node's 2 ranks differ from one process: $(tail -c 600 "$tmp/two.txt")"
fi
# a cap between streaming's need and resident's (stories260K: 34.66 and 35.35 MB)
mpi 2 "$distzo" train "${common[@]}" --steps 2 --max-device-memory 35 --out "$tmp/cap" > "$tmp/cap.txt" 2>&1 &&
  bad "ref streamed on a node's 2 ranks ran" ||
  { grep -q "sliced upload, which needs the node's GPUs in one NCCL group" "$tmp/cap.txt" &&
    ok "ref streamed on a node's 2 ranks refused, naming the sliced upload" ||
    bad "ref streamed on a node's 2 ranks: $(tail -c 600 "$tmp/cap.txt")"; }
finish
