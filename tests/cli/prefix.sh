#!/usr/bin/env bash
# --peft prefix end to end (prefix tuning, MeZO's init from real tokens) on stories260K:
# - checkpoints hold PEFT's PREFIX_TUNING folder (prompt_embeddings alone); run.json keeps
#   peft and prefix_tokens; the base model's file is unchanged;
# - threads 1 and 2, the baseline kernels, every MPI layout (adapter_mpi_layouts), a resume
#   after a stop, and export's replay of the seed log give the same prefix bitwise; it
#   differs from its start; Sparse-MeZO, LOZO, FZOO and HiZOO resume and replay bitwise,
#   FZOO under --pertp 2 (and with --dp 2) and HiZOO under --pertp 2 and --dp 2 (a replica
#   a rank) == one process;
# - export -> eval --adapter DIR gives the run's own test accuracy, eval RUN/checkpoint-N
#   too; generate --adapter runs; train --adapter DIR starts from an exported prefix;
# - --backend ref (a device backend's staging) gives the CPU's first step to 1e-5, and
#   --no-share-prompt its bits;
# - a SmolLM2 Q4_1 GGUF base (grouped-query attention) kept quantized: the same prefix and
#   log as dequantized at load;
# - --store disk: the bits of --store ram, also across a resume;
# - refusals: --prefix-tokens 0, --lora-* under --peft prefix, --merge, a
#   resume with another --prefix-tokens, a prefix log replayed as a LoRA run's.
# - a 1-layer model (its one adapter block is a layer): threads 1 and 2 and export agree.
# usage: prefix.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
test_set "$assets" 32
base_model="$assets/stories260K/stories260K.bin"
common=(--model "$base_model" --peft prefix --prefix-tokens 4 --steps 8 --eval-every 4 --checkpoint-every 4
        --train-examples 48 --dev-examples 16 --batch 8 --lr 1e-2 --eps 1e-1 --test "$tmp/test.tsv")
run() { "$bin" train "${common[@]}" "$@" > "$tmp/log" 2>&1; }
adapter() { echo "$1/checkpoint-$2/adapter_model.safetensors"; }
same_run_files() { cmp -s "$(adapter "$1" 8)" "$(adapter "$2" 8)" && cmp -s "$1/seeds.log" "$2/seeds.log" &&
  diff -q <(metrics "$1") <(metrics "$2") > /dev/null; }
sum_before=$(sha256sum < "$base_model")

run --threads 2 --out "$tmp/ref" || { bad "the reference prefix run failed: $(tail -3 "$tmp/log")"; finish; exit; }
[ "$(sha256sum < "$base_model")" = "$sum_before" ] && ok "the base model's file is unchanged" || bad "the base changed"
grep -q '"peft_type":[[:space:]]*"PREFIX_TUNING"' "$tmp/ref/checkpoint-8/adapter_config.json" &&
  grep -q '"num_virtual_tokens":[[:space:]]*4' "$tmp/ref/checkpoint-8/adapter_config.json" &&
  ok "adapter_config.json: PREFIX_TUNING, 4 virtual tokens" || bad "adapter_config.json: $(cat "$tmp/ref/checkpoint-8/adapter_config.json")"
grep -q 'prompt_embeddings' "$(adapter "$tmp/ref" 8)" && ok "adapter_model.safetensors: prompt_embeddings" ||
  bad "no prompt_embeddings"
grep -q '"peft":[[:space:]]*"prefix"' "$tmp/ref/run.json" && grep -q '"prefix_tokens":[[:space:]]*4' "$tmp/ref/run.json" &&
  ! grep -q '"lora_rank"' "$tmp/ref/run.json" && ok "run.json records the prefix settings" || bad "run.json"

run --threads 1 --out "$tmp/t1"
same_run_files "$tmp/ref" "$tmp/t1" && ok "threads 1 and 2: the same prefix, log and metrics" || bad "threads differ"
DISTZO_ISA=baseline run --threads 2 --out "$tmp/isa" && same_run_files "$tmp/ref" "$tmp/isa" &&
  ok "the baseline kernels give the same prefix" || bad "the baseline kernels differ"
adapter_mpi_layouts "$tmp/ref" "${common[@]}"
run --threads 1 --steps 4 --out "$tmp/stop" && "$bin" train --resume --steps 8 --threads 2 --keep-checkpoints 2 --out "$tmp/stop" \
  > "$tmp/log" 2>&1 || bad "the resume failed: $(tail -3 "$tmp/log")"
same_run_files "$tmp/ref" "$tmp/stop" && ok "stopped at step 4, resumed == uninterrupted" || bad "resume differs"
"$bin" export --run "$tmp/ref" -o "$tmp/peft" > /dev/null 2>&1 || bad "export failed"
cmp -s "$tmp/peft/adapter_model.safetensors" "$(adapter "$tmp/ref" 8)" && ok "export's replay == the run's prefix" ||
  bad "export's prefix differs from checkpoint-8's"
