#!/usr/bin/env bash
# tools/device_check.sh --dry-run: issue 33's prepared GPU check, its logic run here without a
# GPU (the CPU backend in place of cuda, opt-tiny in place of OPT-1.3B):
# - summary.txt lists every item once, each either with a figure (passed, met, missed,
#   measured) or as "not available" saying why, never passed without a figure; the JUnit
#   file is well-formed and counts the same;
# - the MeZO runs' CPU exports equal their checkpoints bitwise (checked here again with cmp),
#   bench step's step time is the one in its JSON; PyTorch's comparison is measured where
#   torch and transformers import, else "not available" (not installed on the dev machine);
# - with --backend cuda in a build that lacks it, every item that needs it is "not available"
#   with distzo's reason, and the check still succeeds;
# - with a stand-in for Python with PyTorch (DZ_PYTHON: prints mezo_reference.py's JSON with a
#   chosen step time), the step target is the ratio of the two steps, met or missed as it must;
#   with a stand-in nvidia-smi (500 MiB idle, 1500 MiB while sampling), distzo's peak device
#   memory is 1000 MiB and the memory target 1000 / PyTorch's 64 MiB, missed;
# - a damaged export (DZ_DEVICE_CHECK_CORRUPT=stories) fails its item and the check (exit 1);
# - a spent time budget fails the steps that could not start (exit 1).
# usage: device_check_dry.sh DISTZO ASSETS
set -euo pipefail
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin stories260K/tok512.bin gpt2-bpe/dict.txt sst2/train.tsv sst2/dev.tsv
script=$(cd "$(dirname "$0")/../.." && pwd)/tools/device_check.sh
items="build gpu_tests backend mezo_stories mezo_opt bench_distzo bench_torch target_step target_memory target_stream"

# dry NAME [VAR=VALUE...]: the dry run into $tmp/NAME; its exit status in $tmp/NAME.rc
dry() {
  local name=$1 rc=0
  shift
  env "$@" DZ_DEVICE_CHECK_BIN="$bin" OUT="$tmp/$name" bash "$script" --dry-run > "$tmp/$name.txt" 2>&1 || rc=$?
  echo "$rc" > "$tmp/$name.rc"
}
rc() { cat "$tmp/$1.rc"; }
line() { grep "^item $2: " "$tmp/$1/summary.txt" || true; }
status() { line "$1" "$2" | sed -E 's/^item [a-z_]+: (passed|failed|met|missed|measured|not available): .*/\1/'; }

# every_item RUN: each item once, with a figure or as "not available" with a reason
every_item() {
  local run=$1 name n s detail bad_items=""
  for name in $items; do
    n=$(line "$run" "$name" | wc -l) s=$(status "$run" "$name")
    detail=$(line "$run" "$name" | sed -E 's/^[^:]*: [^:]*: //')
    case $s in
      passed | met | missed | measured) [[ $detail =~ [0-9] ]] || bad_items="$bad_items $name(no figure)" ;;
      failed) ;;
      "not available") [ -n "$detail" ] || bad_items="$bad_items $name(no reason)" ;;
      *) bad_items="$bad_items $name(status '$s')" ;;
    esac
    [ "$n" = 1 ] || bad_items="$bad_items $name($n lines)"
  done
  if [ -z "$bad_items" ]; then ok "$run: every item listed once, with a figure or as not available"
  else bad "$run: items wrong:$bad_items ($(head -c 2000 "$tmp/$run/summary.txt"))"; fi
}

