#!/usr/bin/env bats
# The state directory (SPEC §2): created 0700 with 0600 files whatever the
# umask; refused when others can reach it, when it is missing, when it was
# written by another package version, and when state.db is not an execkit
# database (garbage, truncated, another application's) — refused with the
# file left byte for byte as it was.  The database itself enforces the
# bindings and the single current session, and stays usable under
# concurrent writers.

load helpers

VERSION=$(exec-session --version | sed -n 's/.*(execkit) //p')
APP_ID=$(($(sed -n 's/^#define EK_APPLICATION_ID[[:space:]]*\(0x[0-9a-fA-F]*\).*/\1/p' "$SRC/libcommon/state.h")))

# Every tool that opens an existing state, with operands that get it there.
STATE_TOOLS=("exec-session heartbeat" "exec-session close" "exec-session show"
	"exec-session report" "exec-accept" "exec-run sweep" "exec-run start"
	"exec-report r1" "exec-reconcile")

teardown() { stop_dispatcher; }

# refused_by_all CODE TEXT...: every state tool (and, with a dispatcher,
# exec-session open) fails with CODE, stdout empty, stderr naming each TEXT.
refused_by_all() {
	local code=$1 t x
	shift
	local tools=("${STATE_TOOLS[@]}")
	[ -n "${DISP_URL:-}" ] && tools+=("exec-session open --dispatcher $DISP_URL")
	for t in "${tools[@]}"; do
		# shellcheck disable=SC2086
		run --separate-stderr $t </dev/null
		[ "$status" -eq "$code" ] || fail "$t: status $status, want $code; stderr: $stderr"
		[ -z "$output" ] || fail "$t wrote to stdout: $output"
		for x in "$@"; do
			[[ $stderr == *"$x"* ]] || fail "$t: stderr does not name '$x': $stderr"
		done
	done
}

sha() { sha256sum "$EXEC_STATE_DIR/state.db" | cut -d' ' -f1; }

accept_some() {
	local i
	for i in $(seq 1 "$1"); do spec "r$i" /bin/echo "[\"$(printf '%0200d' "$i")\"]"; done |
		exec-accept >/dev/null
}

@test "open creates the directory 0700 and its files 0600 even under umask 000" {
	start_dispatcher
	export EXEC_STATE_DIR=$BATS_TEST_TMPDIR/deep/er/state
	umask 000
	run exec-session open --dispatcher "$DISP_URL"
	assert_success
	spec r1 | exec-accept >/dev/null
	[ "$(stat -c %a "$EXEC_STATE_DIR")" = 700 ] || fail "dir mode $(stat -c %a "$EXEC_STATE_DIR")"
	[ "$(stat -c %a "$EXEC_STATE_DIR/out")" = 700 ] || fail "out mode $(stat -c %a "$EXEC_STATE_DIR/out")"
	local f n=0
	for f in "$EXEC_STATE_DIR"/state.db*; do
		[ "$(stat -c %a "$f")" = 600 ] || fail "$f mode $(stat -c %a "$f")"
		n=$((n + 1))
	done
	[ "$n" -ge 1 ]
	[ "$(stat -c %a "$EXEC_STATE_DIR/state.db")" = 600 ]
}

@test "a state directory others can enter is refused, naming its mode" {
	start_dispatcher
	open_session
	local m
	for m in 750 705 777; do
		chmod "$m" "$EXEC_STATE_DIR"
		refused_by_all "$EK_UNSAFE" "$EXEC_STATE_DIR" "mode 0$m"
	done
	chmod 700 "$EXEC_STATE_DIR"
	run exec-session show
	assert_success
}

@test "a state.db others can read is refused, naming its mode" {
	start_dispatcher
	open_session
	chmod 644 "$EXEC_STATE_DIR/state.db"
	refused_by_all "$EK_UNSAFE" "state.db" "mode 0644"
	chmod 600 "$EXEC_STATE_DIR/state.db"
	run exec-session heartbeat
	assert_success
}

