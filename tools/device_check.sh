#!/usr/bin/env bash
# The prepared GPU check of issue 33 (item 7): run once on a machine with one NVIDIA H100 or
# H200, nvcc, CMake, PyTorch + transformers and no package registry, in under 8 minutes.
# Everything it writes that is worth keeping goes to $OUT (default ./device_check_out):
# summary.txt (one line per item, with its figure), the logs, device_check.xml (JUnit, one
# test case per item) and ctest_gpu.xml. Large files (models, runs) stay in $work.
#
# Items, in order, each under its own `timeout` and all under one budget (DZ_DEVICE_CHECK_BUDGET,
# default 470 s), so that a step that hangs cannot eat the rerun's time:
#  build         cmake -DDZ_CUDA=ON, targets distzo and the gpu-labelled tests', -j$(nproc)
#  gpu_tests     ctest -L gpu (tests/test_cuda_gpu.c: ZO kernels bitwise, the forward's ops and the
#                flash-style attention against the reference, the sliced upload over NCCL on one GPU)
#  backend       does this distzo accept --backend cuda? (a greedy generate on stories260K)
#  mezo_stories  20 MeZO steps of stories260K on the GPU; `distzo export --run` on the CPU must
#                give checkpoint-20's model.safetensors bitwise (cmp); step 1's loss vs a CPU run
#  mezo_opt      the same for a random OPT-1.3B made here by `distzo init` (batch 4 SST-2 prompts)
#  bench_distzo  `distzo bench step` on OPT-1.3B, batch 16 x 128: step seconds, peak device memory
#                (bench's own device figure when it has one, else nvidia-smi's memory.used peak
#                over the run minus the idle figure: this includes the CUDA context)
#  bench_torch   bench/mezo_reference.py --device cuda, same model and shapes: MeZO's step, and
#                torch.cuda.max_memory_allocated of an inference forward (weights included)
#  target_step   PyTorch step / distzo step >= 2
#  target_memory distzo peak device memory / PyTorch inference forward <= 1.1
#  target_stream bench step at --max-device-memory = 25% of the model / resident <= 1.3
# An item is passed, failed, met, missed (a target), measured, or "not available" (what this
# build or machine does not have, saying why: e.g. --backend cuda refused as not built yet,
# no --max-device-memory option, no PyTorch). No item is reported passed, met or measured
# without a figure. Exit status 1 when an item failed, else 0 (a missed target is a result).
#
# Assets: stories260K (1 MiB), gpt2-bpe (2 MiB, OPT's tokenizer for `distzo init`) and SST-2
# (dev.tsv and 2000 training rows) from $DISTZO_ASSETS, else ./device_assets, else
# ../shared/assets. Only 64 MiB reach the GPU machine and ../shared does not, so on this side
# first run `tools/device_check.sh --stage-assets` (copies them into ./device_assets, which
# git ignores; 3.3 MiB) and `--stage-deps` (the build's C libraries, 11 MiB, in case the GPU
# machine lacks them: see below), and carry device_assets with the repository. The models and runs
# (15 GB for OPT-1.3B) go to $DZ_DEVICE_CHECK_WORK (default build-device/check), never to $OUT.
#
# --dry-run (or DZ_DEVICE_CHECK_DRY=1): the same logic on this machine without a GPU: no
# build (DZ_DEVICE_CHECK_BIN, default build/distzo), the "device" backend is
# DZ_DEVICE_CHECK_BACKEND (default cpu), tiny sizes (opt-tiny, batch 2 x 16), PyTorch on the
# CPU where it is installed. tests/cli/device_check_dry.sh runs it; DZ_DEVICE_CHECK_CORRUPT=stories
# (dry runs only) damages the stories export before the comparison, to show that it fails.
# DZ_DEVICE_CHECK_OPT: another `distzo init` preset than opt-1.3b (a quicker check of the flow).
#
# Usage: OUT=/some/dir tools/device_check.sh [--dry-run | --stage-assets | --stage-deps]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD

# ---- output: the summary, one line per item, the JUnit file --------------------------------
say() { echo "$*" | tee -a "$out/summary.txt"; }

