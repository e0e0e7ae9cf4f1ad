#!/usr/bin/env bats
# InspectRetainedRun through the dispatcher's client API: a client, with the
# token an operator issued it, posts an inspection naming a session to
# exec-dispatcher, the heartbeat tells the executor, `exec-inspect relay`
# answers it with the local lookup (FOUND / FILTERED / ABSENT, anything else
# ERROR, never ABSENT), and the client reads the answer, waiting as long as it
# chooses.  The relay writes nothing to the state.

load helpers
load inspect

# A loop left by a failing test is ended with the rest of what it started.
teardown() {
	[ -z "${loop:-}" ] || kill -KILL "$loop" 2>/dev/null || true
	common_teardown
}

# api METHOD PATH [BODY [CREDENTIAL]]: one bounded request; sets $code and
# $body.  The credential (an executor's, or a client's token) goes in a
# header file, never on curl's command line; without one, /admin/ gets the
# admin token (admin_auth) on stdin.
api() {
	local args=(-sS --noproxy '*' --max-time 10 -o "$BATS_TEST_TMPDIR/resp" -w '%{http_code}' -X "$1") auth=
	if [ -n "${4-}" ]; then
		printf 'Authorization: Bearer %s\n' "$4" >"$BATS_TEST_TMPDIR/auth"
		args+=(-H @"$BATS_TEST_TMPDIR/auth")
	elif [[ $2 == /admin/* ]]; then
		admin_auth auth
		args+=(-H @-)
	fi
	[ -z "${3-}" ] || args+=(-H 'Content-Type: application/json' --data-binary "$3")
	code=$(curl "${args[@]}" "$DISP_URL$2" <<<"$auth") || code="curl-$?"
	body=$(cat "$BATS_TEST_TMPDIR/resp" 2>/dev/null || true)
	rm -f "$BATS_TEST_TMPDIR/resp"
}

# jget JSON PATH: a value out of one JSON text, read by SQLite's JSON functions.
jget() {
	sqlite3 :memory: "SELECT json_extract('${1//\'/\'\'}', '$2')"
}

# issue [NAME]: a new client of the dispatcher (POST /admin/clients); sets
# CLIENT and TOKEN to its id and token.
issue() {
	api POST /admin/clients "{\"name\":\"${1:-test client}\"}"
	[ "$code" = 201 ] || { echo "issue: $code $body" >&2; return 1; }
	CLIENT=$(jget "$body" '$.client_id') TOKEN=$(jget "$body" '$.token')
	[ -n "$CLIENT" ] && [ -n "$TOKEN" ]
}

# ask RUN_ID [SESSION_ID]: a client's inspection (default: the current
# session), with $TOKEN (issued on first use); sets INSP to its id.  RUN_ID
# goes into the JSON as it is.
ask() {
	[ -n "${TOKEN:-}" ] || issue
	api POST /v1/inspections "{\"run_id\":\"$1\",\"session_id\":\"${2:-$SID}\"}" "$TOKEN"
	[ "$code" = 202 ] || { echo "ask $1: $code $body" >&2; return 1; }
	INSP=$(jget "$body" '$.inspection_id')
	[ "$(jget "$body" '$.status')" = pending ] && [ -n "$INSP" ]
}

# answer_of INSP [WAIT_MS [TOKEN]]: a client's read (default: with $TOKEN);
# sets $code and $body.
answer_of() {
	api GET "/v1/inspections/$1?wait_ms=${2:-0}" "" "${3:-$TOKEN}"
}

# inspections_stored: how many inspections the dispatcher's store holds.
inspections_stored() {
	sqlite3 "$BATS_TEST_TMPDIR/disp.db" "SELECT count(*) FROM inspections"
}

ms() { echo $(( $(date +%s%N) / 1000000 )); }

# --- the answers, through the dispatcher ----------------------------------------

@test "relay: FOUND for a quarantined run reaches the client, with its binding and never its program" {
	two_sessions
	inc_old=$(sql "SELECT incarnation FROM sessions WHERE session_id = '$OLD_SID'")
	ask a1
	run --separate-stderr exec-inspect relay
	assert_success
	assert_output --regexp "^$INSP FOUND run_id=a1 incarnation=$inc_old session_id=$OLD_SID txn_id=t-a1 started=no start_marker=- due_at=[0-9]+ state=queued$"
	answer_of "$INSP"
	[ "$code" = 200 ]
	[ "$(jget "$body" '$.status')" = answered ]
	[ "$(jget "$body" '$.run_id')" = a1 ]
	[ "$(jget "$body" '$.session_id')" = "$SID" ]
	[[ "$body" =~ \"answer\":\{\"outcome\":\"FOUND\",\"run_id\":\"a1\",\"incarnation\":\"$inc_old\",\"session_id\":\"$OLD_SID\",\"txn_id\":\"t-a1\",\"started\":false,\"start_marker\":null,\"due_at\":[0-9]+,\"state\":\"queued\"\} ]] ||
		fail "answer: $body"
	# neither the answer nor the dispatcher's store holds the program or its arguments
	for s in secret-arg /bin/echo program args; do
		[[ "$body" != *"$s"* ]] || fail "the client's answer holds '$s': $body"
	done
	stored=$(sqlite3 "$BATS_TEST_TMPDIR/disp.db" "SELECT * FROM inspections")
	[[ "$stored" == *FOUND* && "$stored" != *secret-arg* && "$stored" != */bin/echo* ]] || fail "stored: $stored"
}

