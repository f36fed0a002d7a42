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