# item NAME STATUS DETAIL...: records one result (DETAIL's words joined by spaces). passed, met,
# missed and measured need a figure (a digit) in DETAIL, else the item is recorded as failed:
# nothing is claimed unmeasured.
item() {
  local name=$1 status=$2 detail="${*:3}"
  case $status in
    passed | met | missed | measured)
      [[ $detail =~ [0-9] ]] || { detail="reported $status without a figure: $detail"; status=failed; } ;;
    failed | "not available") ;;
    *) detail="unknown status $status: $detail" status=failed ;;
  esac
  printf '%s\t%s\t%s\n' "$name" "$status" "$detail" >> "$out/items.tsv"
  say "item $name: $status: $detail"
}

xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<< "$1"; }

# write_junit: device_check.xml, a test case per item: failed is a failure, a missed target a
# failure of type "target missed", not available is skipped.
write_junit() {
  local name status detail n fails skips
  n=$(wc -l < "$out/items.tsv")
  fails=$(awk -F'\t' '$2 == "failed" || $2 == "missed"' "$out/items.tsv" | wc -l)
  skips=$(awk -F'\t' '$2 == "not available"' "$out/items.tsv" | wc -l)
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuite name=\"device_check\" tests=\"$n\" failures=\"$fails\" skipped=\"$skips\">"
    while IFS=$'\t' read -r name status detail; do
      detail=$(xml_escape "$detail")
      printf '  <testcase classname="device_check" name="%s">' "$name"
      case $status in
        failed) printf '<failure message="%s"/>' "$detail" ;;
        missed) printf '<failure type="target missed" message="%s"/>' "$detail" ;;
        "not available") printf '<skipped message="%s"/>' "$detail" ;;
        *) printf '<system-out>%s: %s</system-out>' "$status" "$detail" ;;
      esac
      echo '</testcase>'
    done < "$out/items.tsv"
    echo '</testsuite>'
  } > "$out/device_check.xml"
}

# finish_summary: the counts and the exit status (1 when an item failed).
finish_summary() {
  count() { awk -F'\t' -v s="$1" '$2 == s' "$out/items.tsv" | wc -l; }
  say "result: $(count passed) passed, $(count measured) measured, $(count met) targets met," \
      "$(count missed) targets missed, $(count "not available") not available, $(count failed) failed" \
      "($(($(date +%s) - started)) s)"
  [ "$(count failed)" -eq 0 ]
  exit
}

# ---- running a step -------------------------------------------------------------------------
# run_step NAME WANT CMD...: CMD under `timeout`, at most WANT seconds and never past the
# budget; stdout to $out/NAME.out, stderr to $out/NAME.log. Sets step_s (seconds taken) and
# step_why (why it failed). Returns CMD's status; 124 timed out, 125 budget spent.
run_step() {
  local name=$1 want=$2 left t0 rc
  shift 2
  left=$((deadline - $(date +%s)))
  [ "$left" -lt "$want" ] && want=$left
  step_s=0 step_why="not started: the time budget (DZ_DEVICE_CHECK_BUDGET) is spent"
  [ "$want" -ge 5 ] || return 125
  t0=$(date +%s.%N)
  timeout -k 10 "$want" "$@" > "$out/$name.out" 2> "$out/$name.log"
  rc=$?
  step_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) step_why="" ;;
    124 | 137) step_why="timed out after $want s (see $name.log)" ;;
    *) step_why="exit $rc (see $name.log: $(tail -n 1 "$out/$name.log" | cut -c1-200))" ;;
  esac
  return $rc
}

# json_get FILE PATH: the value at dotted PATH (e.g. step_s.mean) of the JSON object in FILE;
# PATH ~REGEX: the first number whose flattened key matches REGEX. Empty when absent.
json_get() {
  python3 - "$1" "$2" << 'PY' 2> /dev/null
import json, re, sys
text = open(sys.argv[1]).read()
obj, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
def flat(o, pre=""):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from flat(v, pre + k + ".")
    else:
        yield pre[:-1], o
path = sys.argv[2]
for k, v in flat(obj):
    if (re.search(path[1:], k) if path.startswith("~") else k == path) and v is not None:
        print(v)
        break
PY
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 == 0) exit 1; printf "%.3f", a / b }'; }

