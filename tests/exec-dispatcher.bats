#!/usr/bin/env bats
# exec-dispatcher: the reference dispatcher, exercised over HTTP with curl.
# Every request is bounded (--max-time), every wait loop is bounded, ports
# are chosen by the dispatcher (--port 0), and it listens on 127.0.0.1 only.

load helpers

XID=0123456789abcdef0123456789abcdef
XID2=fedcba9876543210fedcba9876543210

setup() {
	start_dispatcher
}

teardown() {
	common_teardown
	if [[ -n ${OTHER_PID-} ]]; then
		kill -TERM "$OTHER_PID" 2>/dev/null || true
		wait "$OTHER_PID" 2>/dev/null || true
	fi
}

# api METHOD PATH [BODY [CREDENTIAL]]: one bounded request; sets $code and
# $body.  BODY "@file" sends a file byte for byte.  The credential goes in a
# header file, never on curl's command line; without one, /admin/ gets the
# admin token (admin_auth) on stdin.
api() {
	local method=$1 path=$2 data=${3-} cred=${4-} auth=
	local args=(-sS --noproxy '*' --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/resp" -w '%{http_code}' -X "$method")
	if [[ -n $cred ]]; then
		printf 'Authorization: Bearer %s\n' "$cred" >"$BATS_TEST_TMPDIR/auth"
		args+=(-H @"$BATS_TEST_TMPDIR/auth")
	elif [[ $path == /admin/* ]]; then
		admin_auth auth
		args+=(-H @-)
	fi
	if [[ -n $data ]]; then
		args+=(-H 'Content-Type: application/json' --data-binary "$data")
	fi
	# one process a request: the code and the body are read back by
	# builtins (a fork of the test's shell costs more than the request)
	: >"$BATS_TEST_TMPDIR/resp"
	if "$HTTPC" "${args[@]}" "$DISP_URL$path" >"$BATS_TEST_TMPDIR/code" <<<"$auth"; then
		slurp code "$BATS_TEST_TMPDIR/code"
	else
		code="curl-$?"
	fi
	slurp body "$BATS_TEST_TMPDIR/resp"
}

# field KEY: the string value of "KEY" in $body (compact JSON).
field() {
	sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" <<<"$body"
}

# num KEY: the integer value of "KEY" in $body.
num() {
	sed -n "s/.*\"$1\":\(-\{0,1\}[0-9][0-9]*\).*/\1/p" <<<"$body"
}

# xbody XID: a negotiation's body for executor XID: its key (its id twice,
# 64 hex digits) and the test's enrollment token (enroll_executors).
xbody() {
	local tok
	enroll_token tok
	printf '{"executor_id":"%s","executor_key":"%s%s","enroll_token":"%s"}' "$1" "$1" "$1" "$tok"
}

# negotiate [XID]: new session; sets SID, CRED, INC.
negotiate() {
	local xid=${1:-$XID}
	api POST /v1/sessions "$(xbody "$xid")"
	[[ $code == 201 ]] || { echo "negotiate: $code $body" >&2; return 1; }
	SID=$(field session_id) CRED=$(field credential) INC=$(field incarnation)
}

# submit RUN_ID [EXTRA_JSON]: submit one run spec.
submit() {
	api POST /admin/runs "{\"run_id\":\"$1\",\"txn_id\":\"t-$1\",\"program\":\"/bin/true\"${2:+,$2}}"
}

# result_body RUN_ID [OUTCOME [MESSAGE]]: a result body under SID/INC.
result_body() {
	printf '{"run_id":"%s","incarnation":"%s","session_id":"%s","outcome":"%s","exit_code":0,"wait_status":0,"message":"%s","chosen_at":1764500000000}' \
		"$1" "$INC" "$SID" "${2:-exited}" "${3:-exited with status 0}"
}

# take RUN_IDS...: submit the runs and hand them to SID through the feed.
take() {
	local r
	for r in "$@"; do
		submit "$r"
		[[ $code == 200 ]] || { echo "take: submitting $r: $code $body" >&2; return 1; }
	done
	api GET "/v1/sessions/$SID/work?max=1000" "" "$CRED"
	[[ $code == 200 ]] || { echo "take: the work feed: $code $body" >&2; return 1; }
}

@test "--help, --version and an unknown option" {
	run exec-dispatcher --help
	[[ $status -eq 0 && $output == *"Usage: exec-dispatcher"* && $output == *--port-file* ]]
	run exec-dispatcher -h
	[[ $status -eq 0 ]]
	run exec-dispatcher --version
	[[ $status -eq 0 && $output == "exec-dispatcher (execkit) "* ]]
	run exec-dispatcher --no-such-option
	[[ $status -eq $EK_USAGE && $output == *"Try 'exec-dispatcher --help'"* ]]
	run exec-dispatcher --port 70000
	[[ $status -eq $EK_USAGE ]]
	run exec-dispatcher --incarnation bogus
	[[ $status -eq $EK_USAGE ]]
	run exec-dispatcher --gate bogus
	[[ $status -eq $EK_USAGE && $output == *"--gate: 'bogus' is not adaptive or off"* ]]
}

@test "--port 0 gives two instances distinct ports on 127.0.0.1" {
	mkdir "$BATS_TEST_TMPDIR/b"
	local first=$DISP_URL first_pid=$DISP_PID
	start_dispatcher_in "$BATS_TEST_TMPDIR/b" --quiet
	OTHER_PID=$DISP_PID
	DISP_PID=$first_pid
	[[ $DISP_URL != "$first" && $DISP_URL == http://127.0.0.1:* ]]
	# listening on 127.0.0.1 only: /proc/net/tcp shows 0100007F:PORT in LISTEN (0A)
	local hex
	hex=$(printf '%04X' "${DISP_URL##*:}")
	grep -q "^ *[0-9]*: 0100007F:$hex 00000000:0000 0A" /proc/net/tcp
	run ! grep -q "^ *[0-9]*: 00000000:$hex 00000000:0000 0A" /proc/net/tcp
	api GET /admin/summary
	[[ $code == 200 ]]
	DISP_URL=$first
	export EXEC_ADMIN_TOKEN_FILE=$BATS_TEST_TMPDIR/disp.db.admin-token
	api GET /admin/summary
	[[ $code == 200 ]]
}

# default_dispatcher: a dispatcher with the binary's own defaults (the
# shared start_dispatcher may set a longer lease).
default_dispatcher() {
	stop_dispatcher
	start_dispatcher_in "$BATS_TEST_TMPDIR" --quiet
}

@test "negotiation answers the protocol's identities" {
	default_dispatcher
	negotiate
	[[ $SID =~ ^ses-[0-9a-f]{16}$ ]]
	[[ $INC =~ ^inc-[0-9a-f]{16}$ ]]
	[[ $CRED =~ ^[0-9a-f]{64}$ ]]
	[[ $(num lease_ms) == 30000 && $(num heartbeat_ms) == 2000 ]]
	api POST /v1/sessions '{"executor_id":"xyz"}'
	[[ $code == 400 && $(field error) == invalid ]]
	api POST /v1/sessions '{}'
	[[ $code == 400 ]]
	api POST /v1/sessions 'not json'
	[[ $code == 400 && $(field error) == invalid ]]
	# the executor key: required to bind a new id, proved for a bound one
	api POST /v1/sessions "{\"executor_id\":\"$XID2\"}"
	[[ $code == 400 && $(field error) == invalid && $(field detail) == *executor_key* ]]
	api POST /v1/sessions "{\"executor_id\":\"$XID2\",\"executor_key\":\"$XID2\"}"
	[[ $code == 400 && $(field error) == invalid ]]        # 32 digits, not 64
	api POST /v1/sessions "{\"executor_id\":\"$XID2\",\"executor_key\":7}"
	[[ $code == 400 && $(field error) == invalid ]]
	api POST /v1/sessions "{\"executor_id\":\"$XID\"}"
	[[ $code == 403 && $(field error) == executor_key_mismatch ]]
	api POST /v1/sessions "{\"executor_id\":\"$XID\",\"executor_key\":\"$XID2$XID2\"}"
	[[ $code == 403 && $(field error) == executor_key_mismatch ]]
	# the refusals made no session (counted whatever their status: at the
	# default lease, a slow machine may see the one there expire meanwhile)
	api GET /admin/sessions
	[[ $(grep -o '"session_id":' <<<"$body" | wc -l) == 1 && $body == *"\"$SID\""* ]]
	negotiate
}

@test "heartbeat extends a current session; bad credential and unknown session refused" {
	default_dispatcher
	negotiate
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 && $(field status) == current && $(num lease_ms) == 30000 ]]
	local bad=${CRED:0:63}
	[[ ${CRED:63} == 0 ]] && bad+=1 || bad+=0
	api POST "/v1/sessions/$SID/heartbeat" "" "$bad"
	[[ $code == 401 && $(field error) == unauthorized ]]
	api POST "/v1/sessions/$SID/heartbeat"
	[[ $code == 401 ]]
	api POST /v1/sessions/ses-0000000000000000/heartbeat "" "$CRED"
	[[ $code == 404 && $(field error) == unknown_session ]]
}

@test "renegotiating replaces the executor's earlier session, not others'" {
	negotiate
	local old_sid=$SID old_cred=$CRED
	negotiate "$XID2"
	local other_sid=$SID other_cred=$CRED
	negotiate
	api POST "/v1/sessions/$old_sid/heartbeat" "" "$old_cred"
	[[ $code == 410 && $(field error) == session_over && $(field status) == replaced ]]
	api POST "/v1/sessions/$other_sid/heartbeat" "" "$other_cred"
	[[ $code == 200 ]]
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]
	api GET /admin/sessions
	[[ $code == 200 && $body == *"\"session_id\":\"$old_sid\",\"executor_id\":\"$XID\",\"status\":\"replaced\""* ]]
}

@test "admin revoke, expire and replace end a session with that status" {
	local verb st
	for verb in revoke expire replace; do
		negotiate
		api POST "/admin/sessions/$SID/$verb"
		st=$(field status)
		[[ $code == 200 && $st == "${verb%e}ed" ]]
		api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
		[[ $code == 410 && $(field status) == "$st" ]]
		api GET "/v1/sessions/$SID/work" "" "$CRED"
		[[ $code == 410 ]]
	done
	api POST /admin/sessions/ses-0000000000000000/revoke
	[[ $code == 404 && $(field error) == unknown_session ]]
}

@test "close ends a session; closing again is session_over" {
	negotiate
	api DELETE "/v1/sessions/$SID" "" "$CRED"
	[[ $code == 200 && $(field status) == closed ]]
	api DELETE "/v1/sessions/$SID" "" "$CRED"
	[[ $code == 410 && $(field status) == closed ]]
}

@test "a lease that runs out makes the session expired" {
	stop_dispatcher
	start_dispatcher_in "$BATS_TEST_TMPDIR" --quiet --lease-ms 1500
	negotiate
	[[ $(num lease_ms) == 1500 ]]
	# (a loaded machine may let the lease run out before the first heartbeat:
	# that is the same ending)
	local i
	for ((i = 0; i < 10; i++)); do
		api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
		[[ $code == 200 ]] || break
		[[ $(num lease_ms) == 1500 ]]
		sleep 1.6    # longer than the lease: the next heartbeat is too late
	done
	[[ $code == 410 && $(field status) == expired ]]
}

@test "admin lease: a current session's lease runs out when told, then lapses as usual" {
	negotiate
	api POST "/admin/sessions/$SID/lease" '{"ms":-1}'
	[[ $code == 400 && $(field error) == invalid ]]
	api POST "/admin/sessions/nosuch/lease" '{"ms":0}'
	[[ $code == 404 && $(field error) == unknown_session ]]
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]                       # the lease is long: still current
	api POST "/admin/sessions/$SID/lease" '{"ms":0}'
	[[ $code == 200 && $(field status) == current ]]
	wait_until 'api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"; [[ $code == 410 ]]'
	[[ $(field status) == expired ]]
	api POST "/admin/sessions/$SID/lease" '{"ms":60000}'
	[[ $code == 404 ]]                       # an expired session stays expired
}

@test "feed hands runs in submit order, re-hands unreceipted ones, honours receipts" {
	negotiate
	local r
	for r in r1 r2 r3; do submit "$r"; [[ $code == 200 && $(num submitted) == 1 ]]; done
	api GET "/v1/sessions/$SID/work?max=2" "" "$CRED"
	[[ $code == 200 && $body == '{"runs":[{"args":[],"program":"/bin/true","run_id":"r1","txn_id":"t-r1"},{"args":[],"program":"/bin/true","run_id":"r2","txn_id":"t-r2"}]}' ]]
	# the answer was "lost": the same runs come again, in the same order
	api GET "/v1/sessions/$SID/work?max=2" "" "$CRED"
	[[ $code == 200 && $body == *'"run_id":"r1"'*'"run_id":"r2"'* && $body != *r3* ]]
	api POST "/v1/sessions/$SID/receipts" '{"receipts":[{"run_id":"r1","receipt":"x1","outcome":"accepted"},{"run_id":"r2","receipt":"x2","outcome":"duplicate"}]}' "$CRED"
	[[ $code == 200 && $(num recorded) == 2 ]]
	api GET "/v1/sessions/$SID/work" "" "$CRED"
	[[ $code == 200 && $body == '{"runs":[{"args":[],"program":"/bin/true","run_id":"r3","txn_id":"t-r3"}]}' ]]
	api POST "/v1/sessions/$SID/receipts" '{"receipts":[{"run_id":"r3","receipt":"x3","outcome":"conflict"}]}' "$CRED"
	[[ $code == 200 && $(num recorded) == 1 ]]
	api GET "/v1/sessions/$SID/work" "" "$CRED"
	[[ $code == 200 && $body == '{"runs":[]}' ]]
	api GET /admin/runs
	[[ $body == *'"run_id":"r1","state":"accepted"'*'"run_id":"r3","state":"rejected"'* ]]
	api GET /admin/runs/r1
	[[ $(field owner_session) == "$SID" && $(field receipt) == x1 ]]
	api POST "/v1/sessions/$SID/receipts" '{"receipts":[{"run_id":"r1","outcome":"maybe"}]}' "$CRED"
	[[ $code == 400 ]]
	api GET "/v1/sessions/$SID/work?max=x" "" "$CRED"
	[[ $code == 400 ]]
}

@test "a run handed to one session is not handed to another" {
	negotiate
	take r1
	negotiate "$XID2"
	api GET "/v1/sessions/$SID/work" "" "$CRED"
	[[ $code == 200 && $body == '{"runs":[]}' ]]
}

@test "admin submit validates, counts duplicates and refuses conflicting specs" {
	submit r1 '"args":["a"],"env":{"K":"v"},"cwd":"/","timeout_ms":5,"due_at":0,"policy":{"cost":2}'
	[[ $code == 200 && $(num submitted) == 1 && $(num duplicates) == 0 ]]
	submit r1 '"cwd":"/","env":{"K":"v"},"args":["a"],"timeout_ms":5,"due_at":0,"policy":{"cost":2}'
	[[ $code == 200 && $(num submitted) == 0 && $(num duplicates) == 1 ]]
	submit r1 '"args":["b"]'
	[[ $code == 409 && $(field error) == conflict ]]
	submit r2 '"colour":"red"'
	[[ $code == 400 && $(field error) == invalid ]]
	submit 'bad id'
	[[ $code == 400 ]]
	submit r2 '"timeout_ms":0'
	[[ $code == 400 ]]
	api POST /admin/runs '{"run_id":"r2","program":"x"}'
	[[ $code == 400 ]]
	# a batch is all or nothing
	api POST /admin/runs '{"runs":[{"run_id":"r2","txn_id":"t","program":"x"},{"run_id":"r1","txn_id":"t","program":"x"}]}'
	[[ $code == 409 ]]
	api GET /admin/runs/r2
	[[ $code == 404 && $(field error) == unknown_run ]]
	api POST /admin/runs '{"runs":[{"run_id":"r2","txn_id":"t","program":"x"},{"run_id":"r3","txn_id":"t","program":"x"}]}'
	[[ $code == 200 && $(num submitted) == 2 ]]
	api POST /admin/runs '{"run_id":'
	[[ $code == 400 && $(field error) == invalid ]]
}

@test "a result is recorded once; a duplicate is acknowledged and charged once" {
	negotiate
	take r1
	result_body r1 >"$BATS_TEST_TMPDIR/res"
	api POST /v1/results @"$BATS_TEST_TMPDIR/res" "$CRED"
	[[ $code == 200 && $(field status) == recorded ]]
	local rid
	rid=$(num record_id)
	[[ $rid -gt 0 ]]
	api POST /v1/results @"$BATS_TEST_TMPDIR/res" "$CRED"
	[[ $code == 200 && $(field status) == duplicate && $(num record_id) == "$rid" ]]
	api GET /admin/runs/r1
	[[ $(field state) == finished && $(num record_id) == "$rid" ]]
	[[ $body == *'"ledger":[{"charge":1,'* && $(grep -o '"charge":' <<<"$body" | wc -l) == 1 ]]
	[[ $body == *'"result":{"run_id":"r1",'* && $(num max_in_flight) == 1 ]]
	api GET /admin/summary
	[[ $(num ledger_total) == 1 && $(num results) == 1 && $(num reports) == 2 ]]
}

@test "the ledger charges 1 + policy.cost" {
	negotiate
	submit r1 '"policy":{"cost":4}'
	api GET "/v1/sessions/$SID/work" "" "$CRED"
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 ]]
	api GET /admin/summary
	[[ $(num ledger_total) == 5 ]]
}

