#!/usr/bin/env bats
# exec-run: start, supervise, choose once, retain, report, delete; cancel.
# SPEC section 3: "Choose once, retain, then report", "Bounded delivery",
# "Refusals", "Acknowledgement", "Unknown is a state", "Quarantine".

load helpers

# TS: how a detached supervisor's lines begin (the local time, with its offset).
TS='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{4}'

@test "a run runs once, its result is acknowledged and the execution row is deleted" {
	ready r1 /bin/echo '["hello"]'
	run exec-run start --wait
	assert_success
	assert_output --partial "r1 exited 0: delivered"
	[ "$(cat "$EXEC_STATE_DIR/out/r1.stdout")" = hello ]
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	[ "$(sql "SELECT outcome || ' ' || exit_code || ' ' || attempts FROM receipts WHERE run_id='r1'")" = "exited 0 1" ]
	[ "$(sql "SELECT record_id FROM receipts")" = "$(disp_field r1 record_id)" ]
	[ "$(disp_charges r1)" = 1 ]
}

@test "guest status follows shell conventions and the raw wait status is kept" {
	start_dispatcher
	open_session
	printf '#!/bin/sh\n' >"$BATS_TEST_TMPDIR/noexec"
	chmod 644 "$BATS_TEST_TMPDIR/noexec"
	submit_and_accept "$(spec ex3 /bin/sh '["-c","exit 3"]')" \
		"$(spec sig /bin/sh '["-c","kill -9 $$"]')" \
		"$(spec nf /no/such/program)" \
		"$(spec nx "$BATS_TEST_TMPDIR/noexec")" \
		"$(spec slow /bin/sleep '["30"]' '"timeout_ms":300')"
	fault 5xx 100   # keep the results retained so they can be read
	run exec-run start --wait --slots 8 --budget-ms 200
	assert_success
	[ "$(sql "SELECT outcome, exit_code, wait_status FROM results WHERE run_id='ex3'")" = "exited|3|768" ]
	[ "$(sql "SELECT outcome, exit_code, wait_status FROM results WHERE run_id='sig'")" = "killed|137|9" ]
	[ "$(sql "SELECT outcome, exit_code, wait_status IS NULL FROM results WHERE run_id='nf'")" = "exec_failed|127|1" ]
	[ "$(sql "SELECT outcome, exit_code FROM results WHERE run_id='nx'")" = "exec_failed|126" ]
	[ "$(sql "SELECT outcome, exit_code FROM results WHERE run_id='slow'")" = "timeout|124" ]
	run sql "SELECT message FROM results WHERE run_id='nf'"
	assert_output --partial "No such file or directory"
}

@test "the guest gets a clean environment and no shell" {
	ready env1 /usr/bin/env '[]' '"env":{"GREETING":"hi there; $(id)"}'
	SECRET_OF_THE_CALLER=leak run exec-run start --wait
	assert_success
	out="$EXEC_STATE_DIR/out/env1.stdout"
	grep -qx 'EXEC_RUN_ID=env1' "$out"
	grep -qx 'EXEC_TXN_ID=t-env1' "$out"
	grep -qx "EXEC_LIMITS_FILE=$EXEC_STATE_DIR/out/env1.limits" "$out"   # its view (doc/security.md)
	grep -qx 'GREETING=hi there; $(id)' "$out"
	run grep -c SECRET_OF_THE_CALLER "$out"
	assert_output 0
	run grep -c '^EXEC_STATE_DIR=' "$out"      # never where the state is
	assert_output 0
}

@test "captured output is bounded" {
	ready big /bin/sh '["-c","head -c 3000000 /dev/zero; echo err >&2"]'
	run exec-run start --wait --max-output 1000
	assert_success
	[ "$(stat -c %s "$EXEC_STATE_DIR/out/big.stdout")" = 1000 ]
	[ "$(cat "$EXEC_STATE_DIR/out/big.stderr")" = err ]
	[ "$(stat -c %a "$EXEC_STATE_DIR/out/big.stdout")" = 600 ]
}

@test "captured output is truncated past --max-output and past the executor's --output-quota, and flagged" {
	ready big /bin/sh '["-c","head -c 300000 /dev/zero; echo err >&2"]'
	run exec-run start --wait --max-output 1000000 --output-quota 100000
	assert_success
	local out=$EXEC_STATE_DIR/out
	[ "$(stat -c %s "$out/big.stdout")" -gt 0 ]
	[ "$(($(stat -c %s "$out/big.stdout") + $(stat -c %s "$out/big.stderr" 2>/dev/null || echo 0)))" -le 100000 ]
	grep -q "^stdout: [0-9]* bytes kept, [0-9]* dropped, past the executor's output quota (100000 bytes)" "$out/big.truncated"
	[ "$(stat -c %a "$out/big.truncated")" = 600 ]
	run exec-inspect show big
	assert_output --regexp "truncated: +stdout: [0-9]+ bytes kept, [0-9]+ dropped, past the executor's output quota"
	exec-inspect show --json big | jq -e '.story.truncated | test("output quota")' >/dev/null
	# past --max-output (the quota far off): flagged too, and said in the log
	submit_and_accept "$(spec cap /bin/sh '["-c","head -c 3000 /dev/zero"]')"
	exec-run start --max-output 1000 --output-quota 0 >/dev/null
	wait_until '[ -e "$EXEC_STATE_DIR/out/cap.truncated" ]'
	[ "$(cat "$out/cap.truncated")" = "stdout: 1000 bytes kept, 2000 dropped, past --max-output (1000 bytes)" ]
	wait_until 'grep -q "run '\''cap'\'': output truncated: stdout: 1000 bytes kept" "$out/supervisors.log"'
	# a run that lost nothing is not flagged
	submit_and_accept "$(spec small /bin/sh '["-c","echo hi"]')"
	exec-run start --wait >/dev/null
	[ ! -e "$out/small.truncated" ]
	run exec-inspect show small
	refute_output --partial "truncated:"
	exec-inspect show --json small | jq -e '.story.truncated == null' >/dev/null
	run exec-run start --output-quota lots
	[ "$status" -eq "$EK_USAGE" ]
}

