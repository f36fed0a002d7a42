#!/usr/bin/env bash
# --estimator hizoo keeps the seed-log invariant with its curvature state H:
# - each record holds g and the curvature step c (20 bytes a step, MeZO's 16), and each
#   checkpoint holds curvature.bin beside the weights;
# - --resume after a stop at a checkpoint (H read from it) and after SIGKILL between
#   checkpoints (H read, then moved by the replayed records), threads 1 vs 2, and export
#   (H rebuilt from the log alone) give bitwise the weights, H, metrics and seed log of one
#   uninterrupted run; a disk store, bf16 masters, the baseline kernels and LoRA adapters too;
# - a damaged or foreign curvature.bin is refused naming the file and the field;
# - mpirun -np 2 (--dp 2, --pertp 2) with a replica per rank (--node-size 1) == one process;
#   shared masters, a streamed global block, --spsa-samples 2 and serve are refused;
# - distzo plan counts H (4 bytes a parameter).
# HiZOO-L (--hizoo-rank 1, a matrix's H as rank-1 factors): run.json records it,
# curvature.bin is version 2 with layout 1 and far below a byte a parameter; stop/resume,
# SIGKILL/resume, the baseline kernels, export, LoRA, mpirun --dp 2 and --pertp 2 bitwise one
# uninterrupted run; a layout-0 or damaged curvature.bin refused naming the field; distzo
# plan counts the factors.
# usage: hizoo.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 32
base=(--steps 12 --eval-every 6 --checkpoint-every 6 --train-examples 48 --dev-examples 16 --batch 8
      --lr 1e-3 --weight-decay 0.01 --test "$tmp/test.tsv")
common=("${base[@]}" --estimator hizoo --hizoo-smooth 0.01)
run() { "$bin" train "${common[@]}" "$@" > /dev/null 2>&1; }
same_h() { cmp -s "$1/checkpoint-12/curvature.bin" "$2/checkpoint-12/curvature.bin"; }
tag=hizoo p= # the checks' name and their folders' prefix (HiZOO-L: hizoo-l, l)
check() { if same_run "$2" "$3" 12 && same_h "$2" "$3"; then ok "$tag: $1"; else bad "$tag: $1"; fi; }
# invariants FLAGS...: the run with FLAGS stopped at 6 (1 thread) and resumed (2 threads), killed
# after step 9 and resumed, at the baseline kernels, and exported == $tmp/${p}ref; keeps $tmp/${p}at6
invariants() {
  local ref="$tmp/${p}ref"
  run "$@" --threads 1 --steps 6 --out "$tmp/${p}stop" && cp -r "$tmp/${p}stop" "$tmp/${p}at6" &&
    "$bin" train --resume --steps 12 --threads 2 --out "$tmp/${p}stop" > /dev/null 2>&1 || bad "$tag: resume after a stop failed"
  check "stopped at step 6 (1 thread), resumed (2 threads) == uninterrupted" "$ref" "$tmp/${p}stop"
  (DISTZO_TEST_KILL=0:9 run "$@" --threads 1 --out "$tmp/${p}kill") 2> /dev/null
  "$bin" train --resume --threads 1 --out "$tmp/${p}kill" > /dev/null 2>&1 || bad "$tag: resume after a kill failed"
  check "killed after step 9, resumed (the state of checkpoint 6, replays 6..9) == uninterrupted" "$ref" "$tmp/${p}kill"
  (DISTZO_ISA=baseline run "$@" --threads 1 --out "$tmp/${p}baseline") || bad "$tag: the baseline-kernel run failed"
  check "baseline kernels, 1 thread == the best level, 2 threads" "$ref" "$tmp/${p}baseline"
  # export replays the whole log onto the base model (the curvature from 1)
  "$bin" export --run "$ref" -o "$tmp/${p}exported" > /dev/null 2>&1 || bad "$tag: export failed"
  cmp -s "$tmp/${p}exported/model.safetensors" "$ref/checkpoint-12/model.safetensors" &&
    ok "$tag: export (12 steps replayed) == the trained weights" || bad "$tag: export differs from the trained weights"
}

