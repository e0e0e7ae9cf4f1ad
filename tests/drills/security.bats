#!/usr/bin/env bats
# The state directory keeps its secrets: modes that hold under any umask,
# a session credential that never leaves state.db (nor the Authorization
# header), an executor key that leaves it only in the negotiation's body,
# and inputs shaped like SQL injection stored verbatim with the schema
# untouched.

load drill

@test "under umask 000 the state directory is 0700 and every file in it 0600 (state.db, -wal, -shm, out/*)" {
	umask 000
	start_dispatcher
	open_session
	submit "$(gspec u1 0 1)" "$(gspec u2)" \
		'{"run_id":"u3","txn_id":"t","program":"/bin/sh","args":["-c","echo out; echo err >&2"]}'
	exec-accept --from-dispatcher >/dev/null
	exec-run start --slots 3 >/dev/null            # detached: out/supervisors.log too
	wait_until '[ "$(val "SELECT count(*) FROM receipts")" = 2 ]'
	# while a supervisor holds the database open
	[ -e "$EXEC_STATE_DIR/state.db-wal" ]
	[ -e "$EXEC_STATE_DIR/state.db-shm" ]
	modes() {
		stat -c '%a %n' "$EXEC_STATE_DIR" "$EXEC_STATE_DIR/out"
		find "$EXEC_STATE_DIR" -mindepth 1 -type f -exec stat -c '%a %n' {} +
	}
	run modes
	echo "$output"
	[ "$(grep -c . <<<"$output")" -ge 10 ]          # dir, out/, db, wal, shm, log, outputs...
	assert_line "700 $EXEC_STATE_DIR"
	assert_line "700 $EXEC_STATE_DIR/out"
	assert_line "600 $EXEC_STATE_DIR/state.db"
	assert_line "600 $EXEC_STATE_DIR/state.db-wal"
	assert_line "600 $EXEC_STATE_DIR/state.db-shm"
	assert_line "600 $EXEC_STATE_DIR/out/supervisors.log"
	assert_line "600 $EXEC_STATE_DIR/out/u3.stdout"
	[ "$(grep -vc '^[67]00 ' <<<"$output")" = 0 ]
	[ "$(grep -c '^600 ' <<<"$output")" = $(($(grep -c . <<<"$output") - 2)) ]
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS"
	run modes
	[ "$(grep -c '^600 ' <<<"$output")" = $(($(grep -c . <<<"$output") - 2)) ]
}

# A dispatcher that logs (no --quiet), to $BATS_TEST_TMPDIR/disp.log: the
# log is one more place a secret must not reach.
start_logging_dispatcher() {
	spawn_dispatcher 0 || return 1
	DISP_URL="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/disp.port")"
	enroll_executors
}

