#!/usr/bin/env bats
# Loss of the control session while guests run: revoked, expired (by the
# admin or by its lease running out) or replaced (by the dispatcher, or by
# a new negotiation on this executor).  Declared outcome: the guests finish
# once, their results are retained, delivery stops at once (at most the
# one attempt that learned of it), nothing is charged, the old session's
# queued runs stay quarantined, and nothing is ever sent under the new one
# until it adopts the old session explicitly; then the results are
# delivered once each, and the queued runs stay quarantined still.

load drill

# Three gated guests running under the current session, one run queued
# (heartbeats along the way, so that a short lease lapses only afterwards).
mid_work() {
	start_dispatcher
	open_session
	OLD=$(current_session)
	submit "$(gspec m1 0 1)" "$(gspec m2 1 1)" "$(gspec m3 2 1)" "$(gspec mq)"
	exec-session heartbeat >/dev/null
	exec-accept --from-dispatcher >/dev/null
	exec-session heartbeat >/dev/null
	exec-run start --slots 3 >/dev/null
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 3 ]'
	[ "$(val "SELECT state FROM runs WHERE run_id = 'mq'")" = queued ]   # baseline witness
}

# After the loss: release the guests and observe.
observe() {
	local status_word=$1 max_attempts=$2 id
	touch "$GO"
	wait_until '[ "$(val "SELECT count(*) FROM results")" = 3 ]'
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 0 ]'
	for id in m1 m2 m3; do
		[ "$(ran "$id")" = 1 ]
		[ "$(val "SELECT refused FROM results WHERE run_id = '$id'")" = 0 ]   # retained, not refused
		[ "$(val "SELECT attempts FROM results WHERE run_id = '$id'")" -le "$max_attempts" ]
		[ "$(disp_charges "$id")" = 0 ]
	done
	# the first attempt that learns of the loss ends the session here: at most
	# one result was sent at all (the others, racing it, at most once each)
	[ "$(val "SELECT count(*) FROM results WHERE attempts > 1")" = 0 ]
	[ "$(val "SELECT status FROM sessions WHERE session_id = '$OLD'")" = "$status_word" ]
	# declared action: a new session; the old rows are quarantined
	open_session
	run exec-session report --json
	assert_output --partial '"quarantined":{"total":1,'
	assert_output --partial '"earlier_session":3'
	exec-run start --wait >/dev/null
	[ "$(ran mq)" = 0 ]                                # never started by the new session
	reports=$(admin GET /admin/summary | grep -o '"reports":[0-9]*')
	run exec-reconcile --drain
	for id in m1 m2 m3; do
		run exec-report "$id"
		[ "$status" -eq "$EK_NOSESSION" ]              # never sent under another binding
	done
	[ "$(admin GET /admin/summary | grep -o '"reports":[0-9]*')" = "$reports" ]
	run exec-run cancel --session "$(current_session)" mq
	[ "$status" -eq "$EK_NOSESSION" ]                  # not cancellable by the new session
	check --drained
	if [ "$status_word" = revoked ]; then refused_adoption; else adopt_and_drain; fi
}

# A revoked session's authority is gone for good: the dispatcher refuses to
# let it be adopted (76), and its results stay retained as evidence here,
# never sent, until an operator exports them (exec-reconcile --export-evidence).
refused_adoption() {
	local id
	run exec-session adopt "$OLD"
	[ "$status" -eq "$EK_PROTOCOL" ]
	assert_output --partial "revoked"
	exec-reconcile --drain >/dev/null || true
	for id in m1 m2 m3; do
		[ "$(val "SELECT count(*) FROM results WHERE run_id = '$id' AND refused = 0")" = 1 ]
		[ "$(disp_charges "$id")" = 0 ]
	done
	exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl" >/dev/null
	[ "$(grep -c '"run_id":"m[123]"' "$BATS_TEST_TMPDIR/evidence.jsonl")" = 3 ]
	[ "$(val "SELECT count(*) FROM results")" = 0 ]
}

# The way out, explicit: the new session adopts OLD; the drain delivers its
# results once each, with their stored bodies; mq stays quarantined.
adopt_and_drain() {
	local id
	exec-session adopt "$OLD" >/dev/null
	exec-reconcile --drain >/dev/null
	for id in m1 m2 m3; do
		[ "$(val "SELECT count(*) FROM receipts WHERE run_id = '$id' AND session_id = '$OLD'")" = 1 ]
		[ "$(disp_charges "$id")" = 1 ]
		[ "$(disp_hashes "$id" | sort -u | wc -l)" = 1 ]
	done
	exec-run start --wait >/dev/null
	[ "$(ran mq)" = 0 ]
	check --drained
}