@test "a capture file is made on the guest's first byte: a silent guest leaves none" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec quiet)" "$(spec errs /bin/sh '["-c","echo e >&2"]')"
	run exec-run start --wait
	assert_success
	[ ! -e "$EXEC_STATE_DIR/out/quiet.stdout" ]
	[ ! -e "$EXEC_STATE_DIR/out/quiet.stderr" ]
	[ ! -e "$EXEC_STATE_DIR/out/errs.stdout" ]
	[ "$(cat "$EXEC_STATE_DIR/out/errs.stderr")" = e ]
	run --separate-stderr exec-inspect logs quiet
	[ "$status" -eq "$EK_NOINPUT" ]
	[[ "$stderr" == *"run 'quiet': no captured stdout (out/quiet.stdout): it wrote none, or it was removed"* ]] || fail "$stderr"
	run exec-inspect show quiet --json
	assert_output --partial '"stdout":null,"stderr":null'
}

@test "a capture file that cannot be made when the first byte comes loses that output only" {
	local go=$BATS_TEST_TMPDIR/go target=$BATS_TEST_TMPDIR/target
	ready late /bin/sh "[\"-c\",\"$(guest_wait "$go"); echo secret; echo kept >&2\"]"
	exec-run supervise late >"$BATS_TEST_TMPDIR/sup.out" 2>&1 3>&- &
	local sup=$!
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'late'"'")" -gt 0 ]'
	# planted after the start's check, before the guest writes
	echo before >"$target"
	ln -s "$target" "$EXEC_STATE_DIR/out/late.stdout"
	touch "$go"
	wait "$sup" || fail "supervise: $(cat "$BATS_TEST_TMPDIR/sup.out")"
	[ "$(cat "$target")" = before ]                  # never written through the link
	[ -L "$EXEC_STATE_DIR/out/late.stdout" ]
	[ "$(cat "$EXEC_STATE_DIR/out/late.stderr")" = kept ]
	run cat "$BATS_TEST_TMPDIR/sup.out"
	assert_output --partial "run 'late': its stdout is not kept: cannot create '$EXEC_STATE_DIR/out/late.stdout': it is a symbolic link (not followed)"
	assert_output --partial "late exited 0: delivered"
	[ "$(disp_charges late)" = 1 ]
}

@test "the result is retained before the first send: a crash after retain loses nothing and runs nothing twice" {
	ready once /bin/sh "[\"-c\",\"echo ran >> $BATS_TEST_TMPDIR/count\"]"
	EXEC_CRASH_AT=retained run exec-run start --wait
	[ "$(wc -l <"$BATS_TEST_TMPDIR/count")" = 1 ]
	[ "$(sql "SELECT attempts FROM results WHERE run_id='once'")" = 0 ]
	[ "$(disp_reports once)" = 0 ]
	run exec-run start --wait     # sweeps: the run has a result, so it is finished, not re-run
	assert_success
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]
	[ "$(wc -l <"$BATS_TEST_TMPDIR/count")" = 1 ]
	run exec-report once
	assert_success
	assert_output --partial "delivered once"
	[ "$(disp_charges once)" = 1 ]
}

@test "a crash between choosing and committing leaves no result and an unknown run" {
	ready c1 /bin/sh "[\"-c\",\"echo ran >> $BATS_TEST_TMPDIR/count\"]"
	EXEC_CRASH_AT=result-chosen run exec-run start --wait
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	run exec-run sweep
	assert_output --partial "1 run became unknown"
	[ "$(sql "SELECT state FROM runs WHERE run_id='c1'")" = unknown ]
	run exec-run start --wait
	[ "$(wc -l <"$BATS_TEST_TMPDIR/count")" = 1 ]
	[ "$(sql "SELECT state FROM runs WHERE run_id='c1'")" = unknown ]
}

@test "the sweep keeps a quarantined run's row, even once its result is retained" {
	local go=$BATS_TEST_TMPDIR/go
	ready q1 /bin/sh "[\"-c\",\"$(guest_wait "$go")\"]"
	EXEC_CRASH_AT=retained exec-run supervise q1 >/dev/null 2>&1 3>&- &
	local sup=$!
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'q1'"'")" -gt 0 ]'
	open_session                                   # q1 is quarantined from here on
	touch "$go"
	wait "$sup" || true                            # chose, retained, then died
	[ "$(sql "SELECT count(*) FROM results WHERE run_id='q1'")" = 1 ]
	run exec-run sweep
	assert_success
	[ "$(sql "SELECT state FROM runs WHERE run_id='q1'")" = started ]   # never deleted
	run exec-inspect list quarantined --ids
	assert_output --partial q1
}

