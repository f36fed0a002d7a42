#!/usr/bin/env bash
# The command line's own rules (issue 27: 3, 2's parsing, 10's floats, 19's messages):
# no value a user types is taken for "not given", seeds are 0..2^63-1 exactly, floats are
# decimal, a typo gets "did you mean", a broken JSON file names the line and column, and
# a run folder given as a model stands for its best/ checkpoint.
# usage: options.sh DISTZO_BINARY ASSETS_DIR
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/dev.tsv
stories=$assets/stories260K/stories260K.bin
head -9 "$assets/sst2/dev.tsv" > "$tmp/dev8.tsv"
tiny=(--model "$stories" --data "$tmp/dev8.tsv" --train-examples 4 --dev-examples 2 --batch 2 --threads 1)

# refused NAME REGEX -- command...: exits non-zero (no signal), stderr matches, within 60 s
refused() {
  local name=$1 regex=$2 out rc
  shift 3
  out=$(timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -lt 128 ] && grep -Eq -- "$regex" <<<"$out"; then ok "$name: $out"
  else bad "$name (exit $rc, wanted /$regex/): $out"; fi
}

# ---- 27.3: "not given" is no value a user can type ----
refused "train --steps -1 (was: 4000 steps)" "steps -1.*at least 1" -- "$bin" train "${tiny[@]}" --steps -1 --out "$tmp/r1"
refused "train --steps 0" "steps 0.*at least 1" -- "$bin" train "${tiny[@]}" --steps 0 --out "$tmp/r2"
[ ! -e "$tmp/r1" ] && ok "a refused --steps left no run folder" || bad "train --steps -1 wrote $tmp/r1"
refused "serve --steps 0 (was: 1000 rounds)" "option --steps: 0" -- "$bin" serve --steps 0 --out "$tmp/s1"
refused "serve --steps -1" "option --steps: -1" -- "$bin" serve --steps -1 --out "$tmp/s2"
refused "serve --seed-pool -1 (was: no pool)" "option --seed-pool: -1" -- "$bin" serve --seed-pool -1 --out "$tmp/s3"
refused "plan --overhead-mb -1 (was: the measured default)" "option --overhead-mb: -1" -- \
  "$bin" plan --model opt-125m --mem-per-node 8 --overhead-mb -1
refused "plan --overhead-mpi-mb -1" "option --overhead-mpi-mb: -1" -- \
  "$bin" plan --model opt-125m --mem-per-node 8 --overhead-mpi-mb -1
# 0 that stood for the default where 0 is no value: refused when given
refused "train --seq 0 (was: the model's maximum)" "option --seq: 0 tokens" -- \
  "$bin" train "${tiny[@]}" --task lm --seq 0 --steps 1 --out "$tmp/q1"
refused "serve --seq 0" "option --seq: 0 tokens" -- "$bin" serve --task lm --seq 0 --out "$tmp/q2"
refused "train --gen-tokens 0 (was: 50)" "option --gen-tokens: 0 tokens" -- \
  "$bin" train "${tiny[@]}" --gen-tokens 0 --steps 1 --out "$tmp/q3"
refused "eval --gen-tokens -3 (was: 50)" "option --gen-tokens: -3 tokens" -- "$bin" eval "$stories" --gen-tokens -3 --limit 2
refused "plan --seq 0 (was: 64)" "option --seq: 0 tokens" -- "$bin" plan --model opt-125m --mem-per-node 8 --seq 0
refused "bench step --max-resident -1" "option --max-resident: -1 MB is negative" -- "$bin" bench step --model "$stories" \
  --store "disk:$tmp/b.store" --max-resident -1
refused "bench step --max-resident without a store" "option --max-resident: without --store disk:PATH" -- \
  "$bin" bench step --model "$stories" --max-resident 100
refused "bench step --master-dtype f16" "'f16' is not f32 or bf16" -- "$bin" bench step --model "$stories" --master-dtype f16
refused "bench step --perturbation uniform" "option --perturbation: 'uniform' is not gaussian or rademacher" -- \
  "$bin" bench step --model "$stories" --perturbation uniform
# negative counts and times that meant "never" or "none" without a word
refused "train --verify-every -1 (was: never, silently)" "verify-every -1 is negative" -- \
  "$bin" train "${tiny[@]}" --verify-every -1 --steps 1 --out "$tmp/q4"