@test "relay: FILTERED for the current session's run, ABSENT for an unknown id; --json records" {
	two_sessions
	ask b1
	filtered=$INSP
	ask never-seen
	absent=$INSP
	run --separate-stderr exec-inspect relay --json
	assert_success
	assert_line -n 0 "{\"inspection_id\":\"$filtered\",\"recorded\":true,\"answer\":{\"outcome\":\"FILTERED\",\"run_id\":\"b1\"}}"
	assert_line -n 1 "{\"inspection_id\":\"$absent\",\"recorded\":true,\"answer\":{\"outcome\":\"ABSENT\",\"run_id\":\"never-seen\"}}"
	[ "${#lines[@]}" -eq 2 ]
	answer_of "$filtered"
	[ "$(jget "$body" '$.answer')" = '{"outcome":"FILTERED","run_id":"b1"}' ]
	answer_of "$absent"
	[ "$(jget "$body" '$.answer')" = '{"outcome":"ABSENT","run_id":"never-seen"}' ]
	# answered once: nothing is left for the next relay
	run --separate-stderr exec-inspect relay
	assert_success
	assert_output ""
}

@test "a static exec-inspect relays through exec-inspect-relay beside it; without one, 71 naming it" {
	[ "$(make_var STATIC_INSPECT)" = yes ] ||
		skip "exec-inspect is linked dynamically in this build and relays itself"
	run readelf -lW "$BUILD/exec-inspect"
	assert_success
	refute_output --partial INTERP
	refute_output --partial DYNAMIC
	installed=$(make_var pkglibexecdir)/exec-inspect-relay
	two_sessions
	ask b1
	mkdir "$BATS_TEST_TMPDIR/bin"
	cp "$BUILD/exec-inspect" "$BATS_TEST_TMPDIR/bin/"
	# Alone, and nothing installed: it says what it could not run, before it
	# opens any state (a missing state directory would be 66).
	if [ ! -e "$installed" ]; then
		run --separate-stderr "$BATS_TEST_TMPDIR/bin/exec-inspect" --state-dir "$BATS_TEST_TMPDIR/none" relay
		[ "$status" -eq "$EK_OSERR" ] || fail "status $status: $stderr"
		[[ "$stderr" == "exec-inspect: relay: cannot run $installed: No such file or directory"* ]] ||
			fail "stderr: $stderr"
	fi
	# With its relay beside it, the inspection is answered as ever.
	cp "$BUILD/exec-inspect-relay" "$BATS_TEST_TMPDIR/bin/"
	run --separate-stderr "$BATS_TEST_TMPDIR/bin/exec-inspect" relay
	assert_success
	assert_output "$INSP FILTERED run_id=b1"
	answer_of "$INSP"
	[ "$(jget "$body" '$.answer')" = '{"outcome":"FILTERED","run_id":"b1"}' ]
}

