#!/usr/bin/env bash
# tools/check_arch_doc.sh [REPO_ROOT] [DOC]: docs/ARCHITECTURE.md against the tree. Fails
# (exit 1, one line per problem) when
#  - a path the document names under src/, include/distzo/, cmake/, tests/, tools/, bench/,
#    fuzz/, python/ or docs/ does not exist;
#  - a file of src/ is missing from its folder's table in "The map of rooms" (a section
#    "### src/FOLDER ..."), or that table names a file the folder does not have.
# In a table row, "`name.c`, `.h`" names name.c and name.h. Run as the CTest test
# `arch_doc`. `tools/check_arch_doc.sh --selftest [REPO_ROOT]` (test `arch_doc_selftest`)
# damages a copy of the document four ways and fails unless each damage is reported.
set -u
if [[ ${1:-} == --selftest ]]; then
    root=${2:-.}
    self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    tmp=$(mktemp -d) || exit 2
    trap 'rm -rf "$tmp"' EXIT
    sed -e 's|src/pipeline/pending\.c|src/pipeline/no_such_file.c|' -e '/^| `rope_table\.c`/d' \
        -e 's|`seedlog\.c`, `\.h`|`seedlog.c`|' -e 's|`gemm\.c`, `gemm\.h`|`gemm.c`, `gemm.h`, `no_such_gemm.c`|' \
        "$root/docs/ARCHITECTURE.md" > "$tmp/bad.md"
    out=$(bash "$self" "$root" "$tmp/bad.md" 2>&1)
    rc=$?
    bad=0
    [[ $rc == 1 ]] || { echo "selftest: exit $rc on a damaged document, not 1" >&2; bad=1; }
    for want in 'names src/pipeline/no_such_file.c, which does not exist' \
                'its map of src/backend does not name rope_table.c' \
                'its map of src/run does not name seedlog.h' \
                'its map names src/backend/no_such_gemm.c, which does not exist'; do
        [[ $out == *"$want"* ]] || { echo "selftest: not reported: $want" >&2; bad=1; }
    done
    ((bad)) && { printf '%s\n' "$out" >&2; exit 1; }
    echo "selftest: each of the 4 damages reported"
    exit 0
fi
root=${1:-.}
doc=${2:-$root/docs/ARCHITECTURE.md}
cd "$root" || exit 2
[[ -f $doc ]] || { echo "arch_doc: $doc: no such file" >&2; exit 2; }
errors=0
fail() { echo "arch_doc: $doc: $*" >&2; errors=$((errors + 1)); }

# 1. Every path named exists (a trailing '/' names a folder; sentence punctuation dropped).
top='(src|include/distzo|cmake|tests|tools|bench|fuzz|python|docs)'
while IFS= read -r path; do
    path=${path%%[.,;:)]}
    path=${path%%[.,;:)]}
    [[ -e $path ]] || fail "names $path, which does not exist"
done < <(grep -oE "(^|[^A-Za-z0-9_./-])$top/[A-Za-z0-9_./*-]*[A-Za-z0-9_/]" "$doc" |
         sed -E 's/^[^A-Za-z]//' | grep -v '[*]' | sort -u)

# 2. The map of rooms: each "### src/FOLDER" table names exactly the folder's files.
declare -A named=()
sections=()
while IFS=$'\t' read -r folder name; do
    if [[ -z $name ]]; then sections+=("$folder"); continue; fi
    named["$folder/$name"]=1
done < <(awk '
    /^### src\// { split($2, a, "/"); folder = "src/" a[2]; print folder; next }
    /^#/ { folder = "" }
    folder != "" && /^\| *`/ {
        cell = $0; sub(/^\| */, "", cell); sub(/ *\|.*/, "", cell)
        n = split(cell, parts, /`, *`|`/); stem = ""
        for (i = 1; i <= n; i++) {
            p = parts[i]; gsub(/[ ,`]/, "", p)
            if (p == "") continue
            if (p ~ /^\./) { if (stem != "") print folder "\t" stem p; continue }
            if (p !~ /\.(c|h|cu)$/) continue
            print folder "\t" p; stem = p; sub(/\.[a-z]+$/, "", stem)
        }
    }' "$doc")
[[ ${#sections[@]} -gt 0 ]] || fail "has no '### src/FOLDER' sections (the map of rooms)"
for folder in "${sections[@]}"; do
    [[ -d $folder ]] || { fail "maps $folder, which does not exist"; continue; }
    while IFS= read -r f; do
        [[ -n ${named[$f]+x} ]] || fail "its map of $folder does not name ${f#"$folder"/}"
    done < <(find "$folder" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
done
for key in "${!named[@]}"; do
    [[ -f $key ]] || fail "its map names $key, which does not exist"
done
for dir in src/*/; do
    dir=${dir%/}
    printf '%s\n' "${sections[@]}" | grep -qx "$dir" || fail "has no map of $dir (a '### $dir' section)"
done

if ((errors)); then
    echo "arch_doc: $errors problem(s): bring $doc back in line with the tree" >&2
    exit 1
fi
echo "arch_doc: every path $doc names exists; its map names every file of src/"
