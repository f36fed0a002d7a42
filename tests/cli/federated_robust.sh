#!/usr/bin/env bash
# A worker written in bash and curl from docs/FEDERATED.md's protocol table alone, and a
# poisoning one: it joins first (machine 1, slots 0 and 1 of every round) and always sends the
# largest code (0x7F: +g_clip). With --robust-clip 2 every round's record holds that slot at
# most at twice the round's median |g| (of the poisoner's and the two honest workers' values),
# which keeps it below g_clip in most rounds;
# the protocol's guards answer as documented (a second submission 409, another machine's
# key 410, a slot not assigned 409, no token 401, a malformed body 400), and the honest
# replicas still equal `distzo export` of the run, and `distzo eval` reads a replica saved by
# `join --save` (its tokenizer beside the weights) as it reads the export.
# usage: federated_robust.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
need_tool curl "the hand-written client speaks HTTP with curl"
rounds=12
"$bin" serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --spsa-samples 6 --samples-per-worker 2 --min-workers 3 --batch 4 \
  --train-examples 32 --robust-clip 2 --round-timeout 3 --linger 20 --listen 127.0.0.1:0 --threads 1 \
  > "$tmp/serve.txt" 2>&1 &
serve=$!
pids+=($serve)
for _ in $(seq 300); do [ -s "$tmp/run/coordinator.url" ] && break; sleep 0.1; done
url=$(cat "$tmp/run/coordinator.url")
auth="Authorization: Bearer $(cat "$tmp/token")"
# http METHOD PATH [BODY]: prints the body, then the status on a line of its own
http() { curl -s -m 10 -H "$auth" -H "Content-Type: application/json" -X "$1" ${3:+--data "$3"} -w '\n%{http_code}' "$url$2"; }
field() { grep -Eo "\"$1\":(\[[^]]*\]|[^,}]*)" | head -1 | cut -d: -f2- | tr -d '"[]'; } # a value, or an array's