@test "at most 3 attempts against a failing dispatcher, then the result stays retained" {
	ready f1
	fault 5xx 10
	run exec-run start --wait --budget-ms 5000
	assert_success
	assert_output --partial "f1 exited 0: delivery failed (3 attempts)"
	[ "$(disp_reports f1)" = 3 ]
	[ "$(sql "SELECT attempts, refused FROM results WHERE run_id='f1'")" = "3|0" ]
	run sql "SELECT last_diag FROM results WHERE run_id='f1'"
	assert_output --partial "HTTP 503"
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]   # the execution row is gone anyway
}

@test "every attempt sends byte-identical content, the stored body" {
	ready b1 /bin/echo '["x"]'
	fault 5xx 10
	exec-run start --wait
	run disp_hashes b1
	[ "${#lines[@]}" -eq 3 ]
	[ "$(disp_hashes b1 | sort -u | wc -l)" = 1 ]
	stored=$(sqlite3 -readonly "$EXEC_STATE_DIR/state.db" "SELECT hex(body) FROM results WHERE run_id='b1'" |
		xxd -r -p | sha256sum | cut -d' ' -f1)
	[ "$(disp_hashes b1 | head -1)" = "$stored" ]
	admin DELETE /admin/faults
	exec-report b1
	[ "$(disp_hashes b1 | sort -u | wc -l)" = 1 ]
}

@test "a hanging dispatcher cannot stretch cleanup past the budget" {
	ready h1
	fault hang 10 30000
	start=$(date +%s%N)
	run exec-run start --wait --budget-ms 1000
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	assert_success
	echo "elapsed ${elapsed} ms" >&3
	[ "$elapsed" -lt 2500 ]
	[ "$(sql "SELECT attempts FROM results WHERE run_id='h1'")" -ge 1 ]
	[ "$(sql "SELECT attempts FROM results WHERE run_id='h1'")" -le 3 ]
}

@test "a session revoked mid-delivery stops delivery at once" {
	ready rv1
	fault 5xx 1
	fault delay 1 1500
	exec-run start --wait --budget-ms 8000 >"$BATS_TEST_TMPDIR/out" &
	pid=$!
	wait_until '[ "$(disp_reports rv1)" -ge 1 ]' 
	admin POST "/admin/sessions/$(current_session)/revoke"
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/out"
	grep -q "rv1 exited 0: not delivered: session over (2 attempts)" "$BATS_TEST_TMPDIR/out"
	[ "$(sql "SELECT attempts, refused FROM results WHERE run_id='rv1'")" = "2|0" ]
	[ "$(sql "SELECT status FROM sessions")" = revoked ]
	[ "$(disp_charges rv1)" = 0 ]
	run exec-report rv1        # no authority left: nothing is sent
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(disp_reports rv1)" = 2 ]
}

@test "a duplicate report after a lost acknowledgement is charged once" {
	ready d1
	fault drop_ack 1
	run exec-run start --wait
	assert_success
	assert_output --partial "d1 exited 0: delivered (2 attempts): duplicate"
	[ "$(disp_reports d1)" = 2 ]
	[ "$(disp_charges d1)" = 1 ]
	[ "$(sql "SELECT attempts FROM receipts WHERE run_id='d1'")" = 2 ]
}

@test "a malformed acknowledgement is transient, then the duplicate is acknowledged" {
	ready m1
	fault malformed 1
	run exec-run start --wait
	assert_output --partial "m1 exited 0: delivered (2 attempts)"
	[ "$(disp_charges m1)" = 1 ]
}

@test "refusal unknown_run: recorded once, kept as evidence, never retried" {
	start_dispatcher
	open_session
	spec u1 | exec-accept >/dev/null      # the dispatcher never handed this run out
	run --separate-stderr exec-run start --wait
	# the refusal is in the exit status, as exec-report's, not only in the line
	[ "$status" -eq "$EK_PROTOCOL" ] || fail "status $status: $stderr"
	assert_output --partial "u1 exited 0: delivery refused (1 attempt)"
	[ "$stderr" = "exec-run: a result was refused by the dispatcher (kept as evidence: exec-inspect list refused)" ] ||
		fail "stderr: $stderr"
	[ "$(sql "SELECT refused, refused_cause, attempts FROM results WHERE run_id='u1'")" = "1|unknown_run|1" ]
	run exec-report u1
	[ "$status" -eq "$EK_PROTOCOL" ]
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT attempts FROM results WHERE run_id='u1'")" = 1 ]
	# a supervisor run by hand says it the same way; a delivered one exits 0
	spec u2 | exec-accept >/dev/null
	run exec-run supervise u2
	[ "$status" -eq "$EK_PROTOCOL" ]
	assert_output --partial "u2 exited 0: delivery refused (1 attempt)"
	submit_and_accept "$(spec d1)"
	run exec-run start --wait
	assert_success
	assert_output --partial "d1 exited 0: delivered"
}

@test "refusal wrong_session: a run owned by another executor's session" {
	start_dispatcher
	admin POST /admin/runs "$(spec w1)" >/dev/null
	EXEC_STATE_DIR="$BATS_TEST_TMPDIR/other" exec-session open --dispatcher "$DISP_URL" >/dev/null
	EXEC_STATE_DIR="$BATS_TEST_TMPDIR/other" exec-accept --from-dispatcher >/dev/null
	open_session
	spec w1 | exec-accept >/dev/null
	run exec-run start --wait
	assert_output --partial "refused"
	[ "$(sql "SELECT refused_cause FROM results WHERE run_id='w1'")" = wrong_session ]
	[ "$(disp_reports w1)" = 1 ]
}

