#!/usr/bin/env bats
# Long operations show progress when standard error is a terminal, and
# print nothing extra when it is not.  The terminal is a real
# pseudo-terminal from script(1) (util-linux).

load helpers

setup() {
	command -v script >/dev/null || fail "script(1) is not installed (Debian package bsdutils)"
}

# on_tty CMD: run the shell command CMD with stdin, stdout and stderr on a
# pseudo-terminal; what it wrote there is in $output.
on_tty() {
	run timeout "$WAIT_S" script -qec "$1" /dev/null </dev/null
}

# 1001 run specs, more than exec-accept summarizes for a terminal.
many_specs() {
	local i
	for i in $(seq 1 1001); do spec "p$i"; done >"$BATS_TEST_TMPDIR/runs"
}

@test "exec-accept: a large batch ends with a count on a terminal" {
	start_dispatcher
	open_session
	many_specs
	on_tty "exec-accept <'$BATS_TEST_TMPDIR/runs' >/dev/null"
	assert_success
	assert_output --partial "exec-accept: 1001 accepted, 0 duplicates, 0 rejected"
}

@test "exec-accept: a batch from a file shows its rate and an ETA on a terminal while it runs" {
	start_dispatcher
	open_session
	many_specs
	# the first chunk (1000 of 1001 lines) is drawn at once, with what is
	# left of the file as the ETA's base
	on_tty "exec-accept <'$BATS_TEST_TMPDIR/runs' >/dev/null"
	assert_success
	assert_output --regexp "exec-accept: 1000 accepted, [0-9]+/s, ETA [0-9]+[a-z]+[0-9]*[a-z]*, 0 duplicates, 0 rejected"
	# from a pipe the whole is unknown: a rate, no ETA
	on_tty "cat '$BATS_TEST_TMPDIR/runs' | exec-accept --state-dir '$EXEC_STATE_DIR' >/dev/null"
	assert_success
	assert_output --regexp "exec-accept: [0-9]+ accepted(, [0-9]+/s)?, [0-9]+ duplicates?, 0 rejected"
	refute_output --partial "ETA"
}

@test "exec-accept: nothing on stderr when it is not a terminal" {
	start_dispatcher
	open_session
	many_specs
	run --separate-stderr exec-accept <"$BATS_TEST_TMPDIR/runs"
	assert_success
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1001 ]
}

# Results this session can deliver: their first reports failed.
deliverable_results() {
	start_dispatcher
	open_session
	fault 5xx 1000
	submit_and_accept "$(spec d1)" "$(spec d2)" "$(spec d3)"
	exec-run start --wait --budget-ms 200 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	[ "$(exec-inspect list retained --ids | wc -l)" -eq 3 ]
}

@test "exec-reconcile --drain: progress per pass on a terminal" {
	deliverable_results
	on_tty "exec-reconcile --drain --max 1 >/dev/null"
	assert_success
	# totals since the drain began, the rate, an ETA while something is
	# left, and what is left to deliver
	assert_output --regexp "exec-reconcile: 1 delivered(, [0-9]+/s, ETA [0-9]+[a-z]+[0-9]*[a-z]*)?, 0 refused, 0 waiting, pass 1, 2 left"
	assert_output --regexp "exec-reconcile: 3 delivered(, [0-9]+/s)?, 0 refused, 0 waiting, pass 3, 0 left"
	[ "$(exec-inspect list retained --ids | wc -l)" -eq 0 ]
}

@test "exec-reconcile --drain: nothing on stderr when it is not a terminal" {
	deliverable_results
	run --separate-stderr exec-reconcile --drain --max 1
	assert_success
	[ -z "$stderr" ]
	[ "$(exec-inspect list retained --ids | wc -l)" -eq 0 ]
}
