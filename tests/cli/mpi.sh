#!/usr/bin/env bash
# DistZO2 over MPI: every layout gives bitwise the single-process run.
# - 1, 2 and 4 ranks; perturbation parallelism (--pertp 2), data parallelism (--dp),
#   both (2 x 2), with one node sharing the masters and with simulated nodes
#   (--node-size) that each hold their own copy: final weights, metrics (without timing)
#   and seed log equal to the run without mpirun, on stories260K and a small random OPT.
# - A rank killed (SIGKILL) mid-run: mpirun exits non-zero within a bounded time, and
#   --resume under another layout (more ranks, fewer ranks) equals the uninterrupted run.
# - Causal-LM fine-tuning with bf16 masters and 2 SPSA samples: the same.
# - --verify-every: a bit flipped on one node is caught and the job stops non-zero.
# usage: mpi.sh DISTZO ASSETS        (fails without mpirun; see lib.sh for missing assets)
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
need_tool mpirun "scripts/deps.sh installs openmpi-bin"
"$bin" train --help 2>&1 | grep -q -- --pertp || { echo "FAIL: distzo has no --pertp"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
test_set "$assets" 40
common=(--steps 12 --eval-every 6 --checkpoint-every 6 --train-examples 48 --dev-examples 21 --batch 8
        --lr 1e-3 --test "$tmp/test.tsv")
# Under ASan, processes started by mpirun skip leak checking: Open MPI's components keep
# allocations past MPI_Finalize and are unloaded before LeakSanitizer could name them.
# Memory errors are still caught; the single-process runs here keep leak checking.
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout 600 mpirun --oversubscribe -np "$@"; }
check() { # name reference run: weights, metrics and seed log equal after 12 steps
  if same_run "$2" "$3" 12; then ok "$1"; else bad "$1"; fi
}

"$bin" train "${common[@]}" --threads 2 --out "$tmp/ref" > "$tmp/ref.txt" 2>&1 || bad "single-process run failed"
grep -q "memory: peak RSS" "$tmp/ref.txt" || bad "no peak RSS line"
layouts=("1" "2" "2 --pertp 2" "4 --pertp 2 --dp 2" "4 --dp 4 --verify-every 4" "4 --pertp 2 --node-size 2 --verify-every 3"
         "2 --node-size 1 --verify-every 6")
for l in "${layouts[@]}"; do
  name=$(echo "$l" | tr -cd '[:alnum:]')
  read -r -a args <<< "$l"
  mpi "${args[0]}" "$bin" train "${common[@]}" "${args[@]:1}" --out "$tmp/l$name" > "$tmp/l$name.txt" 2>&1 ||
    { bad "-np $l exited non-zero"; tail -5 "$tmp/l$name.txt"; continue; }
  check "stories260K, -np $l == single process" "$tmp/ref" "$tmp/l$name"
done
grep -q "4 node(s) agree" "$tmp/l4pertp2nodesize2verifyevery3.txt" 2>/dev/null || grep -q "2 node(s) agree" "$tmp/l4pertp2nodesize2verifyevery3.txt" &&
  ok "replica checks ran across simulated nodes" || bad "no replica check in the log"

# a small random OPT: GPT-2/OPT tokenizer, learned positions, biases, tied head
"$bin" init --preset opt-tiny --seed 5 -o "$tmp/opt" > /dev/null 2>&1
"$bin" train "${common[@]}" --model "$tmp/opt" --threads 1 --out "$tmp/opt-ref" > /dev/null 2>&1
mpi 4 "$bin" train "${common[@]}" --model "$tmp/opt" --pertp 2 --dp 2 --node-size 2 --verify-every 6 \
  --out "$tmp/opt-2x2" > "$tmp/opt.txt" 2>&1 || bad "opt-tiny 2x2 exited non-zero"
check "opt-tiny, -np 4 --pertp 2 --dp 2 (2 simulated nodes) == single process" "$tmp/opt-ref" "$tmp/opt-2x2"

# causal-LM fine-tuning (per-example (NLL, tokens) pairs), bf16 masters, 2 SPSA samples
cut -f1 "$assets/sst2/train.tsv" | sed -n 2,300p > "$tmp/lm.txt"
lm=(--task lm --data "$tmp/lm.txt" --test "$tmp/lm.txt" --steps 12 --eval-every 6 --checkpoint-every 6
    --train-examples 48 --dev-examples 12 --batch 6 --lr 1e-3 --spsa-samples 2 --master-dtype bf16)
"$bin" train "${lm[@]}" --threads 1 --out "$tmp/lm-ref" > /dev/null 2>&1
mpi 4 "$bin" train "${lm[@]}" --pertp 2 --dp 2 --out "$tmp/lm-2x2" > /dev/null 2>&1 || bad "lm 2x2 exited non-zero"
check "lm, bf16 masters, q 2: -np 4 --pertp 2 --dp 2 == single process" "$tmp/lm-ref" "$tmp/lm-2x2"