@test "the session credential appears in no argv, environment, stderr, log or output" {
	start_logging_dispatcher
	exec 4>"$BATS_TEST_TMPDIR/all.out"
	specs=()
	for i in 1 2 3; do specs+=("$(gspec "x$i" 0 1)"); done
	submit "${specs[@]}" "$(gspec x4)"
	fault 5xx 2                                   # failures leave diagnostics too
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 3 -v >&4 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 3 ]'
	cred=$(val "SELECT credential FROM sessions WHERE status = 'current'")
	[ "${#cred}" -ge 32 ]
	# every live process of the executor: the loop, what it runs, supervisors, guests
	for p in $loop $(pgrep -P "$loop") $(val "SELECT sup_pid FROM runs WHERE sup_pid > 0") \
		$(val "SELECT guest_pid FROM runs WHERE guest_pid > 0"); do
		[ -r "/proc/$p/cmdline" ] || continue
		if grep -qaF -- "$cred" "/proc/$p/cmdline" "/proc/$p/environ"; then
			echo "credential in the argv or environment of $p: $(tr '\0' ' ' <"/proc/$p/cmdline")"
			false
		fi
		echo "$p" >>"$BATS_TEST_TMPDIR/looked"
	done
	[ "$(wc -l <"$BATS_TEST_TMPDIR/looked")" -ge 7 ]      # loop + 3 supervisors + 3 guests at least
	# and no supervisor's command line (its guest reads it) names the state
	for p in $(val "SELECT sup_pid FROM runs WHERE sup_pid > 0"); do
		! grep -qaF -- "$EXEC_STATE_DIR" "/proc/$p/cmdline" ||
			fail "supervisor $p names the state: $(tr '\0' ' ' <"/proc/$p/cmdline")"
	done
	touch "$GO"
	wait_until '[ "$(disp_count finished)" = 4 ]'
	# every tool's output, human and JSON, with the session current
	for t in "exec-session show" "exec-session report" "exec-session heartbeat" "exec-run sweep" \
		"exec-reconcile" "exec-report x1"; do
		$t >&4 2>&4 || true
		$t --json >&4 2>&4 || true
	done
	kill -TERM "$loop"
	wait "$loop"
	exec-session show --json >&4 2>&4
	exec 4>&-
	stop_dispatcher
	for f in "$BATS_TEST_TMPDIR/all.out" "$BATS_TEST_TMPDIR/loop.err" "$BATS_TEST_TMPDIR/disp.log" \
		"$EXEC_STATE_DIR"/out/* "$BATS_TEST_TMPDIR/disp.db"; do
		! grep -qaF -- "$cred" "$f" || { echo "credential found in $f"; false; }
	done
	[ -s "$BATS_TEST_TMPDIR/all.out" ]
	# the supervisors wrote to the loop's activity log (exec-run start --log-fd)
	grep -q ' x4 exited 0: ' "$BATS_TEST_TMPDIR/loop.err" || fail "no supervisor line in the loop's log"
	grep -qaF -- "$cred" "$EXEC_STATE_DIR/state.db"       # it is stored, and only there
}

@test "the executor key appears in no tool's output, log, argv or guest environment; the dispatcher keeps its SHA-256" {
	start_logging_dispatcher
	exec 4>"$BATS_TEST_TMPDIR/all.out"
	exec-session open --dispatcher "$DISP_URL" >&4 2>&4
	exec-session open --adopt --json --dispatcher "$DISP_URL" >&4 2>&4
	key=$(val "SELECT value FROM meta WHERE key = 'executor_key'")
	[[ $key =~ ^[0-9a-f]{64}$ ]]
	# a guest that prints its whole environment, and one that waits
	submit '{"run_id":"k1","txn_id":"t-k1","program":"/usr/bin/env"}' "$(gspec k2 0 1)"
	exec-accept --from-dispatcher >&4 2>&4
	exec-run start --slots 2 >&4 2>&4               # detached: out/supervisors.log too
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE run_id = '\''k2'\'' AND guest_pid > 0")" = 1 ]'
	for p in $(val "SELECT sup_pid FROM runs WHERE sup_pid > 0") \
		$(val "SELECT guest_pid FROM runs WHERE guest_pid > 0"); do
		[ -r "/proc/$p/cmdline" ] || continue
		if grep -qaF -- "$key" "/proc/$p/cmdline" "/proc/$p/environ"; then
			fail "the key is in the argv or environment of $p: $(tr '\0' ' ' <"/proc/$p/cmdline")"
		fi
		echo "$p" >>"$BATS_TEST_TMPDIR/looked"
	done
	[ "$(wc -l <"$BATS_TEST_TMPDIR/looked")" -ge 2 ]      # k2's supervisor and guest at least
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS" >&4 2>&4
	grep -q '^EXEC_RUN_ID=k1$' "$EXEC_STATE_DIR/out/k1.stdout"   # the guest's environment, whole
	# every tool's output, human and JSON
	for t in "exec-session show" "exec-session report" "exec-session heartbeat" "exec-run sweep" \
		"exec-reconcile" "exec-report k1" "exec-inspect show k1" "exec-inspect summary" \
		"exec-inspect list receipts" "exec-inspect metrics"; do
		$t >&4 2>&4 || true
		$t --json >&4 2>&4 || true
	done
	# and a refusal: another state claiming this executor id
	EXEC_STATE_DIR=$BATS_TEST_TMPDIR/forged exec-session open --dispatcher "$DISP_URL" >/dev/null
	sqlite3 "$BATS_TEST_TMPDIR/forged/state.db" \
		"UPDATE meta SET value = '$(val "SELECT value FROM meta WHERE key = 'executor_id'")' WHERE key = 'executor_id'"
	run env EXEC_STATE_DIR="$BATS_TEST_TMPDIR/forged" exec-session open --dispatcher "$DISP_URL"
	[ "$status" -eq "$EK_NOSESSION" ]
	printf '%s\n' "$output" >&4
	exec 4>&-
	stop_dispatcher
	grep -q executor_key_mismatch "$BATS_TEST_TMPDIR/all.out"
	for f in "$BATS_TEST_TMPDIR/all.out" "$BATS_TEST_TMPDIR/disp.log" "$EXEC_STATE_DIR"/out/* \
		"$BATS_TEST_TMPDIR/disp.db"*; do
		! grep -qaF -- "$key" "$f" || fail "the executor key found in $f"
	done
	grep -qaF -- "$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)" "$BATS_TEST_TMPDIR/disp.db"
	grep -qaF -- "$key" "$EXEC_STATE_DIR/state.db"       # it is stored, and only there
}

@test "inputs shaped like SQL injection are stored verbatim and leave both schemas unchanged" {
	start_dispatcher
	open_session
	evil="'); DROP TABLE runs;--"
	evil2='" OR 1=1; DELETE FROM results WHERE "1"="1'
	schema() { sqlite3 -readonly "$EXEC_STATE_DIR/state.db" .schema; sqlite3 -readonly "$BATS_TEST_TMPDIR/disp.db" .schema; }
	before=$(schema)
	jq_str() { sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1"; }
	e=$(jq_str "$evil")
	e2=$(jq_str "$evil2")
	# through the dispatcher: txn_id, args and env values
	submit "{\"run_id\":\"sq1\",\"txn_id\":\"$e\",\"program\":\"/usr/bin/env\",\"args\":[\"-u\",\"X\"],\"env\":{\"EVIL\":\"$e\",\"EVIL2\":\"$e2\"}}"
	exec-accept --from-dispatcher >/dev/null
	# from stdin: the program and an argument
	printf '%s\n' "{\"run_id\":\"sq2\",\"txn_id\":\"$e2\",\"program\":\"/no/such/$e\",\"args\":[\"$e2\"]}" |
		exec-accept >/dev/null
	# a run id shaped like it is refused, and nothing is written
	run exec-accept <<<"{\"run_id\":\"x'); DROP TABLE runs;--\",\"txn_id\":\"t\",\"program\":\"/bin/true\"}"
	[ "$status" -eq "$EK_DATAERR" ]
	run exec-report "x'); DROP TABLE results;--"
	[ "$status" -eq "$EK_DATAERR" ] || [ "$status" -eq "$EK_USAGE" ]
	[ "$(val "SELECT run_id FROM accepts ORDER BY run_id" | tr '\n' ' ')" = "sq1 sq2 " ]
	# stored verbatim
	[ "$(val "SELECT txn_id FROM runs WHERE run_id = 'sq1'")" = "$evil" ]
	[ "$(val "SELECT txn_id FROM runs WHERE run_id = 'sq2'")" = "$evil2" ]
	[ "$(val "SELECT program FROM runs WHERE run_id = 'sq2'")" = "/no/such/$evil" ]
	[ "$(val "SELECT json_extract(env, '\$.EVIL') FROM runs WHERE run_id = 'sq1'")" = "$evil" ]
	[ "$(val "SELECT json_extract(args, '\$[0]') FROM runs WHERE run_id = 'sq2'")" = "$evil2" ]
	run exec-run start --wait                               # sq2 is unknown to the dispatcher: refused
	[ "$status" -eq "$EK_PROTOCOL" ]
	grep -qxF "EVIL=$evil" "$EXEC_STATE_DIR/out/sq1.stdout"      # the guest got it verbatim
	grep -qxF "EVIL2=$evil2" "$EXEC_STATE_DIR/out/sq1.stdout"
	grep -qxF "EXEC_TXN_ID=$evil" "$EXEC_STATE_DIR/out/sq1.stdout"
	run val "SELECT message FROM results WHERE run_id = 'sq2'"
	assert_output --partial "/no/such/$evil"
	[ "$(schema)" = "$before" ]
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'sq1'")" = 1 ]
	check
}
