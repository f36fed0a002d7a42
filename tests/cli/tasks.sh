#!/usr/bin/env bash
# MeZO's tasks end to end on stories260K:
# - --objective accuracy (loss = minus the batch's accuracy, non-differentiable) on SST-2:
#   trains, logs its steps, and a run stopped at step 3 and resumed is bitwise the
#   uninterrupted one (weights, metrics, seed log); export replays it to the same weights.
# - a generation preset (squad, the fixture of tests/data/tasks/SQuAD) trains on its
#   answers, reports F1 and EM, and resumes and replays bitwise the same way.
# - --objective f1 (loss = minus the F1 of the greedy answers under each perturbation) on
#   a SQuAD-layout fixture stories260K answers in part (tests/data/tasks/story_qa): with
#   eps near 0 the step's loss is minus the evaluation's F1 of the same examples; a run
#   resumes and replays bitwise, and its steps move the weights (some g is not 0).
# - the classification presets train from their release folders (--task rte --data RTE/),
#   a preset refuses --template, --demos K puts K demonstrations before each prompt.
# usage: tasks.sh DISTZO ASSETS FIXTURES
set -u
bin=$1 assets=$2 fx=$3
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 32

resumes_bitwise() { # NAME ARGS...: 6 steps at once; 3, then resumed to 6; and export
  local name=$1; shift
  "$bin" train "$@" --steps 6 --checkpoint-every 3 --out "$tmp/$name-a" > "$tmp/$name-a.txt" 2>&1 ||
    { bad "$name: training failed: $(tail -2 "$tmp/$name-a.txt")"; return; }
  "$bin" train "$@" --steps 3 --checkpoint-every 3 --out "$tmp/$name-b" > /dev/null 2>&1 &&
    "$bin" train --resume --steps 6 --out "$tmp/$name-b" > /dev/null 2>&1 || { bad "$name: the split run failed"; return; }
  same_run "$tmp/$name-a" "$tmp/$name-b" 6 && ok "$name: stopped at 3 and resumed = uninterrupted (weights, metrics, seed log)" ||
    bad "$name: the resumed run differs from the uninterrupted one"
  "$bin" export --run "$tmp/$name-a" -o "$tmp/$name-x" > /dev/null 2>&1 &&
    cmp -s "$tmp/$name-x/model.safetensors" "$tmp/$name-a/checkpoint-6/model.safetensors" &&
    ok "$name: export replays the seed log to the run's weights" || bad "$name: export differs from checkpoint-6"
}

common=(--threads 1 --eval-every 3 --lr 1e-3 --eps 1e-2)
resumes_bitwise accuracy --objective accuracy --train-examples 32 --dev-examples 8 --batch 8 --test "$tmp/test.tsv" "${common[@]}"
grep -q '"objective":[[:space:]]*"accuracy"' "$tmp/accuracy-a/run.json" && ok "run.json keeps --objective" || bad "run.json lacks the objective"
# the logged loss is (L+ + L-) / 2, minus the mean of two batch accuracies of 8 examples (under
# +eps and -eps z): a multiple of 1/16 in [-1, 0]
awk -F'"loss": ' 'NF > 1 && $2 !~ /^null/ { split($2, v, ","); x = -v[1] * 16; if (v[1] > 0 || v[1] < -1 || x - int(x + 0.5) > 1e-9 || int(x + 0.5) - x > 1e-9) bad = 1; n++ }
  END { exit bad || n != 6 }' "$tmp/accuracy-a/metrics.jsonl" && ok "accuracy objective: each step's loss is minus the mean of two batch accuracies" ||
  bad "accuracy objective: losses $(grep -o '"loss": [^,]*' "$tmp/accuracy-a/metrics.jsonl" | tr '\n' ' ')"
"$bin" train --objective accuracy --task squad --data "$fx/SQuAD" --steps 1 --out "$tmp/bad1" > "$tmp/bad1.txt" 2>&1 &&
  bad "accuracy objective on a generation task was accepted" ||
  { grep -q "does not apply" "$tmp/bad1.txt" && ok "--objective accuracy is refused for squad, naming why"; } || bad "no clear message: $(tail -1 "$tmp/bad1.txt")"

resumes_bitwise squad --task squad --data "$fx/SQuAD" --train-examples 2 --dev-examples 1 --batch 2 --gen-tokens 6 "${common[@]}"
grep -q "generation: dev F1 [0-9.]* EM [0-9.]*, test F1 [0-9.]* EM [0-9.]*" "$tmp/squad-a.txt" &&
  ok "squad: evaluation reports F1 and EM" || bad "squad: no F1/EM line: $(grep -i f1 "$tmp/squad-a.txt" | head -2)"