# ---- assets ----------------------------------------------------------------------------------
need_files="stories260K/stories260K.bin stories260K/tok512.bin gpt2-bpe/dict.txt sst2/dev.tsv sst2/train.tsv"

gpu_name() {
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null | head -n 1 | grep . ||
    echo "none found (nvidia-smi absent or failed)"
}

find_assets() {
  if [ -n "${DISTZO_ASSETS:-}" ]; then echo "$DISTZO_ASSETS"
  elif [ -d "$root/device_assets" ]; then echo "$root/device_assets"
  else echo "$root/../shared/assets"; fi
}

# stage_assets: what the check needs, into ./device_assets (git ignores it) for the run to carry.
stage_assets() {
  local src=${DISTZO_ASSETS:-$root/../shared/assets} dst=$root/device_assets f
  for f in $need_files; do
    [ -f "$src/$f" ] || { echo "stage-assets: $src/$f not found (set DISTZO_ASSETS)" >&2; return 1; }
  done
  chmod -R u+w "$dst" 2> /dev/null
  rm -rf "$dst"/{stories260K,gpt2-bpe,sst2} && mkdir -p "$dst/sst2" || return 1
  cp -r "$src/stories260K" "$src/gpt2-bpe" "$dst/" && cp "$src/sst2/dev.tsv" "$dst/sst2/" &&
    head -n 2001 "$src/sst2/train.tsv" > "$dst/sst2/train.tsv" && chmod -R u+w "$dst" || return 1
  echo "staged $(du -sh "$dst" | cut -f1) in $dst: pass carry [\"device_assets\"] to the GPU run"
}

# ---- C libraries the GPU machine may lack ----------------------------------------------------
# The GPU machines' image has nvcc, CMake and PyTorch but maybe not the build's C libraries
# (cJSON, OpenBLAS, libmicrohttpd, libcurl, cmocka, pkg-config). --stage-deps unpacks this
# machine's Debian 12 packages of them and what they load into device_assets/deps.tar.xz (11
# MiB, travels with the assets); where a plain configure fails there, the build uses them.
deb_packages="libcjson-dev libcjson1 libcmocka-dev libcmocka0 libopenblas0-openmp libopenblas-openmp-dev
  libgfortran5 libmicrohttpd-dev libmicrohttpd12 libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0
  libtasn1-6 libffi8 libidn2-0 libunistring2 libcurl4-openssl-dev libcurl4 libbrotli1 libgssapi-krb5-2 libkrb5-3
  libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libldap-2.5-0 libsasl2-2 libsasl2-modules-db libdb5.3
  libnghttp2-14 libpsl5 librtmp1 libssh2-1 libssl3 libzstd1 zlib1g pkgconf pkgconf-bin libpkgconf3"

