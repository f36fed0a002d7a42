#!/usr/bin/env bash
# --estimator fzoo keeps the seed-log invariant: the run is rebuilt from its seed log, so
# - 1 and 2 threads, and the baseline kernels (DISTZO_ISA=baseline), --no-fuse,
# - disk stores (globals resident, and streamed without the page cache), bf16 masters,
# - --resume after a stop at a checkpoint and after SIGKILL between checkpoints,
# - export (the whole log replayed onto the base model),
# - mpirun -np 2 --dp 2 (masters shared by the node, each rank its slice),
# - mpirun -np 2 --pertp 2 and -np 4 --pertp 2 --dp 2 (--node-size 1: the N + 1 passes
#   split over the pair's ranks, each rank a replica of the masters),
# - --peft lora (the adapter: threads, resume, export),
# give bitwise the weights, metrics and seed log of one uninterrupted process; the log's
# records are (step, lr, g[N]) with N = --fzoo-directions and run.json keeps the settings.
# Refused: --fzoo-directions 1, --spsa-samples, --perturbation gaussian, --pertp 2 over
# masters a node's ranks share, a resume with other directions, join --estimator (a worker
# takes the run's; serve --estimator fzoo is tests/cli/federated_fzoo.sh).
# usage: fzoo.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 32
n=3
common=(--estimator fzoo --fzoo-directions $n --steps 8 --eval-every 4 --checkpoint-every 4 --train-examples 48
        --dev-examples 16 --batch 8 --lr 1e-5 --weight-decay 0.01 --test "$tmp/test.tsv")
run() { "$bin" train "${common[@]}" "$@" > "$tmp/log" 2>&1; }
check() { if same_run "$2" "$3" 8; then ok "$1"; else bad "$1"; fi; }

run --threads 2 --out "$tmp/ref" || { bad "the reference run failed: $(tail -3 "$tmp/log")"; finish; exit; }
grep -qE '"estimator":[[:space:]]*"fzoo"' "$tmp/ref/run.json" &&
  grep -qE '"fzoo_directions":[[:space:]]*3' "$tmp/ref/run.json" &&
  grep -qE '"spsa_samples":[[:space:]]*3' "$tmp/ref/run.json" &&
  grep -qE '"rademacher":[[:space:]]*"rademacher"' "$tmp/ref/run.json" &&
  ok "run.json records fzoo, its 3 directions as the step's samples, Rademacher" ||
  bad "run.json: $(grep -E 'estimator|fzoo|spsa|rademacher' "$tmp/ref/run.json")"
size=$(stat -c %s "$tmp/ref/seeds.log")
[ "$size" = $((104 + 8 * (12 + 4 * n))) ] && ok "the seed log holds 8 records of (step, lr, g[3]): $size bytes" ||
  bad "seed log of $size bytes, expected $((104 + 8 * (12 + 4 * n)))"
"$bin" train "${common[@]:4}" --spsa-samples $n --perturbation rademacher --threads 2 --out "$tmp/mezo" > "$tmp/log" 2>&1 ||
  bad "the MeZO run failed: $(tail -2 "$tmp/log")"
cmp -s "$tmp/ref/checkpoint-8/model.safetensors" "$tmp/mezo/checkpoint-8/model.safetensors" &&
  bad "the weights are MeZO's" || ok "the weights differ from MeZO's"

run --threads 1 --out "$tmp/t1" && check "threads 1 == threads 2" "$tmp/ref" "$tmp/t1"
DISTZO_ISA=baseline run --threads 1 --out "$tmp/isa" && check "the baseline kernels == the best level" "$tmp/ref" "$tmp/isa"
run --threads 2 --no-fuse --out "$tmp/unfused" && check "--no-fuse == fused" "$tmp/ref" "$tmp/unfused"

run --threads 2 --store "disk:$tmp/m.store" --out "$tmp/disk" && check "a disk store == ram" "$tmp/ref" "$tmp/disk"
run --threads 1 --store "disk-nocache:$tmp/g.store" --stream-globals --out "$tmp/globals" &&
  check "a disk-nocache store, globals streamed == ram" "$tmp/ref" "$tmp/globals"
run --threads 2 --master-dtype bf16 --out "$tmp/bf16" && run --threads 1 --master-dtype bf16 --store "disk:$tmp/b.store" \
  --out "$tmp/bf16-disk" && check "bf16 masters: disk, 1 thread == ram, 2 threads" "$tmp/bf16" "$tmp/bf16-disk"

# resume: stopped at checkpoint 4, then killed between checkpoints
run --threads 1 --steps 4 --out "$tmp/stop" && "$bin" train --resume --steps 8 --threads 2 --out "$tmp/stop" \
  > "$tmp/log" 2>&1 || bad "resume after a stop failed: $(tail -2 "$tmp/log")"
check "stopped at step 4, resumed == uninterrupted" "$tmp/ref" "$tmp/stop"
(DISTZO_TEST_KILL=0:6 run --threads 1 --out "$tmp/kill") 2> /dev/null
"$bin" train --resume --threads 1 --out "$tmp/kill" > "$tmp/log" 2>&1 || bad "resume after a kill failed: $(tail -2 "$tmp/log")"
check "killed after step 6, resumed (replays 4..6) == uninterrupted" "$tmp/ref" "$tmp/kill"

# export replays the whole log onto the base model
"$bin" export --run "$tmp/ref" -o "$tmp/exported" > /dev/null 2>&1 || bad "export failed"
cmp -s "$tmp/exported/model.safetensors" "$tmp/ref/checkpoint-8/model.safetensors" &&
  ok "export (8 steps replayed) == the trained weights" || bad "export differs from the trained weights"

