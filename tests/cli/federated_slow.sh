#!/usr/bin/env bash
# Slow clients against a real `distzo serve` (docs/FEDERATED.md, Security): 600 connections
# from three loopback addresses (127.0.0.2..4) that send a request line and then one header
# line a second, never finishing their headers (a slow-loris). Each address keeps at most
# 64 connections (the rest are closed at once), every one is shut 5 s after it connected
# (the header deadline; libmicrohttpd's own timeout is an idle one, which the trickle
# resets), a valid GET /v1/run from 127.0.0.1 answers at once while they are held, a
# request without the token gets 401 and its connection closed, and a worker joins and
# trains to the end. Loopback only; the slow clients stop by themselves after 12 s.
# usage: federated_slow.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
need_tool curl "the valid request is made with curl"
need_tool python3 "the slow clients are python3 sockets"
"$bin" serve --out "$tmp/run" --token-file "$tmp/token" --steps 4 --spsa-samples 2 --min-workers 2 --batch 4 --train-examples 32 \
  --round-timeout 5 --linger 5 --listen 127.0.0.1:0 --threads 1 > "$tmp/serve.txt" 2>&1 &
serve=$!
pids+=($serve)
wait_for 30 test -s "$tmp/run/coordinator.url" || bad "serve did not start: $(tail -3 "$tmp/serve.txt")"
url=$(cat "$tmp/run/coordinator.url")
port=${url##*:}

# the slow clients: per connection, how long it lived (-1: still open at the end)
python3 - "$port" > "$tmp/slow.txt" 2> "$tmp/slow.err" <<'PY' &
import select, socket, sys, time
port, t0, conns = int(sys.argv[1]), time.time(), []
for a in (2, 3, 4):
    for _ in range(200):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.bind(("127.0.0.%d" % a, 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /v1/run HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        conns.append([s, a, time.time(), None])
while time.time() - t0 < 12:
    live = [c for c in conns if c[3] is None]
    for c in live:
        try:
            c[0].send(b"X-Slow: 1\r\n")
        except OSError:
            c[3] = time.time()
    end = time.time() + 1
    while time.time() < end:
        live = [c for c in conns if c[3] is None]
        r, _, _ = select.select([c[0] for c in live], [], [], max(0, end - time.time())) if live else ([], 0, 0)
        for c in live:
            if c[0] in r:
                try:
                    gone = c[0].recv(4096) == b""
                except OSError:
                    gone = True
                if gone:
                    c[3] = time.time()
        if not live:
            time.sleep(max(0, end - time.time()))
for s, a, start, closed in conns:
    print(a, -1 if closed is None else round(closed - start, 2))
    s.close()
PY
slow=$!
pids+=($slow)
sleep 2 # the slow clients hold their connections now
read -r code took < <(curl -s -m 10 -o "$tmp/run.json" -w '%{http_code} %{time_total}' \
  -H "Authorization: Bearer $(cat "$tmp/token")" "$url/v1/run")
[ "$code" = 200 ] && awk -v t="$took" 'BEGIN { exit !(t < 5) }' &&
  ok "a valid GET /v1/run while the slow clients hold their connections: 200 in ${took} s" ||
  bad "a valid GET /v1/run while the slow clients hold their connections: status $code after ${took} s"
curl -s -m 10 -D "$tmp/h401.txt" -o /dev/null "$url/v1/run"
grep -q "^HTTP/1.1 401" "$tmp/h401.txt" && grep -qi "^connection: close" "$tmp/h401.txt" &&
  ok "no token: 401 and the connection closed" || bad "no token: $(head -3 "$tmp/h401.txt")"
# a worker joins while they are held (the rounds wait for a second one, so the coordinator
# stays up until the slow clients are done)
"$bin" join "$url" --data "$tmp/shard1.tsv" --token-file "$tmp/token" --retry-for 30 --threads 1 > "$tmp/w1.txt" 2>&1 &
pids+=($!)
w1=$!
wait_for 8 grep -q "machine 1 joined" "$tmp/serve.txt" && kill -0 $slow 2> /dev/null &&
  ok "a worker joined while the slow clients held their connections" || bad "no worker joined during the attack"
wait $slow || bad "the slow clients failed: $(tail -3 "$tmp/slow.err")"
"$bin" join "$url" --data "$tmp/shard2.tsv" --token-file "$tmp/token" --retry-for 30 --threads 1 > "$tmp/w2.txt" 2>&1 &
pids+=($!)
w2=$!
wait $w1 && wait $w2 && ok "both workers trained to the end" || bad "workers: $(tail -2 "$tmp/w1.txt" "$tmp/w2.txt")"
wait $serve || bad "serve: $(tail -3 "$tmp/serve.txt")"

# held: lived more than 3 s; the rest were refused at once (the cap per address)
awk 'BEGIN { min = 99 } { n[$1]++; if ($2 < 0) open++; else if ($2 > 3) { held[$1]++; if ($2 > max) max = $2; if ($2 < min) min = $2 } }
  END { printf "%d %d %d %d %d %.2f %.2f\n", n[2] + n[3] + n[4], held[2], held[3], held[4], open, min, max }' \
  "$tmp/slow.txt" > "$tmp/check.txt"
read -r n h2 h3 h4 open min max < "$tmp/check.txt"
[ "$n" -ge 500 ] && ok "$n slow connections made" || bad "only $n slow connections made: $(tail -2 "$tmp/slow.err")"
[ "$h2" -ge 1 ] && [ "$h2" -le 64 ] && [ "$h3" -ge 1 ] && [ "$h3" -le 64 ] && [ "$h4" -ge 1 ] && [ "$h4" -le 64 ] &&
  ok "connections held per address: $h2, $h3, $h4 (at most 64)" || bad "connections held per address: $h2, $h3, $h4 (cap 64)"
[ "$open" = 0 ] && awk -v a="$min" -v b="$max" 'BEGIN { exit !(a >= 4.5 && b <= 8) }' &&
  ok "every slow connection held was shut by the header deadline (after $min to $max s)" ||
  bad "$open slow connections still open after 12 s; the others were shut after $min to $max s (deadline 5 s)"
finish
