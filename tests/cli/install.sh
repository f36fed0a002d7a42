#!/usr/bin/env bash
# `cmake --install` and a program built against the installed tree: the files a prefix
# gets (libdistzo.so with its SONAME, libdistzo.a, include/distzo/*.h, distzo.pc, the CMake
# package, the distzo command); libdistzo.so exports the public headers' functions and
# nothing else; tests/install/consumer.c, built with pkg-config and with
# find_package(distzo), each against the shared and the static library, trains
# stories260K on SST-2 to the same bits as the installed `distzo train` with the same
# settings; tests/install/consumer.cpp includes every public header from C++ and links.
# Usage: install.sh BUILD_DIR SOURCE_DIR ASSETS CC CMAKE NM
build=$1 src=$2 assets=$3 cc=$4 cmake=$5 nm=$6
. "$(dirname "$0")/lib.sh"
need_assets "$assets" stories260K/stories260K.bin stories260K/tok512.bin sst2/train.tsv sst2/dev.tsv
need_tool pkg-config "builds the consumer from distzo.pc"
need_tool readelf "reads libdistzo.so's SONAME"
cxx=${CXX:-c++}
need_tool "$cxx" "builds the C++ consumer (scripts/deps.sh: build-essential)"

p=$tmp/prefix
"$cmake" --install "$build" --prefix "$p" > "$tmp/install.txt" 2>&1 || { cat "$tmp/install.txt"; bad "cmake --install failed"; }
export PKG_CONFIG_PATH=$p/lib/pkgconfig:$p/lib64/pkgconfig
libdir=$(pkg-config --variable=libdir distzo) || bad "pkg-config finds no distzo.pc under $p"

# The files, and the SONAME made from the headers' DISTZO_VERSION (0.x: MAJOR.MINOR).
version=$(sed -nE 's/^#define DISTZO_VERSION "([0-9]+\.[0-9]+)\.[0-9]+"/\1/p' "$p/include/distzo/distzo.h")
for f in bin/distzo include/distzo/distzo.h include/distzo/train.h; do
  [ -f "$p/$f" ] || bad "$f not installed"
done
for f in libdistzo.a libdistzo.so cmake/distzo/distzoConfig.cmake cmake/distzo/distzoConfigVersion.cmake; do
  [ -e "$libdir/$f" ] || bad "$libdir/$f not installed"
done
soname=$(readelf -d "$libdir/libdistzo.so" | sed -nE 's/.*SONAME.*\[(.*)\]/\1/p')
[ "$soname" = "libdistzo.so.$version" ] && [ -f "$libdir/$soname" ] && ok "SONAME $soname, installed" ||
  bad "SONAME '$soname', expected libdistzo.so.$version beside libdistzo.so"
full=$(sed -nE 's/^#define DISTZO_VERSION "(.*)"/\1/p' "$p/include/distzo/distzo.h")
[ "$(pkg-config --modversion distzo)" = "$full" ] && ok "distzo.pc is version $full" ||
  bad "distzo.pc's version $(pkg-config --modversion distzo), the headers' $full"