# a rank dies after step 8 (a checkpoint was written at 6): the job ends, non-zero, no hang
t0=$(date +%s)
DISTZO_TEST_KILL=1:8 mpi 2 "$bin" train "${common[@]}" --pertp 2 --out "$tmp/killed" > "$tmp/killed.txt" 2>&1
rc=$? t1=$(date +%s)
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((t1 - t0)) -lt 120 ]; then ok "killed rank: mpirun exited $rc after $((t1 - t0)) s";
else bad "killed rank: exit $rc after $((t1 - t0)) s"; fi
[ -d "$tmp/killed/checkpoint-6" ] && [ ! -d "$tmp/killed/checkpoint-12" ] && ok "killed run stopped between checkpoints" ||
  bad "killed run: unexpected checkpoints"
cp -r "$tmp/killed" "$tmp/killed1"
mpi 4 "$bin" train --resume --dp 4 --out "$tmp/killed" > /dev/null 2>&1 || bad "resume on 4 ranks failed"
check "resume on 4 ranks (DDP) after a 2-rank PertP run lost a rank == uninterrupted" "$tmp/ref" "$tmp/killed"
"$bin" train --resume --threads 1 --out "$tmp/killed1" > /dev/null 2>&1 || bad "resume in one process failed"
check "resume in one process after a 2-rank run lost a rank == uninterrupted" "$tmp/ref" "$tmp/killed1"

# a rank that stops responding (SIGSTOP after step 4): the job ends within --rank-timeout,
# naming the rank, and resumes like a crash
t0=$(date +%s)
DISTZO_TEST_KILL=1:4:stop mpi 2 "$bin" train "${common[@]}" --rank-timeout 5 --out "$tmp/stopped" > "$tmp/stopped.txt" 2>&1
rc=$? t1=$(date +%s)
pkill -KILL -f "$tmp/stopped" 2>/dev/null
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((t1 - t0)) -lt 90 ] && grep -q "rank 1 did not respond within 5 s" "$tmp/stopped.txt"; then
  ok "stopped rank: the job ended after $((t1 - t0)) s naming rank 1 (exit $rc)"
else bad "stopped rank: exit $rc after $((t1 - t0)) s"; tail -5 "$tmp/stopped.txt"; fi
"$bin" train --resume --threads 1 --out "$tmp/stopped" > /dev/null 2>&1 || bad "resume after a stopped rank failed"
check "resume in one process after a rank stopped responding == uninterrupted" "$tmp/ref" "$tmp/stopped"

# --verify-every: one flipped bit on node 1 after step 4 is caught there
DISTZO_TEST_CORRUPT=1:4 mpi 2 "$bin" train "${common[@]}" --node-size 1 --verify-every 4 --out "$tmp/corrupt" \
  > "$tmp/corrupt.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "weights differ between nodes" "$tmp/corrupt.txt"; then ok "corrupted replica detected (exit $rc)";
else bad "corrupted replica not detected (exit $rc)"; tail -5 "$tmp/corrupt.txt"; fi
# ... wherever the bit is (embeddings, a layer, the final norm, the last tensor), in bf16
# masters too, and on a node whose ranks share their copy (node 0, rank 0's)
short=(--steps 4 --eval-every 0 --checkpoint-every 0 --train-examples 48 --dev-examples 21 --batch 8 --lr 1e-3
       --test "$tmp/test.tsv" --threads 1 --verify-every 4)
for fault in "1:4:model.embed_tokens.weight|2 --node-size 1" "1:4:model.layers.3.mlp.down_proj.weight|2 --node-size 1 --master-dtype bf16" \
             "0:4:model.norm.weight|4 --pertp 2 --node-size 2" "1:4:last|4 --dp 4 --node-size 2 --master-dtype bf16"; do
  read -r -a args <<< "${fault#*|}"
  DISTZO_TEST_CORRUPT=${fault%%|*} mpi "${args[0]}" "$bin" train "${short[@]}" "${args[@]:1}" --out "$tmp/corrupt_x" \
    > "$tmp/corrupt_x.txt" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && grep -q "weights differ between nodes" "$tmp/corrupt_x.txt"; then ok "a bit flipped at ${fault%%|*} (-np ${fault#*|}) is caught"
  else bad "a bit flipped at ${fault%%|*} (-np ${fault#*|}) was not caught (exit $rc)"; tail -3 "$tmp/corrupt_x.txt"; fi
  rm -rf "$tmp/corrupt_x"
done
# one copy of the weights (a node's ranks share it) has nothing to compare: it says so
# instead of reporting agreement
mpi 2 "$bin" train "${short[@]}" --out "$tmp/onecopy" > "$tmp/onecopy.txt" 2>&1 || bad "one-copy run failed"
grep -q "one copy of the weights (its ranks share it), so there is nothing to compare" "$tmp/onecopy.txt" &&
  ! grep -q "agree" "$tmp/onecopy.txt" && ok "--verify-every on one shared copy says it checks nothing" ||
  bad "one copy: $(grep -E "verify|agree" "$tmp/onecopy.txt" | head -2)"

