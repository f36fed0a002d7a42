#!/usr/bin/env bash
# --store disk:PATH: the layer masters live in a file; an I/O thread streams each block
# through a bounded chunk buffer into the second pair of working copies.
# Training from the disk store must give bitwise the weights and metrics of --store ram
# (f32 and bf16 masters), also when killed with SIGKILL and resumed; a cap too small for
# what stays resident is refused with a clear message.
# usage: store.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv gpt2-bpe/dict.txt
test_set "$assets" 32
common=(--threads 1 --steps 60 --eval-every 20 --checkpoint-every 15 --train-examples 64 --dev-examples 16
        --lr 1e-4 --test "$tmp/test.tsv")
same() { same_run "$1" "$2" 60; } # final weights, metrics and seed logs equal
# disk: the global block resident; globals: it streams from the store too (rows read as
# used, its update applied chunk by chunk on the I/O thread); nocache: pages dropped
for dt in f32 bf16; do
  "$bin" train "${common[@]}" --master-dtype $dt --out "$tmp/ram-$dt" >/dev/null 2>&1
  "$bin" train "${common[@]}" --master-dtype $dt --store "disk:$tmp/$dt.store" --out "$tmp/disk-$dt" >/dev/null 2>&1
  if same "$tmp/ram-$dt" "$tmp/disk-$dt"; then ok "$dt: disk store == ram"; else bad "$dt: disk store != ram"; fi
  "$bin" train "${common[@]}" --master-dtype $dt --store "disk-nocache:$tmp/g$dt.store" --stream-globals \
    --out "$tmp/globals-$dt" >/dev/null 2>&1
  if same "$tmp/ram-$dt" "$tmp/globals-$dt"; then ok "$dt: disk-nocache store, globals streamed == ram"
  else bad "$dt: disk-nocache store, globals streamed != ram"; fi
done
# a small random OPT (GPT-2/OPT tokenizer, learned positions, biases, tied head) too
"$bin" init --preset opt-tiny --seed 3 -o "$tmp/opt" >/dev/null
for mode in ram "disk:$tmp/opt.store"; do
  "$bin" train "${common[@]}" --model "$tmp/opt" --store "$mode" --out "$tmp/opt-${mode%%:*}" >/dev/null 2>&1
done
"$bin" train "${common[@]}" --model "$tmp/opt" --store "disk:$tmp/optg.store" --stream-globals --out "$tmp/opt-globals" \
  >/dev/null 2>&1
if same "$tmp/opt-ram" "$tmp/opt-disk"; then ok "opt-tiny: disk store == ram"; else bad "opt-tiny: disk store != ram"; fi
if same "$tmp/opt-ram" "$tmp/opt-globals"; then ok "opt-tiny: globals streamed == ram"
else bad "opt-tiny: globals streamed != ram"; fi
# blocks larger than the chunk buffer (8 MB of f32): opt-125m's layers (28 MB) and its
# streamed global block (155 MB) are prepared and updated in several chunks per block
"$bin" init --preset opt-125m --layers 2 --seed 5 -o "$tmp/big" >/dev/null
big=(--model "$tmp/big" --threads 2 --steps 4 --eval-every 2 --checkpoint-every 2 --train-examples 16 --dev-examples 8
     --lr 1e-4 --test "$tmp/test.tsv")
for dt in f32 bf16; do
  "$bin" train "${big[@]}" --master-dtype $dt --verify-every 4 --out "$tmp/big-ram-$dt" >/dev/null 2>"$tmp/big-ram.err"
  "$bin" train "${big[@]}" --master-dtype $dt --verify-every 4 --store "disk:$tmp/big-$dt.store" --stream-globals \
    --out "$tmp/big-disk-$dt" >/dev/null 2>"$tmp/big-disk.err"
  if same_run "$tmp/big-ram-$dt" "$tmp/big-disk-$dt" 4; then ok "opt-125m $dt: blocks in several chunks == ram"
  else bad "opt-125m $dt: blocks in several chunks != ram"; fi
  # the weight checksum reads the store chunk by chunk too
  sum_ram=$(grep -o "checksum [0-9a-f]*" "$tmp/big-ram.err") sum_disk=$(grep -o "checksum [0-9a-f]*" "$tmp/big-disk.err")
  if [ -n "$sum_ram" ] && [ "$sum_ram" = "$sum_disk" ]; then ok "opt-125m $dt: $sum_disk from the store == ram"
  else bad "opt-125m $dt: '$sum_disk' from the store, '$sum_ram' in memory"; fi
