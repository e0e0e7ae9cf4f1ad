#!/usr/bin/env bats
# Adoption: results retained under an earlier session are delivered only
# after an explicit, fenced adoption that the dispatcher records first
# (`exec-session adopt SID`).  The dispatcher enforces it too: without an
# adoption it refuses a report under another session's credential.
# Nothing is relabelled: results and receipts keep the binding that
# accepted the run, and the earlier session's queued runs stay quarantined.

load helpers

# Three results retained under session S1 (their cleanup reports failed),
# then a new session S2 here: S1 is replaced.
retain_then_reopen() {
	start_dispatcher
	open_session
	S1=$(current_session)
	submit_and_accept "$(spec a1)" "$(spec a2)" "$(spec a3)"
	fault 5xx 1000
	exec-run start --wait --slots 3 --budget-ms 100 >/dev/null
	admin DELETE /admin/faults >/dev/null
	[ "$(sql "SELECT count(*) FROM results WHERE session_id = '$S1' AND refused = 0")" = 3 ]
	open_session
	S2=$(current_session)
	[ "$S1" != "$S2" ]
}

# The sha256 of a retained result's stored body.
body_sha() {
	sql "SELECT hex(body) FROM results WHERE run_id = '$1'" | xxd -r -p | sha256sum | cut -d' ' -f1
}

# post_report RUN_ID CREDENTIAL: POST the stored body of RUN_ID to the
# dispatcher under CREDENTIAL; prints the HTTP status.
post_report() {
	sql "SELECT hex(body) FROM results WHERE run_id = '$1'" | xxd -r -p >"$BATS_TEST_TMPDIR/body"
	curl -sS --max-time 10 -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code}' \
		-H "Authorization: Bearer $2" -H 'Content-Type: application/json' \
		--data-binary "@$BATS_TEST_TMPDIR/body" "$DISP_URL/v1/results"
}

credential() { sql "SELECT credential FROM sessions WHERE session_id = '$1'"; }

# adopted_by SID: the session that adopted SID at the dispatcher, or null.
adopted_by() {
	admin GET /admin/sessions | grep -o "\"session_id\":\"$1\"[^}]*" | grep -o '"adopted_by":[^,}]*' | cut -d: -f2
}

@test "an earlier session's results wait until the current one adopts it; then each is delivered once, body unchanged" {
	retain_then_reopen
	local sha1
	sha1=$(body_sha a1)
	[ "$(exec-inspect list orphaned --ids | wc -l)" = 3 ]
	run exec-reconcile --json
	assert_line --partial '"selected":0'
	[ "$(exec-session heartbeat)" = current ]           # nothing this session may deliver
	run exec-session adopt "$S1"
	assert_success
	assert_output "session $S1 (replaced) adopted by $S2: 3 retained results now deliverable"
	[ "$(adopted_by "$S1")" = "\"$S2\"" ]
	[ "$(exec-session heartbeat)" = reconcile-due ]
	# adopted results are no longer orphaned: not listed so, not exported as evidence
	[ -z "$(exec-inspect list orphaned --ids)" ]
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence"
	assert_output --regexp "^exported 0 results, removed [0-9]+ output files$"
	# the invariant checker counts them as deliverable: not drained yet
	run "$SRC/tests/drills/check-invariants" --drained "$EXEC_STATE_DIR" "$DISP_URL"
	assert_failure
	assert_output --partial "VIOLATION charged: a1: still retained and deliverable by the current session after the drain"
	run exec-reconcile --json
	assert_success
	assert_line --partial '"selected":3,"delivered":3'
	for id in a1 a2 a3; do
		[ "$(disp_charges "$id")" = 1 ]
		# every report, the failed ones under S1 and the one under S2, sent the same bytes
		[ "$(disp_hashes "$id" | sort -u | wc -l)" = 1 ]
	done
	[ "$(disp_hashes a1 | sort -u)" = "$sha1" ]
	"$SRC/tests/drills/check-invariants" --drained "$EXEC_STATE_DIR" "$DISP_URL"
	# nothing relabelled: the receipts and the dispatcher's record name S1
	[ "$(sql "SELECT group_concat(DISTINCT session_id) FROM receipts")" = "$S1" ]
	[ "$(disp_field a1 owner_session)" = "\"$S1\"" ]
}

