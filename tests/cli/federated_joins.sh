#!/usr/bin/env bash
# One token holder filling a coordinator with joins that never deliver (docs/FEDERATED.md,
# "A token holder's joins"): with --max-joins-per-client 3, a fourth join from 127.0.0.2
# within the minute gets 429 while 127.0.0.3 has its own count; the fake workers (joined
# with curl, silent, kept connected by a long --worker-timeout) are each given slots in at
# most one round, forgotten when it runs to its deadline (then 410), and two real workers
# train to the end with at most one round per fake missing a slot; their replicas equal
# `distzo export`. Before the cap, the fakes kept their slots in nearly every round.
# usage: federated_joins.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
need_tool curl "the fake workers are curl requests"
rounds=10
"$bin" serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --spsa-samples 2 --batch 4 --train-examples 32 \
  --g-code f32 --round-timeout 1 --worker-timeout 100 --max-joins-per-client 3 --linger 10 --listen 127.0.0.1:0 \
  --threads 1 > "$tmp/serve.txt" 2>&1 &
serve=$!
pids+=($serve)
wait_for 30 test -s "$tmp/run/coordinator.url" || bad "serve did not start: $(tail -3 "$tmp/serve.txt")"
url=$(cat "$tmp/run/coordinator.url")
auth="Authorization: Bearer $(cat "$tmp/token")"
# http FROM METHOD PATH [BODY]: from a loopback address; prints the body, then the status on a line of its own
http() { curl -s -m 10 --interface "$1" -H "$auth" -H "Content-Type: application/json" -X "$2" ${4:+--data "$4"} \
  -w '\n%{http_code}' "$url$3"; }
field() { grep -Eo "\"$1\":(\[[^]]*\]|[^,}]*)" | head -1 | cut -d: -f2- | tr -d '"[]'; }
fp=$(http 127.0.0.1 GET /v1/run | head -1 | field fingerprint)
join_body="{\"protocol\":1,\"fingerprint\":\"$fp\",\"name\":\"fake\"}"
fakes=()
for i in 1 2 3; do
  out=$(http 127.0.0.2 POST /v1/join "$join_body")
  [ "$(echo "$out" | tail -1)" = 200 ] && fakes+=("$(echo "$out" | head -1 | field machine) $(echo "$out" | head -1 | field key)")
done
[ ${#fakes[@]} = 3 ] && ok "three joins from 127.0.0.2" || bad "joins from 127.0.0.2: ${#fakes[@]} of 3 admitted"
http 127.0.0.2 POST /v1/join "$join_body" > "$tmp/j4.txt"
[ "$(tail -1 "$tmp/j4.txt")" = 429 ] && grep -q -- "--max-joins-per-client" "$tmp/j4.txt" &&
  ok "a fourth join from 127.0.0.2 within the minute: 429" || bad "a fourth join: $(cat "$tmp/j4.txt")"
out=$(http 127.0.0.3 POST /v1/join "$join_body")
[ "$(echo "$out" | tail -1)" = 200 ] && fakes+=("$(echo "$out" | head -1 | field machine) $(echo "$out" | head -1 | field key)") &&
  ok "127.0.0.3 has its own count" || bad "a join from 127.0.0.3: $out"

read -r id key <<< "${fakes[0]}" # the rounds open with the fakes alone, and run to their deadlines
wait_for 10 grep -q "machine $id (new, from 127.0.0.2) sent nothing" "$tmp/serve.txt" &&
  [ "$(http 127.0.0.2 GET "/v1/round?machine=$id&key=$key&applied=0" | tail -1)" = 410 ] &&
  ok "a fake given slots and silent past the deadline is forgotten (410: join again)" ||
  bad "the first fake is still connected: $(tail -n 3 "$tmp/serve.txt")"
for i in 1 2; do
  "$bin" join "$url" --data "$tmp/shard$i.tsv" --token-file "$tmp/token" --save "$tmp/w$i" --threads 1 > "$tmp/w$i.txt" 2>&1 &
  pids+=($!)
  eval "w$i=$!"
done
wait $w1 && wait $w2 && ok "two real workers trained to the end" || bad "workers: $(tail -n 2 "$tmp/w1.txt" "$tmp/w2.txt")"
wait $serve || bad "serve: $(tail -3 "$tmp/serve.txt")"

forgotten=$(grep -c "sent nothing for round .* forgotten" "$tmp/serve.txt")
[ "$forgotten" -le ${#fakes[@]} ] && ok "$forgotten fake workers forgotten after a round without their slots" ||
  bad "$forgotten workers forgotten (${#fakes[@]} fakes)"
# every record: u32 step, f32 lr, f32 g[2], u32 crc; an absent slot's g is exactly 0 (f32 codes)
missing=$(od -A n -t f4 -j 104 -w20 -v "$tmp/run/seeds.log" | awk '$3 == 0 || $4 == 0 { n++ } END { print n + 0 }')
records=$(od -A n -t f4 -j 104 -w20 -v "$tmp/run/seeds.log" | grep -c .)
[ "$records" = $rounds ] && [ "$missing" -le ${#fakes[@]} ] &&
  ok "$missing of $rounds rounds had a slot nobody delivered (at most one per fake)" ||
  bad "$missing of $records rounds had a slot nobody delivered (${#fakes[@]} fakes)"
replicas_equal_export 1 2
finish