stage_deps() {
  local tmp f
  tmp=$(mktemp -d) || return 1
  mkdir -p "$tmp/debs" "$tmp/root" "$root/device_assets"
  # shellcheck disable=SC2086
  (cd "$tmp/debs" && apt-get download $deb_packages > "$tmp/apt.log" 2>&1) ||
    { tail -n 3 "$tmp/apt.log" >&2; rm -rf "$tmp"; return 1; }
  for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/root" || { rm -rf "$tmp"; return 1; }; done
  # static archives, docs, LAPACK: not needed; Requires.private names .pc files not staged
  find "$tmp/root" -name '*.a' -delete
  rm -rf "$tmp"/root/usr/share/{doc,man,info,lintian,locale}
  rm -f "$tmp"/root/usr/lib/x86_64-linux-gnu/openblas-openmp/lib{lapack,blas}*
  sed -i '/^Requires.private:/d' "$tmp"/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  tar -C "$tmp/root" -cJf "$root/device_assets/deps.tar.xz" . || { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
  echo "staged $(du -h "$root/device_assets/deps.tar.xz" | cut -f1) of C libraries in device_assets/deps.tar.xz"
}

# use_staged_deps: unpacks device_assets/deps.tar.xz under $build and points CMake, pkg-config,
# the compiler, the linker and the loader at it (found before the system's).
use_staged_deps() {
  local p=$build/deps lib
  [ -f "$assets/deps.tar.xz" ] || return 1
  rm -rf "$p" && mkdir -p "$p" && tar -C "$p" -xJf "$assets/deps.tar.xz" || return 1
  lib=$p/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$p/usr PKG_CONFIG_LIBDIR=$lib/pkgconfig:$p/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$p
  export CPATH=$p/usr/include${CPATH:+:$CPATH} LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$lib:$lib/openblas-openmp:$p/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=$PATH:$p/usr/bin
  link_flags="-Wl,-rpath-link,$lib"
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
}

# ---- the items -------------------------------------------------------------------------------
check_build() {
  local nvcc configure_s
  if [ "$mode" = dry ]; then
    if [ -x "$bin" ]; then item build "not available" "dry run: no CUDA build, uses $bin"
    else item build failed "dry run: $bin not found (set DZ_DEVICE_CHECK_BIN)"; fi
    return
  fi
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || { item build failed "nvcc not found"; return; }
  say "nvcc: $("$nvcc" --version | tail -n 1)"
  if ! configure "$nvcc"; then
    use_staged_deps ||
      { item build failed "configure: $step_why (and no device_assets/deps.tar.xz to fall back on)"; return; }
    say "deps: a plain configure failed ($(grep -m1 -iE 'error|not found' "$out/configure.log" | cut -c1-150));" \
        "using the staged C libraries of device_assets/deps.tar.xz"
    mv "$out/configure.log" "$out/configure_plain.log"
    configure "$nvcc" || { item build failed "configure with the staged libraries: $step_why"; return; }
  fi
  configure_s=$step_s
  # the gpu-labelled tests are programs of their own name (dz_test)
  gpu_targets=$(ctest --test-dir "$build" -N -L gpu | sed -nE 's/^ *Test +#[0-9]+: ([A-Za-z0-9_]+)$/\1/p')
  # shellcheck disable=SC2086
  run_step build 300 cmake --build "$build" -j"$(nproc)" --target distzo ${gpu_targets:-test_cuda_gpu} ||
    { item build failed "build: $step_why"; return; }
  item build passed "configure $configure_s s, distzo and ${gpu_targets:-test_cuda_gpu} built in $step_s s" \
    "(-j$(nproc))"
}

configure() {
  run_step configure 120 env DISTZO_ASSETS="$assets" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DDZ_CUDA=ON -DDZ_REQUIRE_ASSETS=OFF -DCMAKE_CUDA_COMPILER="$1" \
    ${link_flags:+"-DCMAKE_EXE_LINKER_FLAGS=$link_flags"}
}

check_gpu_tests() {
  local log=$out/ctest_gpu.out rc n
  if [ "$mode" = dry ]; then  # ctest would write into the caller's build folder: count instead
    n=$(grep -c 'add_test.*test_cuda_gpu' "$build/tests/CTestTestfile.cmake" 2> /dev/null)
    item gpu_tests "not available" "dry run: the ${n:-0} gpu-labelled tests of $build are not run without a GPU"
    return
  fi
  run_step ctest_gpu 150 ctest --test-dir "$build" -L gpu --output-on-failure --output-junit "$out/ctest_gpu.xml"
  rc=$?
  grep -E '^ *[0-9]+/[0-9]+ Test' "$log" | tee -a "$out/summary.txt"
  if grep -q 'No tests were found' "$log"; then item gpu_tests failed "no gpu-labelled tests in $build"
  elif grep -qE 'Skipped|Not Run' "$log"; then item gpu_tests failed "gpu tests skipped (no GPU?), see ctest_gpu.out"
  elif [ "$rc" -ne 0 ]; then item gpu_tests failed "$step_why"
  else item gpu_tests passed "$(grep -oE '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log")," \
    "$step_s s"; fi
}

