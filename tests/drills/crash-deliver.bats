#!/usr/bin/env bats
# kill -9 at the commit points of delivering a retained result
# (libcommon/lifecycle.h, libcommon/deliver.c).  The dying process is, by
# seed, the supervisor reporting its own result, exec-report or
# exec-reconcile.  Per seed: witness → SIGKILL at the point → declared
# action (sweep, start, reconcile --drain) → a fresh check-invariants
# --drained and the point's own asserts.

load crash

@test "claimed: a dead deliverer's claim does not block the next one" {
	in_child crash_drill claimed
}

@test "attempt-counted: an attempt counted but never sent; delivered once later" {
	in_child crash_drill attempt-counted
}

@test "request-sent: the answer is lost; the resend is a duplicate, charged once" {
	in_child crash_drill request-sent
}

@test "acked-before-release: the ack rolls back; the resend is a duplicate, charged once" {
	in_child crash_drill acked-before-release
}

@test "after-release: the receipt is kept; nothing is sent again" {
	in_child crash_drill after-release
}

@test "refusal-before-evidence: the refusal repeats and is kept as evidence once" {
	in_child crash_drill refusal-before-evidence
}

@test "after-report: the execution row is gone; nothing is left to do" {
	in_child crash_drill after-report
}

@test "every seed of the file's 7 points crashed its victims, with 0 violations" {
	assert_tally 7
}
