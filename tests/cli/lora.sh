#!/usr/bin/env bash
# --peft lora end to end on stories260K (a llama2.c checkpoint: q, k, v, o as separate
# tensors, so q_proj and v_proj are targets of their own):
# - the base model's file is bitwise as before, and checkpoints hold the adapter alone
#   (PEFT's keys, B = 0 at the start: step 0's evaluation is the base model's);
# - threads 1 and 2, the baseline kernels, every MPI layout (--pertp 2, --dp 2, 2-D, two
#   simulated nodes, adapter_mpi_layouts), a resume after a stop, and export's replay of the
#   seed log give the same adapter bitwise; the adapter differs from its start;
# - Sparse-MeZO, LOZO, FZOO and HiZOO resume and replay bitwise (adapter_estimators), FZOO
#   under -np 2 --pertp 2 and -np 4 --pertp 2 --dp 2, HiZOO under --pertp 2 and --dp 2 (a
#   replica a rank) give one process's bits; q = 2 with Rademacher z, the v2
#   generator and weight decay gives its bits under --pertp 2 --dp 2 and in export;
# - export -> eval --adapter DIR gives the run's own test accuracy; --merge gives a model
#   whose eval is the same; train --adapter DIR starts a run from it;
# - a SmolLM2 Q4_1 GGUF base kept quantized (--keep-quantized): the adapter and log of the
#   base dequantized at load, in under 0.6x its peak RSS;
# - --backend ref (a device backend's staging path) gives the CPU's first step to 1e-5;
# - --store disk (the adapter's masters in the store, the base as loaded): the bits of
#   --store ram, across a resume and in export's replay;
# - refusals: --lora-dropout != 0, an unknown target, --prefix-tokens, a resume with another
#   rank, --merge of a full run, a LoRA log replayed as a full run's.
# - a 1-layer model (its one adapter block is a layer): threads 1 and 2 and export agree;
# - a run's starting adapter (--adapter DIR): its fingerprint in run.json, export refuses to
#   write over it, and a replay (export, resume) refuses it changed.
# usage: lora.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
test_set "$assets" 32
base_model="$assets/stories260K/stories260K.bin"
common=(--model "$base_model" --peft lora --lora-targets q_proj,v --steps 8 --eval-every 4 --checkpoint-every 4
        --train-examples 48 --dev-examples 16 --batch 8 --lr 2e-3 --eps 1e-2 --test "$tmp/test.tsv")
run() { "$bin" train "${common[@]}" "$@" > "$tmp/log" 2>&1; }
adapter() { echo "$1/checkpoint-$2/adapter_model.safetensors"; }
sum_before=$(sha256sum < "$base_model")

run --threads 2 --out "$tmp/ref" || { bad "the reference LoRA run failed: $(tail -3 "$tmp/log")"; finish; exit; }
[ "$(sha256sum < "$base_model")" = "$sum_before" ] && ok "the base model's file is unchanged" ||
  bad "the base model's file changed"
ls "$tmp/ref/checkpoint-8" | grep -q '^model.safetensors$' && bad "the checkpoint holds a whole model" ||
  ok "the checkpoint holds no model.safetensors"
grep -q '"peft_type":[[:space:]]*"LORA"' "$tmp/ref/checkpoint-8/adapter_config.json" &&
  grep -q '"r":[[:space:]]*8' "$tmp/ref/checkpoint-8/adapter_config.json" &&
  ok "adapter_config.json: LORA, r 8" || bad "adapter_config.json: $(cat "$tmp/ref/checkpoint-8/adapter_config.json")"
grep -q '"lora_targets":[[:space:]]*"q_proj,v"' "$tmp/ref/run.json" && grep -q '"lora_alpha":[[:space:]]*16' "$tmp/ref/run.json" &&
  ok "run.json records the LoRA settings" || bad "run.json: $(grep -i lora "$tmp/ref/run.json")"
grep -q 'base_model.model.model.layers.4.self_attn.v_proj.lora_B.weight' "$(adapter "$tmp/ref" 8)" &&
  ! grep -q 'k_proj' "$(adapter "$tmp/ref" 8)" && ok "PEFT's keys, q and v only" || bad "the adapter's keys"

