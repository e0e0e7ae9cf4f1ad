#!/usr/bin/env bats
# `make install` puts every tool, the loop, the man pages (dated and
# versioned), the documents they cite, the bash, zsh and fish completions,
# the systemd unit,
# its environment file and the sysusers.d file in place, and `make
# uninstall` takes them away; bash-completion's, zsh's and fish's own
# loaders find the completions; the systemd unit is hardened, verifies, and names the
# configured paths: /etc/execkit/exec-loop.env with --prefix=/usr.

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
	ZSHDIR=$(dirname "$(find "$DEST" -path '*/zsh/site-functions/_execkit')")
	FISHDIR=$(dirname "$(find "$DEST" -path '*/fish/vendor_completions.d/execkit.fish')")
	UNIT=$(find "$DEST" -path '*/systemd/system/exec-loop.service')
	MAN=$(dirname "$(dirname "$(find "$DEST" -path '*/man7/execkit.7')")")
	VERSION=$(make -s -C "$BUILD" --no-print-directory -f - <<<'include Makefile
v: ; @echo $(PACKAGE_VERSION)' v)
	export DEST BIN COMPDIR ZSHDIR FISHDIR UNIT MAN VERSION
}

@test "the tools and the loop are installed and run from there" {
	local t
	for t in $TOOLS; do
		[ -x "$BIN/$t" ] || fail "$t is not installed in $BIN"
		run --separate-stderr "$BIN/$t" --version
		assert_success
		assert_output --regexp "^$t \(execkit\) "
	done
	# A static exec-inspect relays through its dynamic build, installed apart.
	[ "$(make_var STATIC_INSPECT)" = yes ] || return 0
	relay=$DEST$(make_var pkglibexecdir)/exec-inspect-relay
	[ -x "$relay" ] || fail "exec-inspect-relay is not installed in $(dirname "$relay")"
	[ ! -e "$BIN/exec-inspect-relay" ] || fail "exec-inspect-relay is installed among the tools"
	run --separate-stderr "$relay" --version
	assert_success
	assert_output --regexp "^exec-inspect \(execkit\) "
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

@test "zsh's compinit and fish's loader find the installed completions under every tool's name" {
	need_zsh_fish
	local t home=$BATS_TEST_TMPDIR/home
	[ -n "$ZSHDIR" ] || fail "no zsh/site-functions/_execkit installed"
	[ -n "$FISHDIR" ] || fail "no fish/vendor_completions.d/execkit.fish installed"
	cmp "$ZSHDIR/_execkit" "$ZSH_COMPLETION"
	cmp "$FISHDIR/execkit.fish" "$FISH_COMPLETION"
	for t in $TOOLS; do
		[ "$(readlink "$FISHDIR/$t.fish")" = execkit.fish ] || fail "$FISHDIR/$t.fish is not a link to execkit.fish"
	done
	# compinit reads the #compdef line of _execkit in $fpath
	run timeout 30 zsh -f "$SRC/tests/zsh-complete.zsh" "$ZSHDIR" "exec-loop --sl"
	assert_output --slots
	# fish looks in DIR/fish/vendor_completions.d of each XDG_DATA_DIRS entry
	mkdir -p "$home"
	for t in $TOOLS; do
		run env HOME="$home" XDG_CONFIG_HOME="$home/config" XDG_DATA_HOME="$home/data" \
			XDG_DATA_DIRS="$(dirname "$(dirname "$FISHDIR")")" timeout 30 fish -c 'complete -C "$argv[1] --hel"' "$t"
		assert_output --regexp "^--help"$'\t'
	done
}

@test "exec-loop.service is installed with this installation's paths, hardened, and verifies" {
	[ -n "$UNIT" ] || fail "exec-loop.service is not installed"
	local key exec
	for key in 'StateDirectory=execkit' 'Environment=EXEC_STATE_DIR=%S/execkit' 'ProtectSystem=strict' \
		'ProtectHome=yes' 'NoNewPrivileges=yes' 'PrivateTmp=yes' \
		'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' 'KillMode=mixed' 'TimeoutStopSec=' \
		'EnvironmentFile=' 'ExecStart=' 'WantedBy=multi-user.target' \
		'ExecReload=/bin/kill -HUP $MAINPID' 'LogRateLimitIntervalSec=30s' 'LogRateLimitBurst=[1-9]'; do
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

@test "every page's .TH carries this build's date and version, and man -l renders it" {
	local page th
	[ -n "$VERSION" ] || fail "no PACKAGE_VERSION in $BUILD/Makefile"
	for page in "$MAN"/man1/*.1 "$MAN"/man7/execkit.7; do
		th=$(head -n 1 "$page")
		[[ $th =~ ^\.TH\ [A-Z-]+\ [17]\ \"[0-9]{4}-[0-9]{2}-[0-9]{2}\"\ \"execkit\ $VERSION\"\ \"execkit\ manual\"$ ]] ||
			fail "$(basename "$page"): $th"
	done
	command -v man >/dev/null || skip "man is not installed"
	run --separate-stderr env MANWIDTH=80 man -l "$MAN/man1/exec-run.1"
	assert_success
	assert_line --regexp "^execkit $VERSION +[0-9]{4}-[0-9]{2}-[0-9]{2} +EXEC-RUN\(1\)\$"
	assert_line --regexp '^ENVIRONMENT$'
	assert_line --regexp '^FILES$'
}

@test "the pages name the installed paths: the documents they cite are there" {
	local docdir page doc
	docdir=$(make_var docdir)
	[ -f "$DEST$docdir/README.md" ] || fail "README.md is not in $docdir"
	for page in "$MAN"/man1/*.1 "$MAN"/man7/execkit.7; do
		for doc in $(grep -o 'doc/[a-z]*\.md' "$page" | sort -u); do
			[ -f "$DEST$docdir/${doc#doc/}" ] || fail "$(basename "$page") cites $doc: not installed in $docdir"
		done
		grep -q "^\.I $docdir/\$" "$page" || fail "$(basename "$page"): FILES does not name $docdir/"
	done
	grep -q "^\.I $(make_var sysconfdir)/execkit/exec-loop.env\$" "$MAN/man1/exec-loop.1" ||
		fail "exec-loop.1 does not name the installed exec-loop.env"
}

@test "exec-loop.env is installed under sysconfdir/execkit, where the unit reads it, and kept" {
	local env
	env=$(sed -n 's/^EnvironmentFile=//p' "$UNIT")
	assert_equal "$env" "$(make_var sysconfdir)/execkit/exec-loop.env"
	[ -f "$DEST$env" ] || fail "$env is not installed"
	[ "$(stat -c %a "$DEST$env")" = 600 ]
	cmp "$DEST$env" "$SRC/contrib/exec-loop.env"
	# an operator's own file survives a second install and the uninstall
	echo 'EXECKIT_DISPATCHER=http://mine.example:8080' >"$DEST$env"
	unset MAKEFLAGS MFLAGS MAKELEVEL
	make -s -C "$BUILD" install-data DESTDIR="$DEST" >/dev/null 2>&1 || fail "second install failed"
	grep -q mine.example "$DEST$env" || fail "make install overwrote $env"
	cp "$SRC/contrib/exec-loop.env" "$DEST$env"   # as shipped again: uninstall may take it
}

@test "a sysusers.d file creates the execkit user the unit runs as" {
	local conf
	conf=$DEST$(make_var SYSUSERS_DIR)/execkit.conf
	[ -f "$conf" ] || fail "execkit.conf is not installed in $(make_var SYSUSERS_DIR)"
	grep -q '^User=execkit$' "$UNIT"
	grep -q '^Group=execkit$' "$UNIT"
	command -v systemd-sysusers >/dev/null || skip "systemd-sysusers is not installed"
	mkdir -p "$BATS_TEST_TMPDIR/root/etc"
	run systemd-sysusers --root="$BATS_TEST_TMPDIR/root" "$conf"
	assert_success
	grep -q '^execkit:x:[0-9]*:[0-9]*:[^:]*:/var/lib/execkit:/usr/sbin/nologin$' "$BATS_TEST_TMPDIR/root/etc/passwd" ||
		fail "no execkit user: $(cat "$BATS_TEST_TMPDIR/root/etc/passwd")"
	grep -q '^execkit:' "$BATS_TEST_TMPDIR/root/etc/group"
}

@test "configure --prefix=/usr (Debian-style): the unit reads /etc/execkit/exec-loop.env" {
	local b=$BATS_TEST_TMPDIR/usr-build d=$BATS_TEST_TMPDIR/usr-dest unit
	unset MAKEFLAGS MFLAGS MAKELEVEL
	# configure refuses a second build directory of a source tree configured in place
	[ ! -e "$SRC/config.status" ] || skip "$SRC is configured in place: a VPATH build is needed"
	mkdir -p "$b"
	(cd "$b" && "$SRC/configure" -q --prefix=/usr SYSTEMD_SYSTEM_UNIT_DIR=/usr/lib/systemd/system \
		SYSUSERS_DIR=/usr/lib/sysusers.d) >"$b/log" 2>&1 || fail "configure: $(cat "$b/log")"
	make -s -C "$b" install-data DESTDIR="$d" >"$b/log" 2>&1 || fail "install-data: $(cat "$b/log")"
	unit=$d/usr/lib/systemd/system/exec-loop.service
	grep -qx 'EnvironmentFile=/etc/execkit/exec-loop.env' "$unit" || fail "$(grep EnvironmentFile "$unit")"
	grep -q '^ExecStart=/usr/bin/exec-loop ' "$unit"
	[ -f "$d/etc/execkit/exec-loop.env" ]
	[ -f "$d/usr/lib/sysusers.d/execkit.conf" ]
	[ -f "$d/usr/share/doc/execkit/json.md" ]
	grep -q '^\.I /etc/execkit/exec-loop.env$' "$d/usr/share/man/man1/exec-loop.1"
	grep -q '^\.I /usr/libexec/execkit/exec\\-inspect\\-relay$' "$d/usr/share/man/man1/exec-inspect.1"
	[ -z "$(find "$d" -path '*/usr/etc*')" ] || fail "something went to /usr/etc"
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
