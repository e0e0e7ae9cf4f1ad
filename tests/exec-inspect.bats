#!/usr/bin/env bats
# exec-inspect: the InspectRetainedRun lookup (FOUND / FILTERED / ABSENT,
# everything else an error), which writes nothing and never reads a run's
# program or arguments; and the operator's read-only views.

load helpers
load inspect

# Hold state.db from another process for $2 seconds; $1 is the SQL that
# takes the lock.  Returns once the lock is held.
hold_db() {
	local flag="$BATS_TEST_TMPDIR/held"
	rm -f "$flag"
	{ printf '%s\n.system touch %s\n' "$1" "$flag"; sleep "$2"; printf 'COMMIT;\n'; } |
		sqlite3 "$EXEC_STATE_DIR/state.db" >"$BATS_TEST_TMPDIR/holder.log" 2>&1 3>&- &
	HOLDER=$!
	wait_for test -e "$flag"
}

ms() { echo $(( $(date +%s%N) / 1000000 )); }

# --- the three answers -------------------------------------------------------

@test "lookup: FOUND for a quarantined run, with its original binding and never its program" {
	two_sessions
	inc_old=$(sql "SELECT incarnation FROM sessions WHERE session_id = '$OLD_SID'")
	run --separate-stderr exec-inspect lookup a1 --session "$SID"
	assert_success
	assert_output --regexp "^FOUND run_id=a1 incarnation=$inc_old session_id=$OLD_SID txn_id=t-a1 started=no start_marker=- due_at=[0-9]+ "
	refute_output --partial echo
	refute_output --partial secret-arg
	run --separate-stderr exec-inspect --json lookup a1 --session "$SID"
	assert_success
	assert_output --regexp "^\\{\"answer\":\"FOUND\",\"run_id\":\"a1\",\"incarnation\":\"$inc_old\",\"session_id\":\"$OLD_SID\",\"txn_id\":\"t-a1\",\"started\":false,\"start_marker\":null,\"due_at\":[0-9]+,\"state\":\"queued\"\\}$"
	refute_output --partial program
	refute_output --partial secret-arg
}

@test "lookup: FOUND for a retained result whose execution row is gone, with its start marker and due time" {
	start_dispatcher
	open_session
	spec r1 | exec-accept >/dev/null
	exec-run start --wait >/dev/null 2>&1 || true   # unknown to the dispatcher: refused, retained
	[ "$(sql "SELECT count(*) FROM runs WHERE run_id = 'r1'")" = 0 ]
	[ "$(sql "SELECT count(*) FROM results WHERE run_id = 'r1'")" = 1 ]
	run exec-inspect lookup r1 --session "$(current_session)"
	assert_success
	assert_output --regexp '^FILTERED run_id=r1$'
	open_session
	run exec-inspect --json lookup r1 --session "$(current_session)"
	assert_success
	assert_output --regexp '^\{"answer":"FOUND","run_id":"r1",'
	# the start facts were kept with the result when it was chosen
	local marker due
	marker=$(sql "SELECT start_marker FROM results WHERE run_id = 'r1'")
	due=$(sql "SELECT due_at FROM results WHERE run_id = 'r1'")
	[ -n "$marker" ]
	[ "$due" -gt 0 ]
	assert_output --partial "\"txn_id\":\"t-r1\",\"started\":true,\"start_marker\":\"$marker\",\"due_at\":$due,\"state\":\"retained\"}"
}

@test "lookup: FILTERED for a run of the caller's own session, saying nothing more" {
	two_sessions
	run --separate-stderr exec-inspect lookup b1 --session "$SID"
	assert_success
	assert_output "FILTERED run_id=b1"
	run --separate-stderr exec-inspect lookup b1 --session "$SID" --json
	assert_success
	assert_output '{"answer":"FILTERED","run_id":"b1"}'
}

