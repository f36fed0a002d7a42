#!/usr/bin/env bash
# Federated ZO on loopback (docs/FEDERATED.md): `distzo serve` and three `distzo join`
# workers on stories260K, each with its own shard of SST-2.
# - worker 2 is SIGKILLed in round 10 (of 0..39) after computing, before sending (DISTZO_TEST_KILL):
#   that round closes at its deadline with the others' slots, and training goes on;
# - worker 3 starts after 10 rounds and catches up from the coordinator's log;
# - the coordinator is SIGKILLed after 20 rounds (DISTZO_TEST_KILL) and restarted with --resume on the same
#   address: the workers reconnect (backoff), join again and go on;
# - worker 3's replica gets one bit flipped after 30 records (DISTZO_TEST_CORRUPT_REPLICA):
#   its checksum differs from the coordinator's, it reloads the base model and replays;
# - at the end every live replica equals `distzo export` of the run, byte for byte, and the
#   seed log has one record per round;
# - a bad token, a different base model, an unreachable coordinator: a clear error each;
# - HTTPS with a self-signed certificate: trusted with --ca-file, refused without.
# Every wait is bounded; the script stops by itself.
# usage: federated.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/federated_lib.sh"
fed_begin "$assets"
echo "some-other-token-0123456789" > "$tmp/badtoken"
rounds=40

# bad command lines: a clear error naming the option or file, before anything starts
"$bin" serve --token-file "$tmp/token" > "$tmp/b1.txt" 2>&1; grep -q "serve needs --out" "$tmp/b1.txt" &&
  ok "serve without --out: named" || bad "serve without --out: $(cat "$tmp/b1.txt")"
"$bin" serve --out "$tmp/bad1" --token-file "$tmp/none" --steps 1 > "$tmp/b2.txt" 2>&1; grep -q "$tmp/none" "$tmp/b2.txt" &&
  [ ! -e "$tmp/bad1/run.json" ] && ok "a missing token file: named, nothing written" || bad "missing token: $(cat "$tmp/b2.txt")"
"$bin" serve --out "$tmp/bad2" --token-file "$tmp/token" --listen nowhere --steps 1 > "$tmp/b3.txt" 2>&1
grep -q "\-\-listen 'nowhere': expected HOST:PORT" "$tmp/b3.txt" && [ ! -e "$tmp/bad2" ] &&
  ok "a malformed --listen: named, no run folder made" || bad "--listen: $(cat "$tmp/b3.txt")"
"$bin" serve --out "$tmp/bad4" --token-file "$tmp/token" --model "$tmp/no-such-model.bin" --listen 127.0.0.1:0 \
  --steps 1 > "$tmp/b6.txt" 2>&1; grep -q "no-such-model.bin" "$tmp/b6.txt" && [ ! -e "$tmp/bad4" ] &&
  ok "a missing base model: named, no run folder left" || bad "missing model: $(cat "$tmp/b6.txt"; ls -a "$tmp/bad4")"
"$bin" serve --out "$tmp/bad3" --token-file "$tmp/token" --samples-per-worker 5 --spsa-samples 4 --steps 1 \
  > "$tmp/b4.txt" 2>&1; grep -q "\-\-samples-per-worker 5" "$tmp/b4.txt" && ok "--samples-per-worker above the slots: named" ||
  bad "samples per worker: $(cat "$tmp/b4.txt")"
"$bin" join http://127.0.0.1:1 --token-file "$tmp/token" > "$tmp/b5.txt" 2>&1; grep -q "\-\-data FILE" "$tmp/b5.txt" &&
  ok "join without --data: named" || bad "join without --data: $(cat "$tmp/b5.txt")"
"$bin" join http://127.0.0.1:1 --token-file "$tmp/token" --data "$tmp/shard1.tsv" --save /dev/null/x --retry-for 0 \
  > "$tmp/b9.txt" 2>&1; grep -q "option --save: /dev/null/x cannot be written" "$tmp/b9.txt" &&
  ok "join --save where nothing can be written: refused before the rounds" || bad "join --save: $(cat "$tmp/b9.txt")"
# what train refuses, serve refuses before it listens (a template without {text} made a run
# no worker could join; an option its task does not use, or --eval-every without --test, was ignored)
for case in "--template noplaceholder|must contain \"{text}\" exactly once" \
            "--label-words onlyone|need at least 2 comma-separated words" \
            "--seq 16|option --seq: --task sst2 does not use it" \
            "--eval-every 5|option --eval-every: the coordinator scores only a --test file"; do
  rm -rf "$tmp/bad5"
  timeout 20 "$bin" serve --out "$tmp/bad5" --token-file "$tmp/token" --listen 127.0.0.1:0 --steps 1 ${case%%|*} \
    > "$tmp/b11.txt" 2>&1
  [ $? = 1 ] && grep -qF -- "${case#*|}" "$tmp/b11.txt" && [ ! -e "$tmp/bad5/run.json" ] &&
    ok "serve ${case%%|*}: refused before listening" || bad "serve ${case%%|*}: $(cat "$tmp/b11.txt")"