run --threads 2 --out "$tmp/ref" || bad "hizoo: the reference run failed"
"$bin" train "${base[@]}" --threads 2 --out "$tmp/mezo" > /dev/null 2>&1
cmp -s "$tmp/ref/checkpoint-12/model.safetensors" "$tmp/mezo/checkpoint-12/model.safetensors" &&
  bad "hizoo: the weights are MeZO's" || ok "hizoo: the weights differ from MeZO's"
grep -qE '"estimator":[[:space:]]*"hizoo"' "$tmp/ref/run.json" && ok "hizoo: run.json records the estimator" ||
  bad "hizoo: run.json has no estimator"
size=$(stat -c %s "$tmp/ref/seeds.log") mezo_size=$(stat -c %s "$tmp/mezo/seeds.log" 2>/dev/null || echo 0)
[ "$size" = $((mezo_size + 12 * 4)) ] && ok "hizoo: the seed log holds g and c ($size bytes for 12 steps)" ||
  bad "hizoo: seed log of $size bytes, MeZO's $mezo_size"
n=$("$bin" info "$assets/stories260K/stories260K.bin" 2>/dev/null | awk '/^parameters/ {print $2}')
h_size=$(stat -c %s "$tmp/ref/checkpoint-12/curvature.bin" 2>/dev/null || echo 0)
{ [ -n "$n" ] && [ "$h_size" = $((32 + 4 * n + 4)) ]; } && ok "hizoo: curvature.bin holds one f32 per parameter ($n)" ||
  bad "hizoo: curvature.bin of $h_size bytes for ${n:-?} parameters"

invariants

# a damaged, cut or foreign curvature.bin: resume refuses it naming the file and the field
damage() { # NAME FIELD COMMAND...: a copy of the run stopped at 6, its curvature.bin changed by COMMAND
  local name=$1 field=$2
  shift 2
  cp -r "$tmp/${p}at6" "$tmp/$p$name"
  "$@" "$tmp/$p$name/checkpoint-6/curvature.bin"
  refuse "$tag: resume from a $name curvature.bin" "curvature.bin: field $field" \
    "$bin" train --resume --steps 12 --threads 1 --out "$tmp/$p$name"
}
flip() { printf '\x55' | dd of="$1" bs=1 seek=100 conv=notrunc status=none; }
cut_() { truncate -s 64 "$1"; }
count() { printf '\x01' | dd of="$1" bs=1 seek=16 conv=notrunc status=none; }
magic() { printf 'X' | dd of="$1" bs=1 seek=0 conv=notrunc status=none; }
damage damaged crc32 flip
damage cut data cut_
damage foreign n_floats count
damage alien magic magic
other() { cp "$tmp/${p}ref/checkpoint-12/curvature.bin" "$1"; } # the same run's, of step 12: every other field agrees
damage other-step curvature_checksum other

# disk store, bf16 masters
run --threads 2 --store "disk:$tmp/m.store" --out "$tmp/disk" || bad "hizoo: disk-store run failed"
check "disk store == ram" "$tmp/ref" "$tmp/disk"
refuse "hizoo: a streamed global block, saying to leave out --stream-globals" "leave out --stream-globals" \
  "$bin" train "${common[@]}" --store "disk:$tmp/g.store" --stream-globals --out "$tmp/globals"
[ ! -e "$tmp/g.store" ] && ok "hizoo: the refused start leaves no store file behind" ||
  bad "hizoo: the refused start left $(ls -la "$tmp/g.store")"
run --threads 2 --master-dtype bf16 --out "$tmp/bf16" || bad "hizoo: bf16 run failed"
run --threads 1 --master-dtype bf16 --steps 6 --out "$tmp/bf16-stop" &&
  "$bin" train --resume --steps 12 --threads 2 --out "$tmp/bf16-stop" > /dev/null 2>&1 || bad "hizoo: bf16 resume failed"
