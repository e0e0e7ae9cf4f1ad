#!/bin/bash
# Configure and build into DIR (default build/) with extra configure flags.
#   scripts/build.sh [DIR [CONFIGURE-FLAGS...]]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
[ $# -gt 0 ] && shift
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] || autoreconf -fi >/dev/null 2>&1
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$top/configure" -q "$@"
make -s -j"$(nproc)" >/dev/null