# junit RUN FAILURES: device_check.xml parses, 10 test cases, FAILURES failures
junit() {
  local x=$tmp/$1/device_check.xml
  if [ "$(grep -c '<testcase ' "$x")" = 10 ] && grep -q "failures=\"$2\"" "$x" &&
     { ! command -v python3 > /dev/null || python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$x"; }
  then ok "$1: device_check.xml well-formed, 10 cases, $2 failures"
  else bad "$1: device_check.xml: $(head -c 600 "$x")"; fi
}

dry cpu OMP_NUM_THREADS=1
every_item cpu
junit cpu 0
[ "$(rc cpu)" = 0 ] && ok "the dry run succeeds" || bad "dry run exit $(rc cpu): $(tail -5 "$tmp/cpu.txt")"
for m in stories opt; do
  w=$tmp/cpu/work
  if [ "$(status cpu "mezo_$m")" = passed ] && line cpu "mezo_$m" | grep -q 'bitwise' &&
     cmp -s "$w/run_$m/checkpoint-20/model.safetensors" "$w/export_$m/model.safetensors"; then
    ok "mezo_$m: passed, and the export does equal checkpoint-20"
  else bad "mezo_$m: $(line cpu "mezo_$m")"; fi
done
s=$(sed -nE 's/.*"step_seconds": ([0-9.]+).*/\1/p' "$tmp/cpu/bench_distzo.out")
said=$(line cpu bench_distzo | sed -nE 's/.*: step ([0-9.]+) s,.*/\1/p')
if [ -n "$s" ] && [ "$(status cpu bench_distzo)" = measured ] &&
   awk -v a="$s" -v b="$said" 'BEGIN { exit !(b != "" && a == b + 0) }'; then
  ok "bench_distzo: step $said s, bench step's own figure ($s)"
else bad "bench_distzo: $(line cpu bench_distzo) (json step_seconds '$s')"; fi
if python3 -c 'import torch, transformers' > /dev/null 2>&1; then
  [ "$(status cpu bench_torch)" = measured ] && ok "PyTorch installed: bench_torch measured" ||
    bad "bench_torch: $(line cpu bench_torch)"
else
  [ "$(status cpu bench_torch)" = "not available" ] && [ "$(status cpu target_step)" = "not available" ] &&
    line cpu bench_torch | grep -q 'PyTorch is not usable here' &&
    ok "no PyTorch: its items not available, saying so" ||
    bad "no PyTorch: $(line cpu bench_torch) / $(line cpu target_step)"
fi

dry cuda OMP_NUM_THREADS=1 DZ_DEVICE_CHECK_BACKEND=cuda
every_item cuda
na=0
for name in backend mezo_stories mezo_opt bench_distzo target_step target_stream; do
  [ "$(status cuda "$name")" = "not available" ] && line cuda "$name" | grep -q -- '--backend cuda:' && na=$((na + 1))
done
[ "$na" = 6 ] && [ "$(rc cuda)" = 0 ] && ok "--backend cuda refused: its 6 items not available with distzo's reason" ||
  bad "--backend cuda: $na of 6 not available, exit $(rc cuda): $(cat "$tmp/cuda/summary.txt")"

# fake_python STEP: $tmp/python, which answers the PyTorch probe and prints mezo_reference.py's
# JSON (the keys the check reads) with a step of STEP seconds
fake_python() {
  local json='{"torch": "stub", "forward_s": {"mean": 0.25}, "step_s": {"mean": STEP},
              "device_memory_mib": {"forward": {"max_allocated_mib": 64.0}}}'
  { echo '#!/usr/bin/env bash'
    echo '[ "$1" = -c ] && exit 0'
    echo "echo '${json/STEP/$1}'"; } > "$tmp/python"
  chmod +x "$tmp/python"
}
# step_target RUN STATUS: target_step is STATUS with PyTorch's step / distzo's as its ratio
step_target() {
  local pt dz r
  pt=$(line "$1" bench_torch | sed -nE 's/.*: step ([0-9.e-]+) s,.*/\1/p')
  dz=$(line "$1" bench_distzo | sed -nE 's/.*: step ([0-9.]+) s,.*/\1/p')
  r=$(line "$1" target_step | sed -nE 's/.* = ([0-9.]+) \(target >= 2\)$/\1/p')
  if [ "$(status "$1" target_step)" = "$2" ] && [ -n "$r" ] && [ -n "$dz" ] &&
     awk -v p="$pt" -v d="$dz" -v r="$r" 'BEGIN { e = p / d; exit !(r - e < 0.001 && e - r < 0.001) }'; then
    ok "$1: PyTorch step $pt s / distzo $dz s = $r: target_step $2"
  else bad "$1: $(line "$1" bench_torch) / $(line "$1" target_step)"; fi
}
# $tmp/bin/nvidia-smi: 500 MiB used when asked once, 1500 MiB in its sampling loop
mkdir -p "$tmp/bin"
cat > "$tmp/bin/nvidia-smi" << 'SMI'
#!/usr/bin/env bash
case "$*" in
  *-lms*) while :; do echo 1500; sleep 0.05; done ;;
  *memory.used*) echo 500 ;;
  *--query-gpu=name*) echo "Stand-in GPU, 1000 MiB, 0.0" ;;
  *) echo "stand-in nvidia-smi" ;;
esac
SMI
chmod +x "$tmp/bin/nvidia-smi"
fake_python 1000
dry torch OMP_NUM_THREADS=1 DZ_PYTHON="$tmp/python" PATH="$tmp/bin:$PATH"
every_item torch
step_target torch met
if line torch bench_distzo | grep -q 'peak device memory 1000 MiB (nvidia-smi' &&
   [ "$(status torch target_memory)" = missed ] &&
   line torch target_memory | grep -qF '= 1000 / 64.0 = 15.625 (target <= 1.1)'; then
  ok "torch: peak device memory 1000 MiB from nvidia-smi's samples; 1000 / 64 = 15.625, memory target missed"
else bad "torch: $(line torch bench_distzo) / $(line torch target_memory)"; fi

fake_python 1e-9
dry corrupt OMP_NUM_THREADS=1 DZ_DEVICE_CHECK_CORRUPT=stories DZ_PYTHON="$tmp/python"
every_item corrupt
step_target corrupt missed
junit corrupt 2
[ "$(status corrupt mezo_stories)" = failed ] && [ "$(status corrupt mezo_opt)" = passed ] && [ "$(rc corrupt)" = 1 ] &&
  ok "a damaged export fails mezo_stories and the check" ||
  bad "damaged export: $(line corrupt mezo_stories), exit $(rc corrupt)"

dry budget OMP_NUM_THREADS=1 DZ_DEVICE_CHECK_BUDGET=3
every_item budget
[ "$(status budget backend)" = failed ] && line budget backend | grep -q 'budget' && [ "$(rc budget)" = 1 ] &&
  ok "a spent budget fails the steps it stops" || bad "spent budget: $(line budget backend), exit $(rc budget)"
finish
