#!/usr/bin/env bash
# --backend cpu|cuda|ref (src/backend/registry.c, docs/ARCHITECTURE.md):
# - cuda is refused at once, before the model is read (a model path that does not exist is
#   not what the error names), by every command that takes it, saying why: a build without
#   CUDA, no GPU here, or (a CUDA build on a GPU) no pipeline on device buffers yet;
# - an unknown backend is refused naming the choices;
# - --gpu-math tf32|bf16|fp32 is taken where --backend is: with cuda it reaches the same
#   refusal, with another backend or an unknown mode it is refused saying so;
# - --backend cpu is the default, bit for bit (weights, seed log, metrics);
# - --backend ref runs a whole training run on the reference backend: its seed log replayed
#   on the CPU (distzo export) gives its weights bitwise (the ZO ops are every backend's
#   bits), and its first step's loss, at the same weights as the CPU's, agrees with the
#   CPU's within summation order (relative 1e-5; measured ~1e-7);
# - eval and generate run on ref: per-example scores within 1e-5 of the CPU's, greedy tokens
#   the same.
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

why='--backend cuda: (this distzo was built without CUDA|no CUDA GPU found|the CUDA backend cannot run a model yet)'
nomodel=$tmp/no-such-model
refused "train --backend cuda" "$why" train --model "$nomodel" --backend cuda --out "$tmp/r"
refused "eval --backend cuda" "$why" eval "$nomodel" --backend cuda
refused "generate --backend cuda" "$why" generate "$nomodel" --backend cuda
for b in forward step classify eval; do
  refused "bench $b --backend cuda" "$why" bench "$b" --model "$nomodel" --backend cuda
done
refused "serve --backend cuda" "$why" serve --model "$nomodel" --out "$tmp/s" --backend cuda
refused "join --backend cuda" "$why" join http://127.0.0.1:1 --data "$tmp/none" --token-file "$tmp/none" --backend cuda
[ -e "$tmp/r" ] || [ -e "$tmp/s" ] && bad "a refused --backend cuda left a run folder" || ok "refusals leave no run folder"
refused "unknown backend" "option --backend: 'gpu' is not one of cpu, cuda, ref" eval "$model" --backend gpu
refused "empty backend with --gpu-math" "option --backend: '' is not one of cpu, cuda, ref" \
  eval "$model" --backend "" --gpu-math fp32
refused "train --gpu-math" "$why" train --model "$nomodel" --backend cuda --gpu-math fp32 --out "$tmp/r"
refused "eval --gpu-math" "$why" eval "$nomodel" --backend cuda --gpu-math bf16
refused "generate --gpu-math" "$why" generate "$nomodel" --backend cuda --gpu-math tf32
for b in forward step classify eval; do
  refused "bench $b --gpu-math" "$why" bench "$b" --model "$nomodel" --backend cuda --gpu-math fp32
done
refused "serve --gpu-math" "$why" serve --model "$nomodel" --out "$tmp/s" --backend cuda --gpu-math fp32
refused "join --gpu-math" "$why" join http://127.0.0.1:1 --data "$tmp/none" --token-file "$tmp/none" --backend cuda \
  --gpu-math fp32
refused "--gpu-math without cuda" "--gpu-math applies to --backend cuda only \(not cpu\)" eval "$model" --gpu-math fp32
refused "--gpu-math with ref" "--gpu-math applies to --backend cuda only \(not ref\)" \
  train --model "$nomodel" --backend ref --gpu-math bf16 --out "$tmp/r"
refused "--gpu-math unknown" "option --gpu-math: 'fp16' is not one of tf32, bf16, fp32" eval "$nomodel" --backend cuda --gpu-math fp16
[ -e "$tmp/r" ] || [ -e "$tmp/s" ] && bad "a refused --gpu-math left a run folder" || ok "--gpu-math refusals leave no run folder"

steps=3
args=(--model "$model" --steps "$steps" --eval-every 0 --checkpoint-every "$steps" --batch 4 --train-examples 24
      --dev-examples 8 --lr 1e-3 --test "$tmp/test.tsv" --threads 1)
"$bin" train "${args[@]}" --out "$tmp/default" > "$tmp/log" 2>&1
"$bin" train "${args[@]}" --out "$tmp/cpu" --backend cpu > "$tmp/log" 2>&1
if same_run "$tmp/default" "$tmp/cpu" "$steps"; then ok "--backend cpu is the default, bitwise"; else
  bad "--backend cpu differs from the default"; fi

if "$bin" train "${args[@]}" --out "$tmp/ref" --backend ref > "$tmp/log" 2>&1; then ok "train --backend ref"; else
  bad "train --backend ref: $(tail -1 "$tmp/log")"; fi
"$bin" export --run "$tmp/ref" -o "$tmp/ref-export" > "$tmp/log" 2>&1 || true
if cmp -s "$tmp/ref-export/model.safetensors" "$tmp/ref/checkpoint-$steps/model.safetensors"; then
  ok "ref's seed log replayed on the CPU gives ref's weights bitwise"
else bad "export of the ref run differs from its checkpoint"; fi
loss1() { sed -nE 's/^\{"step": 1, "loss": ([^,]*),.*/\1/p' "$1/metrics.jsonl"; }
a=$(loss1 "$tmp/cpu") b=$(loss1 "$tmp/ref")
if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * (a < 0 ? -a : a)) }'
then ok "step 1's loss on ref ($b) within 1e-5 of the CPU's ($a)"; else bad "step 1's loss: ref $b, cpu $a"; fi

"$bin" eval "$model" --data "$tmp/test.tsv" --predictions "$tmp/cpu.tsv" > /dev/null 2>&1
"$bin" eval "$model" --data "$tmp/test.tsv" --predictions "$tmp/ref.tsv" --backend ref > /dev/null 2>&1
if [ -s "$tmp/ref.tsv" ] && paste "$tmp/cpu.tsv" "$tmp/ref.tsv" | awk -F'\t' 'NR > 1 { n = NF / 2
     for (i = 4; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d; if (d > 1e-5) exit 1 }; rows++ }
     END { exit rows != 8 }'; then ok "eval --backend ref: scores within 1e-5 of the CPU's"
else bad "eval --backend ref: scores differ from the CPU's"; fi

gen() { "$bin" generate "$model" --prompt "Once upon a time" -n 12 --temperature 0 --json "$@" 2> /dev/null |
          sed -nE 's/.*"tokens": (\[[^]]*\]).*/\1/p'; }
g_cpu=$(gen) g_ref=$(gen --backend ref)
if [ -n "$g_cpu" ] && [ "$g_cpu" = "$g_ref" ]; then ok "generate --backend ref: the CPU's greedy tokens"; else
  bad "generate: cpu $g_cpu, ref $g_ref"; fi
finish
