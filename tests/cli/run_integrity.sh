#!/usr/bin/env bash
# A run folder's files are checked against each other, and a damaged one is found, said
# and, where the seed log allows, rebuilt (issue 27): every resumed or exported result is
# compared with a clean run of the same settings or with `distzo export` of the run.
# usage: run_integrity.sh DISTZO ASSETS TB_READER (tests/test_tensorboard: prints an event file)
set -u
bin=$1 assets=$2 tb=$3
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
head -21 "$assets/sst2/dev.tsv" > "$tmp/test.tsv"
run=(--checkpoint-every 4 --eval-every 4 --train-examples 32 --dev-examples 8 --batch 4 --threads 1
     --test "$tmp/test.tsv")
train() { "$bin" train "${run[@]}" "$@"; }
snapshot() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort); }
# same_state A B N: every file of checkpoint-N/ and best/ (trainer_state.json's best scores
# included) and run.json the same in both runs
same_state() {
  local d f
  for d in checkpoint-$3 best; do
    [ ! -e "$1/$d" ] && [ ! -e "$2/$d" ] && continue
    [ -d "$1/$d" ] && [ "$(ls "$1/$d")" = "$(ls "$2/$d")" ] || return 1
    for f in "$1/$d"/*; do cmp -s "$f" "$2/$d/${f##*/}" || return 1; done
  done
  cmp -s "$1/run.json" "$2/run.json"
}
"$bin" train "${run[@]}" --steps 12 --out "$tmp/clean" > "$tmp/clean.txt" 2>&1 || bad "the clean run failed"
"$bin" train "${run[@]}" --steps 8 --out "$tmp/clean8" > /dev/null 2>&1 || bad "the clean 8-step run failed"

# 27.2: export checks the seed log's seed against run.json's, as resume does
cp -r "$tmp/clean8" "$tmp/seed"
sed -i -E 's/"seed":([[:space:]]*)0,/"seed":\17,/' "$tmp/seed/run.json"
if out=$("$bin" export --run "$tmp/seed" -o "$tmp/seed_x" 2>&1); then bad "export of a log with another seed than run.json: exit 0"
elif grep -q "seeds.log: run seed 0 in the log, 7 in run.json: the log is not this run's" <<<"$out"; then ok "export refuses a log whose seed is not run.json's"
else bad "export with a mismatched seed: $out"; fi

# the base is part of the run: run.json keeps its table's fingerprint (tensor names and
# shapes); export onto a model of another architecture is refused (before: exit 0 and a
# model of the log replayed onto the wrong tensors); a new run from the run.json as --config
# takes its own base
grep -qE '"model_table":[[:space:]]*"[0-9a-f]{16}"' "$tmp/clean8/run.json" && ok "run.json keeps the base's model_table" ||
  bad "run.json: no model_table"
"$bin" init --preset opt-tiny --layers 2 --seed 1 -o "$tmp/opt2" > /dev/null 2>&1
out=$("$bin" export --run "$tmp/clean8" --base "$tmp/opt2" -o "$tmp/opt_x" 2>&1) && bad "export onto another architecture: exit 0" ||
  { grep -q "opt2: its tensors (names and shapes) are not those of the model the run was trained from" <<<"$out" && [ ! -e "$tmp/opt_x" ] &&
      ok "export --base of another architecture is refused, naming it" || bad "export --base opt: $(tail -1 <<<"$out")"; }
"$bin" train --config "$tmp/clean8/run.json" --model "$tmp/opt2" --steps 2 --threads 1 --out "$tmp/from_cfg" > "$tmp/from_cfg.txt" 2>&1 &&
  ! grep -q "$(grep -o '"model_table":[^,]*' "$tmp/clean8/run.json")" "$tmp/from_cfg/run.json" &&
  ok "a new run from another run's run.json (--config) with another --model keeps its own model_table" ||
  bad "--config run.json --model opt: $(tail -1 "$tmp/from_cfg.txt")"