@test "refusals invalid and conflict are recorded with their cause" {
	ready i1
	exec-run start --wait >/dev/null
	inc=$(sql "SELECT incarnation FROM sessions")
	sid=$(current_session)
	# A second, different result for an acknowledged run: the dispatcher has a conflict.
	sqlite3 "$EXEC_STATE_DIR/state.db" "INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body) VALUES ('i1', '$inc', '$sid', 'exited', 9, 'm', 1, CAST('{\"run_id\":\"i1\",\"incarnation\":\"$inc\",\"session_id\":\"$sid\",\"outcome\":\"exited\",\"exit_code\":9,\"wait_status\":null,\"message\":\"m\",\"chosen_at\":1}' AS BLOB))"
	run exec-report i1
	[ "$status" -eq "$EK_PROTOCOL" ]
	[ "$(sql "SELECT refused_cause FROM results WHERE run_id='i1'")" = conflict ]
	sqlite3 "$EXEC_STATE_DIR/state.db" "DELETE FROM results"
	sqlite3 "$EXEC_STATE_DIR/state.db" "INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body) VALUES ('i1', '$inc', '$sid', 'exited', 0, 'm', 1, CAST('{\"run_id\":\"i1\"}' AS BLOB))"
	run exec-report i1
	[ "$status" -eq "$EK_PROTOCOL" ]
	[ "$(sql "SELECT refused_cause FROM results WHERE run_id='i1'")" = invalid ]
	[ "$(disp_charges i1)" = 1 ]
}

@test "cancel of a queued run: never started, one cancelled result delivered" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec q1 /bin/sh "[\"-c\",\"touch $BATS_TEST_TMPDIR/ran\"]")"
	run exec-run cancel q1 --session "$(current_session)"
	assert_success
	assert_output --partial "q1 cancelled 143: delivered"
	run exec-run start --wait
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	[ "$(sql "SELECT outcome FROM receipts WHERE run_id='q1'")" = cancelled ]
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]
}

@test "two cancels of one queued run: the later chooser sees the first one's result, even acknowledged" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec c1)"
	local sid pid
	sid=$(current_session)
	# one cancel has marked the run and stops before it chooses ...
	EXEC_PAUSE_AT=cancel-marked exec-run cancel c1 --session "$sid" >"$BATS_TEST_TMPDIR/late" 2>&1 &
	pid=$!
	wait_until "stopped $pid"
	# ... while the other chooses, delivers, is acknowledged and releases the row
	run exec-run cancel c1 --session "$sid"
	assert_success
	assert_output --partial "c1 cancelled 143: delivered"
	[ "$(sql "SELECT count(*) FROM receipts WHERE run_id = 'c1'") $(sql "SELECT count(*) FROM results")" = "1 0" ]
	kill -CONT "$pid"
	wait "$pid" || fail "the later cancel failed: $(cat "$BATS_TEST_TMPDIR/late")"
	grep -q "already acknowledged" "$BATS_TEST_TMPDIR/late" || fail "$(cat "$BATS_TEST_TMPDIR/late")"
	# one result: nothing chosen a second time, nothing refused, one body at the dispatcher
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	[ "$(disp_reports c1)" = 1 ]
	[ "$(disp_hashes c1 | sort -u | wc -l)" = 1 ]
}

@test "cancel of a running run ends the guest; one result" {
	ready s1 /bin/sleep '["3600"]'
	exec-run start --wait >"$BATS_TEST_TMPDIR/out" &
	pid=$!
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'s1'"'")" -gt 0 ]' 
	run exec-run cancel s1 --session "$(current_session)"
	assert_success
	wait "$pid"
	grep -q "s1 cancelled 143: delivered" "$BATS_TEST_TMPDIR/out"
	[ "$(sql "SELECT count(*) FROM receipts")" = 1 ]
	[ "$(disp_reports s1)" = 1 ]
}

@test "cancel of a run whose supervisor is gone marks it unknown, never cancelled, and sends nothing" {
	ready s1 /bin/sleep '["300"]'
	exec-run start >/dev/null                        # a detached supervisor
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'s1'"'")" -gt 0 ]'
	local sup
	sup=$(sql "SELECT sup_pid FROM runs WHERE run_id='s1'")
	kill -KILL "$sup"                                # the supervisor vanishes, the guest may not
	wait_until '[ "$(ps -o stat= -p "$sup" | cut -c1)" != S ]'
	run exec-run cancel s1 --session "$(current_session)"
	[ "$status" -eq "$EK_NOINPUT" ]
	assert_output --partial "marked unknown, not cancelled"
	[ "$(sql "SELECT state FROM runs WHERE run_id='s1'")" = unknown ]
	[ "$(sql "SELECT count(*) FROM results") $(sql "SELECT count(*) FROM receipts")" = "0 0" ]
	[ "$(disp_reports s1)" = 0 ]
	run exec-run cancel s1 --session "$(current_session)"   # unknown stays unknown
	[ "$status" -eq "$EK_NOINPUT" ]
	run exec-reconcile
	[ "$(disp_reports s1)" = 0 ]
}