[ ! -e "$tmp/q4" ] && ok "a refused --verify-every left no run folder" || bad "train --verify-every -1 wrote $tmp/q4"
echo "options-test-token-0123456789abcdef" > "$tmp/token"
refused "serve --linger -1 (was: served, no linger)" "option --linger: -1 is negative" -- \
  "$bin" serve --token-file "$tmp/token" --listen 127.0.0.1:0 --linger -1 --out "$tmp/q5"
[ ! -e "$tmp/q5" ] && ok "a refused --linger left no run folder" || bad "serve --linger -1 wrote $tmp/q5"
a=$("$bin" plan --model opt-125m --mem-per-node 8 --json 2>&1)
b=$("$bin" plan --model opt-125m --mem-per-node 8 --overhead-mb 0 --json 2>&1)
[ "$a" != "$b" ] && grep -q '"overhead_bytes": 0,' <<<"$b" && ok "plan --overhead-mb 0 is a value, not the default" ||
  bad "plan --overhead-mb 0: $b"

# ---- 27.2: seeds are 0..2^63-1, exactly ----
range="outside 0\.\.9223372036854775807"
refused "train --seed -1 (was: wrapped to 2^64-1)" "option --seed: '-1' is $range" -- "$bin" train "${tiny[@]}" --seed -1 --out "$tmp/r3"
refused "train --seed 2^63" "option --seed: '9223372036854775808' is $range" -- \
  "$bin" train "${tiny[@]}" --seed 9223372036854775808 --out "$tmp/r4"
refused "train --data-seed 2^64" "option --data-seed: '18446744073709551616' is $range" -- \
  "$bin" train "${tiny[@]}" --data-seed 18446744073709551616 --out "$tmp/r5"
refused "generate --seed -5" "option --seed: '-5' is $range" -- "$bin" generate "$stories" --seed -5 -n 2
refused "init --seed abc" "option --seed: 'abc' is not an integer" -- "$bin" init --seed abc -o "$tmp/i1"
# 2^53 + 1 is no double: it must reach the sampler as itself (2^53 is its nearest double)
g1=$("$bin" generate "$stories" --seed 9007199254740993 -n 24 --json 2>/dev/null | grep -o '"tokens": \[[^]]*\]')
g2=$("$bin" generate "$stories" --seed 9007199254740992 -n 24 --json 2>/dev/null | grep -o '"tokens": \[[^]]*\]')
g3=$("$bin" generate "$stories" --seed 9223372036854775807 -n 24 --json 2>/dev/null | grep -o '"tokens": \[[^]]*\]')
[ -n "$g1" ] && [ -n "$g2" ] && [ -n "$g3" ] && [ "$g1" != "$g2" ] &&
  ok "generate --seed 2^53+1, 2^53 and 2^63-1 accepted, 2^53+1 and 2^53 sample differently" ||
  bad "seeds around 2^53: '$g1' '$g2' '$g3'"
"$bin" train "${tiny[@]}" --seed 9007199254740993 --steps 1 --eval-every 0 --out "$tmp/big_seed" > /dev/null 2>&1 &&
  ok "train --seed 2^53+1 runs" || bad "train --seed 9007199254740993 failed"

# ---- 27.10: floats are decimal ----
for v in 0x10 0X1p4 inf -inf nan infinity 1e5x ''; do
  refused "train --lr '$v'" "option --lr: '$v' is not a decimal number" -- "$bin" train "${tiny[@]}" --lr "$v" --out "$tmp/r6"
done
refused "generate --temperature 0x1" "option --temperature: '0x1' is not a decimal number" -- "$bin" generate "$stories" --temperature 0x1
for v in 1e-50 1e-39; do # below a float's normal range: said so (they read as "not a decimal number")
  refused "train --lr $v" "option --lr: '$v' is below a float's smallest normal value" -- "$bin" train "${tiny[@]}" --lr $v \
    --out "$tmp/r6"
done
for o in "--sparse-density 0.5" "--lozo-rank 4" "--lozo-nu 1" "--hizoo-smooth 0.01" "--hizoo-rank 1"; do
  refused "train $o under mezo" "option ${o%% *}: without --estimator" -- "$bin" train "${tiny[@]}" $o --out "$tmp/r6c"
