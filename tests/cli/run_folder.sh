#!/usr/bin/env bash
# The run folder is the user's: distzo removes only what the run itself wrote, and the
# readers (export, eval, plot, resume of a finished run's files) change nothing in it.
# - --keep-checkpoints N keeps the newest N numbered checkpoints this run wrote and says
#   which it removed; a folder the user put there, even named checkpoint-..., survives.
# - export and eval of a run (its best/ and checkpoint) leave every file byte for byte.
# - the seed log's torn tail is cut only by the writer (resume), never by export.
# usage: run_folder.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 20
run=(--steps 8 --checkpoint-every 2 --eval-every 4 --train-examples 32 --dev-examples 8 --batch 4 --threads 1
     --test "$tmp/test.tsv")
mkdir -p "$tmp/r/checkpoint-3-mine" "$tmp/r/notes"
echo "the user's" > "$tmp/r/checkpoint-3-mine/file"
echo "the user's" > "$tmp/r/notes/file"
"$bin" train "${run[@]}" --keep-checkpoints 2 --out "$tmp/r" > "$tmp/train.txt" 2>&1 || bad "training failed"
[ -d "$tmp/r/checkpoint-6" ] && [ -d "$tmp/r/checkpoint-8" ] && [ ! -e "$tmp/r/checkpoint-2" ] &&
  [ ! -e "$tmp/r/checkpoint-4" ] && ok "--keep-checkpoints 2 keeps checkpoint-6 and checkpoint-8" ||
  bad "--keep-checkpoints 2: $(ls "$tmp/r" | tr '\n' ' ')"
grep -q "removed .*checkpoint-2 (--keep-checkpoints 2)" "$tmp/train.txt" && ok "pruning says what it removed" ||
  bad "no message for the pruned checkpoint"
[ -f "$tmp/r/checkpoint-3-mine/file" ] && [ -f "$tmp/r/notes/file" ] && ok "the user's folders survive" ||
  bad "a folder distzo did not write was removed"

# a run's checkpoint is evaluated as the run did: its test data, prompt and label words
ev() { "$bin" eval "$@" --json 2>/dev/null | grep -o '"data": "[^"]*", "examples": [0-9]*, "accuracy": [0-9.]*, "predicted": \[[0-9, ]*\]'; }
mine=$(ev "$tmp/r/checkpoint-8") run_own=$(ev "$tmp/r/checkpoint-8" --data "$tmp/test.tsv" --label-words terrible,great)
acc8=$(grep '"step": 8,' "$tmp/r/metrics.jsonl" | grep -o '"test_accuracy": [0-9.]*' | grep -o '[0-9.]*$')
if [ -n "$mine" ] && [ "$mine" = "$run_own" ] && awk -v a="$acc8" -v l="$mine" 'BEGIN { split(l, p, "\"accuracy\": "); exit !((p[2] + 0) - a < 1e-6 && a - (p[2] + 0) < 1e-6) }'; then
  ok "eval of a checkpoint with no flags uses the run's test data and label words (accuracy $acc8, as logged)"
else bad "eval of a checkpoint: '$mine' vs the run's settings '$run_own' (logged $acc8)"; fi

snapshot() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort) ; }
snapshot "$tmp/r" > "$tmp/before.txt"
"$bin" export --run "$tmp/r" -o "$tmp/exported" > /dev/null 2>&1 || bad "export failed"
[ ! -d "$tmp/r/best" ] || "$bin" eval "$tmp/r/best" --data "$tmp/test.tsv" > /dev/null 2>&1 || bad "eval of best/ failed"
"$bin" eval "$tmp/r/checkpoint-8" --data "$tmp/test.tsv" > /dev/null 2>&1 || bad "eval of checkpoint-8 failed"
snapshot "$tmp/r" > "$tmp/after.txt"
cmp -s "$tmp/before.txt" "$tmp/after.txt" && ok "export and eval leave the run folder byte for byte" ||
  bad "export or eval changed the run folder: $(diff "$tmp/before.txt" "$tmp/after.txt" | head -3)"
cmp -s "$tmp/exported/model.safetensors" "$tmp/r/checkpoint-8/model.safetensors" &&
  ok "export replays to checkpoint-8's weights" || bad "export differs from checkpoint-8"