# 27.2/27.19: a seed from 2^53 on is written to run.json exactly and read back exactly
# (resume compares it with the log's header; a double would be 2^53)
"$bin" train "${run[@]}" --steps 2 --seed 9007199254740993 --out "$tmp/big" > /dev/null 2>&1 || bad "--seed 2^53+1 failed"
grep -qE '"seed":[[:space:]]*9007199254740993,' "$tmp/big/run.json" &&
  "$bin" train --resume --steps 4 --out "$tmp/big" > "$tmp/big.txt" 2>&1 &&
  "$bin" export --run "$tmp/big" -o "$tmp/big_x" > /dev/null 2>&1 &&
  cmp -s "$tmp/big_x/model.safetensors" "$tmp/big/checkpoint-4/model.safetensors" &&
  ok "--seed 2^53+1: exact in run.json, resumed and exported" ||
  bad "--seed 2^53+1: $(grep '"seed"' "$tmp/big/run.json"); $(tail -1 "$tmp/big.txt")"

# 27.4: a resume that fails changes nothing; export refuses a log cut before LATEST
cp -r "$tmp/clean8" "$tmp/nolog" && rm "$tmp/nolog/seeds.log"
snapshot "$tmp/nolog" > "$tmp/nolog.before"
if out=$("$bin" train --resume --out "$tmp/nolog" 2>&1); then bad "resume without seeds.log: exit 0"
else
  snapshot "$tmp/nolog" > "$tmp/nolog.after"
  cmp -s "$tmp/nolog.before" "$tmp/nolog.after" && grep -q "seeds.log is missing, but the run reached step 8" <<<"$out" &&
    ok "resume without seeds.log fails, says why and changes nothing" ||
    bad "resume without seeds.log: $(tail -1 <<<"$out"); $(diff "$tmp/nolog.before" "$tmp/nolog.after" | head -3)"
fi
"$bin" export --run "$tmp/nolog" -o "$tmp/nolog_x" > /dev/null 2>&1 && bad "export of a run without seeds.log: exit 0" ||
  ok "export of a run without seeds.log fails"
cp -r "$tmp/clean8" "$tmp/cut"
truncate -s -32 "$tmp/cut/seeds.log" # two whole 16-byte records
if out=$("$bin" export --run "$tmp/cut" -o "$tmp/cut_x" 2>&1); then bad "export of a log cut before LATEST: exit 0"
elif grep -q "ends after step 6 but LATEST names checkpoint-8" <<<"$out"; then ok "export refuses a log cut before LATEST"
else bad "export of a cut log: $out"; fi
# resume cannot start from a checkpoint past the log's end: the message names what can
grep -q "train --resume-from $tmp/cut:6 --out NEW recomputes the lost steps" <<<"$out" &&
  ok "the refusal names --resume-from RUN:6 (resume refuses a checkpoint past the log)" || bad "cut log's hint: $out"
"$bin" train --resume-from "$tmp/cut:6" --out "$tmp/cut_new" > "$tmp/cut_new.txt" 2>&1 &&
  "$bin" export --run "$tmp/cut_new" -o "$tmp/cut_new_x" > /dev/null 2>&1 &&
  cmp -s "$tmp/cut_new_x/model.safetensors" "$tmp/clean8/checkpoint-8/model.safetensors" &&
  ok "following it recomputes steps 7-8: the export equals the clean run's checkpoint-8" ||
  bad "--resume-from the cut log's end: $(tail -1 "$tmp/cut_new.txt")"
# resume says the same, in the steps a user sees (checkpoint-N, metrics.jsonl), not the log's 0-based records
out=$("$bin" train --resume --out "$tmp/cut" 2>&1) && bad "resume of a log cut before LATEST: exit 0" ||
  { grep -q "seeds.log ends after step 6 but the checkpoint is checkpoint-8: steps 7..8 are missing" <<<"$out" &&
      grep -q -- "--resume-from $tmp/cut:6 --out NEW" <<<"$out" && ok "resume of a cut log names steps 7..8 and --resume-from" ||
      bad "resume of a cut log: $(tail -1 <<<"$out")"; }
