#!/usr/bin/env bats
# The reference dispatcher's authority (issue 41, item 3): /admin/ answers
# only the holder of the admin token, which the dispatcher makes at its first
# start in a 0600 file beside its store (or is given by file); the store's
# files are owner-only; a new executor id is bound only by a negotiation
# that presents an enrollment token the operator issued; and admin reads
# show a run's env values only when asked.

load helpers

token_file() { printf '%s' "$BATS_TEST_TMPDIR/disp.db.admin-token"; }

# raw METHOD PATH [HEADER-LINE [BODY]]: a request that sends HEADER-LINE
# (on stdin, -H @-) instead of the admin token; prints the HTTP status,
# the answer in $BATS_TEST_TMPDIR/answer.
raw() {
	"$HTTPC" -sS --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/answer" -w '%{http_code}' \
		${3:+-H @-} -X "$1" "$DISP_URL$2" ${4:+-d "$4"} <<<"${3-}"
}

answer() { cat "$BATS_TEST_TMPDIR/answer"; }

# start_logging: start_dispatcher without --quiet: its log says what it did.
start_logging() {
	spawn_dispatcher 0 || fail "$(cat "$BATS_TEST_TMPDIR/disp.log")"
	DISP_URL="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/disp.port")"
	enroll_executors
}

# mode FILE: its permission bits, octal.
mode() { stat -c %a "$1"; }

@test "no admin token is 401, another token 403, both JSON; the session stays, no run is submitted, nothing is issued" {
	start_logging
	open_session
	local sid wrong
	sid=$(current_session)
	wrong="Authorization: Bearer $(printf '%064d' 0)"
	for auth in "" "$wrong"; do
		want=401
		[ "$auth" != "$wrong" ] || want=403
		run raw POST "/admin/sessions/$sid/revoke" "$auth"
		[ "$output" = "$want" ] || fail "revoke with '${auth:0:30}': $output $(answer)"
		run answer
		assert_output --regexp '^\{"error":"(unauthorized|forbidden)","detail":"[^"]+"\}$'
		run raw POST /admin/runs "$auth" "$(spec x1)"
		[ "$output" = "$want" ] || fail "submit: $output"
		run raw POST /admin/enrollments "$auth"
		[ "$output" = "$want" ] || fail "enroll: $output"
		run raw POST /admin/faults "$auth" '{"kind":"5xx","count":5,"path":"/v1/"}'
		[ "$output" = "$want" ] || fail "fault: $output"
		for path in /admin/summary /admin/sessions /admin/runs /admin/runs/x1 /admin/stats /admin/clients; do
			run raw GET "$path" "$auth"
			[ "$output" = "$want" ] || fail "GET $path: $output"
		done
	done
	# nothing changed: the session is current, no run, no fault (a heartbeat answers)
	admin GET /admin/sessions | grep -q "\"session_id\":\"$sid\",\"executor_id\":\"[0-9a-f]*\",\"status\":\"current\"" ||
		fail "$(admin GET /admin/sessions)"
	run exec-session heartbeat
	assert_success
	run admin GET /admin/runs
	assert_output '{"runs":[]}'
	[ "$(sqlite3 "$BATS_TEST_TMPDIR/disp.db" 'SELECT count(*) FROM enrollments')" = 1 ]   # start_dispatcher's
	# the refusals are logged without any token
	grep -q "POST /admin/runs 401" "$BATS_TEST_TMPDIR/disp.log"
	grep -q "POST /admin/runs 403" "$BATS_TEST_TMPDIR/disp.log"
	run ! grep -qf "$(token_file)" "$BATS_TEST_TMPDIR/disp.log"
	run ! grep -q "$(printf '%064d' 0)" "$BATS_TEST_TMPDIR/disp.log"
	# and with the token, the same revoke works
	run raw POST "/admin/sessions/$sid/revoke" "Authorization: Bearer $(cat "$(token_file)")"
	assert_output 200
}