@test "relay: a malformed run id is an ERROR answer, never ABSENT" {
	two_sessions
	ids=('a b' '' "$(printf 'x%.0s' {1..129})" 'a/b' 'é' "$(printf 'y%.0s' {1..4096})")
	insps=()
	for id in "${ids[@]}"; do
		ask "$id"
		insps+=("$INSP")
	done
	run --separate-stderr exec-inspect relay
	assert_success
	[ "${#lines[@]}" -eq "${#ids[@]}" ]
	for insp in "${insps[@]}"; do
		answer_of "$insp"
		[ "$(jget "$body" '$.answer.outcome')" = ERROR ] || fail "$insp: $body"
		[ "$(jget "$body" '$.answer.exit_code')" = "$EK_DATAERR" ]
		[[ "$(jget "$body" '$.answer.reason')" == "malformed run id"* ]] || fail "$insp: $body"
		[[ "$body" != *ABSENT* ]] || fail "$insp: $body"
	done
}

@test "relay: a stored transaction id over 256 bytes is an ERROR answer; 256 bytes is FOUND" {
	two_sessions
	legacy_row big "$(printf 'x%.0s' {1..300})"
	legacy_row edge "$(printf 'y%.0s' {1..256})"
	ask big
	big=$INSP
	ask edge
	edge=$INSP
	run --separate-stderr exec-inspect relay
	assert_success
	assert_line -n 0 --regexp "^$big ERROR reason=.* stored transaction id of 300 bytes exceeds the 256-byte bound' exit_code=$EK_DATAERR$"
	answer_of "$big"
	[ "$(jget "$body" '$.answer.outcome')" = ERROR ]
	[ "$(jget "$body" '$.answer.exit_code')" = "$EK_DATAERR" ]
	[[ "$(jget "$body" '$.answer.reason')" == *"stored transaction id of 300 bytes exceeds the 256-byte bound"* ]]
	answer_of "$edge"
	[ "$(jget "$body" '$.answer.outcome')" = FOUND ]
	[ "$(jget "$body" '$.answer.txn_id')" = "$(printf 'y%.0s' {1..256})" ]
}

@test "relay: an executor shutting down answers ERROR 'shutting down'; a stale marker is ignored" {
	two_sessions
	touch "$EXEC_STATE_DIR/shutdown"
	ask a1
	quarantined=$INSP
	ask never-seen
	unknown=$INSP
	run --separate-stderr exec-inspect relay
	assert_success
	for insp in "$quarantined" "$unknown"; do
		answer_of "$insp"
		[ "$(jget "$body" '$.answer.outcome')" = ERROR ] || fail "$insp: $body"
		[ "$(jget "$body" '$.answer.exit_code')" = "$EK_TEMPFAIL" ]
		[[ "$(jget "$body" '$.answer.reason')" == *"executor is shutting down"* ]]
	done
	touch -d '1 hour ago' "$EXEC_STATE_DIR/shutdown"
	ask a1
	exec-inspect relay >/dev/null
	answer_of "$INSP"
	[ "$(jget "$body" '$.answer.outcome')" = FOUND ]
}

@test "relay writes nothing: state.db and its WAL are byte-identical after many answers" {
	two_sessions
	legacy_row old1 t-old1
	legacy_row big "$(printf 'x%.0s' {1..300})"
	exec-session report >/dev/null
	before=$(state_hash)
	for i in $(seq 1 5); do
		for id in a1 b1 old1 big "none$i" 'bad id'; do
			ask "$id"
		done
		run --separate-stderr exec-inspect relay
		assert_success
		[ "${#lines[@]}" -eq 6 ]
	done
	[ "$(state_hash)" = "$before" ]
	[ "$(sql "SELECT count(*) FROM runs WHERE run_id IN ('a1','a2')")" = 2 ]   # quarantine untouched
}

# --- the client's wait --------------------------------------------------------------

