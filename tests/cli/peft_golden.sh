#!/usr/bin/env bash
# The distzo-made adapters whose logits under PEFT are committed (tests/data/peft/distzo_*,
# tools/make_peft_golden.py) are what distzo makes today: the recipe of peft_recipes.sh
# (train --peft lora|prefix on stories260K, then export) gives adapter_model.safetensors
# bitwise and the same adapter_config.json (but the base's path, which is this machine's).
# So the golden comparison of tests/test_peft_golden.c covers today's exports. A changed
# adapter is told apart: the LoRA run with another seed exports other bytes. Also eval,
# generate and train --adapter run with the folders PEFT made (tests/data/peft/peft_*).
# usage: peft_golden.sh DISTZO ASSETS DATA (DATA: tests/data)
set -u
bin=$1 assets=$2 data=$3
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peft_recipes.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv

config() { grep -v '"base_model_name_or_path"' "$1/adapter_config.json"; }
for case in distzo_lora distzo_prefix; do
  made=$(peft_golden_adapter "$case" "$bin" "$assets" "$tmp") || { bad "$case: the recipe failed"; continue; }
  cmp -s "$made/adapter_model.safetensors" "$data/peft/$case/adapter_model.safetensors" &&
    ok "$case: the export is the committed adapter_model.safetensors, bitwise" ||
    bad "$case: the export differs from tests/data/peft/$case (rerun tools/make_peft_golden.py --distzo)"
  diff <(config "$made") <(config "$data/peft/$case") > /dev/null &&
    ok "$case: the same adapter_config.json" || bad "$case: adapter_config.json: $(diff <(config "$made") <(config "$data/peft/$case"))"
done
# the check can fail: the LoRA recipe with another run seed
sed 's/--seed 29/--seed 30/' "$(dirname "$0")/peft_recipes.sh" > "$tmp/other_recipe.sh" && . "$tmp/other_recipe.sh"
made=$(peft_golden_adapter distzo_lora "$bin" "$assets" "$tmp/other") &&
  ! cmp -s "$made/adapter_model.safetensors" "$data/peft/distzo_lora/adapter_model.safetensors" &&
  ok "another seed exports another adapter" || bad "another seed: the same bytes, or the run failed"
# the command line's --adapter with PEFT's own folders (their logits: test_peft_golden):
# eval's exact scores move away from the base's, generate runs
base_model="$assets/stories260K/stories260K.bin"
"$bin" eval "$base_model" --data "$tmp/test.tsv" --predictions "$tmp/p-base.tsv" --threads 1 > /dev/null 2>&1 ||
  bad "eval of the base failed"
for case in peft_lora peft_prefix peft_prefix_proj; do
  "$bin" eval "$base_model" --adapter "$data/peft/$case" --data "$tmp/test.tsv" --predictions "$tmp/p-$case.tsv" \
    --threads 1 > "$tmp/eval.log" 2>&1 && [ -s "$tmp/p-$case.tsv" ] && ! cmp -s "$tmp/p-$case.tsv" "$tmp/p-base.tsv" &&
    ok "eval --adapter $case (made by PEFT): scores, not the base's" || bad "eval --adapter $case: $(tail -2 "$tmp/eval.log")"
