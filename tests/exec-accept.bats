#!/usr/bin/env bats
# exec-accept: runs are accepted only under the current session, once per
# run id (same content → the original receipt, other content → conflict),
# a batch gives every line an outcome, bad input is a clear per-line error
# and never a crash, the dispatcher's feed is pulled and receipted, and a
# kill at either side of the commit leaves all of the batch or none of it.

load helpers

RUN_ID_MAX=$(sed -n 's/^#define RUN_ID_MAX[[:space:]]*\([0-9]*\).*/\1/p' "$SRC/libcommon/protocol.h")
TXN_ID_MAX=$(sed -n 's/^#define TXN_ID_MAX[[:space:]]*\([0-9]*\).*/\1/p' "$SRC/libcommon/protocol.h")
SPEC_LINE_MAX=$(($(sed -n 's/^#define SPEC_LINE_MAX[[:space:]]*//p' "$SRC/libcommon/runs.h")))

setup() {
	start_dispatcher
}

teardown() { stop_dispatcher; }

# jget JSON PATH: a value out of one JSON text, read by SQLite's JSON functions.
jget() {
	sqlite3 :memory: "SELECT json_extract('${1//\'/\'\'}', '$2')"
}

# rep CHAR N: CHAR repeated N times.
rep() {
	printf "%${2}s" '' | tr ' ' "$1"
}

# accept_file FILE [ARGS...]: run exec-accept on FILE with stderr apart.
accept_file() {
	local f=$1
	shift
	run --separate-stderr exec-accept "$@" <"$f"
}

# accept_line TEXT [ARGS...]: run exec-accept on one line.
accept_line() {
	printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/line"
	shift
	accept_file "$BATS_TEST_TMPDIR/line" "$@"
}

@test "accepts a run from stdin under the current binding (human and --json)" {
	open_session
	local sid inc receipt
	sid=$(current_session)
	inc=$(sql "SELECT incarnation FROM sessions WHERE status='current'")
	accept_line "$(spec r1 /bin/echo '["hi"]')"
	assert_success
	receipt=$(sql "SELECT receipt FROM accepts WHERE run_id='r1'")
	[ -n "$receipt" ]
	assert_output "accepted r1 $receipt"
	[ "$(sql "SELECT incarnation || ' ' || session_id FROM accepts WHERE run_id='r1'")" = "$inc $sid" ]
	[ "$(sql "SELECT state || ' ' || program || ' ' || args || ' ' || session_id FROM runs WHERE run_id='r1'")" = \
		"queued /bin/echo [\"hi\"] $sid" ]
	accept_line "$(spec r2)" --json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jget "$output" '$.line')" = 1 ]
	[ "$(jget "$output" '$.run_id')" = r2 ]
	[ "$(jget "$output" '$.outcome')" = accepted ]
	[ "$(jget "$output" '$.receipt')" = "$(sql "SELECT receipt FROM accepts WHERE run_id='r2'")" ]
	[ "$(sql "SELECT count(DISTINCT receipt) FROM accepts")" = 2 ]
}

@test "without a current session nothing is accepted" {
	open_session
	exec-session close >/dev/null
	accept_line "$(spec r1)"
	[ "$status" -eq "$EK_NOSESSION" ] || fail "status $status"
	[[ $stderr == *"no current session"* ]]
	[ -z "$output" ]
	[ "$(sql "SELECT count(*) FROM accepts") $(sql "SELECT count(*) FROM runs")" = "0 0" ]
}

@test "--session with an id that is not the current session is refused" {
	open_session
	accept_line "$(spec r1)" --session ses-0000000000000000
	[ "$status" -eq "$EK_NOSESSION" ] || fail "status $status"
	[[ $stderr == *"ses-0000000000000000"* ]]
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
	# The session before this one is not current either.
	local old
	old=$(current_session)
	open_session
	accept_line "$(spec r1)" --session "$old"
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
	accept_line "$(spec r1)" --session "$(current_session)"
	assert_success
	[ "$(sql "SELECT count(*) FROM accepts")" = 1 ]
}