@test "lookup: ABSENT only when the state has no record of the id at all; an acceptance alone is an explicit unknown" {
	two_sessions
	run --separate-stderr exec-inspect lookup never-seen --session "$SID"
	assert_success
	assert_output "ABSENT run_id=never-seen"
	# an accepts row alone (no execution row, no result, no receipt, no
	# record): nothing says whether it ran, so it is unknown, never absent
	sql_write "INSERT INTO accepts(run_id, txn_id, content, receipt, accepted_at) VALUES ('acc-only', 't', '{}', 'r', 0)"
	run --separate-stderr exec-inspect --json lookup acc-only --session "$SID"
	assert_success
	assert_output '{"answer":"FOUND","run_id":"acc-only","incarnation":"","session_id":"","txn_id":"t","started":null,"start_marker":null,"due_at":null,"state":"unknown","evidence":"only its acceptance is recorded"}'
}

# --- errors, never ABSENT ---------------------------------------------------------

@test "lookup: a malformed run id is an error" {
	two_sessions
	for id in 'a b' '' "$(printf 'x%.0s' {1..129})" 'a/b' 'é'; do
		run --separate-stderr exec-inspect lookup "$id" --session "$SID"
		[ "$status" -eq "$EK_DATAERR" ] || fail "id '$id': status $status"
		[ -z "$output" ] || fail "id '$id': answered '$output'"
		[[ "$stderr" == "exec-inspect: malformed run id"* ]] || fail "stderr: $stderr"
	done
}

@test "lookup: the caller must name the current session" {
	two_sessions
	run --separate-stderr exec-inspect lookup a1 --session "$OLD_SID"
	[ "$status" -eq "$EK_NOSESSION" ]
	[ -z "$output" ]
	[[ "$stderr" == *"'$OLD_SID' is not the current session"* ]]
	run --separate-stderr exec-inspect lookup a1 --session no-such-session
	[ "$status" -eq "$EK_NOSESSION" ]
	run --separate-stderr exec-inspect lookup a1
	[ "$status" -eq "$EK_USAGE" ]
	[[ "$stderr" == *"lookup needs --session"* ]]
}

@test "lookup: with no current session it is an error" {
	two_sessions
	exec-session close >/dev/null
	run --separate-stderr exec-inspect lookup a1 --session "$SID"
	[ "$status" -eq "$EK_NOSESSION" ]
	[ -z "$output" ]
	[[ "$stderr" == *"no current session"* ]]
}

@test "lookup: a stored transaction id over 256 bytes is its own error" {
	two_sessions
	legacy_row big "$(printf 'x%.0s' {1..300})"
	run --separate-stderr exec-inspect lookup big --session "$SID"
	[ "$status" -eq "$EK_DATAERR" ]
	[ -z "$output" ]
	[[ "$stderr" == *"stored transaction id of 300 bytes exceeds the 256-byte bound"* ]]
	legacy_row edge "$(printf 'y%.0s' {1..256})"
	run exec-inspect lookup edge --session "$SID"
	assert_success
	assert_output --partial "FOUND run_id=edge"
}

@test "lookup: a read failure is an error, not ABSENT" {
	two_sessions
	root=$(sql "SELECT rootpage FROM sqlite_schema WHERE name = 'sqlite_autoindex_runs_1'")
	psize=$(sql "PRAGMA page_size")
	[ -n "$root" ]
	[ "$root" -gt 1 ]
	sqlite3 "$EXEC_STATE_DIR/state.db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
	[ ! -s "$EXEC_STATE_DIR/state.db-wal" ]   # every page is in state.db
	dd if=/dev/zero of="$EXEC_STATE_DIR/state.db" bs="$psize" seek=$((root - 1)) count=1 conv=notrunc 2>/dev/null
	run --separate-stderr exec-inspect lookup never-seen --session "$SID"
	[ "$status" -eq "$EK_DATAERR" ]
	[ -z "$output" ]
	[[ "$stderr" == *"damaged"* ]]
}

@test "lookup: an executor shutting down answers nothing; a stale marker is ignored" {
	two_sessions
	touch "$EXEC_STATE_DIR/shutdown"
	run --separate-stderr exec-inspect lookup a1 --session "$SID"
	[ "$status" -eq "$EK_TEMPFAIL" ]
	[ -z "$output" ]
	[[ "$stderr" == *"executor is shutting down"* ]]
	run --separate-stderr exec-inspect lookup never-seen --session "$SID"
	[ "$status" -eq "$EK_TEMPFAIL" ]
	# a marker older than the newest session is left from an earlier run
	touch -d '1 hour ago' "$EXEC_STATE_DIR/shutdown"
	run exec-inspect lookup a1 --session "$SID"
	assert_success
	assert_output --partial "FOUND run_id=a1"
}