@test "results are refused in the protocol's order" {
	negotiate
	local a_sid=$SID a_cred=$CRED
	take r1 r2
	# conflict: a different body for a recorded run
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 ]]
	api POST /v1/results "$(result_body r1 killed)" "$CRED"
	[[ $code == 409 && $(field error) == conflict ]]
	# unknown run
	api POST /v1/results "$(result_body nope)" "$CRED"
	[[ $code == 404 && $(field error) == unknown_run ]]
	# wrong session: r2 belongs to a
	negotiate "$XID2"
	api POST /v1/results "$(result_body r2)" "$CRED"
	[[ $code == 409 && $(field error) == wrong_session ]]
	# unauthorized: b's credential for a body naming a, or no credential
	SID=$a_sid
	api POST /v1/results "$(result_body r2)" "$CRED"
	[[ $code == 401 && $(field error) == unauthorized ]]
	api POST /v1/results "$(result_body r2)"
	[[ $code == 401 ]]
	# invalid is checked before the credential
	api POST /v1/results '{"run_id":"r2"}' "$a_cred"
	[[ $code == 400 && $(field error) == invalid ]]
	# session over: a is revoked
	api POST "/admin/sessions/$a_sid/revoke"
	api POST /v1/results "$(result_body r2)" "$a_cred"
	[[ $code == 410 && $(field error) == session_over && $(field status) == revoked ]]
	api GET /admin/summary
	[[ $(num ledger_total) == 1 && $(num results) == 1 ]]
	api GET /admin/runs/r2
	[[ $body == *'"status":409,"error":"wrong_session"'*'"status":401,"error":"unauthorized"'*'"status":410,"error":"session_over"'* ]]
}

@test "invalid result bodies are 400" {
	negotiate
	take r1
	local good bad
	good=$(result_body r1)
	for bad in "${good%\}},\"extra\":1}" "${good/\"exited\"/\"died\"}" \
		"${good/\"exit_code\":0/\"exit_code\":256}" "${good/\"exit_code\":0/\"exit_code\":0.5}" \
		"${good/\"wait_status\":0/\"wait_status\":\"0\"}" "${good/,\"chosen_at\":1764500000000/}" \
		'[]' '{"run_id":' "$good$good"; do
		api POST /v1/results "$bad" "$CRED"
		[[ $code == 400 && $(field error) == invalid ]]
	done
	api POST /v1/results "${good/\"wait_status\":0/\"wait_status\":null}" "$CRED"
	[[ $code == 200 ]]
	result_body r1 exited "$(head -c 4097 /dev/zero | tr '\0' m)" >"$BATS_TEST_TMPDIR/big"
	api POST /v1/results @"$BATS_TEST_TMPDIR/big" "$CRED"
	[[ $code == 400 ]]
}

@test "a body larger than 64 KiB is 400 invalid" {
	negotiate
	{ printf '{"run_id":"r1","pad":"'; head -c 70000 /dev/zero | tr '\0' x; printf '"}'; } >"$BATS_TEST_TMPDIR/huge"
	api POST /v1/results @"$BATS_TEST_TMPDIR/huge" "$CRED"
	[[ $code == 400 && $(field error) == invalid && $body == *"larger than"* ]]
	api GET /admin/summary
	[[ $code == 200 ]]
}

@test "body_sha256 matches sha256sum for every length mod 64" {
	negotiate
	take r1
	local n msg sum file lens=({0..70} 1000 4000)
	for n in "${lens[@]}"; do
		printf -v msg '%*s' "$n" ''
		result_body r1 exited "${msg// /a}" >"$BATS_TEST_TMPDIR/b$n"
		api POST /v1/results @"$BATS_TEST_TMPDIR/b$n" "$CRED"
		[[ $code == 200 || $code == 409 ]] || fail "length $n: $code $body"
	done
	api GET /admin/runs/r1
	n=0
	while read -r sum file; do
		[[ $body == *"\"body_sha256\":\"$sum\""* ]] || fail "$file: no body_sha256 $sum"
		n=$((n + 1))
	done < <(cd "$BATS_TEST_TMPDIR" && sha256sum "${lens[@]/#/b}")
	[ "$n" -eq "${#lens[@]}" ]
}

@test "unknown path is 404 not_found, wrong method 405, always JSON" {
	run curl -sS --noproxy '*' --max-time "$WAIT_S" -i "$DISP_URL/nowhere"
	[[ $output == *"404"* && $output == *"Content-Type: application/json"* && $output == *'"error":"not_found"'* ]]
	api DELETE /v1/results
	[[ $code == 405 && $(field error) == method_not_allowed ]]
	api GET /v1/sessions
	[[ $code == 405 ]]
}

@test "fault 5xx, 429 and 4xx answer without handling, then service resumes" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"5xx"}'
	[[ $code == 200 ]]
	api POST /admin/faults '{"kind":"429"}'
	api POST /admin/faults '{"kind":"4xx"}'
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 503 && $(field error) == unavailable ]]
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 429 && $(field error) == overloaded ]]
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 400 && $(field error) == invalid ]]
	api GET /admin/runs/r1
	[[ $(field state) == offered ]]
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 && $(field status) == recorded ]]
	api GET /admin/runs/r1
	[[ $body == *'"status":503,'*'"fault":"5xx"'*'"status":429,'*'"status":400,'*'"fault":"4xx"'*'"status":200,'* ]]
}

@test "fault reset closes without handling" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"reset"}'
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == curl-52 ]]
	api GET /admin/runs/r1
	[[ $(field state) == offered && $body == *'"result":null'* && $body == *'"fault":"reset"'* ]]
}

@test "fault drop_ack records, drops the answer; the resend is a duplicate charged once" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"drop_ack"}'
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == curl-52 ]]
	api GET /admin/runs/r1
	[[ $(field state) == finished ]]
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 && $(field status) == duplicate ]]
	api GET /admin/summary
	[[ $(num ledger_total) == 1 ]]
}

@test "fault malformed records and answers 200 with a body that is not JSON" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"malformed"}'
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 ]]
	[[ $body == *recorded* && $body != *'}' ]]
	api GET /admin/runs/r1
	[[ $(field state) == finished ]]
}