done
# train --adapter starts from PEFT's folders: step 0 scores the adapter as eval does, and
# export replays the log onto it (a prefix saved with prefix_projection true included)
acc() { grep -o '"'"$1"'": [0-9.e-]*' | head -1 | awk '{printf "%.6f", $2}'; }
for spec in "5e-3 1e-2 peft_lora --peft lora --lora-rank 4 --lora-alpha 6 --lora-targets q,k,v,o,gate,up,down" \
            "1e-1 1e-1 peft_prefix_proj --peft prefix --prefix-tokens 3"; do
  read -r lr eps spec <<< "$spec" # an lr and eps that move the accuracy (the disk store's check below)
  read -r -a a <<< "$spec"
  "$bin" train --model "$base_model" "${a[@]:1}" --adapter "$data/peft/${a[0]}" --data "$assets/sst2/train.tsv" \
    --test "$tmp/test.tsv" --steps 2 --batch 4 --train-examples 8 --dev-examples 4 --threads 1 --out "$tmp/t-${a[0]}" \
    > "$tmp/train.log" 2>&1 && "$bin" export --run "$tmp/t-${a[0]}" -o "$tmp/x-${a[0]}" > /dev/null 2>&1 ||
    { bad "train --adapter ${a[0]}: $(tail -2 "$tmp/train.log")"; continue; }
  want=$("$bin" eval "$base_model" --adapter "$data/peft/${a[0]}" --data "$tmp/test.tsv" --json --threads 1 2>/dev/null |
         acc accuracy)
  got=$(head -1 "$tmp/t-${a[0]}/metrics.jsonl" | acc test_accuracy)
  [ -n "$want" ] && [ "$got" = "$want" ] && cmp -s "$tmp/x-${a[0]}/adapter_model.safetensors" \
    "$tmp/t-${a[0]}/checkpoint-2/adapter_model.safetensors" &&
    ok "train --adapter ${a[0]}: step 0 scores PEFT's adapter ($got), export replays onto it" ||
    bad "train --adapter ${a[0]}: step 0 '$got', eval --adapter '$want', or export differs"
  # the adapter's masters in a disk store: every evaluation scores them as they train (not
  # the base alone, nor the adapter as loaded), the metrics those of --store ram; the lr moves
  # the test accuracy between evaluations, so a stale adapter shows
  for st in ram "disk:$tmp/s-${a[0]}.st"; do
    "$bin" train --model "$base_model" "${a[@]:1}" --adapter "$data/peft/${a[0]}" --data "$assets/sst2/train.tsv" \
      --test "$tmp/test.tsv" --steps 6 --eval-every 2 --batch 4 --train-examples 16 --dev-examples 8 --lr "$lr" \
      --eps "$eps" --threads 1 --store "$st" --out "$tmp/${st%%:*}-${a[0]}" > "$tmp/train.log" 2>&1 ||
      bad "train --adapter ${a[0]} --store $st: $(tail -2 "$tmp/train.log")"
  done
  moved=$(grep -o '"test_accuracy": [0-9.]*' "$tmp/ram-${a[0]}/metrics.jsonl" | sort -u | wc -l)
  [ "$moved" -gt 1 ] && [ "$(metrics "$tmp/disk-${a[0]}")" = "$(metrics "$tmp/ram-${a[0]}")" ] &&
    ok "train --adapter ${a[0]} --store disk: the evaluations score the adapter as it trains, as --store ram" ||
    bad "train --adapter ${a[0]} --store disk ($moved accuracies): $(diff <(metrics "$tmp/disk-${a[0]}") <(metrics "$tmp/ram-${a[0]}") | head -3)"
done
# a relative --adapter is kept absolute in run.json (as --model is): export and a resume
# from another directory find it
(cd "$data/peft" && "$bin" train --model "$base_model" --peft lora --lora-rank 4 --lora-alpha 6 \
  --lora-targets q,k,v,o,gate,up,down --adapter peft_lora --data "$assets/sst2/train.tsv" --test "$tmp/test.tsv" \
  --steps 2 --batch 4 --train-examples 8 --dev-examples 4 --threads 1 --out "$tmp/rel" > "$tmp/rel.log" 2>&1) &&
  (cd / && "$bin" export --run "$tmp/rel" -o "$tmp/rel-x" > "$tmp/rel.log" 2>&1 &&
   "$bin" train --resume --steps 3 --out "$tmp/rel" >> "$tmp/rel.log" 2>&1) &&
  ok "a relative --adapter: export and resume from another directory" || bad "a relative --adapter: $(tail -2 "$tmp/rel.log")"
# the same command again with --resume (a relative --adapter names the folder run.json holds
# absolute), and a run.json of an older distzo with a relative lora_init resumed and branched
(cd "$data/peft" && "$bin" train --model "$base_model" --peft lora --lora-rank 4 --lora-alpha 6 \
  --lora-targets q,k,v,o,gate,up,down --adapter peft_lora --steps 4 --resume --out "$tmp/rel" > "$tmp/rel.log" 2>&1 &&
  sed -i -E 's|("lora_init":[[:space:]]*)"[^"]*"|\1"peft_lora"|' "$tmp/rel/run.json" &&
  "$bin" train --resume --steps 5 --out "$tmp/rel" >> "$tmp/rel.log" 2>&1 &&
  "$bin" train --resume-from "$tmp/rel:3" --steps 5 --out "$tmp/rel-branch" >> "$tmp/rel.log" 2>&1) &&
  grep -q '"lora_init":[[:space:]]*"peft_lora"' "$tmp/rel-branch/run.json" &&
  ok "a relative --adapter given again on --resume; an older relative lora_init resumed and branched" ||
  bad "relative --adapter on resume / older run.json: $(tail -2 "$tmp/rel.log")"
"$bin" generate "$base_model" --adapter "$data/peft/peft_prefix" -n 8 --temperature 0 --threads 1 > "$tmp/gen" 2>&1 &&
  ok "generate --adapter with PEFT's prefix runs" || bad "generate --adapter: $(tail -2 "$tmp/gen")"
finish
