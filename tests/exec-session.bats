#!/usr/bin/env bats
# exec-session against the real reference dispatcher on loopback: open
# stores the binding and prints the startup report; a second open replaces
# the first; heartbeat follows the dispatcher's verdict (revoked, expired,
# replaced) into the local state; a dispatcher that is down, hangs or talks
# nonsense fails the call within its bound and writes no session; the
# credential never shows up in anything a command prints.

load helpers

teardown() { stop_dispatcher; }

# jget JSON PATH: a value out of one JSON text, read by SQLite's JSON functions.
jget() {
	sqlite3 :memory: "SELECT json_extract('${1//\'/\'\'}', '$2')"
}

# jtype JSON [PATH]: the JSON type of the text or of the value at PATH.
jtype() {
	sqlite3 :memory: "SELECT json_type('${1//\'/\'\'}', '${2:-\$}')"
}

# disp_status SID: the session's status at the dispatcher.
disp_status() {
	admin GET /admin/sessions | sed -n "s/.*\"session_id\":\"$1\",[^}]*\"status\":\"\([a-z]*\)\".*/\1/p"
}

# elapsed_ms START_NS: milliseconds since START_NS (date +%s%N).
elapsed_ms() {
	echo $((($(date +%s%N) - $1) / 1000000))
}