# every rank must run the same run: a rank given another --lr, or another data file, is
# refused at start on every rank, naming what differs, before anything is written
mpirun --oversubscribe -np 1 "$bin" train "${common[@]}" --out "$tmp/disagree1" : \
  -np 1 "$bin" train "${common[@]}" --lr 2e-3 --out "$tmp/disagree1" > "$tmp/disagree1.txt" 2>&1
[ $? -ne 0 ] && grep -q "the ranks disagree on --lr" "$tmp/disagree1.txt" && [ ! -e "$tmp/disagree1/run.json" ] &&
  ok "ranks with different --lr refused" || bad "different --lr not refused: $(tail -2 "$tmp/disagree1.txt")"
head -30 "$tmp/test.tsv" > "$tmp/test_short.tsv"
other=("${common[@]}"); other[${#other[@]}-1]="$tmp/test_short.tsv"
mpirun --oversubscribe -np 1 "$bin" train "${common[@]}" --out "$tmp/disagree2" : \
  -np 1 "$bin" train "${other[@]}" --out "$tmp/disagree2" > "$tmp/disagree2.txt" 2>&1
[ $? -ne 0 ] && grep -q "the ranks disagree on the test data" "$tmp/disagree2.txt" &&
  ok "ranks with different test data refused" || bad "different data not refused: $(tail -2 "$tmp/disagree2.txt")"

# a resume with no checkpoint under mpirun: rank 0 reads the base's scores from
# metrics.jsonl's row 0 and sends them to the others (with the seed log's steps replayed,
# or none: killed in its first evaluation, the seed log its 104-byte header); a damaged
# metrics.jsonl stops every rank with rank 0's own error, whichever rank ends the job
nock=("${common[@]}" --checkpoint-every 0 --threads 1)
"$bin" train "${nock[@]}" --out "$tmp/nock12" > /dev/null 2>&1 || bad "the 12-step run without checkpoints failed"
"$bin" train "${nock[@]}" --steps 6 --out "$tmp/nock6" > /dev/null 2>&1 || bad "the 6-step run failed"
cp -r "$tmp/nock6" "$tmp/nock0" && truncate -s 104 "$tmp/nock0/seeds.log" && sed -i '2,$d' "$tmp/nock0/metrics.jsonl"
for r in nock6 nock0; do
  mpi 2 "$bin" train --resume --steps 12 --out "$tmp/$r" > "$tmp/$r.txt" 2>&1 || bad "$r: the 2-rank resume failed"
  grep -q "the base model's scores from metrics.jsonl" "$tmp/$r.txt" && [ "$(metrics "$tmp/$r")" = "$(metrics "$tmp/nock12")" ] &&
    ok "$r: a 2-rank resume from the base takes row 0's scores, the metrics as uninterrupted" ||
    bad "$r: $(grep resumed "$tmp/$r.txt")"
done
cp -r "$tmp/nock12" "$tmp/nock-bad" && sed -i '3s/.*/garbage/' "$tmp/nock-bad/metrics.jsonl"
mpi 2 "$bin" train --resume --steps 14 --out "$tmp/nock-bad" > "$tmp/nock-bad.txt" 2>&1
[ $? -ne 0 ] && grep -q "nock-bad/metrics.jsonl:3: not a metrics line" "$tmp/nock-bad.txt" &&
  ok "a damaged metrics.jsonl stops a 2-rank resume with rank 0's error" ||
  bad "damaged metrics.jsonl under mpirun: $(grep distzo "$tmp/nock-bad.txt" | tail -2)"
# a refusal of rank 0 inside the resume (the seed log gone) is shared with every rank, so
# none waits in a broadcast; each then ends the job (the first abort may cut another's
# message short, so one line or two), the folder as it was
cp -r "$tmp/nock12" "$tmp/nolog" && rm "$tmp/nolog/seeds.log"
mpi 2 "$bin" train --resume --steps 14 --out "$tmp/nolog" > "$tmp/nolog.txt" 2>&1
[ $? -ne 0 ] && grep -q "seeds.log is missing, but the run reached step 12" "$tmp/nolog.txt" &&
  [ ! -e "$tmp/nolog/seeds.log" ] && grep -q '"steps":[[:space:]]*12' "$tmp/nolog/run.json" &&
  ok "a 2-rank resume without its seed log ends with rank 0's message, the folder as it was" ||
  bad "a 2-rank resume without seeds.log: $(grep distzo "$tmp/nolog.txt" | tail -3)"

# bad layouts are refused with the flag named
mpi 2 "$bin" train "${common[@]}" --pertp 3 --out "$tmp/bad1" > "$tmp/bad1.txt" 2>&1
[ $? -ne 0 ] && grep -q -- "--pertp 3" "$tmp/bad1.txt" && ok "--pertp 3 refused" || bad "--pertp 3 not refused clearly"
mpi 2 "$bin" train "${common[@]}" --dp 3 --out "$tmp/bad2" > "$tmp/bad2.txt" 2>&1
[ $? -ne 0 ] && grep -q -- "must equal the number of ranks" "$tmp/bad2.txt" && ok "--dp 3 on 2 ranks refused" ||
  bad "--dp 3 on 2 ranks not refused clearly"

finish
