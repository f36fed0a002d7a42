#!/usr/bin/env bash
# What long operations say while they run (issue 27.15, 19), piped:
# - eval, train's evaluations and export's replay print progress lines on stderr
#   (DISTZO_PROGRESS_AFTER=0: from the start; by default only after 2 s, so a short
#   operation prints none), never on --json's stdout nor under --quiet;
# - each step's line is printed once, its evaluation's scores on it;
# - a rate under one step a second reads "N s/step";
# - Ctrl-C stops a run before its next step: exit 130, the step reached and how --resume
#   continues; the resumed run equals the uninterrupted one bitwise.
# usage: progress.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
test_set "$assets" 20
head -3 "$assets/sst2/dev.tsv" > "$tmp/test2.tsv"
cd "$tmp" || exit 1
small=(--train-examples 32 --dev-examples 8 --batch 4 --threads 1 --test test.tsv)

# ---- eval: progress lines on stderr, stdout as before ----
"$bin" eval --limit 60 --threads 1 > quiet.out 2> quiet.err || bad "eval failed: $(cat quiet.err)"
DISTZO_PROGRESS_AFTER=0 "$bin" eval --limit 60 --threads 1 > e.out 2> e.err || bad "eval failed: $(cat e.err)"
n=$(grep -cE '^distzo: evaluation: [0-9]+/60 examples \([0-9]+%\), ETA ' e.err)
[ "$n" -ge 1 ] && grep -qE '^distzo: evaluation: 60 examples in [0-9]+s$' e.err &&
  ok "eval: $n progress lines and the closing one on stderr" || bad "eval progress: $(cat e.err)"
sed -E 's/\([0-9.]+ s\)//' e.out > a.cmp && sed -E 's/\([0-9.]+ s\)//' quiet.out > b.cmp
cmp -s a.cmp b.cmp && [ "$(wc -l < e.out)" = 2 ] && ok "eval: stdout the same with progress shown" ||
  bad "eval stdout changed: $(cat e.out)"
grep -q 'distzo: evaluation' quiet.err && bad "a short eval showed progress by default: $(cat quiet.err)" ||
  ok "eval under 2 s: no progress by default"
DISTZO_PROGRESS_AFTER=0 "$bin" eval --limit 60 --threads 1 --json > j.out 2> j.err || bad "eval --json failed"
[ "$(wc -l < j.out)" = 1 ] && grep -q '^{"task"' j.out && grep -q '^distzo: evaluation' j.err &&
  ok "eval --json: one object on stdout, progress on stderr" || bad "eval --json: $(cat j.out j.err)"
DISTZO_PROGRESS_AFTER=0 "$bin" eval --task lm --data test.tsv --threads 1 > lm.out 2> lm.err || bad "eval lm failed"
grep -qE '^distzo: evaluation: [0-9]+ tokens in ' lm.err && ok "eval --task lm: progress in tokens" || bad "lm: $(cat lm.err)"
# one long text reports as its windows go by (it printed only "1 texts in 17s" at the end)
for i in $(seq 300); do printf 'Once upon a time there was a little girl named Lily. She liked to play outside. '; done > long.txt
DISTZO_PROGRESS_AFTER=0 "$bin" eval --task lm --data long.txt --threads 1 > long.out 2> long.err || bad "eval lm long failed"
total=$(sed -n 's/^long.txt: \([0-9]*\) tokens scored.*/\1/p' long.out)
grep -qE "^distzo: evaluation: [0-9]+/$total tokens \([0-9]+%\)" long.err && grep -q "^distzo: evaluation: $total tokens in " long.err &&
  ok "eval --task lm of one long text: progress by tokens on the way ($total in all)" || bad "lm long: $(cat long.out long.err)"

# ---- train: each step's line once; its evaluations' progress; --quiet ----
DISTZO_PROGRESS_AFTER=0 "$bin" train --steps 6 --eval-every 3 --log-every 2 "${small[@]}" --out a > a.out 2> a.err ||
  bad "train failed: $(tail -2 a.err)"
dups=$(grep -oE '^step [0-9]+/6' a.out | sort | uniq -d | tr '\n' ' ')
[ -z "$dups" ] && [ "$(grep -cE '^step ' a.out)" = 5 ] &&
  grep -qE '^step 6/6  loss [0-9.]+  g [-+].*ETA .*  dev acc [0-9.]+  test acc [0-9.]+  best dev ' a.out &&
  grep -qE '^step 3/6  loss [0-9.]+  dev acc .*\([0-9.]+ steps/s\)$' a.out &&
  ok "train: one line a step (0 2 3 4 6), step 6's progress and evaluation on one line" ||
  bad "train lines (duplicated: '$dups'): $(cat a.out)"
