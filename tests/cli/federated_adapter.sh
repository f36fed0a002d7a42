#!/usr/bin/env bash
# Federated ZO of an adapter (docs/ADAPTERS.md, docs/FEDERATED.md): `distzo serve --peft lora`
# and `--peft prefix` on stories260K with two `distzo join` workers, each on its own SST-2
# shard. The workers build the adapter from the coordinator's run.json alone.
# - LoRA: the coordinator is SIGKILLed after 4 rounds and resumed (its log's header is the
#   adapter's layout, as train writes it); the coordinator scores its replica on a test set;
# - at the end each worker's replica (join --save: a PEFT folder) equals `distzo export` of
#   the run byte for byte, the replicas' checksums agree, and the adapter moved from its
#   start (export of the log cut to no record); the coordinator's last test accuracy is
#   `distzo eval --adapter` of the export's;
# - FZOO over LoRA and over a prefix (serve --estimator fzoo, one-byte coefficients): the
#   log holds a record of 3 directions a round, and each replica == export, as above;
# - a worker whose base differs by one float is refused (a LoRA's start, B = 0, says nothing
#   of the base: the fingerprint covers it);
# - a SmolLM2 Q4_1 GGUF base held quantized (--keep-quantized) by the coordinator and one
#   worker, dequantized at load by the other: one fingerprint, and the replicas == export;
# - serve --adapter DIR: the adapter starts from a PEFT folder; workers take it from run.json's
#   path or join --adapter; another folder, or the folder changed later, is refused;
# - refusals: --seed-pool with --peft, --lora-rank without --peft lora, --adapter without
#   --peft, --keep-quantized without an adapter (serve, and a worker of a full run).
# Every wait is bounded.
# usage: federated_adapter.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets" sst2/dev.tsv smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
test_set "$assets" 32
rounds=8
join=(--token-file "$tmp/token" --retry-for 30 --threads 1)

refuse "--seed-pool with --peft" "seed-pool with --peft lora" "$bin" serve --out "$tmp/bad1" --token-file "$tmp/token" \
  --peft lora --seed-pool 16 --listen 127.0.0.1:0 --steps 1
refuse "serve --lora-rank without --peft lora" "give --peft lora" "$bin" serve --out "$tmp/bad2" --token-file "$tmp/token" \
  --lora-rank 4 --listen 127.0.0.1:0 --steps 1
refuse "serve --adapter without --peft" "the run trains every parameter" "$bin" serve --out "$tmp/bad3" --token-file \
  "$tmp/token" --adapter "$tmp" --listen 127.0.0.1:0 --steps 1
[ ! -e "$tmp/bad1/run.json" ] && ok "a refused serve writes no run.json" || bad "a refused serve wrote run.json"

# fed_run KIND [SERVE OPTIONS...]: a run of $rounds rounds in $tmp/run with two workers
# saving their replicas in $tmp/w1, $tmp/w2 (their outputs in $tmp/KIND-w*.txt)
fed_run() {
  local kind=$1
  shift
  rm -rf "$tmp/run" "$tmp/w1" "$tmp/w2"
  serve=(serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --batch 4 --train-examples 32
         --round-timeout 20 --worker-timeout 20 --min-workers 2 --linger 20 --threads 1 "$@")
  local kill=()
  [ "$kind" = lora ] && kill=(env DISTZO_TEST_KILL=serve:4)
  serve_bg "$tmp/$kind-serve1.txt" "${kill[@]}" "$bin" "${serve[@]}" --listen 127.0.0.1:0
  local w
  for w in 1 2; do
    "$bin" join "$url" --data "$tmp/shard$w.tsv" --name w$w --save "$tmp/w$w" --checksum-file "$tmp/w$w.sum" \
      "${join[@]}" > "$tmp/$kind-w$w.txt" 2>&1 &
    eval "w$w=\$!"
    pids+=($!)
  done
  if [ "$kind" = lora ]; then
    wait_for 120 bash -c "! kill -0 $serve_pid 2> /dev/null"
    wait "$serve_pid"
    local rc=$? # metrics.jsonl: row 0 (the test set's, before the first round), then a row a round
    [ $rc -eq 137 ] && [ "$(wc -l < "$tmp/run/metrics.jsonl")" -eq 5 ] &&
      ok "$kind: the coordinator was SIGKILLed after 4 rounds" || bad "$kind: not killed after round 4 (exit $rc)"
    "$bin" "${serve[@]}" --listen "${url#http://}" --resume > "$tmp/$kind-serve2.txt" 2>&1 &
    serve_pid=$!
    pids+=($serve_pid)
  fi
  wait_for 200 bash -c "! kill -0 $serve_pid 2> /dev/null" || bad "$kind: the coordinator did not finish"
  wait $serve_pid && ok "$kind: the coordinator finished $rounds rounds" || bad "$kind: serve: $(tail -3 "$tmp/$kind-serve"*.txt)"
  for w in 1 2; do
    local p="w$w"
    wait ${!p} && ok "$kind: worker $w finished" || bad "$kind: worker $w: $(tail -3 "$tmp/$kind-w$w.txt")"
  done
}

