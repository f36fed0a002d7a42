#!/usr/bin/env bash
# One estimator (--estimator ESTIMATOR with its knobs) keeps the seed-log invariant of
# MeZO's runs: everything a run is rebuilt from is its seed log, so
# - --resume after a stop at a checkpoint and after SIGKILL between checkpoints,
# - export (the whole log replayed onto the base model),
# - a disk store (globals resident, and streamed without the page cache), bf16 masters too,
# - mpirun -np 2 with perturbation parallelism and with data parallelism on shared masters
#   (each rank updates its slice of the spans),
# give bitwise the weights, metrics and seed log of one uninterrupted process in RAM; and
# the run's history stays a record of a few bytes per step. The run differs from MeZO's
# (the estimator is in effect) and run.json keeps it, so a resume with another is refused.
# usage: estimators.sh DISTZO ASSETS ESTIMATOR [KNOB...]   (fails without mpirun: scripts/deps.sh
# installs it, and the MPI layouts are part of the claim)
set -u
bin=$1 assets=$2 est=$3
shift 3
knobs=("$@")
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 32
base=(--steps 12 --eval-every 6 --checkpoint-every 6 --train-examples 48 --dev-examples 16 --batch 8
      --lr 1e-3 --weight-decay 0.01 --test "$tmp/test.tsv")
common=("${base[@]}" --estimator "$est" "${knobs[@]}")
run() { "$bin" train "${common[@]}" "$@" > /dev/null 2>&1; }
check() { if same_run "$2" "$3" 12; then ok "$est: $1"; else bad "$est: $1"; fi; }

run --threads 2 --out "$tmp/ref" || bad "$est: the reference run failed"
"$bin" train "${base[@]}" --threads 2 --out "$tmp/mezo" > /dev/null 2>&1
cmp -s "$tmp/ref/checkpoint-12/model.safetensors" "$tmp/mezo/checkpoint-12/model.safetensors" &&
  bad "$est: the weights are MeZO's" || ok "$est: the weights differ from MeZO's"
grep -qE "\"estimator\":[[:space:]]*\"(sparse|lozo)\"" "$tmp/ref/run.json" && ok "$est: run.json records the estimator" ||
  bad "$est: run.json has no estimator: $(grep -o '"estimator[^,]*' "$tmp/ref/run.json")"
size=$(stat -c %s "$tmp/ref/seeds.log") mezo_size=$(stat -c %s "$tmp/mezo/seeds.log" 2>/dev/null || echo 0)
[ "$size" = "$mezo_size" ] && ok "$est: the seed log is MeZO's size ($size bytes for 12 steps)" ||
  bad "$est: seed log of $size bytes, MeZO's $mezo_size"

# resume: stopped at checkpoint 6, then killed between checkpoints
run --threads 1 --steps 6 --out "$tmp/stop" && "$bin" train --resume --steps 12 --threads 2 --out "$tmp/stop" \
  > /dev/null 2>&1 || bad "$est: resume after a stop failed"
check "stopped at step 6, resumed == uninterrupted" "$tmp/ref" "$tmp/stop"
(DISTZO_TEST_KILL=0:9 run --threads 1 --out "$tmp/kill") 2> /dev/null
"$bin" train --resume --threads 1 --out "$tmp/kill" > /dev/null 2>&1 || bad "$est: resume after a kill failed"
check "killed after step 9, resumed (replays 6..9) == uninterrupted" "$tmp/ref" "$tmp/kill"
"$bin" train --resume --estimator mezo --out "$tmp/kill" > "$tmp/other.txt" 2>&1 &&
  bad "$est: resume with --estimator mezo was accepted" ||
  { grep -q -- "--estimator" "$tmp/other.txt" && ok "$est: resume with another --estimator is refused naming it" ||
    bad "$est: refusal does not name --estimator: $(tail -1 "$tmp/other.txt")"; }

# export replays the whole log onto the base model
"$bin" export --run "$tmp/ref" -o "$tmp/exported" > /dev/null 2>&1 || bad "$est: export failed"
cmp -s "$tmp/exported/model.safetensors" "$tmp/ref/checkpoint-12/model.safetensors" &&
  ok "$est: export (12 steps replayed) == the trained weights" || bad "$est: export differs from the trained weights"

# disk stores, and bf16 masters in RAM and on disk
run --threads 2 --store "disk:$tmp/m.store" --out "$tmp/disk" || bad "$est: disk-store run failed"
check "disk store == ram" "$tmp/ref" "$tmp/disk"
run --threads 2 --store "disk-nocache:$tmp/g.store" --stream-globals --out "$tmp/globals" || bad "$est: streamed run failed"
check "disk-nocache store, globals streamed == ram" "$tmp/ref" "$tmp/globals"
run --threads 2 --master-dtype bf16 --out "$tmp/bf16" || bad "$est: bf16 run failed"
run --threads 1 --master-dtype bf16 --store "disk:$tmp/b.store" --out "$tmp/bf16-disk" || bad "$est: bf16 disk run failed"
check "bf16 masters: disk store, 1 thread == ram, 2 threads" "$tmp/bf16" "$tmp/bf16-disk"

# mpirun: perturbation parallelism, and data parallelism over masters shared by the node
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -np "$@"; }
  for l in "2 --pertp 2" "2 --dp 2"; do
    name=$(echo "$l" | tr -cd '[:alnum:]')
    read -r -a args <<< "$l"
    mpi "${args[0]}" "$bin" train "${common[@]}" "${args[@]:1}" --threads 1 --out "$tmp/l$name" > "$tmp/l$name.txt" 2>&1 ||
      { bad "$est: -np $l exited non-zero"; tail -3 "$tmp/l$name.txt"; continue; }
    check "mpirun -np $l == one process" "$tmp/ref" "$tmp/l$name"
  done
else
  bad "$est: mpirun not found on PATH (scripts/deps.sh installs it): the MPI layouts are unchecked"
fi
finish
