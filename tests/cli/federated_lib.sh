# Sourced (after lib.sh) by the federated test scripts: the workers' data shards, bounded
# waits, and the coordinator's progress.

# fed_begin ASSETS [FILE...]: how every federated script starts: the assets it needs
# (stories260K, SST-2's train set, and FILE...), one thread a process, its background
# processes ($pids) killed and $tmp removed on exit (kept with DZ_KEEP=1, for debugging),
# the shared token in $tmp/token and the workers' shards (make_shards).
fed_begin() {
  local assets=$1
  shift
  need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv "$@"
  export OMP_NUM_THREADS=1
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; [ -n "${DZ_KEEP:-}" ] || rm -rf "$tmp"' EXIT
  echo "federated-test-token-0123456789" > "$tmp/token"
  make_shards "$assets"
}

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

# serve_bg LOG COMMAND...: the coordinator (COMMAND: "$bin" "${serve[@]}" --listen ..., with
# any prefix) started in the background, its output in LOG, its pid in $serve_pid (killed
# on exit); once it has written $tmp/run/coordinator.url (30 s at most), its URL in $url.
serve_bg() {
  local log=$1
  shift
  "$@" > "$log" 2>&1 &
  serve_pid=$!
  pids+=("$serve_pid")
  wait_for 30 test -s "$tmp/run/coordinator.url" || bad "the coordinator did not start: $(tail -3 "$log")"
  url=$(cat "$tmp/run/coordinator.url" 2> /dev/null)
}

# serve_killed_at N LOG: waits for the coordinator ($serve_pid, started with
# DISTZO_TEST_KILL=serve:N, output in LOG) to die; checks it was SIGKILLed right after round N.
serve_killed_at() {
  local n=$1 log=$2 rc
  wait_for 120 bash -c "! kill -0 $serve_pid 2> /dev/null"
  wait "$serve_pid"
  rc=$?
  [ $rc -eq 137 ] && rounds_done "$n" && ! rounds_done $((n + 1)) && ok "the coordinator was SIGKILLed after $n rounds" ||
    bad "the coordinator was not killed after round $n (exit $rc): $(tail -3 "$log")"
}

# replicas_equal_export W...: distzo export of the run ($tmp/run, into $tmp/exported), and
# for each worker W a check that its replica ($tmp/wW) equals it byte for byte.
replicas_equal_export() {
  "$bin" export --run "$tmp/run" -o "$tmp/exported" > /dev/null 2>&1 || bad "export failed"
  local w
  for w in "$@"; do
    cmp -s "$tmp/exported/model.safetensors" "$tmp/w$w/model.safetensors" &&
      ok "worker $w's replica equals distzo export of the run, byte for byte" || bad "worker $w's replica differs from export"
  done
}

# rounds_done N: the coordinator of $tmp/run has logged at least N rounds.
rounds_done() { [ -f "$tmp/run/metrics.jsonl" ] && [ "$(wc -l < "$tmp/run/metrics.jsonl")" -ge "$1" ]; }

# join_other_base WHAT JOIN-OPTIONS...: a worker (`join $url`, shard 1) on a copy of
# stories260K whose 101st embedding float differs is refused, naming the base as not the
# run's; WHAT labels the check.
join_other_base() {
  local what=$1
  shift
  mkdir -p "$tmp/other"
  cp "$assets/stories260K/stories260K.bin" "$assets/stories260K/tok512.bin" "$tmp/other/"
  printf '\x3f' | dd of="$tmp/other/stories260K.bin" bs=1 seek=431 conv=notrunc 2> /dev/null
  "$bin" join "$url" --data "$tmp/shard1.tsv" --model "$tmp/other/stories260K.bin" "$@" > "$tmp/other.txt" 2>&1 &&
    bad "$what: accepted" || { grep -q "is not the run's" "$tmp/other.txt" && ok "$what: refused, named" ||
    bad "$what: $(cat "$tmp/other.txt")"; }
}