# greedy TAG BACKEND: stories260K's 8 greedy tokens on BACKEND (generate --json), into $out/TAG.out
greedy() {
  run_step "$1" 60 "$bin" generate "$stories" --prompt "Once upon a time" -n 8 --temperature 0 --json \
    --threads "$threads" --backend "$2"
}
tokens() { sed -nE 's/.*"tokens": (\[[^]]*\]).*/\1/p' "$out/$1.out"; }

# check_backend: does this distzo run --backend $be? Sets cuda_why when it does not.
check_backend() {
  local same took
  cuda_why=""
  [ -x "$bin" ] || { cuda_why="no distzo binary at $bin"; item backend failed "$cuda_why"; return; }
  if greedy backend "$be"; then
    took=$step_s
    greedy backend_cpu cpu
    same="differ from the CPU's: $(tokens backend) vs $(tokens backend_cpu)"
    [ -n "$(tokens backend)" ] && [ "$(tokens backend)" = "$(tokens backend_cpu)" ] && same="equal the CPU's"
    item backend passed "generate --backend $be on stories260K: 8 greedy tokens in $took s, $same"
  elif grep -qE -- "--backend $be:" "$out/backend.log" 2> /dev/null; then
    cuda_why="not available in this build: $(grep -m1 -oE -- "--backend $be:.*" "$out/backend.log" | cut -c1-200)"
    # on the GPU machine, a CUDA build that finds no GPU is broken, not unfinished
    if [ "$mode" = device ] && grep -qE 'no CUDA GPU found|built without CUDA' "$out/backend.log"; then
      cuda_why="refused: $(grep -m1 -oE -- "--backend $be:.*" "$out/backend.log" | cut -c1-200)"
      item backend failed "$cuda_why"
    else item backend "not available" "$cuda_why"; fi
  else
    cuda_why="generate --backend $be failed"
    item backend failed "generate --backend $be: $step_why"
  fi
}

step1_loss() { sed -nE 's/^\{"step": 1, "loss": ([^,]*),.*/\1/p' "$1/metrics.jsonl" 2> /dev/null; }

# loss_note NAME RUN: step 1's loss on $be against a CPU run of the same settings (stories only:
# OPT-1.3B's 20 CPU steps would not fit the budget).
loss_note() {
  [ "$1" = stories ] || return 0
  local a b
  run_step "train_${1}_cpu" 90 "$bin" train "${train_args[@]}" --backend cpu --out "$work/cpu_$1" ||
    { echo "; the CPU run for the loss: $step_why"; return; }
  a=$(step1_loss "$2") b=$(step1_loss "$work/cpu_$1")
  echo "; step 1 loss $a on $be, $b on the CPU (relative difference $(awk -v a="$a" -v b="$b" \
    'BEGIN { d = a - b; if (d < 0) d = -d; m = (b < 0) ? -b : b; printf "%.2g", (m > 0) ? d / m : d }'))"
}

# flip_last_byte FILE: the self-test's damage (DZ_DEVICE_CHECK_CORRUPT, dry runs only).
flip_last_byte() {
  local size b
  size=$(stat -c %s "$1") b=$(tail -c 1 "$1" | od -An -tu1 | tr -d ' ')
  printf "\\$(printf %03o $((b ^ 1)))" | dd of="$1" bs=1 seek=$((size - 1)) conv=notrunc status=none
}

