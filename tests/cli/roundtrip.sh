#!/usr/bin/env bash
# Round trips: every checkpoint distzo writes loads back in distzo with no flags and gives
# what the run measured in memory; the checkpoints of HF and GGUF sources give what
# transformers computed on them (committed figures, no Python here).
# - for each source (llama2.c stories260K; SmolLM2-135M from its GGUF file; a random OPT and
#   a random SmolLM2-shaped LLaMA from `distzo init`; bf16 masters; a disk store), 2 steps
#   (tests/cli/roundtrip_recipes.sh), then on checkpoint-1/, checkpoint-2/ and best/ with no
#   flags: `eval --task lm` = the test loss the run logged after that step (metrics.jsonl),
#   `info` names the checkpoint's own tokenizer, the ids of two texts = the source's
#   tokenizer's; `export` = checkpoint-2 bitwise, and it evaluates and generates (greedy)
#   as checkpoint-2 does;
# - opt, llama, gguf: the checkpoint is bitwise the one tools/check_checkpoints_transformers.py
#   loaded, and distzo's log-probs of the prompt's tokens, the tokenizer's ids and 8 greedy
#   tokens equal transformers' (tests/data/roundtrip/CASE/);
# - classification: eval of best/ = the test accuracy the run logged at its step;
# - init: a preset with a tokenizer in the assets trains with no flags; llama-* says which to
#   pass, train refuses the folder with that advice, and --tokenizer fills it in.
# usage: roundtrip.sh DISTZO ASSETS DATA_DIR
set -u
bin=$1 assets=$2 data=$3
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/roundtrip_recipes.sh"
need_assets "$assets" stories260K/stories260K.bin stories260K/tok512.bin smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf \
  smollm2-135m/hf-tokenizer/tokenizer.json gpt2-bpe/encoder.json gpt2-bpe/vocab.bpe gpt2-bpe/dict.txt sst2/train.tsv \
  sst2/dev.tsv
w=$tmp/w
mkdir -p "$w" && roundtrip_texts > "$w/roundtrip.jsonl" && roundtrip_prompt > "$w/roundtrip_prompt.txt"
prompt=$(roundtrip_prompt)
text1=$(cat "$data/text1.txt")

# the test loss metrics.jsonl logged after step N (its row "step": N; rows count steps done)
logged_loss() { grep "^{\"step\": $2," "$1/metrics.jsonl" | sed -E 's/.*"test_loss": ([^,}]*).*/\1/'; }
# the mean NLL distzo eval prints for the prompt (eval_nll MODEL [--predictions FILE])
eval_nll() { "$bin" eval "$@" --task lm --data "$w/roundtrip_prompt.txt" --json 2> /dev/null | sed -E 's/.*"nll": ([^,]*),.*/\1/'; }
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }
# generate --json: a field's ids, space-separated
json_ids() { sed -E "s/.*\"$1\": \[([^]]*)\].*/\1/; s/,//g"; }
gen() { "$bin" generate "$@" --temperature 0 --json 2> /dev/null; }

# The source model of a case (for the tokenizer's ids before any checkpoint).
source_of() {
  case $1 in
    opt|opt-disk) echo "$w/opt-base" ;; llama) echo "$w/llama-base" ;;
    gguf) echo "$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf" ;; *) echo "$assets/stories260K/stories260K.bin" ;;
  esac
}