@test "open prints the startup report and stores the binding" {
	start_dispatcher
	run --separate-stderr exec-session open --dispatcher "$DISP_URL"
	assert_success
	[ -z "$stderr" ]
	local sid inc
	sid=$(sql "SELECT session_id FROM sessions WHERE status='current'")
	inc=$(sql "SELECT incarnation FROM sessions WHERE status='current'")
	[[ $sid == ses-* && $inc == inc-* ]] || fail "binding '$inc' '$sid'"
	assert_line "session $sid (incarnation $inc) is current at $DISP_URL"
	assert_line --regexp '^quarantined: 0 runs'
	assert_line --regexp '^unknown: 0 runs'
	assert_line --regexp '^unreconciled results: 0 \(deliverable now 0, owned by an earlier session 0, refused 0\)'
	[ "$(sql "SELECT dispatcher FROM sessions WHERE session_id='$sid'")" = "$DISP_URL" ]
	[[ $(sql "SELECT credential FROM sessions WHERE session_id='$sid'") =~ ^[0-9a-f]{32,}$ ]]
	[ "$(disp_status "$sid")" = current ]
	[ "$(admin GET /admin/sessions | sed -n 's/.*"incarnation":"\([^"]*\)".*/\1/p')" = "$inc" ]
	[ "$(current_session)" = "$sid" ]
}

@test "a second open replaces the first here and at the dispatcher" {
	start_dispatcher
	open_session
	local first second
	first=$(current_session)
	open_session
	second=$(current_session)
	[ -n "$first" ]
	[ -n "$second" ]
	[ "$first" != "$second" ]
	[ "$(sql "SELECT status FROM sessions WHERE session_id='$first'")" = replaced ]
	[ "$(sql "SELECT ended_at IS NOT NULL FROM sessions WHERE session_id='$first'")" = 1 ]
	[ "$(sql "SELECT status FROM sessions WHERE session_id='$second'")" = current ]
	[ "$(sql "SELECT count(*) FROM sessions WHERE status='current'")" = 1 ]
	[ "$(disp_status "$first")" = replaced ]
	[ "$(disp_status "$second")" = current ]
}

@test "heartbeat of a live session prints 'current' and records the beat" {
	start_dispatcher
	open_session
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE sessions SET last_beat_at = 1"
	run --separate-stderr exec-session heartbeat
	assert_success
	assert_output current
	[ "$(sql "SELECT last_beat_at > 1 FROM sessions WHERE status='current'")" = 1 ]
	run --separate-stderr exec-session heartbeat --json
	assert_success
	[ "$(jget "$output" '$.status')" = current ]
	[ "$(jget "$output" '$.session_id')" = "$(current_session)" ]
}

@test "after the dispatcher revokes, expires or replaces a session, heartbeat ends it here" {
	start_dispatcher
	local kind want sid
	for kind in revoke expire replace; do
		want=${kind%e}ed
		open_session
		sid=$(current_session)
		[ "$(admin POST "/admin/sessions/$sid/$kind")" = "{\"status\":\"$want\"}" ]
		run --separate-stderr exec-session heartbeat
		[ "$status" -eq "$EK_NOSESSION" ] || fail "$kind: heartbeat status $status: $stderr"
		[[ $stderr == *"$want"* ]] || fail "$kind: stderr does not say $want: $stderr"
		[ "$output" = "over $want" ] || fail "$kind: heartbeat said '$output'"   # exec-loop reads it
		[ "$(sql "SELECT status FROM sessions WHERE session_id='$sid'")" = "$want" ] ||
			fail "$kind: local status $(sql "SELECT status FROM sessions WHERE session_id='$sid'")"
		[ "$(sql "SELECT count(*) FROM sessions WHERE status='current'")" = 0 ]
		# No current session any more: nothing can be accepted under it.
		run --separate-stderr exec-accept < <(spec "r-$kind")
		[ "$status" -eq "$EK_NOSESSION" ]
		run --separate-stderr exec-session heartbeat
		[ "$status" -eq "$EK_NOSESSION" ]
		[ -z "$output" ]                         # none current here: nothing was said over
	done
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
}

@test "heartbeat against a dispatcher that is down fails fast with EK_UNAVAILABLE" {
	start_dispatcher
	open_session
	local sid t0 ms
	sid=$(current_session)
	stop_dispatcher
	t0=$(date +%s%N)
	run --separate-stderr exec-session heartbeat --timeout-ms 1000
	ms=$(elapsed_ms "$t0")
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[[ $stderr == *unavailable* ]]
	[ "$ms" -lt 3000 ] || fail "took $ms ms"
	# A dispatcher we cannot reach has not ended the session.
	[ "$(sql "SELECT status FROM sessions WHERE session_id='$sid'")" = current ]
}

@test "open against a dispatcher that hangs gives up within its timeout" {
	start_dispatcher
	admin POST /admin/faults '{"kind":"hang","path":"/v1/sessions","delay_ms":4000,"count":1}' >/dev/null
	local t0 ms
	t0=$(date +%s%N)
	run --separate-stderr exec-session open --dispatcher "$DISP_URL" --timeout-ms 500
	ms=$(elapsed_ms "$t0")
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[ "$ms" -lt 2000 ] || fail "took $ms ms"
	[ "$(sql "SELECT count(*) FROM sessions")" = 0 ]
}

@test "open given a garbage answer fails and writes no session" {
	start_dispatcher
	admin POST /admin/faults '{"kind":"malformed","path":"/v1/sessions","count":1}' >/dev/null
	run --separate-stderr exec-session open --dispatcher "$DISP_URL"
	[ "$status" -eq "$EK_PROTOCOL" ] || [ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[[ $stderr == *malformed* ]] || fail "stderr: $stderr"
	[ "$(sql "SELECT count(*) FROM sessions")" = 0 ]
	# A 5xx is no better.
	admin POST /admin/faults '{"kind":"5xx","path":"/v1/sessions","count":1}' >/dev/null
	run --separate-stderr exec-session open --dispatcher "$DISP_URL"
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "5xx: status $status: $stderr"
	[ "$(sql "SELECT count(*) FROM sessions")" = 0 ]
	# And the next, healthy answer works.
	run exec-session open --dispatcher "$DISP_URL"
	assert_success
	[ "$(sql "SELECT count(*) FROM sessions WHERE status='current'")" = 1 ]
}

@test "a first open whose dispatcher cannot be reached leaves no state directory; one that reached it, and a state that was there, are kept" {
	local port
	port=$(dead_port)
	[ ! -e "$EXEC_STATE_DIR" ]
	run --separate-stderr exec-session open --dispatcher "http://127.0.0.1:$port"
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[[ $stderr == *"removed '$EXEC_STATE_DIR', made for this open"* ]] || fail "$stderr"
	[ ! -e "$EXEC_STATE_DIR" ]
	# reached, and refused: kept, the dispatcher may hold what it saw
	start_dispatcher
	admin POST /admin/faults '{"kind":"5xx","path":"/v1/sessions","count":1}' >/dev/null
	run --separate-stderr exec-session open --dispatcher "$DISP_URL"
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[ -s "$EXEC_STATE_DIR/state.db" ]
	# a state that was there is never removed
	run --separate-stderr exec-session open --dispatcher "http://127.0.0.1:$port"
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[ -s "$EXEC_STATE_DIR/state.db" ]
	[[ $stderr != *removed* ]] || fail "$stderr"
}

@test "close ends the session here and at the dispatcher" {
	start_dispatcher
	open_session
	local sid
	sid=$(current_session)
	run --separate-stderr exec-session close
	assert_success
	assert_output "session $sid closed"
	[ "$(sql "SELECT status FROM sessions WHERE session_id='$sid'")" = closed ]
	[ "$(disp_status "$sid")" = closed ]
	run exec-session heartbeat
	[ "$status" -eq "$EK_NOSESSION" ]
	run exec-session close
	[ "$status" -eq "$EK_NOSESSION" ]
}

@test "close with the dispatcher down closes here and says the dispatcher was not told" {
	start_dispatcher
	open_session
	local sid
	sid=$(current_session)
	stop_dispatcher
	run --separate-stderr exec-session close --timeout-ms 1000
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status"
	[[ $output == *"could not be told"* ]]
	[ "$(sql "SELECT status FROM sessions WHERE session_id='$sid'")" = closed ]
}

@test "the credential never appears in any output" {
	start_dispatcher
	local log=$BATS_TEST_TMPDIR/all.log cmd
	{
		exec-session open --dispatcher "$DISP_URL"
		exec-session open --dispatcher "$DISP_URL" --json
		admin POST /admin/runs "$(spec f1)"
		exec-accept --from-dispatcher
		exec-accept --from-dispatcher --json
		spec s1 | exec-accept --json
		for cmd in heartbeat show report; do
			exec-session "$cmd"
			exec-session "$cmd" --json
		done
		exec-session close --json
		exec-session open --dispatcher "$DISP_URL"
		admin POST "/admin/sessions/$(current_session)/revoke" >/dev/null
		exec-session heartbeat --json
		exec-session show --json
	} >"$log" 2>&1 || true
	[ "$(sql "SELECT count(*) FROM sessions")" = 3 ]
	local cred n=0
	for cred in $(sql "SELECT credential FROM sessions"); do
		[ "${#cred}" -ge 32 ] || fail "credential too short to test: '$cred'"
		! grep -qF "$cred" "$log" || fail "credential printed"
		! grep -qF "$cred" "$BATS_TEST_TMPDIR/disp.log" || fail "credential in the dispatcher log"
		n=$((n + 1))
	done
	[ "$n" = 3 ]
	grep -q '"session_id"' "$log"   # the log is not empty of what we looked for
}

@test "open --json emits one JSON object with the documented report fields" {
	start_dispatcher
	run --separate-stderr exec-session open --dispatcher "$DISP_URL" --json
	assert_success
	[ "${#lines[@]}" -eq 1 ] || fail "${#lines[@]} lines"
	local j=${lines[0]} f
	[ "$(jtype "$j")" = object ]
	[ "$(jget "$j" '$.event')" = session_open ]
	[ "$(jget "$j" '$.session_id')" = "$(current_session)" ]
	[[ $(jget "$j" '$.incarnation') == inc-* ]]
	[ "$(jget "$j" '$.dispatcher')" = "$DISP_URL" ]
	for f in quarantined.total quarantined.queued quarantined.started unknown \
		unreconciled.total unreconciled.deliverable unreconciled.earlier_session \
		unreconciled.refused; do
		[ "$(jtype "$j" "\$.$f")" = integer ] || fail "$f: $(jtype "$j" "\$.$f")"
		[ "$(jget "$j" "\$.$f")" = 0 ] || fail "$f = $(jget "$j" "\$.$f")"
	done
	[ "$(jtype "$j" '$.credential')" = "" ]
}

@test "usage errors exit EK_USAGE and touch nothing" {
	local args
	while IFS= read -r args; do
		# shellcheck disable=SC2086
		run --separate-stderr exec-session $args
		[ "$status" -eq "$EK_USAGE" ] || fail "'$args': status $status"
		[ -z "$output" ] || fail "'$args' wrote to stdout"
		[[ $stderr == *"Try 'exec-session --help'"* ]] || fail "'$args': $stderr"
	done <<-'EOF'
		open
		frobnicate
		
		heartbeat close
		open --dispatcher http://127.0.0.1:1 --timeout-ms 0
		open --dispatcher http://127.0.0.1:1 --timeout-ms abc
		open --dispatcher http://127.0.0.1:1 --timeout-ms -5
		open --dispatcher http://127.0.0.1:1 --timeout-ms 10ms
		heartbeat --timeout-ms 99999999999
		heartbeat --dispatcher http://127.0.0.1:1
		open --dispatcher ftp://127.0.0.1:1
	EOF
	run --separate-stderr exec-session open
	[[ $stderr == *--dispatcher* ]]
	run --separate-stderr exec-session frobnicate
	[[ $stderr == *"unknown command 'frobnicate'"* ]]
	run --separate-stderr exec-session heartbeat --timeout-ms abc
	[[ $stderr == *--timeout-ms* ]]
	[ ! -e "$EXEC_STATE_DIR" ] || fail "a usage error created the state directory"
}

@test "the startup report says 1 run, not 1 runs" {
	start_dispatcher
	open_session
	spec q1 | exec-accept >/dev/null
	run --separate-stderr exec-session open --dispatcher "$DISP_URL"
	assert_success
	assert_line 'quarantined: 1 run of other sessions (1 queued, 0 started)'
	assert_line 'unknown: 0 runs'
}

@test "the startup report of a second open counts the first session's runs as quarantined" {
	start_dispatcher
	open_session
	local first
	first=$(current_session)
	{ spec q1; spec q2; spec q3; } | exec-accept >/dev/null
	run --separate-stderr exec-session open --dispatcher "$DISP_URL"
	assert_success
	assert_line --regexp '^quarantined: 3 runs of other sessions \(3 queued, 0 started\)$'
	run --separate-stderr exec-session report --json
	assert_success
	[ "$(jget "$output" '$.quarantined.total')" = 3 ]
	[ "$(jget "$output" '$.quarantined.queued')" = 3 ]
	# Quarantined, not moved: the rows keep the binding that accepted them.
	[ "$(sql "SELECT count(*) FROM runs WHERE session_id='$first'")" = 3 ]
	[ "$(sql "SELECT count(*) FROM accepts WHERE session_id='$first'")" = 3 ]
	run --separate-stderr exec-session open --dispatcher "$DISP_URL" --json
	[ "$(jget "$output" '$.quarantined.total')" = 3 ]
}

@test "a close interrupted while the dispatcher does not answer leaves no marker that blocks lookups" {
	start_dispatcher
	open_session
	local sid sig pid
	sid=$(current_session)
	for sig in TERM KILL; do   # (a background job ignores INT: TERM stands for Ctrl-C)
		fault hang 1 3600000 "/v1/sessions/$sid"   # the DELETE is never answered
		exec-session close 3>&- &
		pid=$!
		# its own marker (pid:start time), not the one the TERM round left
		wait_until 'grep -q "^$pid:" "$EXEC_STATE_DIR/shutdown" 2>/dev/null'
		kill -s "$sig" "$pid"
		wait "$pid" || true
		admin DELETE /admin/faults >/dev/null
		[ "$(current_session)" = "$sid" ]            # still current here
		run exec-inspect lookup nope --session "$sid"
		[ "$status" -ne "$EK_TEMPFAIL" ] || fail "after $sig: $output"
		assert_output "ABSENT run_id=nope"
	done
}
