#!/usr/bin/env bats
# A dispatcher that lies: ids of the wrong shape are refused (76) before
# they can become part of a request path, and nothing a dispatcher says
# reaches an operator's terminal raw — no escape sequence, no C1 control,
# no forged line.  The real exec-dispatcher tells the lies (fault "lie").

load helpers

HEX64=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef

# lie PATH STATUS BODY [COUNT]: the next COUNT (1) requests to PATH are
# answered STATUS BODY, verbatim.
lie() {
	admin POST /admin/faults "$(jq -nc --arg p "$1" --argjson s "$2" --arg b "$3" --argjson c "${4:-1}" \
		'{kind:"lie",path:$p,status:$s,body:$b,count:$c}')" >/dev/null
}

# no_controls FILE: fails when FILE holds a C0 control other than newline,
# DEL, or a C1 control (raw or UTF-8 encoded).
no_controls() {
	if LC_ALL=C grep -qP '[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|[\x80-\x9f]' "$1"; then
		return 1
	fi
}

negotiation() {
	printf '{"incarnation":"%s","session_id":"%s","credential":"%s","lease_ms":30000,"heartbeat_ms":2000}' "$1" "$2" "$3"
}

@test "a dispatcher-issued id of the wrong shape is refused (76) and nothing is stored" {
	start_dispatcher
	local inc=inc-0123456789abcdef sid=ses-0123456789abcdef bad
	for bad in "session_id:.." "session_id:." "session_id:ses-../../v1" "incarnation:inc-x" \
		"credential:abc" "credential:$HEX64/.."; do
		case ${bad%%:*} in
		session_id) lie /v1/sessions 201 "$(negotiation "$inc" "${bad#*:}" "$HEX64")" ;;
		incarnation) lie /v1/sessions 201 "$(negotiation "${bad#*:}" "$sid" "$HEX64")" ;;
		credential) lie /v1/sessions 201 "$(negotiation "$inc" "$sid" "${bad#*:}")" ;;
		esac
		run exec-session open --dispatcher "$DISP_URL"
		[ "$status" -eq "$EK_PROTOCOL" ] || fail "$bad: exit $status: $output"
		assert_output --partial "its ${bad%%:*} is not"
		[ "$(sql "SELECT count(*) FROM sessions")" = 0 ]
	done
	# the shapes the protocol gives are accepted
	lie /v1/sessions 201 "$(negotiation "$inc" "$sid" "$HEX64")"
	run exec-session open --dispatcher "$DISP_URL"
	assert_success
	[ "$(current_session)" = "$sid" ]
}

@test "a malformed inspection id in the relay list is refused before it becomes a path" {
	start_dispatcher
	open_session
	local sid
	sid=$(current_session)
	lie "/v1/sessions/$sid/inspections" 200 "{\"inspections\":[{\"inspection_id\":\"..\",\"run_id\":\"r1\",\"session_id\":\"$sid\"}]}"
	run exec-inspect relay
	[ "$status" -eq "$EK_PROTOCOL" ]
	run admin GET /admin/summary                   # nothing was answered anywhere
	assert_success
}

@test "escape sequences in a dispatcher's words never reach the terminal: report, reconcile, open, heartbeat" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec r1)"
	local evil out=$BATS_TEST_TMPDIR/out
	# raw bytes, as a dispatcher may send them: OSC title, clear screen,
	# the one-character CSI (U+009B) and a newline that would forge a line
	evil=$(printf '{"error":"invalid","detail":"\033]0;pwned\007\033[2J\302\23331m\nexec-loop: forged line"}')
	# a refusal's detail, through the supervisor, exec-report and a pass
	lie /v1/results 400 "$evil" 3
	exec-run start --wait >"$out" 2>&1 || true
	no_controls "$out" || fail "exec-run: $(od -c "$out" | head)"
	grep -q 'pwned' "$out"                          # said, but defanged
	grep -q '?\]0;pwned??\[2J?31m?exec-loop: forged line' "$out"
	run grep -c '^exec-loop: forged line' "$out"
	assert_output 0
	# a transient error's detail: exec-report and exec-reconcile print it
	submit_and_accept "$(spec r2)"
	fault 5xx 3
	exec-run start --wait >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	lie /v1/results 503 "$evil" 3
	exec-report r2 >"$out" 2>&1 || true
	no_controls "$out" || fail "exec-report: $(od -c "$out" | head)"
	lie /v1/results 503 "$evil" 3
	exec-reconcile >"$out" 2>&1 || true
	no_controls "$out" || fail "exec-reconcile: $(od -c "$out" | head)"
	# an error answer to a negotiation and to a heartbeat
	lie "/v1/sessions/$(current_session)/heartbeat" 400 "$evil"
	exec-session heartbeat >"$out" 2>&1 || true
	no_controls "$out" || fail "heartbeat: $(od -c "$out" | head)"
	lie /v1/sessions 400 "$evil"
	exec-session open --dispatcher "$DISP_URL" >"$out" 2>&1 || true
	no_controls "$out" || fail "open: $(od -c "$out" | head)"
}