@test "the same run id with the same content is a duplicate with the original receipt" {
	open_session
	accept_line "$(spec r1)"
	assert_success
	local before
	before=$(sql "SELECT receipt || '|' || accepted_at FROM accepts WHERE run_id='r1'")
	# Same content, keys in another order: still the same run.
	accept_line '{"args":[],"program":"/bin/true","txn_id":"t-r1","run_id":"r1"}' --json
	assert_success
	[ "$(jget "$output" '$.outcome')" = duplicate ]
	[ "$(jget "$output" '$.receipt')" = "${before%|*}" ]
	accept_line "$(spec r1)"
	assert_success
	assert_output "duplicate r1 ${before%|*}"
	[ "$(sql "SELECT receipt || '|' || accepted_at FROM accepts WHERE run_id='r1'")" = "$before" ]
	[ "$(sql "SELECT count(*) FROM accepts") $(sql "SELECT count(*) FROM runs")" = "1 1" ]
}

@test "a spec written with spaces and a spec with escapes are the same run when their content is" {
	open_session
	# plain strings, spaces, keys out of order: read without building a JSON tree
	accept_line '{ "txn_id" : "t-r1", "args" : [ "a b", "c" ], "run_id": "r1", "program": "/bin/echo", "due_at": 0 }'
	assert_success
	[ "$(sql "SELECT content FROM accepts WHERE run_id='r1'")" = '{"args":["a b","c"],"due_at":0,"program":"/bin/echo","run_id":"r1","txn_id":"t-r1"}' ]
	[ "$(sql "SELECT args || program || due_at FROM runs WHERE run_id='r1'")" = '["a b","c"]/bin/echo0' ]
	# the same spec with escapes goes through jansson, and is the same run
	accept_line '{"txn_id":"t-r1","args":["a\u0020b","\u0063"],"run_id":"r1","program":"\/bin/echo","due_at":0}' --json
	assert_success
	[ "$(jget "$output" '$.outcome')" = duplicate ]
	# a leading zero is not a JSON number: refused by name, not read as 0
	accept_line '{"run_id":"r2","txn_id":"t","program":"/bin/true","due_at":00}'
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status: $output"
	[[ $output == "invalid line 1: malformed JSON"* ]] || fail "$output"
}

@test "the same run id with other content is a conflict and changes nothing" {
	open_session
	accept_line "$(spec r1 /bin/echo '["one"]')"
	assert_success
	local before
	before=$(sql "SELECT txn_id || content || receipt || accepted_at FROM accepts WHERE run_id='r1'")
	accept_line "$(spec r1 /bin/echo '["two"]')" --json
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status"
	[ "$(jget "$output" '$.outcome')" = conflict ]
	[[ $(jget "$output" '$.error') == *"already accepted"* ]]
	accept_line "$(spec r1 /bin/echo '["two"]')"
	[ "$status" -eq "$EK_DATAERR" ]
	[[ $output == "conflict "*r1* ]]
	[ "$(sql "SELECT txn_id || content || receipt || accepted_at FROM accepts WHERE run_id='r1'")" = "$before" ]
	[ "$(sql "SELECT args FROM runs WHERE run_id='r1'")" = '["one"]' ]
}

@test "a batch gives every line an outcome; good lines are committed, bad ones named by line" {
	open_session
	local f=$BATS_TEST_TMPDIR/batch
	{
		spec g1
		echo '{"run_id":"b2",'
		spec g3
		echo '{"run_id":"b4","txn_id":"t","program":"/bin/true","colour":"red"}'
		echo
		spec g6
		spec g3 /bin/false
	} >"$f"
	accept_file "$f" --json
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status: $stderr"
	[ "${#lines[@]}" -eq 6 ] || fail "${#lines[@]} outcomes: $output"
	local want=("1 g1 accepted" "2  invalid" "3 g3 accepted" "4  invalid" "6 g6 accepted" "7 g3 conflict") i
	for i in 0 1 2 3 4 5; do
		[ "$(jget "${lines[i]}" '$.line') $(jget "${lines[i]}" '$.run_id') $(jget "${lines[i]}" '$.outcome')" = "${want[i]}" ] ||
			fail "outcome $i: ${lines[i]}"
	done
	[[ $(jget "${lines[1]}" '$.error') == *"malformed JSON"* ]]
	[[ $(jget "${lines[3]}" '$.error') == *"colour"* ]]
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM accepts ORDER BY run_id)")" = g1,g3,g6 ]
	[ "$(sql "SELECT program FROM runs WHERE run_id='g3'")" = /bin/true ]
	# Human output names the line numbers too.
	{ spec h1; echo 'nonsense'; } >"$f"
	accept_file "$f"
	[ "$status" -eq "$EK_DATAERR" ]
	assert_line --regexp '^accepted h1 '
	assert_line --regexp '^invalid line 2: malformed JSON'
}

