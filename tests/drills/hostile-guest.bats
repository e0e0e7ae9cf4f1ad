#!/usr/bin/env bats
# A hostile guest (SPEC 3, "guests are contained"; doc/security.md): it
# knows where the state directory is (the tests tell it, the worst case)
# and tries everything — read state.db and its -wal, list the directory,
# read its supervisor through /proc (descriptors, environment, memory, root,
# command line), find the session credential, plant symbolic links under
# out/, signal its supervisor.  Every attempt fails, and the run's own
# result is delivered exactly once.  Then the links a guest without
# isolation could have planted: never followed, the state intact.
#
# The guests run through exec-run and the real exec-dispatcher, isolated as
# `exec-run isolation` says (userns here by default; user with
# --guest-user, as root only).  Where nothing isolates guests, the attempts
# would succeed: those tests skip, saying why.

load drill

teardown() {
	local p
	for p in $(val "SELECT guest_pid FROM runs WHERE guest_pid > 0" 2>/dev/null); do
		kill -KILL -- "-$p" 2>/dev/null || true
	done
	[ -z "${GUESTDIR:-}" ] || rm -rf "$GUESTDIR"
	drill_teardown
}

# need_isolation [OPTIONS...]: skip when exec-run says guests would not be
# isolated with OPTIONS (a machine without user namespaces).  An exec-run
# that cannot say is put to the test all the same.
need_isolation() {
	local said
	said=$(exec-run "$@" isolation 2>&1) || said="unknown: $said"
	[ "${said%%:*}" != none ] || skip "$said"
	echo "# $said" >&3
}

# The hostile guest, in a directory any user may read (--guest-user runs it
# as another user).  hostile STATE_DIR NEXT_RUN_ID: one line per attempt,
# "NAME: ok OUTPUT" or "NAME: failed ERROR".
write_hostile() {
	GUESTDIR=$(mktemp -d "${TMPDIR:-/tmp}/execkit-hostile.XXXXXX")
	chmod 755 "$GUESTDIR"
	# (in TMPDIR, which the guest's private /tmp or /dev/shm would hide)
	export EXEC_GUEST_WRITABLE=$EXEC_GUEST_WRITABLE:$GUESTDIR
	cat >"$GUESTDIR/hostile" <<'EOF'
#!/bin/sh
S=$1 NEXT=$2 SUP=$PPID
try() {
	name=$1
	shift
	if out=$("$@" 2>&1); then r=ok; else r=failed; fi
	printf '%s: %s %s\n' "$name" "$r" "$(printf '%s' "$out" | head -c 300 | tr -c '[:print:]' '.')"
}
try read-db head -c 64 "$S/state.db"
try read-wal head -c 64 "$S/state.db-wal"
try list-state ls -A "$S"
try list-out ls -A "$S/out"
try credential sqlite3 -readonly "$S/state.db" "SELECT 'cred:' || credential FROM sessions"
try sup-cmdline sh -c "tr '\\0' ' ' </proc/$SUP/cmdline"
try sup-environ head -c 300 "/proc/$SUP/environ"
try sup-fd sh -c "for f in /proc/$SUP/fd/*; do readlink \"\$f\" || exit 1; done"
try sup-maps head -c 100 "/proc/$SUP/maps"
try sup-mem sh -c "m=\$(head -n1 /proc/$SUP/maps) && x=\$(dd if=/proc/$SUP/mem bs=16 count=1 skip=\$((0x\${m%%-*})) iflag=skip_bytes status=none | od -An -tx1) && [ -n \"\$x\" ] && echo \$x"
try sup-root head -c 64 "/proc/$SUP/root$S/state.db"
try unmount umount -l "$S"
try plant ln -s ../state.db "$S/out/$NEXT.stdout"
try write-out sh -c "echo x >'$S/out/planted'"
try limits cat "$EXEC_LIMITS_FILE"
echo "env: $(env | grep -c "$S") names of the state directory outside EXEC_LIMITS_FILE: $(env | grep -v '^EXEC_LIMITS_FILE=' | grep -c "$S")"
EOF
	chmod 755 "$GUESTDIR/hostile"
}