[ -f "$(adapter "$tmp/stop" 4)" ] && ! cmp -s "$tmp/peft/adapter_model.safetensors" "$(adapter "$tmp/stop" 4)" &&
  ok "the prefix trained (checkpoint-4 != checkpoint-8)" || bad "the prefix did not change (4 -> 8)"

# a disk store holds the prefix's masters: the bits of --store ram, also across a resume
run --threads 2 --store "disk:$tmp/prefix.st" --out "$tmp/disk" && same_run_files "$tmp/ref" "$tmp/disk" &&
  ok "--store disk: the prefix, log and metrics of --store ram" || bad "--store disk: $(tail -2 "$tmp/log")"
run --threads 1 --steps 4 --store "disk:$tmp/stop.st" --out "$tmp/disk-stop" &&
  "$bin" train --resume --steps 8 --threads 2 --out "$tmp/disk-stop" > "$tmp/log" 2>&1 &&
  same_run_files "$tmp/ref" "$tmp/disk-stop" && ok "--store disk: stopped at step 4, resumed == --store ram" ||
  bad "--store disk resume: $(tail -2 "$tmp/log")"

# --backend ref stages every buffer as a device backend does (the virtual rows uploaded per
# layer): step 1's loss is the CPU's to 1e-5; --no-share-prompt (no tree batch) gives its bits
loss() { sed -n 2p "$1/metrics.jsonl" | grep -o '"loss": [0-9.e-]*' | awk '{print $2}'; }
run --backend ref --threads 1 --steps 1 --out "$tmp/refbe" && run --no-share-prompt --threads 1 --steps 1 --out "$tmp/noshare" ||
  bad "--backend ref or --no-share-prompt failed: $(tail -2 "$tmp/log")"
awk -v a="$(loss "$tmp/refbe")" -v b="$(loss "$tmp/ref")" 'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= 1e-5 * b) }' &&
  ok "--backend ref: step 1's loss $(loss "$tmp/refbe") is the CPU's $(loss "$tmp/ref") to 1e-5" ||
  bad "--backend ref: step 1's loss $(loss "$tmp/refbe"), the CPU's $(loss "$tmp/ref")"
[ -n "$(loss "$tmp/noshare")" ] && [ "$(loss "$tmp/noshare")" = "$(loss "$tmp/ref")" ] &&
  ok "--no-share-prompt: step 1's loss is the tree batch's" || bad "--no-share-prompt: $(loss "$tmp/noshare")"

# Sparse-MeZO, LOZO, FZOO and HiZOO over the prefix's [N, kv_dim] rows: resume and export
# replay them; FZOO and HiZOO under their MPI layouts
adapter_estimators prefix