@test "a client's short wait returns pending; the inspection stays and a later read gets the answer" {
	two_sessions
	ask a1
	t0=$(ms)
	answer_of "$INSP" 300
	elapsed=$(( $(ms) - t0 ))
	[ "$code" = 200 ]
	[ "$(jget "$body" '$.status')" = pending ]
	[ "$(jget "$body" '$.answer')" = "" ]
	[ "$elapsed" -ge 250 ] && [ "$elapsed" -lt 5000 ] || fail "waited $elapsed ms for 300"
	exec-inspect relay >/dev/null
	answer_of "$INSP"
	[ "$(jget "$body" '$.status')" = answered ]
	[ "$(jget "$body" '$.answer.outcome')" = FOUND ]
	# a long wait ends as soon as the answer is recorded
	ask b1
	printf 'Authorization: Bearer %s\n' "$TOKEN" >"$BATS_TEST_TMPDIR/client-auth"
	t0=$(ms)
	( sleep 0.3; exec-inspect relay >/dev/null ) 3>&- &
	relay=$!
	curl -sS --max-time 25 -H @"$BATS_TEST_TMPDIR/client-auth" \
		"$DISP_URL/v1/inspections/$INSP?wait_ms=20000" >"$BATS_TEST_TMPDIR/long"
	elapsed=$(( $(ms) - t0 ))
	wait "$relay"
	[ "$(jget "$(cat "$BATS_TEST_TMPDIR/long")" '$.answer.outcome')" = FILTERED ]
	[ "$elapsed" -ge 300 ] && [ "$elapsed" -lt 10000 ] || fail "the wait did not end on the answer: $elapsed ms"
	answer_of "$INSP" 30001
	[ "$code" = 400 ]
	answer_of insp-0000000000000000
	[ "$code" = 404 ]
	[ "$(jget "$body" '$.error')" = unknown_inspection ]
}

# --- what the dispatcher refuses ------------------------------------------------------

@test "the dispatcher refuses an inspection naming a session that is not current, or a malformed one" {
	two_sessions
	issue
	api POST /v1/inspections "{\"run_id\":\"a1\",\"session_id\":\"$OLD_SID\"}" "$TOKEN"
	[ "$code" = 410 ]
	[ "$(jget "$body" '$.error')" = session_over ]
	[ "$(jget "$body" '$.status')" = replaced ]
	api POST /v1/inspections '{"run_id":"a1","session_id":"ses-0000000000000000"}' "$TOKEN"
	[ "$code" = 404 ]
	[ "$(jget "$body" '$.error')" = unknown_session ]
	for bad in '{"session_id":"'"$SID"'"}' '{"run_id":1,"session_id":"'"$SID"'"}' '{"run_id":"a1"}' \
		'{"run_id":"a1","session_id":""}' '{"run_id":"a1","session_id":1}' \
		'{"run_id":"a1","session_id":"'"$SID"'","program":"/bin/sh"}' 'not json' '[]' \
		"{\"run_id\":\"$(printf 'z%.0s' {1..4097})\",\"session_id\":\"$SID\"}"; do
		api POST /v1/inspections "$bad" "$TOKEN"
		[ "$code" = 400 ] || fail "'${bad:0:80}': $code $body"
		[ "$(jget "$body" '$.error')" = invalid ]
	done
	# nothing was queued for the executor by any refused request
	[ "$(inspections_stored)" = 0 ]
	# once the session is over, the executor is told, and the relay writes nothing here
	admin POST "/admin/sessions/$SID/revoke" >/dev/null
	run --separate-stderr exec-inspect relay
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT status FROM sessions WHERE session_id = '$SID'")" = current ]
}

# --- clients: who may ask, and who may read ---------------------------------------------

@test "an inspection needs a client token: none, an unknown one or a session credential is 401, and nothing is queued" {
	two_sessions
	cred=$(sqlite3 "$EXEC_STATE_DIR/state.db" "SELECT credential FROM sessions WHERE status = 'current'")
	unknown=$(printf '0%.0s' {1..64})
	for token in "" "$unknown" "$cred"; do
		api POST /v1/inspections "{\"run_id\":\"a1\",\"session_id\":\"$SID\"}" "$token"
		[ "$code" = 401 ] || fail "token '${token:0:8}': $code $body"
		[ "$(jget "$body" '$.error')" = unauthorized ]
		[ -n "$(jget "$body" '$.detail')" ]
	done
	# the token is checked first: a stranger learns nothing of sessions or fields
	for req in '{"run_id":"a1","session_id":"ses-0000000000000000"}' 'not json'; do
		api POST /v1/inspections "$req"
		[ "$code" = 401 ] || fail "'$req': $code $body"
	done
	[ "$(inspections_stored)" = 0 ]
	run --separate-stderr exec-session heartbeat
	assert_output current   # nothing waits for the executor
	# nor does anyone read an inspection without a client's token
	ask a1
	for token in "" "$unknown" "$cred"; do
		api GET "/v1/inspections/$INSP?wait_ms=0" "" "$token"
		[ "$code" = 401 ] || fail "token '${token:0:8}': $code $body"
		[ "$(jget "$body" '$.error')" = unauthorized ]
		[[ "$body" != *'"run_id":"a1"'* && "$body" != *"$SID"* ]] || fail "$body"
	done
	api GET "/v1/inspections/$INSP?wait_ms=nope"
	[ "$code" = 401 ]
	answer_of "$INSP"
	[ "$code" = 200 ]
}