# step 0 (B = 0) scores the base model: the same as a full run's step 0
"$bin" train --model "$base_model" --steps 1 --eval-every 4 --checkpoint-every 4 --train-examples 48 \
  --dev-examples 16 --batch 8 --test "$tmp/test.tsv" --threads 1 --out "$tmp/full" > /dev/null 2>&1
[ "$(head -1 "$tmp/full/metrics.jsonl" | sed -E 's/, "seconds": [^,}]*//')" = "$(metrics "$tmp/ref" | head -1)" ] &&
  ok "step 0 with B = 0 scores as the base model" || bad "step 0: $(head -1 "$tmp/full/metrics.jsonl") vs $(head -1 "$tmp/ref/metrics.jsonl")"

# threads, resume, replay: the same adapter bitwise
run --threads 1 --out "$tmp/t1" && same_run_files() { cmp -s "$(adapter "$1" 8)" "$(adapter "$2" 8)" &&
  cmp -s "$1/seeds.log" "$2/seeds.log" && diff -q <(metrics "$1") <(metrics "$2") > /dev/null; }
same_run_files "$tmp/ref" "$tmp/t1" && ok "threads 1 and 2: the same adapter, log and metrics" || bad "threads differ"
DISTZO_ISA=baseline run --threads 2 --out "$tmp/isa" && same_run_files "$tmp/ref" "$tmp/isa" &&
  ok "the baseline kernels give the same adapter" || bad "the baseline kernels differ"
adapter_mpi_layouts "$tmp/ref" "${common[@]}" # a node's ranks share the adapter's masters, each its slice
run --threads 1 --steps 4 --out "$tmp/stop" && "$bin" train --resume --steps 8 --threads 2 --keep-checkpoints 2 --out "$tmp/stop" \
  > "$tmp/log" 2>&1 || bad "the resume failed: $(tail -3 "$tmp/log")"
same_run_files "$tmp/ref" "$tmp/stop" && ok "stopped at step 4, resumed == uninterrupted" || bad "resume differs"
rm -rf "$tmp/stop/checkpoint-8" && printf 'checkpoint-4\n' > "$tmp/stop/LATEST"
"$bin" train --resume --steps 8 --threads 1 --out "$tmp/stop" > "$tmp/log" 2>&1
cmp -s "$(adapter "$tmp/ref" 8)" "$(adapter "$tmp/stop" 8)" && ok "resumed from checkpoint-4 with the log's steps replayed" ||
  bad "replay on resume differs: $(tail -2 "$tmp/log")"
"$bin" export --run "$tmp/ref" -o "$tmp/peft" > /dev/null 2>&1 || bad "export failed"
cmp -s "$tmp/peft/adapter_model.safetensors" "$(adapter "$tmp/ref" 8)" && ok "export's replay == the run's adapter" ||
  bad "export's adapter differs from checkpoint-8's"
cmp -s "$tmp/peft/adapter_model.safetensors" "$(adapter "$tmp/ref" 4)" && bad "the adapter did not change (4 -> 8)" ||
  ok "the adapter trained (checkpoint-4 != checkpoint-8)"

# a disk store holds the adapter's masters (the base stays as loaded): the bits of --store ram,
# across a stop and resume (the store reopened) and in export's replay through a store
run --threads 2 --store "disk:$tmp/lora.st" --out "$tmp/disk" && same_run_files "$tmp/ref" "$tmp/disk" &&
  cmp -s "$tmp/ref/checkpoint-8/trainer_state.json" "$tmp/disk/checkpoint-8/trainer_state.json" &&
  ok "--store disk: the adapter, log, metrics and checksum of --store ram" || bad "--store disk: $(tail -2 "$tmp/log")"
run --threads 1 --steps 4 --store "disk-nocache:$tmp/stop.st" --out "$tmp/disk-stop" &&
  "$bin" train --resume --steps 8 --threads 2 --out "$tmp/disk-stop" > "$tmp/log" 2>&1 &&
  same_run_files "$tmp/ref" "$tmp/disk-stop" && ok "--store disk-nocache: stopped at step 4, resumed == --store ram" ||
  bad "--store disk resume: $(tail -2 "$tmp/log")"
