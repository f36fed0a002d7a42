#!/usr/bin/env bash
# cmake/check_layers.sh on small made-up trees: a tree that obeys its graph passes, and each
# kind of violation is reported (the check on the real tree is the test `layering`).
# Usage: cmake/check_layers_test.sh REPO_ROOT
set -u
check=$1/cmake/check_layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
die() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# A clean tree: low <- mid <- cli, one public header owned by low.
make_tree() {
    rm -rf "$tmp/t" && mkdir -p "$tmp/t/cmake" "$tmp/t/src/low" "$tmp/t/src/mid" "$tmp/t/src/cli" "$tmp/t/include/distzo"
    cat >"$tmp/t/cmake/layers.txt" <<'EOF'
layer low          # comment
layer mid low
layer cli mid
api distzo/low.h low
EOF
    printf '#include "distzo/low.h"\n' >"$tmp/t/src/low/low.c"
    printf '#include <stdio.h>\n' >"$tmp/t/include/distzo/low.h"
    printf '#include "low/a.h"\n' >"$tmp/t/src/low/b.h"
    printf '/* leaf */\n' >"$tmp/t/src/low/a.h"
    printf '#include "low/b.h"\n#include "mid/m.h"\n' >"$tmp/t/src/mid/m.c"
    printf '#include "distzo/low.h"\n' >"$tmp/t/src/mid/m.h"
    printf '#include "distzo/low.h"\n#include "cli/c.h"\n' >"$tmp/t/src/cli/main.c"
    printf '/* cli */\n' >"$tmp/t/src/cli/c.h"
}

# expect_fail WHAT PATTERN: the check fails and says PATTERN.
expect_fail() {
    local out
    out=$(bash "$check" "$tmp/t" 2>&1) && { die "$1: the check passed"; return; }
    grep -qF -- "$2" <<<"$out" || die "$1: no '$2' in: $out"
}

make_tree
bash "$check" "$tmp/t" >/dev/null 2>&1 || die "clean tree: $(bash "$check" "$tmp/t" 2>&1)"

make_tree
printf '#include "mid/m.h"\n' >>"$tmp/t/src/low/low.c"
expect_fail "upward include" 'src/low/low.c: #include "mid/m.h": low may not use mid'
printf 'src/low/low.c mid/m.h\n' >"$tmp/t/cmake/known_violations.txt"
bash "$check" "$tmp/t" >/dev/null 2>&1 || die "listed upward include: $(bash "$check" "$tmp/t" 2>&1)"

make_tree
printf '#include "low/b.h"\n' >"$tmp/t/src/low/a.h"
expect_fail "file cycle" 'include cycle: src/low/a.h -> src/low/b.h -> src/low/a.h'

make_tree
printf '#include "low/b.h"\n' >>"$tmp/t/src/cli/main.c"
expect_fail "CLI internal header" 'src/cli/main.c: #include "low/b.h": the CLI uses only the public API'
printf 'src/cli/main.c low/b.h\n' >"$tmp/t/cmake/known_violations.txt"
bash "$check" "$tmp/t" >/dev/null 2>&1 || die "listed CLI violation: $(bash "$check" "$tmp/t" 2>&1)"
printf 'src/cli/main.c low/a.h\n' >>"$tmp/t/cmake/known_violations.txt"
expect_fail "stale known violation" "'src/cli/main.c low/a.h' no longer occurs"

make_tree
mkdir -p "$tmp/t/src/extra"
printf '#include "low/a.h"\n' >"$tmp/t/src/extra/x.c"
expect_fail "folder without a layer line" "src/extra has no 'layer extra ...' line"

make_tree
printf 'layer top nowhere\n' >>"$tmp/t/cmake/layers.txt"
expect_fail "unknown dependency" 'layer top uses nowhere, which is not listed above it'

make_tree
printf '/* x */\n' >"$tmp/t/include/distzo/new.h"
expect_fail "public header without owner" "include/distzo/new.h has no 'api distzo/new.h FOLDER' line"

make_tree
printf '#include "low/a.h"\n' >>"$tmp/t/include/distzo/low.h"
expect_fail "public header including an internal one" 'a public header includes only public headers'

make_tree
printf '#include "a.h"\n' >>"$tmp/t/src/low/low.c"
expect_fail "bare include" 'name headers as "folder/file.h"'
make_tree
printf '#include "low/none.h"\n' >>"$tmp/t/src/low/low.c"
expect_fail "missing file" 'no such file (src/low/none.h)'

make_tree
mkdir -p "$tmp/t/docs"
printf 'text\n\n    layer low\n    layer mid   low\n    layer cli mid\n' >"$tmp/t/docs/ARCHITECTURE.md"
bash "$check" "$tmp/t" >/dev/null 2>&1 || die "documented graph: $(bash "$check" "$tmp/t" 2>&1)"
printf '    layer extra low\n' >>"$tmp/t/docs/ARCHITECTURE.md"
expect_fail "documented graph differs" "docs/ARCHITECTURE.md: its 'layer' lines differ"

if ((failures)); then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "check_layers.sh: clean tree passes, every violation kind reported"