@test "lookup: --timeout-ms bounds the wait for a database held exclusively, and touches nothing" {
	two_sessions
	before=$(sql "SELECT * FROM runs ORDER BY run_id")
	hold_db "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; SELECT count(*) FROM runs;" 5
	t0=$(ms)
	run --separate-stderr exec-inspect lookup a1 --session "$SID" --timeout-ms 300
	elapsed=$(( $(ms) - t0 ))
	[ "$status" -eq "$EK_TEMPFAIL" ]
	[ -z "$output" ]
	[[ "$stderr" == *"state.db: held by another process; gave up waiting for it after"*" ms" ]]
	[ "$elapsed" -lt 2500 ] || fail "took $elapsed ms (the holder keeps the lock 5 s)"
	wait "$HOLDER"
	run exec-inspect lookup a1 --session "$SID"
	assert_success
	assert_output --partial "FOUND run_id=a1"
	[ "$(sql "SELECT * FROM runs ORDER BY run_id")" = "$before" ]
}

@test "lookup: a writer holding the write lock does not stop a lookup (WAL readers never wait)" {
	two_sessions
	hold_db "BEGIN IMMEDIATE; UPDATE meta SET value = value WHERE key = 'created_at';" 5
	t0=$(ms)
	run exec-inspect lookup a1 --session "$SID" --timeout-ms 300
	elapsed=$(( $(ms) - t0 ))
	assert_success
	assert_output --partial "FOUND run_id=a1"
	[ "$elapsed" -lt 2500 ] || fail "took $elapsed ms (the holder keeps the lock 5 s)"
	kill "$HOLDER" 2>/dev/null || true
	wait "$HOLDER" || true
}

# --- the lookup writes nothing and never reads the program -----------------------------

@test "lookups and views write nothing: state.db and its WAL are byte-identical after many" {
	two_sessions
	legacy_row old1
	exec-session report >/dev/null
	before=$(state_hash)
	rows=$(sql "SELECT * FROM runs ORDER BY run_id; SELECT * FROM accepts ORDER BY run_id")
	for i in $(seq 1 25); do
		exec-inspect lookup a1 --session "$SID" >/dev/null
		exec-inspect lookup b1 --session "$SID" >/dev/null
		exec-inspect lookup old1 --session "$SID" --json >/dev/null
		exec-inspect lookup "none$i" --session "$SID" >/dev/null
	done
	for k in quarantined unknown retained refused orphaned queued running receipts; do
		exec-inspect list "$k" >/dev/null
	done
	exec-inspect summary >/dev/null
	exec-inspect show a1 >/dev/null
	[ "$(state_hash)" = "$before" ]
	[ "$(sql "SELECT * FROM runs ORDER BY run_id; SELECT * FROM accepts ORDER BY run_id")" = "$rows" ]
}

# Build a probe against libcommon: it opens the state like exec-inspect does
# and reports which statements the guarded connection allows.
build_probe() {
	local mk="$BUILD/Makefile" cflags ldflags
	command -v cc >/dev/null && [ -f "$BUILD/libcommon/libcommon.a" ] || skip "no C compiler or libcommon.a"
	cflags=$(sed -n 's/^SAN_CFLAGS = //p' "$mk")
	ldflags="$(sed -n 's/^SAN_LDFLAGS = //p' "$mk") $(sed -n 's/^LIBS = //p' "$mk")"
	cat >"$BATS_TEST_TMPDIR/probe.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "inspect.h"

int
main(int argc, char **argv)
{
	struct state st;
	struct ek_err e = { 0 };
	int i;

	if (argc < 3 || state_open(&st, argv[1], 0, &e) < 0 || inspect_guard(&st,
	    strcmp(argv[2], "lookup") == 0 ? INSPECT_LOOKUP : INSPECT_VIEW, mono_ms() + 1000, &e) < 0) {
		fprintf(stderr, "probe: %s\n", e.msg);
		return 2;
	}
	for (i = 3; i < argc; i++)
		printf("%s\n", db_exec(&st.db, argv[i], &e) == 0 ? "allowed" : e.msg);
	state_close(&st);
	return 0;
}
EOF
	# shellcheck disable=SC2086,SC2046 # the flags are word lists
	cc -std=c11 -D_GNU_SOURCE $cflags -I"$SRC/libcommon" -I"$BUILD/libcommon" -I"$BUILD" \
		$(pkg-config --cflags sqlite3 jansson) "$BATS_TEST_TMPDIR/probe.c" -o "$BATS_TEST_TMPDIR/probe" \
		"$BUILD/libcommon/libcommon.a" $ldflags $(pkg-config --libs sqlite3 jansson)
}