# a torn record at the end of the seed log: export ignores it and leaves it, resume cuts it
printf '\x09\x00\x00' >> "$tmp/r/seeds.log"
size=$(stat -c %s "$tmp/r/seeds.log")
"$bin" export --run "$tmp/r" -o "$tmp/exported2" > /dev/null 2>&1 || bad "export with a torn tail failed"
[ "$(stat -c %s "$tmp/r/seeds.log")" = "$size" ] && ok "export leaves a torn seed-log tail for the writer" ||
  bad "export modified the seed log"
"$bin" train --resume --steps 10 --out "$tmp/r" > "$tmp/resume.txt" 2>&1 || bad "resume failed"
grep -q "dropping a torn tail of 3 bytes" "$tmp/resume.txt" && ok "resume (the writer) cuts the torn tail" ||
  bad "resume did not report the torn tail: $(tail -2 "$tmp/resume.txt")"
[ -d "$tmp/r/checkpoint-10" ] && [ ! -e "$tmp/r/checkpoint-6" ] && [ -d "$tmp/r/checkpoint-8" ] &&
  ok "the resumed run keeps its own two newest checkpoints" || bad "after resume: $(ls "$tmp/r" | tr '\n' ' ')"
! grep -q "stretches" "$tmp/resume.txt" && ok "more --steps under a constant lr: no warning" ||
  bad "a constant schedule's resume warned: $(grep stretches "$tmp/resume.txt")"
# more --steps under a decaying schedule stretch it: the lr jumps back up, and resume says so
# (linear, lr 1e-3: the 4th step's lr is 1e-3 (1 - 3/4) = 2.5e-4 over 4 steps, 1e-3 (1 - 3/6) = 5e-4 over 6)
"$bin" train "${run[@]}" --schedule linear --lr 1e-3 --steps 4 --checkpoint-every 0 --out "$tmp/lin" > /dev/null 2>&1 &&
  "$bin" train --resume --steps 6 --out "$tmp/lin" > "$tmp/lin.txt" 2>&1 &&
  grep -q "warning: .*--steps 6 stretches the run's decaying schedule (it spans --steps): at step 4 the 4-step schedule's lr is 0.00025, the 6-step one's 0.0005" "$tmp/lin.txt" &&
  ok "more --steps under a linear schedule: warned with the jump" || bad "linear resume: $(grep -i -E "warn|error" "$tmp/lin.txt")"

# export says which step its weights are when the log ends before the run's --steps (a run
# still training, or a resume to 9 steps killed at once)
cp -r "$tmp/lin" "$tmp/lin9" && sed -i -E 's/"steps":([[:space:]]*)6,/"steps":\19,/' "$tmp/lin9/run.json"
"$bin" export --run "$tmp/lin9" -o "$tmp/lin9x" > "$tmp/lin9.txt" 2>&1 &&
  grep -q "warning: .*lin9: the seed log reaches step 6 of the run's 9: these are step 6's weights" "$tmp/lin9.txt" &&
  "$bin" export --run "$tmp/lin" -o "$tmp/linx" 2>&1 | grep -q "replayed 6 steps (the whole run)" &&
  ok "export says which step it wrote when the log ends early" || bad "export of an unfinished run: $(cat "$tmp/lin9.txt")"

# resuming a finished run says so and changes nothing
snapshot "$tmp/r" > "$tmp/before_done.txt"
out=$("$bin" train --resume --out "$tmp/r" 2>&1)
snapshot "$tmp/r" > "$tmp/after_done.txt"
grep -q "nothing to do: the run in .* already finished its 10 steps" <<<"$out" && cmp -s "$tmp/before_done.txt" "$tmp/after_done.txt" &&
  ok "resuming a finished run says so and changes nothing" || bad "resume of a finished run: $(tail -1 <<<"$out")"

# resume continues the same run or refuses: a setting that defines the run, given with
# --resume and different from run.json, is refused naming it, and nothing is written
snapshot "$tmp/r" > "$tmp/before_refuse.txt"
cp "$assets/stories260K/stories260K.bin" "$tmp/other_model.bin"
for given in "--lr 1e-4" "--batch 8" "--eps 0.01" "--weight-decay 0.1" "--seed 7" "--data-seed 1" "--schedule cosine" \
             "--warmup 5" "--perturbation rademacher" "--no-fuse" "--no-share-prompt" "--label-words no,yes" \
             "--train-examples 64" "--dev-examples 4" "--master-dtype bf16" "--task classify" "--spsa-samples 2" \
             "--eval-every 2" "--model $tmp/other_model.bin" "--test $assets/sst2/dev.tsv" "--data $assets/sst2" \
             "--tokenizer $assets/stories260K/tok512.bin" "--steps 9"; do
  opt=${given%% *}
  # shellcheck disable=SC2086
  if out=$("$bin" train --resume --out "$tmp/r" $given 2>&1); then bad "resume with $given accepted"
  elif ! grep -q -- "$( [ "$opt" = --data ] && echo --test || echo "$opt") " <<<"$out"; then bad "resume with $given: $(tail -1 <<<"$out")"
  else ok "resume with $given refused: $(tail -1 <<<"$out" | cut -c1-110)"; fi
