#!/usr/bin/env bash
# Bad input through the command line: every case must exit non-zero, print an error
# naming the file (and field or line) at fault, and not crash (no signal exit).
# usage: bad_input.sh DISTZO_BINARY TEST_DATA_DIR ASSETS_DIR
set -u
bin=$1 data=$2 assets=$3
. "$(dirname "$0")/lib.sh"

# expect NAME REGEX -- command...
expect() {
  local name=$1 regex=$2
  shift 3
  local out rc
  out=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -Eq -- "$regex" <<<"$out"; then
    pass=$((pass + 1)); echo "ok - $name: $out"
  else
    fail=$((fail + 1)); echo "FAIL - $name (exit $rc, wanted /$regex/): $out"
  fi
}

model() { rm -rf "$tmp/$1"; cp -r "$data/hf/opt_preln" "$tmp/$1"; echo "$tmp/$1"; }

m=$(model truncated); truncate -s 5000 "$m/model.safetensors"
expect "truncated safetensors" "model.safetensors.*(past|beyond|end|truncat)" -- "$bin" info "$m"

m=$(model hdrlen); printf '\xff\xff\xff\xff\xff\xff\x00\x00' | dd of="$m/model.safetensors" bs=1 seek=0 conv=notrunc status=none
expect "header length past the file" "model.safetensors.*header" -- "$bin" info "$m"

m=$(model badjson); echo '{"model_type": "opt", "hidden_size": ' > "$m/config.json"
expect "malformed config.json" "config.json" -- "$bin" info "$m"

m=$(model missingfield); sed -i '/"num_hidden_layers"/d' "$m/config.json"
expect "config.json missing field" "config.json.*num_hidden_layers" -- "$bin" info "$m"

m=$(model shape); sed -i 's/"hidden_size": *[0-9]*/"hidden_size": 64/' "$m/config.json"
expect "config disagrees with tensor shapes" "model.safetensors.*shape" -- "$bin" info "$m"

m=$(model fewer); sed -i -E 's/"num_hidden_layers": *2/"num_hidden_layers": 1/' "$m/config.json"
expect "config.json with fewer layers than the checkpoint (its last dropped)" \
  "tensor 'model.decoder.layers.1.*' is for layer 1, but config.json gives 1 layers" -- "$bin" info "$m"

m=$(model nofile); rm "$m/model.safetensors"
expect "no safetensors file" "model.safetensors" -- "$bin" info "$m"