@test "the dispatcher refuses a report under another session's credential until it records the adoption" {
	retain_then_reopen
	run post_report a1 "$(credential "$S2")"
	assert_output 401
	[ "$(disp_charges a1)" = 0 ]
	exec-session adopt "$S1" >/dev/null
	run post_report a1 "$(credential "$S2")"
	assert_output 200
	grep -q '"status":"recorded"' "$BATS_TEST_TMPDIR/answer"
	[ "$(disp_charges a1)" = 1 ]
	# S1's own credential gives no authority back: S1 is over
	run post_report a2 "$(credential "$S1")"
	assert_output 401
	[ "$(disp_charges a2)" = 0 ]
}

@test "adoption is fenced: not the current session, not an unknown one, not another executor's, not without the credential" {
	retain_then_reopen
	run exec-session adopt "$S2"
	[ "$status" -eq "$EK_DATAERR" ]
	assert_output --partial "is the current session"
	run exec-session adopt ses-0000000000000000
	[ "$status" -eq "$EK_DATAERR" ]
	assert_output --partial "no session 'ses-0000000000000000'"
	[ "$(sql "SELECT count(*) FROM adoptions")" = 0 ]
	# the dispatcher's own checks, asked directly
	EXEC_STATE_DIR="$BATS_TEST_TMPDIR/other" exec-session open --dispatcher "$DISP_URL" >/dev/null
	local other
	other=$(EXEC_STATE_DIR="$BATS_TEST_TMPDIR/other" current_session)
	adopt_call() {
		curl -sS --max-time 10 -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code}' -X POST \
			-H "Authorization: Bearer $1" -d "{\"session_id\":\"$2\"}" "$DISP_URL/v1/sessions/$S2/adoptions"
	}
	run adopt_call "$(credential "$S2")" "$other"
	assert_output 409
	grep -q foreign_session "$BATS_TEST_TMPDIR/answer"
	run adopt_call "$(credential "$S2")" "$S2"
	assert_output 409
	grep -q live_session "$BATS_TEST_TMPDIR/answer"
	run adopt_call "not-the-credential" "$S1"
	assert_output 401
	run adopt_call "$(credential "$S2")" "ses-unknown"
	assert_output 404
	[ "$(adopted_by "$S1")" = null ]
	# and the executor reports the dispatcher's refusal with its reason
	sqlite3 "$EXEC_STATE_DIR/state.db" "INSERT INTO sessions(incarnation, session_id, dispatcher, credential,
		status, opened_at, lease_ms, heartbeat_ms) SELECT incarnation, '$other', dispatcher, 'x', 'replaced',
		0, 1, 1 FROM sessions WHERE session_id = '$S2'"
	run exec-session adopt "$other"
	[ "$status" -eq "$EK_PROTOCOL" ]
	assert_output --partial "foreign_session"
	[ "$(sql "SELECT count(*) FROM adoptions")" = 0 ]   # nothing recorded here either
}

@test "a revoked session is never adopted: the dispatcher refuses, nothing is recorded, nothing is sent" {
	retain_then_reopen
	admin POST "/admin/sessions/$S1/revoke" >/dev/null
	run exec-session adopt "$S1"
	[ "$status" -eq "$EK_PROTOCOL" ]
	assert_output --partial "revoked"
	[ "$(sql "SELECT count(*) FROM adoptions")" = 0 ]
	[ "$(adopted_by "$S1")" = null ]
	run post_report a1 "$(credential "$S2")"
	assert_output 401
	[ "$(disp_charges a1)" = 0 ]
}

