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
	exec-run cancel cq --session "$sid" >/dev/null
	run exec-run cancel cs --session "$sid"
	[ "$status" -eq "$EK_NOINPUT" ]                           # already ended and reported
	[ "$(val "SELECT outcome FROM receipts WHERE run_id = 'cq'")" = cancelled ]
	[ "$(disp_charges cq)" = 1 ]
	[ "$(disp_charges cs)" = 1 ]
	check --drained
}

@test "the points of this file crashed at least 90 times in all, with 0 violations" {
	[ "${DRILL_SEEDS:-14}" -ge 14 ] || skip "DRILL_SEEDS=$DRILL_SEEDS: fewer seeds than CI runs"
	assert_tally 90
}