# bad_line NAME TEXT PATTERN: the line is rejected as invalid with an error
# matching PATTERN, exit EK_DATAERR, and nothing is written.
bad_line() {
	printf '%s\n' "$2" >"$BATS_TEST_TMPDIR/bad"
	run --separate-stderr exec-accept --json <"$BATS_TEST_TMPDIR/bad"
	[ "$status" -eq "$EK_DATAERR" ] || fail "$1: status $status (stderr: $stderr)"
	[ "${#lines[@]}" -eq 1 ] || fail "$1: ${#lines[@]} outcomes: $output"
	[ "$(jget "${lines[0]}" '$.outcome')" = invalid ] || fail "$1: ${lines[0]}"
	[[ $(jget "${lines[0]}" '$.error') == *$3* ]] || fail "$1: error does not name '$3': ${lines[0]}"
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ] || fail "$1: a row was written"
}

@test "bad input is a clear per-line error naming the field, never a crash" {
	open_session
	local ok='"txn_id":"t","program":"/bin/true"'
	bad_line malformed '{"run_id":"a",,}' "malformed JSON"
	bad_line truncated '{"run_id":"a","txn_id":"t","prog' "malformed JSON"
	bad_line not-an-object '["a","b"]' "JSON object"
	bad_line args-type "{\"run_id\":\"a\",$ok,\"args\":\"x\"}" "'args'"
	bad_line args-member "{\"run_id\":\"a\",$ok,\"args\":[1]}" "'args'"
	bad_line run_id-type "{\"run_id\":7,$ok}" "'run_id'"
	bad_line timeout-type "{\"run_id\":\"a\",$ok,\"timeout_ms\":\"5\"}" "'timeout_ms'"
	bad_line due_at-range "{\"run_id\":\"a\",$ok,\"due_at\":-1}" "'due_at'"
	bad_line env-type "{\"run_id\":\"a\",$ok,\"env\":[]}" "'env'"
	bad_line missing-run_id "{$ok}" "'run_id': missing"
	bad_line missing-txn_id '{"run_id":"a","program":"/bin/true"}' "'txn_id': missing"
	bad_line missing-program '{"run_id":"a","txn_id":"t"}' "'program': missing"
	bad_line unknown-field "{\"run_id\":\"a\",$ok,\"colour\":1}" "unknown field 'colour'"
	# A long field name is quoted cut short, never cut inside a character.
	bad_line unknown-field-utf8 "{\"run_id\":\"a\",$ok,\"$(rep a 63)é\":1}" "unknown field 'aaa"
	bad_line run_id-chars "{\"run_id\":\"a/b\",$ok}" "'run_id'"
	bad_line run_id-space "{\"run_id\":\"a b\",$ok}" "'run_id'"
	bad_line run_id-empty "{\"run_id\":\"\",$ok}" "'run_id'"
	bad_line run_id-long "{\"run_id\":\"$(rep a $((RUN_ID_MAX + 1)))\",$ok}" "'run_id'"
	bad_line txn_id-long "{\"run_id\":\"a\",\"txn_id\":\"$(rep t $((TXN_ID_MAX + 1)))\",\"program\":\"/bin/true\"}" "'txn_id'"
	bad_line duplicate-key "{\"run_id\":\"a\",\"run_id\":\"b\",$ok}" "duplicate object key"
	bad_line env-reserved "{\"run_id\":\"a\",$ok,\"env\":{\"EXEC_STATE_DIR\":\"/x\"}}" "EXEC_"
	bad_line env-name "{\"run_id\":\"a\",$ok,\"env\":{\"A=B\":\"x\"}}" "'env'"
	bad_line cwd-relative "{\"run_id\":\"a\",$ok,\"cwd\":\"tmp\"}" "'cwd'"
	bad_line nul-escape "{\"run_id\":\"a\",\"txn_id\":\"t\\u0000x\",\"program\":\"/bin/true\"}" "malformed JSON"
	bad_line utf8 "$(printf '{"run_id":"a","txn_id":"t\xff","program":"/bin/true"}')" "malformed JSON"
	bad_line utf8-truncated "$(printf '{"run_id":"a","txn_id":"t\xc3","program":"/bin/true"}')" "malformed JSON"
	# The limits themselves are accepted.
	accept_line "{\"run_id\":\"$(rep a "$RUN_ID_MAX")\",\"txn_id\":\"$(rep t "$TXN_ID_MAX")\",\"program\":\"/bin/true\"}"
	assert_success
	[ "$(sql "SELECT length(run_id) || ' ' || length(txn_id) FROM accepts")" = "$RUN_ID_MAX $TXN_ID_MAX" ]
}