done
"$bin" serve --out "$tmp/nothing-here" --resume --token-file "$tmp/token" > "$tmp/b10.txt" 2>&1
grep -q "nothing-here: no such run folder to resume" "$tmp/b10.txt" && [ ! -e "$tmp/nothing-here" ] &&
  ok "serve --resume of a missing folder: said so, nothing made" || bad "serve --resume missing: $(cat "$tmp/b10.txt")"
serve=(serve --out "$tmp/run" --token-file "$tmp/token" --steps $rounds --spsa-samples 3 --batch 4
       --train-examples 32 --lr 1e-4 --round-timeout 3 --worker-timeout 3 --min-workers 2 --linger 30 --threads 1)
join=(--token-file "$tmp/token" --retry-for 30 --threads 1)


serve_bg "$tmp/serve1.txt" env DISTZO_TEST_KILL=serve:20 "$bin" "${serve[@]}" --listen 127.0.0.1:0
# the errors first, while the coordinator waits for its first worker
"$bin" join "$url" --data "$tmp/shard1.tsv" --token-file "$tmp/badtoken" --retry-for 5 > "$tmp/e1.txt" 2>&1 &&
  bad "a bad token was accepted" || { grep -q "refused the token" "$tmp/e1.txt" && ok "a bad token: refused, named" ||
  bad "bad token: $(cat "$tmp/e1.txt")"; }
join_other_base "a different base model (one byte)" "${join[@]}"
"$bin" join http://127.0.0.1:1 --data "$tmp/shard1.tsv" --token-file "$tmp/token" --retry-for 1 > "$tmp/e3.txt" 2>&1 &&
  bad "an unreachable coordinator gave success" || { grep -q "did not answer for" "$tmp/e3.txt" &&
  ok "an unreachable coordinator: an error after --retry-for" || bad "unreachable: $(cat "$tmp/e3.txt")"; }

"$bin" join "$url" --data "$tmp/shard1.tsv" --name w1 --save "$tmp/w1" --checksum-file "$tmp/w1.sum" "${join[@]}" \
  > "$tmp/w1.txt" 2>&1 &
w1=$!
DISTZO_TEST_KILL=join:10 "$bin" join "$url" --data "$tmp/shard2.tsv" --name w2 "${join[@]}" > "$tmp/w2.txt" 2>&1 &
w2=$!
pids+=($w1 $w2)

wait_for 120 rounds_done 10 || bad "10 rounds did not happen: $(tail -3 "$tmp/serve1.txt")"
DISTZO_TEST_CORRUPT_REPLICA=30 "$bin" join "$url" --data "$tmp/shard3.tsv" --name w3 --save "$tmp/w3" --checksum-file "$tmp/w3.sum" "${join[@]}" \
  > "$tmp/w3.txt" 2>&1 &
w3=$!
pids+=($w3)

serve_killed_at 20 "$tmp/serve1.txt"
kill -0 $w1 2> /dev/null && ok "the workers outlive the coordinator's SIGKILL" || bad "worker 1 died with the coordinator"
"$bin" "${serve[@]}" --listen "${url#http://}" --resume > "$tmp/serve2.txt" 2>&1 &
serve_pid=$!
pids+=($serve_pid)

wait_for 240 bash -c "! kill -0 $serve_pid 2> /dev/null" || bad "the restarted coordinator did not finish"
wait $serve_pid && ok "the restarted coordinator finished the run" || bad "serve --resume: $(tail -5 "$tmp/serve2.txt")"
grep -q "resumed after round" "$tmp/serve2.txt" && ok "serve --resume continued from the log" ||
  bad "no resume: $(head -3 "$tmp/serve2.txt")"
wait $w2
[ $? -eq 137 ] && ok "worker 2 was killed mid-round (SIGKILL)" || bad "worker 2 was not killed: $(tail -3 "$tmp/w2.txt")"
grep -q "^round 11/$rounds  1/2 slots" "$tmp/serve1.txt" && ok "the round worker 2 died in closed without its slot" ||
  bad "round 11: $(grep '^round 11/' "$tmp/serve1.txt")"
for w in 1 3; do
  pid=w$w
  wait ${!pid} && ok "worker $w finished" || bad "worker $w: $(tail -3 "$tmp/w$w.txt")"
done
grep -q "rejoins" "$tmp/w1.txt" && ! grep -q " 0 rejoins" "$tmp/w1.txt" && ok "worker 1 joined the restarted coordinator" ||
  bad "worker 1 did not rejoin: $(tail -1 "$tmp/w1.txt")"

