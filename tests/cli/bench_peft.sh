#!/usr/bin/env bash
# distzo bench step --peft lora|prefix (issue 29's "a step against two forwards") on
# stories260K (dim 64, 8 heads, 4 kv heads of 8, 5 layers):
# - the report has the adapter's forward and 2 x forward / step against the base's forward
#   and the adapter's, consistent with its own seconds; text and JSON;
# - the adapter's parameter count is the one its shapes give (computed here);
# - --interleave (the forwards between the steps) reports the same figures;
# - without --peft the report is as before (no adapter fields); --perturbation rademacher draws
#   Rademacher z in the steps and the passes;
# - refusals: --keep-quantized without --peft, an unknown --peft, --lora-rank 0, --lora-rank alone.
# bench eval --peft: tests/cli/bench_eval_peft.sh.
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
# --perturbation rademacher (train's option): the steps and the passes draw Rademacher z, and the
# last step's g is not the Gaussian one
jr=$("${bench[@]}" --json --perturbation rademacher 2>&1)
[ "$(grep -o '"perturbation": "[a-z]*"' <<<"$jr" | sort | uniq -c | tr -s ' ')" = ' 2 "perturbation": "rademacher"' ] &&
  [ "$(grep -o '"perturbation": "[a-z]*"' <<<"$json" | sort | uniq -c | tr -s ' ')" = ' 2 "perturbation": "gaussian"' ] &&
  [ -n "$(field last_g "$jr")" ] && [ "$(field last_g "$jr")" != "$(field last_g "$json")" ] &&
  ok "--perturbation rademacher: the steps and the passes (g $(field last_g "$jr") against $(field last_g "$json"))" ||
  bad "--perturbation rademacher: $jr"

refuse "--keep-quantized without --peft" "keep-quantized" "${bench[@]}" --keep-quantized
refuse "--peft dora" "expected none, lora or prefix" "${bench[@]}" --peft dora
refuse "--lora-rank 0" "lora-rank 0" "${bench[@]}" --peft lora --lora-rank 0
refuse "--lora-rank without --peft" "lora_rank" "${bench[@]}" --lora-rank 4
finish