ev=$(grep -cE '^distzo: evaluation: [0-9]+ examples in ' a.err)
[ "$ev" = 3 ] && ok "train: each of the 3 evaluations reported its progress on stderr" ||
  bad "train evaluations' progress: $ev: $(cat a.err)"
DISTZO_PROGRESS_AFTER=0 "$bin" train --steps 2 "${small[@]}" --out q --quiet > q.out 2>&1 || bad "train --quiet failed"
grep -qE '^(step|distzo: evaluation)' q.out && bad "--quiet showed progress: $(cat q.out)" ||
  ok "train --quiet: no progress"

# ---- export: the replay's progress ----
DISTZO_PROGRESS_AFTER=0 "$bin" export --run a -o ex > x.out 2> x.err || bad "export failed: $(cat x.err)"
grep -qE '^distzo: replaying the seed log: 6 steps in ' x.err && ok "export: the replay's progress" ||
  bad "export progress: $(cat x.out x.err)"

# ---- seconds per step below one step a second (SmolLM2: about 1-5 s a step here) ----
"$bin" train --model "$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf" --steps 1 --train-examples 16 \
  --dev-examples 2 --batch 16 --threads 1 --test test2.tsv --out slow > slow.out 2>&1 || bad "SmolLM2 train failed"
line=$(grep -m1 '^step 1/1' slow.out)
rate=$(sed -nE 's/.*  ([0-9.]+) steps\/s  ETA.*/\1/p' <<< "$line") secs=$(sed -nE 's/.*  ([0-9.]+) s\/step  ETA.*/\1/p' <<< "$line")
if [ -n "$secs" ]; then
  awk -v s="$secs" 'BEGIN { exit !(s >= 1) }' && ok "a slow step reads '$secs s/step'" || bad "s/step under 1: $line"
elif [ -n "$rate" ]; then
  awk -v r="$rate" 'BEGIN { exit !(r >= 1) }' && ok "a step this machine ran at $rate steps/s (no s/step to show)" ||
    bad "under one step a second shown as steps/s: $line"
else bad "no rate in: $line"; fi

# ---- Ctrl-C ----
args=(--steps 6 --eval-every 3 --checkpoint-every 2 "${small[@]}")
"$bin" train "${args[@]}" --out ref > ref.out 2>&1 || bad "reference run failed"
DISTZO_TEST_KILL=0:4:int "$bin" train "${args[@]}" --out c > c.out 2>&1
rc=$?
[ "$rc" = 130 ] && grep -q "^distzo: interrupted after step 4 of 6; the run in c continues with: distzo train --out c --resume$" c.out &&
  [ "$(grep -c '^{"step"' c/metrics.jsonl)" = 5 ] && ok "Ctrl-C at step 4: exit 130, the step and --resume said, rows 0..4" ||
  bad "Ctrl-C: exit $rc, $(cat c.out) $(cat c/metrics.jsonl)"
"$bin" train --resume --out c > c2.out 2>&1 || bad "resume after Ctrl-C failed: $(tail -1 c2.out)"
same_run c ref 6 && ok "--resume after Ctrl-C = the uninterrupted run, bitwise" || bad "the resumed run differs from ref"
# a real SIGINT from outside (job control gives the background job the default disposition)
set -m
"$bin" train --steps 200 --eval-every 0 "${small[@]}" --log-sync-every 1 --out r > r.out 2>&1 &
pid=$!
set +m
for _ in $(seq 300); do [ "$(grep -c step r/metrics.jsonl 2> /dev/null)" -ge 20 ] 2> /dev/null && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
step=$(sed -nE 's/^distzo: interrupted after step ([0-9]+) of 200; the run in r continues with.*/\1/p' r.out)
[ "$rc" = 130 ] && [ -n "$step" ] && [ "$(($(grep -c '^{"step"' r/metrics.jsonl) - 1))" = "$step" ] &&
  ok "kill -INT: exit 130 after step $step, metrics rows up to it" || bad "kill -INT: exit $rc: $(tail -3 r.out)"
"$bin" train --resume --out r > r2.out 2>&1 && grep -q "^distzo: resuming at step $step of 200" r2.out &&
  ok "--resume continues from step $step" || bad "resume after kill -INT: $(cat r2.out)"
finish