@test "exit and cancel racing yield exactly one result, enforced by the database" {
	start_dispatcher
	open_session
	for i in $(seq 1 12); do
		submit_and_accept "$(spec race$i /bin/sleep "[\"0.0$((i % 4))\"]")"
		exec-run start --wait >/dev/null &
		pid=$!
		wait_until '[ "$(sql "SELECT (SELECT count(*) FROM runs WHERE run_id='"'race$i'"' AND state='"'started'"') + (SELECT count(*) FROM receipts WHERE run_id='"'race$i'"')")" != 0 ]' 
		exec-run cancel "race$i" --session "$(current_session)" >/dev/null 2>&1 || true
		wait "$pid"
		[ "$(sql "SELECT count(*) FROM receipts WHERE run_id='race$i'") $(sql "SELECT count(*) FROM results WHERE run_id='race$i'")" = "1 0" ]
		[ "$(disp_reports race$i)" = 1 ]
		[ "$(disp_charges race$i)" = 1 ]
	done
	# The primary key is the arbiter: a second result for a run cannot be written.
	run sqlite3 "$EXEC_STATE_DIR/state.db" "INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body) SELECT run_id, incarnation, session_id, 'exited', 0, 'x', 1, x'00' FROM receipts LIMIT 1; INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body) SELECT run_id, incarnation, session_id, 'cancelled', 143, 'x', 1, x'00' FROM receipts LIMIT 1"
	assert_failure
	assert_output --partial "UNIQUE constraint failed"
}

@test "cancel refuses a wrong session and a quarantined run" {
	ready x1 /bin/sleep '["30"]'
	old=$(current_session)
	run exec-run cancel x1 --session ses-nope
	[ "$status" -eq "$EK_NOSESSION" ]
	open_session                             # x1 is now quarantined
	run exec-run cancel x1 --session "$(current_session)"
	[ "$status" -eq "$EK_NOSESSION" ]
	assert_output --partial "quarantined"
	run exec-run cancel x1 --session "$old"
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT state, cancel_at IS NULL FROM runs WHERE run_id='x1'")" = "queued|1" ]
}

@test "quarantined runs are never started by a new session" {
	ready old1 /bin/sh "[\"-c\",\"touch $BATS_TEST_TMPDIR/ran\"]"
	open_session
	run exec-run start --wait
	assert_success
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	[ "$(sql "SELECT state FROM runs WHERE run_id='old1'")" = queued ]
	run exec-run supervise old1
	[ "$status" -eq "$EK_NOSESSION" ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "a supervisor killed while its guest runs leaves an unknown run: kept, never re-run" {
	ready k1 /bin/sh "[\"-c\",\"echo ran >> $BATS_TEST_TMPDIR/count; sleep 30\"]"
	exec-run start >/dev/null
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'k1'"'")" -gt 0 ]' 
	sup=$(sql "SELECT sup_pid FROM runs WHERE run_id='k1'")
	kill -9 "$sup"
	wait_for sh -c "! kill -0 $sup 2>/dev/null"
	run exec-run start --wait
	assert_success
	[ "$(sql "SELECT state FROM runs WHERE run_id='k1'")" = unknown ]
	run sql "SELECT unknown_why FROM runs WHERE run_id='k1'"
	assert_output --partial "supervisor $sup"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/count")" = 1 ]
	run sqlite3 "$EXEC_STATE_DIR/state.db" "DELETE FROM runs WHERE run_id='k1'"
	assert_failure
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE runs SET state='queued' WHERE run_id='k1'"
	assert_failure
	pkill -f "$BATS_TEST_TMPDIR/count" || true
}

@test "the start marker is committed before the guest is spawned" {
	ready sm1 /bin/sh "[\"-c\",\"touch $BATS_TEST_TMPDIR/ran\"]"
	EXEC_CRASH_AT=start-marker run exec-run start --wait
	[ "$(sql "SELECT state, start_marker IS NOT NULL FROM runs WHERE run_id='sm1'")" = "started|1" ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	exec-run start --wait
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]           # never started twice, even though it never ran
	[ "$(sql "SELECT state FROM runs WHERE run_id='sm1'")" = unknown ]
}

@test "--slots bounds the guests running at once" {
	start_dispatcher
	open_session
	# shellcheck disable=SC2046 # a spec a word (none holds a space)
	submit_and_accept $(for i in 1 2 3 4 5; do spec sl$i /bin/sleep '["3600"]'; done)
	run exec-run start --slots 2
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	run exec-run start --slots 2
	[ -z "$output" ]
	[ "$(sql "SELECT count(*) FROM runs WHERE state='started'")" = 2 ]
}

@test "a supervisor syncs the state three times: start marker, result, and at its end the lazy rest" {
	command -v strace >/dev/null || skip "no strace"
	start_dispatcher
	open_session
	submit_and_accept "$(spec y1)" "$(spec y2)" "$(spec y3)"
	# the first two fill and checkpoint the WAL, as any start does; the
	# third meets a WAL that needs neither a checkpoint nor a new header
	exec-run supervise y1 >/dev/null
	exec-run supervise y2 >/dev/null
	# (LeakSanitizer cannot work under ptrace: leaks are checked elsewhere)
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
		strace -f -y -e trace=fdatasync,fsync -o "$BATS_TEST_TMPDIR/trace" exec-run supervise y3 >/dev/null
	run grep -cE 'sync\([0-9]+<[^>]*/state\.db(-wal)?>' "$BATS_TEST_TMPDIR/trace"
	assert_output 3
	[ "$(disp_charges y3)" = 1 ]
}

