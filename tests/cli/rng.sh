#!/usr/bin/env bash
# --rng v2 (docs/ZO_RNG.md section 10): a run with ZO_RNG v2 keeps the seed-log invariant of
# v1's runs (resume after a stop and after SIGKILL, export, thread counts, bf16 masters give
# bitwise the uninterrupted run), differs from v1's run, and records the version in run.json
# and the seed log header; a v1 run's run.json has no "rng" and its log header is v1's; a
# resume with the other version, or a seed log of the other version, is refused naming it;
# export refuses a log whose version or distribution is not run.json's.
# usage: rng.sh DISTZO ASSETS
set -u
bin=$1 assets=$2
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/train.tsv sst2/dev.tsv
test_set "$assets" 32
base=(--steps 12 --eval-every 6 --checkpoint-every 6 --train-examples 48 --dev-examples 16 --batch 8
      --lr 1e-3 --weight-decay 0.01 --test "$tmp/test.tsv")
run() { "$bin" train "${base[@]}" --rng v2 "$@" > /dev/null 2>&1; }
check() { if same_run "$2" "$3" 12; then ok "v2: $1"; else bad "v2: $1"; fi; }
# the u32 at byte 24 of the seed log header: distribution | (version - 1) << 16
dist_word() { od -An -tu4 -j24 -N4 "$1/seeds.log" | tr -d ' '; }

run --threads 2 --out "$tmp/ref" || bad "v2: the reference run failed"
"$bin" train "${base[@]}" --threads 2 --out "$tmp/v1" > /dev/null 2>&1 || bad "v1: the run failed"
cmp -s "$tmp/ref/checkpoint-12/model.safetensors" "$tmp/v1/checkpoint-12/model.safetensors" &&
  bad "v2: the weights are v1's" || ok "v2: the weights differ from v1's"
grep -qE '"rng":[[:space:]]*"v2"' "$tmp/ref/run.json" && ok "v2: run.json records \"rng\": \"v2\"" ||
  bad "v2: run.json has no rng v2"
grep -q '"rng"' "$tmp/v1/run.json" && bad "v1: run.json has an rng field" || ok "v1: run.json has no rng field (as before)"
[ "$(dist_word "$tmp/ref")" = $((65536 + 1)) ] && ok "v2: the seed log header says v2, Gaussian" ||
  bad "v2: seed log header distribution word $(dist_word "$tmp/ref")"
[ "$(dist_word "$tmp/v1")" = 1 ] && ok "v1: the seed log header is v1's" || bad "v1: header word $(dist_word "$tmp/v1")"

run --threads 1 --steps 6 --out "$tmp/stop" && "$bin" train --resume --steps 12 --threads 2 --out "$tmp/stop" \
  > /dev/null 2>&1 || bad "v2: resume after a stop failed"
check "stopped at step 6, resumed == uninterrupted" "$tmp/ref" "$tmp/stop"
(DISTZO_TEST_KILL=0:9 run --threads 1 --out "$tmp/kill") 2> /dev/null
"$bin" train --resume --threads 1 --out "$tmp/kill" > /dev/null 2>&1 || bad "v2: resume after a kill failed"
check "killed after step 9, resumed (replays 6..9) == uninterrupted" "$tmp/ref" "$tmp/kill"
"$bin" train --resume --rng v1 --out "$tmp/kill" > "$tmp/other.txt" 2>&1 && bad "v2: resume with --rng v1 was accepted" ||
  { grep -q -- "--rng" "$tmp/other.txt" && ok "v2: resume with --rng v1 is refused naming --rng" ||
    bad "v2: refusal does not name --rng: $(tail -1 "$tmp/other.txt")"; }