@test "a lookup connection cannot read program, args, env, cwd, policy, the spec or the credential" {
	two_sessions
	build_probe
	run "$BATS_TEST_TMPDIR/probe" "$EXEC_STATE_DIR" lookup \
		"SELECT program FROM runs" "SELECT args FROM runs" "SELECT env FROM runs" \
		"SELECT cwd FROM runs" "SELECT policy FROM runs" "SELECT * FROM runs" \
		"SELECT content FROM accepts" "SELECT credential FROM sessions" \
		"SELECT txn_id, incarnation, session_id, state, start_marker, due_at FROM runs" \
		"DELETE FROM runs" "SELECT program FROM results" "SELECT args FROM results"
	assert_success
	assert_line -n 0 --partial "access to runs.program is prohibited"
	assert_line -n 1 --partial "access to runs.args is prohibited"
	assert_line -n 2 --partial "access to runs.env is prohibited"
	assert_line -n 3 --partial "access to runs.cwd is prohibited"
	assert_line -n 4 --partial "access to runs.policy is prohibited"
	assert_line -n 5 --partial "prohibited"
	assert_line -n 6 --partial "access to accepts.content is prohibited"
	assert_line -n 7 --partial "access to sessions.credential is prohibited"
	assert_line -n 8 "allowed"
	assert_line -n 9 --partial "readonly"
	assert_line -n 10 --partial "access to results.program is prohibited"
	assert_line -n 11 --partial "access to results.args is prohibited"
	# the operator's views may read the program, never the credential, and write nothing
	run "$BATS_TEST_TMPDIR/probe" "$EXEC_STATE_DIR" view "SELECT program FROM runs" \
		"SELECT credential FROM sessions" "UPDATE runs SET due_at = 0"
	assert_line -n 0 "allowed"
	assert_line -n 1 --partial "access to sessions.credential is prohibited"
	assert_line -n 2 --partial "readonly"
	# and the real lookup passes the guard
	run exec-inspect lookup a1 --session "$SID"
	assert_success
}

# --- rows with an empty binding ---------------------------------------------------

@test "rows with an empty binding are quarantined: found, listed, never started, counted at open" {
	start_dispatcher
	open_session
	legacy_row old1
	legacy_row old2
	run exec-session open --dispatcher "$DISP_URL" --json
	assert_success
	assert_output --partial '"quarantined":{"total":2,"queued":2,"started":0}'
	SID=$(current_session)
	run --separate-stderr exec-inspect --json lookup old1 --session "$SID"
	assert_success
	assert_output --partial '{"answer":"FOUND","run_id":"old1","incarnation":"","session_id":"","txn_id":"t-old1","started":false,'
	run exec-inspect lookup old1 --session "$SID"
	assert_output --regexp "^FOUND run_id=old1 incarnation='' session_id='' txn_id=t-old1 started=no"
	run exec-inspect list quarantined --ids
	assert_output "$(printf 'old1\nold2')"
	exec-run start --wait >/dev/null 2>&1 || true
	[ "$(sql "SELECT group_concat(state) FROM runs WHERE run_id IN ('old1','old2')")" = "queued,queued" ]
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	run exec-inspect show old1
	assert_success
	assert_line --regexp "^binding: +incarnation='' session_id='' \\(session never negotiated here; not current: quarantined\\)$"
}

# --- the operator's views ----------------------------------------------------------

