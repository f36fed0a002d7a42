#!/usr/bin/env bash
# The trainer's conventions (issue 16):
# - --config FILE: its settings apply, the command line goes over them, run.json records the
#   result; an unknown key, a wrong type, a non-object are refused naming the file and key
#   (and leave no run folder); --config RUN/run.json --out NEW repeats RUN bitwise.
# - steps count from 1 everywhere: metrics.jsonl rows 0..N (row 0: the evaluation before
#   training, no loss), the last row evaluated, also with --eval-every 0, checkpoint-N =
#   row N; `distzo plot` then draws both plots.
# - metrics.csv holds the same rows; the TensorBoard event file, decoded by
#   test_tensorboard's own reader, the same scalars; after a SIGKILL and --resume,
#   metrics.csv (without timing) equals the uninterrupted run's, also without a selection set.
# - --log-every N prints every N steps, --quiet no progress, the rate (steps/s, ETA) leaves
#   the evaluation before training out; --json prints one summary object whose figures are
#   the run's own (metrics.jsonl, best/).
# usage: conventions.sh DISTZO TEST_TENSORBOARD ASSETS
set -u
bin=$1 tb=$2 assets=$3
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 20
cd "$tmp" || exit 1
# a row's field from metrics.jsonl
field() { grep "^{\"step\": $2," "$1/metrics.jsonl" | sed -nE "s/.*\"$3\": ([^,}]*).*/\\1/p"; }

# ---- --config, overrides, run.json ----
cat > cfg.json << EOF
{"steps": 6, "eval-every": 3, "train-examples": 32, "dev-examples": 8, "batch": 4, "lr": 1e-4,
 "perturbation": "rademacher", "weight-decay": 0.01, "seed": 3, "threads": 1, "test": "$tmp/test.tsv",
 "log-every": 2, "out": "a"}
EOF
"$bin" train --config cfg.json --seed 5 > a.txt 2>&1 || bad "train --config failed: $(tail -1 a.txt)"
runjson=$(tr -d ' \t\n' < a/run.json)
if grep -q '"steps":6,' <<< "$runjson" && grep -q '"seed":5,' <<< "$runjson" && grep -q '"rademacher":"rademacher",' <<< "$runjson" &&
   grep -q '"eval_every":3,' <<< "$runjson" && grep -q "\"test_data\":\"$tmp/test.tsv\"" <<< "$runjson"; then
  ok "--config settings in run.json, --seed 5 on the command line over the file's 3"
else bad "run.json does not hold the config's settings with the override: $runjson"; fi
lines=$(grep -cE '^step [0-9]+/6  loss [0-9.]+  g ' a.txt)
[ "$lines" = 3 ] && ok "--log-every 2 (from the file): 3 progress lines in 6 steps" ||
  bad "--log-every 2: $lines progress lines: $(cat a.txt)"

"$bin" train --config a/run.json --out b --threads 1 --quiet > b.txt 2>&1 || bad "train --config RUN/run.json failed"
same_run a b 6 && cmp -s a/seeds.log b/seeds.log && ok "--config RUN/run.json --out NEW: the same run, bitwise" ||
  bad "a run restarted from its run.json differs"
grep -q '^step' b.txt && bad "--quiet printed progress: $(grep -m1 '^step' b.txt)" ||
  ok "--quiet: no progress lines ($(wc -l < b.txt) lines: the summary)"

refused() { # name json message...: the file is refused, naming it and the key; no run folder
  local name=$1 json=$2
  shift 2
  printf '%s\n' "$json" > "$name.json"
  if "$bin" train --config "$name.json" --out "r-$name" > "$name.txt" 2>&1; then bad "$name: $json accepted"; return; fi
  for m in "$name.json" "$@"; do grep -qF -- "$m" "$name.txt" || { bad "$name: no '$m' in: $(cat "$name.txt")"; return; }; done
  [ ! -e "r-$name" ] && ok "$name: refused, naming $name.json $*" || bad "$name: left a run folder"
}
refused unknown '{"lr": 1e-5, "learning_rate": 1e-5}' "unknown key 'learning_rate'"
refused wrong-type '{"steps": "100"}' "'steps' must be a number"
refused not-integer '{"steps": 2.5}' "'steps'"
refused flag-type '{"quiet": "yes"}' "'quiet' must be true or false"
refused choice '{"perturbation": "uniform"}' "'perturbation'" "uniform"
refused not-object '[{"lr": 1e-5}]' "not a JSON object"
refused resume-key '{"resume": true}' "'resume'"
printf '{"steps": 3}\n' > ok.json
"$bin" train --config ok.json --resume --out a > both.txt 2>&1 && bad "--config with --resume accepted" ||
  { grep -q -- "--config with --resume" both.txt && ok "--config with --resume refused, saying why" || bad "--config --resume: $(cat both.txt)"; }