@test "an adoption gives authority only while its adopter is current; a newer session adopts again" {
	retain_then_reopen
	exec-session adopt "$S1" >/dev/null
	open_session                                        # S3: S2 is replaced
	local s3 before
	s3=$(current_session)
	before=$(disp_reports a1)
	run exec-reconcile --json
	assert_line --partial '"selected":0'
	run exec-report a1
	[ "$status" -eq "$EK_NOSESSION" ]
	assert_output --partial "not adopted by the current session"
	[ "$(disp_reports a1)" = "$before" ]                # nothing sent
	run post_report a1 "$(credential "$S2")"            # S2's adoption is void at the dispatcher too
	[ "$output" = 401 ] || [ "$output" = 410 ]
	exec-session adopt "$S1" >/dev/null
	[ "$(adopted_by "$S1")" = "\"$s3\"" ]
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT count(*) FROM receipts")" = 3 ]
}

@test "adoption relabels nothing and unquarantines nothing" {
	start_dispatcher
	open_session
	S1=$(current_session)
	submit_and_accept "$(spec q1 /bin/sh "[\"-c\",\"touch $BATS_TEST_TMPDIR/ran\"]")" "$(spec r1)"
	fault 5xx 1000
	exec-run cancel r1 --session "$S1" --budget-ms 100 >/dev/null || true   # r1: a retained result, q1 stays queued
	admin DELETE /admin/faults >/dev/null
	open_session
	exec-session report --json >"$BATS_TEST_TMPDIR/before"
	grep -q '"earlier_session":1' "$BATS_TEST_TMPDIR/before"
	local bindings
	bindings=$(sql "SELECT group_concat(run_id || '=' || session_id) FROM (SELECT run_id, session_id FROM runs UNION ALL SELECT run_id, session_id FROM results ORDER BY 1)")
	exec-session adopt "$S1" >/dev/null
	run exec-session report --json
	assert_output --partial '"deliverable":1,"earlier_session":0'
	assert_output --partial '"quarantined":{"total":1'
	exec-run start --wait >/dev/null
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]                      # q1 is still quarantined
	[ "$(sql "SELECT state FROM runs WHERE run_id = 'q1'")" = queued ]
	[ "$(sql "SELECT group_concat(run_id || '=' || session_id) FROM (SELECT run_id, session_id FROM runs UNION ALL SELECT run_id, session_id FROM results ORDER BY 1)")" = "$bindings" ]
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE adoptions SET adopted_at = 0"
	assert_failure
	assert_output --partial "an adoption never changes"
}

@test "adopt usage errors exit 64 and touch nothing" {
	run exec-session adopt
	[ "$status" -eq "$EK_USAGE" ]
	run exec-session adopt a b
	[ "$status" -eq "$EK_USAGE" ]
	[ ! -e "$EXEC_STATE_DIR" ]
}

# negotiate_as XID [KEY]: negotiate as executor XID (with KEY, if given),
# enrolled (the test's enrollment token); prints the HTTP status, the answer
# in $BATS_TEST_TMPDIR/answer.
negotiate_as() {
	local tok
	enroll_token tok
	curl -sS --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code}' \
		-H 'Content-Type: application/json' \
		-d "{\"executor_id\":\"$1\"${2:+,\"executor_key\":\"$2\"},\"enroll_token\":\"$tok\"}" "$DISP_URL/v1/sessions"
}

meta() { sql "SELECT value FROM meta WHERE key = '$1'"; }

# The dispatcher's store, changed only while the dispatcher is stopped.
disp_sql() { sqlite3 -cmd ".timeout $WAIT_MS" "$BATS_TEST_TMPDIR/disp.db" "$1"; }

# is_current SID: the dispatcher holds SID as the current session.
is_current() { admin GET /admin/sessions | grep -q "\"session_id\":\"$1\",\"executor_id\":\"[0-9a-f]*\",\"status\":\"current\""; }