@test "a revoked client's token is refused at once, even in a wait; its inspections stay" {
	two_sessions
	issue
	ask a1
	exec-inspect relay >/dev/null
	answer_of "$INSP"
	[ "$code" = 200 ]
	[ "$(jget "$body" '$.answer.outcome')" = FOUND ]
	ask b1
	waiting=$INSP
	printf 'Authorization: Bearer %s\n' "$TOKEN" >"$BATS_TEST_TMPDIR/client-auth"
	t0=$(ms)
	curl -sS --max-time 25 -o "$BATS_TEST_TMPDIR/long" -w '%{http_code}' -H @"$BATS_TEST_TMPDIR/client-auth" \
		"$DISP_URL/v1/inspections/$waiting?wait_ms=20000" >"$BATS_TEST_TMPDIR/long.code" 3>&- &
	reader=$!
	api DELETE "/admin/clients/$CLIENT"
	[ "$code" = 200 ]
	[ "$body" = "{\"client_id\":\"$CLIENT\",\"status\":\"revoked\"}" ]
	wait "$reader"
	elapsed=$(( $(ms) - t0 ))
	[ "$(cat "$BATS_TEST_TMPDIR/long.code")" = 401 ] || fail "the wait: $(cat "$BATS_TEST_TMPDIR/long")"
	[ "$elapsed" -lt 10000 ] || fail "the wait outlived the revocation: $elapsed ms"
	for insp in "$INSP" "$waiting"; do
		answer_of "$insp"
		[ "$code" = 401 ] || fail "$insp: $code $body"
		[ "$(jget "$body" '$.error')" = unauthorized ]
	done
	api POST /v1/inspections "{\"run_id\":\"a1\",\"session_id\":\"$SID\"}" "$TOKEN"
	[ "$code" = 401 ]
	[ "$(inspections_stored)" = 2 ]
	# revoking again changes nothing; an unknown client is 404
	api DELETE "/admin/clients/$CLIENT"
	[ "$code" = 200 ]
	api DELETE /admin/clients/cli-0000000000000000
	[ "$code" = 404 ]
	[ "$(jget "$body" '$.error')" = unknown_client ]
	# another client is not affected; the list shows both, and never a token
	revoked=$CLIENT old=$TOKEN
	issue other
	ask a1
	api GET /admin/clients
	[ "$code" = 200 ]
	[ "$(jget "$body" '$.clients[0].client_id')" = "$revoked" ]
	[ "$(jget "$body" '$.clients[0].status')" = revoked ]
	[ "$(jget "$body" '$.clients[1].client_id')" = "$CLIENT" ]
	[ "$(jget "$body" '$.clients[1].status')" = active ]
	[ "$(jget "$body" '$.clients[1].name')" = other ]
	[[ "$body" != *"$old"* && "$body" != *"$TOKEN"* && "$body" != *token* ]] || fail "$body"
}