@test "fault delay answers late and counts as in flight; overlap is measured" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"delay","delay_ms":400}'
	local ms
	ms=$(date +%s%3N)
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 && $(( $(date +%s%3N) - ms )) -ge 400 ]]
	api GET /admin/runs/r1
	[[ $(num max_in_flight) == 1 ]]
	# two reports at once, both delayed (long enough for a loaded machine to
	# start the second while the first is held): the dispatcher sees them overlap
	api POST /admin/faults '{"kind":"delay","delay_ms":3000,"count":2}'
	result_body r1 >"$BATS_TEST_TMPDIR/res"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary @"$BATS_TEST_TMPDIR/res" "$DISP_URL/v1/results" &
	local bg=$!
	api POST /v1/results @"$BATS_TEST_TMPDIR/res" "$CRED"
	wait "$bg"
	[[ $code == 200 && $(field status) == duplicate ]]
	api GET /admin/runs/r1
	[[ $(num max_in_flight) == 2 ]]
}

@test "fault hang never answers and ends when the client gives up" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"hang","delay_ms":60000}'
	run curl -sS --noproxy '*' --max-time 1 -H "@$BATS_TEST_TMPDIR/auth" \
		--data-binary "$(result_body r1)" "$DISP_URL/v1/results"
	[[ $status -eq 28 ]]
	api GET /admin/runs/r1
	[[ $code == 200 && $(field state) == offered ]]
	wait_until 'api GET /admin/runs/r1; [[ $body == *"\"fault\":\"hang\""* ]]'
	[[ $body == *'"status":0,"error":null,"fault":"hang"'* ]]
}

@test "SIGTERM stops the dispatcher promptly even while a request hangs" {
	negotiate
	take r1
	# a hang far longer than any wait here: stopping must not sit it out
	api POST /admin/faults '{"kind":"hang","delay_ms":3600000}'
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary "$(result_body r1)" "$DISP_URL/v1/results" 2>/dev/null &
	local bg=$!
	# the result request is in flight (beside the stats request asking):
	# counted in memory, where the store's max_in_flight is noted only
	# when the store is free at its arrival
	wait_until 'api GET /admin/stats; [[ $(num result) == 1 && $(num in_flight) -ge 2 ]]'
	local t0=$SECONDS
	stop_dispatcher_ok
	[[ $((SECONDS - t0)) -lt $WAIT_S ]]
	wait "$bg" || true
}

# thread_nices: the nice of each of the dispatcher's threads, one a line
# (field 19 of /proc/PID/task/TID/stat, counted after the command's name).
thread_nices() {
	local f
	for f in /proc/"$DISP_PID"/task/*/stat; do
		sed 's/.*) //' "$f" 2>/dev/null | cut -d' ' -f17
	done
}

@test "a thread serving a result or the work feed yields the CPU (nice 10); the dispatcher's own keep theirs" {
	negotiate
	take r1
	# the feed's connection of take has ended, and its thread with it
	wait_until '[ "$(thread_nices | grep -cvx 0)" = 0 ]'
	api POST /admin/faults '{"kind":"hang","delay_ms":3600000}'
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary "$(result_body r1)" "$DISP_URL/v1/results" 2>/dev/null &
	local bg=$!
	wait_until 'api GET /admin/stats; [[ $(num result) == 1 && $(num in_flight) -ge 2 ]]'
	wait_until '[ "$(thread_nices | grep -cx 10)" = 1 ]'
	negotiate "$XID2"                  # (r1 is offered to the first until its result is in)
	feed_wait 30000                    # a feed request that waits for work
	wait_until '[ "$(thread_nices | grep -cx 10)" = 2 ]'
	[ "$(thread_nices | grep -cvx '0\|10')" = 0 ] || fail "nices: $(thread_nices | sort | uniq -c)"
	stop_dispatcher_ok
	wait "$bg" || true
	wait "$FEED_PID" || true
}

# hung_beat: a heartbeat of $SID held by a hang fault, in the background
# (its pid in BEAT_PID), until a thread serves it.
hung_beat() {
	api POST /admin/faults "{\"kind\":\"hang\",\"delay_ms\":3600000,\"path\":\"/v1/sessions/$SID/heartbeat\"}"
	[[ $code == 200 ]] || fail "fault: $code $body"
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/beat.auth"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/beat.auth" \
		-X POST "$DISP_URL/v1/sessions/$SID/heartbeat" 2>/dev/null &
	BEAT_PID=$!
	wait_until 'api GET /admin/stats; [[ $(num heartbeat) -ge 1 && $(num in_flight) -ge 2 ]]'
}

# beats_keep_own_nice: the dispatcher says heartbeats keep nice 0, and
# while one is served every thread is at 0; then it is stopped.
beats_keep_own_nice() {
	api GET /admin/stats
	[[ $(num heartbeat_nice) == 0 ]] || fail "stats: $body"
	negotiate
	hung_beat
	[ "$(thread_nices | grep -cvx 0)" = 0 ] || fail "nices: $(thread_nices | sort | uniq -c)"
	stop_dispatcher_ok
	wait "$BEAT_PID" || true
}

@test "a thread serving a heartbeat runs at --heartbeat-nice where the dispatcher may raise a priority" {
	[ "$(id -u)" = 0 ] || skip "raising a priority needs root here"
	api GET /admin/stats
	[[ $(num heartbeat_nice) == -10 ]] || fail "stats: $body"
	negotiate
	wait_until '[ "$(thread_nices | grep -cvx 0)" = 0 ]'
	hung_beat
	wait_until '[ "$(thread_nices | grep -cx -- -10)" = 1 ]'
	[ "$(thread_nices | grep -cvx -- '0\|-10')" = 0 ] || fail "nices: $(thread_nices | sort | uniq -c)"
	stop_dispatcher_ok
	wait "$BEAT_PID" || true
	# asked for none: every thread at the dispatcher's own
	mkdir -p "$BATS_TEST_TMPDIR/none"
	start_dispatcher_in "$BATS_TEST_TMPDIR/none" --quiet --heartbeat-nice 0
	beats_keep_own_nice
	run ! grep -q 'heartbeats keep' "$BATS_TEST_TMPDIR/none/disp.log"
}

@test "a dispatcher that may not raise a priority says so once, and its heartbeats keep its nice" {
	[ "$(id -u)" = 0 ] || skip "dropping CAP_SYS_NICE needs root (without it, this is every start)"
	command -v setpriv >/dev/null || skip "no setpriv"
	stop_dispatcher_ok
	mkdir -p "$BATS_TEST_TMPDIR/plain"
	# shellcheck disable=SC2034 # (spawn_dispatcher starts it under DISP_WRAP)
	DISP_WRAP=(setpriv --bounding-set -sys_nice --inh-caps -sys_nice)
	start_dispatcher_in "$BATS_TEST_TMPDIR/plain" --quiet
	unset DISP_WRAP
	beats_keep_own_nice
	[ "$(grep -c 'heartbeats keep nice 0: raising a thread to nice -10 needs CAP_SYS_NICE' \
		"$BATS_TEST_TMPDIR/plain/disp.log")" = 1 ] || fail "log: $(cat "$BATS_TEST_TMPDIR/plain/disp.log")"
}

@test "faults match a path prefix and DELETE clears them" {
	api POST /admin/faults '{"kind":"5xx","count":3,"path":"/admin/summary"}'
	[[ $code == 200 && $(num count) == 3 ]]
	api GET /admin/summary
	[[ $code == 503 ]]
	api DELETE /admin/faults
	[[ $code == 200 && $(num cleared) == 1 ]]
	api GET /admin/summary
	[[ $code == 200 ]]
	api POST /admin/faults '{"kind":"explode"}'
	[[ $code == 400 ]]
}

@test "a restart on the same store keeps the incarnation, sessions and runs" {
	negotiate
	take r1
	stop_dispatcher
	start_dispatcher_in "$BATS_TEST_TMPDIR" --quiet --incarnation inc-0000000000000001
	api GET /admin/summary
	[[ $(field incarnation) == "$INC" ]]
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 200 && $(field status) == recorded ]]
}

@test "--incarnation names a new store" {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/n"
	start_dispatcher_in "$BATS_TEST_TMPDIR/n" --quiet --incarnation inc-00000000000000ab
	api GET /admin/summary
	[[ $(field incarnation) == inc-00000000000000ab ]]
}

@test "the request log never shows the credential nor a client token; the store keeps their hashes" {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/l"
	start_dispatcher_in "$BATS_TEST_TMPDIR/l"
	negotiate
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]
	api POST /admin/clients '{"name":"log"}'
	[[ $code == 201 ]]
	local token
	token=$(field token)
	[[ $token =~ ^[0-9a-f]{64}$ ]]
	api POST /v1/inspections "{\"run_id\":\"r1\",\"session_id\":\"$SID\"}" "$token"
	[[ $code == 202 ]]
	api GET "/v1/inspections/$(field inspection_id)?wait_ms=0" "" "$token"
	[[ $code == 200 ]]
	api POST /v1/inspections "{\"run_id\":\"r1\",\"session_id\":\"$SID\"}" "${token}0"
	[[ $code == 401 ]]
	stop_dispatcher_ok
	grep -q "listening on 127.0.0.1:" "$BATS_TEST_TMPDIR/l/disp.log"
	grep -q "POST /v1/sessions/$SID/heartbeat 200" "$BATS_TEST_TMPDIR/l/disp.log"
	grep -q "POST /v1/inspections 202" "$BATS_TEST_TMPDIR/l/disp.log"
	grep -q "POST /v1/inspections 401" "$BATS_TEST_TMPDIR/l/disp.log"
	run ! grep -q "$CRED" "$BATS_TEST_TMPDIR/l/disp.log"
	run ! grep -q "$token" "$BATS_TEST_TMPDIR/l/disp.log"
	run ! grep -qf "$BATS_TEST_TMPDIR/l/disp.db.admin-token" "$BATS_TEST_TMPDIR/l/disp.log"
	# only the SHA-256 of either is stored
	run ! grep -qa -e "$CRED" -e "$token" "$BATS_TEST_TMPDIR/l"/disp.db*
	[[ $(sqlite3 "$BATS_TEST_TMPDIR/l/disp.db" "SELECT token_sha256 FROM clients") == \
		"$(printf %s "$token" | sha256sum | cut -d' ' -f1)" ]]
}

@test "/admin/stats counts requests by kind: heartbeat, negotiate, feed, result, admin, other" {
	negotiate                                          # 1 negotiate
	take r1                                            # 1 admin (submit), 1 feed
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"  # 1 heartbeat
	api POST /v1/results "$(result_body r1)" "$CRED"   # 1 result
	[[ $code == 200 ]]
	api GET "/v1/sessions/$SID" "" "$CRED"             # 1 other
	api GET /admin/stats                               # and this admin request
	# (and the set-up's: start_dispatcher enrolls the test's executors)
	[[ $body == *'"requests_by":{"heartbeat":1,"negotiate":1,"feed":1,"result":1,"admin":3,"other":1}'* ]] ||
		fail "$body"
	[[ $(num requests) == 8 ]]
}

@test "the gate: past --max-inflight a result gets 429 with Retry-After, a heartbeat never; stats count it" {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/g"
	start_dispatcher_in "$BATS_TEST_TMPDIR/g" --quiet --max-inflight 1 --retry-after 7
	negotiate
	take r1 r2
	# one report held in flight, so the gate is full
	api POST /admin/faults '{"kind":"hang","delay_ms":3600000,"count":1}'
	result_body r1 >"$BATS_TEST_TMPDIR/res1"
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary @"$BATS_TEST_TMPDIR/res1" "$DISP_URL/v1/results" 2>/dev/null &
	local bg=$!
	wait_until 'api GET /admin/stats; [[ $(num in_flight) -ge 2 ]]'   # the held one + this read
	run curl -sS --noproxy '*' --max-time "$WAIT_S" -i -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary "$(result_body r2)" "$DISP_URL/v1/results"
	assert_output --partial "HTTP/1.1 429"
	assert_output --regexp "Retry-After: [0-9]+"
	local ra
	ra=$(sed -n 's/^Retry-After: \([0-9]*\).*/\1/p' <<<"$output")
	[[ $ra -ge 7 && $ra -le 67 ]]                           # --retry-after 7, plus a spread of 0..60
	assert_output --partial '"error":"overloaded"'
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]                                      # never refused for load
	api POST /v1/sessions "$(xbody "$XID2")"
	[[ $code == 201 ]]                                      # nor a negotiation
	api GET /admin/stats
	[[ $(num gated_429) == 1 && $(num max_inflight) == 1 ]]
	api GET /admin/runs/r2
	[[ $(field state) == offered ]]                         # not handled
	kill "$bg" 2>/dev/null || true
	wait "$bg" || true
}

