# Sourced by the command-line test scripts: a scratch folder removed on exit, pass/fail
# counters, what a script does when an asset or a tool is missing, comparison of two run
# folders, and the closing summary.
#
# A missing asset FAILS the script (naming the file and DISTZO_ASSETS), so a machine
# without the shared assets cannot report these claims as passed. A developer without them
# opts out explicitly: configure with -DDZ_REQUIRE_ASSETS=OFF (CTest then runs every test
# with DZ_REQUIRE_ASSETS=0; or set it by hand), and the script exits 77, which CTest
# reports as skipped, never as passed. The same as tests/assets.h for the C tests.
# A check left out for another reason (an optional tool, a build where it means nothing)
# is declared with left_out, and the script is then skipped too. A script that ran no
# check at all fails: finish never reports nothing as a pass (tests/cli/selftest.sh).

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the binary and the assets given by relative paths (a script run by hand) still work after
# a script's cd: made absolute (a path that does not exist is left as given)
abs_path() {
  local d
  if [ -e "$1" ] && d=$(CDPATH='' cd -- "$(dirname -- "$1")" > /dev/null 2>&1 && pwd); then
    printf '%s/%s' "$d" "$(basename -- "$1")"
  else printf '%s' "$1"; fi
}
case ${bin:-/} in /*) ;; *) bin=$(abs_path "$bin") ;; esac
case ${assets:-/} in /*) ;; *) assets=$(abs_path "$assets") ;; esac
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

left_out_checks=0

# left_out WHY: checks this script claims were not run here; finish then exits 77.
left_out() {
  echo "SKIP: $*"
  left_out_checks=$((left_out_checks + 1))
}

# have_assets DIR FILE...: 0 when every FILE exists under DIR. A missing one fails the
# script, or, with DZ_REQUIRE_ASSETS=0, returns 1 (the caller leaves those checks out and
# finish reports the script as skipped).
have_assets() {
  local dir=$1 f
  shift
  for f in "$@"; do
    [ -e "$dir/$f" ] && continue
    if [ "${DZ_REQUIRE_ASSETS:-1}" = 0 ]; then
      left_out "asset $dir/$f not found (DZ_REQUIRE_ASSETS=0): the checks that need it are left out"
      return 1
    fi
    echo "FAIL: asset $dir/$f not found: set DISTZO_ASSETS to the shared assets folder (README.md lists its" \
         "the files), or configure with -DDZ_REQUIRE_ASSETS=OFF to skip the tests that need it"
    exit 1
  done
}

# need_assets DIR FILE...: the whole script needs them (exits 77 where opted out); DIR is
# exported as DISTZO_ASSETS, where distzo finds its default model and data.
need_assets() {
  have_assets "$@" || exit 77
  export DISTZO_ASSETS=$1
}

# need_tool NAME WHY: a tool the script cannot do without (scripts/deps.sh installs it).
need_tool() { command -v "$1" > /dev/null || { echo "FAIL: $1 not found on PATH ($2)"; exit 1; }; }

# test_set ASSETS N: $tmp/test.tsv, the header and first N sentences of GLUE's SST-2 dev set
# (a small test set for the runs under test).
test_set() { head -$(($2 + 1)) "$1/sst2/dev.tsv" > "$tmp/test.tsv"; }

# metrics RUN: metrics.jsonl without its timing field.
metrics() { sed -E 's/, "seconds": [^,}]*//' "$1/metrics.jsonl" 2>/dev/null; }

# metrics_csv RUN: metrics.csv without its timing columns (seconds, steps/s) and the bytes
# a layout exchanges.
metrics_csv() { cut -d, -f1-4,8- "$1/metrics.csv" 2>/dev/null; }

# same_run A B STEPS: the two run folders have the same final weights and metrics (and
# seed logs, where both have one).
same_run() {
  cmp -s "$1/checkpoint-$3/model.safetensors" "$2/checkpoint-$3/model.safetensors" &&
    diff -q <(metrics "$1") <(metrics "$2") > /dev/null &&
    diff -q <(metrics_csv "$1") <(metrics_csv "$2") > /dev/null &&
    { [ ! -f "$1/seeds.log" ] || [ ! -f "$2/seeds.log" ] || cmp -s "$1/seeds.log" "$2/seeds.log"; }
}