# replicas_equal_peft_export KIND: both replicas == export (a PEFT folder of KIND's type)
replicas_equal_peft_export() {
  rm -rf "$tmp/exported" "$tmp/start"
  "$bin" export --run "$tmp/run" -o "$tmp/exported" > "$tmp/x.txt" 2>&1 || bad "$1: export failed: $(tail -2 "$tmp/x.txt")"
  grep -q "\"peft_type\":[[:space:]]*\"$2\"" "$tmp/exported/adapter_config.json" && ok "$1: export writes a PEFT $2 folder" ||
    bad "$1: export's adapter_config.json: $(cat "$tmp/exported/adapter_config.json" 2> /dev/null)"
  local w
  for w in 1 2; do
    cmp -s "$tmp/exported/adapter_model.safetensors" "$tmp/w$w/adapter_model.safetensors" &&
      ok "$1: worker $w's replica equals distzo export of the run, byte for byte" || bad "$1: worker $w's replica differs"
  done
  cmp -s "$tmp/w1.sum" "$tmp/w2.sum" && ok "$1: the replicas' checksums agree" || bad "$1: checksums differ"
  cp -r "$tmp/run" "$tmp/cut" && head -c 104 "$tmp/run/seeds.log" > "$tmp/cut/seeds.log"
  "$bin" export --run "$tmp/cut" -o "$tmp/start" --allow-short-log > /dev/null 2>&1 &&
    ! cmp -s "$tmp/start/adapter_model.safetensors" "$tmp/exported/adapter_model.safetensors" &&
    ok "$1: the adapter moved from its start" || bad "$1: the adapter is its start"
  rm -rf "$tmp/cut"
  head -c 104 "$tmp/run/seeds.log" | grep -aq "$3" && ok "$1: the seed log's header names the adapter's layout" ||
    bad "$1: the log's header: $(head -c 104 "$tmp/run/seeds.log" | tr -c '[:print:]' .)"
}

fed_run lora --peft lora --spsa-samples 2 --lr 2e-3 --eps 1e-2 --label-words bad,good --test "$tmp/test.tsv" --eval-every 4
grep -q "resumed after round 4" "$tmp/lora-serve2.txt" && ok "lora: serve --resume continued from the log" ||
  bad "lora: no resume: $(head -3 "$tmp/lora-serve2.txt")"