# ---- 1-based steps, the evaluation before training and at the end ----
rows=$(grep -o '^{"step": [0-9]*' a/metrics.jsonl | grep -o '[0-9]*$' | tr '\n' ' ')
[ "$rows" = "0 1 2 3 4 5 6 " ] && ok "metrics.jsonl rows 0..6 (0: before training)" || bad "metrics.jsonl steps: $rows"
[ "$(field a 0 loss)" = null ] && [ -n "$(field a 0 dev_accuracy)" ] && [ -n "$(field a 3 dev_accuracy)" ] &&
  [ -n "$(field a 6 dev_accuracy)" ] && [ -z "$(field a 4 dev_accuracy)" ] && [ -d a/checkpoint-6 ] &&
  ok "row 0 is the evaluation before training (no loss), rows 3 and 6 evaluated (--eval-every 3), checkpoint-6 = row 6" ||
  bad "evaluation rows: $(cat a/metrics.jsonl)"

"$bin" train --steps 4 --eval-every 0 --train-examples 32 --dev-examples 8 --batch 4 --threads 1 --test test.tsv \
  --out z --json > z.json 2> z.err || bad "train --eval-every 0 --json failed: $(tail -1 z.err)"
evals=$(grep -c '"dev_accuracy"' z/metrics.jsonl)
[ "$evals" = 2 ] && [ -n "$(field z 0 dev_accuracy)" ] && [ -n "$(field z 4 dev_accuracy)" ] &&
  ok "--eval-every 0: the evaluations before training and after the last step logged" ||
  bad "--eval-every 0: $evals evaluation rows: $(cat z/metrics.jsonl)"
if command -v gnuplot > /dev/null; then
  "$bin" plot z -o zplots > plot.txt 2>&1 && [ -s zplots/loss.png ] && [ -s zplots/accuracy.png ] &&
    ok "distzo plot of an --eval-every 0 run: loss.png and accuracy.png" || bad "plot: $(cat plot.txt)"
else left_out "gnuplot not on PATH (optional; scripts/deps.sh installs it): the plot check"; fi

# ---- --json ----
j=$(cat z.json)
num() { grep -oE "\"$1\": \{[^}]*\"$2\": [^,}]*" <<< "$j" | sed -E 's/.*: //'; }
[ "$(wc -l < z.json)" = 1 ] && grep -q '^{"run": "z", "already_finished": false, "steps": 4, "steps_run": 4, ' z.json &&
  ok "--json: one object on stdout, progress on stderr" || bad "--json stdout: $j"
before=$(num before test) final=$(num final test) best_step=$(num best step)
want_before=$(field z 0 test_accuracy) want_final=$(field z 4 test_accuracy)
bstate=$(sed -nE 's/.*"best_step": ([0-9]+).*/\1/p' z/best/trainer_state.json 2> /dev/null)
awk -v a="$before" -v b="$want_before" -v c="$final" -v d="$want_final" \
  'BEGIN { exit !(a != "" && c != "" && (a - b)^2 < 1e-10 && (c - d)^2 < 1e-10) }' &&
  [ "$best_step" = "${bstate:-0}" ] && grep -qE '"peak_rss_bytes": \[[1-9][0-9]*\], "bytes_per_step": 0\}' z.json &&
  ok "--json: before $before / final $final = metrics.jsonl rows 0 and 4, best step $best_step = best/'s, peak RSS" ||
  bad "--json figures: $j vs rows 0/4 $want_before/$want_final, best/ step '${bstate}'"

# ---- the rate leaves the evaluation before training out ----
"$bin" train --steps 4 --eval-every 0 --train-examples 32 --dev-examples 8 --batch 4 --threads 1 --test test.tsv \
  --out y --log-every 1 > y.txt 2>&1 || bad "train --log-every 1 failed"
rate1=$(sed -nE 's/^step 1\/4  loss .*  ([0-9.]+) steps\/s  ETA.*/\1/p' y.txt)
secs1=$(field y 1 seconds) csv1=$(sed -n 3p y/metrics.csv | cut -d, -f6)
awk -v r="$rate1" -v s="$secs1" -v c="$csv1" 'BEGIN { exit !(r != "" && r * s > 1.5 && (r - c)^2 < 0.01 + 0.0025 * c^2) }' &&
  ok "step 1's rate $rate1 steps/s (= metrics.csv's $csv1) counts the step, not the ${secs1} s before it" ||
  bad "step 1: rate '$rate1' steps/s, csv '$csv1', $secs1 s since the start: $(grep -m1 '^step 1/' y.txt)"