@test "the gate: past the limit a result waits for a place (--slot-wait-ms) and is served once one frees, not refused" {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/s"
	start_dispatcher_in "$BATS_TEST_TMPDIR/s" --quiet --max-inflight 1 --slot-wait-ms 60000
	negotiate
	take r1 r2
	# r1 held in flight, so the gate is full
	api POST /admin/faults '{"kind":"hang","delay_ms":3600000,"count":1}'
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary "$(result_body r1)" "$DISP_URL/v1/results" 2>/dev/null &
	local held=$!
	wait_until 'api GET /admin/stats; [[ $(num in_flight) -ge 2 ]]'   # the held one + this read
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/r2.body" -w '%{http_code}' \
		-H @"$BATS_TEST_TMPDIR/auth" --data-binary "$(result_body r2)" "$DISP_URL/v1/results" \
		>"$BATS_TEST_TMPDIR/r2.code" 2>/dev/null &
	local waiter=$!
	wait_until 'api GET /admin/stats; [[ $(num slot_waited) == 1 ]]'
	api GET /admin/runs/r2
	[[ $(field state) == offered ]]                         # waiting, not handled
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]                                      # heartbeats pass by it
	kill "$held"                                            # r1's client leaves: its place frees
	wait "$waiter" || fail "r2: curl exit $?"
	[[ $(<"$BATS_TEST_TMPDIR/r2.code") == 200 ]] || fail "r2: $(<"$BATS_TEST_TMPDIR/r2.code") $(<"$BATS_TEST_TMPDIR/r2.body")"
	api GET /admin/runs/r2
	[[ $(field state) == finished ]]
	api GET /admin/stats
	[[ $(num slot_waited_in) == 1 && $(num gated_429) == 0 && $(num slot_wait_ms) == 60000 ]]
	wait "$held" || true
}

# feed_wait WAIT_MS: a work feed request of session SID in the background,
# its status in $BATS_TEST_TMPDIR/wcode and its body in .../wbody; FEED_PID.
feed_wait() {
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/wauth"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/wbody" -w '%{http_code}' \
		-H @"$BATS_TEST_TMPDIR/wauth" "$DISP_URL/v1/sessions/$SID/work?max=10&wait_ms=$1" \
		>"$BATS_TEST_TMPDIR/wcode" 2>/dev/null &
	FEED_PID=$!
	wait_until 'api GET /admin/stats; [[ $(num waiting) == 1 ]]'
}

@test "the work feed's wait_ms: an empty feed waits, answers the moment work is submitted, and is not in flight meanwhile" {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/w"
	start_dispatcher_in "$BATS_TEST_TMPDIR/w" --quiet --max-inflight 1
	negotiate
	local t0=$SECONDS
	feed_wait 30000
	api GET /admin/stats
	[[ $(num in_flight) == 1 ]]                            # this read only: the wait is parked
	api GET "/v1/sessions/$SID/work?max=0" "" "$CRED"
	[[ $code == 200 ]] || fail "the gate (1) did not let a request through: $code $body"
	submit w1
	wait "$FEED_PID"
	[[ $(<"$BATS_TEST_TMPDIR/wcode") == 200 ]]
	grep -q '"run_id":"w1"' "$BATS_TEST_TMPDIR/wbody"
	(( SECONDS - t0 < 30 ))                                 # answered before its wait ran out
	api GET /admin/stats
	[[ $(num waiting) == 0 && $(num in_flight) == 1 ]]
	# a session that ends during the wait gets its 410 then, not when the
	# wait runs out: revoked, closed, or replaced by its executor's next
	# negotiation (another executor's: w1 is still handed to the first one
	# until receipted)
	local end
	for end in revoke close replace; do
		negotiate "$XID2"
		feed_wait 30000
		t0=$SECONDS
		case $end in
		revoke) api POST "/admin/sessions/$SID/revoke" ;;
		close) api DELETE "/v1/sessions/$SID" "" "$CRED" ;;
		replace) negotiate "$XID2" ;;
		esac
		wait "$FEED_PID"
		[[ $(<"$BATS_TEST_TMPDIR/wcode") == 410 ]] || fail "$end: $(<"$BATS_TEST_TMPDIR/wcode")"
		(( SECONDS - t0 < 30 )) || fail "$end: the 410 came when the wait ran out"
	done
	# with nothing submitted, the wait ends with an empty feed
	negotiate "$XID2"
	api GET "/v1/sessions/$SID/work?max=10&wait_ms=200" "" "$CRED"
	[[ $code == 200 && $body == '{"runs":[]}' ]] || fail "$code $body"
	for w in abc -1 30001; do
		api GET "/v1/sessions/$SID/work?wait_ms=$w" "" "$CRED"
		[[ $code == 400 && $body == *"wait_ms must be a number from 0 to 30000"* ]] || fail "$w: $code $body"
	done
}

@test "the work feed's wait_ms: one submission of three runs wakes three waiters taking one each, at once" {
	local xid pids=() i t0=$SECONDS
	for i in 1 2 3; do
		xid=$(printf '%032x' "$((0xabc0 + i))")
		negotiate "$xid"
		printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/wauth$i"
		curl -sS --noproxy '*' --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/wbody$i" \
			-H @"$BATS_TEST_TMPDIR/wauth$i" "$DISP_URL/v1/sessions/$SID/work?max=1&wait_ms=30000" &
		pids+=($!)
	done
	wait_until 'api GET /admin/stats; [[ $(num waiting) == 3 ]]'
	api POST /admin/runs '{"runs":[{"run_id":"m1","txn_id":"t1","program":"/bin/true"},{"run_id":"m2","txn_id":"t2","program":"/bin/true"},{"run_id":"m3","txn_id":"t3","program":"/bin/true"}]}'
	[[ $code == 200 ]]
	wait "${pids[@]}"
	(( SECONDS - t0 < 30 ))                                 # each woke before its wait ran out
	for i in 1 2 3; do
		[[ $(grep -o '"run_id":"m[123]"' "$BATS_TEST_TMPDIR/wbody$i" | wc -l) == 1 ]] ||
			fail "waiter $i: $(cat "$BATS_TEST_TMPDIR/wbody$i")"
	done
	[[ $(cat "$BATS_TEST_TMPDIR"/wbody? | grep -o '"run_id":"m[123]"' | sort -u | wc -l) == 3 ]]
}

# gated_flood N S: a dispatcher with --max-rate 1 --retry-after S, and r1's
# result reported N times on one connection (far more than one a second);
# the answers' headers in $BATS_TEST_TMPDIR/heads.
gated_flood() {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/g"
	start_dispatcher_in "$BATS_TEST_TMPDIR/g" --quiet --max-rate 1 --retry-after "$2"
	negotiate
	take r1
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	result_body r1 >"$BATS_TEST_TMPDIR/res1"
	local i urls=()
	for i in $(seq "$1"); do urls+=(-o /dev/null --data-binary @"$BATS_TEST_TMPDIR/res1" "$DISP_URL/v1/results"); done
	curl -sS --noproxy '*' --max-time "$WAIT_S" -D "$BATS_TEST_TMPDIR/heads" \
		-H @"$BATS_TEST_TMPDIR/auth" "${urls[@]}" || fail "curl failed"
}

@test "the gate: past --max-rate a result gets 429 with a spread Retry-After, a heartbeat never" {
	gated_flood 30 3   # a burst of 1
	local i urls refused ras
	refused=$(grep -c '^HTTP/1.1 429' "$BATS_TEST_TMPDIR/heads")
	[[ $refused -ge 1 ]]
	ras=$(sed -n 's/^Retry-After: \([0-9]*\).*/\1/p' "$BATS_TEST_TMPDIR/heads" | sort -n)
	[[ $(wc -l <<<"$ras") == "$refused" ]]                   # every 429 carries one
	[[ $(head -n 1 <<<"$ras") -ge 3 && $(tail -n 1 <<<"$ras") -le 63 ]]   # 3 + 0..60
	api GET /admin/stats
	# every 429 seen was counted, each one past the rate (a request curl sent
	# again on a new connection, after one closed under it, counts twice)
	local gated
	gated=$(num gated_429)
	[[ $gated -ge $refused ]] || fail "$gated counted, $refused seen: $body"
	[[ $(num gated_rate) == "$gated" ]] || fail "$body"
	[[ $(num retry_after_max) -ge "$(tail -n 1 <<<"$ras")" ]] || fail "$body"
	[[ $(num max_rate) == 1 ]]
	# heartbeats and negotiations pass however many come
	urls=()
	for i in $(seq 30); do urls+=(-o /dev/null -X POST "$DISP_URL/v1/sessions/$SID/heartbeat"); done
	curl -sS --noproxy '*' --max-time "$WAIT_S" -w '%{http_code}\n' \
		-H @"$BATS_TEST_TMPDIR/auth" "${urls[@]}" >"$BATS_TEST_TMPDIR/codes" || fail "curl failed"
	[[ $(grep -c '^200$' "$BATS_TEST_TMPDIR/codes") == 30 ]]
	api POST /v1/sessions "$(xbody "$XID2")"
	[[ $code == 201 ]]
	api GET /admin/stats
	[[ $(num gated_429) == "$gated" ]]
}

# paced_flood N WAIT_MS: a dispatcher with --max-rate 1 --rate-wait-ms
# WAIT_MS, and r1's result sent N times at once; the statuses in codes.
paced_flood() {
	mkdir "$BATS_TEST_TMPDIR/p"
	start_dispatcher_in "$BATS_TEST_TMPDIR/p" --quiet --max-rate 1 --rate-wait-ms "$2"
	negotiate
	take r1
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	result_body r1 >"$BATS_TEST_TMPDIR/res1"
	local i urls=()
	for i in $(seq "$1"); do urls+=(-o /dev/null "$DISP_URL/v1/results"); done
	# (one --data-binary goes with every url; two would be joined with '&')
	curl -sS --noproxy '*' --max-time "$WAIT_S" --parallel --parallel-immediate --parallel-max "$1" \
		-H 'Content-Type: application/json' -H @"$BATS_TEST_TMPDIR/auth" -w '%{http_code}\n' \
		--data-binary @"$BATS_TEST_TMPDIR/res1" "${urls[@]}" >"$BATS_TEST_TMPDIR/codes" || fail "curl failed"
}

@test "the gate: past --max-rate a request whose turn comes within --rate-wait-ms waits for it, not a 429" {
	paced_flood 4 10000   # a burst of 1: the others wait about 1, 2 and 3 s
	[[ $(grep -c '^200$' "$BATS_TEST_TMPDIR/codes") == 4 ]] || fail "$(cat "$BATS_TEST_TMPDIR/codes")"
	api GET /admin/stats
	[[ $(num gated_429) == 0 && $(num paced) -ge 1 && $(num rate_wait_ms) == 10000 ]] || fail "$body"
	[[ $(num waiting) == 0 ]] || fail "$body"   # none left parked
}

@test "the gate: a turn further than --rate-wait-ms is a 429 at once" {
	paced_flood 8 1500    # turns 0, 1, 2, ... s: the third on is past 1.5 s
	api GET /admin/stats
	[[ $(num gated_429) -ge 1 && $(num paced) -ge 1 ]] || fail "$body $(cat "$BATS_TEST_TMPDIR/codes")"
	[[ $(grep -c '^429$' "$BATS_TEST_TMPDIR/codes") == "$(num gated_429)" ]]
	[[ $(grep -c '^200$' "$BATS_TEST_TMPDIR/codes") == $((8 - $(num gated_429))) ]]
}