done
out=$("$bin" train --resume --out "$tmp/r" --objective accuracy 2>&1) # the run's objective is ce, not "(none)"
grep -q -- "--objective accuracy differs from this run's ce" <<<"$out" && ok "resume with --objective accuracy names ce" ||
  bad "resume with --objective accuracy: $(tail -1 <<<"$out")"
snapshot "$tmp/r" > "$tmp/after_refuse.txt"
cmp -s "$tmp/before_refuse.txt" "$tmp/after_refuse.txt" && ok "refused resumes leave the run folder byte for byte" ||
  bad "a refused resume changed the run folder: $(diff "$tmp/before_refuse.txt" "$tmp/after_refuse.txt" | head -3)"
# the run's own settings given again (paths relative or not) are accepted; a raised --steps is kept in run.json
(cd "$tmp" && "$bin" train --resume --out r --steps 11 --lr 3e-5 --batch 4 --test test.tsv --data-seed 42 --threads 2 \
  > "$tmp/resume11.txt" 2>&1) || bad "resume with the run's own settings failed: $(tail -1 "$tmp/resume11.txt")"
grep -q '"steps":[[:space:]]*11' "$tmp/r/run.json" && ok "a raised --steps is kept in run.json" ||
  bad "run.json after --steps 11: $(grep steps "$tmp/r/run.json")"
# defaults given in words are the run's (run.json leaves them out): the prompt of sst2 and
# --peft none; another value is refused, naming the run's as it acts
cp "$tmp/r/run.json" "$tmp/run11.json"
"$bin" train --resume --out "$tmp/r" --steps 11 --template '{text} It was' --peft none --threads 2 > "$tmp/dflt.txt" 2>&1 &&
  cmp -s "$tmp/run11.json" "$tmp/r/run.json" && ok "resume with --template '{text} It was' and --peft none (the defaults) is accepted" ||
  bad "resume with the defaults in words: $(tail -1 "$tmp/dflt.txt")"
out=$("$bin" train --resume --out "$tmp/r" --steps 11 --template 'x {text}' 2>&1) && bad "resume with another --template accepted" ||
  { grep -q -- "--template x {text} differs from this run's {text} It was" <<<"$out" && ok "another --template is refused, naming the run's" ||
    bad "resume --template: $(tail -1 <<<"$out")"; }
out=$("$bin" train --resume --out "$tmp/r" 2>&1)
grep -q "already finished its 11 steps" <<<"$out" && ok "the next resume knows the raised length" ||
  bad "resume after raising: $(tail -1 <<<"$out")"
# a key this build does not know is refused, not dropped (it was: the run went on without it)
cp -r "$tmp/r" "$tmp/bogus" && sed -i -E 's/"steps":/"bogus": 1, "steps":/' "$tmp/bogus/run.json"
out=$("$bin" train --resume --out "$tmp/bogus" --steps 12 2>&1) && bad "run.json with an unknown key resumed" ||
  { grep -q "bogus/run.json: unknown key 'bogus'" <<<"$out" && ok "run.json's unknown key is refused, naming it" ||
    bad "run.json's unknown key: $(tail -1 <<<"$out")"; }

# export never writes into the run folder, nor over the base model's folder
mkdir -p "$tmp/basedir"; cp "$assets/stories260K/stories260K.bin" "$assets/stories260K/tok512.bin" "$tmp/basedir/"
snapshot "$tmp/r" > "$tmp/before_export.txt"; snapshot "$tmp/basedir" > "$tmp/before_base.txt"
for o in "$tmp/r" "$tmp/r/best" "$tmp/r/new/sub" "$tmp/r/../r"; do
  if out=$("$bin" export --run "$tmp/r" -o "$o" 2>&1); then bad "export -o $o (in the run folder) accepted"
  else grep -q "is inside the run folder" <<<"$out" && ok "export -o ${o#"$tmp"/} refused: in the run folder" || bad "export -o $o: $out"; fi