@test "NUL bytes inside a line are a clear error, and the next line is still accepted" {
	open_session
	local f=$BATS_TEST_TMPDIR/nul
	{
		printf '{"run_id":"a","txn_id":"t\0x","program":"/bin/true"}\n'
		printf '{"run_id":"b","txn_id":"t","program":"/bin/true"}\0\n'
		printf '\0\n'
		spec c
	} >"$f"
	accept_file "$f" --json
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status: $stderr"
	[ "${#lines[@]}" -eq 4 ] || fail "$output"
	local i
	for i in 0 1 2; do
		[ "$(jget "${lines[i]}" '$.outcome')" = invalid ] || fail "line $((i + 1)): ${lines[i]}"
		[[ $(jget "${lines[i]}" '$.error') == *NUL* ]] || fail "line $((i + 1)): ${lines[i]}"
	done
	[ "$(jget "${lines[3]}" '$.outcome')" = accepted ]
	[ "$(sql "SELECT group_concat(run_id) FROM accepts")" = c ]
}

# big_spec ID N: a valid spec with N arguments of 30000 bytes each.
big_spec() {
	local arg i args=
	arg=$(rep x 30000)
	for ((i = 0; i < $2; i++)); do args+="${args:+,}\"$arg\""; done
	spec "$1" /bin/true "[$args]"
}

@test "a line over the size limit is refused as such and the next line is accepted" {
	open_session
	local f=$BATS_TEST_TMPDIR/big n
	n=$((SPEC_LINE_MAX / 30000 + 1))
	{ big_spec huge "$n"; spec after; } >"$f"
	[ "$(head -1 "$f" | wc -c)" -gt "$SPEC_LINE_MAX" ]
	accept_file "$f"
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status: $stderr"
	assert_line "invalid line 1: line is over the $SPEC_LINE_MAX-byte limit"
	assert_line --regexp '^accepted after '
	[ "$(sql "SELECT group_concat(run_id) FROM accepts")" = after ]
	# Just under the limit is an ordinary line.
	n=$((SPEC_LINE_MAX / 30000 - 1))
	big_spec large "$n" >"$f"
	[ "$(wc -c <"$f")" -le "$SPEC_LINE_MAX" ]
	accept_file "$f"
	assert_success
	[ "$(sql "SELECT json_array_length(args) FROM runs WHERE run_id='large'")" = "$n" ]
}

@test "--from-dispatcher pulls the feed, accepts it and receipts it" {
	open_session
	local sid
	sid=$(current_session)
	admin POST /admin/runs "{\"runs\":[$(spec d1),$(spec d2 /bin/echo '["x"]'),$(spec d3)]}" >/dev/null
	[ "$(disp_field d1 state)" = '"queued"' ]
	run --separate-stderr exec-accept --from-dispatcher --json
	assert_success
	[ "${#lines[@]}" -eq 3 ] || fail "$output"
	local r
	for r in d1 d2 d3; do
		[ "$(disp_field "$r" state)" = '"accepted"' ] || fail "$r: $(admin GET "/admin/runs/$r")"
		[ "$(sql "SELECT session_id FROM accepts WHERE run_id='$r'")" = "$sid" ]
		[ "$(sql "SELECT state FROM runs WHERE run_id='$r'")" = queued ]
	done
	[ "$(sql "SELECT args FROM runs WHERE run_id='d2'")" = '["x"]' ]
	# The receipts were taken: a second pull has nothing new.
	run --separate-stderr exec-accept --from-dispatcher
	assert_success
	[ -z "$output" ] || fail "second pull: $output"
	[ "$(sql "SELECT count(*) FROM accepts")" = 3 ]
}