@test "a missing state directory is EK_NOINPUT for every tool but open" {
	export EXEC_STATE_DIR=$BATS_TEST_TMPDIR/nowhere
	refused_by_all "$EK_NOINPUT" "$EXEC_STATE_DIR"
	[ ! -e "$EXEC_STATE_DIR" ] || fail "a tool created $EXEC_STATE_DIR"
	# A directory without state.db is not a state directory either.
	mkdir -m 700 "$EXEC_STATE_DIR"
	refused_by_all "$EK_NOINPUT" "state.db" "exec-session open"
	[ -z "$(ls -A "$EXEC_STATE_DIR")" ] || fail "a tool wrote into $EXEC_STATE_DIR: $(ls -A "$EXEC_STATE_DIR")"
	start_dispatcher
	run exec-session open --dispatcher "$DISP_URL"
	assert_success
	[ -f "$EXEC_STATE_DIR/state.db" ]
}

@test "state written by another package version is refused by every tool, unchanged" {
	start_dispatcher
	open_session
	accept_some 3
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE meta SET value='0.0.1' WHERE key='package_version'"
	local before sessions
	before=$(sha)
	sessions=$(sql "SELECT count(*) FROM sessions")
	refused_by_all "$EK_VERSION" "0.0.1" "$VERSION"
	[ "$(sha)" = "$before" ] || fail "state.db changed"
	[ "$(sql "SELECT value FROM meta WHERE key='package_version'")" = 0.0.1 ]
	[ "$(sql "SELECT count(*) FROM sessions")" = "$sessions" ]
	[ "$(sql "SELECT count(*) FROM accepts")" = 3 ]
	[ "$(admin GET /admin/sessions | grep -o '"session_id"' | wc -l)" = 1 ] ||
		fail "open negotiated a session for a refused state"
}

@test "state with another schema names the version that wrote it" {
	start_dispatcher
	open_session
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE meta SET value='9.1.0' WHERE key='package_version';
		PRAGMA user_version=7"
	local before
	before=$(sha)
	refused_by_all "$EK_VERSION" "9.1.0" "$VERSION"
	[ "$(sha)" = "$before" ] || fail "state.db changed"
	# Without a version in meta, the schema numbers still tell.
	sqlite3 "$EXEC_STATE_DIR/state.db" "DELETE FROM meta WHERE key='package_version'"
	refused_by_all "$EK_VERSION" "schema version 7" "$VERSION"
}

@test "a garbage state.db is refused as not a database, unchanged" {
	start_dispatcher
	mkdir -m 700 "$EXEC_STATE_DIR"
	head -c 65536 /dev/urandom >"$EXEC_STATE_DIR/state.db"
	chmod 600 "$EXEC_STATE_DIR/state.db"
	local before
	before=$(sha)
	refused_by_all "$EK_DATAERR" "state.db" "not a database"
	[ "$(sha)" = "$before" ] || fail "state.db changed"
}

@test "a truncated state.db is reported damaged, unchanged" {
	start_dispatcher
	open_session
	accept_some 100
	sqlite3 "$EXEC_STATE_DIR/state.db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
	truncate -s $(($(stat -c %s "$EXEC_STATE_DIR/state.db") / 2)) "$EXEC_STATE_DIR/state.db"
	local before
	before=$(sha)
	refused_by_all "$EK_DATAERR" "state.db" "malformed" "damaged"
	[ "$(sha)" = "$before" ] || fail "state.db changed"
}

@test "another application's SQLite database is refused, unchanged" {
	start_dispatcher
	mkdir -m 700 "$EXEC_STATE_DIR"
	# application_id 0 and user_version 0, like most SQLite files: open
	# must not take it for an empty new state and add our schema to it.
	sqlite3 "$EXEC_STATE_DIR/state.db" "CREATE TABLE notes(x); INSERT INTO notes VALUES ('mine')"
	chmod 600 "$EXEC_STATE_DIR/state.db"
	local before
	before=$(sha)
	refused_by_all "$EK_DATAERR" "state.db" "not an execkit state database"
	[ "$(sha)" = "$before" ] || fail "state.db changed"
	[ "$(sql "SELECT group_concat(name) FROM sqlite_schema")" = notes ]
	[ "$(sql "PRAGMA journal_mode")" = delete ] || fail "journal mode was changed"
	# The same with an application id of its own.
	rm -f "$EXEC_STATE_DIR"/state.db*
	sqlite3 "$EXEC_STATE_DIR/state.db" "PRAGMA application_id=4242; CREATE TABLE meta(k, v)"
	chmod 600 "$EXEC_STATE_DIR/state.db"
	before=$(sha)
	refused_by_all "$EK_DATAERR" "state.db" "not an execkit state database"
	[ "$(sha)" = "$before" ] || fail "state.db changed"
}