if have_assets "$assets" stories260K/stories260K.bin stories260K/tok512.bin smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf; then
  head -c 100000 "$assets/stories260K/stories260K.bin" > "$tmp/short.bin"
  expect "truncated llama2.c checkpoint" "short.bin.*bytes" -- "$bin" info "$tmp/short.bin"
  cp "$assets/stories260K/stories260K.bin" "$tmp/stories.bin"
  head -c 3000 "$assets/stories260K/tok512.bin" > "$tmp/tok512.bin"
  expect "truncated tokenizer" "tok512.bin" -- "$bin" generate "$tmp/stories.bin" -n 5
  # a tokenizer.bin with bytes after its tokens, a NaN score, a max_token_length below its
  # longest token: each was read (generate ran)
  { cat "$assets/stories260K/tok512.bin"; head -c 100 /dev/zero; } > "$tmp/tok_tail.bin"
  expect "tokenizer.bin with bytes after its tokens" "tok_tail.bin: 100 bytes after its 512 tokens" -- \
    "$bin" generate "$tmp/stories.bin" --tokenizer "$tmp/tok_tail.bin" -n 2
  cp "$assets/stories260K/tok512.bin" "$tmp/tok_nan.bin"
  printf '\x00\x00\xc0\x7f' | dd of="$tmp/tok_nan.bin" bs=1 seek=4 conv=notrunc status=none # token 0's score
  expect "tokenizer.bin with a NaN score" "tok_nan.bin: token 0: score nan is not a finite number" -- \
    "$bin" generate "$tmp/stories.bin" --tokenizer "$tmp/tok_nan.bin" -n 2
  cp "$assets/stories260K/tok512.bin" "$tmp/tok_max0.bin"
  printf '\x00\x00\x00\x00' | dd of="$tmp/tok_max0.bin" bs=1 seek=0 conv=notrunc status=none
  expect "tokenizer.bin with max_token_length 0" "tok_max0.bin: token 0 is [0-9]+ bytes, longer than max_token_length 0" -- \
    "$bin" generate "$tmp/stories.bin" --tokenizer "$tmp/tok_max0.bin" -n 2
  printf 'sentence\tlabel\nfine movie\t1\nbad movie\t7\n' > "$tmp/bad.tsv"
  expect "bad SST-2 label" "bad.tsv:3" -- "$bin" eval "$assets/stories260K/stories260K.bin" --data "$tmp/bad.tsv"
  printf '{"text": "ok", "label": 0}\n{"text": 5, "label": 1}\n' > "$tmp/bad.jsonl"
  expect "bad jsonl line" "bad.jsonl:2.*text" -- "$bin" eval "$assets/stories260K/stories260K.bin" --task classify --data "$tmp/bad.jsonl"
  # a key given twice (Python reads the last, cJSON the first) and an LM row with both forms
  printf '{"text": "ok", "label": 0}\n{"text": "fine", "label": 1, "label": 0}\n' > "$tmp/twice.jsonl"
  expect "jsonl key given twice" 'twice.jsonl:2: key "label" is given twice' -- \
    "$bin" eval "$assets/stories260K/stories260K.bin" --task classify --data "$tmp/twice.jsonl"
  # the same candidate twice: a tie was scored as the label's (100% on such rows)
  printf '{"text": "a", "label": 0, "candidates": ["x", "y"]}\n{"text": "b", "label": 1, "candidates": ["x", "z", "x"]}\n' \
    > "$tmp/cands_twice.jsonl"
  expect "a candidate given twice" 'cands_twice.jsonl:2: key "candidates": entries 0 and 2 are both "x"' -- \
    "$bin" eval "$assets/stories260K/stories260K.bin" --task classify --data "$tmp/cands_twice.jsonl"
  printf '{"text": "Once upon a time"}\n{"text": "a", "prompt": "b", "completion": "c"}\n' > "$tmp/both.jsonl"
  expect "LM row with text and prompt" 'both.jsonl:2: both "text" and "prompt"/"completion"' -- \
    "$bin" eval "$assets/stories260K/stories260K.bin" --task lm --data "$tmp/both.jsonl"
  expect "bad label words" "label" -- "$bin" eval --label-words "great" --limit 2
  printf '{"template": 5}' > "$tmp/task.json"
  expect "bad task file" "task.json.*template" -- "$bin" eval --task-file "$tmp/task.json" --limit 2
  printf '{"template": "no placeholder", "label_words": ["a", "b"]}' > "$tmp/task2.json"
  expect "task file template without {text}" "text" -- "$bin" train --task-file "$tmp/task2.json" --steps 1 --out "$tmp/run"
  printf 'index\tsentence\n0\tfine movie\n1\tbad movie\n' > "$tmp/unlabelled.tsv"
  expect "training rows without a label" "unlabelled.tsv:2.*no label" -- "$bin" train --model "$assets/stories260K/stories260K.bin" \
    --data "$tmp/unlabelled.tsv" --steps 1 --out "$tmp/run_unlabelled"
  mkfifo "$tmp/fifo.tsv"
  expect "a FIFO as training data" "fifo.tsv: not a regular file" -- "$bin" eval "$assets/stories260K/stories260K.bin" --data "$tmp/fifo.tsv"
  expect "a device as training data" "/dev/zero: not a regular file" -- "$bin" eval "$assets/stories260K/stories260K.bin" --data /dev/zero
  # a GGUF model runs from its file alone: its tokenizer comes from the GGUF metadata
  # a GGUF whose <arch>.vocab_size disagrees with its embedding (it was read past)
  "$bin" export --model "$assets/stories260K/stories260K.bin" -o "$tmp/s.gguf" --type f32 > /dev/null 2>&1
  off=$(( $(grep -obUa "llama.vocab_size" "$tmp/s.gguf" | head -1 | cut -d: -f1) + 16 + 4 )) # the key, its type: the u32
  printf '\x39\x30\x00\x00' | dd of="$tmp/s.gguf" bs=1 seek=$off conv=notrunc status=none # 12345
  expect "a GGUF's vocab_size against its embedding" "s.gguf: metadata key 'llama.vocab_size' = 12345 but token_embd.weight has 512 rows" \
    -- "$bin" info "$tmp/s.gguf"
  gguf="$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"
  if out=$("$bin" generate "$gguf" --prompt "The capital of France is" -n 4 --temperature 0 2>/dev/null) &&
     grep -q "Paris" <<<"$out"; then pass=$((pass + 1)); echo "ok - generate on the .gguf alone: $out"
  else fail=$((fail + 1)); echo "FAIL - generate on the .gguf alone: $out"; fi
  # a disk store is never written over a file the run reads (a hard link to the model, the data)
  m=$(model storeon); ln "$m/model.safetensors" "$tmp/alias.safetensors"; cp "$m/model.safetensors" "$tmp/model.orig"
  head -9 "$assets/sst2/dev.tsv" > "$tmp/dev8.tsv"
  expect "--store on a hard link to the model" "alias.safetensors is the file .*model.safetensors, which this run reads" -- \
    "$bin" train --model "$m" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
    --store "disk:$tmp/alias.safetensors" --out "$tmp/run_storeon"
  expect "--store on the training data" "dev8.tsv is the file .*dev8.tsv, which this run reads" -- \
    "$bin" train --model "$m" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
    --store "disk:$tmp/../$(basename "$tmp")/dev8.tsv" --out "$tmp/run_storeon2"
  echo "the user's notes" > "$tmp/notes.txt"
  expect "--store on an unrelated file" "notes.txt exists and is not a store an earlier run left" -- \
    "$bin" train --model "$m" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
    --store "disk:$tmp/notes.txt" --out "$tmp/run_storenotes"
  m2=$(model other_model)
  expect "--store on another model's weights" "model.safetensors exists and is not a store an earlier run left" -- \
    "$bin" train --model "$m" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
    --store "disk:$m2/model.safetensors" --out "$tmp/run_storeother"
  # a store an earlier run left (PATH.distzo-store beside it) is replaced by the next run
  "$bin" train --model "$assets/stories260K/stories260K.bin" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
    --store "disk:$tmp/left.safetensors" --out "$tmp/run_left1" > /dev/null 2>&1 &&
    [ -f "$tmp/left.safetensors.distzo-store" ] &&
    "$bin" train --model "$assets/stories260K/stories260K.bin" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
      --store "disk:$tmp/left.safetensors" --out "$tmp/run_left2" > /dev/null 2>&1 &&
    { pass=$((pass + 1)); echo "ok - a store an earlier run left carries its mark and is replaced"; } ||
    { fail=$((fail + 1)); echo "FAIL - a store an earlier run left: $(ls "$tmp"/left*)"; }
  # a store in use (its mark locked: another process, here flock(1)) is refused, not replaced
  if command -v flock > /dev/null; then
    flock "$tmp/left.safetensors.distzo-store" sleep 20 & holder=$!
    sleep 0.5
    expect "--store in use by another process" "left.safetensors is in use by another distzo process" -- \
      "$bin" train --model "$assets/stories260K/stories260K.bin" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 \
      --dev-examples 2 --batch 2 --store "disk:$tmp/left.safetensors" --out "$tmp/run_left3"
    pkill -P $holder sleep 2> /dev/null; wait $holder 2> /dev/null
  fi
  # a resumed run's own store from before stores were marked (0.2: no mark) is adopted
  rm "$tmp/left.safetensors.distzo-store"
  "$bin" train --resume --steps 2 --out "$tmp/run_left2" > "$tmp/adopt.txt" 2>&1 &&
    grep -q "this run's own store, written before distzo 0.3 marked stores: marked" "$tmp/adopt.txt" &&
    [ -f "$tmp/left.safetensors.distzo-store" ] &&
    { pass=$((pass + 1)); echo "ok - a resumed run adopts its own unmarked store"; } ||
    { fail=$((fail + 1)); echo "FAIL - adopting an unmarked store: $(tail -2 "$tmp/adopt.txt")"; }
  # weights with no config.json beside them (an adapter's, an export copied alone) are no
  # store either: they were replaced once
  cp "$m2/model.safetensors" "$tmp/lone.safetensors"
  expect "--store on lone weights (no config.json beside them)" "lone.safetensors exists and is not a store" -- \
    "$bin" train --model "$m" --data "$tmp/dev8.tsv" --steps 1 --train-examples 4 --dev-examples 2 --batch 2 \
    --store "disk:$tmp/lone.safetensors" --out "$tmp/run_storelone"
  [ "$(cat "$tmp/notes.txt")" = "the user's notes" ] && cmp -s "$m2/model.safetensors" "$data/hf/opt_preln/model.safetensors" &&
    cmp -s "$tmp/lone.safetensors" "$m2/model.safetensors" &&
    { pass=$((pass + 1)); echo "ok - the file and the model a refused --store named are intact"; } ||
    { fail=$((fail + 1)); echo "FAIL - a refused --store changed a file"; }
  mkdir -p "$tmp/initdir"; echo '{"the user": "model"}' > "$tmp/initdir/config.json"
  expect "init over a folder with files" "initdir: exists and is not an empty folder" -- "$bin" init --preset llama-tiny -o "$tmp/initdir"
  grep -q "the user" "$tmp/initdir/config.json" && { pass=$((pass + 1)); echo "ok - init left the folder's files"; } ||
    { fail=$((fail + 1)); echo "FAIL - init replaced a file"; }
  cmp -s "$m/model.safetensors" "$tmp/model.orig" && [ "$(wc -l < "$tmp/dev8.tsv")" = 9 ] &&
    { pass=$((pass + 1)); echo "ok - the model and the data are intact"; } ||
    { fail=$((fail + 1)); echo "FAIL - a refused --store changed an input"; }
  # a tokenizer file symlinked out of its folder is refused
  mkdir -p "$tmp/tokdir" "$tmp/tokelsewhere"
  cp "$assets/smollm2-135m/hf-tokenizer/tokenizer.json" "$tmp/tokelsewhere/"
  ln -s "$tmp/tokelsewhere/tokenizer.json" "$tmp/tokdir/tokenizer.json"
  expect "tokenizer.json symlinked outside its folder" "tokenizer.json' resolves to .*outside the folder" -- \
    "$bin" generate "$gguf" --tokenizer "$tmp/tokdir" -n 2
  # huge counts are clamped to what the model or the data allows, never overflowed
  if out=$("$bin" generate "$assets/stories260K/stories260K.bin" -n 2147483647 --temperature 0 2>&1 >/dev/null) &&
     grep -q "512 tokens" <<<"$out"; then pass=$((pass + 1)); echo "ok - generate -n 2147483647: $out"
  else fail=$((fail + 1)); echo "FAIL - generate -n 2147483647: $out"; fi
  if out=$("$bin" eval "$assets/stories260K/stories260K.bin" --batch 2147483647 --limit 4 2>&1) &&
     grep -q "4 examples" <<<"$out"; then pass=$((pass + 1)); echo "ok - eval --batch 2147483647: $out"
  else fail=$((fail + 1)); echo "FAIL - eval --batch 2147483647: $out"; fi
  # an example longer than the model's positions (or --seq) is cut from the left, and the
  # warning names the file and line; a long example beside short ones in one tree batch
  # must not overflow the positions (it once failed: "positions 8..518 do not fit 512")
  { printf 'sentence\tlabel\nshort one\t0\n'; printf 'word %.0s' $(seq 600); printf '\t1\nfine\t1\n'; } > "$tmp/long.tsv"
  tree=$("$bin" eval "$assets/stories260K/stories260K.bin" --data "$tmp/long.tsv" 2>&1)
  plain=$("$bin" eval "$assets/stories260K/stories260K.bin" --data "$tmp/long.tsv" --no-share-prompt 2>&1)
  if grep -q "cut from the left .*long.tsv:3" <<<"$tree" && [ "$(grep -o "accuracy [0-9.]*%" <<<"$tree")" = "$(grep -o "accuracy [0-9.]*%" <<<"$plain")" ] &&
     grep -q accuracy <<<"$tree"; then pass=$((pass + 1)); echo "ok - an over-long example: evaluated, named: $(tail -1 <<<"$tree")"
  else fail=$((fail + 1)); echo "FAIL - an over-long example in eval: $tree"; fi
  out=$("$bin" train --model "$assets/stories260K/stories260K.bin" --data "$tmp/long.tsv" --train-examples 3 --dev-examples 0 \
        --batch 3 --steps 1 --out "$tmp/run_long" 2>&1)
  grep -q "long.tsv:3: longer than 512 tokens (the model's maximum): cut from the left" <<<"$out" && grep -q "^done" <<<"$out" &&
    { pass=$((pass + 1)); echo "ok - an over-long training example: trained, named: $(grep long.tsv <<<"$out")"; } ||
    { fail=$((fail + 1)); echo "FAIL - an over-long training example: $out"; }
  printf '{"prompt": "short", "completion": " end"}\n{"prompt": "%s", "completion": " end"}\n' "$(printf 'once upon a time %.0s' $(seq 20))" > "$tmp/long_lm.jsonl"
  out=$("$bin" train --task lm --model "$assets/stories260K/stories260K.bin" --data "$tmp/long_lm.jsonl" --seq 16 \
        --train-examples 2 --dev-examples 0 --batch 2 --steps 1 --out "$tmp/run_long_lm" 2>&1)
  grep -q "long_lm.jsonl:2: longer than 16 tokens (--seq)" <<<"$out" && grep -q "^done" <<<"$out" &&
    { pass=$((pass + 1)); echo "ok - a prompt longer than --seq: named: $(grep long_lm <<<"$out")"; } ||
    { fail=$((fail + 1)); echo "FAIL - a prompt longer than --seq: $out"; }
  out=$("$bin" train --task lm --model "$assets/stories260K/stories260K.bin" --data "$tmp/long_lm.jsonl" --seq 16 \
        --train-examples 8 --dev-examples 0 --batch 4 --steps 1 --out "$tmp/run_lm_b4" 2>&1)
  grep -q "long_lm.jsonl gives 2 training examples, fewer than --batch 4: each step's batch repeats examples" <<<"$out" &&
    { pass=$((pass + 1)); echo "ok - a batch larger than the training set is said"; } ||
    { fail=$((fail + 1)); echo "FAIL - a batch larger than the training set: $out"; }
  expect "train --seq past the model's positions" "--seq 1000 is more than the model's 512 positions" -- "$bin" train \
    --task lm --model "$assets/stories260K/stories260K.bin" --data "$tmp/long_lm.jsonl" --seq 1000 --train-examples 2 \
    --dev-examples 0 --batch 2 --steps 1 --out "$tmp/run_seq1000"
  printf '{"prompt": "once upon", "completion": ""}\n{"prompt": "a", "completion": " b"}\n' > "$tmp/empty_completion.jsonl"
  expect "an empty completion" "empty_completion.jsonl:1: key \"completion\" is empty" -- "$bin" train --task lm \
    --model "$assets/stories260K/stories260K.bin" --data "$tmp/empty_completion.jsonl" --train-examples 2 --dev-examples 0 \
    --batch 1 --steps 1 --out "$tmp/run_empty_completion"
  expect "generate --temperature -1" "option --temperature: -1 is negative" -- "$bin" generate "$tmp/stories.bin" --temperature -1 -n 2
  expect "generate --top-p 2" "option --top-p: 2 is outside" -- "$bin" generate "$tmp/stories.bin" --top-p 2 -n 2
  expect "eval --limit -1" "option --limit: -1 is negative" -- "$bin" eval "$assets/stories260K/stories260K.bin" --limit -1
  expect "a prompt longer than the model" "option --prompt: [0-9]+ tokens do not fit .*stories260K.bin's 512 positions" -- \
    "$bin" generate "$assets/stories260K/stories260K.bin" --prompt "$(printf 'once upon a time %.0s' $(seq 200))" -n 2
fi
m=$(model shardsym); mv "$m/model.safetensors" "$tmp/outside.safetensors"; ln -s "$tmp/outside.safetensors" "$m/model.safetensors"
expect "checkpoint symlinked outside its folder" "model.safetensors.*outside the folder" -- "$bin" info "$m"
m=$(model fifomodel); rm "$m/model.safetensors"; mkfifo "$m/model.safetensors"
expect "checkpoint that is a FIFO" "model.safetensors: not a regular file" -- "$bin" info "$m"
expect "not a number" "--batch.*abc" -- "$bin" eval --batch abc
expect "unknown option" "--bogus" -- "$bin" info --bogus x
expect "unknown command" "unknown command" -- "$bin" frobnicate
expect "missing model" "nowhere" -- "$bin" info /nowhere/model
expect "bad dtype" "dtype" -- "$bin" info "$data/hf/opt_preln" --dtype f8
expect "unknown preset" "preset" -- "$bin" init --preset opt-9000 -o "$tmp/x"

finish