@test "the gate: a paced request whose client gives up is not served, and its turn goes back to the bucket" {
	mkdir "$BATS_TEST_TMPDIR/p"
	start_dispatcher_in "$BATS_TEST_TMPDIR/p" --quiet --max-rate 1 --rate-wait-ms 10000
	negotiate
	take r1
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	result_body r1 >"$BATS_TEST_TMPDIR/res1"
	local i urls=()
	for i in 1 2 3 4 5 6; do urls+=(-o /dev/null "$DISP_URL/v1/results"); done
	# six at once, each client giving up after 0.3 s: the feed request of
	# take took the bucket's token, so they are given turns 1 to 6 s away
	curl -sS --noproxy '*' --max-time 0.3 --parallel --parallel-immediate --parallel-max 6 \
		-H 'Content-Type: application/json' -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary @"$BATS_TEST_TMPDIR/res1" "${urls[@]}" 2>/dev/null || true
	wait_until 'api GET /admin/stats; [[ $(num paced_left) == 6 ]]'
	# the six turns went back: what is left is the feed's token refilling
	# (at most 1 s); kept, the queue would reach 6 s and more
	[[ $(num paced) == 6 && $(num rate_queue_ms) -le 1000 ]] || fail "$body"
	api GET /admin/summary
	[[ $body == *'"reports":0'[,\}]* ]] || fail "$body"   # none was served
}

@test "--rate-wait-ms takes 0 to 10000" {
	run exec-dispatcher --rate-wait-ms 10001
	[[ $status -eq $EK_USAGE && $output == *"--rate-wait-ms: '10001' is not a number from 0 to 10000"* ]]
	run exec-dispatcher --rate-wait-ms x
	[[ $status -eq $EK_USAGE ]]
}

@test "the adaptive gate's Retry-After follows what it takes through, not a window's count: a fast dispatcher sends a refused fleet away for a second or two; a session's close is never refused" {
	stop_dispatcher
	mkdir "$BATS_TEST_TMPDIR/g"
	start_dispatcher_in "$BATS_TEST_TMPDIR/g" --quiet --max-inflight 1 --retry-after 1
	negotiate
	local i rtt=0
	take $(seq -f 'a%g' 32)
	# latency samples for the gate, results answered at once, until one of
	# its 100-ms windows has closed on them (at most 30)
	for ((i = 1; i <= 30 && rtt == 0; i++)); do
		api POST /v1/results "$(result_body "a$i")" "$CRED"
		[[ $code == 200 ]] || fail "a$i: $code $body"
		api GET /admin/stats
		rtt=$(num sample_rtt_us)
	done
	[[ $rtt -gt 0 ]] || fail "no latency measured in 30 results: $body"
	api POST /admin/faults '{"kind":"hang","delay_ms":3600000,"count":1}'
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	result_body a31 >"$BATS_TEST_TMPDIR/res11"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary @"$BATS_TEST_TMPDIR/res11" "$DISP_URL/v1/results" 2>/dev/null &
	wait_until 'api GET /admin/stats; [[ $(num in_flight) -ge 2 ]]'   # the held one + this read
	result_body a32 >"$BATS_TEST_TMPDIR/res12"
	local urls=()
	for i in $(seq 40); do urls+=(-o /dev/null --data-binary @"$BATS_TEST_TMPDIR/res12" "$DISP_URL/v1/results"); done
	curl -sS --noproxy '*' --max-time "$WAIT_S" -D "$BATS_TEST_TMPDIR/heads" \
		-H @"$BATS_TEST_TMPDIR/auth" "${urls[@]}" || fail "curl failed"
	[[ $(grep -c '^HTTP/1.1 429' "$BATS_TEST_TMPDIR/heads") == 40 ]]
	api GET /admin/stats
	local most
	rtt=$(num sample_rtt_us)
	# 1 + 0..spread, the spread being 40 refused at one place in flight that
	# answers in rtt: the window's count (1 admitted) would have said 40 s
	most=$(sed -n 's/^Retry-After: \([0-9]*\).*/\1/p' "$BATS_TEST_TMPDIR/heads" | sort -n | tail -n 1)
	[[ $most -le $((1 + (40 * rtt + 999999) / 1000000)) ]] || fail "Retry-After $most with a latency of $rtt us"
	# the gate is full, yet the session's close goes through
	api DELETE "/v1/sessions/$SID" "" "$CRED"
	[[ $code == 200 ]] || fail "close: $code $body"
	kill %1 2>/dev/null || true
}

@test "the gate's Retry-After spreads: with many refused, not every executor is told the least" {
	gated_flood 60 1
	# past the first refusal the spread is at least 1 s: 1 + 0..spread, random;
	# that every one of the refused would draw 0 is a chance below 2^-20
	[[ $(grep -c '^HTTP/1.1 429' "$BATS_TEST_TMPDIR/heads") -ge 25 ]] ||
		skip "fewer than 25 of 60 reports refused: the machine took 35 s for them"
	sed -n 's/^Retry-After: \([0-9]*\).*/\1/p' "$BATS_TEST_TMPDIR/heads" | sort -un >"$BATS_TEST_TMPDIR/ras"
	[[ $(wc -l <"$BATS_TEST_TMPDIR/ras") -ge 2 ]]
}

@test "--max-rate takes 0 to 1000000" {
	run exec-dispatcher --max-rate x
	[[ $status -eq $EK_USAGE && $output == *"--max-rate: 'x' is not a number from 0 to 1000000"* ]]
	run exec-dispatcher --max-rate -1
	[[ $status -eq $EK_USAGE ]]
}

@test "a 503 or 429 fault with delay_ms carries Retry-After" {
	negotiate
	take r1
	api POST /admin/faults '{"kind":"429","delay_ms":2500}'
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/auth"
	run curl -sS --noproxy '*' --max-time "$WAIT_S" -i -H @"$BATS_TEST_TMPDIR/auth" \
		--data-binary "$(result_body r1)" "$DISP_URL/v1/results"
	assert_output --partial "HTTP/1.1 429"
	assert_output --partial "Retry-After: 3"
}

# --- work conservation: hand-back, settlement, abandonment ---------------------

# jget JSON PATH: one value out of a JSON text, read by SQLite's JSON functions.
jget() {
	sqlite3 :memory: "SELECT json_extract('${1//\'/\'\'}', '$2')"
}

# accept RUN_IDS...: receipt the runs as accepted by SID.
accept() {
	local r list=
	for r in "$@"; do list+="${list:+,}{\"run_id\":\"$r\",\"receipt\":\"x-$r\",\"outcome\":\"accepted\"}"; done
	api POST "/v1/sessions/$SID/receipts" "{\"receipts\":[$list]}" "$CRED"
	[[ $code == 200 && $(num recorded) == "$#" ]]
}

# handback RUN_IDS...: SID hands the runs back; sets $code and $body.
handback() {
	local r list=
	for r in "$@"; do list+="${list:+,}\"$r\""; done
	api POST "/v1/sessions/$SID/handback" "{\"runs\":[$list]}" "$CRED"
}

# as_of RUN_ID: the new run RUN_ID was re-queued as, in a hand-back answer.
as_of() {
	sqlite3 :memory: "SELECT json_extract(value, '$.as') FROM json_each('$body', '$.requeued')
		WHERE json_extract(value, '$.run_id') = '$1'"
}

# state_of RUN_ID: the dispatcher's record of the run in $body, its state
# in $STATE.
state_of() {
	api GET "/admin/runs/$1"
	[[ $code == 200 ]]
	STATE=$(jget "$body" '$.state')
}

# summary_of PATH: one count of GET /admin/summary ($.runs.abandoned, ...).
summary_of() {
	api GET /admin/summary
	jget "$body" "$1"
}

@test "hand-back: each run accepted or offered and never started is re-queued as a new run of its transaction, once" {
	negotiate
	take r1 r2 r3 r4
	accept r1 r2 r3                                   # r4 stays offered
	api POST /v1/results "$(result_body r3)" "$CRED"
	[[ $code == 200 ]]
	handback r1 r4 r3 nope r1
	[[ $code == 200 ]]
	[[ $(jget "$body" '$.handed_back') == '["r1","r4"]' ]]
	[[ $(jget "$body" '$.not_handed_back') == '[{"run_id":"r3","why":"finished"},{"run_id":"nope","why":"unknown_run"}]' ]]
	local n1 n4
	n1=$(as_of r1) n4=$(as_of r4)
	[[ $n1 =~ ^rq-[0-9a-f]{16}$ && $n4 =~ ^rq-[0-9a-f]{16}$ && $n1 != "$n4" ]]
	# linked both ways; the new run: the same spec and transaction, a new id, queued
	state_of r1
	[[ $STATE == handed_back ]]
	[[ $(jget "$body" '$.requeued_as') == "$n1" && $(jget "$body" '$.settled') == handback ]]
	[[ $(jget "$body" '$.spec.txn_id') == t-r1 ]]
	state_of "$n1"
	[[ $STATE == queued ]]
	[[ $(jget "$body" '$.requeued_from') == r1 && $(jget "$body" '$.settled') == "" ]]
	[[ $(jget "$body" '$.spec') == "{\"args\":[],\"program\":\"/bin/true\",\"run_id\":\"$n1\",\"txn_id\":\"t-r1\"}" ]]
	state_of r4
	[[ $STATE == handed_back ]]
	state_of r2
	[[ $STATE == accepted ]]
	# idempotent: the same answer, the same new run, nothing else changes
	api GET /admin/summary
	local before=$body
	handback r4 r1
	[[ $code == 200 && $(jget "$body" '$.handed_back') == '["r4","r1"]' ]]
	[[ $(as_of r1) == "$n1" && $(as_of r4) == "$n4" && $(jget "$body" '$.not_handed_back') == '[]' ]]
	api GET /admin/summary
	[[ $body == "$before" ]]
	[[ $(jget "$body" '$.runs.handed_back') == 2 && $(jget "$body" '$.runs.queued') == 2 ]]
	[[ $(jget "$body" '$.settled.handback') == 2 ]]
	# a late receipt changes nothing
	api POST "/v1/sessions/$SID/receipts" '{"receipts":[{"run_id":"r4","receipt":"x","outcome":"accepted"}]}' "$CRED"
	[[ $code == 200 && $(num recorded) == 0 ]]
	state_of r4
	[[ $STATE == handed_back ]]
	# a result for a handed-back run is refused (409 conflict: the executor's refusal) and charged never
	api POST /v1/results "$(result_body r1)" "$CRED"
	[[ $code == 409 && $(field error) == conflict && $(field state) == handed_back && $(field requeued_as) == "$n1" ]]
	state_of r1
	[[ $STATE == handed_back && $(jget "$body" '$.ledger') == '[]' ]]
	# the new runs go to any executor: here another one's session takes them
	local a_sid=$SID a_cred=$CRED
	negotiate "$XID2"
	api GET "/v1/sessions/$SID/work" "" "$CRED"
	[[ $code == 200 && $(jget "$body" '$.runs[0].run_id') == "$n1" && $(jget "$body" '$.runs[0].txn_id') == t-r1 ]]
	[[ $(jget "$body" '$.runs[1].run_id') == "$n4" && $(jget "$body" '$.runs[1].txn_id') == t-r4 ]]
	[[ $(jget "$body" '$.runs[2]') == "" ]]
	accept "$n1"
	# the handing session's feed never hands the originals again (r4 was offered to it)
	api GET "/v1/sessions/$a_sid/work" "" "$a_cred"
	[[ $code == 200 && $body == '{"runs":[]}' ]]
	# another session's runs are not its to hand back, either way
	handback r2
	[[ $code == 200 && $(jget "$body" '$.not_handed_back') == '[{"run_id":"r2","why":"not_yours"}]' ]]
	[[ $(jget "$body" '$.handed_back') == '[]' ]]
	SID=$a_sid CRED=$a_cred
	handback "$n1"
	[[ $code == 200 && $(jget "$body" '$.not_handed_back[0].why') == not_yours ]]
	state_of "$n1"
	[[ $STATE == accepted ]]
	state_of r2
	[[ $STATE == accepted ]]
	api GET /admin/summary
	[[ $(num ledger_total) == 1 ]]
}