# ... also with a torn tail after the cut: the refusal leaves the log as it was (the
# writer's open used to cut the tail first, then refuse)
cp -r "$tmp/cut" "$tmp/cut_torn" && head -c 10 /dev/urandom >> "$tmp/cut_torn/seeds.log"
sum_before=$(sha256sum < "$tmp/cut_torn/seeds.log")
out=$("$bin" train --resume --out "$tmp/cut_torn" 2>&1) && bad "resume of a cut log with a torn tail: exit 0" ||
  { grep -q "steps 7..8 are missing" <<<"$out" && [ "$(sha256sum < "$tmp/cut_torn/seeds.log")" = "$sum_before" ] &&
      ok "a refused resume of a cut log with a torn tail leaves seeds.log byte for byte" ||
      bad "resume of a cut, torn log: $(tail -1 <<<"$out"); log changed: $([ "$(sha256sum < "$tmp/cut_torn/seeds.log")" != "$sum_before" ] && echo yes)"; }
out=$("$bin" export --run "$tmp/cut" -o "$tmp/cut_x" --allow-short-log 2>&1) && grep -q "warning.*ends after step 6" <<<"$out" &&
  ok "--allow-short-log exports the cut log with a warning" || bad "--allow-short-log: $out"

# 27.16: the summary after --resume keeps the score before training (metrics.jsonl's row 0)
cp -r "$tmp/clean8" "$tmp/res"
"$bin" train --resume --steps 12 --out "$tmp/res" > "$tmp/res.txt" 2>&1 || bad "resume --steps 12 failed"
before() { grep '^done:' "$1" | grep -o 'before [0-9.]*'; }
[ -n "$(before "$tmp/clean.txt")" ] && [ "$(before "$tmp/res.txt")" = "$(before "$tmp/clean.txt")" ] &&
  ok "the resumed summary has the score before training: $(before "$tmp/res.txt")" ||
  bad "resumed summary: '$(grep done: "$tmp/res.txt")' vs the clean run's '$(grep done: "$tmp/clean.txt")'"
same_run "$tmp/clean" "$tmp/res" 12 && ok "the resumed run is the clean 12-step run" || bad "resumed 8 -> 12 differs from clean"

# 27.9: a full disk (ENOSPC, the io.c test seam) midway through a checkpoint leaves no
# .tmp-checkpoint-N; one left by a crash is removed at the next start
DISTZO_TEST_FAULT=write:30 "$bin" train "${run[@]}" --steps 12 --out "$tmp/full" > "$tmp/full.txt" 2>&1
rc=$?
grep -q "No space left on device" "$tmp/full.txt" && [ $rc -ne 0 ] || bad "write:30 did not fail on a full disk: $(tail -1 "$tmp/full.txt")"
left=$(cd "$tmp/full" && ls -d .tmp-* 2>/dev/null)
[ -z "$left" ] && ok "a checkpoint that hit a full disk leaves no temporary folder" || bad "after ENOSPC: $left"
mkdir -p "$tmp/full/.tmp-checkpoint-8" "$tmp/full/.tmp-best" "$tmp/full/.tmp-mine"
echo x > "$tmp/full/.tmp-checkpoint-8/model.safetensors"
"$bin" train --resume --out "$tmp/full" > "$tmp/full2.txt" 2>&1 || bad "resume after ENOSPC failed: $(tail -1 "$tmp/full2.txt")"
[ ! -e "$tmp/full/.tmp-checkpoint-8" ] && [ ! -e "$tmp/full/.tmp-best" ] && [ -d "$tmp/full/.tmp-mine" ] &&
  grep -q "removed .*\.tmp-checkpoint-8 (an unfinished write)" "$tmp/full2.txt" &&
  ok "the next start removes unfinished checkpoints (and says so), not the user's .tmp-mine" ||
  bad "after resume: $(cd "$tmp/full" && ls -a | tr '\n' ' ')"
same_run "$tmp/clean" "$tmp/full" 12 && ok "ENOSPC, then resume == the clean run" || bad "ENOSPC then resume differs"
# a kill during an atomic write leaves FILE.tmp.PID (removed at the next start, the user's
# notes.tmp.1 not); a kill between listing a checkpoint and showing its folder leaves it
# listed and absent (skipped; every folder a run shows is listed first, so pruned later)
cp -r "$tmp/full" "$tmp/left"
touch "$tmp/left/CHECKPOINTS.tmp.4242" "$tmp/left/LATEST.tmp.77" "$tmp/left/run.json.tmp.5" "$tmp/left/notes.tmp.1" \
  "$tmp/left/events.out.tfevents.1.host.9.tmp.9"
