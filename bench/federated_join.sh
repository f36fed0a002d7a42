#!/usr/bin/env bash
# What a machine joining a federated run late costs (docs/FEDERATED.md "Joining late"), plain
# seed log against a K-seed pool: a run is grown to N rounds (one filler worker, q = 4 slots
# of batch 1), then the coordinator is resumed for one more round and a fresh worker joins:
# its wall and CPU time (start, model load, catch-up, that round) and the bytes it received. A plain
# worker downloads and replays the N records (12 + 4q bytes each); a pool worker downloads
# the K scalars (20 + 4K bytes) and adds the terms of the seeds in use (seed_pool.h).
# MODEL=PATH: another base model than stories260K (rounds and catch-up then take seconds: the
# deadlines are long).
# usage: [MODEL=M] bench/federated_join.sh DISTZO ASSETS [LENGTHS="100 400 1600 3200"] [POOL_K=4096]
set -u
bin=$1 assets=$2 lengths=${3:-100 400 1600 3200} pool_k=${4:-4096}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
echo "bench-federated-token-0123456789" > "$tmp/token"
{ head -1 "$assets/sst2/train.tsv"; sed -n "2,201p" "$assets/sst2/train.tsv"; } > "$tmp/shard.tsv"
common=(--token-file "$tmp/token" --listen 127.0.0.1:0 --spsa-samples 4 --samples-per-worker 4 --batch 1
        --train-examples 64 --lr 1e-4 --linger 60 --round-timeout 600 --worker-timeout 600 --threads 1
        ${MODEL:+--model "$MODEL"})
serve_until() { # serve_until RUN ROUNDS [serve options]: a coordinator for RUN up to ROUNDS (pid in serve_pid)
  local run=$1 n=$2
  shift 2
  local resume=()
  [ -f "$run/run.json" ] && resume=(--resume)
  "$bin" serve --out "$run" "${common[@]}" "${resume[@]}" --steps "$n" "$@" > "$tmp/serve.txt" 2>&1 &
  serve_pid=$!
  until grep -q listening "$tmp/serve.txt" 2> /dev/null; do sleep 0.05; done
}
for mode in plain pool; do
  opts=()
  [ $mode = pool ] && opts=(--seed-pool "$pool_k")
  run="$tmp/run-$mode"
  for n in $lengths; do
    serve_until "$run" "$n" "${opts[@]}"
    "$bin" join "$(cat "$run/coordinator.url")" --data "$tmp/shard.tsv" --token-file "$tmp/token" --threads 1 \
      > /dev/null 2>&1
    wait $serve_pid
    serve_until "$run" $((n + 1)) "${opts[@]}"
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$tmp/cpu.txt" "$bin" join "$(cat "$run/coordinator.url")" --data "$tmp/shard.tsv" \
      --token-file "$tmp/token" --threads 1 > "$tmp/late.txt" 2>&1
    t1=$(date +%s.%N)
    wait $serve_pid
    got=$(grep -o '[0-9]* received' "$tmp/late.txt" | grep -o '[0-9]*')
    printf '%s: log of %d records: the late worker took %.2f s (%.2f s of CPU), received %s bytes\n' "$mode" "$n" \
      "$(echo "$t1 - $t0" | bc)" "$(tail -1 "$tmp/cpu.txt" | awk '{print $1 + $2}')" "$got"
  done
done