# The attempts of run ID that must fail and did not.
MUST_FAIL="read-db read-wal credential sup-environ sup-fd sup-maps sup-mem sup-root unmount plant write-out"
succeeded() {
	local a
	for a in $MUST_FAIL; do
		grep "^$a: " "$EXEC_STATE_DIR/out/$1.stdout" | grep -v "^$a: failed" || true
	done
}

# run_hostile ID [EXEC-RUN-OPTIONS...]: run the hostile guest as run ID
# (its NEXT is ID-next) in the foreground, and wait for its one result.
run_hostile() {
	local id=$1
	shift
	submit "{\"run_id\":\"$id\",\"txn_id\":\"t-$id\",\"program\":\"$GUESTDIR/hostile\",\"args\":[\"$EXEC_STATE_DIR\",\"$id-next\"]}"
	exec-accept --from-dispatcher >/dev/null
	run exec-run "$@" start --wait
	echo "$output"
	assert_success
	assert_output --partial "$id exited 0: delivered"
	cat "$EXEC_STATE_DIR/out/$id.stdout"
	# a capture file is made on its first byte: a silent stderr has none
	[ ! -e "$EXEC_STATE_DIR/out/$id.stderr" ] || cat "$EXEC_STATE_DIR/out/$id.stderr"
}

# The state is whole: integrity ok, nothing truncated.
state_intact() {
	[ "$(sqlite3 -readonly "$EXEC_STATE_DIR/state.db" 'PRAGMA integrity_check')" = ok ]
	[ "$(stat -c %s "$EXEC_STATE_DIR/state.db")" -ge "$1" ]
}

@test "a hostile guest reads nothing of the state: not state.db, its -wal, a listing, nor the credential" {
	need_isolation
	write_hostile
	start_dispatcher
	open_session
	exec-shares capacity set executor 1000 >/dev/null   # so that it has a limits file
	cred=$(val "SELECT credential FROM sessions WHERE status = 'current'")
	size=$(stat -c %s "$EXEC_STATE_DIR/state.db")
	run_hostile h1
	out=$EXEC_STATE_DIR/out/h1.stdout
	grep -q '^read-db: failed' "$out"
	grep -q '^read-wal: failed' "$out"
	grep -q '^credential: failed' "$out"
	run grep -c 'state\.db' <(grep '^list-' "$out")   # a listing shows nothing of the state
	assert_output 0
	run grep -c 'cred:' "$out"                       # it found no credential ...
	assert_output 0
	run grep -cF -- "$cred" "$out"                   # ... anywhere
	assert_output 0
	if [ -e "$EXEC_STATE_DIR/out/h1.stderr" ]; then
		run grep -cF -- "$cred" "$EXEC_STATE_DIR/out/h1.stderr"
		assert_output 0
	fi
	grep -q '^limits: ok {"run_id":"h1"' "$out"      # and still reads its own limits file
	grep -q 'outside EXEC_LIMITS_FILE: 0$' "$out"    # its environment names no state
	[ "$(disp_charges h1)" = 1 ]
	state_intact "$size"
}

@test "a hostile guest cannot read its supervisor: descriptors, environment, memory, root; its command line names no state" {
	need_isolation
	write_hostile
	start_dispatcher
	open_session
	run_hostile p1
	out=$EXEC_STATE_DIR/out/p1.stdout
	for a in sup-environ sup-fd sup-maps sup-mem sup-root; do
		grep -q "^$a: failed" "$out" || fail "$a: $(grep "^$a:" "$out")"
	done
	grep -q '^sup-cmdline: ok exec-run .* supervise -- p1' "$out"   # its supervisor's, readable ...
	run grep -cF -- "$EXEC_STATE_DIR" <(grep '^sup-cmdline:' "$out")
	assert_output 0                                  # ... and it does not name the state
	[ "$(disp_charges p1)" = 1 ]
}