@test "the admin token is made once, 0600, beside the store; the store's files are 0600" {
	start_dispatcher
	local token
	token=$(cat "$(token_file)")
	[[ $token =~ ^[0-9a-f]{64}$ ]] || fail "token '$token'"
	[ "$(mode "$(token_file)")" = 600 ]
	open_session
	submit_and_accept "$(spec s1)"
	for f in disp.db disp.db-wal disp.db-shm; do
		[ -f "$BATS_TEST_TMPDIR/$f" ] || fail "$f missing"
		[ "$(mode "$BATS_TEST_TMPDIR/$f")" = 600 ] || fail "$f is $(mode "$BATS_TEST_TMPDIR/$f")"
	done
	# a restart keeps the token
	stop_dispatcher
	start_dispatcher
	[ "$(cat "$(token_file)")" = "$token" ]
	run admin GET /admin/runs/s1
	assert_output --partial '"run_id":"s1"'
}

@test "a store left readable by others is made 0600 at open; a token through a link is refused" {
	start_dispatcher
	stop_dispatcher
	chmod 644 "$BATS_TEST_TMPDIR/disp.db"
	start_logging
	[ "$(mode "$BATS_TEST_TMPDIR/disp.db")" = 600 ]
	grep -q "disp.db: was mode 0644, now 0600" "$BATS_TEST_TMPDIR/disp.log"
	stop_dispatcher
	# a planted link where the token would be made: never followed, never written
	rm "$(token_file)"
	ln -s "$BATS_TEST_TMPDIR/planted" "$(token_file)"
	run timeout 60 exec-dispatcher --port 0 --store "$BATS_TEST_TMPDIR/disp.db" --quiet
	[ "$status" -eq "$EK_IOERR" ] || fail "$status: $output"
	assert_output --partial "symbolic link"
	[ ! -e "$BATS_TEST_TMPDIR/planted" ]
	# a token file others may read is refused
	rm "$(token_file)"
	printf '%s\n' "$(printf '%064d' 7)" >"$BATS_TEST_TMPDIR/given"
	chmod 640 "$BATS_TEST_TMPDIR/given"
	run timeout 60 exec-dispatcher --port 0 --store "$BATS_TEST_TMPDIR/disp.db" --admin-token-file "$BATS_TEST_TMPDIR/given" --quiet
	[ "$status" -eq "$EK_UNSAFE" ] || fail "$status: $output"
	assert_output --partial "mode 0600"
}

@test "--admin-token-file: the operator's token is the one /admin/ takes; none is made" {
	(umask 077 && printf '%s\n' "$(printf 'a%.0s' {1..40})" >"$BATS_TEST_TMPDIR/given")
	spawn_dispatcher 0 --quiet --admin-token-file "$BATS_TEST_TMPDIR/given"
	DISP_URL="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/disp.port")"
	[ ! -e "$(token_file)" ]
	run raw GET /admin/summary "Authorization: Bearer $(printf 'a%.0s' {1..40})"
	assert_output 200
	EXEC_ADMIN_TOKEN_FILE=$BATS_TEST_TMPDIR/given run admin GET /admin/summary
	assert_output --partial '"incarnation"'
	run raw GET /admin/summary ""
	assert_output 401
	run timeout 60 exec-dispatcher --port 0 --store "$BATS_TEST_TMPDIR/other.db" --admin-token-file "$BATS_TEST_TMPDIR/none" --quiet
	[ "$status" -eq "$EK_NOINPUT" ] || fail "$status: $output"
}

@test "an executor id never enrolled cannot open a session nor take work" {
	start_dispatcher
	admin POST /admin/runs "$(spec w1)" >/dev/null
	# without an enrollment token
	EXEC_ENROLL_TOKEN_FILE='' run exec-session open --dispatcher "$DISP_URL"
	[ "$status" -eq "$EK_NOSESSION" ] || fail "$status: $output"
	assert_output --partial "not_enrolled"
	# with a wrong one
	printf '%064d\n' 5 >"$BATS_TEST_TMPDIR/wrong"
	run exec-session open --dispatcher "$DISP_URL" --enroll-token-file "$BATS_TEST_TMPDIR/wrong"
	[ "$status" -eq "$EK_NOSESSION" ] || fail "$status: $output"
	run admin GET /admin/sessions
	assert_output '{"sessions":[]}'
	[ "$(disp_field w1 state)" = '"queued"' ]
	# a hand-made negotiation as a fresh id, with a key but no token
	run raw POST /v1/sessions "" "{\"executor_id\":\"$(printf '%032d' 1)\",\"executor_key\":\"$(printf '%064d' 1)\"}"
	assert_output 403
	run answer
	assert_output --partial '"error":"not_enrolled"'
	[ "$(sqlite3 "$BATS_TEST_TMPDIR/disp.db" 'SELECT count(*) FROM executor_keys')" = 0 ]
	# enrolled, it opens and takes the run; afterwards its key alone suffices
	open_session
	exec-accept --from-dispatcher >/dev/null
	[ "$(disp_field w1 state)" = '"accepted"' ]
	EXEC_ENROLL_TOKEN_FILE='' run exec-session open --dispatcher "$DISP_URL"
	assert_success
	# a token file the environment names and the operator deleted since: no matter
	EXEC_ENROLL_TOKEN_FILE=$BATS_TEST_TMPDIR/gone run exec-session open --dispatcher "$DISP_URL"
	assert_success
	# one the option names must be there
	run exec-session open --dispatcher "$DISP_URL" --enroll-token-file "$BATS_TEST_TMPDIR/gone"
	[ "$status" -eq "$EK_NOINPUT" ] || fail "$status: $output"
	assert_output --partial "--enroll-token-file: cannot read"
}

