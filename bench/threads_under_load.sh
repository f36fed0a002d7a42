#!/usr/bin/env bash
# How a build's threads behave when the cores are shared: the default job
# (`distzo train --steps 200 --eval-every 0`) alone, then beside one single-threaded busy
# process, with the user's default environment (OMP_WAIT_POLICY and GOMP_SPINCOUNT unset).
#
#   bench/threads_under_load.sh BUILD_DIR [BUILD_DIR...]
#
# Several builds (e.g. before and after a change) are interleaved run by run, so that they
# see the same machine. REPEAT=n repeats the whole round (default 1), STEPS=n changes the
# job's length (default 200). NICE=n runs the job and the busy process at nice n (e.g. -20
# as root), so that other users' processes on a shared machine disturb the figures less
# while the busy process still competes on equal terms. Prints one line per run and, per
# build, the best time alone, the best time loaded, and loaded/alone.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
REPEAT=${REPEAT:-1}
STEPS=${STEPS:-200}
NICE=${NICE:-0}
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
work=$(mktemp -d)
busy=
cleanup() {
    [ -n "$busy" ] && kill "$busy" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Seconds one default job takes with the given build.
time_job() {
    local bin=$1/distzo out=$work/run
    rm -rf "$out"
    local t0 t1
    t0=$(date +%s.%N)
    nice -n "$NICE" "$bin" train --steps "$STEPS" --eval-every 0 --out "$out" >"$work/log" 2>&1 ||
        { cat "$work/log" >&2; return 1; }
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}'
}

start_busy() {
    nice -n "$NICE" timeout 3600 sh -c 'while :; do :; done' &
    busy=$!
}

stop_busy() {
    kill "$busy" 2>/dev/null || true
    wait "$busy" 2>/dev/null || true
    busy=
}

declare -A best_alone best_loaded
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }

echo "$(date -u +%Y-%m-%dT%H:%MZ) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); nice $NICE; steps $STEPS"
for ((r = 1; r <= REPEAT; r++)); do
    for b in "$@"; do
        a=$(time_job "$b")
        start_busy
        l=$(time_job "$b")
        stop_busy
        echo "round $r  $b  alone ${a} s  loaded ${l} s"
        best_alone[$b]=$(min "${best_alone[$b]:-}" "$a")
        best_loaded[$b]=$(min "${best_loaded[$b]:-}" "$l")
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-40s %10s %10s %8s\n' build "alone s" "loaded s" ratio
for b in "$@"; do
    printf '%-40s %10s %10s %8s\n' "$b" "${best_alone[$b]}" "${best_loaded[$b]}" \
        "$(awk -v a="${best_alone[$b]}" -v l="${best_loaded[$b]}" 'BEGIN { printf "%.2f", l / a }')"
done