@test "a hostile guest can neither unmount what hides the state nor plant a link under out/" {
	need_isolation
	write_hostile
	start_dispatcher
	open_session
	run_hostile l1
	out=$EXEC_STATE_DIR/out/l1.stdout
	grep -q '^unmount: failed' "$out"
	grep -q '^plant: failed' "$out"
	grep -q '^write-out: failed' "$out"
	[ ! -e "$EXEC_STATE_DIR/out/l1-next.stdout" ]
	[ ! -L "$EXEC_STATE_DIR/out/l1-next.stdout" ]
	[ ! -e "$EXEC_STATE_DIR/out/planted" ]
	run succeeded l1
	assert_output ''                                 # every attempt failed
	run grep -c 'state\.db' <(grep '^list-' "$out")
	assert_output 0
	[ "$(disp_charges l1)" = 1 ]
	# the view it was given is gone with the run
	[ ! -e "$EXEC_STATE_DIR/out/l1.guest" ]
}

@test "a hostile guest cannot signal its supervisor, nor any process outside it" {
	need_isolation
	start_dispatcher
	open_session
	said=$(exec-run isolation 2>&1) || true
	# The supervisor is the guest's parent: TERM to it would end the guest
	# as "cancelled"; KILL would leave the run unknown.
	submit "$(printf '{"run_id":"s1","txn_id":"t","program":"/bin/sh","args":["-c","%s"]}' \
		'kill -TERM $PPID && echo term-sent; kill -KILL $PPID && echo kill-sent; kill -0 1 && echo init-signalled; echo done')"
	exec-accept --from-dispatcher >/dev/null
	run exec-run start --wait
	echo "$output"
	cat "$EXEC_STATE_DIR/out/s1.stdout" "$EXEC_STATE_DIR/out/s1.stderr"
	# Landlock ABI < 6 (doc/security.md, residual risks): the guest's uid
	# may signal its supervisor, and it has just done so.
	[[ "$said" != *"can still signal"* ]] || skip "signals are not scoped here: $said"
	assert_output --partial "s1 exited 0: delivered"   # not cancelled, not unknown
	[ "$(cat "$EXEC_STATE_DIR/out/s1.stdout")" = "done" ]
	grep -q 'Operation not permitted' "$EXEC_STATE_DIR/out/s1.stderr"
	[ "$(disp_charges s1)" = 1 ]
}

@test "a link planted at a run's output is never followed: the run is not run, the error names the file, state.db is intact" {
	start_dispatcher
	open_session
	exec-run start --wait >/dev/null                  # out/ exists, the database has its pages
	size=$(stat -c %s "$EXEC_STATE_DIR/state.db")
	sum=$(sqlite3 -readonly "$EXEC_STATE_DIR/state.db" 'SELECT count(*) FROM sessions')
	# What a guest of an executor without isolation could have planted for
	# the next run id: out/n1.stdout -> ../state.db; and a hard link for n2.
	ln -s ../state.db "$EXEC_STATE_DIR/out/n1.stdout"
	ln "$EXEC_STATE_DIR/state.db" "$EXEC_STATE_DIR/out/n2.stderr"
	submit "$(gspec n1)" "$(gspec n2)"
	exec-accept --from-dispatcher >/dev/null
	run exec-run start --wait
	echo "$output"
	assert_output --partial "n1 exec_failed 126: delivered"
	assert_output --partial "n2 exec_failed 126: delivered"
	[ "$(ran n1)" = 0 ]
	[ "$(ran n2)" = 0 ]      # neither guest ran
	run admin GET /admin/runs/n1
	assert_output --partial "not run: cannot create '$EXEC_STATE_DIR/out/n1.stdout': it is a symbolic link (not followed)"
	run admin GET /admin/runs/n2
	assert_output --partial "not run: cannot create '$EXEC_STATE_DIR/out/n2.stderr': File exists"
	[ -L "$EXEC_STATE_DIR/out/n1.stdout" ]            # left as it was
	rm -f "$EXEC_STATE_DIR/out/n2.stderr"
	state_intact "$size"
	[ "$(sqlite3 -readonly "$EXEC_STATE_DIR/state.db" 'SELECT count(*) FROM sessions')" = "$sum" ]
	[ "$(disp_charges n1)" = 1 ] && [ "$(disp_charges n2)" = 1 ]
}