@test "state.db is WAL with the execkit application_id, its schema and meta" {
	start_dispatcher
	open_session
	[ "$(sql "PRAGMA journal_mode")" = wal ]
	[ "$(sql "PRAGMA application_id")" = "$APP_ID" ]
	local n
	n=$(find "$SRC/schema" -maxdepth 1 -name '[0-9]*.sql' | wc -l)
	[ "$(sql "PRAGMA user_version")" = "$n" ]
	local t
	for t in meta sessions accepts runs results receipts; do
		[ "$(sql "SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='$t'")" = 1 ] ||
			fail "no table $t"
	done
	[ "$(sql "SELECT value FROM meta WHERE key='package_version'")" = "$VERSION" ]
	[[ $(sql "SELECT value FROM meta WHERE key='executor_id'") =~ ^[0-9a-f]{32}$ ]]
}

# settled_bulk N: N runs settled for good, as --prune-receipts leaves them
# (an acceptance whose spec gave way to its digest, and a record the
# dispatcher acknowledged, with 300 bytes of args), a day old.
settled_bulk() {
	sqlite3 "$EXEC_STATE_DIR/state.db" <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at,
	content_sha256)
SELECT 'b' || i, 't-b' || i, 'inc-old', 'ses-old', '', 'r' || i, 0, printf('%064d', i) FROM n;
INSERT INTO run_records(run_id, txn_id, incarnation, session_id, known, outcome, exit_code, acked_at,
	evidence, recorded_at, program, args)
SELECT run_id, txn_id, incarnation, session_id, 'finished', 'exited', 0, 1,
	'delivered and acknowledged; its receipt pruned', 1, '/bin/true', printf('["%.300c"]', 'x')
FROM accepts WHERE run_id LIKE 'b%';
PRAGMA wal_checkpoint(TRUNCATE);
SQL
}

