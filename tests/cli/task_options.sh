#!/usr/bin/env bash
# What each command does with a task's options and defaults (issue 27.11, 14, 17, 20):
# - train and eval share one default prompt (MeZO's "<sentence> It was" + " terrible" /
#   " great"): a run's step-0 test accuracy is eval's on the same rows, and both are the
#   Python reference's (tests/data/stories260k/sst2_dev_zeroshot.tsv, tools/ref_llama2c.py);
# - eval --task squad --predictions writes each question's answer, F1, EM and golds, and
#   eval and train refuse the options a task does not use (train: not a resumed run's
#   own settings); every task's --predictions file is written atomically;
# - a small jsonl with no dev file gets a dev set drawn from it (seeded, said in a line),
#   and best/ is written; its progress lines leave the missing test score out, and the
#   summary gives its dev scores (no test set: never nan);
# - generate --chat applies the model's chat template (SmolLM2's ChatML): the prompt's
#   ids are those of the ChatML text written out here.
# usage: task_options.sh DISTZO ASSETS DATA
set -u
bin=$1 assets=$2 data=$3
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
model=$assets/stories260K/stories260K.bin

# ---- one default prompt (27.14) ----
head -201 "$assets/sst2/dev.tsv" > "$tmp/test200.tsv"
# the reference's accuracy of " terrible" / " great" on those 200 rows (the other words give 0.495)
want=$(awk -F'\t' '$1 ~ /^[0-9]+$/ && $1 < 200 { n++; r += ($3 == $2) } END { if (n == 200) printf "%.6f", r / n }' \
         "$data/stories260k/sst2_dev_zeroshot.tsv")
"$bin" train --model "$model" --test "$tmp/test200.tsv" --train-examples 8 --dev-examples 4 --batch 4 --steps 1 \
  --threads 1 --out "$tmp/default" > "$tmp/default.txt" 2>&1 || bad "train with the defaults failed: $(tail -1 "$tmp/default.txt")"
step0=$(grep '^{"step": 0,' "$tmp/default/metrics.jsonl" 2>/dev/null | grep -o '"test_accuracy": [0-9.]*' | grep -o '[0-9.]*$')
ev=$("$bin" eval "$model" --data "$tmp/test200.tsv" --threads 1 --json 2>/dev/null | grep -o '"accuracy": [0-9.]*' | grep -o '[0-9.]*$')
awk -v a="$step0" -v b="$ev" -v w="$want" 'BEGIN { d1 = a - w; d2 = b - w; exit !(a != "" && b != "" && w != "" &&
    d1 * d1 < 1e-12 && d2 * d2 < 1e-12) }' &&
  ok "train's step 0 and eval score the base model alike with no flags ($step0 = $ev = the reference's $want)" ||
  bad "defaults differ: train's step 0 '$step0', eval '$ev', the reference's terrible/great '$want'"
grep -q '"label_words":[[:space:]]*"terrible,great"' "$tmp/default/run.json" &&
  ok "run.json records the default label words (terrible,great)" || bad "run.json: $(grep label_words "$tmp/default/run.json")"
for cmd in train eval; do
  "$bin" $cmd --help 2>&1 | grep -q -- "--label-words.*default terrible,great" && ok "$cmd --help names the one default" ||
    bad "$cmd --help: $("$bin" $cmd --help 2>&1 | grep -- --label-words)"
done

# ---- eval --task squad --predictions, and options a task does not use (27.11) ----
qa=$data/tasks/story_qa
"$bin" eval --task squad --data "$qa" --gen-tokens 8 --threads 1 --predictions "$tmp/qa.tsv" > "$tmp/qa.txt" 2>&1 ||
  bad "eval squad --predictions failed: $(tail -1 "$tmp/qa.txt")"