@test "hand-back: a malformed body is 400, a session over is 410, and nothing is handed back" {
	negotiate
	take r1
	accept r1
	local bad
	for bad in '{"runs":"r1"}' '{"runs":[1]}' '{"runs":["a b"]}' '{"runs":["r1"],"more":1}' '[]' '{"run'; do
		api POST "/v1/sessions/$SID/handback" "$bad" "$CRED"
		[[ $code == 400 && $(field error) == invalid ]]
	done
	api POST "/v1/sessions/$SID/handback" "{\"runs\":[$(printf '"r%d",' $(seq 1 1000))\"r1\"]}" "$CRED"
	[[ $code == 400 && $(field error) == invalid ]]
	api POST "/v1/sessions/$SID/handback" '{"runs":["r1"]}' "${CRED:0:63}x"
	[[ $code == 401 ]]
	state_of r1
	[[ $STATE == accepted ]]
	api DELETE "/v1/sessions/$SID" "" "$CRED"
	handback r1
	[[ $code == 410 && $(field status) == closed ]]
	state_of r1
	[[ $STATE == accepted ]]
}

# settle_setup N: a dispatcher that settles at once; session S1 of XID
# accepts a1..aN, then the same executor negotiates again (S2, current:
# SID/CRED) and heartbeats.  Sets S1 and INSP_<run> for each pending
# inspection of S2.
settle_setup() {
	stop_dispatcher
	start_dispatcher --settle-after-ms 0
	negotiate
	S1=$SID
	local i ids=()
	for ((i = 1; i <= $1; i++)); do ids+=("a$i"); done
	take "${ids[@]}"
	accept "${ids[@]}"
	negotiate
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 && $(num inspections_pending) == "$1" ]]
	api GET "/v1/sessions/$SID/inspections" "" "$CRED"
	[[ $code == 200 ]]
	local id run
	while IFS='|' read -r id run; do
		printf -v "INSP_$run" '%s' "$id"
	done < <(sqlite3 :memory: "SELECT json_extract(value, '$.inspection_id'), json_extract(value, '$.run_id')
		FROM json_each('$body', '$.inspections')")
}

# found RUN_ID STARTED: the FOUND answer of this executor about RUN_ID,
# accepted under S1.
found() {
	printf '{"outcome":"FOUND","run_id":"%s","incarnation":"%s","session_id":"%s","txn_id":"t-%s","started":%s,"start_marker":null,"due_at":0,"state":"queued"}' \
		"$1" "$INC" "$S1" "$1" "$2"
}

# reply RUN_ID ANSWER: S2 answers the inspection about RUN_ID.
reply() {
	local insp="INSP_$1"
	api POST "/v1/sessions/$SID/inspections/${!insp}" "$2" "$CRED"
	[[ $code == 200 && $(field status) == recorded ]]
}

@test "settlement: an ended session's runs are asked about through its executor's current session, and settled on the answer only" {
	settle_setup 6
	# the dispatcher's own inspections, listed like a client's; no client reads them
	api POST /admin/clients '{"name":"c"}'
	local token
	token=$(field token)
	api GET "/v1/inspections/$INSP_a1" "" "$token"
	[[ $code == 404 && $(field error) == unknown_inspection ]]
	state_of a1
	[[ $STATE == accepted && $(jget "$body" '$.asks[0].session_id') == "$SID" ]]
	reply a1 "$(found a1 false)"
	reply a2 "$(found a2 true)"
	reply a3 '{"outcome":"ABSENT","run_id":"a3"}'
	local t0=$SECONDS
	reply a4 '{"outcome":"ERROR","reason":"executor is shutting down","exit_code":75}'
	reply a5 '{"outcome":"FILTERED","run_id":"a5"}'
	reply a6 "$(found a6 false | sed "s/$S1/$SID/")"     # not the binding that accepted it
	# nothing is asked again at once (unless this machine took the 5 s the
	# dispatcher waits after an answer that decided nothing)
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]
	((SECONDS - t0 >= 4)) || [[ $(num inspections_pending) == 0 ]]
	# never started there: re-queued as a new run of the same transaction
	state_of a1
	[[ $STATE == requeued && $(jget "$body" '$.settled') == inspection_not_started ]]
	local n1 n3
	n1=$(jget "$body" '$.requeued_as')
	[[ $n1 =~ ^rq-[0-9a-f]{16}$ ]]
	state_of "$n1"
	[[ $STATE == queued && $(jget "$body" '$.requeued_from') == a1 ]]
	[[ $(jget "$body" '$.spec.txn_id') == t-a1 ]]
	# absent there: the acceptance never committed; re-queued
	state_of a3
	[[ $STATE == requeued && $(jget "$body" '$.settled') == inspection_absent ]]
	n3=$(jget "$body" '$.requeued_as')
	state_of "$n3"
	[[ $STATE == queued && $(jget "$body" '$.spec.txn_id') == t-a3 ]]
	# started there: it stays that executor's, and is not asked about again
	state_of a2
	[[ $STATE == accepted && $(jget "$body" '$.settled') == inspection_started ]]
	# an ERROR, a FILTERED, or a FOUND of another binding decides nothing
	for r in a4 a5 a6; do
		state_of "$r"
		[[ $STATE == accepted && $(jget "$body" '$.settled') == "" ]]
	done
	api GET /admin/summary
	[[ $(jget "$body" '$.runs.requeued') == 2 && $(jget "$body" '$.runs.queued') == 2 && $(jget "$body" '$.runs.accepted') == 4 ]]
	[[ $(jget "$body" '$.settled.inspection_not_started') == 1 && $(jget "$body" '$.settled.inspection_absent') == 1 ]]
	[[ $(jget "$body" '$.settled.inspection_started') == 1 ]]
	# ... and is asked again later
	wait_until 'api GET "/v1/sessions/$SID/inspections" "" "$CRED"; [[ $body == *"\"run_id\":\"a4\""* && $body == *"\"run_id\":\"a5\""* && $body == *"\"run_id\":\"a6\""* ]]'
	[[ $body != *'"run_id":"a1"'* && $body != *'"run_id":"a2"'* && $body != *'"run_id":"a3"'* ]]
	for r in a1 a2 a3; do
		state_of "$r"
		[[ $(jget "$body" '$.asks[1]') == "" ]]      # asked once
	done
	state_of a4
	[[ $STATE == accepted && $(jget "$body" '$.asks[1].status') == pending && $(jget "$body" '$.asks[0].outcome') == ERROR ]]
	# the re-queued originals are never charged; the started one's result comes through adoption
	api POST "/v1/sessions/$SID/adoptions" "{\"session_id\":\"$S1\"}" "$CRED"
	[[ $code == 200 ]]
	local s2=$SID
	SID=$S1
	api POST /v1/results "$(result_body a1)" "$CRED"
	[[ $code == 409 && $(field error) == conflict && $(field state) == requeued && $(field requeued_as) == "$n1" ]]
	api POST /v1/results "$(result_body a2)" "$CRED"
	[[ $code == 200 && $(field status) == recorded ]]
	api GET /admin/summary
	[[ $(num ledger_total) == 1 ]]
	# the new runs go out through the feed
	SID=$s2
	api GET "/v1/sessions/$SID/work" "" "$CRED"
	[[ $(jget "$body" '$.runs[0].run_id') == "$n1" && $(jget "$body" '$.runs[1].run_id') == "$n3" ]]
}

@test "settlement and hand-back never re-queue a run the dispatcher knows started: a start notice, or a report attempt even refused" {
	stop_dispatcher
	start_dispatcher --settle-after-ms 0
	negotiate
	S1=$SID
	local c1=$CRED s1body
	take a1 a2 a3
	accept a1 a2 a3
	api POST "/v1/sessions/$SID/heartbeat" '{"starts":1,"started":["a2"]}' "$CRED"   # a2's start notice
	[[ $code == 200 ]]
	s1body=$(result_body a1)
	handback a3
	negotiate                                   # S1 replaced: its runs are settled through S2
	api POST /v1/results "$s1body" "$c1"        # a1's report, refused (410), kept as an attempt
	[[ $code == 410 ]]
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]]
	api GET "/v1/sessions/$SID/inspections" "" "$CRED"
	local id run
	while IFS='|' read -r id run; do
		printf -v "INSP_$run" '%s' "$id"
	done < <(sqlite3 :memory: "SELECT json_extract(value, '$.inspection_id'), json_extract(value, '$.run_id')
		FROM json_each('$body', '$.inspections')")
	# a (restored) state that says it never started them, or has no record
	reply a1 '{"outcome":"ABSENT","run_id":"a1"}'
	reply a2 "$(found a2 false)"
	for r in a1 a2; do
		state_of "$r"
		[[ $STATE == accepted ]] || fail "$r: $body"
		[[ $(jget "$body" '$.settled') == inspection_started ]] || fail "$r: $body"
		[[ $body == *'"requeued_as":null'* ]] || fail "$r: $body"
	done
	# a3, handed back and never noticed, is re-queued as before
	state_of a3
	[[ $STATE == handed_back ]]
}

@test "settlement: a session that ended without answering leaves the question to the executor's next session" {
	settle_setup 1
	local first=$INSP_a1 s2=$SID c2=$CRED
	# another executor's session is never asked about this one's runs
	negotiate "$XID2"
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 && $(num inspections_pending) == 0 ]]
	SID=$s2 CRED=$c2
	negotiate                                          # S2 ends, unanswered
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 && $(num inspections_pending) == 1 ]]
	api GET "/v1/sessions/$SID/inspections" "" "$CRED"
	INSP_a1=$(jget "$body" '$.inspections[0].inspection_id')
	[[ $(jget "$body" '$.inspections[0].run_id') == a1 && $INSP_a1 != "$first" ]]
	reply a1 '{"outcome":"ABSENT","run_id":"a1"}'
	state_of a1
	[[ $STATE == requeued ]]
}

@test "settlement waits --settle-after-ms after the session's end, so the executor adopts first" {
	negotiate                                          # the default: 30000 ms
	take a1
	accept a1
	negotiate
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 && $(num inspections_pending) == 0 ]]
	run exec-dispatcher --settle-after-ms -1
	[[ $status -eq $EK_USAGE ]]
	run exec-dispatcher --abandon-after-ms 0
	[[ $status -eq $EK_USAGE ]]
}

@test "abandonment: runs no answer settled --abandon-after-ms after their session ended are abandoned, never re-run" {
	stop_dispatcher
	start_dispatcher --settle-after-ms 0
	negotiate
	S1=$SID
	take b1 b2
	accept b1 b2
	negotiate "$XID2"                                  # an executor that never comes back
	take c1
	accept c1
	api DELETE "/v1/sessions/$SID" "" "$CRED"
	negotiate                                          # b1, b2: asked through this session
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $(num inspections_pending) == 2 ]]
	api GET "/v1/sessions/$SID/inspections" "" "$CRED"
	# shellcheck disable=SC2034 # read by reply, as INSP_$1
	INSP_b1=$(jget "$body" '$.inspections[0].inspection_id')
	# shellcheck disable=SC2034
	INSP_b2=$(jget "$body" '$.inspections[1].inspection_id')
	reply b1 "$(found b1 true)"                        # settled: it stays
	# the same store, a dispatcher that gives up at once
	stop_dispatcher
	start_dispatcher --settle-after-ms 0 --abandon-after-ms 1
	wait_until '[[ $(summary_of "$.runs.abandoned") == 2 ]]'
	[[ $(summary_of '$.settled.abandoned') == 2 && $(summary_of '$.runs.queued') == 0 ]]
	state_of b2
	[[ $STATE == abandoned && $(jget "$body" '$.settled') == abandoned && $(jget "$body" '$.requeued_as') == "" ]]
	state_of c1
	[[ $STATE == abandoned ]]
	state_of b1
	[[ $STATE == accepted && $(jget "$body" '$.settled') == inspection_started ]]
	# a late answer changes nothing; a late result is refused
	reply b2 '{"outcome":"ABSENT","run_id":"b2"}'
	state_of b2
	[[ $STATE == abandoned && $(summary_of '$.runs.queued') == 0 ]]
	api POST "/v1/sessions/$SID/adoptions" "{\"session_id\":\"$S1\"}" "$CRED"
	[[ $code == 200 ]]
	SID=$S1
	api POST /v1/results "$(result_body b2)" "$CRED"
	[[ $code == 409 && $(field error) == conflict && $(field state) == abandoned ]]
	api POST /v1/results "$(result_body b1)" "$CRED"
	[[ $code == 200 && $(field status) == recorded ]]
}