check "bf16 masters: stopped at 6 and resumed == uninterrupted" "$tmp/bf16" "$tmp/bf16-stop"
refuse "hizoo: --spsa-samples 2" "spsa-samples" "$bin" train "${common[@]}" --spsa-samples 2 --out "$tmp/q2"
refuse "hizoo: serve" "estimator" "$bin" serve --estimator hizoo --out "$tmp/serve"
refuse "--hizoo-smooth without hizoo" "hizoo-smooth" "$bin" train "${common[@]}" --estimator mezo --hizoo-smooth 0.1 \
  --out "$tmp/smooth"
refuse "plan: hizoo with --spsa-samples 2" "spsa-samples" "$bin" plan --model stories260K --mem-per-node 4 \
  --estimator hizoo --spsa-samples 2

# a LoRA adapter: its own table, its own H
lora=(--peft lora --lora-rank 4)
run "${lora[@]}" --threads 2 --out "$tmp/lora" || bad "hizoo: the LoRA run failed"
run "${lora[@]}" --threads 1 --steps 6 --out "$tmp/lora-stop" &&
  "$bin" train --resume --steps 12 --threads 2 --out "$tmp/lora-stop" > /dev/null 2>&1 || bad "hizoo: LoRA resume failed"
if diff -q <(metrics "$tmp/lora") <(metrics "$tmp/lora-stop") > /dev/null && same_h "$tmp/lora" "$tmp/lora-stop" &&
   cmp -s "$tmp/lora/seeds.log" "$tmp/lora-stop/seeds.log"; then ok "hizoo: LoRA, stopped and resumed == uninterrupted"
else bad "hizoo: LoRA, stopped and resumed differs"; fi
"$bin" export --run "$tmp/lora" -o "$tmp/lora-exported" > /dev/null 2>&1 || bad "hizoo: LoRA export failed"
cmp -s "$tmp/lora-exported/adapter_model.safetensors" "$tmp/lora/checkpoint-12/adapter_model.safetensors" &&
  ok "hizoo: LoRA export == the trained adapter" || bad "hizoo: LoRA export differs from the trained adapter"

# distzo plan counts H
engine_mb() { "$bin" plan --model "$assets/stories260K/stories260K.bin" --mem-per-node 8 --estimator "$@" 2>/dev/null |
  awk '/^P1 x D1/ {print $12}'; }
extra=$(awk -v a="$(engine_mb hizoo)" -v b="$(engine_mb mezo)" -v n="${n:-0}" \
  'BEGIN {d = a - b; w = 4 * n / 1048576; print (d > w - 0.06 && d < w + 0.06) ? "yes" : "no"}')
[ "$extra" = yes ] && ok "hizoo: distzo plan counts the curvature (engine $(engine_mb hizoo) MB, mezo's $(engine_mb mezo))" ||
  bad "hizoo: distzo plan's engine is $(engine_mb hizoo) MB, mezo's $(engine_mb mezo), for 4 bytes x ${n:-?}"

# mpirun: data and perturbation parallelism with a replica per rank; shared masters refused
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -np "$@"; }
  layouts() { # FLAGS...: --dp 2 and --pertp 2 with a replica per rank == $tmp/${p}ref
    local l name args
    for l in "2 --dp 2" "2 --pertp 2"; do
      name=$(echo "$l" | tr -cd '[:alnum:]')
      read -r -a args <<< "$l"
      mpi "${args[0]}" "$bin" train "${common[@]}" "$@" "${args[@]:1}" --node-size 1 --threads 1 --out "$tmp/$p$name" \
        > "$tmp/$p$name.txt" 2>&1 || { bad "$tag: -np $l exited non-zero"; tail -3 "$tmp/$p$name.txt"; continue; }
      check "mpirun -np $l --node-size 1 == one process" "$tmp/${p}ref" "$tmp/$p$name"
    done
  }
  layouts
  refuse "hizoo: masters shared by a node's ranks" "node-size 1" mpi 2 "$bin" train "${common[@]}" --dp 2 \
    --threads 1 --out "$tmp/shared"
else
  bad "hizoo: mpirun not found on PATH (scripts/deps.sh installs it): the MPI layouts are unchecked"
