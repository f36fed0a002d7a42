#!/usr/bin/env bash
# --backend cpu|cuda|ref (src/backend/registry.c, docs/ARCHITECTURE.md):
# - cuda is refused at once, before the model is read (a model path that does not exist is
#   not what the error names), by every command that takes it, saying why: a build without
#   CUDA, or no GPU here; where it runs (a CUDA build on a GPU), the device checks below run
#   on it too, with --gpu-math fp32;
# - an unknown backend is refused naming the choices;
# - --gpu-math tf32|bf16|fp32 is taken where --backend is: with cuda it reaches the same
#   refusal, with another backend or an unknown mode it is refused saying so;
# - --backend cpu is the default, bit for bit (weights, seed log, metrics);
# - --backend ref runs a whole training run (10 steps) on the reference backend's ops over
#   guarded buffers (a device stand-in: host code touching them faults), so the masters are
#   resident in its buffers and every update is applied there: its seed log replayed on the
#   CPU (distzo export) gives bitwise the weights it held (the ZO ops are every backend's
#   bits);
# - at the same weights (--lr 0, so each of the 10 steps draws its own batch and z at the
#   base weights) ref's losses agree with the CPU's within summation order (relative 1e-5;
#   measured ~2e-7), and so do its g (relative 1e-3; g = (L+ - L-)/(2 eps) magnifies);
#   with lr > 0 the runs then drift apart, each exact on replay;
# - --store disk with --backend ref streams the layer masters from the store through the
#   device: the resident run's checkpoint, metrics and seed log bitwise;
# - --max-device-memory: below what streaming the layers needs refused naming the parts,
#   just above it the layer masters stream from host memory, the resident run bitwise; a
#   cap with --backend cpu refused;
# - eval and generate run on ref: per-example scores within 1e-5 of the CPU's, greedy tokens
#   the same.
# The last four hold for cuda too where it runs (its losses measured the same way).
# usage: backend.sh DISTZO ASSETS
set -euo pipefail
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
model=$assets/stories260K/stories260K.bin
test_set "$assets" 8