# ---- metrics.csv and the TensorBoard events ----
csv_rows=$(tail -n +2 a/metrics.csv | cut -d, -f1-4 | tr ',' ' ')
json_rows=$(sed -E 's/^\{"step": ([0-9]+), "loss": ([^,]*), "g": ([^,]*), "lr": ([^,]*),.*/\1 \2 \3 \4/; s/null//g' a/metrics.jsonl)
[ "$(head -1 a/metrics.csv)" = "step,loss,g,lr,seconds,steps_per_s,bytes_per_step,dev_accuracy,test_accuracy,best_dev_accuracy,dev_loss,test_loss" ] &&
  [ "$csv_rows" = "$json_rows" ] && [ "$(cut -d, -f8-10 a/metrics.csv | sed -n 5p)" = "$(field a 3 dev_accuracy),$(field a 3 test_accuracy),$(field a 3 best_dev_accuracy)" ] &&
  ok "metrics.csv: the header and metrics.jsonl's rows (step, loss, g, lr, the scores)" ||
  bad "metrics.csv differs from metrics.jsonl: $(cat a/metrics.csv)"
ev=$(ls a/events.out.tfevents.* 2> /dev/null | head -1)
if [ -n "$ev" ] && "$tb" "$ev" > ev.txt 2> ev.err; then
  ev_loss=$(awk '$3 == "train/loss" { print $2, $4 }' ev.txt)
  want_loss=$(tail -n +3 a/metrics.csv | awk -F, '{ print $1, $2 }')
  same=$(paste -d' ' <(echo "$ev_loss") <(echo "$want_loss") |
         awk '{ n++; if ($1 == $3 && ($2 - $4)^2 <= 1e-12 * $4^2) k++ } END { print k == n && n == 6 }')
  n_dev=$(grep -c ' eval/dev_accuracy ' ev.txt) n_rate=$(grep -c ' train/steps_per_s ' ev.txt)
  [ "$(head -1 ev.txt | cut -d' ' -f3-)" = "file_version brain.Event:2" ] && [ "$same" = 1 ] && [ "$n_dev" = 3 ] &&
    [ "$n_rate" = 6 ] && ok "the event file: file_version, train/loss of steps 1..6 = metrics.csv, 3 evaluations, steps/s" ||
    bad "event file $ev: $(cat ev.txt)"
else bad "no readable event file in a/: $(ls a) $(cat ev.err 2> /dev/null)"; fi

# ---- a SIGKILL, --resume: metrics.csv as the uninterrupted run's ----
DISTZO_TEST_KILL=0:4 "$bin" train --config cfg.json --seed 5 --out k --checkpoint-every 2 > k.txt 2>&1
[ -d k/checkpoint-4 ] || bad "the killed run has no checkpoint-4: $(tail -2 k.txt)"
"$bin" train --config cfg.json --seed 5 --out c --checkpoint-every 2 > c.txt 2>&1 || bad "reference run failed"
"$bin" train --resume --out k --threads 1 > k2.txt 2>&1 || bad "resume failed: $(tail -1 k2.txt)"
diff <(metrics_csv k) <(metrics_csv c) > csv.diff && same_run k c 6 &&
  [ "$(ls k/events.out.tfevents.* | wc -l)" = 2 ] &&
  ok "after SIGKILL + --resume: metrics.csv and .jsonl = the uninterrupted run's; one event file per start" ||
  bad "resumed metrics.csv differs: $(head -5 csv.diff); $(ls k)"
# no selection set (--dev-examples 0): no best score yet; a resume must not turn that into one
nodev=(--config cfg.json --dev-examples 0 --eval-every 2 --checkpoint-every 2)
"$bin" train "${nodev[@]}" --steps 4 --out nd1 > /dev/null 2>&1 && "$bin" train "${nodev[@]}" --steps 2 --out nd2   > /dev/null 2>&1 && "$bin" train --resume --out nd2 --steps 4 > /dev/null 2>&1 || bad "the --dev-examples 0 runs failed"
same_run nd1 nd2 4 && ! grep -q best_dev_accuracy nd2/metrics.jsonl &&
  ok "--dev-examples 0, resumed: metrics as the uninterrupted run's (no best_dev_accuracy)" ||
  bad "--dev-examples 0 resume: $(diff <(metrics nd1) <(metrics nd2) | head -3)"

finish