run=$(http GET /v1/run)
fp=$(echo "$run" | head -1 | field fingerprint)
[ "$(echo "$run" | tail -1)" = 200 ] && [ ${#fp} -eq 16 ] && ok "GET /v1/run: the run and its fingerprint" || bad "GET /v1/run: $run"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/run")" = 401 ] && ok "no token: 401" || bad "no token was not refused"
[ "$(http POST /v1/join '{"protocol":1,' | tail -1)" = 400 ] && ok "a malformed join: 400" || bad "a malformed join was not refused"
joined=$(http POST /v1/join "{\"protocol\":1,\"fingerprint\":\"$fp\",\"name\":\"poisoner\"}" | head -1)
machine=$(echo "$joined" | field machine) key=$(echo "$joined" | field key)
[ "$machine" = 1 ] && [ ${#key} -eq 32 ] && ok "POST /v1/join: machine 1 and its key" || bad "join: $joined"

# a round request's malformed fields: 400 naming the field (wait_ms and version were read as
# "no wait", a malformed key as an unknown machine's 410)
for q in "key=$key&wait_ms=-1|'wait_ms'" "key=$key&wait_ms=999999999|'wait_ms'" "key=$key&version=abc|'version'" \
         "key=zz|'key'"; do
  got=$(http GET "/v1/round?machine=$machine&applied=0&${q%%|*}")
  [ "$(tail -1 <<<"$got")" = 400 ] && grep -qF -- "${q#*|}" <<<"$got" && ok "GET /v1/round ${q%%|*}: 400" ||
    bad "GET /v1/round ${q%%|*}: $got"
done
for i in 1 2; do
  "$bin" join "$url" --data "$tmp/shard$i.tsv" --token-file "$tmp/token" --save "$tmp/w$i" --threads 1 > "$tmp/w$i.txt" 2>&1 &
  pids+=($!)
  eval "w$i=$!"
done

# the poisoner's loop: long-poll the state, send 0x7F for its slots, report what it applied
applied=0 version=0000000000000000 guards=0
for _ in $(seq 400); do
  state=$(http GET "/v1/round?machine=$machine&key=$key&applied=$applied&version=$version&wait_ms=2000" | head -1)
  version=$(echo "$state" | field version)
  applied=$(echo "$state" | field log_count)
  if [ "$(echo "$state" | field finished)" = true ]; then # say it has everything, then leave
    http GET "/v1/round?machine=$machine&key=$key&applied=$applied" > /dev/null
    break
  fi
  slots=$(echo "$state" | field slots) round=$(echo "$state" | field round)
  if [ "$(echo "$state" | field open)" = true ] && [ -n "$slots" ]; then
    codes=$(echo "$slots" | sed 's/[0-9]\+/127/g')
    body="{\"machine\":$machine,\"key\":\"$key\",\"round\":$round,\"slots\":[$slots],\"codes\":[$codes],\"loss\":null}"
    if [ $guards -eq 0 ]; then # once, in round 0, while the round waits for the poisoner's second slot
      guards=1
      first=${slots%%,*}
      notmine=${body/\"slots\":\[$slots\]/\"slots\":[5]}
      notmine=${notmine/\"codes\":\[$codes\]/\"codes\":[127]}
      http POST /v1/submit "$notmine" > "$tmp/g1.txt"
      [ "$(tail -1 "$tmp/g1.txt")" = 409 ] && grep -q "not (or no longer) assigned" "$tmp/g1.txt" &&
        ok "a slot not assigned: 409" || bad "an unassigned slot: $(cat "$tmp/g1.txt")"
      other=${body/\"machine\":$machine/\"machine\":2}
      [ "$(http POST /v1/submit "$other" | tail -1)" = 410 ] && ok "another machine's id with this key: 410" ||
        bad "a submission for another machine was not refused"
      part=${body/\"slots\":\[$slots\]/\"slots\":[$first]}
      part=${part/\"codes\":\[$codes\]/\"codes\":[127]}
      [ "$(http POST /v1/submit "$part" | tail -1)" = 200 ] || bad "the poisoner's first slot was refused"
      http POST /v1/submit "$body" > "$tmp/g2.txt"
      [ "$(tail -1 "$tmp/g2.txt")" = 409 ] && grep -q "already submitted" "$tmp/g2.txt" &&
        ok "a second submission in a round: 409" || bad "a second submission: $(cat "$tmp/g2.txt")"
    else
      http POST /v1/submit "$body" > /dev/null
    fi
  fi
done
for i in 1 2; do
  pid=w$i
  wait ${!pid} || bad "worker $i: $(tail -2 "$tmp/w$i.txt")"
done
wait $serve || bad "serve: $(tail -3 "$tmp/serve.txt")"

# every record: u32 step, f32 lr, f32 g[6], u32 crc; slots 0 and 1 are the poisoner's. From
# round 1 on all six are in, and the bound is twice the lower median (the 3rd smallest |g|).
od -A n -t f4 -j 104 -w36 -v "$tmp/run/seeds.log" | awk '
  function abs(x) { return x < 0 ? -x : x }
  NR > 1 { for (i = 1; i <= 6; i++) v[i] = abs($(i + 2))
    for (i = 2; i <= 6; i++) for (j = i; j > 1 && v[j] < v[j - 1]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    for (k = 3; k <= 4; k++) { if (abs($k) > 2 * v[3] * 1.000001) bad++; if (abs($k) < 64) clipped++ }
    n++ }
  END { print n + 1, bad + 0, clipped + 0 }' > "$tmp/check.txt"
read -r n poisoned clipped < "$tmp/check.txt"
[ "$n" = $rounds ] && [ "$poisoned" = 0 ] && [ "$clipped" -ge $((rounds - 1)) ] &&
  ok "in rounds 1..$((n - 1)) the poisoner's slots are at most 2 x the median |g| (below g_clip: $clipped of $((2 * (n - 1))))" ||
  bad "$poisoned of the poisoner's $((2 * (n - 1))) slots went past 2 x the median; $clipped below g_clip ($n records)"
replicas_equal_export 1 2 # the honest workers
# a --save replica carries its tokenizer, so `distzo eval` reads it as it reads an export
"$bin" eval "$tmp/exported" --limit 24 --threads 1 --predictions "$tmp/pred_export.tsv" > /dev/null 2>&1 ||
  bad "eval of the export failed"
"$bin" eval "$tmp/w1" --limit 24 --threads 1 --predictions "$tmp/pred_w1.tsv" > "$tmp/eval_w1.txt" 2>&1 &&
  cmp -s "$tmp/pred_export.tsv" "$tmp/pred_w1.tsv" && ok "distzo eval of a join --save replica: the export's predictions" ||
  bad "eval of worker 1's replica: $(tail -n 2 "$tmp/eval_w1.txt")"
finish