@test "only the client that asked reads an inspection: to another it does not exist (404)" {
	two_sessions
	issue alice
	alice=$TOKEN
	ask a1
	issue bob
	bob=$TOKEN
	answer_of "$INSP" 0 "$bob"
	[ "$code" = 404 ]
	[ "$(jget "$body" '$.error')" = unknown_inspection ]
	theirs=$body
	# the very answer an id that never existed gets
	answer_of insp-0000000000000000 0 "$bob"
	[ "$code" = 404 ]
	[ "${theirs//$INSP/ID}" = "${body//insp-0000000000000000/ID}" ]
	# answered, it is still not bob's, and bob's wait ends at once
	exec-inspect relay >/dev/null
	t0=$(ms)
	answer_of "$INSP" 20000 "$bob"
	[ "$code" = 404 ]
	[ $(( $(ms) - t0 )) -lt 10000 ]
	# (not just "a1": a random inspection id may hold those two characters)
	[[ "$body" != *FOUND* && "$body" != *'"run_id":"a1"'* ]] || fail "$body"
	answer_of "$INSP" 0 "$alice"
	[ "$code" = 200 ]
	[ "$(jget "$body" '$.answer.outcome')" = FOUND ]
	# bob asks for himself, and reads only his own
	ask b1
	answer_of "$INSP" 0 "$alice"
	[ "$code" = 404 ]
	exec-inspect relay >/dev/null
	answer_of "$INSP" 0 "$bob"
	[ "$(jget "$body" '$.answer.outcome')" = FILTERED ]
}

@test "an inspection names its session: the executor_id form is refused 400, naming the field" {
	two_sessions
	issue
	xid=$(sql "SELECT value FROM meta WHERE key = 'executor_id'")
	for req in "{\"run_id\":\"a1\",\"executor_id\":\"$xid\"}" \
		"{\"run_id\":\"a1\",\"session_id\":\"$SID\",\"executor_id\":\"$xid\"}"; do
		api POST /v1/inspections "$req" "$TOKEN"
		[ "$code" = 400 ] || fail "'$req': $code $body"
		[ "$(jget "$body" '$.error')" = invalid ]
		[[ "$(jget "$body" '$.detail')" == *"'executor_id'"* ]] || fail "$body"
	done
	[ "$(inspections_stored)" = 0 ]
	run --separate-stderr exec-session heartbeat
	assert_output current
}

@test "a store written before clients existed gains them; its earlier inspections are no client's" {
	two_sessions
	issue
	ask a1
	earlier=$INSP
	stop_dispatcher
	# as the store was before schema/dispatcher/004_clients.sql
	sqlite3 "$BATS_TEST_TMPDIR/disp.db" "DROP TABLE inspection_clients; DROP TABLE clients"
	start_dispatcher
	[ "$(sqlite3 "$BATS_TEST_TMPDIR/disp.db" "SELECT count(*) FROM sqlite_master
		WHERE name IN ('clients', 'inspection_clients')")" = 2 ]
	answer_of "$earlier"
	[ "$code" = 401 ]   # the old token went with the table
	issue
	answer_of "$earlier"
	[ "$code" = 404 ]
	ask b1
	answer_of "$INSP"
	[ "$code" = 200 ]
	[ "$(jget "$body" '$.status')" = pending ]
	# the executor is still asked both (the store kept the earlier one)
	[ "$(sqlite3 "$BATS_TEST_TMPDIR/disp.db" "SELECT group_concat(run_id) FROM
		(SELECT run_id FROM inspections WHERE status = 'pending' ORDER BY created_ms, rowid)")" = a1,b1 ]
}