echo checkpoint-13 >> "$tmp/left/CHECKPOINTS"
"$bin" train --resume --steps 16 --out "$tmp/left" > "$tmp/left.txt" 2>&1 &&
  [ -f "$tmp/left/notes.tmp.1" ] && [ -z "$(cd "$tmp/left" && ls | grep -E '^(CHECKPOINTS|LATEST|run\.json|events\.out\..*)\.tmp\.')" ] &&
  grep -q "removed .*CHECKPOINTS.tmp.4242 (an unfinished write)" "$tmp/left.txt" &&
  [ "$(cat "$tmp/left/CHECKPOINTS")" = "checkpoint-16" ] && [ -d "$tmp/left/checkpoint-16" ] && [ ! -e "$tmp/left/checkpoint-12" ] &&
  ok "a start removes a killed write's FILE.tmp.PID and skips a listed checkpoint that never appeared" ||
  bad "after kills mid-write: $(cd "$tmp/left" && ls | tr '\n' ' '); CHECKPOINTS: $(tr '\n' ' ' < "$tmp/left/CHECKPOINTS")"
# LATEST's checkpoint removed (the folder, or its trainer_state.json): rebuilt from the base
# and the log, as a damaged one is (it stopped the resume); the same bits as the intact run
cp -r "$tmp/left" "$tmp/gone" && rm -rf "$tmp/gone/checkpoint-16"
cp -r "$tmp/gone" "$tmp/gone_x"
"$bin" export --run "$tmp/gone_x" -o "$tmp/gone_export" > "$tmp/gone_x.txt" 2>&1 &&
  cmp -s "$tmp/gone_export/model.safetensors" "$tmp/left/checkpoint-16/model.safetensors" &&
  ok "export of a run whose LATEST checkpoint is gone replays the log (checkpoint-16's weights)" ||
  bad "export with LATEST's checkpoint gone: $(tail -1 "$tmp/gone_x.txt")"
"$bin" train --resume --steps 20 --out "$tmp/left" > /dev/null 2>&1 &&
  "$bin" train --resume --steps 20 --out "$tmp/gone" > "$tmp/gone.txt" 2>&1 &&
  grep -q "checkpoint-16 (LATEST's) is gone or has no trainer_state.json: rebuilding" "$tmp/gone.txt" &&
  same_run "$tmp/left" "$tmp/gone" 20 && ok "LATEST's checkpoint removed: rebuilt from the log, the same run" ||
  bad "LATEST's checkpoint removed: $(grep -E "warn|error" "$tmp/gone.txt")"
# a trainer_state.json whose steps_done is not its folder's step (copied from another
# checkpoint, or edited) is damage too: rebuilt from the log (it was taken without a word)
cp -r "$tmp/left" "$tmp/wrongstate"
sed -i -E 's/"steps_done": 20/"steps_done": 15/' "$tmp/wrongstate/checkpoint-20/trainer_state.json"
"$bin" train --resume --steps 24 --out "$tmp/left" > /dev/null 2>&1 &&
  "$bin" train --resume --steps 24 --out "$tmp/wrongstate" > "$tmp/wrongstate.txt" 2>&1 &&
  grep -q "checkpoint-20/trainer_state.json: steps_done is not 20, the folder's step" "$tmp/wrongstate.txt" &&
  same_run "$tmp/left" "$tmp/wrongstate" 24 && ok "a trainer_state.json of another step: rebuilt from the log, the same run" ||
  bad "steps_done edited: $(grep -E "warn|error" "$tmp/wrongstate.txt")"

# 27.1: a checkpoint whose weights changed after it was written (one byte of bit rot) is
# found by its checksum, said, and the weights rebuilt from the base model and the log
flip_byte() { # FILE OFFSET: that byte xor 0x10
  local b; b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 16)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
cp -r "$tmp/clean8" "$tmp/rot"
grep -q '"weights_checksum": "[0-9a-f]\{16\}"' "$tmp/rot/checkpoint-8/trainer_state.json" &&
  ok "trainer_state.json holds the weights' checksum" || bad "no checksum: $(cat "$tmp/rot/checkpoint-8/trainer_state.json")"
