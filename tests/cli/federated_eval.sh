#!/usr/bin/env bash
# Evaluation at the federated coordinator (`serve --test FILE --eval-every N`,
# docs/FEDERATED.md): a coordinator and two workers on stories260K, SST-2 shards of their
# own, the coordinator scoring its replica on 200 GLUE dev sentences every 4 rounds, and
# SIGKILLed after round 6 and resumed. Checks, against an independent path for each
# evaluated round N: the coordinator's test accuracy in metrics.jsonl equals `distzo eval`
# of `distzo export` of the run's seed log cut to its first N records (row 0: of the base
# model); rows are numbered 1.. by rounds done, row 0 before the first round, the last round
# always evaluated, none duplicated by the resume; and the weights did move the accuracy
# (else the comparison would show nothing); the workers end with the coordinator. Every
# wait is bounded.
# usage: federated_eval.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets" sst2/dev.tsv
test_set "$assets" 200
rounds=10 q=2
serve=(serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --spsa-samples $q --batch 8
       --train-examples 64 --lr 2e-3 --label-words bad,good --test "$tmp/test.tsv" --eval-every 4
       --round-timeout 20 --worker-timeout 20 --min-workers 2 --linger 20 --threads 1)
join=(--token-file "$tmp/token" --retry-for 60 --threads 1)

"$bin" serve --out "$tmp/bad" --token-file "$tmp/token" --test "$tmp/none.tsv" --listen 127.0.0.1:0 --steps 1 \
  > "$tmp/b1.txt" 2>&1; grep -q "$tmp/none.tsv" "$tmp/b1.txt" && [ ! -e "$tmp/bad/run.json" ] &&
  ok "a missing --test file: named, no run written" || bad "missing --test: $(cat "$tmp/b1.txt")"

DISTZO_TEST_KILL=serve:6 "$bin" "${serve[@]}" --listen 127.0.0.1:0 > "$tmp/serve1.txt" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
wait_for 60 test -s "$tmp/run/coordinator.url" || bad "the coordinator did not start: $(tail -3 "$tmp/serve1.txt")"
for i in 1 2; do
  "$bin" join "$(cat "$tmp/run/coordinator.url")" --data "$tmp/shard$i.tsv" "${join[@]}" > "$tmp/w$i.txt" 2>&1 &
  pids+=($!)
done
wait_for 120 rounds_done 7 || bad "6 rounds did not close: $(tail -3 "$tmp/serve1.txt")"
url=$(cat "$tmp/run/coordinator.url")
wait $serve_pid 2> /dev/null
"$bin" "${serve[@]}" --listen "${url#http://}" --resume > "$tmp/serve2.txt" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
wait $serve_pid && ok "the resumed coordinator finished" || bad "resumed coordinator: $(tail -3 "$tmp/serve2.txt")"
ended=$SECONDS
for p in "${pids[@]:1}"; do wait "$p" 2> /dev/null; done
# the last worker to catch up tells a coordinator that may be gone already: once, not for --retry-for 60 s
[ $((SECONDS - ended)) -lt 20 ] && ok "the workers ended with the coordinator ($((SECONDS - ended)) s after it)" ||
  bad "the workers ended $((SECONDS - ended)) s after the coordinator"
grep -q "test acc" "$tmp/serve2.txt" && ok "the progress lines name the test accuracy" ||
  bad "no test accuracy in the progress lines: $(tail -3 "$tmp/serve2.txt")"

# the rows: 0..10 once each, test_accuracy in 0, 4, 8 and 10 only
steps=$(grep -o '"step": [0-9]*' "$tmp/run/metrics.jsonl" | grep -o '[0-9]*' | tr '\n' ' ')
[ "$steps" = "0 1 2 3 4 5 6 7 8 9 10 " ] && ok "metrics.jsonl: rows 0..$rounds, once each across the resume" ||
  bad "metrics rows: $steps"
evaluated=$(grep '"test_accuracy"' "$tmp/run/metrics.jsonl" | grep -o '"step": [0-9]*' | grep -o '[0-9]*' | tr '\n' ' ')
[ "$evaluated" = "0 4 8 10 " ] && ok "evaluated before the first round, every 4 rounds and after the last" ||
  bad "evaluated rows: $evaluated"
[ "$(head -1 "$tmp/run/metrics.csv" | grep -c test_accuracy)" = 1 ] && [ "$(wc -l < "$tmp/run/metrics.csv")" = $((rounds + 2)) ] &&
  ok "metrics.csv: the header and $((rounds + 1)) rows" || bad "metrics.csv: $(head -2 "$tmp/run/metrics.csv")"

# each evaluated round against export + eval of the log's first N records
header=$(( $(stat -c %s "$tmp/run/seeds.log") - rounds * (12 + 4 * q) ))
n_test=200 counts=()
for n in $evaluated; do
  got=$(grep "\"step\": $n," "$tmp/run/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{print $2}')
  if [ "$n" = 0 ]; then
    weights=$assets/stories260K/stories260K.bin
  else
    mkdir -p "$tmp/cut$n"
    cp "$tmp/run/run.json" "$tmp/run/federated.json" "$tmp/cut$n/"
    head -c $((header + n * (12 + 4 * q))) "$tmp/run/seeds.log" > "$tmp/cut$n/seeds.log"
    "$bin" export --run "$tmp/cut$n" -o "$tmp/out$n" > "$tmp/export$n.txt" 2>&1 || bad "export of $n records: $(cat "$tmp/export$n.txt")"
    weights=$tmp/out$n
  fi
  want=$("$bin" eval "$weights" --task sst2 --label-words bad,good --data "$tmp/test.tsv" --json --threads 1 2> "$tmp/eval$n.txt" |
         grep -o '"accuracy": [0-9.]*' | awk '{print $2}')
  c_got=$(awk -v a="$got" -v n=$n_test 'BEGIN {printf "%d", a * n + 0.5}')
  c_want=$(awk -v a="$want" -v n=$n_test 'BEGIN {printf "%d", a * n + 0.5}')
  [ -n "$got" ] && [ -n "$want" ] && [ "$c_got" = "$c_want" ] &&
    ok "round $n: the coordinator's $c_got/$n_test right = distzo eval of the export of $n records" ||
    bad "round $n: coordinator '$got', eval of the export '$want' ($(tail -2 "$tmp/eval$n.txt"))"
  counts+=("$c_got")
done
[ "$(printf '%s\n' "${counts[@]}" | sort -u | wc -l)" -gt 1 ] && ok "training moved the accuracy (${counts[*]} of $n_test)" ||
  bad "the accuracy never moved (${counts[*]}): the comparison above shows nothing"
finish
