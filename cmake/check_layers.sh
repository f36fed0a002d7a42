#!/usr/bin/env bash
# The layering check: every `#include "..."` in src/ and include/distzo/ against the layer
# graph of cmake/layers.txt. Fails (exit 1, one line per problem) when
#  - a folder of src/ has no `layer` line, or a line uses a folder not listed above it;
#  - a file includes a header of a folder outside its own folder's transitive closure
#    (a lower layer including a higher one, or a sideways include), or a public header
#    includes anything but public headers of its own or lower folders;
#  - an include is not of the form "folder/file.h" (or "distzo/file.h"), or names no file;
#  - a public header has no `api` line, or docs/ARCHITECTURE.md's copy of the graph differs;
#  - files include each other in a cycle;
#  - src/cli includes anything but "distzo/*" and "cli/*".
# The first and the last accept the (file, header) pairs listed in cmake/known_violations.txt:
# violations still to remove. A listed pair that no longer occurs fails too, so the list
# only shrinks.
# Usage: cmake/check_layers.sh [REPO_ROOT]. Run in every build (target check_layers, in ALL)
# and as the CTest test `layering`.
set -u
cd "${1:-.}" || exit 2
layers=cmake/layers.txt
known=cmake/known_violations.txt
errors=0
fail() { echo "layering: $*" >&2; errors=$((errors + 1)); }

declare -A deps=() closure=() owner=() listed=()
while read -r kind a rest; do
    case $kind in
    '') ;;
    layer)
        [[ -n ${listed[$a]+x} ]] && fail "$layers: layer $a is listed twice"
        closure[$a]=""
        for d in $rest; do
            if [[ -z ${listed[$d]+x} ]]; then
                fail "$layers: layer $a uses $d, which is not listed above it"
                continue
            fi
            closure[$a]+=" $d ${closure[$d]}"
        done
        deps[$a]=$rest
        listed[$a]=1
        ;;
    api) owner[$a]=$rest ;;
    *) fail "$layers: cannot read the line '$kind $a $rest'" ;;
    esac
done < <(sed 's/#.*//' "$layers")

# The graph drawn in docs/ARCHITECTURE.md is this one: its `layer` lines are the same.
doc=docs/ARCHITECTURE.md
if [[ -f $doc ]]; then
    want=$(sed 's/#.*//' "$layers" | awk '$1 == "layer" { $1 = $1; print }')
    have=$(awk '/^[ \t]*layer([ \t]+[a-z_]+)+[ \t]*$/ { $1 = $1; print }' "$doc")
    [[ $want == "$have" ]] || fail "$doc: its 'layer' lines differ from $layers (copy them over)"
fi

for dir in src/*/; do
    f=${dir#src/}
    f=${f%/}
    [[ -n ${listed[$f]+x} ]] || fail "src/$f has no 'layer $f ...' line in $layers"
done
for h in include/distzo/*.h; do
    [[ -n ${owner[${h#include/}]+x} ]] || fail "$h has no 'api ${h#include/} FOLDER' line in $layers"
done

# May layer $1 use layer $2?
uses() { [[ $1 == "$2" || " ${closure[$1]-} " == *" $2 "* ]]; }

declare -A allowed=() seen_known=() edges=()
if [[ -f $known ]]; then
    while read -r file inc; do
        [[ -n $file ]] && allowed["$file $inc"]=1
    done < <(sed 's/#.*//' "$known")
fi

n_files=0 n_includes=0
re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)"'
while IFS= read -r file; do
    n_files=$((n_files + 1))
    if [[ $file == include/* ]]; then
        from=${owner[${file#include/}]-}
    else
        from=${file#src/}
        from=${from%%/*}
    fi
    while IFS= read -r line; do
        [[ $line =~ $re ]] || continue
        inc=${BASH_REMATCH[1]}
        n_includes=$((n_includes + 1))
        if [[ $inc != */* ]]; then
            fail "$file: #include \"$inc\": name headers as \"folder/file.h\""
            continue
        fi
        if [[ $inc == distzo/* ]]; then
            target=include/$inc
            to=${owner[$inc]-}
        else
            target=src/$inc
            to=${inc%%/*}
            if [[ $file == include/* ]]; then
                fail "$file: #include \"$inc\": a public header includes only public headers"
                continue
            fi
        fi
        if [[ ! -f $target ]]; then
            fail "$file: #include \"$inc\": no such file ($target)"
            continue
        fi
        edges[$file]+=" $target"
        [[ -z $from || -z $to ]] && continue # reported above: no layer or api line
        why=""
        if ! uses "$from" "$to"; then
            direct=${deps[$from]-}
            why="$from may not use $to ($layers: $from uses ${direct:-nothing}${direct:+ and what they use})"
        elif [[ $from == cli && $inc != distzo/* && $inc != cli/* ]]; then
            why="the CLI uses only the public API (include/distzo/) and src/cli/"
        fi
        if [[ -n $why ]]; then
            if [[ -n ${allowed["$file $inc"]+x} ]]; then
                seen_known["$file $inc"]=1
            else
                fail "$file: #include \"$inc\": $why"
            fi
        fi
    done <"$file"
done < <(find src include/distzo -name '*.[ch]' | LC_ALL=C sort)

for k in "${!allowed[@]}"; do
    [[ -n ${seen_known[$k]+x} ]] || fail "$known: '$k' no longer occurs: remove the line"
done

# Include cycles between files: depth-first search, grey = on the current path.
declare -A colour=()
path=()
visit() {
    local n=$1 m i
    colour[$n]=grey
    path+=("$n")
    for m in ${edges[$n]-}; do
        case ${colour[$m]-white} in
        grey)
            local cycle="" on=0
            for i in "${path[@]}"; do
                [[ $i == "$m" ]] && on=1
                ((on)) && cycle+="$i -> "
            done
            fail "include cycle: $cycle$m"
            ;;
        white) visit "$m" ;;
        esac
    done
    colour[$n]=black
    unset 'path[${#path[@]}-1]'
}
for n in $(printf '%s\n' "${!edges[@]}" | LC_ALL=C sort); do
    [[ ${colour[$n]-white} == white ]] && visit "$n"
done

if ((errors)); then
    echo "layering: $errors problem(s) in $n_files files (graph: $layers)" >&2
    exit 1
fi
echo "layering: $n_files files, $n_includes includes: every one allowed by $layers, no cycles"
