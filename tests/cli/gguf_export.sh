#!/usr/bin/env bash
# `distzo export --format gguf`: a stories260K run trained 2 steps, exported as GGUF, is
# the model its checkpoint is: `distzo generate` (greedy) and `distzo eval` on the .gguf
# with no other flags give the checkpoint's text and scores exactly (f32), and the same
# greedy text in q8_0; `export --model` converts a checkpoint folder (no run) to the same
# weights; the export changes nothing in the run folder; OPT and bad --type/--format
# values are refused, naming what is wrong; an export through a disk store writes the same file.
# usage: gguf_export.sh DISTZO_BINARY ASSETS_DIR TEST_DATA_DIR
set -u
bin=$1 assets=$2 data=$3
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin stories260K/tok512.bin sst2/dev.tsv
test_set "$assets" 40

if "$bin" train --steps 2 --lr 3e-4 --batch 4 --train-examples 16 --dev-examples 8 --test "$tmp/test.tsv" \
     --eval-every 0 --checkpoint-every 2 --threads 1 --out "$tmp/run" > "$tmp/train.log" 2>&1; then
  ok "trained 2 steps"
else bad "training failed: $(tail -2 "$tmp/train.log")"; finish; exit; fi
ck=$tmp/run/checkpoint-2
folder() { find "$1" -type f ! -name '*.lock' -exec sha256sum {} + | sort; }
before=$(folder "$tmp/run")

for ty in f32 q8_0; do
  if "$bin" export --run "$tmp/run" -o "$tmp/m_$ty.gguf" --type $ty --threads 1 > "$tmp/exp.log" 2>&1; then
    ok "export --type $ty"
  else bad "export --type $ty failed: $(tail -1 "$tmp/exp.log")"; fi
done
if "$bin" export --run "$tmp/run" -o "$tmp/m_disk.gguf" --type f32 --store "disk:$tmp/export.store" --threads 1 \
     > "$tmp/exp.log" 2>&1 && cmp -s "$tmp/m_disk.gguf" "$tmp/m_f32.gguf"; then
  ok "export through --store disk = in memory (the same file)"
else bad "export through a disk store differs: $(tail -1 "$tmp/exp.log")"; fi
[ "$before" = "$(folder "$tmp/run")" ] && ok "export left the run folder unchanged" || bad "export changed the run folder"
[ "$(head -c 4 "$tmp/m_f32.gguf")" = GGUF ] && ok "-o x.gguf writes GGUF without --format" || bad "no GGUF magic"

gen() { "$bin" generate "$1" --prompt "Once upon a time" --temperature 0 -n 40 --threads 1 2>/dev/null; }
ref=$(gen "$ck")
[ -n "$ref" ] || bad "no text from the checkpoint"
for ty in f32 q8_0; do
  [ "$(gen "$tmp/m_$ty.gguf")" = "$ref" ] && ok "greedy text of the $ty .gguf = the checkpoint's" \
    || bad "greedy text of the $ty .gguf differs: $(gen "$tmp/m_$ty.gguf" | head -c 200)"
done
# the trained weights, not the base model's: the export of the base differs
"$bin" export --model "$assets/stories260K/stories260K.bin" -o "$tmp/base.gguf" --type f32 > /dev/null 2>&1
cmp -s <(tail -c 100000 "$tmp/base.gguf") <(tail -c 100000 "$tmp/m_f32.gguf") \
  && bad "the exported run has the base model's weights" || ok "the exported run's weights differ from the base model's"

# the same prompt and label words for both (eval of a run's checkpoint would take the run's own)
ev() { "$bin" eval "$1" --data "$tmp/test.tsv" --template "{text} It was" --label-words terrible,great --threads 1 \
       --predictions "$2" > /dev/null 2>&1 && cat "$2"; }
if [ -n "$(ev "$ck" "$tmp/p_ck.tsv")" ] && cmp -s "$tmp/p_ck.tsv" <(ev "$tmp/m_f32.gguf" "$tmp/p_gguf.tsv"); then
  ok "eval scores of the f32 .gguf = the checkpoint's (every example, exact)"
else bad "eval of the f32 .gguf differs from the checkpoint's"; fi

# a checkpoint folder converted without the run: the same weights (and so the same text)
if "$bin" export --model "$ck" -o "$tmp/ck.gguf" --type f32 > "$tmp/exp.log" 2>&1 &&
   [ "$(gen "$tmp/ck.gguf")" = "$ref" ] &&
   cmp -s <(tail -c 100000 "$tmp/ck.gguf") <(tail -c 100000 "$tmp/m_f32.gguf"); then
  ok "export --model CHECKPOINT = export --run (weights)"
else bad "export --model of the checkpoint differs: $(tail -1 "$tmp/exp.log")"; fi
if "$bin" export --model "$tmp/m_f32.gguf" -o "$tmp/back" --threads 1 > "$tmp/exp.log" 2>&1 &&
   [ "$(gen "$tmp/back")" = "$ref" ]; then
  ok "the .gguf converted back to an HF folder gives the same text"
else bad "GGUF -> HF: $(tail -1 "$tmp/exp.log")"; fi

refuse() { # WHAT EXPECTED-TEXT ARGS...
  local what=$1 want=$2; shift 2
  if "$bin" export "$@" > "$tmp/err.log" 2>&1; then bad "$what: accepted"
  elif grep -q -- "$want" "$tmp/err.log"; then ok "$what: refused ($(tail -1 "$tmp/err.log" | cut -c1-100))"
  else bad "$what: message lacks '$want': $(tail -1 "$tmp/err.log")"; fi
}
refuse "OPT as GGUF" "architecture opt" --model "$data/hf/opt_preln" -o "$tmp/opt.gguf"
[ -e "$tmp/opt.gguf" ] && bad "a refused export left $tmp/opt.gguf" || ok "a refused export leaves no file"
refuse "--type q4_0" "q4_0" --run "$tmp/run" -o "$tmp/x.gguf" --type q4_0
refuse "--format onnx" "onnx" --run "$tmp/run" -o "$tmp/x" --format onnx
# what the writing needs is checked before the log's replay: a bad --type is said for a run
# that is not even there (it was said after replaying the whole log)
refuse "--type q4_0, before the replay" "export: --type q4_0: expected" --run "$tmp/no-such-run" -o "$tmp/x.gguf" --type q4_0
refuse "-o ''" "no output path" --run "$tmp/run" -o ""
refuse "--allow-short-log without --run" "allow-short-log is for replaying" --model "$ck" -o "$tmp/x" --allow-short-log
refuse "--type with hf" "--type is for --format gguf" --run "$tmp/run" -o "$tmp/x" --type f16
refuse "--run and --model" "--model" --run "$tmp/run" --model "$ck" -o "$tmp/x.gguf"
refuse "-o the model itself" "is the model being exported" --model "$tmp/m_f32.gguf" -o "$tmp/m_f32.gguf"
refuse "-o inside the run folder" "inside the run folder" --run "$tmp/run" -o "$tmp/run/x.gguf"
finish