grep -q "test fault: flipped a bit" "$tmp/w3.txt" && grep -q "resync at 30 records" "$tmp/w3.txt" &&
  ok "worker 3's replica, one bit flipped, differed from the coordinator's checksum and was rebuilt" ||
  bad "no resync of worker 3: $(grep -E 'fault|resync' "$tmp/w3.txt")"
replicas_equal_export 1 3
cmp -s "$tmp/w1.sum" "$tmp/w3.sum" && ok "the replicas' checksums agree" || bad "checksums differ"
# serve --resume keeps the run's settings: one given that differs is refused (it was ignored)
sum_log=$(sha256sum < "$tmp/run/seeds.log")
"$bin" serve --out "$tmp/run" --resume --token-file "$tmp/token" --listen 127.0.0.1:0 --lr 1 --threads 1 > "$tmp/b8.txt" 2>&1
[ $? = 1 ] && grep -q "run/run.json: --lr 1 differs from this run's" "$tmp/b8.txt" && [ "$(sha256sum < "$tmp/run/seeds.log")" = "$sum_log" ] &&
  ok "serve --resume with another --lr: refused naming run.json and both values" || bad "serve --resume --lr 1: $(tail -1 "$tmp/b8.txt")"
"$bin" serve --out "$tmp/run" --resume --token-file "$tmp/token" --listen 127.0.0.1:0 --steps 1 --threads 1 > "$tmp/b12.txt" 2>&1
[ $? = 1 ] && grep -q "run/run.json: --steps 1 is below this run's" "$tmp/b12.txt" &&
  ok "serve --resume --steps below the run's: refused, as train --resume" || bad "serve --resume --steps 1: $(tail -1 "$tmp/b12.txt")"
"$bin" train --resume --out "$tmp/run" > "$tmp/b7.txt" 2>&1; grep -q "is a federated run" "$tmp/b7.txt" &&
  ok "train --resume of a federated run: refused, pointing to serve --resume" || bad "train --resume: $(cat "$tmp/b7.txt")"
moved=$(grep -vc '"g": 0[,}]' "$tmp/run/metrics.jsonl")
[ "$moved" -ge $((rounds / 2)) ] && ok "$moved of $rounds rounds moved the weights (g != 0)" ||
  bad "only $moved rounds have g != 0"
[ "$(stat -c %s "$tmp/run/seeds.log")" -eq $((104 + rounds * (12 + 4 * 3))) ] &&
  ok "the seed log holds $rounds records of 3 slots" || bad "seeds.log has $(stat -c %s "$tmp/run/seeds.log") bytes"
# HTTPS: a self-signed certificate for 127.0.0.1; a worker that trusts it (--ca-file) works,
# one that does not is refused by the certificate check
need_tool openssl "the HTTPS checks make a self-signed certificate"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1" > /dev/null 2>&1 || bad "openssl could not make a certificate"
"$bin" serve --out "$tmp/tls" --token-file "$tmp/token" --steps 3 --spsa-samples 1 --batch 4 --train-examples 32 \
  --listen 127.0.0.1:0 --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --linger 10 --threads 1 > "$tmp/tls.txt" 2>&1 &
tls_pid=$!
pids+=($tls_pid)
wait_for 30 test -s "$tmp/tls/coordinator.url" || bad "the HTTPS coordinator did not start: $(tail -2 "$tmp/tls.txt")"
tls_url=$(cat "$tmp/tls/coordinator.url")
case $tls_url in https://*) ok "--tls-cert serves $tls_url" ;; *) bad "--tls-cert serves $tls_url" ;; esac
"$bin" join "$tls_url" --data "$tmp/shard1.tsv" "${join[@]}" --retry-for 2 > "$tmp/e4.txt" 2>&1 &&
  bad "a worker trusted an unknown certificate" || { grep -qi "certificate" "$tmp/e4.txt" &&
  ok "an https coordinator with an untrusted certificate: refused" || bad "untrusted certificate: $(cat "$tmp/e4.txt")"; }
"$bin" join "$tls_url" --data "$tmp/shard1.tsv" "${join[@]}" --ca-file "$tmp/cert.pem" --save "$tmp/wt" \
  > "$tmp/wt.txt" 2>&1 || bad "the worker over HTTPS failed: $(tail -2 "$tmp/wt.txt")"
wait $tls_pid || bad "the HTTPS coordinator failed: $(tail -2 "$tmp/tls.txt")"
"$bin" export --run "$tmp/tls" -o "$tmp/tls-exported" > /dev/null 2>&1 &&
  cmp -s "$tmp/tls-exported/model.safetensors" "$tmp/wt/model.safetensors" &&
  ok "over HTTPS, the replica equals export" || bad "the HTTPS replica differs from export"
finish
