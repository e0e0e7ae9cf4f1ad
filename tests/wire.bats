#!/usr/bin/env bats
# The plain-HTTP client (libcommon/wire.c): http:// goes over a socket of
# its own, without loading libcurl; https:// still goes through libcurl.
# The answers are the real exec-dispatcher's, its lies included.

load helpers

ms() { echo $(($(date +%s%N) / 1000000)); }

# retain PREFIX N: N retained results PREFIX1..PREFIXN of the current
# session, their first reports refused by a 503.
retain() {
	local i specs=()
	for i in $(seq 1 "$2"); do specs+=("$(spec "$1$i")"); done
	submit_and_accept "${specs[@]}"
	fault 5xx 100000
	exec-run start --wait --slots 8 --budget-ms 100 >/dev/null
	admin DELETE /admin/faults >/dev/null
	[ "$(sql "SELECT count(*) FROM results WHERE run_id LIKE '$1%'")" = "$2" ]
}

# reports PREFIX N: the reports the dispatcher holds for PREFIX1..PREFIXN.
reports() {
	local i n=0
	for i in $(seq 1 "$2"); do n=$((n + $(disp_reports "$1$i"))); done
	echo "$n"
}

# traced FILE CALLS CMD...: CMD under strace -f, the CALLS into FILE.
# (LeakSanitizer cannot work under ptrace: leaks are checked elsewhere.)
traced() {
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -e trace="$2" -o "$1" "${@:3}"
}

# loads_curl FILE: the strace in FILE opened libcurl.
loads_curl() { grep -q 'libcurl\.so' "$1"; }

negotiation() {
	printf '{"incarnation":"%s","session_id":"%s","credential":"%s","lease_ms":30000,"heartbeat_ms":2000}' \
		inc-0123456789abcdef ses-0123456789abcdef 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
}

@test "a heartbeat over http:// loads no libcurl; over https:// it does, and fails clearly (69)" {
	command -v strace >/dev/null || skip "no strace"
	start_dispatcher
	open_session
	traced "$BATS_TEST_TMPDIR/plain" openat exec-session heartbeat >/dev/null ||
		fail "heartbeat over http:// failed"
	run ! loads_curl "$BATS_TEST_TMPDIR/plain"
	run traced "$BATS_TEST_TMPDIR/tls" openat exec-session open --dispatcher "${DISP_URL/http:/https:}"
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "exit $status: $output"
	assert_output --partial "dispatcher unavailable"
	loads_curl "$BATS_TEST_TMPDIR/tls" || fail "https:// did not go through libcurl"
}

@test "an answer in chunks (Transfer-Encoding: chunked) is read whole" {
	start_dispatcher
	local lie
	lie=$(jq -nc --arg b "$(negotiation)" '{kind:"lie",path:"/v1/sessions",status:201,body:$b,chunked:true,count:2}')
	admin POST /admin/faults "$lie" >/dev/null
	# the dispatcher does send it in chunks
	curl -sS -D "$BATS_TEST_TMPDIR/head" -o /dev/null -X POST "$DISP_URL/v1/sessions" -d '{}'
	grep -qi '^transfer-encoding: chunked' "$BATS_TEST_TMPDIR/head" || fail "$(cat "$BATS_TEST_TMPDIR/head")"
	run exec-session open --dispatcher "$DISP_URL"
	assert_success
	[ "$(current_session)" = ses-0123456789abcdef ]
}

@test "a drain goes over one kept connection" {
	command -v strace >/dev/null || skip "no strace"
	start_dispatcher
	open_session
	retain k 6
	run traced "$BATS_TEST_TMPDIR/trace" connect exec-reconcile --drain
	assert_success
	[ "$(sql "SELECT count(*) FROM receipts WHERE run_id LIKE 'k%'")" = 6 ]
	[ "$(grep -c "sin_port=htons(${DISP_URL##*:})" "$BATS_TEST_TMPDIR/trace")" = 1 ] ||
		fail "$(grep connect "$BATS_TEST_TMPDIR/trace")"
}

@test "a kept connection that dies unanswered is tried once more on a fresh one; a fresh one is not" {
	local i
	start_dispatcher
	open_session
	retain c 3
	before=$(reports c 3)
	# the second report goes on the connection the first one kept, and
	# meets a reset: sent again on a new connection, within the same attempt
	fault delay 1 0
	fault reset 1 0
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT count(*) FROM results WHERE run_id LIKE 'c%'")" = 0 ] || fail "$output"
	[ "$(grep -c '^delivered c[123] (1 attempt)' <<<"$output")" = 3 ] || fail "$output"
	[ "$(reports c 3)" = $((before + 4)) ]   # three recorded, one reset
	# the try on the fresh connection sent the same bytes (SPEC: every
	# attempt sends byte-identical content)
	for i in 1 2 3; do
		[ "$(disp_hashes "c$i" | sort -u | wc -l)" = 1 ] || fail "c$i: $(disp_hashes "c$i")"
	done
	# the first request of a process has no kept connection: its reset is
	# a transient failure, and the pass's next attempt delivers
	retain f 1
	fault reset 1 0 /v1/
	run exec-reconcile
	assert_success
	assert_output --partial "delivered f1 (2 attempts)"
}

@test "a dispatcher that hangs costs the request its timeout, not more" {
	start_dispatcher
	open_session
	fault hang 1 60000 /v1/sessions
	t0=$(ms)
	run exec-session heartbeat --timeout-ms 300
	elapsed=$(($(ms) - t0))
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "exit $status: $output"
	assert_output --partial "no answer in time"
	[ "$elapsed" -lt 5000 ] || fail "took $elapsed ms"
}
