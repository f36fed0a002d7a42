# Sourced by the command-line test scripts: a scratch folder removed on exit, pass/fail
# counters, a skip (exit 77, which CTest reports as skipped) when the assets are missing,
# comparison of two run folders, and the closing summary.

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }

# need_assets DIR FILE...: skip unless every FILE exists under DIR.
need_assets() {
  local dir=$1 f
  shift
  for f in "$@"; do
    [ -e "$dir/$f" ] || { echo "SKIP: $f not found in $dir (set DISTZO_ASSETS)"; exit 77; }
  done
}

# metrics RUN: metrics.jsonl without its timing field.
metrics() { sed -E 's/, "seconds": [^,}]*//' "$1/metrics.jsonl" 2>/dev/null; }

# same_run A B STEPS: the two run folders have the same final weights and metrics (and
# seed logs, where both have one).
same_run() {
  cmp -s "$1/checkpoint-$3/model.safetensors" "$2/checkpoint-$3/model.safetensors" &&
    diff -q <(metrics "$1") <(metrics "$2") > /dev/null &&
    { [ ! -f "$1/seeds.log" ] || [ ! -f "$2/seeds.log" ] || cmp -s "$1/seeds.log" "$2/seeds.log"; }
}

# finish [NOTE]: prints the counts; the script's status is 0 only without failures.
finish() {
  echo "$pass passed, $fail failed${1:+ ($1)}"
  [ "$fail" -eq 0 ]
}