# sup_syncs TRACE: the syncs of the state's WAL that made the supervisors'
# commits durable: not the starter's (the trace's first process), and not
# a checkpoint's (it syncs the WAL, then state.db: one of each left out).
sup_syncs() {
	awk '!starter { starter = $1 }
		$1 != starter && $2 ~ /sync\([0-9]+<[^>]*\/state\.db-wal>/ { n++ }
		$1 != starter && $2 ~ /sync\([0-9]+<[^>]*\/state\.db>/ { n-- }
		END { print n + 0 }' "$1"
}

@test "a chain syncs twice a run (start marker, result) and once more at its end, for the lazy rest" {
	command -v strace >/dev/null || skip "no strace"
	start_dispatcher
	open_session
	submit_and_accept "$(spec z1)" "$(spec z2)" "$(spec z3)" "$(spec z4)"
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
		strace -f -y -e trace=fdatasync,fsync,execve -o "$BATS_TEST_TMPDIR/trace" \
		exec-run start --chain --slots 1 --wait >/dev/null
	[ "$(sql "SELECT count(*) FROM receipts")" = 4 ]
	[ "$(grep -c 'execve("/bin/true"' "$BATS_TEST_TMPDIR/trace")" = 4 ]
	run sup_syncs "$BATS_TEST_TMPDIR/trace"
	assert_output 9
}

@test "start --chain: one supervisor runs the due runs one after another" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec ch1)" "$(spec ch2)" "$(spec ch3)"
	run exec-run start --chain --slots 1 --wait
	assert_success
	# a line per run (without --chain: one run, one line), then what is left
	[ "$(grep -c ' exited 0: delivered' <<<"$output")" -eq 3 ] || fail "$output"
	# the count is of the runs, not of the supervisors
	assert_line --index 3 "started 3 runs; 0 runs left queued (--slots 1)"
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]
	[ "$(sql "SELECT count(*) FROM receipts")" = 3 ]
	for i in 1 2 3; do [ "$(disp_charges ch$i)" = 1 ] || fail "ch$i charged $(disp_charges ch$i) times"; done
}

# gate ID: a run that waits for the file $BATS_TEST_TMPDIR/open-ID.
gate() {
	spec "$1" /bin/sh "[\"-c\",\"$(guest_wait "$BATS_TEST_TMPDIR/open-$1")\"]"
}

@test "a report refused its session's credential (401) ends the chain, not the session: the heartbeat decides" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec c1)" "$(spec c2)"
	admin POST /admin/faults '{"kind":"lie","path":"/v1/results","status":401,"body":"{\"error\":\"unauthorized\"}","count":1}' >/dev/null
	exec-run start --chain --slots 1 --wait >/dev/null || true
	[ "$(sql "SELECT attempts, refused FROM results WHERE run_id = 'c1'")" = "1|0" ]   # stopped at once, kept
	[ "$(sql "SELECT state FROM runs WHERE run_id = 'c2'")" = queued ]                # no further run taken
	[ "$(sql "SELECT status FROM sessions")" = current ]     # a 401 does not say how it ended
	exec-session heartbeat >/dev/null                        # the dispatcher: still current
	exec-run start --wait >/dev/null
	[ "$(sql "SELECT count(*) FROM receipts")" = 1 ]         # c2, delivered
	exec-reconcile >/dev/null
	[ "$(sql "SELECT count(*) FROM receipts")" = 2 ]
}

@test "--chain: the start marker keeps the slot bound" {
	start_dispatcher
	open_session
	submit_and_accept "$(gate long)" "$(spec q1)"
	run exec-run start --slots 1
	assert_success
	assert_output "started long"
	run exec-run --chain --slots 1 supervise q1
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --partial "run 'q1' is queued: not startable now"
	[ "$(sql "SELECT state FROM runs WHERE run_id='q1'")" = queued ]
	# started by a starter (a ready descriptor), it loses the race quietly:
	# the starter, reading no word, counts it as not started
	run exec-run --chain --slots 1 supervise --ready-fd 3 q1 3>"$BATS_TEST_TMPDIR/ready"
	assert_success
	assert_output ""
	[ ! -s "$BATS_TEST_TMPDIR/ready" ]
	# a detached supervisor's own error line begins with the time
	run exec-run --chain --slots 1 --log-stamps supervise q1
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --regexp "^$TS exec-run: run 'q1' is queued: not startable now"
	[ "$(sql "SELECT state FROM runs WHERE run_id='q1'")" = queued ]
	touch "$BATS_TEST_TMPDIR/open-long"
	run exec-run wait --timeout-ms "$WAIT_MS"
	assert_success
	[ "$(sql "SELECT state FROM runs WHERE run_id='q1'")" = queued ]
}

@test "a starter's supervisor whose run a chaining one already ran and reported says nothing" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec q1)"
	exec-run start --wait >/dev/null
	[ "$(sql "SELECT count(*) FROM runs WHERE run_id='q1'")" = 0 ]   # reported, its row gone
	# the starter chose q1 while it was queued; its supervisor comes late
	run exec-run --chain --slots 1 supervise --ready-fd 3 q1 3>"$BATS_TEST_TMPDIR/ready"
	assert_success
	assert_output ""
	[ ! -s "$BATS_TEST_TMPDIR/ready" ]
	# asked by hand, the same is an error
	run exec-run supervise q1
	[ "$status" -eq "$EK_NOINPUT" ]
	assert_output --partial "run 'q1': no execution row"
	[ "$(disp_charges q1)" = 1 ]
}