@test "a client that knows only the executor id can neither open a session as it nor adopt its sessions (403); the executor can, also after a dispatcher restart" {
	retain_then_reopen
	local xid key forged=$BATS_TEST_TMPDIR/forged attempt
	xid=$(meta executor_id)
	key=$(meta executor_key)
	[[ $key =~ ^[0-9a-f]{64}$ ]]
	for attempt in 1 2; do        # before and after a restart on the same store
		run negotiate_as "$xid"
		assert_output 403
		grep -q '"error":"executor_key_mismatch"' "$BATS_TEST_TMPDIR/answer"
		grep -q "none was sent" "$BATS_TEST_TMPDIR/answer"
		run negotiate_as "$xid" "$(printf '%064d' 0)"
		assert_output 403
		grep -q '"error":"executor_key_mismatch"' "$BATS_TEST_TMPDIR/answer"
		run negotiate_as "$xid" "${key^^}"            # the key is compared exactly
		assert_output 403
		run negotiate_as "$xid" "xyz"
		assert_output 400
		# a state of its own claiming the executor's id: open --adopt is refused
		# before anything is adopted, with the dispatcher's reason and 77
		if [ "$attempt" = 1 ]; then
			EXEC_STATE_DIR=$forged exec-session open --dispatcher "$DISP_URL" >/dev/null
			sqlite3 "$forged/state.db" "UPDATE meta SET value = '$xid' WHERE key = 'executor_id'"
		fi
		run env EXEC_STATE_DIR="$forged" exec-session open --adopt --dispatcher "$DISP_URL"
		[ "$status" -eq "$EK_NOSESSION" ]
		assert_output --partial "HTTP 403: executor_key_mismatch"
		assert_output --partial "executor '$xid' is bound to another executor_key"
		is_current "$S2" || fail "the executor's session was replaced by a refused negotiation"
		[ "$(adopted_by "$S1")" = null ]
		[ "$(admin GET /admin/sessions | grep -o "\"executor_id\":\"$xid\"" | wc -l)" = 2 ]
		stop_dispatcher
		start_dispatcher
	done
	# the executor itself still opens, adopts and delivers
	run exec-session open --adopt --dispatcher "$DISP_URL"
	assert_success
	assert_output --partial "session $S1 (replaced) adopted by"
	[ "$(adopted_by "$S1")" = "\"$(current_session)\"" ]
	exec-reconcile >/dev/null
	[ "$(sql "SELECT count(*) FROM receipts")" = 3 ]
	[ "$(disp_charges a1)" = 1 ]
	# the dispatcher keeps only the key's SHA-256
	[ "$(disp_sql "SELECT key_sha256 FROM executor_keys WHERE executor_id = '$xid'")" = \
		"$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)" ]
	run grep -caF -- "$key" "$BATS_TEST_TMPDIR/disp.db"
	assert_output 0
}

@test "a session negotiated with another key, or before keys, is adopted by none (403); open --adopt goes on without it" {
	retain_then_reopen
	stop_dispatcher
	disp_sql "UPDATE session_keys SET key_sha256 = '$(printf '%064d' 0)' WHERE session_id = '$S1'"
	start_dispatcher
	open_session                                         # a session at the new port
	run exec-session adopt "$S1"
	[ "$status" -eq "$EK_NOSESSION" ]
	assert_output --partial "executor_key_mismatch"
	assert_output --partial "session '$S1' was not negotiated with this session's executor_key"
	[ "$(sql "SELECT count(*) FROM adoptions")" = 0 ]   # nothing recorded here
	[ "$(adopted_by "$S1")" = null ]
	run post_report a1 "$(credential "$(current_session)")"
	assert_output 401
	[ "$(disp_charges a1)" = 0 ]
	# a session from before the dispatcher knew keys: the same
	stop_dispatcher
	disp_sql "DELETE FROM session_keys WHERE session_id = '$S1'"
	start_dispatcher
	run exec-session open --adopt --dispatcher "$DISP_URL"
	assert_success                                       # the open holds; S1 is reported, skipped
	assert_output --partial "session '$S1' not adopted"
	assert_output --partial "executor_key_mismatch"
	is_current "$(current_session)"
	[ "$(adopted_by "$S1")" = null ]
	[ "$(sql "SELECT count(*) FROM adoptions")" = 0 ]
}