done
refused "train --pertp 2 in one process" "--pertp 2 does not divide the 1 rank" -- "$bin" train "${tiny[@]}" --pertp 2 \
  --out "$tmp/r6b"
refused "train --steps 1e3 (an integer option)" "option --steps: '1e3' is not an integer" -- "$bin" train --steps 1e3
refused "train --steps 99999999999" "option --steps: '99999999999' is outside" -- "$bin" train --steps 99999999999
"$bin" train "${tiny[@]}" --lr 1e-5 --eps .001 --steps 1 --eval-every 0 --out "$tmp/decimal" > /dev/null 2>&1 &&
  ok "decimal floats (1e-5, .001) accepted" || bad "train --lr 1e-5 --eps .001 failed"

# ---- 27.19: messages that say more ----
refused "a mistyped option" "unknown option '--stpes' \(did you mean --steps\?\)" -- "$bin" train --stpes 3
refused "a mistyped option of eval" "unknown option '--lable-words' \(did you mean --label-words\?\)" -- "$bin" eval --lable-words a,b
refused "an option far from any" "unknown option '--frobnicate' \(see --help\)" -- "$bin" train --frobnicate 3
refused "a mistyped command" "unknown command 'trian' \(did you mean train\?\)" -- "$bin" trian
printf '{"lr": 1e-5,\n "steps": 3,\n}\n' > "$tmp/comma.json"
refused "--config with a trailing comma" "comma.json: line 2, column 12: a trailing comma" -- \
  "$bin" train --config "$tmp/comma.json" --out "$tmp/r7"
printf '{"lr": 1e-5,\n "steps" 3}\n' > "$tmp/colon.json"
refused "--config missing a colon" "colon.json: line 2, column 10: not valid JSON" -- \
  "$bin" train --config "$tmp/colon.json" --out "$tmp/r8"
printf '{"template": "{text} It was",\n  "label_words": ["bad", "good",]}\n' > "$tmp/task.json"
refused "--task-file with a trailing comma" "task.json: line 2, column 32: a trailing comma" -- \
  "$bin" eval "$stories" --task-file "$tmp/task.json" --limit 2
# a task file's field is never dropped: a misspelt key, a key given twice, a string too
# long to keep (each once ran with the default prompt, exit 0)
printf '{"templat": "Review: {text} Verdict:"}\n' > "$tmp/task_typo.json"
refused "--task-file with a misspelt key" "task_typo.json: unknown field 'templat'" -- \
  "$bin" eval "$stories" --task-file "$tmp/task_typo.json" --limit 2
printf '{"template": "{text} a", "template": "{text} b"}\n' > "$tmp/task_twice.json"
refused "--task-file with a key given twice" "task_twice.json: field 'template' is given twice" -- \
  "$bin" eval "$stories" --task-file "$tmp/task_twice.json" --limit 2
printf '{"template": "{text}%*s"}\n' 5000 x > "$tmp/task_long.json"
refused "--task-file with a 5,000-byte template" "task_long.json: field 'template' is too long" -- \
  "$bin" eval "$stories" --task-file "$tmp/task_long.json" --limit 2
printf '{"lr": 1e-5} garbage\n' > "$tmp/garbage.json"
refused "--config with text after the object" "garbage.json: text after the JSON object \(line 1, column 14" -- \
  "$bin" train --config "$tmp/garbage.json" --out "$tmp/r10"
printf '{"lr": 1e-5, "steps": 3, "lr": 2e-5}\n' > "$tmp/twice.json"
refused "--config with a key given twice" "twice.json: key 'lr' is given twice" -- "$bin" train --config "$tmp/twice.json" --out "$tmp/r11"
# a config's value is read as the command line's would be, or refused naming the file and
# the field: each of these once ran (a 1-example batch, the last spelling, a zero lr, the
# start of a run read from a file)
refused_config() { # name, message, JSON
  printf '%s\n' "$3" > "$tmp/cfg.json"
  refused "$1" "$2" -- "$bin" train --config "$tmp/cfg.json" --out "$tmp/r12"
  [ ! -e "$tmp/r12" ] || bad "$1: left a run folder"
}
refused_config "--config with batch true" "cfg.json: field 'batch' must be an integer, not true" '{"batch": true}'
refused_config "--config with two spellings of --weight-decay" \
  "cfg.json: keys 'weight-decay' and 'weight_decay' both set --weight-decay" '{"weight-decay": 0.1, "weight_decay": 0.5}'