@test "links planted at the supervisors' log, the limits lock and a hook's log are never followed" {
	start_dispatcher
	open_session
	exec-run start --wait >/dev/null
	exec-shares capacity set executor 1000 >/dev/null   # so that a run takes the lock
	for f in supervisors.log limits.lock k1.notify; do
		ln -sfn ../state.db "$EXEC_STATE_DIR/out/$f"
	done
	size=$(stat -c %s "$EXEC_STATE_DIR/state.db")
	# a detached start: its supervisor would log through out/supervisors.log
	submit "$(gspec k0)"
	exec-accept --from-dispatcher >/dev/null
	run exec-run start
	assert_output --partial "cannot create '$EXEC_STATE_DIR/out/supervisors.log': it is a symbolic link (not followed)"
	wait_until '[ "$(disp_count finished)" = 1 ]'
	exec-run wait --timeout-ms "$WAIT_MS"    # its receipt is written after that answer
	# the limits lock: the run is not run, for want of its limits file
	assert_equal "$(sqlite3 -readonly "$EXEC_STATE_DIR/state.db" "SELECT outcome FROM receipts WHERE run_id = 'k0'")" exec_failed
	run admin GET /admin/runs/k0
	assert_output --partial "its limits file could not be written: cannot create '$EXEC_STATE_DIR/out/limits.lock': it is a symbolic link (not followed)"
	# a hook's log: the hook does not run, the change is made
	rm "$EXEC_STATE_DIR/out/limits.lock"
	printf '#!/bin/sh\nenv >%s/hook.env\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/hook"
	chmod 755 "$BATS_TEST_TMPDIR/hook"
	export EXEC_ALLOW_HOOKS=$BATS_TEST_TMPDIR/hook
	exec-shares capacity set executor 100 >/dev/null
	submit "$(printf '{"run_id":"k1","txn_id":"t","program":"/bin/sleep","args":["3600"],"policy":{"notify":"%s"}}' "$BATS_TEST_TMPDIR/hook")"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null 2>&1
	wait_until '[ -s "$EXEC_STATE_DIR/out/k1.limits" ]'
	run --separate-stderr exec-shares capacity set executor 50
	assert_success
	[[ "$stderr" == *"cannot create '$EXEC_STATE_DIR/out/k1.notify': it is a symbolic link (not followed)"* ]] || fail "$stderr"
	[ ! -e "$BATS_TEST_TMPDIR/hook.env" ]
	[ -L "$EXEC_STATE_DIR/out/k1.notify" ]
	[ -L "$EXEC_STATE_DIR/out/supervisors.log" ]
	state_intact "$size"
	exec-run cancel k1 --session "$(current_session)" >/dev/null
	wait_until '[ "$(disp_count finished)" = 2 ]'
	[ "$(disp_charges k0)" = 1 ] && [ "$(disp_charges k1)" = 1 ]
}

@test "a notify hook, named by whoever submitted the run, is not told where the state is" {
	start_dispatcher
	open_session
	printf '#!/bin/sh\nenv >%s/hook.env\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/hook"
	chmod 755 "$BATS_TEST_TMPDIR/hook"
	export EXEC_ALLOW_HOOKS=$BATS_TEST_TMPDIR/hook
	exec-shares capacity set executor 100 >/dev/null
	submit "$(printf '{"run_id":"e1","txn_id":"t","program":"/bin/sleep","args":["3600"],"policy":{"notify":"%s"}}' "$BATS_TEST_TMPDIR/hook")"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null 2>&1
	wait_until '[ -s "$EXEC_STATE_DIR/out/e1.limits" ]'
	exec-shares capacity set executor 50 >/dev/null
	[ -s "$BATS_TEST_TMPDIR/hook.env" ]
	grep -qx 'EXEC_RUN_ID=e1' "$BATS_TEST_TMPDIR/hook.env"
	run grep -c '^EXEC_STATE_DIR=' "$BATS_TEST_TMPDIR/hook.env"
	assert_output 0
	exec-run cancel e1 --session "$(current_session)" >/dev/null
	wait_until '[ "$(disp_count finished)" = 1 ]'
}

