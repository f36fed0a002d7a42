# Sourced by tests/cli/roundtrip.sh and run by tools/check_checkpoints_transformers.py: the
# one recipe for the checkpoints whose transformers figures are committed under
# tests/data/roundtrip/CASE/. Same commands, same seeds: the same checkpoint, bitwise.
#
# roundtrip_checkpoint CASE BIN ASSETS WORK: trains CASE for 2 steps in WORK/CASE-run
# (evaluating after each, a checkpoint after each: checkpoint-1/, checkpoint-2/, best/ when
# a step lowers the dev loss) and prints the folder of its last checkpoint. CASE is
#   opt      a random OPT (init --preset opt-tiny) with the assets' GPT-2 BPE / OPT ids
#   llama    a random SmolLM2-shaped LLaMA (init --preset smollm2-135m --layers 2), SmolLM2's tokenizer.json
#   gguf     SmolLM2-135M-Instruct from its Q4_1 GGUF file (dequantized), the file's own tokenizer,
#            bf16 masters
#   l2c      stories260K, the llama2.c checkpoint, with tok512.bin
#   l2c-bf16 the same with --master-dtype bf16 (a bf16 checkpoint)
#   opt-disk the opt case with the masters in a disk store (--store disk:WORK/opt-disk.store)
# tools/check_checkpoints_transformers.py commits transformers' figures for opt, llama, gguf.

# The training texts: SST-2 sentences, written as jsonl.
roundtrip_texts() {
  local s
  for s in "hide new secretions from the parental units" "contains no wit , only labored gags" \
           "that loves its characters and communicates something rather beautiful about human nature" \
           "remains utterly satisfied to remain the same throughout" \
           "on the worst revenge-of-the-nerds clichés the filmmakers could dredge up" \
           "that 's far too tragic to merit such superficial treatment" \
           "demonstrates that the director of such hollywood blockbusters as patriot games can still turn out a small , personal film with an emotional wallop ." \
           "of saucy" "a depressed fifteen-year-old 's suicidal poetry" "goes to absurd lengths" \
           "are more deeply thought through than in most right-thinking films"; do
    printf '{"text": "%s"}\n' "$s"
  done
}

# The text every check scores: one line, no newline at its end.
roundtrip_prompt() { printf '%s' "The capital of France is Paris, and the capital of Italy is"; }

roundtrip_checkpoint() {
  local case=$1 bin=$2 assets=$3 work=$4 model extra=()
  mkdir -p "$work" || return 1
  roundtrip_texts > "$work/roundtrip.jsonl"
  roundtrip_prompt > "$work/roundtrip_prompt.txt"
  case $case in
    opt|opt-disk) model=$work/opt-base
         [ -d "$model" ] || "$bin" init --preset opt-tiny --seed 1 -o "$model" > /dev/null || return 1
         [ "$case" = opt ] || extra=(--store "disk:$work/opt-disk.store") ;;
    llama) model=$work/llama-base
         "$bin" init --preset smollm2-135m --layers 2 --seed 3 -o "$model" > /dev/null || return 1 ;;
    gguf) model=$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf
         extra=(--master-dtype bf16) ;; # half the bytes to write (3 x 0.27 GB), and transformers reads a bf16 checkpoint
    l2c|l2c-bf16) model=$assets/stories260K/stories260K.bin
         [ "$case" = l2c ] || extra=(--master-dtype bf16) ;;
    *) echo "roundtrip_checkpoint: unknown case '$case'" >&2; return 1 ;;
  esac
  rm -rf "$work/$case-run"
  "$bin" train --model "$model" --task lm --data "$work/roundtrip.jsonl" --test "$work/roundtrip_prompt.txt" \
    --train-examples 8 --dev-examples 4 --batch 2 --steps 2 --lr 1e-4 --seed 7 --data-seed 1 \
    --eval-every 1 --checkpoint-every 1 --keep-checkpoints 2 "${extra[@]}" --out "$work/$case-run" \
    > "$work/$case-train.log" 2>&1 || { cat "$work/$case-train.log" >&2; return 1; }
  echo "$work/$case-run/checkpoint-2"
}