"$bin" export --run "$tmp/disk" --store "disk:$tmp/export.st" -o "$tmp/disk-x" > "$tmp/log" 2>&1 &&
  cmp -s "$tmp/disk-x/adapter_model.safetensors" "$(adapter "$tmp/ref" 8)" && ok "export --store disk == the adapter" ||
  bad "export --store disk: $(tail -2 "$tmp/log")"

# --backend ref stages every buffer as a device backend does: the same first step to 1e-5
run --backend ref --threads 1 --steps 1 --out "$tmp/refbe" || bad "--backend ref failed: $(tail -2 "$tmp/log")"
loss() { sed -n 2p "$1/metrics.jsonl" | grep -o '"loss": [0-9.e-]*' | awk '{print $2}'; }
awk -v a="$(loss "$tmp/refbe")" -v b="$(loss "$tmp/ref")" 'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= 1e-5 * b) }' &&
  ok "--backend ref: step 1's loss $(loss "$tmp/refbe") is the CPU's $(loss "$tmp/ref") to 1e-5" ||
  bad "--backend ref: step 1's loss $(loss "$tmp/refbe"), the CPU's $(loss "$tmp/ref")"

# a GGUF base kept quantized (--keep-quantized): the same adapter and log as dequantized at
# load, in less memory; without an adapter the option is refused
gguf="$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"
gguf_adapter_runs lora || bad "the GGUF LoRA runs failed: $(tail -2 "$tmp/q.txt")"
cmp -s "$(adapter "$tmp/gguf-q" 2)" "$(adapter "$tmp/gguf-deq" 2)" && cmp -s "$tmp/gguf-q/seeds.log" "$tmp/gguf-deq/seeds.log" &&
  ok "--keep-quantized: the adapter and log of the base dequantized at load" || bad "--keep-quantized changes the bits"
cmp -s "$(adapter "$tmp/gguf-q" 2)" "$(adapter "$tmp/gguf-qs" 2)" && cmp -s "$tmp/gguf-q/seeds.log" "$tmp/gguf-qs/seeds.log" &&
  ok "--keep-quantized with the adapter in a disk store: the same bits" || bad "--keep-quantized --store disk differs"
rss() { grep -o 'peak RSS [0-9.]*' "$1" | awk '{print $3}'; }
awk -v a="$(rss "$tmp/q.txt")" -v b="$(rss "$tmp/deq.txt")" 'BEGIN { exit !(a > 0 && a < 0.6 * b) }' &&
  ok "--keep-quantized: peak RSS $(rss "$tmp/q.txt") MB, dequantized $(rss "$tmp/deq.txt") MB" ||
  bad "--keep-quantized: peak RSS $(rss "$tmp/q.txt") MB, dequantized $(rss "$tmp/deq.txt") MB"

# --keep-quantized is not in run.json (a choice of memory, not of bits): --resume and
# --resume-from given it keep the base quantized, with the dequantized run's bits
cp -r "$tmp/gguf-deq" "$tmp/gguf-deq4"
"$bin" train --resume --steps 4 --out "$tmp/gguf-deq4" > "$tmp/deq4.txt" 2>&1 &&
  "$bin" train --resume --steps 4 --keep-quantized --out "$tmp/gguf-q" > "$tmp/q4.txt" 2>&1 &&
  "$bin" train --resume-from "$tmp/gguf-deq:2" --steps 4 --keep-quantized --out "$tmp/gguf-qb" > "$tmp/qb.txt" 2>&1 ||
  bad "resuming the GGUF LoRA runs failed: $(tail -2 "$tmp/q4.txt" "$tmp/qb.txt" 2>&1)"
