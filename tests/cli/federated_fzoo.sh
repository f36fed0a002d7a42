#!/usr/bin/env bash
# Federated FZOO on loopback (docs/FEDERATED.md "FZOO"): `distzo serve --estimator fzoo
# --fzoo-directions 3` and two `distzo join` workers on stories260K, each with its own
# shard of SST-2.
# - a round is one worker's: its 3 slots are the step's directions on one batch of its data
#   (l0 and 3 one-sided forwards), sent as 3 one-byte codes;
# - every logged g is a value of the one-byte code (|g| = clip e^((k - 127) / 16)), or 0;
# - the coordinator is SIGKILLed after 6 rounds and resumed; the workers join again;
# - at the end both replicas equal `distzo export` of the run, byte for byte, and the log
#   holds one (round, lr, g[3]) record per round;
# - refused, named: fewer --samples-per-worker than directions, --seed-pool, --spsa-samples,
#   an estimator serve does not carry.
# usage: federated_fzoo.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
rounds=14 q=3 clip=8000

bad_serve() { "$bin" serve --token-file "$tmp/token" --listen 127.0.0.1:0 --steps 1 --estimator fzoo "$@"; }
refuse "--samples-per-worker 1 with fzoo" "samples-per-worker must be 3" bad_serve --fzoo-directions 3 \
  --samples-per-worker 1 --out "$tmp/bad1"
[ ! -e "$tmp/bad1/run.json" ] || bad "the refused start left a run.json"
refuse "--seed-pool with fzoo" "seed-pool" bad_serve --seed-pool 16 --out "$tmp/bad2"
refuse "--spsa-samples with fzoo" "fzoo-directions" bad_serve --spsa-samples 2 --out "$tmp/bad3"
refuse "--perturbation gaussian with fzoo" "Rademacher" bad_serve --perturbation gaussian --out "$tmp/bad6"
refuse "serve --estimator lozo" "not mezo or fzoo" "$bin" serve --token-file "$tmp/token" --estimator lozo --out "$tmp/bad4"
refuse "--fzoo-directions without fzoo" "without --estimator fzoo" "$bin" serve --token-file "$tmp/token" \
  --fzoo-directions 4 --out "$tmp/bad5"

# without --g-clip, fzoo's clip is 8 / eps (MeZO's 64 would clip every coefficient)
"$bin" serve --out "$tmp/clip" --token-file "$tmp/token" --listen 127.0.0.1:0 --steps 1 --estimator fzoo --eps 1e-2 \
  --batch 4 --train-examples 32 --threads 1 > "$tmp/clip.txt" 2>&1 &
clip_pid=$!
wait_for 30 test -s "$tmp/clip/federated.json"
grep -qE '"g_clip":[[:space:]]*800([,}]|$)' "$tmp/clip/federated.json" && ok "serve --estimator fzoo: --g-clip defaults to 8 / eps" ||
  bad "fzoo's default clip: $(grep -o '"g_clip":[^,]*' "$tmp/clip/federated.json" 2>/dev/null) $(tail -2 "$tmp/clip.txt")"
kill "$clip_pid" 2> /dev/null; wait "$clip_pid" 2> /dev/null

serve=(serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --estimator fzoo --fzoo-directions $q
       --batch 4 --train-examples 32 --lr 1e-5 --g-clip $clip --round-timeout 3 --worker-timeout 3 --min-workers 2
       --linger 30 --threads 1)
join=(--token-file "$tmp/token" --retry-for 30 --threads 1)

serve_bg "$tmp/serve1.txt" env DISTZO_TEST_KILL=serve:6 "$bin" "${serve[@]}" --listen 127.0.0.1:0
grep -qE '"estimator":[[:space:]]*"fzoo"' "$tmp/run/run.json" && grep -qE '"samples_per_worker":[[:space:]]*3' \
  "$tmp/run/federated.json" && ok "run.json says fzoo, federated.json 3 slots a worker" ||
  bad "settings: $(grep -h -E 'estimator|samples_per' "$tmp/run/run.json" "$tmp/run/federated.json")"
for w in 1 2; do
  "$bin" join "$url" --data "$tmp/shard$w.tsv" --name w$w --save "$tmp/w$w" "${join[@]}" > "$tmp/w$w.txt" 2>&1 &
  eval "w$w=\$!"
  pids+=($!)
done
serve_killed_at 6 "$tmp/serve1.txt"
"$bin" "${serve[@]}" --listen "${url#http://}" --resume > "$tmp/serve2.txt" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
wait_for 240 bash -c "! kill -0 $serve_pid 2> /dev/null" || bad "the restarted coordinator did not finish"
wait $serve_pid && ok "the restarted coordinator finished the run" || bad "serve --resume: $(tail -5 "$tmp/serve2.txt")"
for w in 1 2; do
  pid=w$w
  wait ${!pid} && ok "worker $w finished" || bad "worker $w: $(tail -3 "$tmp/w$w.txt")"
done
# (round 6's line is not printed: the coordinator dies as it is logged)
n_rounds=$(cat "$tmp/serve1.txt" "$tmp/serve2.txt" | grep -cE "^round [1-9][0-9]*/$rounds ")
n_full=$(cat "$tmp/serve1.txt" "$tmp/serve2.txt" | grep -cE "^round [1-9][0-9]*/$rounds  3/3 slots")
[ "$n_rounds" -ge $((rounds - 1)) ] && [ "$n_full" -eq "$n_rounds" ] && ok "every round took its 3 slots from one worker" ||
  bad "$n_full of $n_rounds rounds had 3/3 slots: $(grep -h '^round' "$tmp/serve1.txt" "$tmp/serve2.txt" | head -3)"
replicas_equal_export 1 2
[ "$(stat -c %s "$tmp/run/seeds.log")" -eq $((104 + rounds * (12 + 4 * q))) ] &&
  ok "the seed log holds $rounds records of 3 slots" || bad "seeds.log has $(stat -c %s "$tmp/run/seeds.log") bytes"
# the records' g: each 0 or a value of the byte code (16 ln(|g| / clip) an integer in -126..0)
python3 - "$tmp/run/seeds.log" $q $clip > "$tmp/codes.txt" << 'EOF'
import math, struct, sys
data, q, clip = open(sys.argv[1], 'rb').read(), int(sys.argv[2]), float(sys.argv[3])
rec, off, coded, zero, other = 12 + 4 * q, 104, 0, 0, []
while off + rec <= len(data):
    for g in struct.unpack_from('<%df' % q, data, off + 8):
        k = 16 * math.log(abs(g) / clip) if g else None
        if g == 0: zero += 1
        elif abs(k - round(k)) < 1e-3 and -126 <= round(k) <= 0: coded += 1
        else: other.append(g)
    off += rec
print(coded, zero, other[:3])
EOF
read -r coded zero rest < "$tmp/codes.txt"
[ "$coded" -ge $((rounds * q - 2)) ] && [ "$rest" = "[]" ] &&
  ok "the log's g are one-byte code values ($coded coded, $zero zero)" || bad "the log's g: $(cat "$tmp/codes.txt")"
finish
