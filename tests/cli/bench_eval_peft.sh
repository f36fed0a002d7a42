#!/usr/bin/env bash
# distzo bench eval --peft lora|prefix (issue 29's "a step against two forwards" on real SST-2
# batches with shared prompts), SmolLM2-135M-Instruct Q4_1:
# - the adapter's fields: its parameter count (from its shapes, computed here), the base kept
#   quantized or not, 2 x eval / step against the report's own seconds;
# - the steps' g the same at 1 thread with the base kept quantized and at 2 threads
#   dequantized at load (the same bits);
# - the ceiling, 2 x ideal / (2 x ideal + z alone), with the z of the steps' version (v1, v2) and
#   distribution (Gaussian, Rademacher);
# - refusals: --keep-quantized without --peft, an unknown --peft.
# (The full model's bench eval runs in kernel_paths.sh; its passes over 135M parameters are
# too slow under the sanitizers to repeat here.)
# usage: bench_eval_peft.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
field() { sed -n "s/.*\"$1\": \([-0-9.e+a-z\"]*\).*/\1/p" <<<"$2"; }

# SmolLM2-135M (30 layers, dim 576, 3 kv heads of 64): 2 examples, one batch
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
[ -n "$(g_of "$j1")" ] && [ "$(g_of "$j1")" = "$(g_of "$j2")" ] &&
  ok "eval lora: g sum $(g_of "$j1") the same at 1 thread kept quantized and 2 threads dequantized" ||
  bad "eval lora: g sums differ: $(g_of "$j1") vs $(g_of "$j2")"
# the ceiling (2 x ideal / (2 x ideal + z alone)) with the z of the steps' version, v1 or v2 (the printed
# figures round it by < 1e-4; v1's z in place of v2's moves it by (z1 - z2) / (2 x ideal), ~3e-3 here)
check_ceiling() { # WHAT ZFIELD JSON
  local c i z
  c=$(field step_ceiling "$3") i=$(field ideal_seconds "$3") z=$(field "$2" "$3")
  awk -v c="$c" -v i="$i" -v z="$z" 'BEGIN { e = c - 2 * i / (2 * i + z); exit !(c > 0 && z > 0 && e * e <= 4e-8) }' &&
    ok "$1: ceiling $c = 2 x ideal $i / (2 x ideal + $2 $z)" || bad "$1: ceiling $c against ideal $i and $2 $z"
}
check_ceiling "eval lora v1" zgen_seconds "$j1"
jv2=$("${eval_bench[@]}" --peft lora --keep-quantized --threads 1 --rng v2 2>&1) &&
  check_ceiling "eval lora v2" zgen_v2_seconds "$jv2" || bad "bench eval --peft lora --rng v2 failed: $jv2"
[ "$(g_of "$jv2")" != "$(g_of "$j1")" ] && ok "eval lora v2: its own z (g $(g_of "$jv2"))" ||
  bad "eval lora v2: the same g as v1: $(g_of "$jv2")"
# Rademacher z (--perturbation rademacher, train's option): the steps and the passes draw it, the
# ceiling takes its z, g is its own and the same at 1 and 2 threads
jr1=$("${eval_bench[@]}" --peft lora --threads 1 --rng v2 --perturbation rademacher 2>&1) &&
  check_ceiling "eval lora v2 rademacher" zgen_v2_seconds "$jr1" || bad "bench eval --perturbation rademacher failed: $jr1"
[ "$(grep -o '"perturbation": "[a-z]*"' <<<"$jr1" | sort -u)" = '"perturbation": "rademacher"' ] &&
  ok "eval lora v2 rademacher: the steps and the passes say rademacher" || bad "eval rademacher: fields: $jr1"
jr2=$("${eval_bench[@]}" --peft lora --threads 2 --rng v2 --perturbation rademacher 2>&1) ||
  bad "bench eval --perturbation rademacher (2 threads) failed: $jr2"
[ -n "$(g_of "$jr1")" ] && [ "$(g_of "$jr1")" = "$(g_of "$jr2")" ] && [ "$(g_of "$jr1")" != "$(g_of "$jv2")" ] &&
  ok "eval lora v2 rademacher: its own g $(g_of "$jr1"), the same at 1 and 2 threads" ||
  bad "eval rademacher: g $(g_of "$jr1") / $(g_of "$jr2") (Gaussian v2: $(g_of "$jv2"))"
refuse "eval --perturbation uniform" "not gaussian or rademacher" "${eval_bench[@]}" --perturbation uniform
# a prefix of 5 tokens: per layer keys and values, 5 x 192 each
jp=$("${eval_bench[@]}" --peft prefix 2>&1) && check_eval "eval prefix" prefix $((30 * 2 * 5 * 192)) false "$jp" ||
  bad "bench eval --peft prefix failed: $jp"
refuse "eval --keep-quantized without --peft" "keep-quantized" "${eval_bench[@]}" --keep-quantized
refuse "eval --peft dora" "expected none, lora or prefix" "${eval_bench[@]}" --peft dora
finish