done
if out=$("$bin" export --run "$tmp/r" --base "$tmp/basedir/stories260K.bin" -o "$tmp/basedir" 2>&1); then bad "export over the base model's folder accepted"
else grep -q "is the folder of the base model" <<<"$out" && ok "export over the base model's folder refused" || bad "export -o base folder: $out"; fi
# an export into a folder that held another model: that model's files the export does not
# write (here OPT's vocab.json and merges.txt beside the llama2.c tokenizer.bin written)
# are removed, so no loader reads them with the new ones; other files stay
"$bin" init --preset opt-tiny --layers 1 --seed 3 -o "$tmp/other" > /dev/null 2>&1 && echo mine > "$tmp/other/notes.txt"
"$bin" export --run "$tmp/r" -o "$tmp/other" > "$tmp/other.txt" 2>&1 && [ ! -e "$tmp/other/vocab.json" ] &&
  [ ! -e "$tmp/other/merges.txt" ] && [ -f "$tmp/other/tokenizer.bin" ] && [ -f "$tmp/other/notes.txt" ] &&
  grep -q "other/vocab.json: removed, another model's" "$tmp/other.txt" &&
  "$bin" eval "$tmp/other" --limit 2 --threads 1 > /dev/null 2>&1 &&
  ok "export over another model's folder: its stale model files removed (said), the user's kept; the folder loads" ||
  bad "export over another model's folder: $(ls "$tmp/other" | tr '\n' ' '); $(tail -1 "$tmp/other.txt")"
snapshot "$tmp/r" > "$tmp/after_export.txt"; snapshot "$tmp/basedir" > "$tmp/after_base.txt"
cmp -s "$tmp/before_export.txt" "$tmp/after_export.txt" && cmp -s "$tmp/before_base.txt" "$tmp/after_base.txt" &&
  ok "refused exports changed neither the run nor the base model" || bad "a refused export wrote something"

# a run folder's own files cannot point outside it: LATEST naming another path is refused
cp -r "$tmp/r" "$tmp/r2"; mkdir -p "$tmp/elsewhere"
printf 'checkpoint-10/../../elsewhere\n' > "$tmp/r2/LATEST"
out=$("$bin" train --resume --steps 12 --out "$tmp/r2" 2>&1) && bad "a LATEST pointing outside was followed" ||
  { grep -q "LATEST: expected 'checkpoint-N'" <<<"$out" && ok "a LATEST pointing outside the folder is refused" ||
    bad "LATEST outside: $(tail -1 <<<"$out")"; }
rm -rf "$tmp/r2/checkpoint-10"; ln -s "$tmp/elsewhere" "$tmp/r2/checkpoint-10"; printf 'checkpoint-10\n' > "$tmp/r2/LATEST"
out=$("$bin" train --resume --steps 12 --out "$tmp/r2" 2>&1) && bad "a checkpoint symlinked outside was followed" ||
  { grep -q "outside the folder" <<<"$out" && ok "a checkpoint symlinked outside the folder is refused" ||
    bad "symlinked checkpoint: $(tail -1 <<<"$out")"; }

# CHECKPOINTS lists only names the writer makes: another spelling of a number (a user's
# checkpoint-010) is refused, naming the line, and that folder is never pruned
cp -r "$tmp/r" "$tmp/r3"; mkdir "$tmp/r3/checkpoint-010"; echo "the user's" > "$tmp/r3/checkpoint-010/file"
{ echo checkpoint-010; cat "$tmp/r3/CHECKPOINTS"; } > "$tmp/r3/list" && mv "$tmp/r3/list" "$tmp/r3/CHECKPOINTS"
out=$("$bin" train --resume --steps 12 --out "$tmp/r3" 2>&1) && bad "a CHECKPOINTS line 'checkpoint-010' was accepted"
[ -f "$tmp/r3/checkpoint-010/file" ] && grep -q "CHECKPOINTS: line 1 is 'checkpoint-010'" <<<"$out" &&
  ok "CHECKPOINTS naming checkpoint-010 is refused and that folder kept" || bad "CHECKPOINTS checkpoint-010: $(tail -1 <<<"$out")"