# check_mezo NAME MODEL: 20 MeZO steps on $be, the seed log exported on the CPU, compared with
# the run's checkpoint-20 bitwise.
check_mezo() {
  local name=$1 model=$2 run=$work/run_$1 exp=$work/export_$1 train_s a note
  [ -n "$cuda_why" ] && { item "mezo_$name" "not available" "$cuda_why"; return; }
  rm -rf "$run" "$exp" "$work/cpu_$name"
  head -n 9 "$assets/sst2/dev.tsv" > "$work/test.tsv"
  train_args=(--model "$model" --data "$assets/sst2" --test "$work/test.tsv" --steps 20 --eval-every 0
              --checkpoint-every 20 --batch "$train_batch" --train-examples 64 --dev-examples 4 --threads "$threads")
  run_step "train_$name" 240 "$bin" train "${train_args[@]}" --backend "$be" --out "$run" ||
    { item "mezo_$name" failed "train --backend $be: $step_why"; return; }
  train_s=$step_s
  run_step "export_$name" 180 "$bin" export --run "$run" -o "$exp" --threads "$threads" ||
    { item "mezo_$name" failed "export on the CPU: $step_why"; return; }
  [ "$mode" = dry ] && [ "${DZ_DEVICE_CHECK_CORRUPT:-}" = "$name" ] && flip_last_byte "$exp/model.safetensors"
  a=$run/checkpoint-20/model.safetensors
  if [ -f "$a" ] && cmp -s "$a" "$exp/model.safetensors"; then
    note=$(loss_note "$name" "$run")
    item "mezo_$name" passed "20 steps on $be in $train_s s; its seed log exported on the CPU ($step_s s) equals" \
"checkpoint-20/model.safetensors bitwise ($(stat -c %s "$a") bytes)$note"
  else
    item "mezo_$name" failed "the CPU's export differs from checkpoint-20 of the $be run:" \
"$(cmp "$a" "$exp/model.safetensors" 2>&1 | head -n 1)"
  fi
}

# make_opt: the random OPT (opt-1.3b; dry: opt-tiny) that the MeZO run and the benchmarks share.
make_opt() {
  opt_why=""
  rm -rf "$work/opt"
  if run_step init_opt 150 env DISTZO_ASSETS="$assets" "$bin" init --preset "$opt_preset" -o "$work/opt" \
    --threads "$threads"; then
    say "model: distzo init --preset $opt_preset, $(stat -c %s "$work/opt/model.safetensors") bytes, $step_s s"
    return 0
  fi
  opt_why="no OPT model: distzo init --preset $opt_preset: $step_why"
  item mezo_opt failed "$opt_why"
  return 1
}

# ---- the benchmarks --------------------------------------------------------------------------
# sampler_start NAME / sampler_stop: nvidia-smi's memory.used (MiB) every 100 ms into
# $out/NAME.smi, and the idle figure before; smi_peak NAME: the peak above idle. Line-buffered,
# so that no sample is left in a buffer when it is stopped (SIGTERM: a background job of a
# script ignores SIGINT).
sampler_start() {
  local line_buffered=()
  smi_pid="" smi_idle=""
  command -v nvidia-smi > /dev/null || return 0
  command -v stdbuf > /dev/null && line_buffered=(stdbuf -oL)
  smi_idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2> /dev/null | head -n 1)
  "${line_buffered[@]}" nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 \
    > "$out/$1.smi" 2> /dev/null &
  smi_pid=$!
}
sampler_stop() {
  [ -n "$smi_pid" ] || return 0
  kill "$smi_pid" 2> /dev/null
  wait "$smi_pid" 2> /dev/null
  smi_pid=""
}
smi_peak() {
  [ -n "$smi_idle" ] && [ -s "$out/$1.smi" ] || return 0
  awk -v idle="$smi_idle" '$1 + 0 > m { m = $1 + 0 } END { if (m > 0) printf "%d", m - idle }' "$out/$1.smi"
}

# bench_step NAME [ARGS]: distzo bench step on the OPT model at the benchmark's shape; sets
# bench_peak: peak device MiB, bench step's own figure when its JSON has one, else nvidia-smi's.
bench_step() {
  local name=$1 rc own
  shift
  sampler_start "$name"
  run_step "$name" 150 "$bin" bench step --model "$work/opt" --batch "$bench_batch" --seq "$bench_seq" \
    --steps "$bench_steps" --threads "$threads" --backend "$be" --json "$@"
  rc=$?
  sampler_stop
  own=$(json_get "$out/$name.out" '~(peak.*device|device.*peak).*bytes')
  [ -n "$own" ] && own=$(awk -v b="$own" 'BEGIN { printf "%.1f", b / 1048576 }')
  [ -n "$own" ] || own=$(json_get "$out/$name.out" '~(peak.*device|device.*peak).*mib')
  if [ -n "$own" ]; then bench_peak=$own peak_how="bench step's own figure"
  else bench_peak=$(smi_peak "$name") peak_how="nvidia-smi, above idle, CUDA context included"; fi
  return $rc
}