replicas_equal_peft_export lora LORA "lora r=8 alpha=16"
want=$(tail -1 "$tmp/run/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
got=$("$bin" eval "$assets/stories260K/stories260K.bin" --adapter "$tmp/exported" --data "$tmp/test.tsv" \
      --label-words bad,good --json --threads 1 2> /dev/null | grep -o '"accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "lora: the coordinator's test accuracy is eval --adapter of the export ($got)" ||
  bad "lora: the coordinator's test accuracy '$want', eval --adapter '$got'"

# serve --adapter: the adapter starts from a PEFT folder (the export above: B != 0, so not
# the seed's start). The coordinator's row 0 is eval --adapter of that folder; one worker
# names it (join --adapter), the other takes run.json's path; another folder is refused
# (here the seed's start: the same r and alpha); export replays onto it; once its file
# changes, export and serve --resume refuse it.
cp -r "$tmp/exported" "$tmp/adapter0"
cp -r "$tmp/start" "$tmp/adapter_seed"
rm -rf "$tmp/run" "$tmp/w1" "$tmp/w2"
serve_bg "$tmp/from-serve.txt" "$bin" serve --out "$tmp/run" --token-file "$tmp/token" --peft lora --adapter "$tmp/adapter0" \
  --steps 2 --spsa-samples 2 --lr 2e-3 --eps 1e-2 --label-words bad,good --test "$tmp/test.tsv" --batch 4 \
  --train-examples 32 --round-timeout 20 --worker-timeout 20 --min-workers 2 --linger 5 --threads 1 --listen 127.0.0.1:0
refuse "join --adapter with another adapter" "adapter_seed/adapter_model.safetensors: the file has changed since the run \
started from it, or is another adapter's" "$bin" join "$url" --data "$tmp/shard1.tsv" --adapter "$tmp/adapter_seed" "${join[@]}"
"$bin" join "$url" --data "$tmp/shard1.tsv" --adapter "$tmp/adapter0" --save "$tmp/w1" --checksum-file "$tmp/w1.sum" \
  "${join[@]}" > "$tmp/from-w1.txt" 2>&1 &
w1=$!
"$bin" join "$url" --data "$tmp/shard2.tsv" --save "$tmp/w2" --checksum-file "$tmp/w2.sum" "${join[@]}" > "$tmp/from-w2.txt" 2>&1 &
w2=$!
pids+=($w1 $w2)
wait $w1 && wait $w2 && wait $serve_pid && ok "from an adapter: two workers trained the run" ||
  bad "from an adapter: $(tail -2 "$tmp/from-w1.txt" "$tmp/from-w2.txt" "$tmp/from-serve.txt")"
grep -q '"lora_init_fingerprint"' "$tmp/run/run.json" && ok "from an adapter: run.json keeps the folder's fingerprint" ||
  bad "from an adapter: run.json has no lora_init_fingerprint"
replicas_equal_peft_export from-adapter LORA "lora r=8 alpha=16"
# scores (eval --predictions): the log cut to no record replays onto the folder, not the seed's start
scores() { "$bin" eval "$assets/stories260K/stories260K.bin" --adapter "$1" --data "$tmp/test.tsv" --label-words bad,good \
  --predictions "$tmp/$2.tsv" --threads 1 > "$tmp/$2.txt" 2>&1; }
scores "$tmp/adapter0" p0 && scores "$tmp/start" p_start && scores "$tmp/adapter_seed" p_seed &&
  cmp -s "$tmp/p0.tsv" "$tmp/p_start.tsv" && ! cmp -s "$tmp/p0.tsv" "$tmp/p_seed.tsv" &&
  ok "from an adapter: the run's start (its log cut to no record) scores as the folder, not as the seed's init" ||
  bad "from an adapter: the start's scores: $(diff "$tmp/p0.tsv" "$tmp/p_start.tsv" | head -3)"
want=$(head -1 "$tmp/run/metrics.jsonl" | grep -o '"test_accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
got=$("$bin" eval "$assets/stories260K/stories260K.bin" --adapter "$tmp/adapter0" --data "$tmp/test.tsv" \
      --label-words bad,good --json --threads 1 2> /dev/null | grep -o '"accuracy": [0-9.e-]*' | awk '{printf "%.6f", $2}')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "from an adapter: the coordinator's row 0 is eval --adapter of the folder ($got)" ||
  bad "from an adapter: row 0's test accuracy '$want', eval --adapter of the folder '$got'"
printf '\x5a' | dd of="$tmp/adapter0/adapter_model.safetensors" bs=1 conv=notrunc \
  seek=$(($(stat -c %s "$tmp/adapter0/adapter_model.safetensors") - 1)) 2> /dev/null
refuse "export after the starting adapter changed" "adapter0/adapter_model.safetensors: the file has changed" \
  "$bin" export --run "$tmp/run" -o "$tmp/x2"
refuse "serve --resume after the starting adapter changed" "adapter0/adapter_model.safetensors: the file has changed" \
  "$bin" serve --out "$tmp/run" --token-file "$tmp/token" --resume --steps 3 --listen 127.0.0.1:0

# one float of the base differs: the worker is refused (LoRA's start alone would not show it)
rm -rf "$tmp/run"
serve_bg "$tmp/other-serve.txt" "$bin" serve --out "$tmp/run" --token-file "$tmp/token" --steps 1 --peft lora \
  --batch 4 --train-examples 32 --linger 1 --threads 1 --listen 127.0.0.1:0
join_other_base "lora: a worker on another base (one float)" "${join[@]}"
kill "$serve_pid" 2> /dev/null
wait "$serve_pid" 2> /dev/null

fed_run prefix --peft prefix --spsa-samples 2 --prefix-tokens 4 --lr 1e-2 --eps 1e-1
replicas_equal_peft_export prefix PREFIX_TUNING "prefix n=4"

# FZOO over each adapter: a round is one worker's 3 directions, sent as one-byte codes
# (--g-clip 8 / eps). fzoo_checks PEFT TYPE HEADER: run.json, the log's size, the replicas.
fzoo_checks() {
  grep -qE '"estimator":[[:space:]]*"fzoo"' "$tmp/run/run.json" && grep -qE "\"peft\":[[:space:]]*\"$1\"" \
    "$tmp/run/run.json" && ok "fzoo-$1: run.json says fzoo over the adapter" ||
    bad "fzoo-$1: run.json: $(grep -E 'estimator|peft' "$tmp/run/run.json")"
  [ "$(stat -c %s "$tmp/run/seeds.log")" -eq $((104 + rounds * (12 + 4 * 3))) ] &&
    ok "fzoo-$1: the seed log holds $rounds records of 3 directions" ||
    bad "fzoo-$1: seeds.log of $(stat -c %s "$tmp/run/seeds.log") bytes"
  replicas_equal_peft_export "fzoo-$1" "$2" "$3"
}
fzoo=(--estimator fzoo --fzoo-directions 3)
fed_run fzoo-lora "${fzoo[@]}" --peft lora --g-clip 800 --lr 1e-4 --eps 1e-2
fzoo_checks lora LORA "lora r=8 alpha=16"
fed_run fzoo-prefix "${fzoo[@]}" --peft prefix --prefix-tokens 4 --g-clip 80 --lr 1e-3 --eps 1e-1
fzoo_checks prefix PREFIX_TUNING "prefix n=4"

# a quantized base held as loaded at the coordinator and worker 1, dequantized at load by
# worker 2: the same fingerprint (the base's rows as f32) and the same replica
gguf="$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"
rm -rf "$tmp/run" "$tmp/w1" "$tmp/w2"
serve_bg "$tmp/q-serve.txt" "$bin" serve --out "$tmp/run" --model "$gguf" --keep-quantized --peft lora --token-file \
  "$tmp/token" --steps 2 --spsa-samples 2 --batch 2 --train-examples 8 --lr 1e-4 --eps 1e-2 --round-timeout 120 \
  --worker-timeout 120 --min-workers 2 --linger 20 --threads 1 --listen 127.0.0.1:0
"$bin" join "$url" --data "$tmp/shard1.tsv" --model "$gguf" --keep-quantized --save "$tmp/w1" \
  --checksum-file "$tmp/w1.sum" "${join[@]}" > "$tmp/q-w1.txt" 2>&1 &
w1=$!
"$bin" join "$url" --data "$tmp/shard2.tsv" --model "$gguf" --save "$tmp/w2" --checksum-file "$tmp/w2.sum" "${join[@]}" \
  > "$tmp/q-w2.txt" 2>&1 &
w2=$!
pids+=($w1 $w2)
wait $w1 && wait $w2 && wait $serve_pid && ok "gguf: a quantized base and a dequantized one trained one run" ||
  bad "gguf: $(tail -2 "$tmp/q-w1.txt" "$tmp/q-w2.txt" "$tmp/q-serve.txt")"
replicas_equal_peft_export gguf LORA "lora r=8 alpha=16"
refuse "serve --keep-quantized without --peft" "keep-quantized" "$bin" serve --out "$tmp/bad4" --token-file "$tmp/token" \
  --model "$gguf" --keep-quantized --listen 127.0.0.1:0 --steps 1
rm -rf "$tmp/run"
serve_bg "$tmp/full-serve.txt" "$bin" serve --out "$tmp/run" --token-file "$tmp/token" --steps 1 --batch 4 \
  --train-examples 32 --linger 1 --threads 1 --listen 127.0.0.1:0
refuse "join --keep-quantized of a full run" "keep-quantized" "$bin" join "$url" --data "$tmp/shard1.tsv" --keep-quantized \
  "${join[@]}"
refuse "join --adapter of a full run" "trains every parameter, not an adapter" "$bin" join "$url" --data \
  "$tmp/shard1.tsv" --adapter "$tmp/adapter_seed" "${join[@]}"
kill "$serve_pid" 2> /dev/null
wait "$serve_pid" 2> /dev/null
finish