@test "the dispatcher records one answer, from the inspection's own session, with only the answer's fields" {
	two_sessions
	cred=$(sqlite3 "$EXEC_STATE_DIR/state.db" "SELECT credential FROM sessions WHERE status = 'current'")
	ask b1
	api GET "/v1/sessions/$SID/inspections" "" "$cred"
	[ "$code" = 200 ]
	[ "$body" = "{\"inspections\":[{\"inspection_id\":\"$INSP\",\"run_id\":\"b1\",\"session_id\":\"$SID\"}]}" ]
	api GET "/v1/sessions/$SID/inspections" "" wrong-credential
	[ "$code" = 401 ]
	api POST "/v1/sessions/$SID/inspections/$INSP" '{"outcome":"FILTERED","run_id":"b1","program":"/bin/true"}' "$cred"
	[ "$code" = 400 ]
	api POST "/v1/sessions/$SID/inspections/$INSP" '{"outcome":"ABSENT","run_id":"other"}' "$cred"
	[ "$code" = 400 ]
	# another executor's session cannot see or answer this inspection
	other=$BATS_TEST_TMPDIR/other
	EXEC_STATE_DIR=$other exec-session open --dispatcher "$DISP_URL" >/dev/null
	osid=$(EXEC_STATE_DIR=$other exec-session show --json | sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
	ocred=$(sqlite3 "$other/state.db" "SELECT credential FROM sessions WHERE status = 'current'")
	api GET "/v1/sessions/$osid/inspections" "" "$ocred"
	[ "$body" = '{"inspections":[]}' ]
	api POST "/v1/sessions/$osid/inspections/$INSP" '{"outcome":"ABSENT","run_id":"b1"}' "$ocred"
	[ "$code" = 404 ]
	[ "$(jget "$body" '$.error')" = unknown_inspection ]
	# the first answer is recorded; a second is a conflict and changes nothing
	api POST "/v1/sessions/$SID/inspections/$INSP" '{"outcome":"FILTERED","run_id":"b1"}' "$cred"
	[ "$code" = 200 ]
	api POST "/v1/sessions/$SID/inspections/$INSP" '{"outcome":"ABSENT","run_id":"b1"}' "$cred"
	[ "$code" = 409 ]
	[ "$(jget "$body" '$.error')" = conflict ]
	answer_of "$INSP"
	[ "$(jget "$body" '$.answer.outcome')" = FILTERED ]
	api GET "/v1/sessions/$SID/inspections" "" "$cred"
	[ "$body" = '{"inspections":[]}' ]
}

# two_asked: two_sessions, then inspections of a1 (FOUND) and b1 (FILTERED)
# waiting in that order; sets $first and $second to their ids.
two_asked() {
	two_sessions
	ask a1
	first=$INSP
	ask b1
	second=$INSP
}

@test "relay: an answer the dispatcher refuses is reported, and the inspections behind it are still answered" {
	two_asked
	# the dispatcher refuses the first answer, once
	fault 4xx 1 0 "/v1/sessions/$SID/inspections/$first"
	run --separate-stderr exec-inspect relay
	[ "$status" -eq "$EK_PROTOCOL" ] || fail "status $status: $stderr"
	[[ "$stderr" == *"/inspections/$first: dispatcher answered HTTP 400"* ]] || fail "$stderr"
	[[ "$stderr" == *"refused 1 of 2 answers"* ]] || fail "$stderr"
	[ "${#lines[@]}" -eq 1 ] && [[ "${lines[0]}" == "$second FILTERED"* ]] || fail "$output"
	answer_of "$second"
	[ "$(jget "$body" '$.answer.outcome')" = FILTERED ]
	answer_of "$first"
	[ "$(jget "$body" '$.status')" = pending ]
	# the refused one waits for the next relay, which answers it
	run --separate-stderr exec-inspect relay
	assert_success
	[[ "$output" == "$first FOUND"* ]] || fail "$output"
	answer_of "$first"
	[ "$(jget "$body" '$.answer.outcome')" = FOUND ]
}

@test "relay: an unavailable dispatcher stops the round at once; the rest wait for the next" {
	two_asked
	fault 5xx 1 0 "/v1/sessions/$SID/inspections/$first"
	run --separate-stderr exec-inspect relay
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[ -z "$output" ]
	answer_of "$second"
	[ "$(jget "$body" '$.status')" = pending ]
	run exec-inspect relay
	assert_success
	[ "${#lines[@]}" -eq 2 ]
}

@test "an inspection whose session ends unanswered reads 'unanswered' at once, even to a long wait" {
	two_sessions
	ask a1
	answer_of "$INSP"
	[ "$(jget "$body" '$.status')" = pending ]
	admin POST "/admin/sessions/$SID/revoke" >/dev/null
	# curl gives up after 10 s; a wait for the full 20 s would fail here
	answer_of "$INSP" 20000
	[ "$code" = 200 ] || fail "$code $body"
	[ "$(jget "$body" '$.status')" = unanswered ]
	[ "$(jget "$body" '$.session_status')" = revoked ]
	[ "$(jget "$body" '$.answer')" = "" ]
	# the executor of the ended session cannot answer it any more
	cred=$(sqlite3 "$EXEC_STATE_DIR/state.db" "SELECT credential FROM sessions WHERE status = 'current'")
	api POST "/v1/sessions/$SID/inspections/$INSP" '{"outcome":"ABSENT","run_id":"a1"}' "$cred"
	[ "$code" = 410 ]
	answer_of "$INSP"
	[ "$(jget "$body" '$.status')" = unanswered ]
}

@test "relay: a dispatcher that is down exits 69, no current session 77; usage" {
	two_sessions
	ask a1
	stop_dispatcher
	run --separate-stderr exec-inspect relay --timeout-ms 1000
	[ "$status" -eq "$EK_UNAVAILABLE" ]
	[ -z "$output" ]
	[[ "$stderr" == "exec-inspect: "*"dispatcher unavailable"* ]]
	sql_write "UPDATE sessions SET status = 'closed' WHERE status = 'current'"
	run --separate-stderr exec-inspect relay
	[ "$status" -eq "$EK_NOSESSION" ]
	[[ "$stderr" == *"no current session"* ]]
	for args in "relay a1" "relay --session $SID" "relay --ids"; do
		# shellcheck disable=SC2086 # words on purpose
		run --separate-stderr exec-inspect $args
		[ "$status" -eq "$EK_USAGE" ] || fail "'$args': status $status"
	done
}

# --- the heartbeat and the loop ----------------------------------------------------

@test "heartbeat says inspect-due only while an inspection waits, beside reconcile-due" {
	two_sessions
	run --separate-stderr exec-session heartbeat
	assert_output current
	ask a1
	run --separate-stderr exec-session heartbeat
	assert_success
	assert_output "current inspect-due"
	run --separate-stderr exec-session heartbeat --json
	[ "$(jget "$output" '$.inspect_due')" = 1 ]
	[ "$(jget "$output" '$.inspections_pending')" = 1 ]
	exec-inspect relay >/dev/null
	run --separate-stderr exec-session heartbeat
	assert_output current
	run --separate-stderr exec-session heartbeat --json
	[ "$(jget "$output" '$.inspect_due')" = 0 ]
	[ "$(jget "$output" '$.inspections_pending')" = 0 ]
	# a result waiting for delivery and an inspection: both words
	submit_and_accept "$(spec k1)"
	fault 5xx 100
	exec-run start --wait --budget-ms 200 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	run --separate-stderr exec-session heartbeat
	assert_output reconcile-due
	ask k1
	run --separate-stderr exec-session heartbeat
	assert_output "reconcile-due inspect-due"
}

@test "exec-loop answers a client's inspection end to end, and reconciles beside it" {
	start_dispatcher
	exec-loop --dispatcher "$DISP_URL" --tick 0.1 -v 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	SID=$(current_session)
	# While the relay cannot reach the dispatcher, every beat says inspect-due:
	# a result waiting for delivery must still start the reconcile worker.
	fault 5xx 100000 0 "/v1/sessions/$SID/inspections"
	ask nope
	absent=$INSP
	ask 'not an id'
	# shellcheck disable=SC2034 # read by a wait_until condition below
	malformed=$INSP
	fault 5xx 3
	admin POST /admin/runs "$(spec late)" >/dev/null
	wait_until '[ "$(disp_charges late)" = 1 ]'
	[ "$(disp_reports late)" = 4 ]   # 3 failed in the run's cleanup, 1 by the worker
	grep -q "inspection relay failed (exit $EK_UNAVAILABLE)" "$BATS_TEST_TMPDIR/loop.err"
	answer_of "$absent"
	[ "$(jget "$body" '$.status')" = pending ]
	admin DELETE /admin/faults >/dev/null
	wait_until 'answer_of "$absent"; [ "$(jget "$body" "\$.status")" = answered ]'
	[ "$(jget "$body" '$.answer')" = '{"outcome":"ABSENT","run_id":"nope"}' ]
	wait_until 'answer_of "$malformed"; [ "$(jget "$body" "\$.status")" = answered ]'
	[ "$(jget "$body" '$.answer.outcome')" = ERROR ]
	kill -TERM "$loop"
	status=0
	wait "$loop" || status=$?
	[ "$status" -eq 0 ]
	grep -q "inspect: answered 2 inspections" "$BATS_TEST_TMPDIR/loop.err"
}