# refused NAME PATTERN CMD...: CMD exits 1 at once with an error matching PATTERN
refused() {
  local name=$1 pattern=$2 rc=0
  shift 2
  timeout 20 "$bin" "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
  if [ "$rc" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err"; then ok "$name"; else
    bad "$name: exit $rc, said: $(head -c 300 "$tmp/err")"; fi
}

# cuda runs here (a CUDA build on a GPU): the device checks below run on it too; elsewhere
# every command refuses it, saying why
cuda_runs=0
"$bin" eval "$model" --data "$tmp/test.tsv" --backend cuda > /dev/null 2>&1 && cuda_runs=1
why='--backend cuda: (this distzo was built without CUDA|no CUDA GPU found)'
nomodel=$tmp/no-such-model
if [ "$cuda_runs" = 1 ]; then ok "--backend cuda runs here: its refusals do not apply"; else
  refused "train --backend cuda" "$why" train --model "$nomodel" --backend cuda --out "$tmp/r"
  refused "eval --backend cuda" "$why" eval "$nomodel" --backend cuda
  refused "generate --backend cuda" "$why" generate "$nomodel" --backend cuda
  for b in forward step classify eval; do
    refused "bench $b --backend cuda" "$why" bench "$b" --model "$nomodel" --backend cuda
  done
  refused "serve --backend cuda" "$why" serve --model "$nomodel" --out "$tmp/s" --backend cuda
  refused "join --backend cuda" "$why" join http://127.0.0.1:1 --data "$tmp/none" --token-file "$tmp/none" \
    --backend cuda
  [ -e "$tmp/r" ] || [ -e "$tmp/s" ] && bad "a refused --backend cuda left a run folder" ||
    ok "refusals leave no run folder"
  refused "train --gpu-math" "$why" train --model "$nomodel" --backend cuda --gpu-math fp32 --out "$tmp/r"
  refused "eval --gpu-math" "$why" eval "$nomodel" --backend cuda --gpu-math bf16
  refused "generate --gpu-math" "$why" generate "$nomodel" --backend cuda --gpu-math tf32
  for b in forward step classify eval; do
    refused "bench $b --gpu-math" "$why" bench "$b" --model "$nomodel" --backend cuda --gpu-math fp32
  done
  refused "serve --gpu-math" "$why" serve --model "$nomodel" --out "$tmp/s" --backend cuda --gpu-math fp32
  refused "join --gpu-math" "$why" join http://127.0.0.1:1 --data "$tmp/none" --token-file "$tmp/none" \
    --backend cuda --gpu-math fp32
fi
refused "unknown backend" "option --backend: 'gpu' is not one of cpu, cuda, ref" eval "$model" --backend gpu
refused "empty backend with --gpu-math" "option --backend: '' is not one of cpu, cuda, ref" \
  eval "$model" --backend "" --gpu-math fp32
refused "--gpu-math without cuda" "--gpu-math applies to --backend cuda only \(not cpu\)" eval "$model" --gpu-math fp32
refused "--gpu-math with ref" "--gpu-math applies to --backend cuda only \(not ref\)" \
  train --model "$nomodel" --backend ref --gpu-math bf16 --out "$tmp/r"
refused "--gpu-math unknown" "option --gpu-math: 'fp16' is not one of tf32, bf16, fp32" eval "$nomodel" --backend cuda --gpu-math fp16
[ -e "$tmp/r" ] || [ -e "$tmp/s" ] && bad "a refused --gpu-math left a run folder" || ok "--gpu-math refusals leave no run folder"

steps=10
args=(--model "$model" --steps "$steps" --eval-every 0 --checkpoint-every "$steps" --batch 4 --train-examples 24
      --dev-examples 8 --lr 1e-3 --test "$tmp/test.tsv" --threads 1)
"$bin" train "${args[@]}" --out "$tmp/default" > "$tmp/log" 2>&1
"$bin" train "${args[@]}" --out "$tmp/cpu" --backend cpu > "$tmp/log" 2>&1
if same_run "$tmp/default" "$tmp/cpu" "$steps"; then ok "--backend cpu is the default, bitwise"; else
  bad "--backend cpu differs from the default"; fi
"$bin" train "${args[@]}" --lr 0 --out "$tmp/cpu0" > "$tmp/log" 2>&1
"$bin" eval "$model" --data "$tmp/test.tsv" --predictions "$tmp/cpu.tsv" > /dev/null 2>&1
gen() { "$bin" generate "$model" --prompt "Once upon a time" -n 12 --temperature 0 --json "$@" 2> /dev/null |
          sed -nE 's/.*"tokens": (\[[^]]*\]).*/\1/p'; }
g_cpu=$(gen)
col() { sed -nE 's/^\{"step": ([1-9][0-9]*), "loss": ([^,]*), "g": ([^,]*),.*/\1 \2 \3/p' "$1/metrics.jsonl"; }

# device NAME FLAGS...: backend NAME, whose buffers are not host memory (the masters resident
# in them), against the CPU
device() {
  local name=$1
  shift
  if "$bin" train "${args[@]}" --out "$tmp/$name" --backend "$name" "$@" > "$tmp/log" 2>&1; then
    ok "train --backend $name"; else bad "train --backend $name: $(tail -1 "$tmp/log")"; fi
  "$bin" export --run "$tmp/$name" -o "$tmp/$name-export" > "$tmp/log" 2>&1 || true
  if cmp -s "$tmp/$name-export/model.safetensors" "$tmp/$name/checkpoint-$steps/model.safetensors"; then
    ok "$name's seed log replayed on the CPU gives $name's weights bitwise"
  else bad "export of the $name run differs from its checkpoint"; fi
  # under --max-device-memory: a cap below even streaming refused, naming the parts; the
  # smallest whole MB above streaming's need streams the layer masters, the same run bitwise
  refused "train --backend $name --max-device-memory 1" "--max-device-memory 1.00 MB: even streaming the layers \
needs [0-9.]+ MB on --backend $name: the global block's masters .*, one layer's masters .*, the working copies .*, \
the forward's buffers" train "${args[@]}" --backend "$name" "$@" --max-device-memory 1 --out "$tmp/$name-cap1"
  [ -e "$tmp/$name-cap1" ] && bad "a refused --max-device-memory left a run folder"
  local cap
  cap=$(sed -nE 's/.*even streaming the layers needs ([0-9.]+) MB.*/\1/p' "$tmp/err" |
          awk '{ c = int($1); if (c < $1) c++; print c }')
  "$bin" train "${args[@]}" --out "$tmp/$name-stream" --backend "$name" "$@" --max-device-memory "${cap:-0}" \
    > "$tmp/log" 2>&1 || true
  if grep -q "the layer masters stay in host memory and stream" "$tmp/log" &&
       same_run "$tmp/$name" "$tmp/$name-stream" "$steps"; then
    ok "--backend $name --max-device-memory $cap streams the layers: the resident run bitwise"
  else bad "--backend $name --max-device-memory ${cap:-?}: $(tail -1 "$tmp/log")"; fi
  # the same 10 steps at the base weights (--lr 0): every step's loss and g side by side
  "$bin" train "${args[@]}" --lr 0 --out "$tmp/${name}0" --backend "$name" "$@" > "$tmp/log" 2>&1
  if paste -d' ' <(col "$tmp/cpu0") <(col "$tmp/${name}0") | awk -v n="$steps" '
       function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
       { rows++; l = rel($2, $5); g = rel($3, $6); if (l > lmax) lmax = l; if (g > gmax) gmax = g
         d = $2 - $5; if (d < 0) d = -d; if (d > dmax) dmax = d }
       END { printf "largest loss difference %.3g (relative %.3g), g relative %.3g over %d steps\n", dmax,
                    lmax, gmax, rows
             exit !(rows == n && lmax <= 1e-5 && gmax <= 1e-3) }' > "$tmp/diff"
  then ok "$name's losses at the CPU's weights: $(cat "$tmp/diff")"
  else bad "$name's losses vs the CPU's: $(cat "$tmp/diff")"; fi
  # a disk store behind the device: the layer masters stream from the store, the resident run bitwise
  "$bin" train "${args[@]}" --store "disk:$tmp/store-$name.safetensors" --backend "$name" "$@" --out "$tmp/disk-$name" \
    > "$tmp/log" 2>&1 || true
  if grep -q "the layer masters stay in the store" "$tmp/log" && same_run "$tmp/$name" "$tmp/disk-$name" "$steps"; then
    ok "--store disk --backend $name: the layer masters stream from the store, the resident run bitwise"
  else bad "--store disk --backend $name: $(tail -1 "$tmp/log")"; fi
  "$bin" eval "$model" --data "$tmp/test.tsv" --predictions "$tmp/$name.tsv" --backend "$name" "$@" > /dev/null 2>&1
  if [ -s "$tmp/$name.tsv" ] && paste "$tmp/cpu.tsv" "$tmp/$name.tsv" | awk -F'\t' 'NR > 1 { n = NF / 2
       for (i = 4; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d; if (d > 1e-5) exit 1 }; rows++ }
       END { exit rows != 8 }'; then ok "eval --backend $name: scores within 1e-5 of the CPU's"
  else bad "eval --backend $name: scores differ from the CPU's"; fi
  local g_dev
  g_dev=$(gen --backend "$name" "$@")
  if [ -n "$g_cpu" ] && [ "$g_cpu" = "$g_dev" ]; then ok "generate --backend $name: the CPU's greedy tokens"; else
    bad "generate: cpu $g_cpu, $name $g_dev"; fi
}
refused "--max-device-memory with cpu" "--max-device-memory caps a device backend's memory; --backend cpu computes \
in host memory" train "${args[@]}" --max-device-memory 64 --out "$tmp/cap-cpu"
device ref
if [ "$cuda_runs" = 1 ]; then device cuda --gpu-math fp32; fi
finish