flip_byte "$tmp/rot/checkpoint-8/model.safetensors" $(($(stat -c %s "$tmp/rot/checkpoint-8/model.safetensors") - 1000))
cmp -s "$tmp/rot/checkpoint-8/model.safetensors" "$tmp/clean8/checkpoint-8/model.safetensors" && bad "the byte was not changed"
"$bin" train --resume --steps 12 --out "$tmp/rot" > "$tmp/rot.txt" 2>&1 || bad "resume of a damaged checkpoint failed: $(tail -1 "$tmp/rot.txt")"
grep -q "checkpoint-8/model.safetensors: the weights' checksum is [0-9a-f]*, trainer_state.json says [0-9a-f]*: the checkpoint is damaged" "$tmp/rot.txt" &&
  grep -q "rebuilding the weights of .*checkpoint-8 from the base model" "$tmp/rot.txt" &&
  ok "resume names the damaged checkpoint, both checksums, and rebuilds" || bad "damaged checkpoint: $(grep -i warn "$tmp/rot.txt")"
"$bin" export --run "$tmp/rot" -o "$tmp/rot_x" > /dev/null 2>&1 || bad "export of the rebuilt run failed"
same_run "$tmp/clean" "$tmp/rot" 12 && cmp -s "$tmp/rot_x/model.safetensors" "$tmp/rot/checkpoint-12/model.safetensors" &&
  ok "the rebuilt run is the clean run and its export" || bad "after a damaged checkpoint the run differs from the clean run"
# the best-so-far rebuilt from metrics.jsonl's rows is the clean run's to the bit (scores are
# kept as the float32 metrics.jsonl holds; "0.45" read back is another double)
same_state "$tmp/clean" "$tmp/rot" 12 && ok "rebuilt: checkpoint-12/, best/ and run.json are the clean run's, bit for bit" ||
  bad "rebuilt state differs: $(cat "$tmp/rot/checkpoint-12/trainer_state.json") vs $(cat "$tmp/clean/checkpoint-12/trainer_state.json")"
# the same where the best score was found after step 0 (read back from metrics.jsonl's rows;
# a test score of 217/436 is not "0.4977064" read as a double)
big=(--eval-every 25 --checkpoint-every 25 --dev-examples 40 --train-examples 200 --threads 1)
"$bin" train "${big[@]}" --steps 25 --out "$tmp/rot2" > /dev/null 2>&1 && "$bin" train "${big[@]}" --steps 40 --out "$tmp/clean40" > /dev/null 2>&1 ||
  bad "the runs with --dev-examples 40 failed"
flip_byte "$tmp/rot2/checkpoint-25/model.safetensors" $(($(stat -c %s "$tmp/rot2/checkpoint-25/model.safetensors") - 1000))
"$bin" train --resume --steps 40 --out "$tmp/rot2" > "$tmp/rot2.txt" 2>&1 || bad "resume of rot2 failed: $(tail -1 "$tmp/rot2.txt")"
grep -q '"best_step": 25' "$tmp/clean40/checkpoint-40/trainer_state.json" || bad "clean40's best is not step 25: the case does not test it"
grep -q "rebuilding the weights" "$tmp/rot2.txt" && same_run "$tmp/clean40" "$tmp/rot2" 40 && same_state "$tmp/clean40" "$tmp/rot2" 40 &&
  ok "rebuilt with the best at step 25: checkpoint-40/ (trainer_state.json's best_test), best/, metrics, seeds.log as the clean run's" ||
  bad "rebuilt rot2: $(cat "$tmp/rot2/checkpoint-40/trainer_state.json") vs $(cat "$tmp/clean40/checkpoint-40/trainer_state.json")"
cp -r "$tmp/clean8" "$tmp/old"
sed -i -E 's/, "weights_checksum": "[0-9a-f]+"//' "$tmp/old/checkpoint-8/trainer_state.json"
"$bin" train --resume --steps 12 --out "$tmp/old" > "$tmp/old.txt" 2>&1 && grep -q "no weights_checksum (written by an older distzo)" "$tmp/old.txt" &&
  same_run "$tmp/clean" "$tmp/old" 12 && ok "a checkpoint without a checksum is resumed, with a warning" ||
  bad "checkpoint without a checksum: $(tail -2 "$tmp/old.txt")"
