#!/usr/bin/env bats
# exec-loop: the tools composed into an executor.

load helpers

finished() { admin GET /admin/summary | grep -o '"finished":[0-9]*' | cut -d: -f2; }

start_loop() {
	exec-loop --dispatcher "$DISP_URL" --tick 0.1 "$@" 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	LOOP_PID=$!
}

@test "work flows from the dispatcher through the loop and back; TERM stops it cleanly" {
	start_dispatcher
	body=$(for i in $(seq 1 12); do spec "w$i" /bin/sh "[\"-c\",\"exit $((i % 3))\"]"; done | paste -sd, -)
	admin POST /admin/runs "{\"runs\":[$body]}" >/dev/null
	start_loop --slots 3
	wait_until '[ "$(finished)" = 12 ]'
	kill -TERM "$LOOP_PID"
	status=0
	wait "$LOOP_PID" || status=$?
	[ "$status" -eq 0 ]
	[ "$(sql "SELECT status FROM sessions")" = closed ]
	admin GET /admin/sessions | grep -q '"status":"closed"'
	[ "$(sql "SELECT count(*) FROM receipts")" = 12 ]
	[ "$(sql "SELECT count(*) FROM runs") $(sql "SELECT count(*) FROM results")" = "0 0" ]
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":12' ]
}

@test "results whose cleanup delivery failed are delivered by a reconcile pass" {
	start_dispatcher
	admin POST /admin/runs "$(spec late)" >/dev/null
	fault 5xx 3
	start_loop
	wait_until '[ "$(finished)" = 1 ]'
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
	[ "$(disp_reports late)" = 4 ]
	[ "$(disp_charges late)" = 1 ]
}

@test "a revoked session stops the loop with exit 77" {
	start_dispatcher
	start_loop
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	admin POST "/admin/sessions/$(current_session)/revoke" >/dev/null
	status=0
	wait "$LOOP_PID" || status=$?
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT status FROM sessions")" = revoked ]
}

@test "on TERM a running guest finishes and its result is reported before the session closes" {
	start_dispatcher
	admin POST /admin/runs "$(spec slow /bin/sleep '["1"]')" >/dev/null
	start_loop
	wait_until '[ "$(sql "SELECT count(*) FROM runs WHERE state='"'started'"'" 2>/dev/null)" = 1 ]'
	kill -TERM "$LOOP_PID"
	status=0
	wait "$LOOP_PID" || status=$?
	[ "$status" -eq 0 ]
	[ "$(finished)" = 1 ]
	[ "$(sql "SELECT outcome FROM receipts")" = exited ]
}

@test "a dispatcher that is down at start: exit 69" {
	run exec-loop --dispatcher http://127.0.0.1:9 --tick 0.1
	[ "$status" -eq "$EK_UNAVAILABLE" ]
}

@test "usage errors exit 64" {
	run exec-loop
	[ "$status" -eq "$EK_USAGE" ]
	run exec-loop --dispatcher http://x --slots many
	[ "$status" -eq "$EK_USAGE" ]
}
