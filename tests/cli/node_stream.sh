#!/usr/bin/env bash
# ZO2 streaming over a node's GPUs with DistZO2's sliced upload (docs/CUDA.md, "Several
# GPUs"): tests/test_node_stream.c under mpirun, 2 and 3 ranks on one node, each rank a GPU
# played by a host seam: every rank's run is bitwise its run alone, uploads only its slice
# of each layer, and a dropped wait is a hazard on every rank.
# usage: node_stream.sh TEST_NODE_STREAM
set -euo pipefail
bin=$1
. "$(dirname "$0")/lib.sh"
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
finish
