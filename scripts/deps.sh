#!/bin/sh
# Install what execkit needs to build, run and test on Debian (as root).
# Only missing packages are installed, so a prepared machine needs no network.
set -eu
# bash-completion, zsh, fish, prometheus (promtool), bsdutils (script) and
# groff-base serve the operator tests: completion in each shell, metrics,
# progress on a tty, man pages.
# The linter (shellcheck) checks the scripts.
pkgs="build-essential autoconf automake pkg-config libsqlite3-dev libcurl4-openssl-dev
libjansson-dev libmicrohttpd-dev sqlite3 curl bats bats-assert bats-support procps xxd nginx-light
bash-completion zsh fish prometheus bsdutils groff-base shellcheck ${EXTRA_PKGS:-}"
# clang + libclang-rt-dev build the libFuzzer targets (tests/fuzz/); fiu-utils
# (libfiu) injects the I/O errors of tests/drills/io-faults.bats.
pkgs="$pkgs clang libclang-rt-dev fiu-utils"
# gnuplot-nox draws bench/fleet.sh's picture (bench/fleet.png); strace
# counts system calls and widens a race in the tests; bash-builtins makes
# the tests' polling sleep a builtin (tests/helpers.bash).
pkgs="$pkgs gnuplot-nox strace bash-builtins"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "deps: installing:$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
