#!/usr/bin/env bash
# lib.sh's verdicts, each from a child bash that sources it as the test scripts do: a
# script that ran no check fails (nothing checked is not a pass), one failure fails,
# checks left out (left_out, a missing asset opted out) give 77 (CTest: skipped), and only
# a script whose checks all ran and passed exits 0.
# usage: lib_selftest.sh
set -u
lib="$(cd "$(dirname "$0")" && pwd)/lib.sh"
. "$lib"

# status BODY: the exit status of a script that sources lib.sh, runs BODY, then finish
status() { bash -c ". '$lib'; $1; finish" > "$tmp/out.txt" 2>&1; echo $?; }
expect() { # WANT BODY NAME
  local got; got=$(status "$2")
  if [ "$got" = "$1" ]; then ok "$3: exit $got"; else bad "$3: exit $got, wanted $1: $(tail -2 "$tmp/out.txt")"; fi
}

expect 1 ":" "no check ran"
expect 0 "ok one" "one check passed"
expect 1 "ok one; bad two" "a check failed"
expect 77 "left_out 'a tool'" "every check left out"
expect 77 "ok one; left_out 'a tool'" "a check left out"
expect 1 "bad one; left_out 'a tool'" "a failure with a check left out"
expect 77 "DZ_REQUIRE_ASSETS=0 have_assets '$tmp' missing || :; ok one" "an asset missing, opted out"
expect 1 "have_assets '$tmp' missing; ok one" "an asset missing, required"
grep -q "FAIL: asset $tmp/missing not found" "$tmp/out.txt" && ok "a required asset missing is named" ||
  bad "a required asset missing: $(cat "$tmp/out.txt")"
finish
