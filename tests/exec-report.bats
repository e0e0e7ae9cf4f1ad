#!/usr/bin/env bats
# exec-report: deliver retained results by run id, with the rules of
# deliver.h (bounded attempts, byte-identical bodies, single flight).

load helpers

# A retained, undelivered result: the dispatcher failed every attempt.
retained() {
	ready "$@"
	fault 5xx 3
	exec-run start --wait >/dev/null
	admin DELETE /admin/faults >/dev/null
}

@test "delivers a retained result by id and writes a receipt" {
	retained r1
	run exec-report r1
	assert_success
	assert_output --partial "delivered r1 (1 attempt): recorded"
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	[ "$(sql "SELECT attempts FROM receipts WHERE run_id='r1'")" = 4 ]
	[ "$(disp_charges r1)" = 1 ]
}

@test "reads run ids from stdin, one per line, and from '-'" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec a)" "$(spec b)"
	fault 5xx 6
	exec-run start --wait >/dev/null
	admin DELETE /admin/faults >/dev/null
	run sh -c 'printf "a\n\nb\n" | exec-report --json'
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[0]}" == '{"run_id":"a","status":"delivered",'* ]]
	[ "$(sql "SELECT count(*) FROM receipts")" = 2 ]
	run sh -c 'echo a | exec-report -'
	[ "$status" -eq "$EK_NOINPUT" ]
	assert_output --partial "already acknowledged"
}

@test "no result, malformed id, no state: clear errors" {
	start_dispatcher
	open_session
	run exec-report nosuch
	[ "$status" -eq "$EK_NOINPUT" ]
	assert_output --partial "no retained result and no receipt"
	run exec-report 'bad id'
	[ "$status" -eq "$EK_DATAERR" ]
	EXEC_STATE_DIR="$BATS_TEST_TMPDIR/none" run exec-report x
	[ "$status" -eq "$EK_NOINPUT" ]
}

@test "a result of an earlier session is never sent under the new one" {
	retained old1
	open_session
	run exec-report old1
	[ "$status" -eq "$EK_NOSESSION" ]
	assert_output --partial "replaced"
	[ "$(disp_reports old1)" = 3 ]
	[ "$(sql "SELECT attempts FROM results WHERE run_id='old1'")" = 3 ]
}

@test "single flight: a result claimed by a live deliverer is not sent twice" {
	retained c1
	# This shell is a live process: make it the claim owner for a minute.
	me="$$:$(cut -d' ' -f22 /proc/$$/stat)"
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE results SET claim_owner='$me', claim_until=$(( $(date +%s) * 1000 + 60000 ))"
	run exec-report c1
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --partial "busy c1"
	[ "$(disp_reports c1)" = 3 ]
	# A claim whose owner is gone is taken over.
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE results SET claim_owner='1:1'"
	run exec-report c1
	assert_success
}

@test "the dispatcher unreachable: transient, counted, kept, bounded by the budget" {
	retained u1
	stop_dispatcher
	start=$(date +%s%N)
	run exec-report --budget-ms 1500 u1
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$status" -eq "$EK_TEMPFAIL" ]
	[ "$elapsed" -lt 3000 ]
	[ "$(sql "SELECT attempts FROM results WHERE run_id='u1'")" = 6 ]
	run sql "SELECT last_diag FROM results WHERE run_id='u1'"
	assert_output --partial "no answer"
}

@test "a crash after the request was sent keeps the result; the resend is a duplicate charged once" {
	retained s1
	EXEC_CRASH_AT=request-sent run exec-report s1
	[ "$status" -eq 137 ]
	[ "$(sql "SELECT count(*) FROM results WHERE run_id='s1'")" = 1 ]
	[ "$(disp_charges s1)" = 1 ]
	run exec-report s1
	assert_success
	assert_output --partial "duplicate"
	[ "$(disp_charges s1)" = 1 ]
}

@test "a crash between receipt and release commits neither" {
	retained ab1
	EXEC_CRASH_AT=acked-before-release run exec-report ab1
	[ "$status" -eq 137 ]
	[ "$(sql "SELECT count(*) FROM results") $(sql "SELECT count(*) FROM receipts")" = "1 0" ]
	EXEC_CRASH_AT=after-release run exec-report ab1
	[ "$status" -eq 137 ]
	[ "$(sql "SELECT count(*) FROM results") $(sql "SELECT count(*) FROM receipts")" = "0 1" ]
}