@test "session revoked mid-work: results retained, delivery stops at once, nothing charged; never adoptable, exported as evidence" {
	mid_work
	admin POST "/admin/sessions/$OLD/revoke" >/dev/null
	observe revoked 1
}

@test "session expired by the dispatcher mid-work: the same" {
	mid_work
	admin POST "/admin/sessions/$OLD/expire" >/dev/null
	observe expired 1
}

@test "session lease runs out mid-work (no heartbeat): the same" {
	mid_work
	# the lease, an hour long so that setting up never races it, now runs
	# out without a heartbeat; the dispatcher's own lapse expires it
	admin POST "/admin/sessions/$OLD/lease" '{"ms":0}' >/dev/null
	wait_until 'admin GET /admin/sessions | grep -q "\"$OLD\",\"executor_id\":\"[0-9a-f]*\",\"status\":\"expired\""'
	observe expired 1
}

@test "session replaced by the dispatcher mid-work: the same" {
	mid_work
	admin POST "/admin/sessions/$OLD/replace" >/dev/null
	observe replaced 1
}

@test "session replaced by a new negotiation here mid-work: nothing is sent at all" {
	mid_work
	open_session                                   # the loss: OLD becomes replaced
	NEW=$(current_session)
	[ "$NEW" != "$OLD" ]
	touch "$GO"
	wait_until '[ "$(val "SELECT count(*) FROM results")" = 3 ]'
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 0 ]'
	for id in m1 m2 m3; do
		[ "$(ran "$id")" = 1 ]
		[ "$(val "SELECT attempts FROM results WHERE run_id = '$id'")" = 0 ]   # never sent
		[ "$(disp_reports "$id")" = 0 ]
	done
	exec-run start --wait >/dev/null
	[ "$(ran mq)" = 0 ]
	run exec-session report --json
	assert_output --partial '"quarantined":{"total":1,'
	check --drained
	adopt_and_drain
}

# Two results of session OLD retained (their reports failed), as a restart
# leaves them.
retained_under_old() {
	start_dispatcher
	open_session
	OLD=$(current_session)
	submit "$(gspec k1)" "$(gspec k2 1)"
	exec-accept --from-dispatcher >/dev/null
	fault 5xx 1000
	exec-run start --wait --budget-ms 100 >/dev/null
	admin DELETE /admin/faults >/dev/null
	[ "$(val "SELECT count(*) FROM results WHERE refused = 0")" = 2 ]
}

disp_session_status() {
	admin GET /admin/sessions | grep -o "\"session_id\":\"$1\"[^}]*" | grep -o '"status":"[a-z]*"' | cut -d'"' -f4
}

@test "kill -9 of exec-session open after the dispatcher issued the session: the next heartbeat ends the old one; open and adopt recover" {
	retained_under_old
	crash session-negotiated exec-session open --dispatcher "$DISP_URL"
	# witness: here OLD is still current; there it was replaced by a session never stored here
	[ "$(current_session)" = "$OLD" ]
	[ "$(disp_session_status "$OLD")" = replaced ]
	[ "$(admin GET /admin/sessions | grep -o '"status":"current"' | wc -l)" = 1 ]
	[ "$(val "SELECT count(*) FROM sessions")" = 1 ]
	run exec-session heartbeat
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(val "SELECT status FROM sessions WHERE session_id = '$OLD'")" = replaced ]
	# declared action: open again, adopt OLD, drain
	open_session
	exec-session adopt "$OLD" >/dev/null
	exec-reconcile --drain >/dev/null
	for id in k1 k2; do
		[ "$(disp_charges "$id")" = 1 ]
		[ "$(ran "$id")" = 1 ]
	done
	check --drained
}

@test "kill -9 of exec-session adopt after the dispatcher recorded it: nothing is sent until adopt runs again" {
	retained_under_old
	open_session
	local reports
	crash adopted-there exec-session adopt "$OLD"
	# witness: adopted there, not here; nothing deliverable, nothing sent
	admin GET /admin/sessions | grep -q "\"session_id\":\"$OLD\"[^}]*\"adopted_by\":\"$(current_session)\""
	[ "$(val "SELECT count(*) FROM adoptions")" = 0 ]
	reports=$(admin GET /admin/summary | grep -o '"reports":[0-9]*')
	exec-reconcile --drain >/dev/null
	[ "$(admin GET /admin/summary | grep -o '"reports":[0-9]*')" = "$reports" ]
	# declared action: adopt again (the same answer there), then drain
	exec-session adopt "$OLD" >/dev/null
	[ "$(val "SELECT count(*) FROM adoptions")" = 1 ]
	exec-reconcile --drain >/dev/null
	for id in k1 k2; do [ "$(disp_charges "$id")" = 1 ]; done
	check --drained
}