for r in q:q4 qb:qb; do
  awk -v a="$(rss "$tmp/${r#*:}.txt")" -v b="$(rss "$tmp/deq4.txt")" 'BEGIN { exit !(a > 0 && a < 0.6 * b) }' &&
    cmp -s "$(adapter "$tmp/gguf-${r%:*}" 4)" "$(adapter "$tmp/gguf-deq4" 4)" &&
    ok "${r%:*}: resumed with --keep-quantized, peak RSS $(rss "$tmp/${r#*:}.txt") MB (dequantized $(rss "$tmp/deq4.txt")), the same adapter" ||
    bad "${r%:*}: resumed with --keep-quantized: peak RSS $(rss "$tmp/${r#*:}.txt") MB, dequantized $(rss "$tmp/deq4.txt") MB, or another adapter"
done

# the estimators over the adapter's tensors keep the seed-log invariant (and their layouts)
adapter_estimators adapter

# q = 2 samples a step, Rademacher z of the v2 generator and weight decay on the adapter: the
# one-process bits under --pertp 2 --dp 2 (a pair's two samples on two ranks) and in export
zo=(--spsa-samples 2 --perturbation rademacher --rng v2 --weight-decay 0.1)
run "${zo[@]}" --threads 2 --out "$tmp/q2" && ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 \
  mpirun --oversubscribe -np 4 "$bin" train "${common[@]}" "${zo[@]}" --pertp 2 --dp 2 --threads 1 --out "$tmp/q2-mpi" \
  > "$tmp/log" 2>&1 && "$bin" export --run "$tmp/q2" -o "$tmp/q2-x" > /dev/null 2>&1 &&
  same_run_files "$tmp/q2" "$tmp/q2-mpi" && cmp -s "$tmp/q2-x/adapter_model.safetensors" "$(adapter "$tmp/q2" 8)" &&
  ! cmp -s "$(adapter "$tmp/q2" 8)" "$(adapter "$tmp/ref" 8)" &&
  ok "q 2, rademacher, rng v2, weight decay: -np 4 --pertp 2 --dp 2 and export == one process" ||
  bad "q 2 / rademacher / v2 / wd: $(tail -2 "$tmp/log")"

# eval --adapter: the run's own test accuracy; --merge: the same scores from a whole model
want=$(tail -1 "$tmp/ref/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
got=$("$bin" eval "$base_model" --adapter "$tmp/peft" --data "$tmp/test.tsv" --json --threads 1 2>/dev/null |
      grep -o '"accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "eval --adapter: the run's test accuracy ($got)" ||
  bad "eval --adapter gave '$got', the run '$want'"
"$bin" export --run "$tmp/ref" --merge -o "$tmp/merged" > /dev/null 2>&1 || bad "export --merge failed"
got=$("$bin" eval "$tmp/merged" --data "$tmp/test.tsv" --json --threads 1 2>/dev/null |
      grep -o '"accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ "$got" = "$want" ] && ok "the merged model's accuracy is the run's ($got)" || bad "merged: '$got', the run '$want'"
got=$("$bin" eval "$tmp/ref/checkpoint-8" --json --threads 1 2>/dev/null | grep -o '"accuracy": [0-9.e-]*' |
      awk '{printf "%.6f", $2}')
[ "$got" = "$want" ] && ok "eval RUN/checkpoint-8: the adapter on the run's base, its test data ($got)" ||
  bad "eval of the checkpoint: '$got', the run '$want'"
"$bin" generate "$base_model" --adapter "$tmp/peft" -n 8 --temperature 0 --threads 1 > "$tmp/gen" 2>&1 &&
  ok "generate --adapter runs" || bad "generate --adapter: $(tail -2 "$tmp/gen")"

# train --adapter DIR: a new run starts from an exported adapter (step 0 scores it), and its
# export replays its log onto that adapter
run --threads 1 --steps 4 --adapter "$tmp/peft" --out "$tmp/cont" || bad "train --adapter failed: $(tail -2 "$tmp/log")"
got=$(head -1 "$tmp/cont/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ "$got" = "$want" ] && ok "train --adapter: step 0 scores the adapter it starts from ($got)" ||
  bad "train --adapter: step 0 scored '$got', the adapter '$want'"
"$bin" export --run "$tmp/cont" -o "$tmp/cont-x" > /dev/null 2>&1 &&
  cmp -s "$tmp/cont-x/adapter_model.safetensors" "$(adapter "$tmp/cont" 4)" &&
  ! cmp -s "$tmp/cont-x/adapter_model.safetensors" "$tmp/peft/adapter_model.safetensors" &&
  ok "train --adapter: export replays onto the starting adapter" || bad "train --adapter: export differs"
# the starting adapter is part of the run: run.json keeps its file's fingerprint; export
# refuses to write over it, and a replay refuses it once changed (then takes it back)
grep -qE '"lora_init_fingerprint":[[:space:]]*"[0-9a-f]{16}"' "$tmp/cont/run.json" &&
  ok "train --adapter: run.json keeps the adapter file's fingerprint" || bad "run.json: $(grep lora_init "$tmp/cont/run.json")"
refuse "export -o onto the adapter the run started from" "is the adapter the run started from" \
  "$bin" export --run "$tmp/cont" -o "$tmp/peft"
cp "$tmp/peft/adapter_model.safetensors" "$tmp/peft.keep" && cp "$(adapter "$tmp/cont" 4)" "$tmp/peft/adapter_model.safetensors"
refuse "export after the starting adapter changed" "adapter_model.safetensors: the file has changed since the run started from it, or is another" \
  "$bin" export --run "$tmp/cont" -o "$tmp/cont-changed"
cp -r "$tmp/cont" "$tmp/cont-replay" && rm -rf "$tmp/cont-replay"/checkpoint-* "$tmp/cont-replay/LATEST"
refuse "a resume that replays onto the changed adapter" "lora_init_fingerprint" \
  "$bin" train --resume --steps 5 --threads 1 --out "$tmp/cont-replay"
cp "$tmp/peft.keep" "$tmp/peft/adapter_model.safetensors"
"$bin" export --run "$tmp/cont" -o "$tmp/cont-back" > /dev/null 2>&1 && cmp -s "$tmp/cont-back/adapter_model.safetensors" "$tmp/cont-x/adapter_model.safetensors" &&
  ok "the adapter put back: export replays as before" || bad "export with the adapter put back"

# refusals, each naming what is wrong
refuse "--lora-dropout 0.1" "lora-dropout" "$bin" train "${common[@]}" --lora-dropout 0.1 --out "$tmp/x1"
refuse "--lora-dropout 0.9 on a resume" "lora-dropout" "$bin" train --resume --lora-dropout 0.9 --out "$tmp/ref"
refuse "--lora-dropout 0.5 on a branch" "lora-dropout" "$bin" train --resume-from "$tmp/ref:4" --lora-dropout 0.5 \
  --out "$tmp/x1b"
refuse "an unknown target" "unknown module 'qq'" "$bin" train "${common[@]}" --lora-targets q,qq --out "$tmp/x2"
refuse "--lora-rank without --peft lora" "give --peft lora" "$bin" train --model "$base_model" --lora-rank 4 --out "$tmp/x7"
refuse "--adapter of another rank" "differ" "$bin" train "${common[@]}" --lora-rank 4 --adapter "$tmp/peft" --out "$tmp/x8"
refuse "--adapter of other targets, both named" "target_modules q,v differ from the run's --lora-rank 8, --lora-alpha 16, --lora-targets q,k" \
  "$bin" train "${common[@]}" --lora-targets q,k --adapter "$tmp/peft" --out "$tmp/x8b"
refuse "a LoRA checkpoint and --adapter in eval" "itself the adapter" "$bin" eval "$tmp/ref/checkpoint-8" \
  --adapter "$tmp/peft" --limit 2
refuse "a LoRA checkpoint as generate's model" "a PEFT adapter folder, not a model" "$bin" generate \
  "$tmp/ref/checkpoint-8" -n 2
refuse "an adapter folder as export's --model" "a PEFT adapter folder, not a model" "$bin" export \
  --model "$tmp/ref/checkpoint-8" -o "$tmp/x8d"
refuse "an adapter of another base, its base named" "base_model_name_or_path is 'tests/data/hf/qwen2_bias'" \
  "$bin" eval "$base_model" --adapter "$(dirname "$0")/../data/peft/qwen2_peft_lora" --limit 2
refuse "OPT's fc1 on a LLaMA-family base" "no module 'fc1' (OPT's name): give up_proj, or up" "$bin" train "${common[@]}" \
  --lora-targets q,fc1 --out "$tmp/x8c"
[ ! -e "$tmp/x8c" ] || bad "the refused fc1 run left a folder"
cp -r "$tmp/ref" "$tmp/respelled"
"$bin" train --resume --lora-targets v,q_proj --steps 9 --out "$tmp/respelled" > "$tmp/log" 2>&1 &&
  ok "a resume with the same targets spelled otherwise (v,q_proj for q_proj,v)" || bad "resume, targets respelled: $(tail -1 "$tmp/log")"
cp -r "$tmp/peft" "$tmp/alpha_inf" && sed -i -E 's/"lora_alpha":[[:space:]]*[0-9.e+]+/"lora_alpha": 1e999/' "$tmp/alpha_inf/adapter_config.json"
refuse "an adapter_config.json whose lora_alpha is out of range, naming the file" \
  "alpha_inf/adapter_config.json: lora_alpha must be a positive number up to 1e6" "$bin" eval "$base_model" --adapter "$tmp/alpha_inf" --limit 2
cp -r "$tmp/peft" "$tmp/r_twice" && sed -i -E 's/"lora_alpha":/"r": 4, "lora_alpha":/' "$tmp/r_twice/adapter_config.json"
refuse "an adapter_config.json giving r twice, naming the file and the key" \
  "r_twice/adapter_config.json: key 'r' is given twice" "$bin" eval "$base_model" --adapter "$tmp/r_twice" --limit 2
# a damaged adapter checkpoint: the warning names adapter_model.safetensors, and the run is rebuilt from the log
cp -r "$tmp/ref" "$tmp/rot" && f="$(adapter "$tmp/rot" 8)" && printf '\x55' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 100)) conv=notrunc status=none
"$bin" train --resume --steps 9 --threads 2 --out "$tmp/rot" > "$tmp/rot.txt" 2>&1 &&
  grep -q "checkpoint-8/adapter_model.safetensors: the weights' checksum is" "$tmp/rot.txt" && grep -q "rebuilding the weights" "$tmp/rot.txt" &&
  ok "a damaged LoRA checkpoint is named by its adapter file and rebuilt" || bad "damaged LoRA checkpoint: $(grep -E 'warn|error' "$tmp/rot.txt" | head -2)"
"$bin" train "${common[@]}" --steps 1 --eval-every 0 --checkpoint-every 0 --keep-quantized --out "$tmp/kq-f32" \
  > "$tmp/kq.txt" 2>&1 && grep -q "keep-quantized: .*stories260K.bin has no tensor stored quantized" "$tmp/kq.txt" &&
  ok "--keep-quantized over a base with nothing quantized: said, as eval says it" || bad "--keep-quantized on f32: $(tail -2 "$tmp/kq.txt")"
refuse "--adapter without --peft lora" "give --peft lora" "$bin" train --model "$base_model" --adapter "$tmp/peft" --out "$tmp/x9"
refuse "--keep-quantized without an adapter" "keep-quantized" "$bin" train --model "$gguf" --keep-quantized --out "$tmp/x10"
refuse "--prefix-tokens under --peft lora" "give --peft prefix" "$bin" train "${common[@]}" --prefix-tokens 3 --out "$tmp/x3"
refuse "a resume with another rank" "lora-rank" "$bin" train --resume --lora-rank 4 --out "$tmp/ref"
refuse "--merge of a full run" "no adapter" "$bin" export --run "$tmp/full" --merge -o "$tmp/x5"
cp -r "$tmp/ref" "$tmp/asfull" && sed -i '/"peft"\|"lora_/d' "$tmp/asfull/run.json" && sed -i -z 's/,\n}/\n}/' "$tmp/asfull/run.json"
refuse "a LoRA log replayed as a full run's" "another layout" "$bin" export --run "$tmp/asfull" -o "$tmp/x6"
[ ! -e "$tmp/x1/run.json" ] && [ ! -e "$tmp/x2/run.json" ] && [ ! -e "$tmp/x8/run.json" ] && ok "a refused start writes no run.json" || bad "a refused start wrote"
adapter_one_layer lora

finish