@test "adoption: a revoked session is never adopted; closed, expired and replaced ones are" {
	local verb old
	for verb in revoke expire replace close; do
		negotiate
		old=$SID
		if [[ $verb == close ]]; then
			api DELETE "/v1/sessions/$SID" "" "$CRED"
		else
			api POST "/admin/sessions/$SID/$verb"
		fi
		[[ $code == 200 ]]
		negotiate
		api POST "/v1/sessions/$SID/adoptions" "{\"session_id\":\"$old\"}" "$CRED"
		if [[ $verb == revoke ]]; then
			[[ $code == 409 && $(field error) == revoked ]]
		else
			[[ $code == 200 && $(field status) == adopted ]]
		fi
	done
	api GET /admin/sessions
	[[ $(jget "$body" '$.sessions[0].adopted_by') == "" ]]
}

# hold_store_lock: another process (sqlite3) takes the store's write lock
# and keeps it until $BATS_TEST_TMPDIR/release exists (bounded); LOCK_PID.
hold_store_lock() {
	local t=$BATS_TEST_TMPDIR
	{
		printf '.timeout %s\nBEGIN IMMEDIATE;\n.shell touch %s/locked\n' "$WAIT_MS" "$t"
		i=0
		while [[ ! -e $t/release ]] && ((i++ < WAIT_S * 10)); do sleep 0.1; done
		printf 'COMMIT;\n'
	} | sqlite3 "$t/disp.db" &
	LOCK_PID=$!
	wait_until '[[ -e $t/locked ]]' || fail "sqlite3 did not take the lock"
}

@test "reads take no write lock: summary, runs and sessions answer while another process holds the store's; a lapsed lease reads as expired" {
	negotiate
	take r1
	admin POST "/admin/sessions/$SID/lease" '{"ms":5000}' >/dev/null
	hold_store_lock
	# nothing can write the expiry now; the read evaluates it
	wait_until '[[ $(admin GET /admin/sessions) == *"\"status\":\"expired\""* ]]' ||
		fail "the lapsed lease did not read as expired: $(admin GET /admin/sessions)"
	[[ $(sqlite3 -readonly "$BATS_TEST_TMPDIR/disp.db" "SELECT status FROM sessions") == current ]]
	local out
	out=$(admin GET /admin/summary)
	[[ $out == *'"incarnation":'* && $out == *'"offered":1'* ]] || fail "summary: $out"
	out=$(admin GET /admin/runs)
	[[ $out == *'"run_id":"r1"'* ]] || fail "runs: $out"
	out=$(admin GET /admin/runs/r1)
	[[ $out == *'"state":"offered"'* ]] || fail "run: $out"
	# a write waits for the lock, and expires the lease once it has it
	touch "$BATS_TEST_TMPDIR/release"
	wait "$LOCK_PID"
	wait_until '[[ $(sqlite3 -readonly "$BATS_TEST_TMPDIR/disp.db" "SELECT status FROM sessions") == expired ]]'
}

# post_bg RUN_ID: report RUN_ID's result under SID/CRED in the background,
# its status in $BATS_TEST_TMPDIR/code.RUN_ID (nothing if never answered);
# its pid appended to BG_PIDS.  The credential's header file is written
# once: rewriting it would race the requests still reading it.
post_bg() {
	[[ -s $BATS_TEST_TMPDIR/bgauth ]] || printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/bgauth"
	result_body "$1" >"$BATS_TEST_TMPDIR/res.$1"
	curl -sS --noproxy '*' --max-time "$WAIT_S" -o "$BATS_TEST_TMPDIR/out.$1" -w "%{http_code}" \
		-H @"$BATS_TEST_TMPDIR/bgauth" --data-binary @"$BATS_TEST_TMPDIR/res.$1" \
		"$DISP_URL/v1/results" >"$BATS_TEST_TMPDIR/code.$1" 2>/dev/null &
	BG_PIDS+=($!)
}

# store_write_locked: someone (a batch being recorded) holds the store's
# write lock now.
store_write_locked() {
	if sqlite3 -cmd '.timeout 1' "$BATS_TEST_TMPDIR/disp.db" 'BEGIN IMMEDIATE; ROLLBACK;' 2>/dev/null; then
		return 1
	fi
}

@test "group commit: kill -9 mid-batch, and every result answered 200 is in the store; results that arrive together share a commit" {
	local runs=(r1 r2 r3 r4 r5 r6 r7 r8 r9 r10) r answered=0 lost=0 out
	BG_PIDS=()
	negotiate
	take "${runs[@]}"
	# each of the next two batches is held 3 s, recorded and uncommitted
	admin POST /admin/faults '{"kind":"delay","count":2,"delay_ms":3000,"path":"/store/commit"}' >/dev/null
	post_bg r1
	wait_until store_write_locked || fail "r1's batch never held the lock"
	for r in "${runs[@]:1}"; do post_bg "$r"; done
	# r1 answered: its batch committed, and the next one is being held
	wait_until '[[ $(<"$BATS_TEST_TMPDIR/code.r1") == 200 ]]' || fail "r1: $(<"$BATS_TEST_TMPDIR/code.r1")"
	kill -KILL "$DISP_PID"
	wait "$DISP_PID" || true
	wait "${BG_PIDS[@]}" || true
	start_dispatcher
	for r in "${runs[@]}"; do
		out=$(admin GET "/admin/runs/$r")
		if [[ $(<"$BATS_TEST_TMPDIR/code.$r") == 200 ]]; then
			answered=$((answered + 1))
			[[ $out == *'"record_id":'[0-9]* ]] || fail "$r was answered 200 but is not recorded: $out"
		elif [[ $out == *'"record_id":null'* ]]; then
			lost=$((lost + 1))
		fi
	done
	[[ $answered -ge 1 ]]
	[[ $lost -ge 1 ]] || fail "the kill did not land mid-batch"   # an unanswered batch, not kept
	# the lost ones again, together: while r1's commit is held, the others
	# arrive, wait, and share the next commit
	BG_PIDS=()
	admin POST /admin/faults '{"kind":"delay","count":1,"delay_ms":3000,"path":"/store/commit"}' >/dev/null
	post_bg r1
	wait_until store_write_locked || fail "r1's batch never held the lock"
	for r in "${runs[@]:1}"; do post_bg "$r"; done
	wait "${BG_PIDS[@]}"
	for r in "${runs[@]}"; do
		[[ $(<"$BATS_TEST_TMPDIR/code.$r") == 200 ]] || fail "$r: $(<"$BATS_TEST_TMPDIR/code.$r") $(cat "$BATS_TEST_TMPDIR/out.$r")"
		[[ $(admin GET "/admin/runs/$r") == *'"record_id":'[0-9]* ]] || fail "$r is not recorded"
	done
	out=$(admin GET /admin/stats)
	body=$out
	[[ $(num commit_results) == 10 ]] || fail "$out"
	[[ $(num commit_batch_max) -ge 2 ]] || fail "no batch held two results: $out"
	[[ $(num commit_batches) -lt 10 ]] || fail "$out"
}

# lease_at: SID's stored lease end (ms), as the store holds it.
lease_at() {
	sqlite3 -readonly "$BATS_TEST_TMPDIR/disp.db" "SELECT lease_expires_ms FROM sessions WHERE session_id='$SID'"
}

@test "a heartbeat with nothing to write answers while a result's commit is held, renewing the lease only once the store is free; one that brings start notices is written" {
	BG_PIDS=()
	negotiate
	take r1 r2 r3
	api POST "/v1/sessions/$SID/heartbeat" '{"starts":0,"started":[]}' "$CRED"   # the count, stored
	[[ $code == 200 ]] || fail "$code $body"
	# less than half of the hour's lease left, more than a quarter: due,
	# renewed by a heartbeat that finds the store free
	api POST "/admin/sessions/$SID/lease" '{"ms":1000000}'
	[[ $code == 200 ]]
	local lease
	lease=$(lease_at)
	# r1's batch holds the store's write lock 5 s, recorded and uncommitted
	admin POST /admin/faults '{"kind":"delay","count":1,"delay_ms":5000,"path":"/store/commit"}' >/dev/null
	post_bg r1
	wait_until store_write_locked || fail "r1's batch never held the lock"
	api POST "/v1/sessions/$SID/heartbeat" '{"starts":0,"started":[]}' "$CRED"
	[[ $code == 200 && $(field status) == current ]] || fail "$code $body"
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 && $(num inspections_pending) == 0 ]] || fail "$code $body"
	# both answered while r1's commit is still held: r1 has no answer yet
	[[ ! -s $BATS_TEST_TMPDIR/code.r1 ]] || fail "r1 was answered first: $(<"$BATS_TEST_TMPDIR/code.r1")"
	store_write_locked || fail "the commit is no longer held"
	wait "${BG_PIDS[@]}"
	[[ $(<"$BATS_TEST_TMPDIR/code.r1") == 200 ]]
	[[ $(lease_at) == "$lease" ]] || fail "a heartbeat wrote the lease while the store was held: $lease -> $(lease_at)"
	# the store is free: the next heartbeat renews it, to a whole lease
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]] || fail "$code $body"
	(($(lease_at) > lease + 2000000)) || fail "not renewed: $lease -> $(lease_at)"
	# less than a quarter left: a heartbeat renews it, if it must wait for
	# a held commit to do so
	api POST "/admin/sessions/$SID/lease" '{"ms":500000}'
	[[ $code == 200 ]]
	lease=$(lease_at)
	admin POST /admin/faults '{"kind":"delay","count":1,"delay_ms":3000,"path":"/store/commit"}' >/dev/null
	post_bg r3
	wait_until store_write_locked || fail "r3's batch never held the lock"
	api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
	[[ $code == 200 ]] || fail "$code $body"
	(($(lease_at) > lease + 2000000)) || fail "not renewed: $lease -> $(lease_at)"
	wait "${BG_PIDS[@]}"
	# a start count the dispatcher has not seen, and a notice: written
	api POST "/v1/sessions/$SID/heartbeat" '{"starts":3,"started":["r2"]}' "$CRED"
	[[ $code == 200 ]] || fail "$code $body"
	[[ $(sqlite3 -readonly "$BATS_TEST_TMPDIR/disp.db" "SELECT starts FROM executor_starts WHERE executor_id='$XID'") == 3 ]]
	[[ $(sqlite3 -readonly "$BATS_TEST_TMPDIR/disp.db" "SELECT session_id FROM run_starts WHERE run_id='r2'") == "$SID" ]]
	# a lower count is still refused, a wrong credential too
	api POST "/v1/sessions/$SID/heartbeat" '{"starts":2,"started":[]}' "$CRED"
	[[ $code == 409 && $(field error) == state_restored ]] || fail "$code $body"
	api POST "/v1/sessions/$SID/heartbeat" '{"starts":3,"started":[]}' "not-the-credential"
	[[ $code == 401 ]] || fail "$code $body"
}

@test "a heartbeat renews the lease once less than half of it is left, and a session beating every heartbeat_ms never lapses" {
	stop_dispatcher
	start_dispatcher_in "$BATS_TEST_TMPDIR" --quiet --lease-ms 8000 --heartbeat-ms 400
	negotiate
	local i first last renewals=0 prev
	first=$(lease_at)
	prev=$first
	# beats every heartbeat_ms for one and a half leases and more: every
	# one answers current, and the stored lease end moves only now and then
	for ((i = 0; i < 30; i++)); do
		api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
		[[ $code == 200 && $(field status) == current ]] || fail "beat $i: $code $body"
		last=$(lease_at)
		[[ $last == "$prev" ]] || renewals=$((renewals + 1))
		prev=$last
		sleep 0.4
	done
	((renewals >= 2)) || fail "renewed $renewals times in 30 beats"
	((renewals < 20)) || fail "renewed at $renewals of 30 beats: the heartbeats do not read"
	# a lease told to end within half a lease, or within a quarter, is
	# renewed by the next beat
	for i in 3000 1000; do
		api POST "/admin/sessions/$SID/lease" "{\"ms\":$i}"
		[[ $code == 200 ]]
		prev=$(lease_at)
		api POST "/v1/sessions/$SID/heartbeat" "" "$CRED"
		[[ $code == 200 ]]
		(($(lease_at) >= prev + 8000 - i)) || fail "$i ms left: not renewed: $prev -> $(lease_at)"
	done
}