@test "an isolated guest sees its limits file change at once, through its view" {
	need_isolation
	start_dispatcher
	open_session
	exec-shares capacity set executor 1000 >/dev/null
	# the guest waits (bounded) until its own limits file says 1234
	cat >"$BATS_TEST_TMPDIR/watch" <<'EOF'
i=0
until grep -q '"executor_bps":1234' "$EXEC_LIMITS_FILE"; do
	i=$((i + 1))
	[ "$i" -lt "$1" ] || exit 9
	sleep 0.025
done
cat "$EXEC_LIMITS_FILE"
EOF
	submit "{\"run_id\":\"v1\",\"txn_id\":\"t\",\"program\":\"/bin/sh\",\"args\":[\"$BATS_TEST_TMPDIR/watch\",\"$WAIT_TRIES\"]}"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null 2>&1
	# its view, beside the real file (made after the file: wait for both)
	wait_until '[ -s "$EXEC_STATE_DIR/out/v1.limits" ] && [ -d "$EXEC_STATE_DIR/out/v1.guest" ]'
	exec-shares capacity set executor 1234 >/dev/null
	wait_until '[ "$(disp_count finished)" = 1 ]'
	# the receipt is written here after the dispatcher's answer, and the
	# view removed after that: the supervisor's end is the event
	exec-run wait --timeout-ms "$WAIT_MS"
	assert_equal "$(sqlite3 -readonly "$EXEC_STATE_DIR/state.db" "SELECT outcome || ' ' || exit_code FROM receipts WHERE run_id = 'v1'")" "exited 0"
	grep -q '"executor_bps":1234' "$EXEC_STATE_DIR/out/v1.stdout"
	[ ! -e "$EXEC_STATE_DIR/out/v1.guest" ]
}

@test "--guest-user: the guest runs as that user, shut out of the state, its limits through its view" {
	[ "$(id -u)" = 0 ] || skip "--guest-user needs root (or CAP_SETUID, CAP_SETGID, CAP_KILL)"
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	need_isolation --guest-user nobody
	write_hostile
	start_dispatcher
	open_session
	exec-shares capacity set executor 1000 >/dev/null   # so that it has a limits file
	run_hostile u1 --guest-user nobody
	out=$EXEC_STATE_DIR/out/u1.stdout
	run succeeded u1
	assert_output ''                                 # every attempt failed
	grep -q '^list-state: failed' "$out"
	grep -q '^limits: ok {"run_id":"u1"' "$out"
	grep -q 'outside EXEC_LIMITS_FILE: 0$' "$out"
	[ "$(disp_charges u1)" = 1 ]
}

@test "--require-isolation refuses to run guests that would not be isolated (exit 78): the runs stay queued" {
	# Unavailability simulated the documented way: --isolation none forces
	# the choice a machine without user namespaces would make.
	start_dispatcher
	open_session
	submit "$(gspec q1)"
	exec-accept --from-dispatcher >/dev/null
	run exec-run --isolation none --require-isolation isolation
	[ "$status" -eq "$EK_VERSION" ]                  # 78, EX_CONFIG
	assert_output --partial "guests would not be isolated (--isolation none) and --require-isolation is given"
	run exec-run --isolation none --require-isolation start --wait
	[ "$status" -eq "$EK_VERSION" ]
	run exec-run --isolation none --require-isolation supervise q1
	[ "$status" -eq "$EK_VERSION" ]
	[ "$(val "SELECT state FROM runs WHERE run_id = 'q1'")" = queued ]   # no start marker
	[ "$(ran q1)" = 0 ]
	run exec-loop --dispatcher "$DISP_URL" --isolation none --require-isolation
	[ "$status" -eq "$EK_VERSION" ]
	assert_output --partial "--require-isolation is given"
	[ "$(val "SELECT state FROM runs WHERE run_id = 'q1'")" = queued ]
	# and without --require-isolation it runs, unisolated, as asked
	run exec-run --isolation none start --wait
	assert_success
	assert_output --partial "q1 exited 0: delivered"
	[ "$(ran q1)" = 1 ]
}