# a trainer_state.json that is no JSON is damage, not an older distzo's: rebuilt from the log
cp -r "$tmp/clean8" "$tmp/badstate" && echo "{" > "$tmp/badstate/checkpoint-8/trainer_state.json"
"$bin" train --resume --steps 12 --out "$tmp/badstate" > "$tmp/badstate.txt" 2>&1 &&
  grep -q "checkpoint-8/trainer_state.json: not a JSON object (the file is damaged)" "$tmp/badstate.txt" &&
  grep -q "rebuilding the weights" "$tmp/badstate.txt" && ! grep -q "older distzo" "$tmp/badstate.txt" && same_run "$tmp/clean" "$tmp/badstate" 12 &&
  ok "a trainer_state.json that is no JSON is named as damaged and the run rebuilt: the clean run" ||
  bad "damaged trainer_state.json: $(grep -E 'warn|error' "$tmp/badstate.txt" | head -3)"
# a value train refuses in run.json (an edited file) is refused naming run.json
cp -r "$tmp/clean8" "$tmp/badlr" && sed -i -E 's/"lr":([[:space:]]*)[^,]*,/"lr":\1-1,/' "$tmp/badlr/run.json"
out=$("$bin" train --resume --steps 12 --out "$tmp/badlr" 2>&1) && bad "run.json with lr -1 resumed" ||
  { grep -q "badlr/run.json: --lr -1: must be finite and >= 0 (a value train refuses: was the file edited?)" <<<"$out" &&
      ok "run.json's lr -1 is refused naming run.json" || bad "run.json lr -1: $(tail -1 <<<"$out")"; }

# 27.7: divergence never costs the last good checkpoint; the stop has its metrics row and
# says how to go on; --resume-from OLD:N starts a new run from step N of OLD's log
"$bin" train "${run[@]}" --steps 40 --lr 30 --schedule linear --warmup 200 --checkpoint-every 5 --keep-checkpoints 2 \
  --max-bad-steps 3 --eval-every 5 --out "$tmp/div" > "$tmp/div.txt" 2>&1 && bad "a diverging run exited 0"