# gguf_adapter_runs PEFT: three 2-step --peft PEFT runs ($bin) on the SmolLM2 Q4_1 GGUF under
# $assets, the base dequantized at load ($tmp/gguf-deq, its output $tmp/deq.txt), kept
# quantized ($tmp/gguf-q, $tmp/q.txt), and kept quantized with the adapter in a disk store
# ($tmp/gguf-qs); 0 when all ran.
gguf_adapter_runs() {
  local q=(train --model "$assets/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf" --peft "$1" --steps 2 --eval-every 0
           --checkpoint-every 2 --train-examples 8 --dev-examples 4 --batch 4 --test "$tmp/t8.tsv" --threads 2)
  head -9 "$assets/sst2/dev.tsv" > "$tmp/t8.tsv"
  "$bin" "${q[@]}" --out "$tmp/gguf-deq" > "$tmp/deq.txt" 2>&1 &&
    "$bin" "${q[@]}" --keep-quantized --out "$tmp/gguf-q" > "$tmp/q.txt" 2>&1 &&
    "$bin" "${q[@]}" --keep-quantized --store "disk:$tmp/gguf.st" --out "$tmp/gguf-qs" > "$tmp/qs.txt" 2>&1
}

# adapter_mpi_layouts REF ARGS...: `distzo train ARGS` under each MPI layout a full model is
# checked in (tests/cli/mpi.sh): --pertp 2, --dp 2, the 2-D --pertp 2 --dp 2, two simulated
# nodes each with its own copy (--node-size, --verify-every), one rank a node; each must
# give the run REF's files (the caller's same_run_files REF OUT). Fails without mpirun.
adapter_mpi_layouts() {
  local ref=$1 layouts="2 --pertp 2,2 --dp 2,4 --pertp 2 --dp 2,4 --pertp 2 --node-size 2 --verify-every 3"
  shift
  adapter_layouts "$ref" mpi "$layouts,2 --node-size 1 --verify-every 4" "$@"
}