@test "an enrollment token enrolls as many ids as its uses, then no more" {
	start_dispatcher
	run admin POST /admin/enrollments
	assert_output --regexp '^\{"enrollment_id":"enr-[0-9a-f]{16}","enroll_token":"[0-9a-f]{64}","uses":1\}$'
	[[ $output =~ \"enroll_token\":\"([0-9a-f]+)\" ]]
	printf '%s\n' "${BASH_REMATCH[1]}" >"$BATS_TEST_TMPDIR/once"
	run exec-session open --dispatcher "$DISP_URL" --enroll-token-file "$BATS_TEST_TMPDIR/once"
	assert_success
	EXEC_STATE_DIR=$BATS_TEST_TMPDIR/second run exec-session open --dispatcher "$DISP_URL" \
		--enroll-token-file "$BATS_TEST_TMPDIR/once"
	[ "$status" -eq "$EK_NOSESSION" ] || fail "$status: $output"
	assert_output --partial "used up"
	# the store keeps the token's SHA-256 only
	run ! grep -qaf "$BATS_TEST_TMPDIR/once" "$BATS_TEST_TMPDIR"/disp.db "$BATS_TEST_TMPDIR"/disp.db-wal
	run admin POST /admin/enrollments '{"uses":0}'
	assert_output --partial '"error":"invalid"'
}

@test "admin reads show a run's env names, its values only with ?reveal_env=1" {
	start_dispatcher
	admin POST /admin/runs "$(spec e1 /bin/true '[]' '"env":{"API_KEY":"s3cret-value","MODE":"x"}')" >/dev/null
	run admin GET /admin/runs/e1
	assert_output --partial '"env":{"API_KEY":"[redacted]","MODE":"[redacted]"}'
	refute_output --partial s3cret
	run admin GET /admin/runs
	refute_output --partial s3cret
	run admin GET '/admin/runs/e1?reveal_env=1'
	assert_output --partial '"API_KEY":"s3cret-value"'
	run raw GET '/admin/runs/e1?reveal_env=1' ""
	assert_output 401
	# the executor still gets the env it runs with
	open_session
	exec-accept --from-dispatcher >/dev/null
	[ "$(sql "SELECT json_extract(env, '\$.API_KEY') FROM runs WHERE run_id='e1'")" = s3cret-value ]
}

@test "a guest that learned the dispatcher's URL and its session id cannot revoke the session" {
	command -v curl >/dev/null || skip "no curl"
	start_dispatcher
	open_session
	local sid args
	sid=$(current_session)
	# what a guest read in exec-loop's argv and the admin listing: the URL, the session
	args=$(jq -nc --arg c "curl -s -o /dev/null -w '%{http_code}' -X POST $DISP_URL/admin/sessions/$sid/revoke" '["-c",$c]')
	submit_and_accept "$(spec g1 /bin/sh "$args")"
	run exec-run start --wait
	assert_success
	assert_output --partial "g1 exited 0: delivered"
	[ "$(cat "$EXEC_STATE_DIR/out/g1.stdout")" = 401 ] || fail "the guest got: $(cat "$EXEC_STATE_DIR/out/g1.stdout")"
	run exec-session heartbeat
	assert_success
	[ "$(current_session)" = "$sid" ]
}