for case in ${ROUNDTRIP_CASES:-l2c l2c-bf16 opt opt-disk llama gguf}; do # (a subset by hand while debugging)
  t0=$SECONDS
  if ! ckpt=$(roundtrip_checkpoint "$case" "$bin" "$assets" "$w"); then bad "$case: training failed"; continue; fi
  run=$w/$case-run
  # eval of each checkpoint with no flags = the run's own evaluation after that step
  for k in 1 2; do
    got=$(eval_nll "$run/checkpoint-$k" --predictions "$tmp/lp$k.tsv") want=$(logged_loss "$run" "$k")
    [ "$k" = 2 ] && nll2=$got
    near "$got" "$want" 3e-6 && ok "$case: eval checkpoint-$k = the run's test loss after step $k ($got)" ||
      bad "$case: eval checkpoint-$k gives '$got', the run logged '$want'"
  done
  if [ -d "$run/best" ]; then
    b=$(sed -E 's/.*"best_step": ([0-9]+).*/\1/' "$run/best/trainer_state.json")
    got=$(eval_nll "$run/best") want=$(logged_loss "$run" "$b")
    near "$got" "$want" 3e-6 && cmp -s "$run/best/model.safetensors" "$run/checkpoint-$b/model.safetensors" &&
      ok "$case: best/ is step $b's weights and evaluates to its logged test loss ($got)" ||
      bad "$case: best/ (step $b) gives '$got', the run logged '$want'"
  else
    bad "$case: no best/ (the recipe's seeds give one; $(tail -1 "$w/$case-train.log"))"
  fi
  "$bin" info "$ckpt" > "$tmp/info.txt" 2>&1 && grep -q "^tokenizer  *$ckpt" "$tmp/info.txt" &&
    ok "$case: info finds the checkpoint's own tokenizer" || bad "$case: info: $(grep -i tokenizer "$tmp/info.txt")"
  # the checkpoint's tokenizer gives the source's ids
  src=$(source_of "$case")
  a=$(gen "$ckpt" --prompt "$prompt" -n 8)
  s1=$(gen "$src" --prompt "$text1" -n 1 | json_ids prompt_tokens) c1=$(gen "$ckpt" --prompt "$text1" -n 1 | json_ids prompt_tokens)
  s0=$(gen "$src" --prompt "$prompt" -n 1 | json_ids prompt_tokens) c0=$(echo "$a" | json_ids prompt_tokens)
  [ -n "$c0" ] && [ "$c0" = "$s0" ] && [ -n "$c1" ] && [ "$c1" = "$s1" ] &&
    ok "$case: the checkpoint's tokenizer gives the source's ids" || bad "$case: ids '$c0' / '$c1', the source's '$s0' / '$s1'"
  # export: the seed log replayed onto the base = checkpoint-2, and it loads alike (greedy
  # generation from another load of the same weights: the same tokens)
  if "$bin" export --run "$run" -o "$w/$case-export" > /dev/null 2>&1; then
    e=$(gen "$w/$case-export" --prompt "$prompt" -n 8 | json_ids tokens)
    cmp -s "$w/$case-export/model.safetensors" "$ckpt/model.safetensors" && [ "$(eval_nll "$w/$case-export")" = "$nll2" ] &&
      [ -n "$e" ] && [ "$e" = "$(echo "$a" | json_ids tokens)" ] &&
      ok "$case: export = checkpoint-2 bitwise; it evaluates and generates alike with no flags" ||
      bad "$case: export differs from checkpoint-2 or does not load alike ('$e')"
  else
    bad "$case: export failed"
  fi
  # transformers' figures on the same checkpoint
  if [ -f "$data/$case/figures.txt" ]; then
    fig() { sed -n "s/^$1 //p" "$data/$case/figures.txt"; }
    sha=$(sha256sum "$ckpt/model.safetensors" | cut -d' ' -f1)
    [ "$sha" = "$(fig sha256)" ] && ok "$case: checkpoint-2 is bitwise the one transformers loaded" ||
      bad "$case: checkpoint-2 differs from the one of $data/$case (rerun tools/check_checkpoints_transformers.py)"
    max=$(awk -F'\t' 'NR == FNR { if (FNR > 1) want[$2] = $3 " " $4; next }
          FNR > 1 { split(want[$2], x, " "); if (x[1] != $3) { print "token"; exit } d = $4 - x[2]; if (d < 0) d = -d;
                    if (d > m) m = d; n++ }
          END { if (n != length(want)) print "count"; else printf "%.2g\n", m }' "$data/$case/logprobs.tsv" "$tmp/lp2.tsv")
    near "${max:-x}" 0 1e-3 && ok "$case: log-probs of the prompt's tokens = transformers' (max abs difference $max)" ||
      bad "$case: log-probs differ from transformers' ($max)"
    [ "$c0" = "$(fig prompt_ids)" ] && [ "$c1" = "$(fig text1_ids)" ] && ok "$case: the tokenizer's ids = transformers'" ||
      bad "$case: ids '$c0' / '$c1', transformers '$(fig prompt_ids)' / '$(fig text1_ids)'"
    [ "$(echo "$a" | json_ids tokens)" = "$(fig greedy)" ] && ok "$case: 8 greedy tokens = transformers'" ||
      bad "$case: greedy '$(echo "$a" | json_ids tokens)', transformers '$(fig greedy)'"
  fi
  rm -rf "$run" "$w/$case-export" # the gguf case's folders are 0.5 GB each
  echo "# $case: $((SECONDS - t0)) s"
done

# classification (the default job's task): eval of best/ with the run's label words and test
# file = the test accuracy the run logged at that step (seed 4: step 2 beats step 0, so
# best/ is written)
test_set "$assets" 20
"$bin" train --model "$assets/stories260K/stories260K.bin" --data "$assets/sst2/train.tsv" --test "$tmp/test.tsv" \
  --train-examples 16 --dev-examples 16 --batch 4 --steps 2 --eval-every 1 --checkpoint-every 2 --lr 1e-3 --seed 4 \
  --out "$tmp/cls" > /dev/null 2>&1 || bad "classify: training failed"
b=$(sed -E 's/.*"best_step": ([0-9]+).*/\1/' "$tmp/cls/best/trainer_state.json" 2> /dev/null)
want=$(grep "^{\"step\": ${b:-none}," "$tmp/cls/metrics.jsonl" 2> /dev/null | sed -E 's/.*"test_accuracy": ([^,}]*).*/\1/')
got=$("$bin" eval "$tmp/cls/best" --data "$tmp/test.tsv" --json 2> /dev/null |
      sed -E 's/.*"accuracy": ([^,]*),.*/\1/')
[ -n "$b" ] && [ "$b" -gt 0 ] && near "$got" "$want" 1e-6 &&
  ok "classify: eval best/ (step $b) = the run's test accuracy there ($got)" || bad "classify: best/ step '$b': '$got', the run logged '$want'"

# init: every preset family gets its tokenizer, or says which to pass
"$bin" init --preset llama-tiny --layers 1 -o "$tmp/llama" > /dev/null 2> "$tmp/init.txt"
grep -q "no tokenizer written.*--tokenizer" "$tmp/init.txt" && ok "init --preset llama-tiny says which tokenizer to pass" ||
  bad "init llama-tiny: $(cat "$tmp/init.txt")"
"$bin" train --model "$tmp/llama" --steps 1 --out "$tmp/llama-run" > /dev/null 2> "$tmp/train.txt"
[ $? -ne 0 ] && grep -q "no tokenizer found.*--tokenizer" "$tmp/train.txt" && ok "train refuses it with that advice" ||
  bad "train of a tokenizer-less folder: $(cat "$tmp/train.txt")"
"$bin" init --preset llama-tiny --layers 1 --tokenizer "$assets/smollm2-135m/hf-tokenizer" -o "$tmp/x" > /dev/null 2> "$tmp/init.txt"
[ $? -ne 0 ] && grep -q "49152 tokens but the model's vocabulary is 32000" "$tmp/init.txt" && [ ! -e "$tmp/x" ] &&
  ok "init refuses a tokenizer larger than the vocabulary, writing nothing" || bad "init --tokenizer too large: $(cat "$tmp/init.txt")"
spm=$(dirname "$data")/tokenizer/spm_small/tokenizer.model
"$bin" init --preset llama-tiny --layers 1 --tokenizer "$spm" -o "$tmp/llama2" > /dev/null 2>&1 &&
  "$bin" train --model "$tmp/llama2" --task lm --data "$w/roundtrip.jsonl" --steps 1 --train-examples 4 --dev-examples 2 \
    --batch 2 --out "$tmp/llama2-run" > /dev/null 2>&1 && [ -f "$tmp/llama2-run/checkpoint-1/tokenizer.model" ] &&
  ok "init --tokenizer tokenizer.model: the folder trains with no flags" || bad "init --tokenizer tokenizer.model"
a=$(gen "$tmp/llama2-run/checkpoint-1" --prompt "$text1" -n 1 | json_ids prompt_tokens)
[ -n "$a" ] && [ "$a" = "$(gen "$tmp/llama2" --prompt "$text1" -n 1 | json_ids prompt_tokens)" ] &&
  ok "its checkpoint (tokenizer.model alone) generates with no flags, with the same ids" ||
  bad "a checkpoint with tokenizer.model: ids '$a'"
"$bin" init --preset opt-tiny --layers 1 -o "$tmp/opt" > /dev/null 2>&1 && [ -f "$tmp/opt/vocab.json" ] &&
  "$bin" train --model "$tmp/opt" --task lm --data "$w/roundtrip.jsonl" --steps 1 --train-examples 4 --dev-examples 2 \
    --batch 2 --out "$tmp/opt-run" > /dev/null 2>&1 && ok "init --preset opt-tiny writes vocab.json + merges.txt and trains" ||
  bad "init opt-tiny && train"
finish
