#!/usr/bin/env bats
# Notify hooks are named by whoever submitted the run: they run only when
# the operator allowed them, isolated and contained like guests, within
# their time bound (libcommon/hooks.c, doc/security.md).

load helpers

setup() {
	PIDFILE=$BATS_TEST_TMPDIR/hook.pid
	cp "$(type -P sleep)" "$BATS_TEST_TMPDIR/nap"   # what teardown's pkill finds
	TAG="ektest-hook-$$-$BATS_TEST_NUMBER"
}

teardown() {
	common_teardown
	rm -f "/$TAG"
}

# hook_run HOOK [EXTRA-POLICY]: run r1 (a sleeper) whose notify hook is
# HOOK, wait for its limits file, and change the capacity so that the hook
# runs in exec-shares; its stderr is in $stderr.
hook_run() {
	start_dispatcher
	open_session
	exec-shares capacity set executor 100 >/dev/null
	submit_and_accept "$(spec r1 /bin/sleep '["3600"]' "\"policy\":{\"notify\":\"$1\"}")"
	exec-run start >/dev/null 2>&1
	wait_until '[ -s "$EXEC_STATE_DIR/out/r1.limits" ]'
	run --separate-stderr exec-shares capacity set executor 50 3>&-
	assert_success
	echo "exec-shares: $stderr"
}

write_probe() {
	cat >"$BATS_TEST_TMPDIR/probe" <<EOF
#!/bin/sh
S=$EXEC_STATE_DIR
try() { n=\$1; shift; if "\$@" >/dev/null 2>&1; then echo "\$n: ok"; else echo "\$n: failed"; fi; }
try read-db head -c 16 "\$S/state.db"
try credential sqlite3 -readonly "\$S/state.db" "SELECT credential FROM sessions"
try write-db sh -c "echo x >>'\$S/state.db'"
try write-root touch /$TAG
try limits cat "\$2"
setsid sh -c 'echo \$\$ >$PIDFILE.tmp; mv $PIDFILE.tmp $PIDFILE; exec $BATS_TEST_TMPDIR/nap 300' </dev/null >/dev/null 2>&1 &
i=0; while [ ! -s $PIDFILE ] && [ \$i -lt 100 ]; do sleep 0.01; i=\$((i+1)); done
EOF
	chmod 755 "$BATS_TEST_TMPDIR/probe"
}

@test "an allowed hook runs isolated: it cannot read the state or the credential, nor write outside its world, and leaves no process behind" {
	said=$(exec-run isolation 2>&1)
	[ "${said%%:*}" != none ] || skip "$said"
	write_probe
	export EXEC_ALLOW_HOOKS=$BATS_TEST_TMPDIR/probe
	hook_run "$BATS_TEST_TMPDIR/probe"
	cat "$EXEC_STATE_DIR/out/r1.notify"
	grep -qx "read-db: failed" "$EXEC_STATE_DIR/out/r1.notify"
	grep -qx "credential: failed" "$EXEC_STATE_DIR/out/r1.notify"
	grep -qx "write-db: failed" "$EXEC_STATE_DIR/out/r1.notify"
	grep -qx "write-root: failed" "$EXEC_STATE_DIR/out/r1.notify"
	grep -qx "limits: ok" "$EXEC_STATE_DIR/out/r1.notify"   # its run's limits, through the view
	[ ! -e "/$TAG" ]
	[ -s "$PIDFILE" ]
	# its setsid child went with it (a zombie that no one reaps is gone too)
	run ps -o stat= -p "$(cat "$PIDFILE")"
	[[ "$output" != [^Z]* ]] || fail "alive: $output"
	exec-run cancel r1 --session "$(current_session)" >/dev/null
}

@test "a hook the operator did not allow is not run, and the change says so" {
	printf '#!/bin/sh\ntouch %s/ran\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/hook"
	chmod 755 "$BATS_TEST_TMPDIR/hook"
	export EXEC_ALLOW_HOOKS=/bin/true:$BATS_TEST_TMPDIR/hook2
	hook_run "$BATS_TEST_TMPDIR/hook"
	[[ "$stderr" == *"run 'r1': notify: '$BATS_TEST_TMPDIR/hook' is not an allowed hook: not run"* ]] || fail "$stderr"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	exec-run cancel r1 --session "$(current_session)" >/dev/null
}

@test "without isolation a hook runs only when the operator says so (EXEC_UNISOLATED_HOOKS=1)" {
	printf '#!/bin/sh\ntouch %s/ran\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/hook"
	chmod 755 "$BATS_TEST_TMPDIR/hook"
	export EXEC_ALLOW_HOOKS=$BATS_TEST_TMPDIR/hook EXEC_ISOLATION=none
	hook_run "$BATS_TEST_TMPDIR/hook"
	[[ "$stderr" == *"'$BATS_TEST_TMPDIR/hook' not run: hooks are not run without isolation"* ]] || fail "$stderr"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	EXEC_UNISOLATED_HOOKS=1 run --separate-stderr exec-shares capacity set executor 40 3>&-
	assert_success
	[ -e "$BATS_TEST_TMPDIR/ran" ]
	exec-run cancel r1 --session "$(current_session)" >/dev/null
}

@test "exec-run --allow-hook: the supervisors it starts run that hook" {
	printf '#!/bin/sh\necho "$1" >>%s/ran\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/hook"
	chmod 755 "$BATS_TEST_TMPDIR/hook"
	start_dispatcher
	open_session
	exec-shares capacity set executor 100 >/dev/null
	submit_and_accept "$(spec a1 /bin/sleep '["3600"]' "\"policy\":{\"notify\":\"$BATS_TEST_TMPDIR/hook\"}")"
	exec-run start >/dev/null 2>&1
	wait_until '[ -s "$EXEC_STATE_DIR/out/a1.limits" ]'
	# a2 joining changes a1's limits: a2's supervisor runs a1's hook
	submit_and_accept "$(spec a2 /bin/true)"
	run exec-run start --wait --allow-hook "$BATS_TEST_TMPDIR/hook"
	assert_success
	wait_until '[ -s "$BATS_TEST_TMPDIR/ran" ]'
	[ "$(head -1 "$BATS_TEST_TMPDIR/ran")" = a1 ]
	run -"$EK_USAGE" exec-run --allow-hook rel isolation
	assert_output --partial "--allow-hook rel: not an absolute path"
	exec-run cancel a1 --session "$(current_session)" >/dev/null
}
