#!/bin/sh
# Install what execkit needs to build, run and test on Debian (as root).
# Only missing packages are installed, so a prepared machine needs no network.
set -eu
pkgs="build-essential autoconf automake pkg-config libsqlite3-dev libcurl4-openssl-dev
libjansson-dev libmicrohttpd-dev sqlite3 curl bats bats-assert bats-support procps xxd nginx-light ${EXTRA_PKGS:-}"
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
