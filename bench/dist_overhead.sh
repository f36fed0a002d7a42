#!/usr/bin/env bash
# DistZO2 overhead: the same training steps as 1 process x 2 threads, 2 ranks x 1 thread
# data-parallel (--dp 2) and 2 ranks x 1 thread perturbation-parallel (--pertp 2), run in
# rounds (A B C, A B C, ...) so the machine's noise spreads over all three. Prints per-step
# latency (median of the per-step times in metrics.jsonl, first steps skipped), examples/s,
# the ratio to the single process and the bytes each rank sent per step.
#
# On a 2-vCPU machine whose two threads share one core's FMA units this measures the
# overhead of the distributed layouts, not a speed-up (see docs/DISTRIBUTED.md).
# usage: bench/dist_overhead.sh [DISTZO] [MODEL] [STEPS] [ROUNDS]
#   MODEL default: a random OPT-125m made with `distzo init` in /tmp/opt125m
set -euo pipefail
bin=${1:-build/distzo} model=${2:-/tmp/opt125m} steps=${3:-12} rounds=${4:-3}
assets=${DISTZO_ASSETS:-$(cd "$(dirname "$0")/../.." && pwd)/shared/assets}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
[ -f "$model/config.json" ] || "$bin" init --preset opt-125m -o "$model" > /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -2 "$assets/sst2/dev.tsv" > "$tmp/test.tsv"
common=(--model "$model" --steps "$steps" --batch 16 --eval-every 0 --checkpoint-every 0 --train-examples 256
        --dev-examples 0 --test "$tmp/test.tsv" --lr 1e-6)
declare -A cmd=(
  [single]="$bin train ${common[*]} --threads 2"
  [dp2]="mpirun --oversubscribe -np 2 $bin train ${common[*]} --threads 1 --dp 2"
  [pertp2]="mpirun --oversubscribe -np 2 $bin train ${common[*]} --threads 1 --pertp 2"
)
median_step() { # metrics.jsonl -> median seconds between consecutive steps, skipping 2 warm-up steps
  grep -o '"seconds": [0-9.]*' "$1" | awk '{print $2}' | awk 'NR>1{print $1-p} {p=$1}' | tail -n +3 | sort -g |
    awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
for r in $(seq "$rounds"); do
  for k in single dp2 pertp2; do

    ${cmd[$k]} --out "$tmp/$k-$r" > "$tmp/$k-$r.txt" 2>&1
    echo "$k round $r: $(median_step "$tmp/$k-$r/metrics.jsonl") s/step" >&2
  done
done
best() { for r in $(seq "$rounds"); do median_step "$tmp/$1-$r/metrics.jsonl"; done | sort -g | head -1; }
s0=$(best single)
printf "%-8s %-14s %10s %12s %10s %14s\n" layout ranks×threads "s/step" "examples/s" "vs single" "bytes/step/rank"
for k in single dp2 pertp2; do
  s=$(best $k)
  bytes=$(grep -o "exchanged [0-9]* bytes per step" "$tmp/$k-1.txt" | awk "{print \$2}" | head -1 || true)
  rt=$([ $k = single ] && echo "1×2" || echo "2×1")
  awk -v k=$k -v rt=$rt -v s=$s -v s0=$s0 -v b=${bytes:-0} \
    'BEGIN{printf "%-8s %-14s %10.3f %12.2f %9.1f%% %14.0f\n", k, rt, s, 16/s, 100*s0/s, b}'
done
