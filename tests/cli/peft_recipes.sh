# Sourced by tests/cli/peft_golden.sh and run by tools/make_peft_golden.py --distzo: the one
# recipe for the distzo-made adapters committed under tests/data/peft/ (whose logits under
# PEFT itself are the goldens). Same commands, same seeds: the same adapter, bitwise.
#
# peft_golden_adapter CASE BIN ASSETS WORK: trains CASE on stories260K for 8 steps in
# WORK/CASE-run, exports its PEFT folder to WORK/CASE and prints that folder. CASE is
#   distzo_lora    --peft lora, rank 2, alpha 6 (scale 3, not MeZO's 2: a swapped alpha/r
#                  shows), on all seven projections
#   distzo_prefix  --peft prefix, 3 virtual tokens
# The learning rates are large so that 8 steps move the adapter well away from its init.
peft_golden_adapter() {
  local case=$1 bin=$2 assets=$3 work=$4 extra=()
  case $case in
    distzo_lora) extra=(--peft lora --lora-rank 2 --lora-alpha 6 --lora-targets q,k,v,o,gate,up,down
                        --lr 1e-2 --eps 1e-2) ;;
    distzo_prefix) extra=(--peft prefix --prefix-tokens 3 --lr 5e-2 --eps 1e-1) ;;
    *) echo "peft_golden_adapter: unknown case '$case'" >&2; return 1 ;;
  esac
  mkdir -p "$work" && head -17 "$assets/sst2/dev.tsv" > "$work/test.tsv" || return 1
  rm -rf "${work:?}/$case-run" "${work:?}/$case"
  "$bin" train --model "$assets/stories260K/stories260K.bin" --data "$assets/sst2/train.tsv" \
    --test "$work/test.tsv" "${extra[@]}" \
    --steps 8 --batch 8 --train-examples 48 --dev-examples 16 --eval-every 8 --checkpoint-every 8 \
    --seed 29 --data-seed 1 --threads 2 --out "$work/$case-run" > "$work/$case-train.log" 2>&1 &&
    "$bin" export --run "$work/$case-run" -o "$work/$case" > "$work/$case-export.log" 2>&1 ||
    { cat "$work/$case-train.log" "$work/$case-export.log" >&2 2> /dev/null; return 1; }
  echo "$work/$case"
}