done
# killed mid-run, resumed: the store is rebuilt from the checkpoint and the log replayed
"$bin" train "${common[@]}" --store "disk:$tmp/k.store" --out "$tmp/killed" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do
  [ -f "$tmp/killed/seeds.log" ] && [ "$(wc -c < "$tmp/killed/seeds.log")" -gt 700 ] && break
  sleep 0.02
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
"$bin" train --out "$tmp/killed" --resume --threads 1 >/dev/null 2>&1
if same "$tmp/ram-f32" "$tmp/killed"; then ok "killed at $(($(wc -c < "$tmp/killed/seeds.log"))) log bytes, resumed: == ram"
else bad "killed and resumed != ram"; fi
# export by replay through a store equals the trained weights
"$bin" export --run "$tmp/ram-f32" --store "disk:$tmp/export.store" -o "$tmp/exported" >/dev/null 2>&1
if cmp -s "$tmp/exported/model.safetensors" "$tmp/ram-f32/checkpoint-60/model.safetensors"; then
  ok "export through a disk store == trained weights"; else bad "export through a disk store differs"; fi
# checkpoints taken from the store load as ordinary HF models
if "$bin" info "$tmp/disk-f32/checkpoint-60" >/dev/null 2>&1; then ok "a checkpoint from the store loads"
else bad "a checkpoint from the store does not load"; fi
out=$("$bin" train "${common[@]}" --store "disk:$tmp/c.store" --max-resident 1 --out "$tmp/cap" 2>&1 >/dev/null)
if [ $? -ne 0 ] && grep -q "max-resident 1 MB cannot hold" <<<"$out"; then ok "cap refused: $out"
else bad "cap not refused: $out"; fi
for opt in "--max-resident 100" --stream-globals; do # shaping a store the run does not have
  out=$("$bin" train "${common[@]}" $opt --out "$tmp/nostore" 2>&1 >/dev/null)
  if [ $? -ne 0 ] && grep -q "option ${opt%% *}: without --store disk:PATH it would be ignored" <<<"$out"; then
    ok "$opt without a disk store refused"; else bad "$opt without a disk store: $out"; fi
done
for field in max_resident_mb:100 stream_globals:1; do # the same from a --config file
  printf '{"%s": %s}\n' "${field%%:*}" "${field#*:}" >"$tmp/shape.json"
  out=$("$bin" train "${common[@]}" --config "$tmp/shape.json" --out "$tmp/nostore-config" 2>&1 >/dev/null)
  if [ $? -ne 0 ] && grep -q "(${field%%:*}) without a disk store" <<<"$out" && [ ! -e "$tmp/nostore-config/run.json" ]
  then ok "${field%%:*} in a --config without a disk store refused"; else bad "${field%%:*} in a --config: $out"; fi
done
out=$("$bin" train "${common[@]}" --store "tape:x" --out "$tmp/badstore" 2>&1 >/dev/null)
if [ $? -ne 0 ] && grep -q "expected ram, disk:PATH or disk-nocache:PATH" <<<"$out"; then ok "bad --store refused"; else bad "bad --store: $out"; fi
# resident memory under the cap: a 205 MB model (48 layers) trained from the store with
# --max-resident 120 keeps its peak RSS under the cap plus a fixed 64 MB (process, libraries,
# OpenBLAS buffers), far below the model's size
"$bin" init --preset llama-tiny --layers 48 -o "$tmp/deep" >/dev/null
size=$(stat -c %s "$tmp/deep/model.safetensors")
json=$("$bin" bench step --model "$tmp/deep" --batch 2 --seq 32 --steps 2 --threads 1 --store "disk:$tmp/deep.store" \
       --max-resident 120 --json 2>&1)
