#!/usr/bin/env bash
# Every kernel path this machine can execute (core/isa.h: baseline < avx2 < avx512, up to
# the best level here, each forced with DISTZO_ISA) gives the same bits:
# - at each level: `distzo eval` per-example scores equal with --threads 1 and 2 and with
#   --no-share-prompt; `distzo train` final weights, seed log and metrics equal with
#   --threads 1 and 2; `distzo bench classify` reports g bitwise the same with shared
#   prompts and with full sequences; `distzo bench eval` the same g with --threads 1 and 2
#   (and its figures of the ZO passes)
#   (needs OpenBLAS, the benchmarks' reference, as test_blas does); under mpirun, --pertp 2 and --dp 2 give the single
#   process's weights, seed log and metrics;
# - across levels: every level's eval scores, weights and seed log equal the baseline's
#   (what an AVX2 and an AVX-512 machine compute is the same);
# - DISTZO_ISA=bogus, and any level above the best here, is refused naming DISTZO_ISA.
# An AVX-512 machine thus checks all three paths, an AVX2-only one baseline and avx2.
# usage: kernel_paths.sh DISTZO ASSETS        (fails without mpirun; see lib.sh for missing assets)
set -euo pipefail
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
model=$assets/stories260K/stories260K.bin
all_levels=(baseline avx2 avx512) # in order: each runs wherever the next one does

# Small: the baseline level's GEMM is scalar fmaf, many times slower than the others.
test_set "$assets" 8
steps=8
train_args=(--model "$model" --steps "$steps" --eval-every 0 --checkpoint-every "$steps" --batch 4 --train-examples 24
            --dev-examples 8 --lr 1e-3 --test "$tmp/test.tsv")
eval_args=("$model" --limit 24)
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -x DISTZO_ISA -np "$@"; }
need_tool mpirun "scripts/deps.sh installs openmpi-bin"