# Exports: every exported symbol is a name the installed headers use, and every global of
# libdistzo.a that the headers never name stays inside the library.
grep -ohwE '[A-Za-z_][A-Za-z0-9_]*' "$p"/include/distzo/*.h | LC_ALL=C sort -u > "$tmp/words"
"$nm" -D --defined-only "$libdir/libdistzo.so" | awk '{ print $NF }' | LC_ALL=C sort -u > "$tmp/exported"
"$nm" -g --defined-only "$libdir/libdistzo.a" 2> /dev/null | awk 'NF == 3 { print $3 }' | LC_ALL=C sort -u > "$tmp/globals"
LC_ALL=C comm -23 "$tmp/exported" "$tmp/words" > "$tmp/stray"
LC_ALL=C comm -23 "$tmp/globals" "$tmp/words" > "$tmp/internal"
LC_ALL=C comm -12 "$tmp/internal" "$tmp/exported" > "$tmp/leaked"
[ -s "$tmp/internal" ] && [ ! -s "$tmp/stray" ] && [ ! -s "$tmp/leaked" ] &&
  grep -qx dz_train "$tmp/exported" && grep -qx dz_model_load "$tmp/exported" &&
  ok "libdistzo.so exports $(wc -l < "$tmp/exported") public functions, hides $(wc -l < "$tmp/internal") internal ones" ||
  bad "exports: not public: $(head -5 "$tmp/stray" | tr '\n' ' ') internal exported: $(head -5 "$tmp/leaked" | tr '\n' ' ')"

# The consumer, built three ways; against a sanitized build (DZ_SANITIZE=ON), sanitized
# too, as the runtime must come first in a program that loads an instrumented library.
san=""
[ "${DZ_SANITIZED:-OFF}" = ON ] && san="-fsanitize=address,undefined"
"$cc" -std=c11 -Wall -Wextra -Werror $san "$src/tests/install/consumer.c" $(pkg-config --cflags --libs distzo) \
  -Wl,-rpath,"$libdir" -o "$tmp/consumer_pc" > "$tmp/build_pc.txt" 2>&1 && ok "built with pkg-config" ||
  { cat "$tmp/build_pc.txt"; bad "the build with pkg-config failed"; }
"$cc" -std=c11 -Wall -Wextra -Werror $san "$src/tests/install/consumer.c" $(pkg-config --cflags distzo) \
  "$libdir/libdistzo.a" $(pkg-config --variable=static_libs distzo) -o "$tmp/consumer_pcstatic" \
  > "$tmp/build_pcstatic.txt" 2>&1 && ok "built with pkg-config against libdistzo.a" ||
  { cat "$tmp/build_pcstatic.txt"; bad "the static build with pkg-config failed"; }
for link in shared static; do
  { "$cmake" -S "$src/tests/install" -B "$tmp/b_$link" -DCMAKE_PREFIX_PATH="$p" -DDZ_LINK=$link -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_C_FLAGS="$san" &&
      "$cmake" --build "$tmp/b_$link"; } > "$tmp/build_$link.txt" 2>&1 && cp "$tmp/b_$link/consumer" "$tmp/consumer_$link" &&
    ok "built with find_package(distzo) ($link)" || { cat "$tmp/build_$link.txt"; bad "the find_package build ($link) failed"; }
done
# C++: every public header in a C++17 program, linked through extern "C" (a mangled name
# would not link), and run
"$cxx" -std=c++17 -Wall -Wextra -Werror $san "$src/tests/install/consumer.cpp" $(pkg-config --cflags --libs distzo) \
  -Wl,-rpath,"$libdir" -o "$tmp/consumer_cpp" > "$tmp/build_cpp.txt" 2>&1 &&
  out=$("$tmp/consumer_cpp" "$assets/stories260K/stories260K.bin") && [[ "$out" =~ ^params\ [0-9]{6}\ \(distzo\ $full\)$ ]] &&
  ok "a C++ program includes every header and links: $out" || { cat "$tmp/build_cpp.txt"; bad "C++: '${out:-}'"; }
readelf -d "$tmp/consumer_pc" | grep -q "NEEDED.*\[$soname\]" && ! readelf -d "$tmp/consumer_static" | grep -q libdistzo &&
  ! readelf -d "$tmp/consumer_pcstatic" | grep -q libdistzo &&
  ok "the shared builds link $soname, the static ones none" || bad "the consumers link the wrong library"

# The same run from the installed command line and from the three programs. The command
# line resolves symbolic links in the paths it records (run.json, the seed log's header);
# the library keeps a path as given, so the programs get resolved ones.
assets=$(cd "$assets" && pwd -P)
head -9 "$assets/sst2/dev.tsv" > "$tmp/test.tsv"
model=$assets/stories260K/stories260K.bin tok=$assets/stories260K/tok512.bin train=$assets/sst2/train.tsv
"$p/bin/distzo" train --model "$model" --tokenizer "$tok" --data "$train" --test "$tmp/test.tsv" --label-words bad,good \
  --train-examples 32 --dev-examples 8 --data-seed 42 --batch 4 --steps 4 --lr 1e-3 --eps 1e-3 --seed 7 \
  --eval-every 0 --checkpoint-every 4 --threads 1 --quiet --out "$tmp/cli" > "$tmp/cli.txt" 2>&1 ||
  { cat "$tmp/cli.txt"; bad "the installed distzo train failed"; }
cli_sum=$("$tmp/consumer_pc" sum "$tmp/cli/checkpoint-4" | grep '^checksum')
base_sum=$("$tmp/consumer_pc" sum "$model" | grep '^checksum')
[ -n "$cli_sum" ] && [ "$cli_sum" != "$base_sum" ] && ok "the CLI's run changed the weights: $cli_sum" ||
  bad "checksums: CLI '$cli_sum', base '$base_sum'"
for how in pc pcstatic shared static; do
  sum=$("$tmp/consumer_$how" train "$model" "$tok" "$train" "$tmp/test.tsv" "$tmp/r_$how" 2> "$tmp/r_$how.txt" |
        grep '^checksum')
  [ "$sum" = "$cli_sum" ] && cmp -s "$tmp/r_$how/checkpoint-4/model.safetensors" "$tmp/cli/checkpoint-4/model.safetensors" &&
    cmp -s "$tmp/r_$how/seeds.log" "$tmp/cli/seeds.log" &&
    ok "consumer ($how) trains the CLI's bits: $sum" || { cat "$tmp/r_$how.txt"; bad "consumer ($how): '$sum' vs '$cli_sum'"; }
done
finish