# report_until_taken RUN_ID: report RUN_ID's result until it is answered
# other than 429 (at most WAIT_TRIES times, 0.1 s apart, Retry-After
# aside); the last status in $BATS_TEST_TMPDIR/code.RUN_ID.
report_until_taken() {
	local i code
	for ((i = 0; i < WAIT_TRIES; i++)); do
		code=$(curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -w '%{http_code}' \
			-H @"$BATS_TEST_TMPDIR/bgauth" --data-binary @"$BATS_TEST_TMPDIR/res.$1" \
			"$DISP_URL/v1/results" 2>/dev/null)
		[[ $code == 429 ]] || break
		sleep 0.1
	done
	printf '%s' "$code" >"$BATS_TEST_TMPDIR/code.$1"
}

@test "the adaptive gate: results slowed to 200 ms, the limit falls and sheds, heartbeats stay fast, every result is recorded" {
	local fast=() slow=() r pids=() i t worst=0 out limit
	for i in $(seq 20); do fast+=("w$i"); done
	for i in $(seq 60); do slow+=("s$i"); done
	negotiate
	take "${fast[@]}" "${slow[@]}"
	# results at the dispatcher's own pace: the latency it takes unloaded
	for r in "${fast[@]}"; do
		api POST /v1/results "$(result_body "$r")" "$CRED"
		[[ $code == 200 ]] || fail "$r: $code $body"
	done
	body=$(admin GET /admin/stats)
	[[ $(field gate) == adaptive ]]
	limit=$(num gate_limit)
	[[ $limit -ge 8 && $(num min_rtt_us) -gt 0 ]] || fail "$body"
	# now every result takes 200 ms more
	admin POST /admin/faults '{"kind":"delay","count":100000,"delay_ms":200}' >/dev/null
	printf 'Authorization: Bearer %s\n' "$CRED" >"$BATS_TEST_TMPDIR/bgauth"
	for r in "${slow[@]}"; do
		result_body "$r" >"$BATS_TEST_TMPDIR/res.$r"
		report_until_taken "$r" &
		pids+=($!)
	done
	# heartbeats meanwhile: exempt, and fast
	for i in $(seq 20); do
		t=$(curl -sS --noproxy '*' --max-time "$WAIT_S" -o /dev/null -w '%{http_code} %{time_total}' \
			-X POST -H @"$BATS_TEST_TMPDIR/bgauth" "$DISP_URL/v1/sessions/$SID/heartbeat")
		[[ ${t% *} == 200 ]] || fail "heartbeat $i: $t"
		t=${t#* }
		t=$((10#${t%.*} * 1000 + 10#$(printf '%.3s' "${t#*.}000")))
		((t > worst)) && worst=$t
		sleep 0.1
	done
	wait "${pids[@]}"
	((worst < 1000)) || fail "a heartbeat took $worst ms"
	for r in "${slow[@]}"; do
		[[ $(<"$BATS_TEST_TMPDIR/code.$r") == 200 ]] || fail "$r: $(<"$BATS_TEST_TMPDIR/code.$r")"
		out=$(admin GET "/admin/runs/$r")
		[[ $out == *'"record_id":'[0-9]* ]] || fail "$r is not recorded: $out"
	done
	body=$(admin GET /admin/stats)
	[[ $(num gate_limit_lowest) -lt $limit ]] || fail "the limit did not fall: $body"
	[[ $(num gated_429) -ge 1 ]] || fail "the gate never shed: $body"
	[[ $(num max_inflight) == 0 && $(num max_rate) == 0 ]]   # no cap given
}

@test "backup: a consistent copy of the store while it serves; restored beside the live WAL it is refused, both untouched; with that WAL moved away it serves what the copy held" {
	local d=$BATS_TEST_TMPDIR sums
	submit b1
	[[ $code == 200 ]]
	run exec-dispatcher --store "$d/disp.db" backup "$d/copy.db"
	assert_success
	[ "$(stat -c %a "$d/copy.db")" = 600 ]
	run exec-dispatcher --store "$d/disp.db" backup "$d/copy.db"
	[ "$status" -eq "$EK_CANTCREAT" ]                       # never over a file
	run exec-dispatcher --store "$d/disp.db" --lease-ms 5 backup "$d/other.db"
	[ "$status" -eq "$EK_USAGE" ]
	submit b2                                                # after the copy
	[[ $code == 200 ]]
	kill -KILL "$DISP_PID"                                    # its WAL stays
	wait "$DISP_PID" || true
	DISP_PID=
	[ -s "$d/disp.db-wal" ]
	cp "$d/copy.db" "$d/disp.db"                             # the restore, WAL left beside it
	sums=$(sha256sum "$d/disp.db" "$d/disp.db-wal")
	run timeout "$WAIT_S" exec-dispatcher --port 0 --store "$d/disp.db" --quiet
	[ "$status" -eq "$EK_DATAERR" ] || fail "a store beside another's WAL: $status $output"
	assert_output --partial "belongs to another database"
	[ "$(sha256sum "$d/disp.db" "$d/disp.db-wal")" = "$sums" ]
	mv "$d/disp.db-wal" "$d/disp.db-wal.other"
	rm -f "$d/disp.db-shm"
	start_dispatcher
	api GET /admin/runs/b1
	[[ $code == 200 ]]
	api GET /admin/runs/b2
	[[ $code == 404 ]]                                       # not in the copy
}

# dsubmit ARG...: exec-dispatcher submit to the test's dispatcher, found by
# its port file, with the token beside its store.
dsubmit() {
	exec-dispatcher submit --port-file "$BATS_TEST_TMPDIR/disp.port" \
		--store "$BATS_TEST_TMPDIR/disp.db" "$@"
}

@test "submit: a run without JSON, as the dispatcher stores it; the same id and spec again is no new run; another spec is 65" {
	run --separate-stderr dsubmit --id r1 --txn-id t1 --env A=1 --env B=x=y --cwd /tmp \
		--timeout 1500ms --due @4000000000 -- /bin/sh -c 'echo "$A"; exit 3'
	assert_success
	assert_output r1
	api GET '/admin/runs/r1?reveal_env=1'
	[ "$code" = 200 ] || fail "$code $body"
	# shellcheck disable=SC2016 # $A is the guest's, not ours
	[[ $body == *'"spec":{"args":["-c","echo \"$A\"; exit 3"],"cwd":"/tmp","due_at":4000000000000,"env":{"A":"1","B":"x=y"},"program":"/bin/sh","run_id":"r1","timeout_ms":1500,"txn_id":"t1"}'* ]] ||
		fail "spec: $body"
	# again, the same: exit 0, said on stderr, nothing new
	run --separate-stderr dsubmit --id r1 --txn-id t1 --env A=1 --env B=x=y --cwd /tmp \
		--timeout 1500ms --due @4000000000 -- /bin/sh -c 'echo "$A"; exit 3'
	assert_success
	assert_output r1
	[[ $stderr == *"already submitted with this spec"* ]] || fail "stderr: $stderr"
	# the same id, another spec: refused, the stored spec unchanged
	run --separate-stderr dsubmit --id r1 -- /bin/true
	[ "$status" -eq "$EK_DATAERR" ]
	[ -z "$output" ]
	[[ $stderr == *"run 'r1': already submitted with a different spec"* ]] || fail "stderr: $stderr"
	api GET /admin/runs
	[ "$(grep -o '"run_id"' <<<"$body" | wc -l)" = 1 ] || fail "$body"
	# without --id: a new run each time, its id printed; --json says where it went
	run --separate-stderr dsubmit --json -- /bin/true
	assert_success
	[[ $output =~ ^\{\"run_id\":\"(run-[0-9a-f]{16})\",\"txn_id\":\"run-[0-9a-f]{16}\",\"dispatcher\":\"$DISP_URL\",\"duplicate\":false\}$ ]] ||
		fail "json: $output"
	api GET "/admin/runs/${BASH_REMATCH[1]}"
	[ "$code" = 200 ]
}

@test "submit: an executor takes and runs what was submitted" {
	open_session
	run dsubmit --id hello -- /bin/echo hello from submit
	assert_success
	exec-accept --from-dispatcher >/dev/null
	run exec-run start --wait
	assert_success
	assert_output --partial "hello exited 0: delivered"
	[ "$(cat "$EXEC_STATE_DIR/out/hello.stdout")" = "hello from submit" ]
}

@test "submit: unreachable 69, token refused 78, no token 66, invalid spec 65 with nothing sent, usage 64" {
	local port
	# nobody listens on a port the stopped dispatcher held
	port=$(cat "$BATS_TEST_TMPDIR/disp.port")
	run --separate-stderr exec-dispatcher submit --port 1 --store "$BATS_TEST_TMPDIR/disp.db" -- /bin/true
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[[ $stderr == "exec-dispatcher: http://127.0.0.1:1: dispatcher unreachable: "* ]] || fail "$stderr"
	# another store's token
	(umask 077 && printf '%064d\n' 7 >"$BATS_TEST_TMPDIR/other.token")
	run --separate-stderr dsubmit --admin-token-file "$BATS_TEST_TMPDIR/other.token" -- /bin/true
	[ "$status" -eq "$EK_UNSAFE" ] || fail "status $status: $stderr"
	[[ $stderr == *"the admin token was refused (403)"* ]] || fail "$stderr"
	# no token at all: never made by a client
	run --separate-stderr exec-dispatcher submit --port "$port" --store "$BATS_TEST_TMPDIR/none.db" -- /bin/true
	[ "$status" -eq "$EK_NOINPUT" ] || fail "status $status: $stderr"
	[[ $stderr == *"cannot read the admin token '$BATS_TEST_TMPDIR/none.db.admin-token'"* ]] || fail "$stderr"
	[ ! -e "$BATS_TEST_TMPDIR/none.db.admin-token" ]
	# a token others may read is refused before it is sent
	chmod 644 "$BATS_TEST_TMPDIR/other.token"
	run --separate-stderr dsubmit --admin-token-file "$BATS_TEST_TMPDIR/other.token" -- /bin/true
	[ "$status" -eq "$EK_UNSAFE" ] || fail "status $status: $stderr"
	# invalid by the executor's rules: refused here, nothing submitted
	run --separate-stderr dsubmit --id bad1 --env EXEC_X=1 -- /bin/true
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status: $stderr"
	[[ $stderr == *"run 'bad1': invalid: field 'env'"* ]] || fail "$stderr"
	api GET /admin/runs/bad1
	[ "$code" = 404 ]
	# usage
	run dsubmit --id 'no spaces' -- /bin/true
	[ "$status" -eq "$EK_USAGE" ]
	run dsubmit --cwd relative -- /bin/true
	[ "$status" -eq "$EK_USAGE" ]
	run dsubmit --due soon -- /bin/true
	[ "$status" -eq "$EK_USAGE" ]
	run dsubmit --timeout 0s -- /bin/true
	[ "$status" -eq "$EK_USAGE" ]
	run dsubmit
	[ "$status" -eq "$EK_USAGE" ]
	run exec-dispatcher submit -- /bin/true
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "submit needs the dispatcher"
	run dsubmit --lease-ms 5 -- /bin/true
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial -- "--lease-ms does not go with submit"
	run exec-dispatcher --id r9
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial -- "--id goes with submit"
	api GET /admin/runs
	[ "$body" = '{"runs":[]}' ] || fail "$body"
}