# queue_four PREFIX N: N runs PREFIX1..PREFIXN submitted, 4 of them
# accepted with --prefetch 4 and queued here.
queue_four() {
	local i
	open_session
	admin POST /admin/runs "{\"runs\":[$(for ((i = 1; i <= $2; i++)); do spec "$1$i"; done | paste -sd, -)]}" >/dev/null
	run --separate-stderr exec-accept --from-dispatcher --prefetch 4
	assert_success
	[ "$(sql "SELECT count(*) FROM runs WHERE state = 'queued'")" = 4 ]
}

@test "--prefetch: the feed is asked only for what the queue here lacks" {
	queue_four p 9
	run --separate-stderr exec-accept --from-dispatcher --prefetch 4
	assert_success
	[ -z "$output" ]                                # the queue is full: nothing asked
	[ "$(sql "SELECT count(*) FROM runs")" = 4 ]
	[ "$(disp_field p5 state)" = '"queued"' ]       # still the dispatcher's to give
	run --separate-stderr exec-accept --from-dispatcher --prefetch 6 --max 1
	[ "$(sql "SELECT count(*) FROM runs")" = 5 ]    # --max bounds it too
	run exec-accept --prefetch 4 </dev/null
	[ "$status" -eq "$EK_USAGE" ]
}

@test "--prefetch counts the runs due within a minute: runs due far ahead take no room from due work" {
	local far=32503680000000 soon i   # 3000-01-01
	soon=$(($(date +%s%3N) + 30000))
	open_session
	admin POST /admin/runs "{\"runs\":[$(for i in 1 2 3 4; do spec "f$i" /bin/true '[]' "\"due_at\":$far"; done |
		paste -sd, -),$(spec s1 /bin/true '[]' "\"due_at\":$soon"),$(spec s2 /bin/true '[]' "\"due_at\":$soon")]}" >/dev/null
	exec-accept --from-dispatcher --prefetch 4 >/dev/null           # the feed's first 4: f1..f4
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM runs ORDER BY 1)")" = f1,f2,f3,f4 ]
	# the runs due in the year 3000 leave the room whole: s1 and s2 come in
	run --separate-stderr exec-accept --from-dispatcher --prefetch 4
	assert_success
	[ "$(sql "SELECT count(*) FROM runs")" = 6 ]
	# a run due in 30 s counts: two more fill the room, the third waits at the dispatcher
	admin POST /admin/runs "{\"runs\":[$(spec o1),$(spec o2),$(spec o3)]}" >/dev/null
	run --separate-stderr exec-accept --from-dispatcher --prefetch 4
	assert_success
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM runs WHERE run_id LIKE 'o%' ORDER BY 1)")" = o1,o2 ]
	[ "$(disp_field o3 state)" = '"queued"' ]
	# and the due ones run; the others wait for their time
	exec-run start --wait >/dev/null
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM receipts ORDER BY 1)")" = o1,o2 ]
	[ "$(sql "SELECT count(*) FROM runs WHERE state = 'queued'")" = 6 ]
}

# feed_requests: work feed requests the dispatcher has had since it started
feed_requests() {
	admin GET /admin/stats | sed -n 's/.*"feed":\([0-9]*\).*/\1/p'
}

@test "--prefetch with --wait-ms: a full queue is waited on until half of it is started; then one feed request tops it up" {
	queue_four h 6
	local before t0=$SECONDS pid
	before=$(feed_requests)
	exec-accept --from-dispatcher --prefetch 4 --wait-ms 30000 >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	# one run started: 3 queued, more than half of 4, still no room
	exec-run start --slots 1 --wait >/dev/null
	kill -0 "$pid" || fail "exec-accept ended with 3 queued: $(cat "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err")"
	# a second: 2 queued, half of 4: it asks the feed for 2, once
	exec-run start --slots 1 --wait >/dev/null
	wait "$pid" || fail "exit $?: $(cat "$BATS_TEST_TMPDIR/err")"
	(( SECONDS - t0 < 30 ))                          # not at the end of the wait
	[ "$(grep -c '^accepted h' "$BATS_TEST_TMPDIR/out")" = 2 ]
	[ "$(sql "SELECT count(*) FROM runs WHERE state = 'queued'")" = 4 ]
	[ "$(($(feed_requests) - before))" = 1 ]
}