# check everything before writing anything: a refused start leaves no folder behind
for bad in "--steps 0" "--lr -1" "--weight-decay -0.5" "--batch 1500000000" "--train-examples 2147483647 --dev-examples 1" \
           "--eps 0" "--keep-checkpoints 0" "--eval-every -1" "--checkpoint-every -1" "--log-sync-every -1" \
           "--max-bad-steps 0" "--spsa-samples 0" "--spsa-samples 65" "--task lm --seq 1" "--seq -5" "--threads -1" \
           "--threads 100000" "--store disk:$tmp/s.store --max-resident -1" "--store foo:bar" "--store disk:" \
           "--label-words good" "--label-words a,,b" "--perturbation uniform" "--schedule step" "--master-dtype f16" \
           "--lr nan" "--warmup -1" "--dev-examples -1" "--train-examples 0" "--batch 0" "--task regression" \
           "--data $tmp/no-such-data.tsv" "--test $tmp"; do
  name=$(echo "$bad" | tr -cd '[:alnum:]')
  # shellcheck disable=SC2086
  if out=$("$bin" train $bad --out "$tmp/refused_$name" 2>&1); then bad "$bad accepted"
  elif [ -e "$tmp/refused_$name" ]; then bad "$bad: refused but left $tmp/refused_$name"
  else ok "$bad refused before anything was written: $(tail -1 <<<"$out")"; fi
done
"$bin" train "${run[@]}" --model "$tmp/no-such-model" --out "$tmp/refused_model" > "$tmp/refused_model.txt" 2>&1 &&
  bad "a missing model accepted"
[ ! -e "$tmp/refused_model" ] && ok "a start that fails at the model leaves no folder behind" ||
  bad "a failed start left: $(ls -A "$tmp/refused_model" | tr '\n' ' ')"

mkdir -p "$tmp/existing/notes"; echo "the user's" > "$tmp/existing/notes/file"
snapshot "$tmp/existing" > "$tmp/before_existing.txt"
"$bin" train "${run[@]}" --model "$tmp/no-such-model" --out "$tmp/existing" > /dev/null 2>&1 && bad "a missing model accepted"
snapshot "$tmp/existing" > "$tmp/after_existing.txt"
cmp -s "$tmp/before_existing.txt" "$tmp/after_existing.txt" && [ ! -e "$tmp/existing/.lock" ] &&
  ok "a failed start in a folder that existed leaves it as it was (no .lock either)" ||
  bad "a failed start changed an existing folder: $(ls -A "$tmp/existing" | tr '\n' ' ')"

# one run folder, one writer: a second start on a folder in use is refused at once
"$bin" train --steps 400 --eval-every 0 --checkpoint-every 0 --train-examples 32 --dev-examples 8 --batch 4 \
  --threads 1 --out "$tmp/busy" > "$tmp/busy.txt" 2>&1 &
first=$!
for _ in $(seq 100); do [ -f "$tmp/busy/seeds.log" ] && break; sleep 0.1; done
if out=$("$bin" train --steps 4 --train-examples 32 --dev-examples 8 --batch 4 --out "$tmp/busy" 2>&1); then
  bad "a second start on a folder in use was accepted"
else
  grep -q "another distzo process is using this run folder" <<<"$out" && ok "a second start on a busy folder is refused" ||
    bad "second start: $out"
fi
if out=$("$bin" train --resume --out "$tmp/busy" 2>&1); then bad "a resume of a folder in use was accepted"
else grep -q "another distzo process" <<<"$out" && ok "a resume of a busy folder is refused" || bad "busy resume: $out"; fi
kill "$first" 2>/dev/null; wait "$first" 2>/dev/null

# a resume with no checkpoint (the seed log replayed onto the base) takes the base model's
# scores, which start the best-so-far, from metrics.jsonl's row 0 instead of evaluating the
# base again (minutes on a large model), and ends as the uninterrupted run: here the best
# dev stays step 0's, so the summary's test score "at best dev (step 0)" is the base's.
# Without row 0 (killed before it was written) the base is evaluated, with the same result.
base=(--eval-every 0 --checkpoint-every 0 --train-examples 32 --dev-examples 8 --batch 4 --threads 1) # test: GLUE dev
summary() { grep "^done:" "$1" | sed -e "s/^done: [0-9]* steps in [0-9.]* s; //" -e "s/; run in .*//"; }
"$bin" train "${base[@]}" --steps 10 --out "$tmp/b10" > "$tmp/b10.txt" 2>&1 || bad "the 10-step run failed"
"$bin" train "${base[@]}" --steps 6 --out "$tmp/b6" > /dev/null 2>&1 || bad "the 6-step run failed"
cp -r "$tmp/b6" "$tmp/b6-no-row0"
"$bin" train --resume --steps 10 --out "$tmp/b6" > "$tmp/b6.txt" 2>&1 || bad "resume failed: $(tail -1 "$tmp/b6.txt")"
grep -q "resumed .*checkpoint after 0 steps, 6 steps replayed from the seed log, the base model's scores from metrics.jsonl" \
  "$tmp/b6.txt" && ok "a resume from the base takes the base's scores from metrics.jsonl" ||
  bad "resume from the base: $(grep resumed "$tmp/b6.txt")"