check_bench_distzo() {
  dz_step="" dz_peak="" peak_why=""
  [ -n "$cuda_why" ] && { item bench_distzo "not available" "$cuda_why"; return; }
  [ -n "$opt_why" ] && { item bench_distzo "not available" "$opt_why"; return; }
  bench_step bench_distzo || { item bench_distzo failed "bench step --backend $be: $step_why"; return; }
  dz_step=$(json_get "$out/bench_distzo.out" step_seconds)
  dz_peak=$bench_peak
  [ -n "$dz_peak" ] || peak_why="no device memory figure: bench step gave none and nvidia-smi is not here"
  [ -n "$dz_step" ] || { item bench_distzo failed "no step_seconds in bench_distzo.out"; return; }
  item bench_distzo measured "$opt_preset batch $bench_batch x $bench_seq on $be: step $dz_step s, forward" \
"$(json_get "$out/bench_distzo.out" forward_seconds) s, peak device memory ${dz_peak:-(not available)} MiB ($peak_how)"
}

# torch_usable: PyTorch and transformers import (and see a GPU when one is wanted); else torch_why.
torch_usable() {
  local probe="import torch, transformers" said
  [ "$torch_device" = cuda ] && probe="$probe; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'"
  said=$(LD_LIBRARY_PATH=$plain_ld_path "$py" -c "$probe" 2>&1) && return 0
  torch_why="PyTorch is not usable here, its comparison is skipped ($py: $(tail -n 1 <<< "$said" | cut -c1-120))"
  return 1
}

check_bench_torch() {
  local rc smi
  pt_step="" pt_mem=""
  [ -n "$opt_why" ] && { item bench_torch "not available" "$opt_why"; return; }
  torch_usable || { item bench_torch "not available" "$torch_why"; return; }
  sampler_start bench_torch
  # Python gets the machine's own loader path, not the staged C libraries' (use_staged_deps)
  run_step bench_torch 200 env LD_LIBRARY_PATH="$plain_ld_path" "$py" bench/mezo_reference.py --model "$work/opt" \
    --batch "$bench_batch" --seq "$bench_seq" --steps "$bench_steps" --forwards "$bench_steps" --threads "$threads" \
    --device "$torch_device" --json
  rc=$?
  sampler_stop
  [ "$rc" -eq 0 ] || { item bench_torch failed "bench/mezo_reference.py: $step_why"; return; }
  pt_step=$(json_get "$out/bench_torch.out" step_s.mean)
  pt_mem=$(json_get "$out/bench_torch.out" device_memory_mib.forward.max_allocated_mib)
  smi=$(smi_peak bench_torch)
  [ -n "$pt_step" ] || { item bench_torch failed "no step_s.mean in bench_torch.out"; return; }
  item bench_torch measured "PyTorch $(json_get "$out/bench_torch.out" torch) MeZO, $opt_preset batch $bench_batch x" \
"$bench_seq on $torch_device: step $pt_step s, forward $(json_get "$out/bench_torch.out" forward_s.mean) s, inference" \
"forward peak ${pt_mem:-(not available)} MiB (max_memory_allocated), whole run ${smi:-(not available)} MiB (nvidia-smi)"
}

# target NAME WHAT A B OP LIMIT WHY: A / B against LIMIT (OP >= or <=); WHY when a figure is missing.
target() {
  local name=$1 what=$2 a=$3 b=$4 op=$5 limit=$6 why=$7 r status=missed
  r=$(ratio "$a" "$b") || { item "$name" "not available" "$why"; return; }
  awk -v r="$r" -v l="$limit" -v op="$op" 'BEGIN { exit !(op == ">=" ? r >= l : r <= l) }' && status=met
  item "$name" "$status" "$what = $a / $b = $r (target $op $limit)"
}