# adapter_layouts REF TAG LAYOUTS ARGS...: `distzo train ARGS` under each of LAYOUTS (a
# comma-separated list of "NP OPTIONS...", each run in $tmp/TAG<layout>) gives the run
# REF's files (the caller's same_run_files REF OUT; HiZOO's curvature.bin too). Fails
# without mpirun.
adapter_layouts() {
  local ref=$1 tag=$2 layout out l layouts
  IFS=, read -r -a layouts <<< "$3"
  shift 3
  command -v mpirun > /dev/null || { bad "mpirun not found on PATH (scripts/deps.sh installs it): the MPI layouts are unchecked"; return; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  for layout in "${layouts[@]}"; do
    read -r -a l <<< "$layout"
    out="$tmp/$tag$(echo "$layout" | tr -d ' -')"
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 300 mpirun --oversubscribe -np "${l[@]:0:1}" \
      "$bin" train "$@" "${l[@]:1}" --threads 1 --out "$out" > "$tmp/log" 2>&1 && same_run_files "$ref" "$out" &&
      same_curvature "$ref" "$out" && ok "$tag: mpirun -np $layout == one process" || bad "$tag: mpirun -np $layout: $(tail -2 "$tmp/log")"
  done
}

# adapter_estimators KIND: Sparse-MeZO, LOZO, FZOO and HiZOO over the adapter (the caller's
# run, adapter, same_run_files and common, the run's options; the MeZO run in $tmp/ref): an
# 8-step run equals one stopped at step 4 and resumed, and its export (HiZOO: and its
# checkpoint's curvature.bin); it differs from MeZO's (the estimator is in effect). FZOO
# under --pertp 2 (the N + 1 passes split over a pair, a replica a rank) and HiZOO under
# --pertp 2 and --dp 2 (a replica a rank) give the one-process run's files.
adapter_estimators() {
  local est e
  for est in "sparse --sparse-density 0.3" "lozo --lozo-rank 2 --lozo-nu 4" "fzoo --fzoo-directions 3" \
             "hizoo --hizoo-smooth 0.01"; do
    read -r -a e <<< "--estimator $est"
    run "${e[@]}" --threads 2 --out "$tmp/${e[1]}" && run "${e[@]}" --threads 1 --steps 4 --out "$tmp/${e[1]}-stop" &&
      "$bin" train --resume --steps 8 --threads 2 --out "$tmp/${e[1]}-stop" > /dev/null 2>&1 &&
      "$bin" export --run "$tmp/${e[1]}" -o "$tmp/${e[1]}-x" > /dev/null 2>&1 || bad "${e[1]}: a run failed"
    same_run_files "$tmp/${e[1]}" "$tmp/${e[1]}-stop" && same_curvature "$tmp/${e[1]}" "$tmp/${e[1]}-stop" &&
      cmp -s "$tmp/${e[1]}-x/adapter_model.safetensors" "$(adapter "$tmp/${e[1]}" 8)" &&
      ok "${e[1]}: resume and export == the uninterrupted $1" || bad "${e[1]}: differs"
    cmp -s "$(adapter "$tmp/${e[1]}" 8)" "$(adapter "$tmp/ref" 8)" && bad "${e[1]}: MeZO's $1" ||
      ok "${e[1]}: the estimator is in effect (not MeZO's $1)"
  done
  adapter_layouts "$tmp/fzoo" fzoo "2 --pertp 2 --node-size 1,4 --pertp 2 --dp 2 --node-size 1" "${common[@]}" \
    --estimator fzoo --fzoo-directions 3
  adapter_layouts "$tmp/hizoo" hizoo "2 --pertp 2 --node-size 1,2 --dp 2 --node-size 1" "${common[@]}" \
    --estimator hizoo --hizoo-smooth 0.01
}

# adapter_one_layer PEFT: a 1-layer model's adapter (--peft PEFT) trains: its one adapter
# block is a layer, not the global block (the working buffers were sized 0 and the step
# wrote past them); threads 1 and 2 and export's replay give the same adapter.
adapter_one_layer() {
  "$bin" init --preset opt-tiny --layers 1 --seed 4 -o "$tmp/one_layer" > /dev/null 2>&1
  local one=(--model "$tmp/one_layer" --peft "$1" --steps 4 --eval-every 4 --checkpoint-every 4 --train-examples 16
             --dev-examples 8 --batch 4 --lr 1e-2 --eps 1e-2 --test "$tmp/test.tsv")
  if "$bin" train "${one[@]}" --threads 1 --out "$tmp/one1" > "$tmp/log" 2>&1 &&
     "$bin" train "${one[@]}" --threads 2 --out "$tmp/one2" > "$tmp/log" 2>&1 &&
     "$bin" export --run "$tmp/one1" -o "$tmp/one_x" > "$tmp/log" 2>&1; then
    cmp -s "$(adapter "$tmp/one1" 4)" "$(adapter "$tmp/one2" 4)" && cmp -s "$(adapter "$tmp/one1" 4)" "$tmp/one_x/adapter_model.safetensors" &&
      ok "a 1-layer model ($1): threads 1 and 2 and export give the same adapter" || bad "a 1-layer model ($1): the adapters differ"
  else bad "a 1-layer model ($1): $(tail -2 "$tmp/log")"; fi
}

# same_curvature A B: a HiZOO run's checkpoint-8/curvature.bin is the same in A and B
# (true where A has none).
same_curvature() { [ ! -f "$1/checkpoint-8/curvature.bin" ] || cmp -s "$1/checkpoint-8/curvature.bin" "$2/checkpoint-8/curvature.bin"; }

# refuse WHAT PATTERN ARGS...: the command ARGS fails and its output names PATTERN.
refuse() { # WHAT PATTERN ARGS...
  local what=$1 pat=$2
  shift 2
  if "$@" > "$tmp/err" 2>&1; then bad "$what: accepted"
  elif grep -q -- "$pat" "$tmp/err"; then ok "$what: refused"
  else bad "$what: $(tail -1 "$tmp/err")"; fi
}

# finish [NOTE]: prints the counts; the script's status is 1 on a failure or when no check
# ran (nothing checked is not a pass), 77 (skipped) when checks were left out, else 0.
finish() {
  echo "$pass passed, $fail failed${1:+ ($1)}"
  [ "$fail" -eq 0 ] || return 1
  [ $((pass + left_out_checks)) -gt 0 ] || { echo "FAIL - no check ran"; return 1; }
  [ "$left_out_checks" -eq 0 ] || exit 77
}