stop=$(grep -o "training stopped at step [0-9]*" "$tmp/div.txt" | grep -o "[0-9]*$")
if [ -z "$stop" ]; then bad "no stop message: $(tail -2 "$tmp/div.txt")"
else
  grep -q "\"step\": $stop, \"loss\": null" "$tmp/div/metrics.jsonl" && ok "the stop step $stop has its metrics row" ||
    bad "no metrics row for the stop step $stop: $(tail -1 "$tmp/div/metrics.jsonl")"
  latest=$(cat "$tmp/div/LATEST"); n=${latest#checkpoint-}
  finite=yes
  for k in $(seq 1 "$n"); do grep -q "\"step\": $k, \"loss\": null" "$tmp/div/metrics.jsonl" && finite=no; done
  [ "$finite" = yes ] && [ -d "$tmp/div/$latest" ] && [ ! -d "$tmp/div/checkpoint-$stop" ] &&
    ok "LATEST ($latest) is from before the first non-finite loss; none was written from diverged weights" ||
    bad "after divergence: LATEST $latest, folder: $(ls "$tmp/div" | tr '\n' ' ')"
  grep -q -- "--resume-from $tmp/div:$n --lr <lower> --out <new>" "$tmp/div.txt" && ok "the stop says how to go on (--resume-from)" ||
    bad "stop message: $(grep error "$tmp/div.txt")"
fi
"$bin" train --resume-from "$tmp/div:5" --lr 1e-4 --schedule constant --steps 12 --out "$tmp/div2" > "$tmp/div2.txt" 2>&1 ||
  bad "--resume-from after the divergence failed: $(tail -1 "$tmp/div2.txt")"
"$bin" export --run "$tmp/div2" -o "$tmp/div2_x" > /dev/null 2>&1 &&
  cmp -s "$tmp/div2_x/model.safetensors" "$tmp/div2/checkpoint-12/model.safetensors" &&
  cmp -s <(head -c 184 "$tmp/div/seeds.log") <(head -c 184 "$tmp/div2/seeds.log") &&
  ok "--resume-from div:5 --lr 1e-4: a new run whose export is its checkpoint-12, its log div's first 5 steps" ||
  bad "--resume-from after divergence: export differs or the log does not start as div's"
# the same settings from a clean run's step 4 give the clean run itself
"$bin" train --resume-from "$tmp/clean8:4" --steps 12 --out "$tmp/branch" > "$tmp/branch.txt" 2>&1 ||
  bad "--resume-from clean8:4 failed: $(tail -1 "$tmp/branch.txt")"
same_run "$tmp/clean" "$tmp/branch" 12 && ok "--resume-from clean8:4 --steps 12 == the clean 12-step run" ||
  bad "--resume-from with unchanged settings differs from the clean run"
out=$("$bin" train --resume-from "$tmp/clean8:4" --seed 3 --out "$tmp/branch2" 2>&1) && bad "--resume-from with another --seed accepted" ||
  { grep -q -- "--seed 3 differs" <<<"$out" && [ ! -e "$tmp/branch2" ] && ok "--resume-from refuses a new --seed, writing nothing" ||
    bad "--resume-from --seed 3: $(tail -1 <<<"$out")"; }

# a run without a dev set (--dev-examples 0) writes only test scores: --resume-from copies
# its rows with them (they were read as rows without an evaluation and dropped)
test_rows() { grep -o '"step": [0-9]*,.*"test_accuracy": [0-9.]*' "$1/metrics.jsonl" | sed -E 's/"(loss|g|lr|seconds)": [^,]*, //g'; }
"$bin" train "${run[@]}" --dev-examples 0 --steps 8 --out "$tmp/nodev" > /dev/null 2>&1 || bad "the run without a dev set failed"
"$bin" train --resume-from "$tmp/nodev:4" --steps 8 --out "$tmp/nodev_b" > "$tmp/nodev_b.txt" 2>&1 ||
  bad "--resume-from nodev:4 failed: $(tail -1 "$tmp/nodev_b.txt")"
[ "$(test_rows "$tmp/nodev" | wc -l)" = 3 ] && [ "$(test_rows "$tmp/nodev")" = "$(test_rows "$tmp/nodev_b")" ] &&
  ok "--resume-from a run without a dev set keeps its test scores (rows 0, 4, 8 as the run's own)" ||
  bad "test scores after --resume-from: $(test_rows "$tmp/nodev_b" | tr '\n' ' ') vs $(test_rows "$tmp/nodev" | tr '\n' ' ')"

# 27.8: metrics.jsonl cut or removed: resume says which rows are gone and restores them from
# metrics.csv where it has them (the same digits: the clean run's rows), else rebuilds them
# from the seed log (step, lr, g; the loss is gone) into metrics.jsonl and its views
steps_lr_g() { sed -E 's/"loss": [^,]*, //; s/, "seconds": [^,}]*//; s/, "(dev|test|best_dev)_accuracy": [^,}]*//g' "$1/metrics.jsonl"; }
cp -r "$tmp/clean8" "$tmp/nom" && rm "$tmp/nom/metrics.jsonl"
"$bin" train --resume --steps 12 --out "$tmp/nom" > "$tmp/nom.txt" 2>&1 || bad "resume without metrics.jsonl failed"
grep -q "metrics.jsonl: the rows of steps 1-8 are gone .*restored from metrics.csv" "$tmp/nom.txt" && same_run "$tmp/clean" "$tmp/nom" 12 &&
  ok "a removed metrics.jsonl: rows 0-8 restored from metrics.csv, said; the run is the clean run" ||
  bad "removed metrics.jsonl: $(grep -i warn "$tmp/nom.txt"); $(diff <(metrics "$tmp/clean") <(metrics "$tmp/nom") | head -3)"
[ -n "$(before "$tmp/clean.txt")" ] && [ "$(before "$tmp/nom.txt")" = "$(before "$tmp/clean.txt")" ] &&
  ok "the summary after the restore keeps the score before training ($(before "$tmp/clean.txt"))" ||
  bad "summary after the restore: '$(before "$tmp/nom.txt")', the clean run's '$(before "$tmp/clean.txt")'"
cp -r "$tmp/clean8" "$tmp/nol" && rm "$tmp/nol/metrics.jsonl" "$tmp/nol/metrics.csv"
"$bin" train --resume --steps 12 --out "$tmp/nol" > "$tmp/nol.txt" 2>&1 || bad "resume without metrics.jsonl and .csv failed"
grep -q "metrics.jsonl: the rows of steps 1-8 are gone .*rebuilt from the seed log" "$tmp/nol.txt" &&
  grep -q "row 0 (the scores before training) is gone" "$tmp/nol.txt" && ok "both metrics files removed: the lost rows are named" ||
  bad "removed metrics.jsonl and .csv: $(grep -i warn "$tmp/nol.txt")"
diff -q <(steps_lr_g "$tmp/clean" | sed 1d) <(steps_lr_g "$tmp/nol") > /dev/null &&
  grep -q '"step": 3, "loss": null, "g": ' "$tmp/nol/metrics.jsonl" &&
  ok "rows 1-12 are back with the clean run's step, lr and g (the lost losses null)" ||
  bad "rebuilt rows differ: $(diff <(steps_lr_g "$tmp/clean" | sed 1d) <(steps_lr_g "$tmp/nol") | head -3)"
cp -r "$tmp/clean8" "$tmp/cutm"
head -c $(($(head -3 "$tmp/cutm/metrics.jsonl" | wc -c) + 20)) "$tmp/clean8/metrics.jsonl" > "$tmp/cutm/metrics.jsonl"
"$bin" train --resume --steps 12 --out "$tmp/cutm" > "$tmp/cutm.txt" 2>&1 || bad "resume with a cut metrics.jsonl failed"
grep -q "the rows of steps 3-8 are gone .*restored from metrics.csv" "$tmp/cutm.txt" && same_run "$tmp/clean" "$tmp/cutm" 12 &&
  ok "a cut metrics.jsonl: rows 3-8 restored from metrics.csv and named; the run is the clean run" ||
  bad "cut metrics.jsonl: $(grep -i warn "$tmp/cutm.txt" | tail -2)"
n=$(grep -c "dropping a torn tail of 20 bytes from line 4" "$tmp/cutm.txt")
[ "$n" = 1 ] && ok "the torn tail is said once" || bad "the torn tail is said $n times: $(grep -i torn "$tmp/cutm.txt")"
# both cut (a crash of the machine): rows 3-8 rebuilt from the log into metrics.jsonl and
# its views (metrics.csv's step, g, lr as the clean run's; this start's TensorBoard events)
cp -r "$tmp/clean8" "$tmp/cutv"
head -3 "$tmp/clean8/metrics.jsonl" > "$tmp/cutv/metrics.jsonl" && head -4 "$tmp/clean8/metrics.csv" > "$tmp/cutv/metrics.csv"
"$bin" train --resume --steps 12 --out "$tmp/cutv" > "$tmp/cutv.txt" 2>&1 || bad "resume with cut metrics files failed"
grep -q "the rows of steps 3-8 are gone .*rebuilt from the seed log .* in metrics.jsonl, metrics.csv and the TensorBoard events" "$tmp/cutv.txt" &&
  diff -q <(steps_lr_g "$tmp/clean") <(steps_lr_g "$tmp/cutv") > /dev/null &&
  diff -q <(cut -d, -f1,3,4 "$tmp/clean/metrics.csv") <(cut -d, -f1,3,4 "$tmp/cutv/metrics.csv") > /dev/null &&
  ok "both cut: rows 3-8 rebuilt in metrics.jsonl and metrics.csv (step, g, lr as the clean run's), and said so" ||
  bad "both cut: $(grep -i warn "$tmp/cutv.txt" | tail -1); $(diff <(cut -d, -f1,3,4 "$tmp/clean/metrics.csv") <(cut -d, -f1,3,4 "$tmp/cutv/metrics.csv") | head -4)"
ev=$(cd "$tmp/cutv" && for f in events.out.tfevents.*; do [ -e "$tmp/clean8/$f" ] || echo "$f"; done)
"$tb" "$tmp/cutv/$ev" > "$tmp/cutv_ev.txt" 2>&1 &&
  [ "$(awk '$3 == "train/g" { print $2 }' "$tmp/cutv_ev.txt" | tr '\n' ' ')" = "3 4 5 6 7 8 9 10 11 12 " ] &&
  ok "the resume's event file has train/g of the rebuilt steps 3-8, then 9-12" ||
  bad "the resume's event file $ev: $(awk '$3 == "train/g"' "$tmp/cutv_ev.txt" | head -3)"

finish
