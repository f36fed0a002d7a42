#!/usr/bin/env bash
# distzo bench step --peft lora|prefix (issue 29's "a step against two forwards") on
# stories260K (dim 64, 8 heads, 4 kv heads of 8, 5 layers):
# - the report has the adapter's forward and 2 x forward / step against the base's forward
#   and the adapter's, consistent with its own seconds; text and JSON;
# - the adapter's parameter count is the one its shapes give (computed here);
# - --interleave (the forwards between the steps) reports the same figures;
# - without --peft the report is as before (no adapter fields);
# - refusals: --keep-quantized without --peft, an unknown --peft, --lora-rank 0, --lora-rank alone.
# distzo bench eval --peft lora|prefix (the same on real SST-2 batches, SmolLM2-135M Q4_1):
# - the adapter's fields (parameter count from its shapes, 2 x eval / step against its own
#   seconds); the steps' g the same at 1 and 2 threads and with the base kept quantized
#   (the same bits as dequantized at load), and not the full step's; refusals as above.
# usage: bench_peft.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin
model="$assets/stories260K/stories260K.bin"
bench=("$bin" bench step --model "$model" --batch 8 --seq 64 --steps 2 --threads 1)
field() { sed -n "s/.*\"$1\": \([-0-9.e+a-z\"]*\).*/\1/p" <<<"$2"; }

# the JSON's ratios against its own seconds (the seconds are rounded to 1e-4: 5%)
check_json() { # WHAT PEFT PARAMS JSON
  local json=$4
  local fwd step fwda r ra n
  fwd=$(field forward_seconds "$json") step=$(field step_seconds "$json") fwda=$(field adapter_forward_seconds "$json")
  r=$(field two_forwards_over_step "$json") ra=$(field two_adapter_forwards_over_step "$json")
  n=$(field adapter_parameters "$json")
  [ "$(field peft "$json")" = "\"$2\"" ] && ok "$1: peft $2 in the JSON" || bad "$1: peft: $json"
  [ "$n" = "$3" ] && ok "$1: $3 adapter parameters" || bad "$1: adapter_parameters '$n', expected $3"
  if awk -v f="$fwd" -v s="$step" -v a="$fwda" -v r="$r" -v ra="$ra" 'BEGIN {
       ok = f > 0 && s > 0 && a > 0 && r > 0 && ra > 0
       ok = ok && (r - 2 * f / s)^2 <= (0.05 * r)^2 && (ra - 2 * a / s)^2 <= (0.05 * ra)^2
       exit !ok }'; then ok "$1: 2 x forward / step = $r (base), $ra (with the adapter)"
  else bad "$1: ratios inconsistent: forward $fwd, adapter forward $fwda, step $step, ratios $r $ra"; fi
}

# LoRA r 8 on q (64 -> 64) and v (64 -> 32): per layer A_q 8x64 + B_q 64x8 + A_v 8x64 + B_v 32x8
json=$("${bench[@]}" --peft lora --json 2>&1) && check_json "lora q,v r8" lora $((5 * (512 + 512 + 512 + 256))) "$json" ||
  bad "bench step --peft lora failed: $json"
# r 4 on q,k,v,o: per layer q 4x64+64x4, k 4x64+32x4, v the same, o 4x64+64x4
json=$("${bench[@]}" --peft lora --lora-rank 4 --lora-alpha 8 --lora-targets q,k,v,o --json 2>&1) &&
  check_json "lora q,k,v,o r4" lora $((5 * (512 + 384 + 384 + 512))) "$json" || bad "bench step --peft lora r4 failed: $json"
# a prefix of 3 tokens: per layer keys and values, 3 x (4 x 8) each
json=$("${bench[@]}" --peft prefix --prefix-tokens 3 --json 2>&1) && check_json "prefix 3" prefix $((5 * 2 * 3 * 32)) "$json" ||
  bad "bench step --peft prefix failed: $json"

# --interleave: the forwards timed between the steps, the same figures reported
json=$("${bench[@]}" --peft lora --interleave --json 2>&1) && check_json "lora --interleave" lora 8960 "$json" ||
  bad "bench step --peft lora --interleave failed: $json"

text=$("${bench[@]}" --peft prefix 2>&1)
grep -q '^adapter  prefix, 1600 parameters: forward with the adapter' <<<"$text" &&
  grep -q '^ratio    2 x forward / step = [0-9.]* (the base.s forward), [0-9.]* (with the adapter)' <<<"$text" &&
  ok "text report: the adapter and the ratios" || bad "text report: $text"
json=$("${bench[@]}" --json 2>&1)
grep -q '"step_over_2_forwards"' <<<"$json" && ! grep -q '"peft"\|adapter' <<<"$json" &&
  ok "without --peft: the full step's report, no adapter fields" || bad "full step's report: $json"

