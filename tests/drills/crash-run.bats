#!/usr/bin/env bats
# kill -9 at the commit points of accepting, starting and retaining a run
# (libcommon/lifecycle.h).  Seed-001 shape, per seed: witness → SIGKILL at
# the point → declared action (sweep, start, reconcile --drain) → a fresh
# check-invariants --drained and the point's own asserts.

load crash

@test "accept-before-commit: nothing is accepted; the same feed or lines accept it once" {
	in_child crash_drill accept-before-commit
}

@test "accept-after-commit: all is accepted; accepting again returns the original receipts" {
	in_child crash_drill accept-after-commit
}

@test "before-marker: the supervisor dies before marking its run; it stays queued and a later start runs it once" {
	in_child crash_drill before-marker
}

@test "start-marker: the run is started but no guest ran; it becomes unknown, never re-run" {
	in_child crash_drill start-marker
}

@test "after-spawn: the orphaned guest runs once; the run becomes unknown, never re-run" {
	in_child crash_drill after-spawn
}

@test "result-chosen: the choice never committed; the run becomes unknown, never re-run" {
	in_child crash_drill result-chosen
}

@test "retained: the result is on disk with 0 attempts; a pass delivers it once" {
	in_child crash_drill retained
}

# tspec ID: a guest that appends its transaction id (a re-queued run keeps
# it, under a new run id) to the ledger.
tspec() {
	printf '{"run_id":"%s","txn_id":"t-%s","program":"/bin/sh","args":["-c","echo \\"$EXEC_TXN_ID\\" >> %s"]}' \
		"$1" "$1" "$LEDGER"
}
ran_txn() { if [ -f "$LEDGER" ]; then grep -cx -- "t-$1" "$LEDGER" || true; else echo 0; fi; }

# One round of a loop, by hand: heartbeat, answer inspections, pull, start.
round() {
	exec-session heartbeat >/dev/null || true
	exec-inspect relay >/dev/null || true
	exec-accept --from-dispatcher >/dev/null || true
	exec-run start --wait >/dev/null || true
}

@test "handback-marked: the runs are marked, never start here; the dispatcher settles them through InspectRetainedRun; each runs once" {
	submit "$(tspec h1)" "$(tspec h2)"
	exec-accept --from-dispatcher >/dev/null
	crash handback-marked exec-session close
	# The same dispatcher, back as one that asks about an ended session's
	# runs at once rather than 30 s after its end (--settle-after-ms): the
	# wait below would otherwise run rounds for those 30 s.
	kill_dispatcher
	restart_dispatcher --settle-after-ms 0
	# witness: marked here, nothing asked there, the session still current
	[ "$(val "SELECT count(*) FROM handbacks WHERE acked_at IS NULL")" = 2 ]
	[ "$(disp_count accepted)" = 2 ]
	exec-run start --wait >/dev/null                 # a marked run never starts here
	[ "$(ran_txn h1) $(ran_txn h2)" = "0 0" ]
	# declared action: a new session; the dispatcher asks about the old one's runs
	open_session
	wait_until 'round; [ "$(ran_txn h1) $(ran_txn h2)" = "1 1" ]'
	wait_until 'exec-reconcile --drain >/dev/null 2>&1; [ "$(disp_count finished)" = 2 ]'
	[ "$(ran_txn h1) $(ran_txn h2)" = "1 1" ]
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":2' ]
	[ "$(val "SELECT count(*) FROM runs WHERE state <> 'queued'")" = 0 ]   # the originals never started
}

@test "handback-acked: re-queued there, not recorded here; the marked runs never start; each runs once" {
	submit "$(tspec k1)" "$(tspec k2)"
	exec-accept --from-dispatcher >/dev/null
	crash handback-acked exec-session close
	# witness: re-queued at the dispatcher, marked but not acknowledged here
	[ "$(val "SELECT count(*) FROM handbacks WHERE acked_at IS NULL")" = 2 ]
	run sqlite3 "$EXEC_STATE_DIR/state.db" "DELETE FROM handbacks"
	assert_failure                                    # kept until the dispatcher re-queued them
	[ "$(disp_count accepted)" = 0 ]
	run exec-session report --json
	assert_output --partial '"handed_back":{"acknowledged":0,"pending":2}'
	# declared action: none needed; a new session takes the re-queued runs
	open_session
	wait_until 'round; [ "$(ran_txn k1) $(ran_txn k2)" = "1 1" ]'
	wait_until 'exec-reconcile --drain >/dev/null 2>&1; [ "$(disp_count finished)" = 2 ]'
	[ "$(ran_txn k1) $(ran_txn k2)" = "1 1" ]
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":2' ]
}

@test "a clean close hands back what never started: acknowledged here, re-queued under new ids there, counted at open" {
	submit "$(tspec c1)" "$(tspec c2)" "$(tspec c3)"
	exec-accept --from-dispatcher >/dev/null
	run exec-session close
	assert_success
	assert_output --partial "handed back 3 runs never started here"
	[ "$(val "SELECT count(*) FROM handbacks WHERE acked_at IS NOT NULL AND requeued_as LIKE 'rq-%'")" = 3 ]
	# fixed once acknowledged (retention may forget a re-queued one whole:
	# schema 016; a handback not re-queued yet is kept, exec-reconcile.bats)
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE handbacks SET requeued_as = 'rq-other'"
	assert_failure
	assert_output --partial "an acknowledged handback is immutable"
	open_session
	run exec-session report --json
	assert_output --partial '"handed_back":{"acknowledged":3,"pending":0}'
	wait_until 'round; [ "$(ran_txn c1) $(ran_txn c2) $(ran_txn c3)" = "1 1 1" ]'
}

@test "cancel-marked: a cancel killed before choosing; the queued run never starts, the started one ends once; cancel again finishes it" {
	submit "$(gspec cq 0 0)" "$(gspec cs 0 1)"
	exec-accept --from-dispatcher >/dev/null
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE runs SET due_at = 9999999999999 WHERE run_id = 'cq'"
	exec-run start --slots 1 >/dev/null                       # cs starts, gated; cq is not due
	wait_until '[ "$(val "SELECT state FROM runs WHERE run_id = '\''cs'\''")" = started ]'
	local sid
	sid=$(current_session)
	crash cancel-marked exec-run cancel cq --session "$sid"
	crash cancel-marked exec-run cancel cs --session "$sid"
	# witness: both marked, neither has a result
	[ "$(val "SELECT count(*) FROM runs WHERE cancel_at IS NOT NULL")" = 2 ]
	[ "$(val "SELECT count(*) FROM results")" = 0 ]
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE runs SET due_at = 0 WHERE run_id = 'cq'"
	exec-run start --wait >/dev/null                          # a marked run is never started
	[ "$(ran cq)" = 0 ]
	touch "$GO"                                               # cs ends on its own, once
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE run_id = '\''cs'\''")" = 0 ]'
	[ "$(ran cs)" = 1 ]
	# declared action: cancel again
	exec-run cancel cq --session "$sid" --budget-ms "$WAIT_MS" >/dev/null   # delivered, however slow
	run exec-run cancel cs --session "$sid"
	[ "$status" -eq "$EK_NOINPUT" ]                           # already ended and reported
	[ "$(val "SELECT outcome FROM receipts WHERE run_id = 'cq'")" = cancelled ]
	[ "$(disp_charges cq)" = 1 ]
	[ "$(disp_charges cs)" = 1 ]
	check --drained
}

@test "every seed of the file's 7 points crashed its victims, with 0 violations" {
	assert_tally 7
}
