#!/usr/bin/env bash
# `distzo plot`: PNGs from a hand-written metrics.jsonl, clear errors for a missing file,
# no data, and no gnuplot. Usage: plot.sh DISTZO. Exits 77 (skipped) without gnuplot.
set -u
distzo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# no gnuplot on PATH: a clear error, whatever this machine has
mkdir -p "$tmp/run"
printf '{"step": 1, "loss": 0.7, "g": 0.1, "lr": 1e-06, "seconds": 0.1}\n' > "$tmp/run/metrics.jsonl"
out=$(PATH=/nonexistent "$distzo" plot "$tmp/run" 2>&1) && fail "ran without gnuplot"
grep -q "gnuplot not found" <<< "$out" || fail "no-gnuplot message: $out"
command -v gnuplot > /dev/null || { echo "gnuplot not installed: skipping the drawing checks"; exit 77; }

# a run with losses (one null) and evaluations
for s in $(seq 1 300); do
  loss=$(awk -v s="$s" 'BEGIN { printf "%.4f", 0.4 + 0.3 * exp(-s / 100) + 0.05 * sin(s) }')
  [ "$s" = 7 ] && loss=null
  if [ $((s % 50)) = 0 ]; then
    acc=$(awk -v s="$s" 'BEGIN { printf "%.3f", 0.6 + s / 1000 }')
    printf '{"step": %d, "loss": %s, "g": 0.5, "lr": 1e-06, "seconds": %d.000, "dev_accuracy": %s, "test_accuracy": 0.5, "best_dev_accuracy": %s}\n' "$s" "$loss" "$s" "$acc" "$acc"
  else
    printf '{"step": %d, "loss": %s, "g": -0.5, "lr": 1e-06, "seconds": %d.000}\n' "$s" "$loss" "$s"
  fi
done > "$tmp/run/metrics.jsonl"
"$distzo" plot "$tmp/run" -o "$tmp/plots" || fail "plot failed"
for f in loss.png accuracy.png; do
  [ "$(head -c 8 "$tmp/plots/$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$f is not a PNG"
done

# without -o the plots go beside the run, and the run folder is left as it was
before=$(ls -lA "$tmp/run"; sha256sum "$tmp/run/metrics.jsonl")
"$distzo" plot "$tmp/run/" > /dev/null || fail "plot without -o failed"
[ -s "$tmp/run-plots/loss.png" ] && [ -s "$tmp/run-plots/accuracy.png" ] || fail "no plots in run-plots/"
[ "$before" = "$(ls -lA "$tmp/run"; sha256sum "$tmp/run/metrics.jsonl")" ] || fail "plot changed the run folder"
# from inside the run: "plot ." goes beside it too (it wrote RUN/.-plots)
rm -rf "$tmp/run-plots"
(cd "$tmp/run" && "$distzo" plot . > /dev/null) || fail "plot . failed"
[ -s "$tmp/run-plots/loss.png" ] || fail "plot . did not write beside the run"
[ "$before" = "$(ls -lA "$tmp/run"; sha256sum "$tmp/run/metrics.jsonl")" ] || fail "plot . changed the run folder"

# a run with no dev set (federated, --dev-examples 0) records test accuracy alone: drawn (it
# said "no dev_accuracy" and drew nothing)
mkdir -p "$tmp/fed"
for s in 0 1 2; do
  printf '{"step": %d, "loss": 0.6, "g": 0.1, "lr": 1e-06, "seconds": 0.1, "test_accuracy": 0.%d}\n' $s $((5 + s))
done > "$tmp/fed/metrics.jsonl"
out=$("$distzo" plot "$tmp/fed" -o "$tmp/fed-plots") || fail "plot of test accuracy alone failed"
[ -s "$tmp/fed-plots/accuracy.png" ] || fail "test accuracy alone: no accuracy.png ($out)"

# errors name the file
out=$("$distzo" plot "$tmp/nothere" 2>&1) && fail "missing run folder accepted"
grep -q "nothere/metrics.jsonl" <<< "$out" || fail "missing-file message: $out"
: > "$tmp/run/metrics.jsonl"
out=$("$distzo" plot "$tmp/run" 2>&1) && fail "empty metrics accepted"
grep -q "no data to plot" <<< "$out" || fail "no-data message: $out"
printf '{"step": 1}\n[oops\n{"step": 2}\n' > "$tmp/run/metrics.jsonl"
out=$("$distzo" plot "$tmp/run" 2>&1) && fail "malformed metrics accepted"
grep -q "metrics.jsonl:2" <<< "$out" || fail "malformed-line message: $out"
echo "plot: OK"