@test "a state is made for compaction: after --prune-records and exec-session compact its file is smaller" {
	start_dispatcher
	open_session
	[ "$(sql "PRAGMA auto_vacuum")" = 2 ]                  # incremental, chosen before the first table
	settled_bulk 3000
	local full pages
	full=$(stat -c %s "$EXEC_STATE_DIR/state.db")
	pages=$(sql "PRAGMA page_count")
	run exec-session compact                               # nothing free yet
	assert_success
	assert_output --regexp "^compacted .*/state.db: 0 free pages given back, state.db and its WAL [0-9]+ -> [0-9]+ bytes$"
	exec-reconcile --prune-records 1d >/dev/null
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
	[ "$(sql "PRAGMA page_count")" = "$pages" ]             # freed, not given back
	run exec-session compact --json
	assert_success
	[[ "$output" =~ ^\{\"event\":\"compacted\",\"pages\":([0-9]+),\"bytes_before\":[0-9]+,\"bytes_after\":([0-9]+),\"checkpointed\":true\}$ ]]
	[ "${BASH_REMATCH[1]}" -gt $((pages / 2)) ]
	[ "$(stat -c %s "$EXEC_STATE_DIR/state.db")" -lt $((full / 2)) ]
	[ "$(sql "PRAGMA freelist_count")" = 0 ]
	[ "$(sql "PRAGMA integrity_check")" = ok ]
	exec-session heartbeat >/dev/null                      # the state works on
	# a state made without incremental auto-vacuum cannot be compacted so
	sqlite3 "$EXEC_STATE_DIR/state.db" "PRAGMA auto_vacuum = NONE; VACUUM"
	run exec-session compact
	[ "$status" -eq "$EK_DATAERR" ]
	assert_output --partial "created without incremental auto-vacuum"
}

@test "--prune-records forgets in chunks: a kill between them leaves every run whole, forgotten or kept, and the next prune ends it" {
	start_dispatcher
	open_session
	settled_bulk 2500
	EXEC_CRASH_AT=records-chunk run exec-reconcile --prune-records 1d
	[ "$status" -eq 137 ]                                  # killed after its first chunk
	[ "$(sql "SELECT count(*) FROM run_records")" = 1500 ]
	# no record without its spec, no spec of a forgotten run
	[ "$(sql "SELECT count(*) FROM accepts")" = 1500 ]
	[ "$(sql "SELECT count(*) FROM accepts a WHERE NOT EXISTS (SELECT 1 FROM run_records r
		WHERE r.run_id = a.run_id)")" = 0 ]
	run exec-reconcile --prune-records 1d
	assert_success
	assert_output --regexp "^1500 records dropped, 0 kept: not settled for good;"
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
}

@test "compact waits for a writer that holds the lock, and loses none of its writes" {
	start_dispatcher
	open_session
	settled_bulk 2000
	exec-reconcile --prune-records 1d >/dev/null
	# a writer holds the write lock until compact waits for it (compact
	# holds the writers' queue: /proc/locks), then commits a row
	local t=$BATS_TEST_TMPDIR ino
	sqlite3 "$EXEC_STATE_DIR/state.db" >/dev/null <<SQL &
BEGIN IMMEDIATE;
INSERT INTO meta(key, value) VALUES ('w', 'x');
.shell touch "$t/locked"
.shell n=0; while [ ! -e "$t/release" ] && [ \$n -lt 6000 ]; do sleep 0.01; n=\$((n + 1)); done
COMMIT;
SQL
	local writer=$!
	wait_until '[ -e "$t/locked" ]'
	ino=$(stat -c %i "$EXEC_STATE_DIR/state.db-writers")
	exec-session compact >"$t/compact.out" 2>&1 &
	local compact=$!
	wait_until "grep -Eq \"FLOCK +ADVISORY +WRITE +$compact [0-9a-f]+:[0-9a-f]+:$ino \" /proc/locks"
	touch "$t/release"
	wait "$compact" || fail "compact: exit $?: $(cat "$t/compact.out")"
	wait "$writer"
	grep -q "given back" "$t/compact.out" || fail "$(cat "$t/compact.out")"
	[ "$(sql "SELECT value FROM meta WHERE key = 'w'")" = x ]
	[ "$(sql "PRAGMA freelist_count")" = 0 ]
}

@test "every state has its own executor key, 64 hex digits, never changed nor deleted" {
	start_dispatcher
	open_session
	local key other
	key=$(sql "SELECT value FROM meta WHERE key='executor_key'")
	[[ $key =~ ^[0-9a-f]{64}$ ]]
	EXEC_STATE_DIR=$BATS_TEST_TMPDIR/other exec-session open --dispatcher "$DISP_URL" >/dev/null
	other=$(sqlite3 -readonly "$BATS_TEST_TMPDIR/other/state.db" "SELECT value FROM meta WHERE key='executor_key'")
	[[ $other =~ ^[0-9a-f]{64}$ && $other != "$key" ]]
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE meta SET value = '$other' WHERE key = 'executor_key'"
	assert_failure
	assert_output --partial "the executor key never changes"
	run sqlite3 "$EXEC_STATE_DIR/state.db" "DELETE FROM meta WHERE key = 'executor_key'"
	assert_failure
	assert_output --partial "the executor key is kept"
	[ "$(sql "SELECT value FROM meta WHERE key='executor_key'")" = "$key" ]
}

@test "the binding of an accepted run cannot be changed" {
	start_dispatcher
	open_session
	spec r1 | exec-accept >/dev/null
	local before col
	before=$(sql "SELECT incarnation || '/' || session_id FROM accepts WHERE run_id='r1'")
	[ "$before" != / ]
	for col in session_id incarnation run_id; do
		run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE accepts SET $col='other' WHERE run_id='r1'"
		assert_failure
		assert_output --partial immutable
		run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE runs SET $col='other' WHERE run_id='r1'"
		assert_failure
		assert_output --partial immutable
	done
	[ "$(sql "SELECT incarnation || '/' || session_id FROM accepts WHERE run_id='r1'")" = "$before" ]
	[ "$(sql "SELECT incarnation || '/' || session_id FROM runs WHERE run_id='r1'")" = "$before" ]
}

@test "the schema allows at most one current session" {
	start_dispatcher
	open_session
	run sqlite3 "$EXEC_STATE_DIR/state.db" "INSERT INTO sessions(incarnation, session_id, dispatcher,
		credential, status, opened_at, lease_ms, heartbeat_ms) VALUES ('inc-x', 'ses-x', 'http://x',
		'c', 'current', 1, 1, 1)"
	assert_failure
	assert_output --partial UNIQUE
	[ "$(sql "SELECT count(*) FROM sessions WHERE status='current'")" = 1 ]
	[ "$(sql "SELECT count(*) FROM sessions")" = 1 ]
}

# concurrent WORKERS MODE [N]: WORKERS processes accept N (default 50)
# distinct runs each, at once; MODE batch = one N-line batch each, single =
# N invocations each.
concurrent() {
	local w pids=() i n=${3:-50}
	for w in $(seq 1 "$1"); do
		(
			if [ "$2" = batch ]; then
				for i in $(seq 1 "$n"); do spec "w$w-r$i"; done >"$BATS_TEST_TMPDIR/in.$w"
				timeout "$WAIT_S" exec-accept <"$BATS_TEST_TMPDIR/in.$w"
			else
				rc=0
				for i in $(seq 1 "$n"); do
					spec "w$w-r$i" | timeout "$WAIT_S" exec-accept || rc=$?
				done
				exit "$rc"
			fi
		) >"$BATS_TEST_TMPDIR/out.$w" 2>"$BATS_TEST_TMPDIR/err.$w" &
		pids+=($!)
	done
	for w in $(seq 1 "$1"); do
		wait "${pids[w - 1]}" || fail "worker $w: status $?: $(cat "$BATS_TEST_TMPDIR/err.$w")"
	done
	! grep -il "locked\|busy" "$BATS_TEST_TMPDIR"/err.* || fail "a worker saw the database busy"
	[ "$(cat "$BATS_TEST_TMPDIR"/out.* | grep -c '^accepted ')" = $(($1 * n)) ]
}

@test "8 concurrent exec-accept batches of 50 all succeed, never 'database is locked'" {
	start_dispatcher
	open_session
	concurrent 8 batch
	[ "$(sql "SELECT count(*) FROM accepts")" = 400 ]
	[ "$(sql "SELECT count(*) FROM runs")" = 400 ]
	[ "$(sql "SELECT count(DISTINCT receipt) FROM accepts")" = 400 ]
}

# (CONC_OPS, the operations of a worker in the concurrency tests: 60 by
# default, 30 in the sanitized pass of scripts/test.sh)
@test "8 concurrent workers of $((${CONC_OPS:-60} / 2)) exec-accept calls each all succeed" {
	local n=$((${CONC_OPS:-60} / 2))
	start_dispatcher
	open_session
	concurrent 8 single "$n"
	[ "$(sql "SELECT count(*) FROM accepts")" = $((8 * n)) ]
	[ "$(sql "SELECT count(DISTINCT receipt) FROM accepts")" = $((8 * n)) ]
}

@test "the WAL stays bounded across many short-lived writers" {
	# SQLite's checkpoints under the tools' settings, the same in both
	# builds; the sanitizers would only repeat 300 exec-accept calls
	if sanitized_build; then skip "the plain build's test"; fi
	start_dispatcher
	open_session
	local i
	for i in $(seq 1 150); do spec "w$i" | exec-accept >/dev/null; done
	first=$(stat -c %s "$EXEC_STATE_DIR/state.db-wal")
	for i in $(seq 151 300); do spec "w$i" | exec-accept >/dev/null; done
	second=$(stat -c %s "$EXEC_STATE_DIR/state.db-wal")
	# journal_size_limit is 1 MiB: the WAL never keeps more than that, and
	# it does not grow with the number of calls.
	[ "$second" -le 1048576 ]
	[ "$second" -le $((first + 65536)) ]
}

@test "first opens at once make one state: whichever finds the database empty, only one creates it, and every one goes on" {
	start_dispatcher
	local i pids=() rc=0
	for i in 1 2 3 4 5 6; do
		exec-session open --dispatcher "$DISP_URL" >/dev/null 2>"$BATS_TEST_TMPDIR/open.$i" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || { rc=$?; echo "open $((i + 1)) exited $rc: $(cat "$BATS_TEST_TMPDIR/open.$((i + 1))")" >&2; }
	done
	run cat "$BATS_TEST_TMPDIR"/open.*
	refute_output --partial "already exists"
	[ "$rc" = 0 ]
	[ "$(sql "SELECT count(*) FROM meta WHERE key = 'executor_id'")" = 1 ]
	[ "$(sql "PRAGMA integrity_check")" = ok ]
}