# a v2 seed log in a v1 run folder: the log's header refuses it
"$bin" train "${base[@]}" --steps 6 --threads 2 --out "$tmp/mix" > /dev/null 2>&1 || bad "v1: the 6-step run failed"
cp "$tmp/stop/seeds.log" "$tmp/mix/seeds.log" 2> /dev/null
"$bin" train --resume --steps 12 --out "$tmp/mix" > "$tmp/mix.txt" 2>&1 && bad "v1: resume on a v2 seed log was accepted" ||
  { grep -q "rng v2.*rng v1\|never replayed" "$tmp/mix.txt" && ok "v1: a v2 seed log is refused, saying so" ||
    bad "v1: refusal of a v2 log: $(tail -1 "$tmp/mix.txt")"; }

"$bin" export --run "$tmp/ref" -o "$tmp/exported" > /dev/null 2>&1 || bad "v2: export failed"
cmp -s "$tmp/exported/model.safetensors" "$tmp/ref/checkpoint-12/model.safetensors" &&
  ok "v2: export (12 steps replayed) == the trained weights" || bad "v2: export differs from the trained weights"
# export replays with run.json's settings: a log of another version or distribution is
# refused, never replayed into other weights (the export's folder is not written)
cp -r "$tmp/ref" "$tmp/as_v1" && sed -i '/"rng"/d' "$tmp/as_v1/run.json"
"$bin" export --run "$tmp/as_v1" -o "$tmp/x_v1" > "$tmp/x.txt" 2>&1 && bad "export of a v2 log as a v1 run was accepted" ||
  { grep -q "seeds.log: the log was written with --rng v2, this run uses --rng v1" "$tmp/x.txt" && [ ! -e "$tmp/x_v1" ] &&
    ok "export: a v2 log under a v1 run.json is refused, naming the log and --rng" || bad "export, v2 log as v1: $(tail -1 "$tmp/x.txt")"; }
cp -r "$tmp/ref" "$tmp/as_rad" && sed -i 's/"rademacher":[[:space:]]*"gaussian"/"rademacher": "rademacher"/' "$tmp/as_rad/run.json"
"$bin" export --run "$tmp/as_rad" -o "$tmp/x_rad" > "$tmp/x.txt" 2>&1 && bad "export of a Gaussian log as a Rademacher run was accepted" ||
  { grep -q "seeds.log: the log was written with --perturbation gaussian, run.json's \"rademacher\" says rademacher" "$tmp/x.txt" &&
    ok "export: a Gaussian log under a Rademacher run.json is refused, naming both" || bad "export, distribution: $(tail -1 "$tmp/x.txt")"; }
"$bin" train --resume --steps 13 --out "$tmp/as_rad" > "$tmp/x.txt" 2>&1 && bad "resume of a Gaussian log as Rademacher was accepted" ||
  { grep -q "written with --perturbation gaussian" "$tmp/x.txt" && ok "resume: the same refusal, in words" ||
    bad "resume, distribution: $(tail -1 "$tmp/x.txt")"; }
run --threads 1 --no-fuse --out "$tmp/unfused" || bad "v2: unfused run failed"
check "unfused, 1 thread == fused, 2 threads" "$tmp/ref" "$tmp/unfused"
run --threads 2 --master-dtype bf16 --out "$tmp/bf16" || bad "v2: bf16 run failed"
run --threads 1 --master-dtype bf16 --store "disk:$tmp/b.store" --out "$tmp/bf16-disk" || bad "v2: bf16 disk run failed"
check "bf16 masters: disk store, 1 thread == ram, 2 threads" "$tmp/bf16" "$tmp/bf16-disk"
run --threads 2 --perturbation rademacher --out "$tmp/rad" || bad "v2: rademacher run failed"
[ "$(dist_word "$tmp/rad")" = 65536 ] && ok "v2: a Rademacher run's header says v2, Rademacher" ||
  bad "v2: rademacher header word $(dist_word "$tmp/rad")"
"$bin" train "${base[@]}" --rng v3 --out "$tmp/v3" > "$tmp/v3.txt" 2>&1 && bad "--rng v3 was accepted" ||
  { grep -q -- "--rng" "$tmp/v3.txt" && ok "--rng v3 is refused naming the option" || bad "--rng v3: $(tail -1 "$tmp/v3.txt")"; }
finish