@test "--wait-ms: an empty feed is waited on, and what is submitted meanwhile is accepted at once" {
	open_session
	local t0=$SECONDS
	exec-accept --from-dispatcher --wait-ms 30000 >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	local pid=$!
	wait_until 'admin GET /admin/stats | grep -q "\"waiting\":1"'
	# while it waits on the dispatcher it holds no lock: another writer
	# commits, and a TRUNCATE checkpoint is not kept busy by a reader
	run exec-accept <<<"$(spec s1)"
	assert_success
	run sqlite3 "$EXEC_STATE_DIR/state.db" "PRAGMA wal_checkpoint(TRUNCATE)"
	assert_output --regexp '^0\|'
	admin POST /admin/runs "$(spec w1)" >/dev/null
	wait "$pid" || fail "exit $?: $(cat "$BATS_TEST_TMPDIR/err")"
	grep -q "^accepted w1 " "$BATS_TEST_TMPDIR/out"
	(( SECONDS - t0 < 30 ))                         # not at the end of the wait
	[ "$(disp_field w1 state)" = '"accepted"' ]
	# nothing to ask for (--prefetch is met): the wait is spent here, so a
	# caller looping on exec-accept does not spin
	t0=$(date +%s%N)
	run --separate-stderr exec-accept --from-dispatcher --prefetch 1 --wait-ms 300
	assert_success
	[ -z "$output" ]
	(( ($(date +%s%N) - t0) / 1000000 >= 300 ))
	run exec-accept --wait-ms 10 </dev/null
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--wait-ms goes with --from-dispatcher"
	run exec-accept --from-dispatcher --wait-ms 30001
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--wait-ms: '30001' is not a number from 0 to 30000"
}

@test "runs from stdin under a session whose lease ran out are refused (75), nothing accepted" {
	stop_dispatcher
	start_dispatcher --lease-ms 1                   # lapsed before the next process starts
	open_session
	run --separate-stderr exec-accept <<<"$(spec l1)"
	[ "$status" -eq "$EK_TEMPFAIL" ] || fail "status $status: $stderr"
	[[ $stderr == *"lease"*"ran out"*"nothing was accepted"* ]] || fail "$stderr"
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
}

@test "--from-dispatcher against a dispatcher that is down accepts nothing" {
	open_session
	admin POST /admin/runs "$(spec d1)" >/dev/null
	stop_dispatcher
	run --separate-stderr exec-accept --from-dispatcher --timeout-ms 1000
	[ "$status" -eq "$EK_UNAVAILABLE" ] || fail "status $status: $stderr"
	[[ $stderr == *unavailable* ]]
	[ -z "$output" ]
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
}

@test "killed before the commit, a batch leaves no row; a re-run accepts it" {
	open_session
	local f=$BATS_TEST_TMPDIR/batch
	{ spec k1; spec k2; spec k3; } >"$f"
	EXEC_CRASH_AT=accept-before-commit accept_file "$f"
	[ "$status" -eq 137 ] || fail "status $status"
	[ -z "$output" ]
	[ "$(sql "SELECT count(*) FROM accepts") $(sql "SELECT count(*) FROM runs")" = "0 0" ]
	accept_file "$f"
	assert_success
	[ "$(grep -c '^accepted ' <<<"$output")" = 3 ]
}

@test "killed after the commit, a batch is kept and a re-run gets the same receipts" {
	open_session
	local f=$BATS_TEST_TMPDIR/batch r
	{ spec k1; spec k2; spec k3; } >"$f"
	EXEC_CRASH_AT=accept-after-commit accept_file "$f"
	[ "$status" -eq 137 ] || fail "status $status"
	[ "$(sql "SELECT count(*) FROM accepts") $(sql "SELECT count(*) FROM runs")" = "3 3" ]
	accept_file "$f"
	assert_success
	for r in k1 k2 k3; do
		assert_line "duplicate $r $(sql "SELECT receipt FROM accepts WHERE run_id='$r'")"
	done
	[ "$(sql "SELECT count(*) FROM accepts")" = 3 ]
}
