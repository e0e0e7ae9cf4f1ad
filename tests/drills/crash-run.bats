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

@test "the points of this file crashed at least 90 times in all, with 0 violations" {
	[ "${DRILL_SEEDS:-14}" -ge 14 ] || skip "DRILL_SEEDS=$DRILL_SEEDS: fewer seeds than CI runs"
	assert_tally 90
}