# F1 recomputed from each row's prediction and golds (SQuAD's normalize_answer on ASCII:
# lowercase, punctuation out, a/an/the out; token multiset overlap), and the mean = the printed F1
check=$(awk -F'\t' '
  function norm(s) { s = tolower(s); gsub(/[^a-z0-9 ]/, "", s); s = " " s " "; gsub(/ (a|an|the) /, " ", s); gsub(/ (a|an|the) /, " ", s); return s }
  function f1(p, g,   np, ng, i, j, a, b, used, same) {
    np = split(norm(p), a, " "); ng = split(norm(g), b, " "); same = 0; delete used
    for (i = 1; i <= np; i++) for (j = 1; j <= ng; j++) if (!(j in used) && a[i] == b[j]) { used[j] = 1; same++; break }
    return same ? 2 * (same / np) * (same / ng) / (same / np + same / ng) : 0 }
  NR == 1 { ok = ($1 == "index" && $2 == "f1" && $3 == "exact_match" && $4 == "prediction" && $5 == "gold0"); next }
  { best = 0; for (k = 5; k <= NF; k++) { x = f1($4, $k); if (x > best) best = x }
    d = best - $2; if (d * d > 1e-12 || $1 != NR - 2) ok = 0; sum += $2; n++ }
  END { if (ok && n) printf "%.2f %d", 100 * sum / n, n; else print "bad" }' "$tmp/qa.tsv" 2>/dev/null)
printed=$(grep -o 'examples, F1 [0-9.]*%' "$tmp/qa.txt" | grep -o '[0-9.]*%' | tr -d %)
[ -n "$printed" ] && [ "$check" = "$printed 4" ] &&
  ok "eval --task squad --predictions: 4 rows of answer, F1, EM, golds; F1 recomputed, mean = the printed $printed%" ||
  bad "squad predictions: '$check' vs printed '$printed': $(head -3 "$tmp/qa.tsv" 2>/dev/null)"
refused() { # WHY OPTION ARGS...: eval exits 1 naming the option
  local why=$1 opt=$2; shift 2
  "$bin" eval "$@" --threads 1 > "$tmp/r.txt" 2>&1
  local rc=$?
  [ "$rc" = 1 ] && grep -q -- "option $opt.*does not use it" "$tmp/r.txt" && ok "eval refuses $opt $why" ||
    bad "eval $*: exit $rc, $(tail -1 "$tmp/r.txt")"
}
refused "for lm" --gen-tokens --task lm --data "$assets/sst2/dev.tsv" --limit 1 --gen-tokens 5
refused "for squad" --batch --task squad --data "$qa" --batch 4
refused "for squad" --no-share-prompt --task squad --data "$qa" --no-share-prompt
refused "for sst2" --text-key --text-key sentence --limit 1
refused "for lm" --label-words --task lm --data "$assets/sst2/dev.tsv" --label-words a,b
refused "for copa" --gen-tokens --task copa --data "$data/tasks/COPA" --gen-tokens=3
refused "for lm" --special-tokens --task lm --data "$assets/sst2/dev.tsv" --special-tokens

printf 'Once upon a time there was a cat.\nShe liked to sleep in the sun.\n' > "$tmp/two.txt"
# train too refuses what its task cannot honour, before it makes the run folder, naming
# the option, where it came from and the task; a resumed run's own run.json never counts
echo '{"text_key": "sentence"}' > "$tmp/keys.json"
echo '{"gen-tokens": 9}' > "$tmp/gen.json"
train_refused() { # TASK OPTION ARGS...: exit 1, "option OPTION: --task TASK does not use it", no run folder
  local task=$1 opt=$2; shift 2
  rm -rf "$tmp/refused"
  "$bin" train --model "$model" --steps 1 --threads 1 --out "$tmp/refused" "$@" > "$tmp/r.txt" 2>&1
  local rc=$?
  [ "$rc" = 1 ] && grep -qF -- "option $opt: --task $task does not use it" "$tmp/r.txt" && [ ! -e "$tmp/refused" ] &&
    ok "train refuses $opt for $task" || bad "train $*: exit $rc, $(tail -1 "$tmp/r.txt"); $(ls "$tmp/refused" 2>/dev/null | head -3)"
}
lmdata=(--task lm --data "$tmp/two.txt")
train_refused sst2 "--gen-tokens" --gen-tokens 5
train_refused sst2 "--seq" --seq 8
train_refused sst2 "--text-key" --text-key sentence
train_refused lm "--template" "${lmdata[@]}" --template "x {text}"
train_refused lm "--label-words" "${lmdata[@]}" --label-words a,b
train_refused lm "--task-file" "${lmdata[@]}" --task-file "$tmp/keys.json"
train_refused lm "--no-share-prompt" "${lmdata[@]}" --no-share-prompt
train_refused lm "--special-tokens" "${lmdata[@]}" --special-tokens
train_refused squad "--no-share-prompt" --task squad --data "$qa" --no-share-prompt
train_refused copa "--template" --task copa --data "$data/tasks/COPA" --template "x {text}"
train_refused sst2 "--text-key (from --task-file)" --task-file "$tmp/keys.json"
train_refused sst2 "--gen-tokens (from --config)" --config "$tmp/gen.json"
# --special-tokens with a tokenizer whose encoder reads text only (llama2.c's): refused, no run folder
rm -rf "$tmp/sp260"
"$bin" train --model "$model" --special-tokens --steps 1 --threads 1 --out "$tmp/sp260" > "$tmp/sp260.txt" 2>&1
rc=$?
"$bin" eval "$model" --special-tokens --limit 2 --threads 1 > "$tmp/sp260e.txt" 2>&1
rce=$?
[ $rc = 1 ] && [ $rce = 1 ] && [ ! -e "$tmp/sp260" ] &&
  grep -q -- "--special-tokens: the model's llama2.c tokenizer reads a prompt as text only" "$tmp/sp260.txt" &&
  grep -q -- "--special-tokens: the model's llama2.c tokenizer reads a prompt as text only" "$tmp/sp260e.txt" &&
  ok "train and eval refuse --special-tokens with llama2.c's tokenizer, leaving no run folder" ||
  bad "--special-tokens on stories260K: train exit $rc, $(tail -1 "$tmp/sp260.txt"); eval $(tail -1 "$tmp/sp260e.txt")"
# ... GPT-2's vocab.json + merges.txt (OPT's, as distzo init writes it) likewise; serve
# refuses it at its start (before: it listened, and every worker failed), writing nothing
"$bin" init --preset opt-tiny --layers 1 --seed 2 -o "$tmp/opt1" > /dev/null 2>&1
"$bin" eval "$tmp/opt1" --special-tokens --template '</s>{text} It was' --limit 2 --threads 1 > "$tmp/spopt.txt" 2>&1
rc=$?
[ $rc = 1 ] && grep -q -- "--special-tokens: the model's GPT-2 (vocab.json + merges.txt) tokenizer reads a prompt as text only" \
  "$tmp/spopt.txt" && ok "eval refuses --special-tokens with a vocab.json + merges.txt tokenizer" ||
  bad "--special-tokens on OPT's vocab.json: exit $rc, $(tail -1 "$tmp/spopt.txt")"
echo 0123456789abcdef0123 > "$tmp/sp.token"
timeout 60 "$bin" serve --model "$model" --out "$tmp/spserve" --token-file "$tmp/sp.token" --listen 127.0.0.1:0 \
  --special-tokens --steps 2 --batch 2 --threads 1 > "$tmp/spserve.txt" 2>&1
rc=$?
[ $rc = 1 ] && [ ! -e "$tmp/spserve/run.json" ] &&
  grep -q -- "--special-tokens: the model's llama2.c tokenizer reads a prompt as text only" "$tmp/spserve.txt" &&
  ok "serve refuses --special-tokens with llama2.c's tokenizer at its start, writing no run.json" ||
  bad "serve --special-tokens on stories260K: exit $rc, $(tail -1 "$tmp/spserve.txt")"
"$bin" train --model "$model" "${lmdata[@]}" --seq 8 --steps 1 --threads 1 --out "$tmp/lmseq" > "$tmp/lmseq.txt" 2>&1 &&
  ok "train takes --seq for lm" || bad "train --task lm --seq 8: $(tail -1 "$tmp/lmseq.txt")"
# a resumed or branched run keeps its prompt: a --task-file given with it must say what its
# run.json says (before, the file was silently ignored, as its values fill only unset ones)
printf '{"template": "{text} All in all, it was", "label_words": ["bad", "good"]}' > "$tmp/tf_a.json"
printf '{"template": "{text} All in all, it was", "label_words": "terrible,great"}' > "$tmp/tf_b.json"
"$bin" train --model "$model" --test "$tmp/test200.tsv" --train-examples 8 --dev-examples 4 --batch 4 --steps 1 \
  --threads 1 --task-file "$tmp/tf_a.json" --out "$tmp/tfrun" > "$tmp/tfrun.txt" 2>&1 || bad "train --task-file: $(tail -1 "$tmp/tfrun.txt")"
"$bin" train --resume --out "$tmp/tfrun" --steps 2 --threads 1 --task-file "$tmp/tf_a.json" > "$tmp/tf1.txt" 2>&1 &&
  ok "train --resume takes the run's own --task-file" || bad "resume with the run's task file: $(tail -1 "$tmp/tf1.txt")"
"$bin" train --resume --out "$tmp/tfrun" --steps 3 --threads 1 --task-file "$tmp/tf_b.json" > "$tmp/tf2.txt" 2>&1
rc=$?
"$bin" train --resume-from "$tmp/tfrun:1" --out "$tmp/tfbranch" --steps 2 --threads 1 --task-file "$tmp/tf_b.json" > "$tmp/tf3.txt" 2>&1
rcb=$?
[ $rc = 1 ] && [ $rcb = 1 ] && [ ! -e "$tmp/tfbranch" ] && grep -q '"step": 2' "$tmp/tfrun/metrics.jsonl" && ! grep -q '"step": 3' "$tmp/tfrun/metrics.jsonl" &&
  grep -q "tf_b.json: \"label_words\" is 'terrible,great', .*tfrun/run.json's is 'bad,good': a resumed or branched run keeps its prompt" "$tmp/tf2.txt" &&
  grep -q "tf_b.json: \"label_words\" is 'terrible,great'" "$tmp/tf3.txt" &&
  ok "train --resume and --resume-from refuse a --task-file that differs from the run's, naming the file and field" ||
  bad "resume with another task file: exit $rc / $rcb, $(tail -1 "$tmp/tf2.txt") / $(tail -1 "$tmp/tf3.txt")"
cp -r "$tmp/default" "$tmp/resumed"
sed -i 's/"gen_tokens":[[:space:]]*0/"gen_tokens": 20/' "$tmp/resumed/run.json" # as a run from before this rule
"$bin" train --resume --out "$tmp/resumed" --steps 2 --threads 1 > "$tmp/resumed.txt" 2>&1 &&
  grep -q '"gen_tokens":[[:space:]]*20' "$tmp/resumed/run.json" && ok "train --resume keeps a run.json's own --gen-tokens on sst2" ||
  bad "resume of a run whose run.json has gen_tokens: $(tail -1 "$tmp/resumed.txt")"
"$bin" train --resume --out "$tmp/resumed" --steps 3 --gen-tokens 20 --threads 1 > "$tmp/resumed.txt" 2>&1
[ $? = 1 ] && grep -q -- "option --gen-tokens: --task sst2 does not use it" "$tmp/resumed.txt" &&
  ok "train --resume refuses --gen-tokens given for an sst2 run" || bad "resume --gen-tokens: $(tail -1 "$tmp/resumed.txt")"
"$bin" train --resume-from "$tmp/resumed:1" --out "$tmp/branched" --steps 2 --threads 1 > "$tmp/branched.txt" 2>&1 &&
  ok "train --resume-from keeps the old run.json's own --gen-tokens on sst2" ||
  bad "--resume-from a run whose run.json has gen_tokens: $(tail -1 "$tmp/branched.txt")"

# ---- --predictions written atomically (tmp, flush, rename), for every task ----
# A hard link stands for a reader that holds the old file: an atomic write replaces the
# name and leaves the old file whole; writing in place (fopen "w") would change it.
for task in sst2 lm; do
  args=(--limit 3) want="index	label	prediction	score0	score1" rows=4
  [ $task = lm ] && args=(--task lm --data "$tmp/two.txt") want="example	position	token	logprob" rows=
  echo old > "$tmp/pred_$task.tsv" && ln "$tmp/pred_$task.tsv" "$tmp/held_$task.tsv"
  "$bin" eval "${args[@]}" --threads 1 --predictions "$tmp/pred_$task.tsv" > "$tmp/pred_$task.txt" 2>&1 ||
    bad "eval --task $task --predictions failed: $(tail -1 "$tmp/pred_$task.txt")"
  n=$(wc -l < "$tmp/pred_$task.tsv")
  [ "$(cat "$tmp/held_$task.tsv")" = old ] && [ "$(head -1 "$tmp/pred_$task.tsv")" = "$want" ] &&
    [ "$n" = "${rows:-$n}" ] && [ "$n" -gt 1 ] && ! ls "$tmp"/pred_$task.tsv.tmp* > /dev/null 2>&1 &&
    ok "eval --task $task --predictions: written by rename ($n lines), the old file untouched, no temporary left" ||
    bad "$task predictions: old file now '$(head -1 "$tmp/held_$task.tsv")', new '$(head -1 "$tmp/pred_$task.tsv")' ($n lines)"
done
"$bin" eval --limit 3 --threads 1 --predictions "$tmp/no/such/p.tsv" > "$tmp/nodir.txt" 2>&1
[ $? = 1 ] && grep -q "no/such/p.tsv: cannot write predictions: .*no/such is not a folder this process can write" "$tmp/nodir.txt" &&
  ! grep -q accuracy "$tmp/nodir.txt" && ok "--predictions into a missing folder is refused before the evaluation" ||
  bad "--predictions into a missing folder: $(tail -1 "$tmp/nodir.txt")"

# ---- a small jsonl with no dev file keeps a dev set (27.17) ----
awk -F'\t' 'NR > 1 && NR <= 41 { s = $1; gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); printf "{\"text\": \"%s\", \"label\": %d}\n", s, $2 }' \
  "$assets/sst2/dev.tsv" > "$tmp/small.jsonl"
"$bin" train --model "$model" --task classify --data "$tmp/small.jsonl" --steps 4 --batch 4 --eval-every 1 --lr 1e-2 --eps 1e-2 \
  --threads 1 --out "$tmp/small" > "$tmp/small.txt" 2>&1 || bad "train on 40 examples failed: $(tail -1 "$tmp/small.txt")"
# 1000 + 500 asked of 40: 40 * 500 / 1500 = 13.3 -> 13 dev, 27 train
grep -q "has 40 examples, fewer than the 1000 train + 500 dev asked for: drawn (data seed 42) into 27 train and 13 dev" \
  "$tmp/small.txt" && grep -q "no --test file: the run reports its 13 dev examples' scores" "$tmp/small.txt" &&
  ok "a 40-example file is split 27 train + 13 dev; lines say so and that test scores are n/a" ||
  bad "no split line: $(grep -i examples "$tmp/small.txt" | head -2)"
# every dev accuracy logged is a multiple of 1/13: the dev set has 13 examples
grep -o '"dev_accuracy": [0-9.]*' "$tmp/small/metrics.jsonl" | grep -o '[0-9.]*$' |
  awk '{ x = $1 * 13; if (x - int(x + 0.5) > 1e-4 || int(x + 0.5) - x > 1e-4) bad = 1; n++ } END { exit bad || n != 5 }' &&
  [ -f "$tmp/small/best/model.safetensors" ] && ok "the drawn dev set is evaluated at every step (k/13) and best/ is written" ||
  bad "dev scores $(grep -o '"dev_accuracy": [^,]*' "$tmp/small/metrics.jsonl" | tr '\n' ' '); $(ls "$tmp/small")"

# with no test file, a step's line has no test part (it printed "test acc nan")
[ "$(grep -cE '^step [0-4]/4  .*dev acc [0-9.]+  best dev [0-9.]+$' "$tmp/small.txt")" = 5 ] && ! grep -qi nan "$tmp/small.txt" &&
  ok "no test file: the 5 evaluation lines give dev and best dev, no test score" ||
  bad "evaluation lines without a test file: $(grep -m2 'dev acc' "$tmp/small.txt" | tr '\n' '|')"
# ... and the summary gives the dev scores before, final and best, never nan
d0=$(grep '^{"step": 0,' "$tmp/small/metrics.jsonl" | grep -o '"dev_accuracy": [0-9.]*' | grep -o '[0-9.]*$')
grep -qE "^done: 4 steps in [0-9.]+ s; dev accuracy before $(printf '%.4f' "${d0:-9}"), final [0-9.]+, best \(step [0-4]\) [0-9.]+; run in " \
  "$tmp/small.txt" && ! grep -qi 'nan' "$tmp/small.txt" &&
  ok "no test set: the summary gives the dev accuracy before ($d0), final and best" ||
  bad "no test set: $(grep -E '^(done|step 0)' "$tmp/small.txt")"

# ---- generate --chat: the model's chat template (27.20) ----
"$bin" generate "$model" --chat --prompt hi -n 1 --threads 1 > "$tmp/nochat.txt" 2>&1
[ $? = 1 ] && grep -q "stories260K.bin: --chat: the tokenizer carries no chat template" "$tmp/nochat.txt" &&
  ok "generate --chat refuses a model without a chat template, naming it" || bad "no template: $(tail -1 "$tmp/nochat.txt")"
"$bin" generate "$model" --tokenizer "$assets/stories260K/tok512.bin" --chat --prompt hi -n 1 --threads 1 > "$tmp/nochat2.txt" 2>&1
[ $? = 1 ] && grep -q "tok512.bin: --chat: the tokenizer carries no chat template" "$tmp/nochat2.txt" &&
  ok "generate --chat with --tokenizer names the tokenizer it read" || bad "--tokenizer, no template: $(tail -1 "$tmp/nochat2.txt")"
"$bin" generate "$model" --system S -n 1 --threads 1 > "$tmp/nosys.txt" 2>&1
[ $? = 1 ] && grep -q "option --system: a system message needs --chat" "$tmp/nosys.txt" && ok "--system without --chat is refused" ||
  bad "--system alone: $(tail -1 "$tmp/nosys.txt")"
if have_assets "$assets" smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf; then
  smol=$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
  ids() { "$bin" generate "$smol" "$@" -n 1 --temperature 0 --threads 1 --json 2>/dev/null |
            grep -o '"prompt_tokens": \[[0-9, ]*\]' | grep -o '\[.*\]' | tr -d '[] '; }
  # ChatML as SmolLM2's template writes it: <|im_start|> (id 1) and <|im_end|> (id 2) split the
  # text, each part encoded alone (SmolLM2 adds no BOS): the ids of the text
  # "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
  want="1,$(ids --prompt $'system\nBe brief.'),2,$(ids --prompt $'\n'),1,$(ids --prompt $'user\nHi there'),2,$(ids --prompt $'\n'),1,$(ids --prompt $'assistant\n')"
  got=$(ids --chat --system "Be brief." --prompt "Hi there")
  [ -n "$got" ] && [ "$got" = "$want" ] && ok "generate --chat --system: the prompt's ids are the ChatML text's ($got)" ||
    bad "--chat ids '$got', the ChatML text's '$want'"
  own=$(ids --chat --prompt "Hi there")
  [ -n "$own" ] && [ "$own" = "$(ids --chat --system "You are a helpful AI assistant named SmolLM, trained by Hugging Face" --prompt "Hi there")" ] &&
    ok "generate --chat without --system: the template's own system message, as transformers renders it" ||
    bad "--chat without --system: '$own'"
  # --special-tokens: "<|im_start|>" in a classification template is its id (the ids
  # against Hugging Face's: test_tasks); without it the characters, and train and eval say so
  chat=$'<|im_start|>user\nReview: {text}\nSentiment:'
  head -9 "$assets/sst2/dev.tsv" > "$tmp/test8.tsv"
  smol_run() { # OUT ARGS...
    local out=$1; shift
    "$bin" train --model "$smol" --data "$assets/sst2/train.tsv" --test "$tmp/test8.tsv" --template "$chat" \
      --label-words negative,positive --train-examples 4 --dev-examples 2 --batch 2 --steps 1 --threads 1 --out "$out" "$@" \
      > "$out.txt" 2>&1
  }
  smol_run "$tmp/sp" --special-tokens || bad "train --special-tokens: $(tail -1 "$tmp/sp.txt")"
  smol_run "$tmp/nosp" || bad "train with <|im_start|> as text: $(tail -1 "$tmp/nosp.txt")"
  grep -q '"special_tokens":[[:space:]]*1' "$tmp/sp/run.json" && grep -q '"special_tokens":[[:space:]]*0' "$tmp/nosp/run.json" &&
    ! grep -q "special token" "$tmp/sp.txt" &&
    grep -q "warning: --template writes <|im_start|>, a special token of the tokenizer, as plain text" "$tmp/nosp.txt" &&
    ok "train --special-tokens is in run.json; without it train warns that <|im_start|> is read as text" ||
    bad "special_tokens in run.json: '$(grep special_tokens "$tmp/sp/run.json")' '$(grep special_tokens "$tmp/nosp/run.json")'; $(grep -c warning "$tmp/nosp.txt") warnings"
  "$bin" train --resume --out "$tmp/nosp" --steps 2 --special-tokens --threads 1 > "$tmp/nosp2.txt" 2>&1
  [ $? = 1 ] && grep -q -- "--special-tokens" "$tmp/nosp2.txt" && ok "train --resume refuses a --special-tokens the run did not have" ||
    bad "resume with --special-tokens: $(tail -1 "$tmp/nosp2.txt")"
  step0() { grep '^{"step": 0,' "$1/metrics.jsonl" | grep -o '"test_accuracy": [0-9.]*' | grep -o '[0-9.]*$'; }
  for f in "" --special-tokens; do
    "$bin" eval "$smol" --data "$tmp/test8.tsv" --template "$chat" --label-words negative,positive --threads 1 $f \
      --predictions "$tmp/ev$f.tsv" --json 2> "$tmp/ev$f.err" | grep -o '"accuracy": [0-9.]*' | grep -o '[0-9.]*$' > "$tmp/ev$f.acc"
  done
  same() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && (a - b) * (a - b) < 1e-12) }'; }
  ! cmp -s "$tmp/ev.tsv" "$tmp/ev--special-tokens.tsv" && same "$(step0 "$tmp/sp")" "$(cat "$tmp/ev--special-tokens.acc")" &&
    same "$(step0 "$tmp/nosp")" "$(cat "$tmp/ev.acc")" && grep -q "warning: --template writes <|im_start|>" "$tmp/ev.err" &&
    ! grep -q warning "$tmp/ev--special-tokens.err" &&
    ok "eval --special-tokens scores the token (other scores than the text), each train's step 0 is eval's alike" ||
    bad "eval --special-tokens: step 0 $(step0 "$tmp/sp") / $(step0 "$tmp/nosp"), eval $(cat "$tmp/ev--special-tokens.acc") / $(cat "$tmp/ev.acc")"
  printf '{"template": "<|im_start|>user\\nReview: {text}\\nSentiment:", "label_words": ["negative", "positive"], "special_tokens": true}' \
    > "$tmp/chat.json"
  "$bin" eval "$smol" --data "$tmp/test8.tsv" --task-file "$tmp/chat.json" --threads 1 --predictions "$tmp/tf.tsv" > /dev/null 2>&1
  cmp -s "$tmp/tf.tsv" "$tmp/ev--special-tokens.tsv" && ok "a --task-file's \"special_tokens\": true is --special-tokens" ||
    bad "--task-file special_tokens: $(head -2 "$tmp/tf.tsv" 2>/dev/null)"
  echo '{"special_tokens": "yes"}' > "$tmp/bad_sp.json"
  "$bin" eval "$smol" --data "$tmp/test8.tsv" --task-file "$tmp/bad_sp.json" --threads 1 > "$tmp/bad_sp.txt" 2>&1
  [ $? = 1 ] && grep -q "bad_sp.json: field 'special_tokens' must be true or false" "$tmp/bad_sp.txt" &&
    ok "a --task-file's special_tokens that is no boolean is refused, naming the file and field" ||
    bad "special_tokens \"yes\": $(tail -1 "$tmp/bad_sp.txt")"
  # a run's checkpoint is scored as the run scored it; the same folder outside the run, as text
  cp -r "$tmp/sp/checkpoint-1" "$tmp/loose"
  "$bin" eval "$tmp/sp/checkpoint-1" --data "$tmp/test8.tsv" --threads 1 --predictions "$tmp/run.tsv" > /dev/null 2>&1
  "$bin" eval "$tmp/sp/checkpoint-1" --data "$tmp/test8.tsv" --threads 1 --special-tokens --predictions "$tmp/run_sp.tsv" > /dev/null 2>&1
  "$bin" eval "$tmp/loose" --data "$tmp/test8.tsv" --template "$chat" --label-words negative,positive --threads 1 \
    --predictions "$tmp/loose.tsv" > /dev/null 2>&1
  [ -s "$tmp/run.tsv" ] && cmp -s "$tmp/run.tsv" "$tmp/run_sp.tsv" && [ -s "$tmp/loose.tsv" ] && ! cmp -s "$tmp/run.tsv" "$tmp/loose.tsv" &&
    ok "eval of a run's checkpoint reads the run's --special-tokens from run.json" ||
    bad "eval of a --special-tokens run's checkpoint: $(wc -l < "$tmp/run.tsv") lines, as with the flag: $(cmp -s "$tmp/run.tsv" "$tmp/run_sp.tsv" && echo yes)"
fi

finish
