#!/usr/bin/env bash
# The one-byte code's cost to federated FZOO (docs/FEDERATED.md "FZOO" has the figures):
# two federated runs of `serve --estimator fzoo`, one worker each on SST-2's training set,
# the same seeds, differing only in --g-code (f32, byte), run side by side; then
# bench/fed_fzoo_code.py: the code's error on the f32 run's coefficients, the training
# loss of both by windows of rounds, and the coordinator's test accuracy on TEST_N dev
# sentences every EVAL rounds.
# usage: bench/fed_fzoo_code.sh DISTZO ASSETS [MODEL=stories260K] [ROUNDS=300] [N=8] [LR=1e-6]
#   env: BATCH (16), EPS (1e-3), CLIP (8 / EPS), TEST_N (200), EVAL (100), KEEP (a folder to keep the runs in)
set -u
bin=$1 assets=$2 model=${3:-$2/stories260K/stories260K.bin} rounds=${4:-300} n=${5:-8} lr=${6:-1e-6}
batch=${BATCH:-16} eps=${EPS:-1e-3} test_n=${TEST_N:-200} every=${EVAL:-100}
clip=${CLIP:-$(python3 -c "print(8 / $eps)")}
tmp=${KEEP:-$(mktemp -d)}
mkdir -p "$tmp"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
echo "bench-fed-fzoo-token-0123456789" > "$tmp/token"
head -$((test_n + 1)) "$assets/sst2/dev.tsv" > "$tmp/test.tsv"
pids=()
for code in f32 byte; do
  "$bin" serve --out "$tmp/run-$code" --listen 127.0.0.1:0 --token-file "$tmp/token" --model "$model" \
    --estimator fzoo --fzoo-directions "$n" --steps "$rounds" --batch "$batch" --train-examples 1000 --lr "$lr" \
    --eps "$eps" --g-code $code --g-clip "$clip" --round-timeout 900 --worker-timeout 900 --linger 5 --threads 1 \
    --test "$tmp/test.tsv" --eval-every "$every" --checkpoint-every 0 > "$tmp/serve-$code.txt" 2>&1 &
  pids+=($!)
  until [ -s "$tmp/run-$code/coordinator.url" ]; do sleep 0.1; done
  "$bin" join "$(cat "$tmp/run-$code/coordinator.url")" --token-file "$tmp/token" --data "$assets/sst2/train.tsv" \
    --model "$model" --threads 1 --retry-for 120 > "$tmp/join-$code.txt" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}" || { echo "a run failed: $(tail -n 2 "$tmp"/serve-*.txt)"; exit 1; }
python3 "$(dirname "$0")/fed_fzoo_code.py" "$tmp/run-f32" "$tmp/run-byte" "$n" "$clip" $((rounds / 3 > 0 ? rounds / 3 : 1))