peak=$(sed -n 's/.*"peak_rss_bytes": \([0-9]*\).*/\1/p' <<<"$json")
limit=$(((120 + 64) * 1048576))
if [ -n "$peak" ] && [ "$peak" -le "$limit" ] && [ "$size" -gt "$limit" ]; then
  ok "peak RSS $((peak / 1048576)) MB <= 120 MB cap + 64 MB, model $((size / 1048576)) MB"
else bad "peak RSS over the cap: $json"; fi
# the same with a global block (OPT's 50272 x 768 embedding, 153 MB) too large for the cap:
# --max-resident 170 streams it from the store as well (said on stderr), and the peak RSS
# stays under the same bound, below the model's 261 MB; a cap that cannot hold even the
# streaming buffers is refused, saying so
"$bin" init --preset opt-125m --layers 4 -o "$tmp/wide" >/dev/null
size=$(stat -c %s "$tmp/wide/model.safetensors")
json=$("$bin" bench step --model "$tmp/wide" --batch 2 --seq 32 --steps 2 --threads 1 --store "disk:$tmp/wide.store" \
       --max-resident 170 --json 2>&1)
peak=$(sed -n 's/.*"peak_rss_bytes": \([0-9]*\).*/\1/p' <<<"$json")
limit=$(((170 + 64) * 1048576))
if [ -n "$peak" ] && [ "$peak" -le "$limit" ] && [ "$size" -gt "$limit" ] && grep -q "stays in the store too" <<<"$json"; then
  ok "globals streamed: peak RSS $((peak / 1048576)) MB <= 170 MB cap + 64 MB, model $((size / 1048576)) MB"
else bad "globals streamed: peak RSS over the cap or not streamed: $json"; fi
# the estimator's state counts under the cap: HiZOO's curvature (4 bytes a parameter, 261 MB
# here) does not fit a cap MeZO's run fits (it was not counted, and the run went 330 MB over)
wide=(train --model "$tmp/wide" --tokenizer "$assets/gpt2-bpe/dict.txt" --steps 1 --batch 2 --train-examples 8
      --dev-examples 2 --test "$tmp/test.tsv" --eval-every 0 --checkpoint-every 0 --threads 1 --max-resident 450)
"$bin" "${wide[@]}" --store "disk:$tmp/wide-m.store" --out "$tmp/wide-mezo" > /dev/null 2>&1 &&
  out=$("$bin" "${wide[@]}" --estimator hizoo --store "disk:$tmp/wide-h.store" --out "$tmp/wide-hizoo" 2>&1 >/dev/null)
if [ $? -ne 0 ] && grep -q "the estimator's state 261.4 MB" <<<"$out"; then ok "HiZOO's curvature counts under --max-resident"
else bad "HiZOO under --max-resident 450: $out"; fi
# a resume onto --store ram drops the disk store's shape from run.json (nothing to shape), so
# the run's settings stay a valid --config for a new run
"$bin" train --out "$tmp/wide-mezo" --resume --steps 2 --store ram --threads 1 >/dev/null 2>&1 &&
  "$bin" train --config "$tmp/wide-mezo/run.json" --out "$tmp/wide-branch" --steps 1 >/dev/null 2>&1
if [ $? -eq 0 ] && grep -q '"max_resident_mb":[[:space:]]*0,' "$tmp/wide-mezo/run.json"; then ok "resume onto ram drops --max-resident"
else bad "resume onto ram: $(grep -E 'store|resident' "$tmp/wide-mezo/run.json")"; fi
out=$("$bin" bench step --model "$tmp/wide" --batch 2 --seq 32 --steps 1 --threads 1 --store "disk:$tmp/wide.store" \
      --max-resident 100 2>&1)
if [ $? -ne 0 ] && grep -q "even with every weight in the store" <<<"$out"; then ok "cap below streaming refused"
else bad "cap below streaming: $out"; fi
finish