refuse "--keep-quantized without --peft" "keep-quantized" "${bench[@]}" --keep-quantized
refuse "--peft dora" "expected none, lora or prefix" "${bench[@]}" --peft dora
refuse "--lora-rank 0" "lora-rank 0" "${bench[@]}" --peft lora --lora-rank 0
refuse "--lora-rank without --peft" "lora_rank" "${bench[@]}" --lora-rank 4

# bench eval --peft on SmolLM2-135M (30 layers, dim 576, 3 kv heads of 64): 2 examples, one batch
need_assets "$assets" smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf sst2/dev.tsv
eval_bench=("$bin" bench eval --model "$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"
            --data "$assets/sst2/dev.tsv" --batch 2 --batches 1 --repeat 1 --json)
check_eval() { # WHAT PEFT PARAMS KEEP JSON
  local json=$5 te ts r
  te=$(field eval_seconds "$json") ts=$(field step_seconds "$json") r=$(field two_evals_over_step "$json")
  [ "$(field peft "$json")" = "\"$2\"" ] && [ "$(field adapter_parameters "$json")" = "$3" ] &&
    [ "$(field keep_quantized "$json")" = "$4" ] && ok "$1: peft $2, $3 adapter parameters, keep_quantized $4" ||
    bad "$1: adapter fields: $json"
  awk -v e="$te" -v s="$ts" -v r="$r" 'BEGIN { exit !(e > 0 && s > 0 && r > 0 && (r - 2 * e / s)^2 <= (0.05 * r)^2) }' &&
    ok "$1: 2 x eval / step = $r" || bad "$1: ratio $r against eval $te, step $ts"
}
# LoRA r 8 on q (576 -> 576) and v (576 -> 192): per layer A_q 8x576 + B_q 576x8 + A_v 8x576 + B_v 192x8
lora_n=$((30 * (4608 + 4608 + 4608 + 1536)))
g_of() { field g_sum "$1"; }
j1=$("${eval_bench[@]}" --peft lora --keep-quantized --threads 1 2>&1) &&
  check_eval "eval lora, kept quantized" lora "$lora_n" true "$j1" || bad "bench eval --peft lora failed: $j1"
j2=$("${eval_bench[@]}" --peft lora --threads 2 2>&1) && check_eval "eval lora" lora "$lora_n" false "$j2" ||
  bad "bench eval --peft lora (2 threads) failed: $j2"
jf=$("${eval_bench[@]}" --threads 1 2>&1) || bad "bench eval (full) failed: $jf"
[ -n "$(g_of "$j1")" ] && [ "$(g_of "$j1")" = "$(g_of "$j2")" ] &&
  ok "eval lora: g sum $(g_of "$j1") the same at 1 thread kept quantized and 2 threads dequantized" ||
  bad "eval lora: g sums differ: $(g_of "$j1") vs $(g_of "$j2")"
[ "$(g_of "$j1")" != "$(g_of "$jf")" ] && ! grep -q '"peft"' <<<"$jf" &&
  ok "eval without --peft: the full step (g $(g_of "$jf")), no adapter fields" || bad "eval full vs lora: $jf"
# the ceiling (2 x ideal / (2 x ideal + z alone)) with the z of the steps' version, v1 or v2
check_ceiling() { # WHAT ZFIELD JSON
  local c i z
  c=$(field step_ceiling "$3") i=$(field ideal_seconds "$3") z=$(field "$2" "$3")
  awk -v c="$c" -v i="$i" -v z="$z" 'BEGIN { e = c - 2 * i / (2 * i + z); exit !(c > 0 && z > 0 && e * e <= 4e-6) }' &&
    ok "$1: ceiling $c = 2 x ideal $i / (2 x ideal + $2 $z)" || bad "$1: ceiling $c against ideal $i and $2 $z"
}
check_ceiling "eval v1" zgen_seconds "$jf"
jv2=$("${eval_bench[@]}" --threads 1 --rng v2 2>&1) && check_ceiling "eval v2" zgen_v2_seconds "$jv2" ||
  bad "bench eval --rng v2 failed: $jv2"
# a prefix of 5 tokens: per layer keys and values, 5 x 192 each
jp=$("${eval_bench[@]}" --peft prefix 2>&1) && check_eval "eval prefix" prefix $((30 * 2 * 5 * 192)) false "$jp" ||
  bad "bench eval --peft prefix failed: $jp"
refuse "eval --keep-quantized without --peft" "keep-quantized" "${eval_bench[@]}" --keep-quantized
refuse "eval --peft dora" "expected none, lora or prefix" "${eval_bench[@]}" --peft dora
finish
