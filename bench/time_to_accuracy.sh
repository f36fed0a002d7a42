#!/usr/bin/env bash
# Time to accuracy, side by side (issue 30): distzo's ZO estimators against first-order
# fine-tuning (bench/first_order_sst2.py: PyTorch AdamW, full and LoRA), SmolLM2-135M-Instruct
# on SST-2 in MeZO's setup (1,000 training examples, data seed 42, batch 16, "{text} It was",
# " terrible"/" great", accuracy on GLUE dev), over an lr grid x seeds; then
# bench/time_to_accuracy.py prints the markdown tables (bench/README.md, "Time to accuracy
# (issue 30)").
#
# usage: [VAR=value ...] bench/time_to_accuracy.sh [extra distzo train flags]
# Sizes (the defaults are the full measurement: many hours on 2 cores; a smoke run sets them
# small, see bench/README.md):
#   STEPS=2000 EVAL=100          ZO steps and steps between GLUE-dev evaluations; one
#                                estimator's own: FZOO_STEPS=, FZOO_EVAL= (any ESTIMATOR_STEPS),
#                                e.g. FZOO to a third of MeZO's forwards (N + 1 a step)
#   FO_STEPS=300 FO_EVAL=10      first-order steps and steps between evaluations
#   SEEDS="0 1 2"                ZO: --seed (the perturbations); LoRA: torch's seed (A's init).
#                                Full fine-tuning has no randomness (same data order, no
#                                dropout): it runs the first seed only
#   ESTIMATORS="mezo fzoo hizoo" skipped, with a line saying so, when distzo train --help does not list them
#   MEZO_LRS="2e-5 4e-5 8e-5" FZOO_LRS="1e-6 3e-6" HIZOO_LRS=... (default: MEZO_LRS; any
#                                ESTIMATOR_LRS). FZOO's own default: its normalized step moves a
#                                weight by about lr / eps whatever the gradient, so MeZO's lrs
#                                diverge; 3e-6 learns on SmolLM2 (bench/README.md, lr sweep)
#   MEZO_FLAGS= FZOO_FLAGS= HIZOO_FLAGS=   extra train flags of one estimator
#   FO_MODES="full lora" (empty: no first-order runs) FO_FULL_LRS="1e-5 3e-5 1e-4" FO_LORA_LRS="3e-4 1e-3 3e-3"
#   TEMPLATE="{text} It was" LABEL_WORDS=terrible,great   the prompt of both sides (MeZO's by
#                                default); bench/README.md, "A prompt for an instruct model",
#                                uses TEMPLATE=$'<|im_start|>user\nReview: {text}\nSentiment:' LABEL_WORDS=negative,positive
#   SPECIAL_TOKENS=1             special tokens in TEMPLATE are their ids on both sides (distzo's
#                                --special-tokens, the bench scripts' --special-tokens); default: text
#   TEST_LIMIT=0                 >0: only the first N GLUE dev rows (smoke runs)
#   THREADS=2 JOBS=1 NICE=10     threads per run, runs at a time, their nice level
#   OUT=/tmp/time_to_accuracy DISTZO=build/distzo PYTHON=/work/venv-ref/bin/python
#   ASSETS=$DISTZO_ASSETS or ../shared/assets
# A run whose metrics already hold its last evaluation is kept (rerun the script to finish a
# grid); any other run folder is started again. Peak RSS comes from /usr/bin/time (-f %M).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/time_to_accuracy}
bin=${DISTZO:-build/distzo}
py=${PYTHON:-/work/venv-ref/bin/python}
assets=${ASSETS:-${DISTZO_ASSETS:-../shared/assets}}
steps=${STEPS:-2000} eval=${EVAL:-100} fo_steps=${FO_STEPS:-300} fo_eval=${FO_EVAL:-10}
seeds=${SEEDS:-0 1 2} threads=${THREADS:-2} jobs=${JOBS:-1} nice_level=${NICE:-10}
template=${TEMPLATE:-"{text} It was"} label_words=${LABEL_WORDS:-terrible,great}
special=(); [ "${SPECIAL_TOKENS:-0}" = 1 ] && special=(--special-tokens)
model=$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || { echo "time_to_accuracy.sh: $model not found (set ASSETS)" >&2; exit 1; }
[ -x "$bin" ] || { echo "time_to_accuracy.sh: $bin is not an executable distzo (set DISTZO)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "time_to_accuracy.sh: /usr/bin/time is needed for peak RSS" >&2; exit 1; }
mkdir -p "$out"

test_file=$assets/sst2/dev.tsv
if [ "${TEST_LIMIT:-0}" -gt 0 ]; then # the same first rows for both sides
  test_file=$out/dev-first${TEST_LIMIT}.tsv
  head -n $((TEST_LIMIT + 1)) "$assets/sst2/dev.tsv" > "$test_file"
fi

finished() { # run folder, steps: its metrics.jsonl has the evaluation after the last step
  [ -f "$1/metrics.jsonl" ] && grep -q "\"step\": $2,.*\"test_accuracy\"" "$1/metrics.jsonl"
}

zo_run() { # estimator lr seed steps eval [extra flags]
  local dir="$out/zo-$1-lr$2-s$3"
  finished "$dir" "$4" && return 0
  rm -rf "$dir"
  /usr/bin/time -o "$dir.time" -f "%M %e" nice -n "$nice_level" "$bin" train --model "$model" --task sst2 \
    --data "$assets/sst2/train.tsv" --test "$test_file" --template "$template" --label-words "$label_words" "${special[@]}" \
    --train-examples 1000 --dev-examples 0 --data-seed 42 --batch 16 --eps 1e-3 --schedule constant \
    --estimator "$1" --lr "$2" --seed "$3" --steps "$4" --eval-every "$5" --checkpoint-every 0 \
    --threads "$threads" --out "$dir" "${@:6}" > "$dir.log" 2>&1 || echo "zo-$1-lr$2-s$3 failed: $dir.log" >&2
}

fo_run() { # mode lr seed
  local dir="$out/fo-$1-lr$2-s$3"
  finished "$dir" "$fo_steps" && return 0
  rm -rf "$dir"
  /usr/bin/time -o "$dir.time" -f "%M %e" nice -n "$nice_level" "$py" "$here/first_order_sst2.py" \
    --gguf "$model" --tokenizer "$assets/smollm2-135m/hf-tokenizer" --data "$assets/sst2/train.tsv" \
    --test "$test_file" --template "$template" --label-words "$label_words" "${special[@]}" --train-examples 1000 \
    --data-seed 42 --batch 16 --mode "$1" --lr "$2" --seed "$3" --steps "$fo_steps" --eval-every "$fo_eval" \
    --threads "$threads" --out "$dir" > "$dir.log" 2>&1 || echo "fo-$1-lr$2-s$3 failed: $dir.log" >&2
}

n=0
launch() { # a run in the background, JOBS at a time
  "$@" &
  n=$((n + 1))
  [ $((n % jobs)) -eq 0 ] && wait
}

listed=$("$bin" train --help 2>&1 | grep -e '--estimator ' || true)
for e in ${ESTIMATORS:-mezo fzoo hizoo}; do
  if ! printf '%s\n' "$listed" | grep -qw -- "$e"; then
    echo "time_to_accuracy.sh: $bin train --help lists no estimator $e: skipped" | tee -a "$out/skipped.txt" >&2
    continue
  fi
  up=$(printf '%s' "$e" | tr '[:lower:]' '[:upper:]')
  lrs_var=${up}_LRS flags_var=${up}_FLAGS steps_var=${up}_STEPS eval_var=${up}_EVAL
  default_lrs=${MEZO_LRS:-2e-5 4e-5 8e-5}
  [ "$e" = fzoo ] && default_lrs="1e-6 3e-6"
  for lr in ${!lrs_var:-$default_lrs}; do
    for s in $seeds; do
      # shellcheck disable=SC2086 # the flags are words
      launch zo_run "$e" "$lr" "$s" "${!steps_var:-$steps}" "${!eval_var:-$eval}" ${!flags_var:-} "$@"
    done
  done
done
for m in ${FO_MODES-full lora}; do
  if [ "$m" = full ]; then lrs=${FO_FULL_LRS:-1e-5 3e-5 1e-4}; else lrs=${FO_LORA_LRS:-3e-4 1e-3 3e-3}; fi
  for lr in $lrs; do
    for s in $seeds; do
      launch fo_run "$m" "$lr" "$s"
      [ "$m" = full ] && break
    done
  done
done
wait
python3 "$here/time_to_accuracy.py" "$out"