@test "the dispatcher's request log never shows a client's escape sequences raw" {
	local dir=$BATS_TEST_TMPDIR/d
	mkdir "$dir"
	start_dispatcher_in "$dir"
	curl -sS --max-time "$WAIT_S" -o /dev/null "$DISP_URL/x%1B%5D0%3Bpwned%07%C2%9B2J" || true
	stop_dispatcher
	grep -q 'pwned' "$dir/disp.log"
	no_controls "$dir/disp.log" || fail "$(od -c "$dir/disp.log" | head)"
}

@test "the sanitizer keeps valid UTF-8 and replaces C0, C1, DEL and broken bytes" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec u1)"
	lie /v1/results 400 "$(printf '{"error":"invalid","detail":"café ✓ \001\177\302\205 end"}')" 3
	run exec-run start --wait
	assert_output --partial 'café ✓ ??? end'
}

@test "a feed's invalid run id never reaches the terminal or the loop's log raw: ESC[31m and BEL become '?'" {
	start_dispatcher
	open_session
	local out=$BATS_TEST_TMPDIR/out sid
	sid=$(current_session)
	# the JSON escapes decode to ESC and BEL in the run id the feed hands out
	lie "/v1/sessions/$sid/work" 200 \
		'{"runs":[{"run_id":"\u001b[31mred\u0007x","txn_id":"t1","program":"/bin/true","args":[]}]}'
	exec-accept --from-dispatcher >"$out" 2>&1 || true
	grep -q 'red' "$out"                              # said, but defanged
	no_controls "$out" || fail "exec-accept: $(od -c "$out" | head)"
	grep -q '?\[31mred?x' "$out"
	# the loop logs what exec-accept printed (its new session's first
	# requests are answered with the lie: the heartbeat, then the feed)
	lie "/v1/sessions/" 200 \
		'{"runs":[{"run_id":"\u001b[31mred\u0007x","txn_id":"t1","program":"/bin/true","args":[]}]}' 3
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --log-level debug 2>"$out" 3>&- &
	local loop=$!
	wait_until 'grep -q "red" "$BATS_TEST_TMPDIR/out"'
	kill -TERM "$loop"
	wait "$loop" || true
	no_controls "$out" || fail "exec-loop: $(od -c "$out" | head)"
}

@test "bidirectional overrides and isolates never reach the terminal: show, and logs on a terminal" {
	start_dispatcher
	open_session
	# U+202E (right-to-left override) in the program, an argument and the output;
	# U+2066 (an isolate), U+200F (a mark) and U+061C too
	local rlo=$'\u202e' lri=$'\u2066' rlm=$'\u200f' alm=$'\u061c' out=$BATS_TEST_TMPDIR/out
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	cp /bin/echo "$BATS_TEST_TMPDIR/bin/echo${rlo}txt.exe"
	submit_and_accept "$(jq -nc --arg p "$BATS_TEST_TMPDIR/bin/echo${rlo}txt.exe" \
		--arg a "gnp.${rlo}exe ${lri}x${rlm}y${alm}z" \
		'{run_id:"b1", txn_id:"t-b1", program:$p, args:[$a]}')"
	exec-run start --wait >/dev/null
	for view in "show b1" "logs b1"; do
		# shellcheck disable=SC2086 # view is a command and its operands
		script -qec "exec-inspect $view" /dev/null >"$out" 2>&1 || true
		grep -q 'gnp' "$out" || fail "$view: $(cat "$out")"
		if LC_ALL=C grep -qP '\xe2\x80\xae|\xe2\x81\xa6|\xe2\x80\x8f|\xd8\x9c' "$out"; then
			fail "exec-inspect $view: $(od -c "$out" | head -20)"
		fi
	done
	exec-inspect show b1 >"$out"
	grep -q 'echo?txt.exe' "$out"
	grep -q 'gnp.?exe ?x?y?z' "$out"
}
