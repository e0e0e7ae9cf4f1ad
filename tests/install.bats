#!/usr/bin/env bats
# `make install` puts every tool, the loop, the man pages, the bash
# completion and the systemd unit in place, and `make uninstall` takes
# them away; bash-completion's own loader finds the completion; the
# systemd unit is hardened and verifies.

load helpers
load doclib

# One installation for the whole file; the last test uninstalls it.
setup_file() {
	DEST=$BATS_FILE_TMPDIR/dest
	unset MAKEFLAGS MFLAGS MAKELEVEL
	make -s -C "$BUILD" install DESTDIR="$DEST" >"$BATS_FILE_TMPDIR/install.log" 2>&1 ||
		fail "make install failed: $(cat "$BATS_FILE_TMPDIR/install.log")"
	BIN=$(dirname "$(find "$DEST" -path '*/bin/exec-loop')")
	COMPDIR=$(dirname "$(find "$DEST" -path '*/bash-completion/completions/execkit')")
	UNIT=$(find "$DEST" -path '*/systemd/system/exec-loop.service')
	export DEST BIN COMPDIR UNIT
}

@test "the tools and the loop are installed and run from there" {
	local t
	for t in $TOOLS; do
		[ -x "$BIN/$t" ] || fail "$t is not installed in $BIN"
		run --separate-stderr "$BIN/$t" --version
		assert_success
		assert_output --regexp "^$t \(execkit\) "
	done
}

@test "the man pages are installed, and man finds execkit(7) and each tool's page" {
	local man t
	man=$(dirname "$(dirname "$(find "$DEST" -path '*/man7/execkit.7')")")
	[ -f "$man/man7/execkit.7" ] || fail "execkit.7 is not installed"
	for t in $TOOLS; do
		[ -f "$man/man1/$t.1" ] || fail "$t.1 is not installed"
	done
	command -v man >/dev/null || skip "man is not installed"
	run man -M "$man" -w execkit
	assert_output "$man/man7/execkit.7"
	run man -M "$man" -w exec-inspect
	assert_output "$man/man1/exec-inspect.1"
}

@test "the completion is installed under every tool's name, and bash-completion's loader finds it" {
	need_completion
	local t
	[ -n "$COMPDIR" ] || fail "no bash-completion/completions/execkit installed"
	cmp "$COMPDIR/execkit" "$COMPLETION"
	for t in $TOOLS; do
		[ "$(readlink "$COMPDIR/$t")" = execkit ] || fail "$COMPDIR/$t is not a link to execkit"
	done
	# XDG_DATA_DIRS is where the loader looks for completions/<command>.
	run env XDG_DATA_DIRS="$(dirname "$(dirname "$COMPDIR")")" BASH_COMPLETION_USER_DIR=/nonexistent \
		bash --norc --noprofile -c '
		. "$1"
		for t in $2; do
			__load_completion "$t" || { echo "no completion loaded for $t"; exit 1; }
			complete -p "$t"
		done
		COMP_WORDS=(exec-run --sl); COMP_CWORD=1; COMP_LINE="exec-run --sl"; COMP_POINT=${#COMP_LINE}
		_execkit exec-run --sl exec-run
		printf "offered %s\n" "${COMPREPLY[@]}"' - "$BASH_COMPLETION_MAIN" "$TOOLS"
	assert_success
	for t in $TOOLS; do
		assert_line "complete -F _execkit $t"
	done
	assert_line "offered --slots"
}

@test "exec-loop.service is installed with this installation's paths, hardened, and verifies" {
	[ -n "$UNIT" ] || fail "exec-loop.service is not installed"
	local key exec
	for key in 'StateDirectory=execkit' 'Environment=EXEC_STATE_DIR=%S/execkit' 'ProtectSystem=strict' \
		'ProtectHome=yes' 'NoNewPrivileges=yes' 'PrivateTmp=yes' \
		'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' 'KillMode=mixed' 'TimeoutStopSec=' \
		'EnvironmentFile=' 'ExecStart=' 'WantedBy=multi-user.target'; do
		grep -q "^$key" "$UNIT" || fail "exec-loop.service lacks $key"
	done
	exec=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$UNIT")
	[ -x "$DEST$exec" ] || fail "ExecStart=$exec is not the installed exec-loop"
	grep -q '^ExecStart=[^ ]* --dispatcher ${EXECKIT_DISPATCHER}' "$UNIT"
	grep -q "^EnvironmentFile=.*/execkit/exec-loop.env\$" "$UNIT"
	command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
	# Verified where it would run: ExecStart pointing at the files just installed.
	sed "s|^ExecStart=$exec|ExecStart=$DEST$exec|" "$UNIT" >"$BATS_TEST_TMPDIR/exec-loop.service"
	run --separate-stderr systemd-analyze verify --man=no "$BATS_TEST_TMPDIR/exec-loop.service"
	assert_success
	[ -z "$stderr" ] || fail "systemd-analyze verify: $stderr"
}

@test "the example dashboard and alert rules are installed under the documentation's examples" {
	local f
	for f in grafana-execkit.json execkit.rules.yml; do
		cmp "$(find "$DEST" -path "*/share/doc/execkit/examples/$f")" "$SRC/contrib/$f" ||
			fail "$f is not installed under share/doc/execkit/examples"
	done
}

@test "make uninstall leaves nothing behind" {
	unset MAKEFLAGS MFLAGS MAKELEVEL
	make -s -C "$BUILD" uninstall DESTDIR="$DEST" >/dev/null 2>&1
	run find "$DEST" ! -type d
	assert_success
	assert_output ''
}
