#!/usr/bin/env bash
# FedKSeed's K-seed pool on loopback (docs/FEDERATED.md "K-seed pool"): `distzo serve
# --seed-pool 64 --seed-sampling importance` and three `distzo join` workers on
# stories260K, each with its own shard of SST-2.
# - every round's seeds are drawn from the pool (the seed log's records hold them: 12 + 8q bytes);
# - worker 3 starts after 10 rounds and downloads the pool's 64 scalars (GET /v1/pool,
#   20 + 4K bytes) instead of the log, then follows the rounds;
# - the coordinator is SIGKILLed after 20 rounds and resumed: it rebuilds its replica from the
#   log's scalars, the workers join again and go on;
# - worker 1's replica gets one bit flipped after 25 records: its checksum differs, it reloads
#   the base model and downloads the scalars again;
# - at the end every replica equals the others and `distzo export` of the run, byte for byte,
#   and so does the coordinator's last checkpoint (--checkpoint-every);
# - the pool mode's option errors are named; a worker of protocol 1 is refused.
# Every wait is bounded; the script stops by itself.
# usage: federated_kseed.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
rounds=30 q=3 k=64

"$bin" serve --out "$tmp/bad1" --token-file "$tmp/token" --seed-pool 0 --steps 1 > "$tmp/b1.txt" 2>&1
grep -q "\-\-seed-pool: 0 is not" "$tmp/b1.txt" && ok "--seed-pool 0: named" || bad "--seed-pool 0: $(cat "$tmp/b1.txt")"
"$bin" serve --out "$tmp/bad2" --token-file "$tmp/token" --seed-sampling greedy --steps 1 > "$tmp/b2.txt" 2>&1
grep -q "\-\-seed-sampling: 'greedy'" "$tmp/b2.txt" && ok "--seed-sampling greedy: named" || bad "sampling: $(cat "$tmp/b2.txt")"
"$bin" serve --out "$tmp/bad3" --token-file "$tmp/token" --seed-pool 16 --weight-decay 0.1 --listen 127.0.0.1:0 \
  --steps 1 > "$tmp/b3.txt" 2>&1
grep -q "weight decay" "$tmp/b3.txt" && [ ! -e "$tmp/bad3/run.json" ] && ok "--seed-pool with weight decay: refused" ||
  bad "pool + wd: $(cat "$tmp/b3.txt")"
"$bin" serve --out "$tmp/bad4" --token-file "$tmp/token" --seed-pool 16 --spsa-samples 33 --listen 127.0.0.1:0 \
  --steps 1 > "$tmp/b4.txt" 2>&1
grep -q "at most 32 slots" "$tmp/b4.txt" && ok "--seed-pool with 33 slots: refused" || bad "pool + q: $(cat "$tmp/b4.txt")"

serve=(serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --spsa-samples $q --batch 4 --seed-pool $k
       --seed-sampling importance --train-examples 32 --lr 1e-3 --round-timeout 3 --worker-timeout 3 --min-workers 2
       --linger 30 --threads 1 --checkpoint-every 10)
join=(--token-file "$tmp/token" --retry-for 30 --threads 1)

serve_bg "$tmp/serve1.txt" env DISTZO_TEST_KILL=serve:20 "$bin" "${serve[@]}" --listen 127.0.0.1:0
if command -v curl > /dev/null; then # a worker of protocol 1 would perturb along the wrong z
  code=$(curl -s -o "$tmp/p1.txt" -w '%{http_code}' -H "Authorization: Bearer $(cat "$tmp/token")" \
    -d '{"protocol":1,"fingerprint":"0000000000000001","name":"old"}' "$url/v1/join")
  [ "$code" = 400 ] && grep -q "needs a worker of protocol 2" "$tmp/p1.txt" && ok "a protocol-1 join of a pool run: refused" ||
    bad "protocol 1 join: $code $(cat "$tmp/p1.txt")"
else
  bad "curl not found on PATH: the protocol-1 join is unchecked"
fi
DISTZO_TEST_CORRUPT_REPLICA=25 "$bin" join "$url" --data "$tmp/shard1.tsv" --name w1 --save "$tmp/w1" \
  --checksum-file "$tmp/w1.sum" "${join[@]}" > "$tmp/w1.txt" 2>&1 &