# stream_step: bench step at --max-device-memory = 25% of the model, where the option exists.
stream_step() {
  local cap
  stream_why="" st_step=""
  [ -n "$cuda_why" ] && { stream_why=$cuda_why; return; }
  [ -n "$opt_why" ] && { stream_why=$opt_why; return; }
  "$bin" bench step --help 2>&1 | grep -q -- --max-device-memory ||
    { stream_why="not available in this build: distzo bench step has no --max-device-memory"; return; }
  [ -n "$dz_step" ] || { stream_why="no resident step to compare with"; return; }
  cap=$(($(stat -c %s "$work/opt/model.safetensors") / 4 / 1048576))
  bench_step bench_stream --max-device-memory "$cap" ||
    { stream_why="bench step --max-device-memory $cap: $step_why"; return; }
  st_step=$(json_get "$out/bench_stream.out" step_seconds)
  say "streaming: --max-device-memory $cap MB (25% of the model): step ${st_step:-?} s, peak ${bench_peak:-?} MiB"
}

check_targets() {
  target target_step "PyTorch MeZO step / distzo step" "$pt_step" "$dz_step" ">=" 2 \
    "needs both steps: distzo ${dz_step:-not measured}, PyTorch ${pt_step:-not measured} (${cuda_why:-${torch_why:-}})"
  local why="${cuda_why:-${torch_why:-${peak_why:-no PyTorch device figure on $torch_device}}}"
  target target_memory "distzo peak device memory / PyTorch inference forward (MiB)" "$dz_peak" "$pt_mem" "<=" 1.1 \
    "needs both: distzo ${dz_peak:-not measured}, PyTorch ${pt_mem:-not measured} ($why)"
  stream_step
  target target_stream "streaming at 25% / resident step (s)" "$st_step" "$dz_step" "<=" 1.3 "$stream_why"
}

dry=${DZ_DEVICE_CHECK_DRY:-0}
case "${1:-}" in
  --dry-run) dry=1 ;;
  --stage-assets) stage_assets; exit ;;
  --stage-deps) stage_deps; exit ;;
  "") ;;
  *) echo "usage: OUT=DIR $0 [--dry-run | --stage-assets | --stage-deps]" >&2; exit 2 ;;
esac

out=${OUT:-$root/device_check_out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
: > "$out/summary.txt"
: > "$out/items.tsv"
started=$(date +%s)
deadline=$((started + ${DZ_DEVICE_CHECK_BUDGET:-470}))
torch_why="" opt_why="" cuda_why="" peak_why="" smi_pid="" link_flags=""
assets=$(find_assets)
stories=$assets/stories260K/stories260K.bin
py=${DZ_PYTHON:-python3}
plain_ld_path=${LD_LIBRARY_PATH:-}

if [ "$dry" = 1 ]; then
  mode=dry bin=${DZ_DEVICE_CHECK_BIN:-$root/build/distzo} be=${DZ_DEVICE_CHECK_BACKEND:-cpu}
  build=$(dirname "$bin") work=$out/work threads=${OMP_NUM_THREADS:-1}
  opt_preset=opt-tiny train_batch=2 bench_batch=2 bench_seq=16 bench_steps=1 torch_device=cpu
else
  mode=device build=$root/build-device bin=$root/build-device/distzo be=cuda
  work=${DZ_DEVICE_CHECK_WORK:-$root/build-device/check} threads=$(nproc)
  opt_preset=${DZ_DEVICE_CHECK_OPT:-opt-1.3b} train_batch=4 bench_batch=16 bench_seq=128 bench_steps=3 torch_device=cuda
fi
mkdir -p "$work"

say "device_check ($mode): $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
    "commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown)"
say "gpu: $(gpu_name)"
say "assets: $assets; device backend: $be; budget $((deadline - $(date +%s))) s"
for f in $need_files; do
  [ -f "$assets/$f" ] ||
    say "assets: MISSING $assets/$f (run tools/device_check.sh --stage-assets here, carry device_assets)"
done

check_build
check_gpu_tests
check_backend
check_mezo stories "$stories"
make_opt && check_mezo opt "$work/opt"
check_bench_distzo
check_bench_torch
check_targets
write_junit
finish_summary
