# Sourced (after lib.sh) by the federated test scripts: the workers' data shards, bounded
# waits, and the coordinator's progress.

# make_shards ASSETS: $tmp/shard1..3.tsv, 200 disjoint SST-2 training examples each.
make_shards() {
  local i
  for i in 1 2 3; do
    { head -1 "$1/sst2/train.tsv"; sed -n "$((2 + i * 200)),$((201 + i * 200))p" "$1/sst2/train.tsv"; } > "$tmp/shard$i.tsv"
  done
}

# wait_for SECONDS COMMAND...: polls until COMMAND succeeds; 1 after SECONDS.
wait_for() {
  local until=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $until ] || return 1
    sleep 0.1
  done
}

# rounds_done N: the coordinator of $tmp/run has logged at least N rounds.
rounds_done() { [ -f "$tmp/run/metrics.jsonl" ] && [ "$(wc -l < "$tmp/run/metrics.jsonl")" -ge "$1" ]; }

# fed_begin TOKEN: one thread per process; the background processes listed in pids killed
# and $tmp removed (unless DZ_KEEP is set) on exit; TOKEN in $tmp/token.
fed_begin() {
  export OMP_NUM_THREADS=1
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; [ -n "${DZ_KEEP:-}" ] || rm -rf "$tmp"' EXIT
  echo "$1" > "$tmp/token"
}