fi
# ---- HiZOO-L: --hizoo-rank 1 ------------------------------------------------------------------
tag=hizoo-l p=l
run --hizoo-rank 1 --threads 2 --out "$tmp/lref" || bad "hizoo-l: the reference run failed"
cmp -s "$tmp/ref/checkpoint-12/model.safetensors" "$tmp/lref/checkpoint-12/model.safetensors" &&
  bad "hizoo-l: the weights are HiZOO's" || ok "hizoo-l: the weights differ from HiZOO's (diagonal H)"
grep -qE '"hizoo_rank":[[:space:]]*1' "$tmp/lref/run.json" && ok "hizoo-l: run.json records --hizoo-rank 1" ||
  bad "hizoo-l: run.json has no hizoo_rank"
grep -q hizoo_rank "$tmp/ref/run.json" && bad "hizoo-l: a rank-0 run.json names hizoo_rank" ||
  ok "hizoo-l: a rank-0 run.json is as before (no hizoo_rank)"
lf="$tmp/lref/checkpoint-12/curvature.bin"
l_size=$(stat -c %s "$lf" 2>/dev/null || echo 0)
l_ver=$(od -An -tu4 -j8 -N4 "$lf" 2>/dev/null | tr -d ' ') l_lay=$(od -An -tu4 -j32 -N4 "$lf" 2>/dev/null | tr -d ' ')
l_n=$(od -An -tu8 -j16 -N8 "$lf" 2>/dev/null | tr -d ' ')
{ [ "$l_ver" = 2 ] && [ "$l_lay" = 1 ] && [ "$l_size" = $((40 + 4 * ${l_n:-0} + 4)) ] && [ -n "$n" ] &&
  [ $((l_size * 4)) -lt "$n" ]; } &&
  ok "hizoo-l: curvature.bin v2, layout 1, $l_n floats ($l_size bytes; HiZOO's $h_size for $n parameters)" ||
  bad "hizoo-l: curvature.bin version ${l_ver:-?} layout ${l_lay:-?}, $l_size bytes for ${n:-?} parameters"
invariants --hizoo-rank 1
diagonal() { cp "$tmp/at6/checkpoint-6/curvature.bin" "$1"; }
damage diagonal layout diagonal
damage damaged crc32 flip
damage cut data cut_
run --hizoo-rank 1 "${lora[@]}" --threads 2 --out "$tmp/llora" || bad "hizoo-l: the LoRA run failed"
"$bin" export --run "$tmp/llora" -o "$tmp/llora-exported" > /dev/null 2>&1 || bad "hizoo-l: LoRA export failed"
cmp -s "$tmp/llora-exported/adapter_model.safetensors" "$tmp/llora/checkpoint-12/adapter_model.safetensors" &&
  ok "hizoo-l: LoRA export == the trained adapter" || bad "hizoo-l: LoRA export differs from the trained adapter"
refuse "hizoo-l: --hizoo-rank without hizoo" "hizoo-rank" "$bin" train "${base[@]}" --hizoo-rank 1 --out "$tmp/lmezo"
refuse "hizoo-l: --hizoo-rank 2" "hizoo-rank" "$bin" train "${common[@]}" --hizoo-rank 2 --out "$tmp/lr2"
lmb=$(engine_mb hizoo --hizoo-rank 1)
lplan=$(awk -v a="$lmb" -v b="$(engine_mb mezo)" -v h="$(engine_mb hizoo)" \
  'BEGIN {print (a != "" && a >= b && a - b < (h - b) / 4) ? "yes" : "no"}')
[ "$lplan" = yes ] && ok "hizoo-l: distzo plan counts the factors (engine $lmb MB, mezo's $(engine_mb mezo), hizoo's $(engine_mb hizoo))" ||
  bad "hizoo-l: distzo plan's engine is ${lmb:-?} MB, mezo's $(engine_mb mezo), hizoo's $(engine_mb hizoo)"
command -v mpirun > /dev/null && layouts --hizoo-rank 1 # (without mpirun: one failure above)
finish