@test "a starter's supervisor that finds its run taken takes the next due one instead: the slot is filled" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec t1)" "$(spec t2)"
	EXEC_PAUSE_AT=before-marker exec-run start --chain --slots 1 --log-fd 5 \
		5>"$BATS_TEST_TMPDIR/log" >"$BATS_TEST_TMPDIR/start.out" 2>&1 3>&- &
	local starter=$! sup=
	wait_until 'sup=$(pgrep -P '"$starter"') && stopped "$sup"'
	# stopped after the starter chose t1, before its marker: t1 is run and
	# reported meanwhile by another supervisor
	exec-run supervise t1 >/dev/null
	[ "$(disp_charges t1)" = 1 ]
	kill -CONT "$sup"
	wait "$starter" || fail "the starter failed: $(cat "$BATS_TEST_TMPDIR/start.out")"
	run cat "$BATS_TEST_TMPDIR/start.out"
	assert_output "started t2"
	wait_until 'grep -q "t2 exited 0" "$BATS_TEST_TMPDIR/log"'
	run cat "$BATS_TEST_TMPDIR/log"
	refute_output --partial "t1"
	[ "$(disp_charges t1) $(disp_charges t2)" = "1 1" ]
}

@test "exec-run wait ends the chains: what is still queued stays queued" {
	start_dispatcher
	open_session
	submit_and_accept "$(gate g1)" "$(spec w2)" "$(spec w3)"
	run exec-run start --chain --slots 1
	assert_success
	exec-run wait --timeout-ms "$WAIT_MS" >/dev/null &
	local waiter=$!
	wait_until '[ -e "$EXEC_STATE_DIR/out/chain.stop" ]'
	touch "$BATS_TEST_TMPDIR/open-g1"
	wait "$waiter" || fail "exec-run wait failed"
	[ "$(sql "SELECT group_concat(run_id || ':' || state) FROM (SELECT * FROM runs ORDER BY run_id)")" = "w2:queued,w3:queued" ]
	# the next start --chain allows chains again
	run exec-run start --chain --slots 1 --wait
	assert_success
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]
}

@test "exec-run wait waits for a supervisor whose session ended while its guest ran, with no current session left" {
	start_dispatcher
	open_session
	submit_and_accept "$(gate g1)"
	exec-run start >/dev/null
	wait_until '[ "$(sql "SELECT count(*) FROM runs WHERE guest_pid > 0")" = 1 ]'
	admin POST "/admin/sessions/$(current_session)/revoke" >/dev/null
	run exec-session heartbeat                          # the revocation learned here
	[ "$(sql "SELECT count(*) FROM sessions WHERE status = 'current'")" = 0 ]
	run exec-run wait --timeout-ms 200
	[ "$status" -eq "$EK_TEMPFAIL" ] || fail "wait with its supervisor running: $status $output"
	assert_output --partial "1 run still running"
	touch "$BATS_TEST_TMPDIR/open-g1"
	run exec-run wait --timeout-ms "$WAIT_MS"
	assert_success
}

@test "nothing is started without a current session" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec n1)"
	exec-session close >/dev/null
	run exec-run start --wait
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT state FROM runs")" = queued ]
}

@test "with the dispatcher down, start names the cause once, whole, after its context" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec d1)"
	stop_dispatcher
	run --separate-stderr exec-run start --wait
	[ "$status" -eq "$EK_UNAVAILABLE" ]
	[ "$(grep -c . <<<"$stderr")" = 1 ]
	# one context, then the cause as the HTTP client gave it, ending the line
	[ "$(grep -o "cannot confirm session" <<<"$stderr" | wc -l)" = 1 ]
	[ "$(grep -o "Connection refused" <<<"$stderr" | wc -l)" = 1 ]
	[[ "$stderr" == "exec-run: cannot confirm session '$(current_session)' with the dispatcher, so nothing is started (a stored lease is no proof of a current session): "*"Connection refused" ]] ||
		fail "not one whole message: $stderr"
	[ "$(sql "SELECT state FROM runs WHERE run_id = 'd1'")" = queued ]
}

@test "usage errors" {
	run exec-run
	[ "$status" -eq "$EK_USAGE" ]
	run exec-run cancel
	[ "$status" -eq "$EK_USAGE" ]
	run exec-run cancel r1 'bad id!'
	[ "$status" -eq "$EK_USAGE" ]
	run exec-run start --session ses-x
	[ "$status" -eq "$EK_USAGE" ]
	run exec-run supervise 'bad id!'
	[ "$status" -eq "$EK_USAGE" ]
	run exec-run start --slots 0
	[ "$status" -eq "$EK_USAGE" ]
	run exec-run frobnicate
	[ "$status" -eq "$EK_USAGE" ]
}

@test "the guest inherits stdin, stdout and stderr only, not its caller's descriptors" {
	# dash keeps its own descriptors at 10 and up: look at 3 to 9
	ready fds /bin/sh '["-c","for n in 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$n ] && echo $n; done; echo end"]'
	exec 7>"$BATS_TEST_TMPDIR/held"        # a descriptor the caller holds open
	run exec-run supervise fds             # no starter in between: the guest's own guard
	exec 7>&-
	assert_success
	[ "$(cat "$EXEC_STATE_DIR/out/fds.stdout")" = end ]
}

