#!/bin/sh
# tools/long_functions.sh [-n LIMIT] [PATH...]: the C functions longer than LIMIT lines
# (default 80: the project's limit), counted from the line its signature starts on to its
# closing brace at column 0, both included. PATH: files or folders (default src). Prints
# FILE:LINE: NAME LINES lines, longest first; exits 1 when it found one, else 0.
# Assumes the project's layout (clang-format): a definition starts at column 0 and ends
# with a '}' at column 0; prototypes (ending in ';') are skipped.
limit=80
if [ "$1" = "-n" ]; then limit=$2; shift 2; fi
[ $# -gt 0 ] || set -- src
find "$@" -name '*.[ch]' | sort | xargs awk -v limit="$limit" '
FNR == 1 { state = 0 }
state == 0 && /^[A-Za-z_]/ && index($0, "(") && (!index($0, "=") || index($0, "(") < index($0, "=")) {
    state = 1; start = FNR
    name = substr($0, 1, index($0, "(") - 1); sub(/.*[ *]/, "", name)
}
state == 1 { # the signature, up to its "{" (a definition) or ";" (a prototype)
    s = $0; sub(/[ \t]*\/\*.*\*\/[ \t]*$/, "", s); sub(/[ \t]*\/\/.*$/, "", s)
    if (s ~ /\{[ \t]*$/) state = 2
    else if (s ~ /;[ \t]*$/) state = 0
    next
}
state == 2 && /^}/ {
    n = FNR - start + 1
    if (n > limit) printf "%s:%d: %s %d\n", FILENAME, start, name, n
    state = 0
}' | sort -t' ' -k3,3nr | awk '{ print } END { exit NR > 0 }'