sq=(--task squad --data "$fx/story_qa" --objective f1 --train-examples 3 --dev-examples 1 --batch 3 --gen-tokens 8 --threads 1)
"$bin" train "${sq[@]}" --train-examples 4 --dev-examples 0 --batch 4 --steps 1 --eps 1e-7 --lr 0 --eval-every 1 --out "$tmp/f1-zero" > "$tmp/f1-zero.txt" 2>&1
l=$(grep -o '"loss": [^,]*' "$tmp/f1-zero/metrics.jsonl" | grep -v null | head -1 | grep -o '[-0-9.e]*$')
f=$(grep -o 'test F1 [0-9.]*' "$tmp/f1-zero.txt" | head -1 | grep -o '[0-9.]*$')
awk -v l="$l" -v f="$f" 'BEGIN { exit !(l != "" && f != "" && f > 0 && (l + f) < 1e-4 && (l + f) > -1e-4) }' &&
  ok "f1 objective: the step's loss at eps ~ 0 is minus the evaluation's F1 ($l vs $f)" ||
  bad "f1 objective: step loss '$l' vs evaluation F1 '$f'"
ef=$("$bin" eval --task squad --data "$fx/story_qa" --gen-tokens 8 --threads 1 --json 2>/dev/null | grep -o '"f1": [0-9.]*' | grep -o '[0-9.]*$')
awk -v a="$ef" -v b="$f" 'BEGIN { exit !(a != "" && (a - b) < 1e-4 && (b - a) < 1e-4) }' &&
  ok "eval --task squad --data story_qa/ reports the training's evaluation F1 ($ef)" || bad "eval F1 '$ef' vs the run's '$f'"
"$bin" eval --task copa --data "$fx/COPA" --predictions "$tmp/copa.tsv" > /dev/null 2>&1 &&
  [ "$(head -1 "$tmp/copa.tsv" | cut -f4-)" = "$(printf 'score0\tscore1')" ] && [ "$(wc -l < "$tmp/copa.tsv")" = 3 ] &&
  ok "eval --task copa scores each example's own alternatives" || bad "eval --task copa: $(head -2 "$tmp/copa.tsv")"
resumes_bitwise f1 "${sq[@]}" --eps 3e-4 --lr 1e-4 --eval-every 3
grep -o '"g": [^,]*' "$tmp/f1-a/metrics.jsonl" | grep -v -e '"g": 0$' -e null | grep -q . && ok "f1 objective: a step's g is not 0" ||
  bad "f1 objective: every g is 0"

for t in rte:RTE cb:CB boolq:BoolQ wsc:WSC wic:WiC multirc:MultiRC copa:COPA record:ReCoRD drop:DROP; do
  name=${t%%:*} dir=${t##*:} gen=()
  [ "$name" = drop ] && gen=(--gen-tokens 4) # a generation task's option (the others refuse it)
  "$bin" train --task "$name" --data "$fx/$dir" --train-examples 2 --dev-examples 0 --batch 2 --steps 2 "${gen[@]}" \
    --threads 1 --eval-every 0 --out "$tmp/p-$name" > "$tmp/p-$name.txt" 2>&1 &&
    grep -q "^done: 2 steps" "$tmp/p-$name.txt" || { bad "--task $name --data $dir/: $(tail -1 "$tmp/p-$name.txt")"; continue; }
  ok "--task $name trains from the release folder $dir/"
done
"$bin" train --task rte --data "$fx/RTE" --template "{text} x" --steps 1 --out "$tmp/bad2" > "$tmp/bad2.txt" 2>&1 &&
  bad "a preset accepted --template" ||
  { grep -q "option --template: --task rte does not use it" "$tmp/bad2.txt" && ok "a preset refuses --template"; } ||
  bad "no clear message: $(tail -1 "$tmp/bad2.txt")"

# --demos: the zero-shot score moves (the prompts changed), and the run resumes bitwise
"$bin" train --demos 2 --train-examples 32 --dev-examples 8 --batch 8 --test "$tmp/test.tsv" --steps 1 "${common[@]}" \
  --out "$tmp/demos" > "$tmp/demos.txt" 2>&1 && grep -q '"demos":[[:space:]]*2' "$tmp/demos/run.json" &&
  ok "--demos 2 trains and run.json keeps it" || bad "--demos: $(tail -1 "$tmp/demos.txt")"
resumes_bitwise demos --demos 1 --train-examples 16 --dev-examples 4 --batch 4 --test "$tmp/test.tsv" "${common[@]}"
finish
