#!/usr/bin/env bash
# Crash safety of `distzo train`: runs are killed with SIGKILL at random moments (early,
# mid-step, while a checkpoint or best/ is being written, before the first checkpoint,
# again after resuming) and continued with --resume; the result must be bitwise the
# uninterrupted run's: final weights (sha256), metrics.jsonl (minus "seconds"), best/,
# and a seed log with exactly one record per step. Also: export (log replay onto the base
# model) gives the trained weights, also after a killed export; fused = --no-fuse,
# --threads 1 = 2 (also with DISTZO_ISA=avx2 on an AVX-512 machine); bf16 masters resume
# exactly too.
# usage: crash_resume.sh DISTZO_BINARY ASSETS_DIR [SEED] [ram|disk]
# The kill delays come from $RANDOM seeded with SEED (default below, or $CRASH_SEED);
# every run prints it, so `crash_resume.sh BIN ASSETS SEED` replays a failure's choices.
# With disk, the killed runs train from --store disk:RUN.store (every other one with the
# global block streamed too) and must still equal the uninterrupted run in memory: the
# kills then land in block reads, updates and write-backs of the store's I/O thread and in
# the store-to-checkpoint copy. The export and variant checks run only with ram.
set -u
bin=$1 assets=$2
seed=${3:-${CRASH_SEED:-7919}}
store=${4:-ram}
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin sst2/dev.tsv
RANDOM=$seed
echo "# seed $seed, store $store (rerun with: $0 $bin $assets $seed $store)"
steps=120 ck=30

# Small enough for a few seconds a run; lr and dev size chosen so that best/ is written
# (step 40) and never again, which makes a forgotten best-so-far visible in metrics.
test_set "$assets" 64
args=(--steps $steps --eval-every 40 --checkpoint-every $ck --lr 3e-4 --batch 4 --train-examples 64
      --dev-examples 32 --test "$tmp/test.tsv" --threads 1)

mkfifo "$tmp/nap"
exec {nap_fd}<>"$tmp/nap"
nap() { read -r -t "$1" -u "$nap_fd" _ || :; } # sleep without forking