@test "summary: human and JSON" {
	two_sessions
	run --separate-stderr exec-inspect summary
	assert_success
	assert_line "queued: 1 run of the current session"
	assert_line "quarantined: 2 runs of other sessions (2 queued, 0 started)"
	run --separate-stderr exec-inspect summary --json
	assert_success
	assert_output --regexp '^\{"queued":1,"running":0,"quarantined":\{"total":2,"queued":2,"started":0\},"unknown":0,.*"receipts":0,'

}

@test "list: every kind in every output form" {
	two_sessions
	now=$(ms)
	sql_write "UPDATE runs SET state = 'started', started_at = 1, start_marker = 'm' WHERE run_id = 'a2';
		UPDATE runs SET state = 'unknown', unknown_at = 2, unknown_why = 'gone' WHERE run_id = 'a2';
		INSERT INTO accepts(run_id, txn_id, content, receipt, accepted_at) VALUES
			('x1','t','{}','r',0), ('x2','t','{}','r',0), ('x3','t','{}','r',0);
		INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body, refused, refused_cause)
		VALUES ('x1', 'i-old', 's-old', 'exited', 0, 'm', 1, x'7b7d', 0, NULL),
		       ('x2', 'i-old', 's-old', 'exited', 1, 'm', 2, x'7b7d', 1, 'unknown_run');
		INSERT INTO receipts(run_id, incarnation, session_id, outcome, exit_code, acked_at, record_id, attempts)
		VALUES ('x3', 'i-old', 's-old', 'exited', 0, $now, 7, 1);"
	declare -A want=([quarantined]="a1 a2" [unknown]="a2" [retained]="x1" [refused]="x2"
		[orphaned]="x1" [queued]="b1" [running]="" [receipts]="x3")
	for k in "${!want[@]}"; do
		run --separate-stderr exec-inspect list "$k" --ids
		assert_success
		[ "$(echo $output)" = "${want[$k]}" ] || fail "list $k --ids: '$output'"
		[ "$(exec-inspect list "$k" -0 | tr '\0' ' ')" = "${want[$k]:+${want[$k]} }" ] || fail "list $k -0"
		run --separate-stderr exec-inspect list "$k" --json
		assert_success
		[ "$(sed -n 's/^{"run_id":"\([^"]*\)",.*}$/\1/p' <<<"$output" | paste -sd' ')" = "${want[$k]}" ] ||
			fail "list $k --json: $output"
		run --separate-stderr exec-inspect list "$k"
		assert_success
		# the header always, even over no rows
		assert_line -n 0 --regexp '^RUN_ID +'
		[ "${#lines[@]}" -eq $(( $(wc -w <<<"${want[$k]}") + 1 )) ] || fail "list $k: $output"
	done
	run exec-inspect list refused --json
	assert_output --regexp '^\{"run_id":"x2","incarnation":"i-old","session_id":"s-old",.*"refused_cause":"unknown_run",'

	run exec-inspect list unknown
	assert_line -n 1 --regexp '^a2 .* gone$'
}

@test "show: acknowledged (with its receipt) versus never recorded; never the credential" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec s1 /bin/echo '["hi"]')"
	exec-run start --wait >/dev/null
	run --separate-stderr exec-inspect show s1
	assert_success
	assert_line --regexp '^run s1: acknowledged \(receipt: dispatcher record [0-9]+\)$'
	assert_line "execution row: none"
	assert_line "retained result: none"
	assert_line "receipt:"
	run --separate-stderr exec-inspect show s1 --json
	assert_success
	assert_output --regexp '^\{"run_id":"s1","verdict":"acknowledged",'
	assert_output --partial '"current":true}'
	assert_output --partial '"accepted":{"txn_id":"t-s1",'
	assert_output --regexp '"run":null,"result":null,"receipt":\{.*"record_id":[1-9]'

	cred=$(sqlite3 "$EXEC_STATE_DIR/state.db" "SELECT credential FROM sessions")
	[ -n "$cred" ]
	refute_output --partial "$cred"
	run --separate-stderr exec-inspect show never-seen
	[ "$status" -eq "$EK_NOINPUT" ]
	[ -z "$output" ]
	[[ "$stderr" == *"never recorded"* ]]
	# a receipt is a record of the run: never ABSENT (the current
	# session's own, so FILTERED)
	run exec-inspect lookup s1 --session "$(current_session)"
	assert_output "FILTERED run_id=s1"
}

