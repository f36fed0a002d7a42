#!/usr/bin/env bash
# --keep-quantized: eval and generate on a GGUF base held as its file stores it give what
# the same file dequantized at load gives, exactly: SmolLM2-135M Q4_1 (eval's per-example
# scores, greedy and sampled text) and stories260K converted to GGUF q8_0 and f16 (eval's
# scores, greedy text); the weights it holds are a fraction of the dequantized ones
# (eval --json's weight_bytes, and its peak RSS); full-parameter train refuses the option;
# on a model with nothing quantized the option is said to change nothing.
# usage: keep_quantized.sh DISTZO_BINARY ASSETS_DIR
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
smol=smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
need_assets "$assets" $smol stories260K/stories260K.bin stories260K/tok512.bin sst2/dev.tsv
test_set "$assets" 12

ev() { # MODEL OUT [--keep-quantized]: the scores file (and the --json summary in OUT.json)
  "$bin" eval "$1" --data "$tmp/test.tsv" --template "{text} It was" --label-words terrible,great --batch 8 \
    --threads 2 --predictions "$2" --json ${3:-} > "$2.json" 2> "$2.err" && [ -s "$2" ]
}
gen() { "$bin" generate "$1" --prompt "${3:-Once upon a time}" -n 12 --threads 2 --json ${4:-} $2 2> /dev/null |
        sed -E 's/, "tokens_per_second": [^}]*//'; }
field() { sed -E "s/.*\"$1\": ([0-9]+).*/\\1/" "$2"; }

for ty in q8_0 f16; do
  "$bin" export --model "$assets/stories260K/stories260K.bin" -o "$tmp/s_$ty.gguf" --type $ty > /dev/null 2>&1 ||
    bad "export of stories260K as $ty failed"
done
for m in "$tmp/s_q8_0.gguf" "$tmp/s_f16.gguf" "$assets/$smol"; do # SmolLM2 last: its evals' summaries stay
  name=$(basename "$m")
  if ev "$m" "$tmp/load.tsv" && ev "$m" "$tmp/keep.tsv" --keep-quantized; then
    cmp -s "$tmp/load.tsv" "$tmp/keep.tsv" && ok "$name: eval scores with --keep-quantized = dequantized at load (exact)" ||
      bad "$name: eval scores differ with --keep-quantized: $(diff "$tmp/load.tsv" "$tmp/keep.tsv" | head -3)"
  else bad "$name: eval failed: $(tail -1 "$tmp/load.tsv.err") $(tail -1 "$tmp/keep.tsv.err")"; fi
  a=$(gen "$m" "--temperature 0") b=$(gen "$m" "--temperature 0" "Once upon a time" --keep-quantized)
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "$name: greedy generation with --keep-quantized = at load" ||
    bad "$name: greedy generation differs: '$a' / '$b'"
done
# sampling reads the whole distribution: the same seed, the same tokens
a=$(gen "$assets/$smol" "--temperature 0.8 --seed 7" "The capital of France is")
b=$(gen "$assets/$smol" "--temperature 0.8 --seed 7" "The capital of France is" --keep-quantized)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "SmolLM2: sampled generation with --keep-quantized = at load" ||
  bad "SmolLM2: sampled generation differs: '$a' / '$b'"

# the memory, from SmolLM2's eval summaries
wl=$(field weight_bytes "$tmp/load.tsv.json") wk=$(field weight_bytes "$tmp/keep.tsv.json")
rl=$(field peak_rss_bytes "$tmp/load.tsv.json") rk=$(field peak_rss_bytes "$tmp/keep.tsv.json")
file=$(stat -c %s "$assets/$smol")
# 134.5M parameters: 538 MB in f32; held quantized: the file's tensors less its metadata
[ "$wl" -gt 530000000 ] && [ "$wk" -lt "$file" ] && [ "$wk" -gt $((file * 8 / 10)) ] &&
  ok "SmolLM2 weights: $wl bytes at load, $wk kept quantized (file $file)" ||
  bad "SmolLM2 weight bytes: $wl at load, $wk kept quantized (file $file)"
[ "$rk" -lt $((rl / 2)) ] && ok "SmolLM2 eval peak RSS: $rl bytes at load, $rk kept quantized" ||
  bad "SmolLM2 eval peak RSS: $rl at load, $rk kept quantized (expected under half)"

out=$("$bin" generate "$assets/stories260K/stories260K.bin" -n 4 --temperature 0 --keep-quantized 2>&1 > /dev/null)
[ $? -eq 0 ] && [[ $out == *"--keep-quantized: "*"stories260K.bin has no tensor stored quantized"* ]] &&
  ok "--keep-quantized on a model with nothing quantized: said, and run as without it" ||
  bad "--keep-quantized on stories260K.bin: $out"
out=$("$bin" train --model "$tmp/s_q8_0.gguf" --steps 1 --keep-quantized --out "$tmp/run" 2>&1)
[ $? -ne 0 ] && [[ $out == *"option --keep-quantized: full-parameter training updates every weight"*"--peft lora"* ]] &&
  [ ! -e "$tmp/run" ] && ok "train --keep-quantized without --peft lora is refused, saying why and what takes it" ||
  bad "train --keep-quantized: $out"
finish