# isa_of [LEVEL]: the level `distzo info` says is active with DISTZO_ISA=LEVEL (unset: none)
isa_of() {
  if [ $# -eq 0 ]; then env -u DISTZO_ISA "$bin" info --json "$model"; else DISTZO_ISA=$1 "$bin" info --json "$model"; fi |
    sed -nE 's/.*"isa": "([a-z0-9]+)".*/\1/p'
}
weights() { echo "$1/checkpoint-$steps/model.safetensors"; }
# same_files NAME A B: ok when both exist and are byte for byte equal
same_files() {
  if [ -s "$2" ] && [ -s "$3" ] && cmp -s "$2" "$3"; then ok "$1"; else bad "$1 ($2 vs $3)"; fi
}
# runs NAME LOG CMD...: runs CMD with its output in LOG; a failure is reported with LOG's tail
runs() {
  local name=$1 log=$2
  shift 2
  if "$@" > "$log" 2>&1; then return 0; fi
  bad "$name exited non-zero: $(tail -1 "$log")"
  return 1
}

best=$(isa_of) || best="(distzo info failed)"
levels=()
for l in "${all_levels[@]}"; do
  levels+=("$l")
  [ "$l" = "$best" ] && break
done
[ "${levels[-1]}" = "$best" ] || { bad "distzo info names an unknown best level '$best'"; finish; exit 1; }
echo "# best level here: $best; checking: ${levels[*]}"

for l in "${levels[@]}"; do
  d=$tmp/$l
  mkdir -p "$d"
  t0=$SECONDS
  got=$(isa_of "$l") || got="(distzo info failed)"
  if [ "$got" = "$l" ]; then ok "$l: DISTZO_ISA=$l is the level in force"; else bad "$l: DISTZO_ISA=$l gives isa '$got'"; fi
  export DISTZO_ISA=$l
  for t in 1 2; do
    runs "$l: eval --threads $t" "$d/eval$t.log" "$bin" eval "${eval_args[@]}" --threads $t --predictions "$d/scores$t.tsv" || :
    runs "$l: train --threads $t" "$d/train$t.log" "$bin" train "${train_args[@]}" --threads $t --out "$d/run$t" || :
  done
  runs "$l: eval --no-share-prompt" "$d/eval-full.log" "$bin" eval "${eval_args[@]}" --threads 2 --no-share-prompt \
    --predictions "$d/scores-full.tsv" || :
  same_files "$l: eval scores, --threads 2 = --threads 1" "$d/scores1.tsv" "$d/scores2.tsv"
  same_files "$l: eval scores, full sequences (--no-share-prompt) = shared prompts" "$d/scores1.tsv" "$d/scores-full.tsv"
  same_files "$l: trained weights, --threads 2 = --threads 1" "$(weights "$d/run1")" "$(weights "$d/run2")"
  same_files "$l: seeds.log, --threads 2 = --threads 1" "$d/run1/seeds.log" "$d/run2/seeds.log"
  if diff -q <(metrics "$d/run1") <(metrics "$d/run2") > /dev/null; then ok "$l: metrics, --threads 2 = --threads 1"
  else bad "$l: metrics differ between --threads 1 and 2"; fi

  if runs "$l: bench classify" "$d/bench.json" "$bin" bench classify --steps 2 --batch 4 --threads 2 --json; then
    if grep -q '"same_g": true' "$d/bench.json" && grep -q "\"isa\": \"$l\"" "$d/bench.json"; then
      ok "$l: bench classify: g bitwise the same with shared prompts and full sequences"
    else bad "$l: bench classify: $(cat "$d/bench.json")"; fi
  fi

  # bench eval: real-batch eval forwards and ZO steps (packed rows, one head pass); its g sum
  # is the steps' g, which must not depend on the thread count or the level
  for t in 1 2; do
    runs "$l: bench eval --threads $t" "$d/bench-eval$t.json" "$bin" bench eval --model "$model" --batch 4 \
      --batches 2 --repeat 1 --threads $t --json || :
    sed -nE 's/.*"g_sum": ([^,]*),.*/\1/p' "$d/bench-eval$t.json" > "$d/bench-eval-g$t"
  done
  same_files "$l: bench eval g, --threads 2 = --threads 1" "$d/bench-eval-g1" "$d/bench-eval-g2"
  if grep -qE '"passes": \{"parameters": [1-9][0-9]*, "zgen_seconds": [0-9.]+, ' "$d/bench-eval1.json"; then
    ok "$l: bench eval reports the ZO passes and the memory bandwidth"
  else bad "$l: bench eval: no passes in $(head -c 300 "$d/bench-eval1.json")"; fi

  for layout in "--pertp 2" "--dp 2"; do
    name=mpi$(echo "$layout" | tr -cd '[:alnum:]')
    read -r -a layout_args <<< "$layout"
    runs "$l: mpirun -np 2 $layout" "$d/$name.log" mpi 2 "$bin" train "${train_args[@]}" "${layout_args[@]}" \
      --threads 1 --out "$d/$name" || continue
    if same_run "$d/run1" "$d/$name" $steps; then ok "$l: mpirun -np 2 $layout = one process"
    else bad "$l: mpirun -np 2 $layout differs from one process"; fi
  done
  unset DISTZO_ISA

  if [ "$l" != baseline ]; then
    same_files "$l: eval scores = baseline's" "$tmp/baseline/scores1.tsv" "$d/scores1.tsv"
    same_files "$l: trained weights = baseline's" "$(weights "$tmp/baseline/run1")" "$(weights "$d/run1")"
    same_files "$l: seeds.log = baseline's" "$tmp/baseline/run1/seeds.log" "$d/run1/seeds.log"
    same_files "$l: bench eval g = baseline's" "$tmp/baseline/bench-eval-g1" "$d/bench-eval-g1"
  fi
  echo "# $l: $((SECONDS - t0)) s"
done

# refused: an unknown name, and every level this machine cannot execute
refused() { # LEVEL WHAT
  local rc=0
  DISTZO_ISA=$1 "$bin" eval "$model" --limit 2 > "$tmp/refused.log" 2>&1 || rc=$?
  if [ $rc -ne 0 ] && grep -q "DISTZO_ISA=$1" "$tmp/refused.log" && grep -q "$2" "$tmp/refused.log"; then
    ok "DISTZO_ISA=$1 refused (exit $rc): $(grep -m1 DISTZO_ISA "$tmp/refused.log")"
  else bad "DISTZO_ISA=$1 not refused clearly (exit $rc): $(tail -1 "$tmp/refused.log")"; fi
}
refused bogus "unknown instruction-set level"
above=("${all_levels[@]:${#levels[@]}}")
for l in "${above[@]}"; do refused "$l" "cannot run"; done
[ ${#above[@]} -gt 0 ] || echo "# no level above $best to refuse on this machine"

finish "levels: ${levels[*]}"
