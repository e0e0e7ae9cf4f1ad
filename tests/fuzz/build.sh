#!/bin/sh
# Build the libFuzzer targets against the libcommon sources directly:
#   tests/fuzz/build.sh [OUTDIR]            (default: build-fuzz/)
# Needs clang (Debian: clang, libclang-rt-dev) and the -dev packages of
# sqlite3, jansson and libcurl headers.  Run a target on its seed corpus:
#   OUTDIR/fuzz_runspec -max_total_time=45 OUTDIR/corpus/runspec tests/fuzz/corpus/runspec
# (see tests/fuzz/README.md).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-fuzz}
cc=${CC_FUZZ:-clang}
mkdir -p "$out/gen"
# libcommon/cli.c wants config.h for PACKAGE_VERSION.
printf '#define PACKAGE_VERSION "%s"\n' \
	"$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac")" >"$out/gen/config.h"
flags="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-std=c11 -D_GNU_SOURCE -I$out/gen -I$top/libcommon $(pkg-config --cflags sqlite3 jansson)"
libs="$(pkg-config --libs sqlite3 jansson) -ldl"
# The whole of libcommon (its modules call one another), with the schema
# header the build generates.
sh "$top/build-aux/sql2c.sh" "$top"/schema/*.sql >"$out/gen/schema_sql.h"
# It is compiled once and linked into each target.
mkdir -p "$out/obj"
objs=
for f in "$top"/libcommon/*.c; do
	o=$out/obj/${f##*/}
	o=${o%.c}.o
	# shellcheck disable=SC2086 # the flag list
	$cc $flags -c -o "$o" "$f"
	objs="$objs $o"
done
for t in runspec classify wire; do
	# shellcheck disable=SC2086 # flag and file lists
	$cc $flags -o "$out/fuzz_$t" "$top/tests/fuzz/fuzz_$t.c" $objs $libs
	mkdir -p "$out/corpus/$t"
done
echo "$out/fuzz_runspec $out/fuzz_classify $out/fuzz_wire"