refused_config "--config with --perturbation and its run.json key" "keys 'perturbation' and 'rademacher' both set" \
  '{"perturbation": "rademacher", "rademacher": "gaussian"}'
refused_config "--config with lr 1e-50" "cfg.json: field 'lr': 1e-50 is outside a float's normal range" '{"lr": 1e-50}'
refused_config "--config with master-dtype f16" "cfg.json: field 'master-dtype': 'f16' is not f32 or bf16" '{"master-dtype": "f16"}'
refused_config "--config with resume-from" "cfg.json: key 'resume-from': which run to start from is the command line's" \
  '{"resume-from": "old:2"}'
refused_config "--config with sparse-density under mezo" "sparse-density 0.5 without --estimator sparse: it would be ignored" \
  '{"sparse-density": 0.5}'
# a run.json as --config (a branch) with another method on the command line: the file's
# method's own settings return to their defaults (they were refused as another method's)
"$bin" train "${tiny[@]}" --steps 1 --eval-every 0 --checkpoint-every 0 --estimator fzoo --fzoo-directions 3 --lr 1e-6 \
  --out "$tmp/fz" > /dev/null 2>&1 || bad "the FZOO run to branch from failed"
"$bin" train "${tiny[@]}" --steps 1 --eval-every 0 --checkpoint-every 0 --peft prefix --prefix-tokens 3 \
  --out "$tmp/pre" > /dev/null 2>&1 || bad "the prefix run to branch from failed"
branch() { # name, run, grep -E of the branch's run.json fields (one line), options
  local name=$1 run=$2 want=$3
  shift 3
  rm -rf "$tmp/br"
  if out=$("$bin" train --config "$tmp/$run/run.json" --out "$tmp/br" "$@" 2>&1) &&
     tr -d ' \t\n' < "$tmp/br/run.json" | grep -Eq "$want"; then ok "$name"
  else bad "$name: $(tail -1 <<<"$out") $(tr -d ' \t\n' < "$tmp/br/run.json" 2>/dev/null)"; fi
}
branch "a FZOO run.json branched with --fzoo-directions 4" fz '"spsa_samples":4,.*"estimator":"fzoo",.*"fzoo_directions":4' \
  --fzoo-directions 4
branch "a FZOO run.json branched into MeZO: q 1, Gaussian" fz '"spsa_samples":1,.*"rademacher":"gaussian",.*"estimator":"mezo"' \
  --estimator mezo
branch "a prefix run.json branched into LoRA" pre '"peft":"lora"' --peft lora
# other options checked before the work: an eval that would write its predictions over its
# data, an empty --predictions, init's --std, a float out of range, generate's -n past the context
head -5 "$assets/sst2/dev.tsv" > "$tmp/dev4.tsv"
refused "eval --predictions onto its --data" "dev4.tsv, which eval reads: it would be replaced" -- \
  "$bin" eval "$stories" --data "$tmp/dev4.tsv" --predictions "$tmp/dev4.tsv"
[ "$(wc -l < "$tmp/dev4.tsv")" = 5 ] || bad "the data file was changed"
"$bin" train "${tiny[@]}" --steps 1 --eval-every 0 --node-size 2 --verify-every 5 --out "$tmp/one" > /dev/null 2> "$tmp/one.err" &&
  grep -q -- "--node-size: this run is one process (not under mpirun): it has no effect" "$tmp/one.err" &&
  grep -q -- "--verify-every: this run is one process" "$tmp/one.err" &&
  ok "mpirun's options in one process: said" || bad "mpirun's options in one process: $(cat "$tmp/one.err")"
# JSON output names a path with a quote and a backslash escaped (bench step printed it raw)
odd="$tmp/q\"d\\x"; mkdir -p "$odd" && cp "$stories" "$odd/m.bin" && cp "$assets/stories260K/tok512.bin" "$odd/tokenizer.bin"
out=$("$bin" bench step --model "$odd/m.bin" --batch 1 --seq 8 --steps 1 --threads 1 --json 2>/dev/null)
grep -qF '"model": "'"${tmp}"'/q\"d\\x/m.bin", "batch": 1,' <<<"$out" && ok "bench step --json escapes the model's path" ||
  bad "bench step --json with a quote in the path: $out"
