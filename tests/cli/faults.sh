#!/usr/bin/env bash
# Errors propagate, nothing is lost: the Nth read, write, fsync or allocation of a run
# fails (DISTZO_TEST_FAULT=KIND:N, the test seam of src/core/io.h). Every such run must
# either finish (N beyond the run's calls) or exit non-zero with an error naming what
# failed, never crash; and `--resume` without the fault must then give bitwise the
# uninterrupted run (weights, metrics without timing, seed log). With the masters in a
# disk store the faults land in the store's block transfers too.
# usage: faults.sh DISTZO ASSETS [ram|disk]
set -u
bin=$1 assets=$2 store=${3:-ram}
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/dev.tsv
test_set "$assets" 32
steps=12
args=(--steps $steps --eval-every 6 --checkpoint-every 4 --lr 3e-4 --batch 4 --train-examples 32
      --dev-examples 16 --test "$tmp/test.tsv" --threads 1)
extra() { [ "$store" = disk ] && echo "--store disk:$1.store"; }
# shellcheck disable=SC2046
"$bin" train "${args[@]}" --out "$tmp/ref" $(extra "$tmp/ref") > "$tmp/ref.txt" 2>&1 || { bad "reference run failed"; finish; exit 1; }
n_faults=0
for kind in write:1 write:3 write:9 write:20 write:45 write:200 sync:1 sync:4 sync:11 sync:30 read:2 read:10 read:40 alloc:1 alloc:5 alloc:30; do
  run="$tmp/f${kind/:/_}"
  # shellcheck disable=SC2046
  DISTZO_TEST_FAULT=$kind "$bin" train "${args[@]}" --out "$run" $(extra "$run") > "$run.txt" 2>&1
  rc=$?
  if [ $rc -ge 128 ]; then bad "$kind: killed by signal $((rc - 128))"; tail -3 "$run.txt"; continue; fi
  if [ $rc -ne 0 ]; then
    n_faults=$((n_faults + 1))
    grep -qi "distzo: error: .*\(Input/output error\|No space left\|out of memory\|cannot allocate\)" "$run.txt" ||
      bad "$kind: exit $rc without an error naming the failure: $(tail -1 "$run.txt")"
  elif grep -q "error:" "$run.txt"; then
    bad "$kind: an error was reported but the run went on and exited 0: $(grep -m1 error: "$run.txt")"
  fi
  if [ -f "$run/run.json" ]; then
    "$bin" train --resume --out "$run" > "$run.resume.txt" 2>&1 || { bad "$kind: resume failed: $(tail -1 "$run.resume.txt")"; continue; }
  else
    # shellcheck disable=SC2046
    "$bin" train "${args[@]}" --out "$run" $(extra "$run") > "$run.resume.txt" 2>&1 || { bad "$kind: restart failed"; continue; }
  fi
  same_run "$tmp/ref" "$run" $steps && ok "$kind (exit $rc), then resumed == uninterrupted" ||
    bad "$kind (exit $rc): the resumed run differs from the uninterrupted one"
done
[ $n_faults -ge 8 ] && ok "$n_faults of the injected faults stopped the run" || bad "only $n_faults faults stopped a run (seam not reached?)"
finish "store $store"