now_ms() { local t=${EPOCHREALTIME/./}; now=$((10#$t / 1000)); } # sets $now, no subshell
sha() { if [ -f "$1" ]; then sha256sum "$1" | cut -c1-64; else echo "missing:$1"; fi; }
weights() { sha "$1/checkpoint-$steps/model.safetensors"; }
# best/ as a comparable string: its trainer state and weights, or "none"
best() { if [ -d "$1/best" ]; then cat "$1/best/trainer_state.json"; sha "$1/best/model.safetensors"; else echo none; fi; }
rand() { echo $(($1 + RANDOM % ($2 - $1 + 1))); } # integer in [lo, hi]
# A random share of the reference run's time, drawn as per-mille so that a seed picks the
# same moments (relative to the run's speed) on any machine: sets $d (ms) and $dtxt.
rand_share() { local pm; pm=$(rand "$1" "$2"); d=$((tref * pm / 1000)); dtxt="${d} ms (${pm}/1000 of a run)"; }
log_records() { local s; s=$(stat -c %s "$1/seeds.log" 2>/dev/null || echo 104); echo $(((s - 104) / 16)); }

# start RUN [train options...]: training in the background, pid in $pid
nstart=0
start() {
  local run=$1; shift
  local extra=()
  if [ "$store" = disk ]; then # (a resume takes its store from run.json)
    nstart=$((nstart + 1)); extra=(--store "disk:$run.store")
    [ $((nstart % 2)) = 0 ] && extra+=(--stream-globals)
  fi
  "$bin" train "${args[@]}" --out "$run" "${extra[@]}" "$@" >>"$run.log" 2>&1 &
  pid=$!
}
resume_bg() { local run=$1; shift; start "$run" --resume "$@"; }
alive() { kill -0 "$pid" 2>/dev/null; }
# kill_now: SIGKILL $pid; sets $how to "killed" or "finished first"
kill_now() {
  if alive; then how=killed; else how="finished first"; fi
  kill -9 "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null
}
# until_or_exit CMD...: poll CMD until it succeeds or $pid exits ($poll s between tries)
poll=0.001
until_or_exit() { while ! "$@"; do alive || return 1; nap "$poll"; done; }
has_log() { [ -e "$1/seeds.log" ]; }
has_records() { [ "$(log_records "$1")" -ge "$2" ]; } # forks: poll it less often
kill_after_ms() { # delay counted from now
  now_ms; local end=$((now + $1))
  while [ "$now" -lt "$end" ] && alive; do nap 0.002; now_ms; done
  kill_now
}

# After a kill the folder must still be resumable: LATEST names a complete checkpoint.
state_usable() {
  local run=$1
  [ -f "$run/LATEST" ] || return 0
  local c; c=$(<"$run/LATEST")
  [ -f "$run/$c/trainer_state.json" ] && "$bin" info "$run/$c" >/dev/null 2>&1
}

# check_run RUN NAME REF: resume to the end, compare everything with REF.
check_run() {
  local run=$1 name=$2 ref=$3
  if ! state_usable "$run"; then bad "$name: after the kill, LATEST ($(cat "$run/LATEST")) is not a loadable checkpoint"; return; fi
  if ! "$bin" train "${args[@]}" --out "$run" --resume >>"$run.log" 2>&1; then
    bad "$name: resume failed: $(grep -m1 error "$run.log")"; return
  fi
  local why=()
  [ "$(weights "$run")" = "$(weights "$ref")" ] || why+=("final weights differ ($(weights "$run"))")
  [ "$(cat "$run/LATEST" 2>/dev/null)" = "checkpoint-$steps" ] || why+=("LATEST is '$(cat "$run/LATEST" 2>/dev/null)'")
  if ! diff <(metrics "$ref") <(metrics "$run") >"$run.mdiff"; then
    why+=("metrics.jsonl differs: $(grep -c '^[<>]' "$run.mdiff") lines, first: $(grep -m1 '^[<>]' "$run.mdiff")")
  fi
  local size; size=$(stat -c %s "$run/seeds.log")
  [ "$size" -eq $((104 + 16 * steps)) ] || why+=("seeds.log is $size bytes, want $((104 + 16 * steps))")
  [ "$(best "$run")" = "$(best "$ref")" ] || why+=("best/ differs: $(best "$run" | head -1) vs $(best "$ref" | head -1)")
  if [ ${#why[@]} -eq 0 ]; then ok "$name"; else bad "$name: $(IFS=';'; echo "${why[*]}")"; fi
}

# ---- the reference ------------------------------------------------------------------
now_ms; t0=$now
if ! "$bin" train "${args[@]}" --out "$tmp/ref" >"$tmp/ref.log" 2>&1; then
  bad "reference run failed: $(tail -1 "$tmp/ref.log")"
  finish; exit 1
fi
now_ms; tref=$((now - t0))
echo "# reference: $tref ms, weights $(weights "$tmp/ref"), best/: $(best "$tmp/ref" | head -1)"

# ---- killed runs, resumed ------------------------------------------------------------
# Each case fixes where it kills; the exact moment is random. Delays count from the seed
# log's creation (the window before it has its own case below).
crash_case() {
  local i=$1 kind=$2 second=$3 run="$tmp/crash$1" what
  start "$run"
  until_or_exit has_log "$run"
  case $kind in
    time) rand_share 0 1000; kill_after_ms "$d"; what="after $dtxt" ;;
    ckpt) local n=$4
          until_or_exit eval '[ -e "$run/.tmp-checkpoint-$n" ] || [ -e "$run/checkpoint-$n" ]'
          local seen=".tmp-checkpoint-$n"; [ -e "$run/.tmp-checkpoint-$n" ] || seen="checkpoint-$n (no .tmp seen)"
          kill_now; what="writing checkpoint-$n ($seen)" ;;
    best) until_or_exit eval '[ -e "$run/.tmp-best" ] || [ -e "$run/best" ]'
          local seen=".tmp-best"; [ -e "$run/.tmp-best" ] || seen="best (no .tmp seen)"
          kill_now; what="writing best/ ($seen)" ;;
    step) local k; k=$(rand 1 $((steps - 1))); poll=0.005 until_or_exit has_records "$run" "$k"; kill_now
          what="at $k logged steps" ;;
  esac
  what="$what, $how, $(log_records "$run") steps logged"
  if [ "$second" = 1 ]; then # killed again while resuming
    rand_share 0 500
    resume_bg "$run"; kill_after_ms "$d"
    what="$what; resume killed after $dtxt ($how, $(log_records "$run") logged)"
  fi
  check_run "$run" "crash $i ($kind: $what)" "$tmp/ref"
}
crash_case 1 time 0
crash_case 2 time 1
crash_case 3 ckpt 0 $((ck * $(rand 1 $((steps / ck - 1)))))
crash_case 4 ckpt 0 $steps  # the final checkpoint
crash_case 5 best 1
crash_case 6 step 1

# Killed before the first checkpoint: resume starts from the base model plus the log.
run="$tmp/early"; k=$(rand 1 $((ck - 1)))
start "$run"; poll=0.005 until_or_exit has_records "$run" "$k"; kill_now
if [ -e "$run/LATEST" ]; then
  bad "before the first checkpoint: LATEST exists after $(log_records "$run") steps"
else
  check_run "$run" "before the first checkpoint (killed at $(log_records "$run") logged steps, $how)" "$tmp/ref"
  grep -q "checkpoint after 0 steps" "$run.log" && ok "  ... and it resumed from the base model" \
    || bad "before the first checkpoint: no 'checkpoint after 0 steps' in the log"
fi

# Killed after run.json is written but before the seed log exists.
run="$tmp/nolog"
start "$run"; until_or_exit eval '[ -e "$run/run.json" ]'; kill_now
if [ -e "$run/seeds.log" ]; then # the kill came late: make the window's state by hand
  cp "$run/run.json" "$tmp/nolog.json" && rm -rf "$run" "$run.store" && mkdir "$run" &&
    mv "$tmp/nolog.json" "$run/run.json"
  check_run "$run" "run.json without seeds.log (as a kill in that window leaves it)" "$tmp/ref"
else
  check_run "$run" "killed before seeds.log exists" "$tmp/ref"
fi

if [ "$store" = ram ]; then
# ---- export: replaying the log onto the base model -------------------------------------
export_check() { # RUN NAME
  if ! "$bin" export --run "$1" -o "$tmp/exp" --threads 1 >"$tmp/exp.log" 2>&1; then
    bad "export of $2 failed: $(tail -1 "$tmp/exp.log")"
  elif [ "$(sha "$tmp/exp/model.safetensors")" = "$(weights "$tmp/ref")" ]; then ok "export of $2 = trained weights"
  else bad "export of $2: $(sha "$tmp/exp/model.safetensors") != $(weights "$tmp/ref")"; fi
}
export_check "$tmp/ref" "the reference"
export_check "$tmp/crash2" "a resumed run"

# SIGKILL during export (while replaying, and once its output folder appears): the run
# folder is untouched, and exporting again into the half-written folder works.
folder() { (cd "$1" && sha256sum seeds.log run.json LATEST "checkpoint-$steps/model.safetensors"); }
before=$(folder "$tmp/ref")
for when in replay writing; do
  rm -rf "$tmp/exp"
  "$bin" export --run "$tmp/ref" -o "$tmp/exp" --threads 1 >/dev/null 2>&1 &
  pid=$!
  if [ $when = replay ]; then d=$(rand 0 60); kill_after_ms "$d"; what="after $d ms"
  else until_or_exit eval '[ -e "$tmp/exp" ]'; kill_now; what="once $tmp/exp appeared"; fi
  [ "$before" = "$(folder "$tmp/ref")" ] && ok "export killed $what ($how): the run folder is unchanged" \
    || bad "export killed $what ($how) changed the run folder"
  export_check "$tmp/ref" "the reference after a killed export"
done

# ---- the same weights by other routes -------------------------------------------------
nvariant=0
variant() { # NAME REF OPTIONS...
  nvariant=$((nvariant + 1))
  local name=$1 ref=$2 run="$tmp/variant$nvariant"; shift 2
  if ! "$bin" train "${args[@]}" --out "$run" "$@" >"$run.log" 2>&1; then bad "$name: run failed"; return; fi
  [ "$(weights "$run")" = "$(weights "$ref")" ] && ok "$name" || bad "$name: $(weights "$run") != $(weights "$ref")"
}
variant "--no-fuse = fused" "$tmp/ref" --no-fuse
variant "--threads 2 = --threads 1" "$tmp/ref" --threads 2
# ... and on the AVX2 kernel path, where it runs and is not already the default (the other
# levels: tests/cli/kernel_paths.sh)
best_isa=$("$bin" info --json "$assets/stories260K/stories260K.bin" 2>/dev/null | sed -nE 's/.*"isa": "([a-z0-9]+)".*/\1/p')
if [ "$best_isa" = avx512 ]; then
  export DISTZO_ISA=avx2
  variant "--threads 2 under DISTZO_ISA=avx2 = --threads 1 ($best_isa)" "$tmp/ref" --threads 2
  unset DISTZO_ISA
fi

fi # ram only

# bf16 masters (stochastic rounding): a killed and resumed run equals its own uninterrupted one.
if "$bin" train "${args[@]}" --master-dtype bf16 --out "$tmp/bf16" >"$tmp/bf16.log" 2>&1; then
  run="$tmp/bf16crash"; k=$(rand $((ck + 1)) $((steps - 1))) # past a checkpoint: load it and replay
  start "$run" --master-dtype bf16; poll=0.005 until_or_exit has_records "$run" "$k"; kill_now
  check_run "$run" "bf16 masters killed at $(log_records "$run") logged steps ($how)" "$tmp/bf16"
  [ "$(weights "$tmp/bf16")" != "$(weights "$tmp/ref")" ] && ok "bf16 weights differ from f32 ones (the option took)" \
    || bad "bf16 run gave the f32 weights"
else
  bad "bf16 reference run failed: $(tail -1 "$tmp/bf16.log")"
fi

finish "seed $seed, store $store"
