#!/usr/bin/env bash
# A node's NCCL group across MPI ranks (docs/CUDA.md, "Several GPUs"): tests/test_gpu_group.c
# run under mpirun, each rank on a host seam of its own: the node's rank 0's id reaches every
# rank of its node and no other, each joins as its node rank of the node's size, a leader
# without an id fails its node, and the node-shared block is pinned on every rank. 2, 3 and
# 4 ranks on one machine (one node), and 4 and 3 ranks cut into simulated nodes of 2
# (--node-size: two groups, the last of one rank).
# usage: gpu_group.sh TEST_GPU_GROUP
set -euo pipefail
bin=$1
. "$(dirname "$0")/lib.sh"
need_tool mpirun "scripts/deps.sh installs openmpi-bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# run NP NODE_SIZE: every rank passes, and the job really had NP ranks in nodes of the size
run() {
  local np=$1 ns=$2 rc=0 name="$1 ranks, nodes of ${2/#0/the machine}"
  DZ_TEST_NODE_SIZE=$ns ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    timeout 120 mpirun --oversubscribe -np "$np" "$bin" > "$tmp/out" 2>&1 || rc=$?
  local ranks nodes
  ranks=$(grep -c "^test_gpu_group: rank [0-9]* of $np," "$tmp/out" || true)
  nodes=$(grep -o "nodes [0-9]*" "$tmp/out" | sort -u | tr '\n' ' ')
  local want=$(( ns > 0 ? (np + ns - 1) / ns : 1 ))
  if [ "$rc" -eq 0 ] && [ "$ranks" -eq "$np" ] && [ "$nodes" = "nodes $want " ]; then ok "$name"; else
    bad "$name: exit $rc, $ranks ranks of $np said so, ${nodes:-no} node counts (want $want): $(tail -c 600 "$tmp/out")"
  fi
}

run 2 0
run 3 0
run 4 0
run 4 2
run 3 2
finish