# data parallelism over masters the node's ranks share
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -np 2 "$bin" train \
    "${common[@]}" --dp 2 --threads 1 --out "$tmp/dp" > "$tmp/log" 2>&1 || bad "-np 2 --dp 2 failed: $(tail -2 "$tmp/log")"
  check "mpirun -np 2 --dp 2 == one process" "$tmp/ref" "$tmp/dp"
  mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -np "$1" \
    "$bin" train "${common[@]}" --threads 1 "${@:2}" > "$tmp/log" 2>&1; }
  mpi 2 --pertp 2 --node-size 1 --out "$tmp/pp" || bad "-np 2 --pertp 2 failed: $(tail -2 "$tmp/log")"
  check "mpirun -np 2 --pertp 2 (l0 + 1 direction, 2 directions) == one process" "$tmp/ref" "$tmp/pp"
  mpi 4 --pertp 2 --dp 2 --node-size 1 --out "$tmp/ppdp" || bad "-np 4 --pertp 2 --dp 2 failed: $(tail -2 "$tmp/log")"
  check "mpirun -np 4 --pertp 2 --dp 2 == one process" "$tmp/ref" "$tmp/ppdp"
  mpi 2 --pertp 2 --out "$tmp/x4" && bad "--pertp 2 over node-shared masters ran" ||
    { grep -q "node-size 1" "$tmp/log" && ok "--pertp 2 over node-shared masters is refused, naming --node-size 1" ||
      bad "--pertp 2 over shared masters: $(tail -2 "$tmp/log")"; }
else
  bad "mpirun not found on PATH (scripts/deps.sh installs it): the DP layout is unchecked"
fi

# an adapter: its own parameter table, the same estimator
adapter() { echo "$1/checkpoint-8/adapter_model.safetensors"; }
same_adapter() { cmp -s "$(adapter "$1")" "$(adapter "$2")" && cmp -s "$1/seeds.log" "$2/seeds.log" &&
  diff -q <(metrics "$1") <(metrics "$2") > /dev/null; }
lora=(--peft lora --lr 1e-4 --eps 1e-2)
run "${lora[@]}" --threads 2 --out "$tmp/lora" || bad "the LoRA run failed: $(tail -2 "$tmp/log")"
run "${lora[@]}" --threads 1 --steps 4 --out "$tmp/lora-stop" &&
  "$bin" train --resume --steps 8 --threads 1 --out "$tmp/lora-stop" > "$tmp/log" 2>&1 &&
  "$bin" export --run "$tmp/lora" -o "$tmp/lora-x" > "$tmp/log" 2>&1 &&
  same_adapter "$tmp/lora" "$tmp/lora-stop" && cmp -s "$tmp/lora-x/adapter_model.safetensors" "$(adapter "$tmp/lora")" &&
  ok "--peft lora: 1 thread resumed == 2 threads, export == the adapter" || bad "--peft lora: differs"

refuse "--fzoo-directions 1" "fzoo-directions 1" "$bin" train "${common[@]}" --fzoo-directions 1 --out "$tmp/x1"
refuse "--fzoo-directions 0, named with its own range" "fzoo-directions 0 is outside 2..64" "$bin" train "${common[@]}" \
  --fzoo-directions 0 --out "$tmp/x0"
refuse "--fzoo-directions 65, named with its own range" "fzoo-directions 65 is outside 2..64" "$bin" train \
  "${common[@]}" --fzoo-directions 65 --out "$tmp/x65"
refuse "--spsa-samples with fzoo" "spsa-samples" "$bin" train "${common[@]}" --spsa-samples 2 --out "$tmp/x2"
refuse "--spsa-samples 1 with fzoo (any value)" "spsa-samples" "$bin" train "${common[@]}" --spsa-samples 1 --out "$tmp/x2b"
refuse "--spsa-samples equal to the directions" "spsa-samples" "$bin" train "${common[@]}" --spsa-samples "$n" \
  --out "$tmp/x2c"
refuse "plan: --spsa-samples with fzoo" "spsa-samples" "$bin" plan --model stories260K --mem-per-node 4 \
  --estimator fzoo --spsa-samples 3
refuse "plan: --fzoo-directions without fzoo" "fzoo-directions" "$bin" plan --model stories260K --mem-per-node 4 \
  --fzoo-directions 4

# a diverged step (lr 1e6): skipped, logged as NaN, its metrics row's g null as MeZO's, the
# warning naming FZOO's l0 (MeZO's L+ / L- are not its losses)
"$bin" train "${common[@]}" --lr 1e6 --steps 12 --eval-every 0 --checkpoint-every 0 --max-bad-steps 20 \
  --out "$tmp/nan" > "$tmp/nan.txt" 2>&1 || bad "the diverging run failed: $(tail -1 "$tmp/nan.txt")"
if grep -q '"loss": null, "g": null' "$tmp/nan/metrics.jsonl" && ! grep -q '"loss": null, "g": 0' "$tmp/nan/metrics.jsonl" &&
  grep -q "non-finite loss (l0 " "$tmp/nan.txt"; then ok "a non-finite FZOO step: g null in metrics, the warning names l0"
else bad "non-finite FZOO step: $(grep -m1 '"loss": null' "$tmp/nan/metrics.jsonl") / $(grep -m1 non-finite "$tmp/nan.txt")"; fi
refuse "--perturbation gaussian with fzoo" "Rademacher" "$bin" train "${common[@]}" --perturbation gaussian --out "$tmp/x3"
refuse "a resume with other directions" "fzoo-directions" "$bin" train --resume --fzoo-directions 4 --out "$tmp/ref"
refuse "a resume with --estimator mezo" "estimator" "$bin" train --resume --estimator mezo --out "$tmp/ref"
refuse "join --estimator fzoo" "estimator" "$bin" join --estimator fzoo
finish