refused "plan --seq 1" "option --seq: 1 tokens; give at least 2" -- "$bin" plan --model opt-125m --mem-per-node 8 --seq 1
refused "bench forward --seconds 0" "option --seconds: 0; give a positive time" -- "$bin" bench forward --model "$stories" --seconds 0
refused "train --pertp 0" "option --pertp: 0; 1 or 2" -- "$bin" train "${tiny[@]}" --pertp 0 --out "$tmp/p0"
refused "train --dp 0" "option --dp: 0; give a positive count" -- "$bin" train "${tiny[@]}" --dp 0 --out "$tmp/p0"
refused "train --out ''" "option --out: an empty path" -- "$bin" train "${tiny[@]}" --out ""
refused "eval --predictions ''" "option --predictions: an empty path" -- "$bin" eval "$stories" --data "$tmp/dev4.tsv" --predictions ""
refused "init --std -1" "option --std: -1 is not a finite number >= 0" -- "$bin" init --preset opt-tiny --std -1 -o "$tmp/std"
refused "a float option past a float's range" "'1e40' is out of a float's range" -- "$bin" init --preset opt-tiny --std 1e40 -o "$tmp/std"
# the room said is what is generated: the last token is sampled from the last position and
# needs none of its own (512 from a 1-token prompt; it said 511), and greedy says that
# --seed does nothing
out=$("$bin" generate "$stories" -n 100000 --temperature 0 --seed 3 --json 2> "$tmp/gen.err") &&
  grep -q "warning: -n 100000: the prompt's 1 tokens and the model's 512 positions leave room for 512" "$tmp/gen.err" &&
  [ "$(grep -o '"tokens": \[[^]]*\]' <<<"$out" | tr -cd ',' | wc -c)" = 511 ] &&
  grep -q "temperature 0 is greedy: --top-p and --seed have no effect" "$tmp/gen.err" &&
  ok "generate -n past the context: said, then generated" || bad "generate -n 100000: $(cat "$tmp/gen.err")"
printf 'Once upon a time\r\nthere was a cat.\r\n' > "$tmp/crlf.txt"
"$bin" eval "$stories" --task lm --data "$tmp/crlf.txt" > /dev/null 2> "$tmp/crlf.err" &&
  grep -q "crlf.txt:1: Windows line ends" "$tmp/crlf.err" && ok "a plain-text LM file with CRLF line ends: warned, then scored as it is" ||
  bad "CRLF LM text: $(tail -1 "$tmp/crlf.err")"
printf '[1, 2]\n' > "$tmp/array.json"
refused "--config that is an array" "array.json: not a JSON object" -- "$bin" train --config "$tmp/array.json" --out "$tmp/r9"

# eval RUN: a run folder stands for its best/ checkpoint, said so; without one, what to pass
"$bin" train "${tiny[@]}" --steps 2 --eval-every 0 --out "$tmp/run" > /dev/null 2>&1 || bad "train for eval RUN failed"
[ -d "$tmp/run/best" ] || cp -r "$tmp/run/checkpoint-2" "$tmp/run/best" # best/ is not written when step 0 stays best
want=$("$bin" eval "$tmp/run/best" --data "$tmp/dev8.tsv" 2>/dev/null | head -1 | sed 's/ ([0-9.]* s)$//')
out=$("$bin" eval "$tmp/run" --data "$tmp/dev8.tsv" 2>"$tmp/eval_run.err" | head -1 | sed 's/ ([0-9.]* s)$//')
grep -q "run folder: using its best checkpoint, $tmp/run/best" "$tmp/eval_run.err" && [ -n "$want" ] &&
  [ "${out#*: }" = "${want#*: }" ] && ok "eval RUN evaluates RUN/best, saying so: $out" ||
  bad "eval RUN: '$out' vs RUN/best '$want': $(cat "$tmp/eval_run.err")"
rm -rf "$tmp/run/best"
refused "eval RUN without best/" "run is a run folder with no best/ checkpoint yet: name one of its checkpoints \(.*/run/checkpoint-2\)" -- \
  "$bin" eval "$tmp/run" --data "$tmp/dev8.tsv"
refused "info RUN without best/" "no best/ checkpoint yet" -- "$bin" info "$tmp/run"

finish
