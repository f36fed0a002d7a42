#!/usr/bin/env bash
# Federated ZO between separate hosts (docs/FEDERATED.md): the coordinator and three workers
# each in a network namespace of its own, made here (the "hosts"), joined by a bridge in the
# coordinator's namespace, addresses 169.254.77.0/24 that exist only inside them. No host
# reaches another over loopback: every byte crosses a veth link.
# - worker 1 is cut off (its link set down) in the middle of the run: its requests fail, it
#   retries with backoff, the coordinator forgets it (--worker-timeout) and the rounds go on
#   with the others; when the link is back it joins again and catches up;
# - worker 2 is SIGKILLed in round 8 after computing, before sending;
# - worker 3 starts after 10 rounds and catches up from the log;
# - at the end every live replica equals `distzo export` of the run, byte for byte.
# Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) and iproute2: where namespaces cannot be
# made, the script says so and exits 77 (skipped, never passed). Every wait is bounded.
# usage: federated_hosts.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
need_tool ip "the hosts are network namespaces (iproute2)"
ns=dz$$
hosts=("${ns}c" "${ns}w1" "${ns}w2" "${ns}w3")
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  for h in "${hosts[@]}"; do ip netns del "$h" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
if ! ip netns add "${hosts[0]}" 2> "$tmp/netns.txt"; then
  echo "SKIP: cannot make network namespaces here ($(cat "$tmp/netns.txt")): run as root for the separate-hosts test"
  exit 77
fi
# the coordinator's host holds the bridge; each worker host a veth link to it
ip -n "${hosts[0]}" link add br0 type bridge && ip -n "${hosts[0]}" addr add 169.254.77.1/24 dev br0 &&
  ip -n "${hosts[0]}" link set br0 up && ip -n "${hosts[0]}" link set lo up || bad "the coordinator's host: no bridge"
for i in 1 2 3; do
  h=${hosts[$i]}
  ip netns add "$h" && ip link add "v$ns$i" netns "${hosts[0]}" type veth peer name eth0 netns "$h" &&
    ip -n "${hosts[0]}" link set "v$ns$i" master br0 up && ip -n "$h" addr add "169.254.77.$((10 + i))/24" dev eth0 &&
    ip -n "$h" link set eth0 up && ip -n "$h" link set lo up || bad "host $h: no link"
done
[ "$fail" -eq 0 ] || { finish; exit 1; }
on() { local h=$1; shift; ip netns exec "$h" "$@"; }

rounds=400
serve=(serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --spsa-samples 3 --batch 4
       --train-examples 32 --lr 1e-4 --round-timeout 2 --worker-timeout 2 --min-workers 1 --linger 30 --threads 1)
join=(--token-file "$tmp/token" --retry-for 40 --threads 1)

serve_bg "$tmp/serve.txt" on "${hosts[0]}" "$bin" "${serve[@]}" --listen 169.254.77.1:0
case $url in http://169.254.77.1:*) ok "the coordinator serves $url on its host" ;; *) bad "coordinator url $url" ;; esac
# each worker host reaches it over its link (a TCP connection; the bridge may take a moment)
port=${url##*:}
for i in 1 2 3; do
  wait_for 10 on "${hosts[$i]}" timeout 1 bash -c "exec 3<> /dev/tcp/169.254.77.1/$port" 2> /dev/null ||
    bad "host ${hosts[$i]} cannot reach the coordinator's host"
done
[ "$fail" -eq 0 ] && ok "four hosts (network namespaces) linked through a bridge: each worker host reaches $url"

on "${hosts[1]}" "$bin" join "$url" --data "$tmp/shard1.tsv" --name w1 --save "$tmp/w1" "${join[@]}" > "$tmp/w1.txt" 2>&1 &
w1=$!
DISTZO_TEST_KILL=join:8 on "${hosts[2]}" "$bin" join "$url" --data "$tmp/shard2.tsv" --name w2 "${join[@]}" \
  > "$tmp/w2.txt" 2>&1 &
w2=$!
pids+=($w1 $w2)
wait_for 120 rounds_done 10 || bad "10 rounds did not happen: $(tail -3 "$tmp/serve.txt")"
on "${hosts[3]}" "$bin" join "$url" --data "$tmp/shard3.tsv" --name w3 --save "$tmp/w3" "${join[@]}" > "$tmp/w3.txt" 2>&1 &
w3=$!
pids+=($w3)
wait_for 120 rounds_done 14 || bad "14 rounds did not happen: $(tail -3 "$tmp/serve.txt")"
# cut worker 1's host off until the coordinator has forgotten it (--worker-timeout) and two more
# rounds have closed with worker 3 alone; then its link comes back
w1_id=$(grep -o "machine [0-9]* (w1) joined" "$tmp/serve.txt" | grep -o "[0-9]*")
ip -n "${hosts[0]}" link set "v${ns}1" down
cut_at=$(wc -l < "$tmp/run/metrics.jsonl")
wait_for 60 grep -q "machine $w1_id gone" "$tmp/serve.txt" || bad "the coordinator did not notice worker 1's host was cut off"
gone_at=$(wc -l < "$tmp/run/metrics.jsonl")
wait_for 60 rounds_done $((gone_at + 2)) || bad "no rounds closed without worker 1"
during=$(($(wc -l < "$tmp/run/metrics.jsonl") - cut_at))
ip -n "${hosts[0]}" link set "v${ns}1" up
rounds_done $rounds && bad "the run ended while worker 1 was cut off (make it longer)"
[ "$during" -ge 2 ] && ok "while worker 1's host was cut off, it was forgotten and $during rounds closed without it" ||
  bad "no round closed while worker 1 was cut off"

wait_for 240 bash -c "! kill -0 $serve_pid 2> /dev/null" || bad "the coordinator did not finish"
wait $serve_pid && ok "the coordinator finished the run" || bad "serve: $(tail -5 "$tmp/serve.txt")"
wait $w2
[ $? -eq 137 ] && ok "worker 2 was killed mid-round (SIGKILL)" || bad "worker 2 was not killed: $(tail -3 "$tmp/w2.txt")"
for w in 1 3; do
  pid=w$w
  wait ${!pid} && ok "worker $w finished" || bad "worker $w: $(tail -3 "$tmp/w$w.txt")"
done
grep -q "rejoins" "$tmp/w1.txt" && ! grep -q " 0 rejoins" "$tmp/w1.txt" &&
  ok "worker 1 joined again after its link came back ($(grep -o '[0-9]* rejoins' "$tmp/w1.txt" | tail -1))" ||
  bad "worker 1 did not rejoin: $(tail -2 "$tmp/w1.txt")"
replicas_equal_export 1 3 # on hosts ${hosts[1]} and ${hosts[3]}
[ "$(stat -c %s "$tmp/run/seeds.log")" -eq $((104 + rounds * (12 + 4 * 3))) ] &&
  ok "the seed log holds $rounds records of 3 slots" || bad "seeds.log has $(stat -c %s "$tmp/run/seeds.log") bytes"
finish