grep -q "at best dev (step 0)" "$tmp/b10.txt" && [ "$(summary "$tmp/b6.txt")" = "$(summary "$tmp/b10.txt")" ] &&
  [ "$(metrics "$tmp/b6" | grep '"step": 10,')" = "$(metrics "$tmp/b10" | grep '"step": 10,')" ] &&
  ok "... and ends as the uninterrupted run (summary, best at step 0, the last metrics row)" ||
  bad "resumed: $(summary "$tmp/b6.txt") / uninterrupted: $(summary "$tmp/b10.txt")"
sed -i '/"step": 0,/d' "$tmp/b6-no-row0/metrics.jsonl"
"$bin" train --resume --steps 10 --out "$tmp/b6-no-row0" > "$tmp/b6n.txt" 2>&1 || bad "resume without row 0 failed"
grep -q "the base model evaluated again (no scores at step 0 in metrics.jsonl)" "$tmp/b6n.txt" &&
  [ "$(grep -o 'at best dev (step 0) [0-9.]*' "$tmp/b6n.txt")" = "$(grep -o 'at best dev (step 0) [0-9.]*' "$tmp/b10.txt")" ] &&
  ok "without row 0 the base is evaluated again, the same best" ||
  bad "resume without row 0: $(grep resumed "$tmp/b6n.txt") / $(summary "$tmp/b6n.txt")"

# killed during its first evaluation: no row 0 and no step in the seed log (its 104-byte
# header only). The resume evaluates the base once, for the best-so-far and as row 0 (the
# evaluation at step 6 is the second), and logs the rows the uninterrupted run logged.
cp -r "$tmp/b6" "$tmp/b0"
truncate -s 104 "$tmp/b0/seeds.log" && : > "$tmp/b0/metrics.jsonl" && : > "$tmp/b0/metrics.csv"
DISTZO_PROGRESS_AFTER=0 "$bin" train --resume --steps 10 --out "$tmp/b0" > "$tmp/b0.txt" 2> "$tmp/b0.err" ||
  bad "resume of a run killed in its first evaluation failed: $(tail -1 "$tmp/b0.err")"
evals=$(tr '\r' '\n' < "$tmp/b0.err" | grep -c "evaluation: .* examples in")
[ "$evals" = 2 ] && [ "$(metrics "$tmp/b0")" = "$(metrics "$tmp/b10")" ] &&
  ok "a resume with no step and no row 0 evaluates the base once, the metrics as uninterrupted" ||
  bad "resume with no step: $evals evaluations (want 2); metrics: $(diff <(metrics "$tmp/b0") <(metrics "$tmp/b10") | head -4)"

# a damaged metrics.jsonl stops such a resume before it evaluates anything, naming the file
# and the line, and changes nothing in the folder
cp -r "$tmp/b10" "$tmp/bad-metrics"
sed -i '3s/.*/{"step": 2, "loss": oops}/' "$tmp/bad-metrics/metrics.jsonl"
snapshot() { (cd "$1" && md5sum run.json seeds.log metrics.jsonl); }
before=$(snapshot "$tmp/bad-metrics")
if DISTZO_PROGRESS_AFTER=0 "$bin" train --resume --steps 12 --out "$tmp/bad-metrics" > /dev/null 2> "$tmp/bm.err"; then
  bad "a resume over a damaged metrics.jsonl succeeded"
else
  grep -q "bad-metrics/metrics.jsonl:3: not a metrics line" "$tmp/bm.err" && ! grep -q "evaluation" "$tmp/bm.err" &&
    [ "$(snapshot "$tmp/bad-metrics")" = "$before" ] &&
    ok "a damaged metrics.jsonl stops a resume from the base before any evaluation, the folder unchanged" ||
    bad "damaged metrics.jsonl: $(tr '\r' '\n' < "$tmp/bm.err" | tail -2)"
fi

finish