@test "a detached supervisor's lines go to out/supervisors.log, each beginning with the time" {
	ready d1
	run exec-run start
	assert_success
	assert_output "started d1"
	wait_until 'grep -q "d1 exited 0" "$EXEC_STATE_DIR/out/supervisors.log"'
	run cat "$EXEC_STATE_DIR/out/supervisors.log"
	assert_line --regexp "^$TS d1 exited 0: delivered \(1 attempt\): "
}

@test "out/supervisors.log past 1 MiB becomes supervisors.log.1, and a new one begins" {
	ready d2
	mkdir -p "$EXEC_STATE_DIR/out"
	{ echo "the old log"; head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' x; echo; } >"$EXEC_STATE_DIR/out/supervisors.log"
	chmod 600 "$EXEC_STATE_DIR/out/supervisors.log"
	exec-run start >/dev/null
	wait_until 'grep -q "d2 exited 0" "$EXEC_STATE_DIR/out/supervisors.log"'
	[ "$(head -n 1 "$EXEC_STATE_DIR/out/supervisors.log.1")" = "the old log" ]
	[ "$(stat -c %s "$EXEC_STATE_DIR/out/supervisors.log")" -lt 4096 ]
	run cat "$EXEC_STATE_DIR/out/supervisors.log"
	assert_line --regexp "^$TS d2 exited 0: delivered "
}

@test "a chaining supervisor's lines reach its log as they happen, whole" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec c1)" "$(gate c2)"
	exec-run start --chain --slots 1 --log-fd 5 5>"$BATS_TEST_TMPDIR/log" >/dev/null
	# c2 runs in the supervisor that ran c1, which lives on: what it said of
	# c1, and of starting c2, is in the log already (not in a buffer)
	wait_until '[ -n "$(sql "SELECT guest_pid FROM runs WHERE run_id = '"'c2'"'")" ]'
	run cat "$BATS_TEST_TMPDIR/log"
	assert_line --regexp "^$TS c1 exited 0: delivered \(1 attempt\): "
	assert_line --regexp "^$TS started c2 \(chained\)$"
	touch "$BATS_TEST_TMPDIR/open-c2"
	wait_until 'grep -q "c2 exited 0" "$BATS_TEST_TMPDIR/log"'
	[ "$(disp_charges c1) $(disp_charges c2)" = "1 1" ]
}

@test "start --log-fd N: the detached supervisors write to descriptor N instead (exec-loop's log)" {
	ready d3
	run exec-run start --log-fd 5 5>"$BATS_TEST_TMPDIR/log"
	assert_success
	wait_until 'grep -q "d3 exited 0" "$BATS_TEST_TMPDIR/log"'
	run cat "$BATS_TEST_TMPDIR/log"
	assert_line --regexp "^$TS d3 exited 0: delivered \(1 attempt\): "
	[ ! -e "$EXEC_STATE_DIR/out/supervisors.log" ]
	# it goes with a detached start only, and names an open descriptor
	run exec-run start --wait --log-fd 2
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--log-fd goes with start, without --wait"
	run exec-run start --log-fd 250
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--log-fd 250: not an open descriptor"
}

@test "start --ended-fifo FIFO: each supervisor writes a line to FIFO as it ends (exec-loop's cue to start more), and one a run: o exited 0, f not" {
	local fifo=$BATS_TEST_TMPDIR/freed plain=$BATS_TEST_TMPDIR/plain n=0 line words=
	start_dispatcher
	open_session
	submit_and_accept "$(spec sf1)" "$(spec sf2)" "$(spec sf3 /bin/sh '["-c","exit 2"]')"
	mkfifo "$fifo"
	exec 7<>"$fifo"
	# two supervisors for three runs: one of them chains to the third;
	# with --wait both have ended when start does, so both lines are there
	run exec-run start --chain --slots 2 --wait --ended-fifo "$fifo"
	assert_success
	[ "$(sql "SELECT count(*) FROM receipts")" = 3 ] || fail "not all three reported"
	while read -r -t 0 -u 7 && [ "$n" -lt 10 ]; do
		read -r -u 7 line || fail "a partial line in the fifo"
		case $line in
		'') n=$((n + 1)) ;;
		o | f) words+=$line ;;
		*) fail "unexpected line '$line'" ;;
		esac
	done
	exec 7>&-
	[ "$n" -eq 2 ] || fail "$n lines for 2 supervisors"
	# (in the order the runs ended: sorted, two exited 0 and one did not)
	[ "$(printf '%s\n' "$words" | grep -o . | sort | paste -sd '' -)" = foo ] || fail "run lines: '$words'"
	# no reader left: the supervisor writes nothing, and ends all the same
	submit_and_accept "$(spec sf4)"
	run exec-run start --wait --ended-fifo "$fifo"
	assert_success
	assert_line --partial "sf4 exited 0: delivered"
	# a supervisor told a file that is not a fifo leaves it alone
	: >"$plain"
	submit_and_accept "$(spec sf5)"
	run exec-run supervise --ended-fifo "$plain" sf5
	assert_success
	[ ! -s "$plain" ] || fail "a line written to a plain file"
	# a start checks it is told a fifo; other commands take no fifo
	run exec-run start --ended-fifo "$plain"
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--ended-fifo $plain: not a fifo"
	run exec-run wait --ended-fifo "$fifo"
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--ended-fifo goes with start"
}