w1=$!
"$bin" join "$url" --data "$tmp/shard2.tsv" --name w2 --save "$tmp/w2" --checksum-file "$tmp/w2.sum" "${join[@]}" \
  > "$tmp/w2.txt" 2>&1 &
w2=$!
pids+=($w1 $w2)
wait_for 120 rounds_done 10 || bad "10 rounds did not happen: $(tail -3 "$tmp/serve1.txt")"
"$bin" join "$url" --data "$tmp/shard3.tsv" --name w3 --save "$tmp/w3" --checksum-file "$tmp/w3.sum" "${join[@]}" \
  > "$tmp/w3.txt" 2>&1 &
w3=$!
pids+=($w3)

serve_killed_at 20 "$tmp/serve1.txt"
"$bin" "${serve[@]}" --listen "${url#http://}" --resume > "$tmp/serve2.txt" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
wait_for 240 bash -c "! kill -0 $serve_pid 2> /dev/null" || bad "the restarted coordinator did not finish"
wait $serve_pid && ok "the restarted coordinator finished the pool run" || bad "serve --resume: $(tail -5 "$tmp/serve2.txt")"
for w in 1 2 3; do
  pid=w$w
  wait ${!pid} && ok "worker $w finished" || bad "worker $w: $(tail -3 "$tmp/w$w.txt")"
done

n=$(sed -n "s/.*the pool's $k scalars (\([0-9]*\) bytes) in place of \([0-9]*\) records.*/\1 \2/p" "$tmp/w3.txt" | head -1)
set -- $n
[ "${1:-0}" -eq $((20 + 4 * k)) ] && [ "${2:-0}" -ge 10 ] &&
  ok "worker 3 joined late with the pool's $k scalars ($1 bytes) in place of $2 records of the log" ||
  bad "worker 3 did not download the pool state: $(grep -E 'pool|joined' "$tmp/w3.txt")"
grep -q "test fault: flipped a bit" "$tmp/w1.txt" && grep -q "resync at 25 records" "$tmp/w1.txt" &&
  grep -q "in place of 25 records" "$tmp/w1.txt" &&
  ok "worker 1's replica, one bit flipped, was rebuilt from the pool's scalars" ||
  bad "no resync of worker 1: $(grep -E 'fault|resync|pool' "$tmp/w1.txt")"
grep -q "rejoins" "$tmp/w2.txt" && ! grep -q " 0 rejoins" "$tmp/w2.txt" && ok "worker 2 joined the restarted coordinator" ||
  bad "worker 2 did not rejoin: $(tail -1 "$tmp/w2.txt")"
replicas_equal_export 1 2 3
cmp -s "$tmp/exported/model.safetensors" "$tmp/run/checkpoint-30/model.safetensors" && [ ! -e "$tmp/run/checkpoint-20" ] &&
  ok "the coordinator's checkpoint-30 (--checkpoint-every 10, one kept) equals export" ||
  bad "checkpoints: $(ls "$tmp/run")"
cmp -s "$tmp/w1.sum" "$tmp/w2.sum" && cmp -s "$tmp/w1.sum" "$tmp/w3.sum" && ok "the replicas' checksums agree" ||
  bad "checksums differ"
cmp -s "$tmp/exported/model.safetensors" <("$bin" export --model "$assets/stories260K/stories260K.bin" -o "$tmp/base" \
  > /dev/null 2>&1; cat "$tmp/base/model.safetensors") && bad "the pool run did not move the weights" ||
  ok "the pool run moved the weights"
[ "$(stat -c %s "$tmp/run/seeds.log")" -eq $((104 + rounds * (12 + 8 * q))) ] &&
  ok "the seed log holds $rounds records of $q g and $q seed indices" ||
  bad "seeds.log has $(stat -c %s "$tmp/run/seeds.log") bytes"
grep -q '"seed_pool":	64' "$tmp/run/federated.json" && grep -q '"seed_sampling":	"importance"' "$tmp/run/federated.json" &&
  ok "federated.json records the pool" || bad "federated.json: $(cat "$tmp/run/federated.json")"
finish
