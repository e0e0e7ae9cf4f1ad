#!/usr/bin/env bats
# check-invariants itself: on a healthy state it passes; break one rule by
# hand (sqlite3 on the state or the dispatcher's store, or the ledger) and
# it must fail naming that rule.  Without these, a drill could pass because
# the checker saw nothing.

load drill

# A state with one run in each class: k1 acknowledged, k2 retained, k3
# queued, k4 refused (unknown to the dispatcher), k5 unknown.
baseline() {
	start_dispatcher
	open_session
	SID=$(current_session)
	submit "$(gspec k1)" "$(gspec k2)" "$(gspec k3)" "$(gspec k5)"
	exec-accept --from-dispatcher >/dev/null
	gspec k4 | exec-accept >/dev/null
	exec-run supervise k1 >/dev/null
	EXEC_CRASH_AT=retained exec-run supervise k2 >/dev/null 2>&1 || true
	exec-run supervise k4 >/dev/null || true
	EXEC_CRASH_AT=start-marker exec-run supervise k5 >/dev/null 2>&1 || true
	exec-run sweep >/dev/null
	state=$(val "SELECT group_concat(run_id || ':' || CASE WHEN run_id IN (SELECT run_id FROM receipts) THEN 'a'
		WHEN run_id IN (SELECT run_id FROM results WHERE refused) THEN 'f'
		WHEN run_id IN (SELECT run_id FROM results) THEN 'r'
		ELSE (SELECT state FROM runs r WHERE r.run_id = a.run_id) END, ' ') FROM accepts a ORDER BY run_id")
	[ "$state" = "k1:a k2:r k3:queued k4:f k5:unknown" ]
	check                                  # the control: healthy
	assert_output --partial "5 runs (acknowledged 1, queued 1, refused 1, retained 1, unknown 1); 0 violations"
}

# tamper SQL: change the state behind the tools' back.
tamper() { sqlite3 -cmd '.timeout 5000' "$EXEC_STATE_DIR/state.db" "$1"; }
tamper_dispatcher() { sqlite3 -cmd '.timeout 5000' "$BATS_TEST_TMPDIR/disp.db" "$1"; }

# must_fail RULE [CHECKER OPTIONS...]
must_fail() {
	local rule=$1
	shift
	run "$DRILLS/check-invariants" --ledger "$LEDGER" "$@" "$EXEC_STATE_DIR" "$DISP_URL"
	echo "$output"
	[ "$status" -eq 1 ]
	assert_output --partial "VIOLATION $rule:"
}

@test "checker: lost — an accepted run with no row left" {
	baseline
	tamper "DELETE FROM runs WHERE run_id = 'k3'"
	must_fail lost
}

@test "checker: lost — the dispatcher holds our acceptance of a run this state never accepted" {
	baseline
	tamper "DELETE FROM runs WHERE run_id = 'k3'; DELETE FROM accepts WHERE run_id = 'k3'"
	must_fail lost
	assert_output --partial "k3: the dispatcher holds an acceptance"
}

@test "checker: unswept — started, supervisor gone, no result, not unknown" {
	baseline
	tamper "UPDATE runs SET state = 'started', started_at = 1, sup_pid = $$, sup_start = 1 WHERE run_id = 'k3'"
	must_fail unswept
}

@test "checker: a live supervisor is running, not lost" {
	baseline
	tamper "UPDATE runs SET state = 'started', started_at = 1, sup_pid = $$,
		sup_start = $(cut -d' ' -f22 /proc/$$/stat) WHERE run_id = 'k3'"
	check
	assert_output --partial "running 1"
}

@test "checker: twice — a guest ran twice" {
	baseline
	echo k1 >>"$LEDGER"
	must_fail twice
}

@test "checker: fabricated — a result says the guest exited but it never ran" {
	baseline
	sed -i '/^k1$/d' "$LEDGER"
	must_fail fabricated
}

@test "checker: half-ack — a retained result beside its receipt" {
	baseline
	tamper "INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body)
		SELECT run_id, incarnation, session_id, outcome, exit_code, 'm', 0, x'7b7d' FROM receipts WHERE run_id = 'k1'"
	must_fail half-ack
}

@test "checker: unretained — the dispatcher recorded a result this state does not hold" {
	baseline
	tamper "DELETE FROM receipts WHERE run_id = 'k1'"
	must_fail unretained
	run "$DRILLS/check-invariants" --restored "$EXEC_STATE_DIR" "$DISP_URL"   # a restore: a note
	assert_output --partial "note unretained: k1"
}

@test "checker: unacked — a receipt the dispatcher does not back" {
	baseline
	tamper "UPDATE receipts SET record_id = 999 WHERE run_id = 'k1'"
	must_fail unacked
}

@test "checker: refusal — refused without a cause" {
	baseline
	tamper "UPDATE results SET refused_cause = NULL WHERE run_id = 'k4'"
	must_fail refusal
}

@test "checker: refusal — refused, yet the dispatcher recorded that very result" {
	baseline
	body=$(val "SELECT body FROM results WHERE run_id = 'k2'")
	cred=$(val "SELECT credential FROM sessions WHERE status = 'current'")
	curl -sS -H "Authorization: Bearer $cred" -d "$body" "$DISP_URL/v1/results" | grep -q recorded
	tamper "UPDATE results SET refused = 1, refused_cause = 'conflict' WHERE run_id = 'k2'"
	must_fail refusal
}

@test "checker: resent — two different bodies reported for one run" {
	baseline
	tamper_dispatcher "INSERT INTO reports(run_id, session_id, body_sha256, status, at) VALUES ('k1', '$SID', 'beef', 200, 0)"
	must_fail resent
}

@test "checker: charged — after a drain, an acknowledged run not charged exactly once" {
	baseline
	exec-reconcile --drain >/dev/null            # k2 delivered: nothing deliverable left
	check --drained
	tamper_dispatcher "DELETE FROM ledger WHERE run_id = 'k1'"
	must_fail charged --drained
}

@test "checker: charged — after a drain, a deliverable result left behind" {
	baseline
	must_fail charged --drained                 # k2 was never delivered
	assert_output --partial "k2: still retained"
}

@test "checker: quarantine — a run started after its session ended" {
	baseline
	open_session
	tamper "UPDATE runs SET started_at = (SELECT ended_at + 1000 FROM sessions WHERE session_id = '$SID') WHERE run_id = 'k5'"
	must_fail quarantine
}

@test "checker: integrity — a damaged database" {
	baseline
	sqlite3 "$EXEC_STATE_DIR/state.db" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
	page=$(val "SELECT rootpage FROM sqlite_schema WHERE name = 'receipts'")
	printf '\377\377\377\377\377\377\377\377' |
		dd of="$EXEC_STATE_DIR/state.db" bs=1 seek=$(((page - 1) * $(val 'PRAGMA page_size'))) conv=notrunc 2>/dev/null
	must_fail integrity
}

@test "checker: a dispatcher it cannot reach is an error, not a pass" {
	baseline
	stop_dispatcher
	run "$DRILLS/check-invariants" "$EXEC_STATE_DIR" "$DISP_URL"
	[ "$status" -eq 2 ]
	assert_output --partial "unreachable"
}
