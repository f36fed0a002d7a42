#!/usr/bin/env bash
# Federated ZO on loopback, measured (docs/FEDERATED.md has the figures): a coordinator and
# W workers, each with a disjoint shard of SST-2's training set, for R rounds of W slots;
# then the same examples in one process (`distzo train`, q = W samples per step). Prints
# the round time, the bytes per round of each worker (HTTP headers included) and the test
# accuracy of each run's exported weights on SST-2's dev set. MODES: byte and f32 (the g's
# code), kseed and kseed-pro (one-byte g, a pool of POOL_K seeds, default 4096: uniform or
# importance sampling).
# usage: bench/federated.sh DISTZO ASSETS [ROUNDS=300] [WORKERS=4] [MODES="byte f32"]
set -u
bin=$1 assets=$2 rounds=${3:-300} workers=${4:-4} codes=${5:-byte f32} pool_k=${POOL_K:-4096}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
per=250 batch=16 lr=3e-5
echo "bench-federated-token-0123456789" > "$tmp/token"
{ head -1 "$assets/sst2/train.tsv"; sed -n "2,$((1 + per * workers))p" "$assets/sst2/train.tsv"; } > "$tmp/all.tsv"
for i in $(seq 1 "$workers"); do
  { head -1 "$assets/sst2/train.tsv"; sed -n "$((2 + (i - 1) * per)),$((1 + i * per))p" "$assets/sst2/train.tsv"; } > "$tmp/shard$i.tsv"
done
accuracy() { "$bin" eval "$1" --task sst2 --data "$assets/sst2/dev.tsv" 2>&1 | grep -Eo 'accuracy [0-9.]+%' | head -1; }
for code in $codes; do
  case $code in
    kseed) mode=(--g-code byte --seed-pool "$pool_k" --seed-sampling uniform) ;;
    kseed-pro) mode=(--g-code byte --seed-pool "$pool_k" --seed-sampling importance) ;;
    *) mode=(--g-code "$code") ;;
  esac
  t0=$(date +%s.%N)
  "$bin" serve --out "$tmp/run-$code" --listen 127.0.0.1:0 --token-file "$tmp/token" --steps "$rounds" \
    --spsa-samples "$workers" --min-workers "$workers" --batch $batch --train-examples $per --lr $lr "${mode[@]}" \
    --threads 1 > "$tmp/serve-$code.txt" 2>&1 &
  serve=$!
  until [ -s "$tmp/run-$code/coordinator.url" ]; do sleep 0.1; done
  url=$(cat "$tmp/run-$code/coordinator.url")
  pids=()
  for i in $(seq 1 "$workers"); do
    "$bin" join "$url" --data "$tmp/shard$i.tsv" --token-file "$tmp/token" --threads 1 > "$tmp/w$i-$code.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" $serve
  t1=$(date +%s.%N)
  e0=$(date +%s.%N)
  "$bin" export --run "$tmp/run-$code" -o "$tmp/out-$code" > /dev/null
  echo "$code: export of the $rounds records: $(echo "$(date +%s.%N) - $e0" | bc) s; the log $(( $(stat -c %s "$tmp/run-$code/seeds.log") - 104 )) bytes"
  sent=$(grep -ho 'network [0-9]* bytes sent, [0-9]* received' "$tmp"/w*-"$code".txt |
         awk '{s += $2; r += $5} END {printf "%.0f %.0f", s, r}')
  read -r s r <<< "$sent"
  rsec=$(awk -v n="$rounds" '/^round /{sum += $(NF - 1); k++} END {printf "%.3f", sum / k}' "$tmp/serve-$code.txt")
  echo "federated $code: $workers workers x $rounds rounds in $(echo "$t1 - $t0" | bc) s ($rsec s/round at the coordinator);" \
       "per worker per round $((s / workers / rounds)) bytes sent, $((r / workers / rounds)) received;" \
       "test $(accuracy "$tmp/out-$code")"
done
"$bin" train --data "$tmp/all.tsv" --test "$assets/sst2/dev.tsv" --train-examples $((per * workers)) --dev-examples 0 \
  --batch $batch --spsa-samples "$workers" --steps "$rounds" --lr $lr --eval-every 0 --checkpoint-every 0 \
  --threads 1 --out "$tmp/single" > "$tmp/single.txt" 2>&1
"$bin" export --run "$tmp/single" -o "$tmp/out-single" > /dev/null
echo "one process, the same $((per * workers)) examples, q = $workers, $rounds steps ($(grep -Eo 'in [0-9.]+ s' "$tmp/single.txt" | head -1)): test $(accuracy "$tmp/out-single")"
echo "base model: test $(accuracy "$assets/stories260K/stories260K.bin")"