@test "show: the operator sees program and args, the result with attempts, cause and diagnostic" {
	start_dispatcher
	open_session
	spec q1 /bin/echo '["hello"]' | exec-accept >/dev/null
	exec-run start --wait >/dev/null 2>&1 || true   # not submitted to the dispatcher: refused
	spec q2 /bin/echo '["later"]' '"due_at":99999999999999' | exec-accept >/dev/null
	run exec-inspect show q1 --json
	assert_success
	assert_output --partial '"verdict":"refused"'
	assert_output --regexp '"attempts":[1-9][0-9]*,.*"refused":true,"refused_cause":"unknown_run","last_diag":'

	run exec-inspect show q2 --json
	assert_output --partial '"verdict":"queued"'
	assert_output --partial '"program":"/bin/echo","args":["later"],'

	run exec-inspect show q2
	assert_line --regexp '^  program: +/bin/echo$'
	assert_line --regexp '^  args: +\["later"\]$'
}

@test "list retained --ids feeds exec-report" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec p1)" "$(spec p2)"
	fault 5xx 100000
	exec-run start --wait --budget-ms 100 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	# oldest first: the two supervisors may have chosen in either order
	run sh -c 'exec-inspect list retained --ids | sort'
	assert_output "$(printf 'p1\np2')"
	exec-inspect list retained --ids | exec-report >/dev/null
	run exec-inspect list retained --ids
	assert_output ""
	run sh -c 'exec-inspect list receipts --ids | sort'
	assert_output "$(printf 'p1\np2')"
}

# --- usage ----------------------------------------------------------------------------

@test "usage errors exit 64 with nothing on stdout" {
	mkdir -m 700 "$EXEC_STATE_DIR"
	for args in "" "frobnicate" "lookup" "list" "list nonsense" "show" "summary extra" \
		"summary --session s" "list queued --ids --json" "show a1 -0" "lookup a1 --session s --timeout-ms 0"; do
		# shellcheck disable=SC2086 # words on purpose
		run --separate-stderr exec-inspect $args
		[ "$status" -eq "$EK_USAGE" ] || fail "'$args': status $status"
		[ -z "$output" ] || fail "'$args' wrote to stdout"
		[[ "$stderr" == *"Try 'exec-inspect --help'"* ]] || fail "'$args': $stderr"
	done
	run exec-inspect --help
	assert_success
	assert_line --regexp '^Usage: exec-inspect .*lookup RUN_ID --session SID$'
	assert_output --partial "Exit status:"
}

@test "closing the session joins a lookup in flight; a lookup during the close answers shutting down" {
	start_dispatcher
	open_session
	sid=$(current_session)
	# A lookup in flight: hold the lookups' shared lock as a lookup does.
	flock -s "$EXEC_STATE_DIR/state.db" sleep 2 3>&- &
	holder=$!
	wait_until '! flock -x -n "$EXEC_STATE_DIR/state.db" true'
	start=$(date +%s%N)
	exec-session close >"$BATS_TEST_TMPDIR/close.out" 2>&1 3>&- &
	closer=$!
	wait_until '[ -e "$EXEC_STATE_DIR/shutdown" ]'
	run exec-inspect lookup x1 --session "$sid"
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --partial "shutting down"
	wait "$closer"
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$elapsed" -ge 1000 ]          # it waited for the lookup in flight
	grep -q "closed" "$BATS_TEST_TMPDIR/close.out"
	wait "$holder"
	[ ! -e "$EXEC_STATE_DIR/shutdown" ]
	run exec-inspect lookup x1 --session "$sid"
	[ "$status" -eq "$EK_NOSESSION" ]        # closed now: no current session
	# A close that cannot join in time gives up without closing.
	open_session
	flock -s "$EXEC_STATE_DIR/state.db" sleep 3 3>&- &
	holder=$!
	wait_until '! flock -x -n "$EXEC_STATE_DIR/state.db" true'
	run exec-session close --timeout-ms 300
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --partial "lookups still in flight"
	[ "$(sql "SELECT count(*) FROM sessions WHERE status='current'")" = 1 ]
	[ ! -e "$EXEC_STATE_DIR/shutdown" ]
	kill "$holder" 2>/dev/null || true
}