want=$(tail -1 "$tmp/ref/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
got=$("$bin" eval "$base_model" --adapter "$tmp/peft" --data "$tmp/test.tsv" --json --threads 1 2>/dev/null |
      grep -o '"accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "eval --adapter: the run's test accuracy ($got)" ||
  bad "eval --adapter gave '$got', the run '$want'"
got=$("$bin" eval "$tmp/ref/checkpoint-8" --json --threads 1 2>/dev/null | grep -o '"accuracy": [0-9.e-]*' |
      awk '{printf "%.6f", $2}')
[ "$got" = "$want" ] && ok "eval RUN/checkpoint-8: the prefix on the run's base ($got)" || bad "checkpoint eval: '$got'"
# the exact scores: the exported prefix's == the checkpoint's, and not the base's
"$bin" eval "$base_model" --adapter "$tmp/peft" --data "$tmp/test.tsv" --predictions "$tmp/p-adapter.tsv" --threads 1 \
  > /dev/null 2>&1 && "$bin" eval "$tmp/ref/checkpoint-8" --predictions "$tmp/p-ckpt.tsv" --threads 2 > /dev/null 2>&1 &&
  "$bin" eval "$base_model" --data "$tmp/test.tsv" --predictions "$tmp/p-base.tsv" --threads 1 > /dev/null 2>&1 &&
  cmp -s "$tmp/p-adapter.tsv" "$tmp/p-ckpt.tsv" && ! cmp -s "$tmp/p-adapter.tsv" "$tmp/p-base.tsv" &&
  ok "eval's exact scores: --adapter == the checkpoint's, != the base's" || bad "eval's scores"
"$bin" generate "$base_model" --adapter "$tmp/peft" -n 8 --temperature 0 --threads 1 > "$tmp/gen" 2>&1 &&
  ok "generate --adapter runs" || bad "generate --adapter: $(tail -2 "$tmp/gen")"
run --threads 1 --steps 4 --adapter "$tmp/peft" --out "$tmp/cont" || bad "train --adapter failed: $(tail -2 "$tmp/log")"
got=$(head -1 "$tmp/cont/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ "$got" = "$want" ] && "$bin" export --run "$tmp/cont" -o "$tmp/cont-x" > /dev/null 2>&1 &&
  cmp -s "$tmp/cont-x/adapter_model.safetensors" "$(adapter "$tmp/cont" 4)" &&
  ok "train --adapter: starts from the exported prefix, export replays onto it" || bad "train --adapter: '$got'"

gguf_adapter_runs prefix || bad "the GGUF prefix runs failed: $(tail -2 "$tmp/q.txt")"
cmp -s "$(adapter "$tmp/gguf-q" 2)" "$(adapter "$tmp/gguf-deq" 2)" && cmp -s "$tmp/gguf-q/seeds.log" "$tmp/gguf-deq/seeds.log" &&
  ok "SmolLM2 Q4_1 --keep-quantized: the prefix and log of the base dequantized at load" || bad "--keep-quantized differs"
cmp -s "$(adapter "$tmp/gguf-q" 2)" "$(adapter "$tmp/gguf-qs" 2)" && cmp -s "$tmp/gguf-q/seeds.log" "$tmp/gguf-qs/seeds.log" &&
  ok "--keep-quantized with the prefix in a disk store: the same bits" || bad "--keep-quantized --store disk differs"

cp -r "$tmp/cont-x" "$tmp/tokens_many" &&
  sed -i -E 's/"num_virtual_tokens":[[:space:]]*[0-9]+/"num_virtual_tokens": 100000/' "$tmp/tokens_many/adapter_config.json"
refuse "an adapter_config.json with num_virtual_tokens 100000, naming the file's field" \
  "tokens_many/adapter_config.json: num_virtual_tokens must be an integer in 1..4096" "$bin" eval "$base_model" --adapter "$tmp/tokens_many" --limit 2
cp -r "$tmp/cont-x" "$tmp/tokens_twice" &&
  sed -i -E 's/"num_virtual_tokens":/"num_virtual_tokens": 2, "num_virtual_tokens":/' "$tmp/tokens_twice/adapter_config.json"
refuse "an adapter_config.json giving num_virtual_tokens twice, naming the file and the key" \
  "tokens_twice/adapter_config.json: key 'num_virtual_tokens' is given twice" "$bin" eval "$base_model" --adapter "$tmp/tokens_twice" --limit 2
refuse "--prefix-tokens 0" "prefix-tokens 0" "$bin" train "${common[@]}" --prefix-tokens 0 --out "$tmp/x1"
refuse "--lora-rank under --peft prefix" "give --peft lora" "$bin" train "${common[@]}" --lora-rank 4 --out "$tmp/x3"
refuse "--prefix-tokens without --peft" "give --peft prefix" "$bin" train --model "$base_model" --prefix-tokens 4 --out "$tmp/x4"
refuse "--merge of a prefix" "no weights to merge" "$bin" export --run "$tmp/ref" --merge -o "$tmp/x5"
refuse "a resume with other --prefix-tokens" "prefix-tokens" "$bin" train --resume --prefix-tokens 5 --out "$tmp/ref"
# an adapter of the other kind is named as such
"$bin" train --model "$base_model" --peft lora --steps 1 --eval-every 0 --checkpoint-every 1 --train-examples 8 \
  --dev-examples 0 --batch 4 --test "$tmp/test.tsv" --threads 1 --out "$tmp/lora1" > /dev/null 2>&1
refuse "a LoRA folder as a prefix run's --adapter" "a LoRA adapter, but the run trains a prefix (--peft prefix)" \
  "$bin" train "${common[@]}" --adapter "$tmp/lora1/checkpoint-1" --out "$tmp/x7"
refuse "a prefix folder as a LoRA run's --adapter" "a prefix adapter, but the run trains LoRA (--peft lora)" \
  "$bin" train --model "$base_model" --peft lora --steps 1 --adapter "$tmp/ref/checkpoint-8" --out "$tmp/x8"
cp -r "$tmp/ref" "$tmp/aslora" && sed -i 's/"peft":[[:space:]]*"prefix"/"peft": "lora"/' "$tmp/aslora/run.json"
refuse "a prefix log replayed as a LoRA run's" "another layout" "$bin" export --run "$tmp/aslora" -o "$tmp/x6"
[ ! -e "$tmp/x1/run.json" ] && [ ! -e "$tmp/x3/run.json" ] && ok "a refused start writes no run.json" || bad "a refused start wrote"
adapter_one_layer prefix

finish
