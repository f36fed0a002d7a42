#!/usr/bin/env bash
# Time to accuracy of the estimators (--estimator mezo|sparse|lozo) on stories260K SST-2:
# one run per (estimator, lr, seed), two at a time (one thread each), then
# estimators_summary.py prints forward passes to MeZO's final dev accuracy and accuracy at
# equal forward budget. Every run has the same data (data seed 42) and evaluates the same
# 200 selection examples every EVAL steps.
# usage: OUT=/tmp/est ESTIMATORS="mezo sparse lozo" LRS="1e-4 3e-4" SEEDS="0 1 2" STEPS=400 \
#        bench/estimators_sst2.sh DISTZO [extra train flags]
set -u
bin=$1
shift
out=${OUT:-/tmp/estimators_sst2} steps=${STEPS:-400} eval=${EVAL:-50} jobs=${JOBS:-2}
mkdir -p "$out"
one() { # estimator lr seed
  local dir="$out/$1-lr$2-s$3"
  [ -f "$dir/checkpoint-$steps/model.safetensors" ] && return 0
  rm -rf "$dir"
  nice -n 19 "$bin" train --estimator "$1" --lr "$2" --seed "$3" --steps "$steps" --eval-every "$eval" \
    --checkpoint-every "$steps" --train-examples 1000 --dev-examples 200 --batch 16 --threads 1 \
    --out "$dir" "${@:4}" > "$dir.log" 2>&1
}
n=0
for e in ${ESTIMATORS:-mezo sparse lozo}; do
  for lr in ${LRS:-3e-4}; do
    for s in ${SEEDS:-0 1 2}; do
      one "$e" "$lr" "$s" "$@" &
      n=$((n + 1))
      [ $((n % jobs)) -eq 0 ] && wait
    done
  done
done
wait
python3 "$(dirname "$0")/estimators_summary.py" "$out"
