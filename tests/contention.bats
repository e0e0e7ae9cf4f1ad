#!/usr/bin/env bats
# Lock contention (SPEC 3, "a chosen result is never lost"): another
# process holding the write lock only delays the commit of a chosen
# result, never turns the run unknown; no writer holds the lock while it
# waits on its input; long writers (exec-accept, exec-reconcile
# --export-evidence and --prune-receipts) commit in chunks; a heartbeat
# does not fail for a held lock.

load helpers

ACCEPT_CHUNK_RUNS=$(($(sed -n 's/^#define ACCEPT_CHUNK_RUNS[[:space:]]*//p' "$SRC/cmd/exec-accept.c")))
EVIDENCE_CHUNK_ROWS=$(($(sed -n 's/^#define EVIDENCE_CHUNK_ROWS[[:space:]]*\([0-9]*\).*/\1/p' "$SRC/libcommon/evidence.h")))
PRUNE_CHUNK_ROWS=$(($(sed -n 's/^#define PRUNE_CHUNK_ROWS[[:space:]]*\([0-9]*\).*/\1/p' "$SRC/libcommon/evidence.h")))

# hold_lock: another process (the sqlite3 shell, fed through a fifo we
# keep open) takes the write lock of state.db and keeps it until
# release_lock.  Returns once the lock is held.
hold_lock() {
	local ctl=$BATS_TEST_TMPDIR/holder.ctl held=$BATS_TEST_TMPDIR/held
	rm -f "$ctl" "$held"
	mkfifo "$ctl"
	sqlite3 "$EXEC_STATE_DIR/state.db" <"$ctl" >"$BATS_TEST_TMPDIR/holder.log" 2>&1 3>&- &
	HOLDER=$!
	exec {HOLD_FD}>"$ctl"
	printf 'BEGIN IMMEDIATE;\n.system touch %s\n' "$held" >&"$HOLD_FD"
	wait_until '[ -e "$held" ] || ! kill -0 "$HOLDER" 2>/dev/null'
	[ -e "$held" ] || { cat "$BATS_TEST_TMPDIR/holder.log" >&2; return 1; }
}

release_lock() {
	printf 'COMMIT;\n.quit\n' >&"$HOLD_FD"
	exec {HOLD_FD}>&-
	wait "$HOLDER"
}

# The lock is free right now: a writer that does not wait gets it.
lock_free() {
	sqlite3 "$EXEC_STATE_DIR/state.db" "BEGIN IMMEDIATE; ROLLBACK;"
}

# runs FROM TO: run specs bigFROM..bigTO, one a line.
runs() {
	seq "$1" "$2" | sed 's/.*/{"run_id":"big&","txn_id":"t-&","program":"\/bin\/true","args":[]}/'
}

# The run ids an export file holds, sorted.
exported_ids() {
	grep -o '"run_id":"[^"]*"' "$@" | cut -d'"' -f4 | sort
}

@test "a write lock held for 10 s while a guest finishes: its result is delivered once, the run never becomes unknown" {
	start_dispatcher --lease-ms 3600000   # the lease is not what this test is about
	open_session
	local gate=$BATS_TEST_TMPDIR/go done=$BATS_TEST_TMPDIR/guest-done err=$BATS_TEST_TMPDIR/sup.err
	submit_and_accept "$(spec r1 /bin/sh "[\"-c\",\"$(guest_wait "$gate"); touch $done\"]")"
	exec-run supervise r1 >"$BATS_TEST_TMPDIR/sup.out" 2>"$err" 3>&- &
	local sup=$!
	wait_until '[ "$(sql "SELECT guest_pid > 0 FROM runs WHERE run_id = '\''r1'\''")" = 1 ]'
	hold_lock
	touch "$gate"
	wait_until '[ -e "$done" ]'                       # the guest has finished
	# The supervisor waits for the lock and says so about every 5 s; once it
	# has said it has waited 10 s, it is still there, and nothing changed.
	wait_until 'grep -Eq "run '\''r1'\'': result waits for the write lock \(([1-9][0-9]+) s\)" "$err" || ! kill -0 "$sup" 2>/dev/null'
	kill -0 "$sup" || { cat "$err" >&2; fail "the supervisor gave up while the lock was held"; }
	[ "$(grep -c "result waits for the write lock" "$err")" -ge 2 ] || fail "$(cat "$err")"
	[ "$(sql "SELECT state FROM runs WHERE run_id = 'r1'")" = started ]
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	release_lock
	local rc=0
	wait "$sup" || rc=$?
	[ "$rc" -eq 0 ] || fail "supervise exited $rc: $(cat "$err")"
	grep -q '^r1 exited 0: delivered (1 attempt)' "$BATS_TEST_TMPDIR/sup.out"
	[ "$(sql "SELECT count(*) FROM receipts WHERE run_id = 'r1'")" = 1 ]
	[ "$(disp_reports r1)" = 1 ]
	[ "$(disp_charges r1)" = 1 ]
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]     # the execution row went after the report
	run exec-run sweep
	assert_output "0 runs became unknown, 0 finished runs tidied"
	[ "$(sql "SELECT count(*) FROM runs WHERE state = 'unknown'")" = 0 ]
}

@test "exec-accept waiting on a stalled pipe holds no lock, and what came is accepted at once" {
	start_dispatcher
	open_session
	local in=$BATS_TEST_TMPDIR/in out=$BATS_TEST_TMPDIR/accept.out feed
	mkfifo "$in"
	exec-accept <"$in" >"$out" 2>"$BATS_TEST_TMPDIR/accept.err" 3>&- &
	local acc=$!
	exec {feed}>"$in"
	{ spec a1; spec a2; } >&"$feed"
	# a1 and a2 are durable, and said so, while the writer keeps the pipe open
	wait_until '[ "$(grep -c "^accepted " "$out")" = 2 ]'
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM accepts ORDER BY run_id)")" = a1,a2 ]
	kill -0 "$acc"                                   # still reading
	lock_free                                        # a writer that does not wait gets the lock
	spec b1 | exec-accept >/dev/null                 # and so does another exec-accept
	exec-run sweep >/dev/null
	kill -0 "$acc"
	spec a3 >&"$feed"
	exec {feed}>&-
	wait "$acc"
	[ "$(grep -c "^accepted " "$out")" = 3 ]
	[ "$(sql "SELECT count(*) FROM accepts")" = 4 ]
}

@test "a large accept commits in chunks: each is durable before its outcomes are printed" {
	start_dispatcher
	open_session
	local n=20000 f=$BATS_TEST_TMPDIR/big
	[ "$ACCEPT_CHUNK_RUNS" -gt 0 ]
	[ "$ACCEPT_CHUNK_RUNS" -lt "$n" ]
	runs 1 "$n" >"$f"
	# Killed right after its first commit: exactly one chunk is kept (not
	# the whole input), and none of its outcomes was printed yet.
	EXEC_CRASH_AT=accept-after-commit run --separate-stderr exec-accept <"$f"
	[ "$status" -eq 137 ] || fail "status $status: $stderr"
	[ -z "$output" ]
	[ "$(sql "SELECT count(*) FROM accepts")" = "$ACCEPT_CHUNK_RUNS" ]
	[ "$(sql "SELECT count(*) FROM runs")" = "$ACCEPT_CHUNK_RUNS" ]
	[ "$(sql "SELECT min(0 + substr(run_id, 4)) || '-' || max(0 + substr(run_id, 4)) FROM accepts")" = "1-$ACCEPT_CHUNK_RUNS" ]
	# Killed before a later commit: the chunks before it stay, that one is not there.
	EXEC_CRASH_AT=accept-before-commit run --separate-stderr exec-accept <"$f"
	[ "$status" -eq 137 ]
	[ "$(sql "SELECT count(*) FROM accepts")" = "$ACCEPT_CHUNK_RUNS" ]
	# The re-run: every line an outcome, in order; the kept chunk as duplicates.
	run --separate-stderr exec-accept <"$f"
	assert_success
	[ "${#lines[@]}" -eq "$n" ]
	[ "$(grep -c '^duplicate ' <<<"$output")" = "$ACCEPT_CHUNK_RUNS" ]
	[ "$(grep -c '^accepted ' <<<"$output")" = $((n - ACCEPT_CHUNK_RUNS)) ]
	[ "$(cut -d' ' -f2 <<<"$output" | sed 's/^big//' | sort -n -c && echo sorted)" = sorted ]
	[[ ${lines[0]} == "duplicate big1 "* ]]
	[[ ${lines[n - 1]} == "accepted big$n "* ]]
	[ "$(sql "SELECT count(*) FROM accepts") $(sql "SELECT count(*) FROM runs")" = "$n $n" ]
	[ "$(sql "SELECT count(DISTINCT receipt) FROM accepts")" = "$n" ]
}

@test "a writer that comes during a large accept gets in between two of its chunks, not after it" {
	start_dispatcher
	open_session
	local n=$((ACCEPT_CHUNK_RUNS * 100)) f=$BATS_TEST_TMPDIR/big
	runs 1 "$n" >"$f"
	exec-accept <"$f" >/dev/null 2>"$BATS_TEST_TMPDIR/big.err" 3>&- &
	local acc=$!
	wait_until '[ "$(sql "SELECT count(*) FROM accepts")" -ge "$ACCEPT_CHUNK_RUNS" ]'
	local t0=$EPOCHREALTIME
	spec w1 | exec-accept >/dev/null
	# it did not wait out the lock timeout (5 s) for a gap, and accepts are
	# numbered in the order they were written: w1 came before the batch's end
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a < 2.5) }' || fail "w1 waited $t0 -> $EPOCHREALTIME"
	[ "$(sql "SELECT count(*) FROM accepts WHERE rowid < (SELECT rowid FROM accepts WHERE run_id = 'w1')")" -lt "$n" ]
	wait "$acc" || fail "$(cat "$BATS_TEST_TMPDIR/big.err")"
	[ "$(sql "SELECT count(*) FROM accepts")" = $((n + 1)) ]
}

@test "--export-evidence works in chunks: a kill between them leaves every row in the file or in the state" {
	start_dispatcher
	open_session
	local n=2500 one=$BATS_TEST_TMPDIR/one.jsonl two=$BATS_TEST_TMPDIR/two.jsonl
	[ "$EVIDENCE_CHUNK_ROWS" -gt 0 ]
	[ "$EVIDENCE_CHUNK_ROWS" -lt "$n" ]
	seed_undeliverable "$n"
	sql "SELECT run_id FROM results ORDER BY run_id" >"$BATS_TEST_TMPDIR/all"
	EXEC_CRASH_AT=export-chunk run exec-reconcile --export-evidence "$one"
	[ "$status" -eq 137 ] || fail "status $status: $output"
	# one chunk is in the file and gone from the state; the rest is still there
	[ "$(wc -l <"$one")" = "$EVIDENCE_CHUNK_ROWS" ]
	[ "$(sql "SELECT count(*) FROM results")" = $((n - EVIDENCE_CHUNK_ROWS)) ]
	{ exported_ids "$one"; sql "SELECT run_id FROM results"; } | sort >"$BATS_TEST_TMPDIR/both"
	cmp "$BATS_TEST_TMPDIR/all" "$BATS_TEST_TMPDIR/both"
	run exec-reconcile --export-evidence "$two"
	assert_success
	assert_output "exported $((n - EVIDENCE_CHUNK_ROWS)) results, removed 0 output files"
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	exported_ids "$one" "$two" >"$BATS_TEST_TMPDIR/both"
	cmp "$BATS_TEST_TMPDIR/all" "$BATS_TEST_TMPDIR/both"        # each exactly once
	grep -q '"run_id":"x2",.*"refused":true,"refused_cause":"unknown_run".*"body":"{}"' "$one" "$two"
}

@test "--prune-receipts deletes in chunks; a kill between them keeps the rest for the next prune" {
	start_dispatcher
	open_session
	local n=$((PRUNE_CHUNK_ROWS * 2 + 100))
	[ "$PRUNE_CHUNK_ROWS" -gt 0 ]
	sqlite3 "$EXEC_STATE_DIR/state.db" <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i <= $n)
INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
SELECT 'p' || i, 't', 'inc', 'ses', '{}', 'r', 0 FROM n;
INSERT INTO receipts(run_id, incarnation, session_id, outcome, exit_code, acked_at, record_id, attempts)
SELECT run_id, 'inc', 'ses', 'exited', 0, CASE WHEN run_id = 'p$((n + 1))' THEN 1000 * CAST(strftime('%s', 'now') AS INTEGER) ELSE 0 END, 1, 1
FROM accepts WHERE run_id LIKE 'p%';
SQL
	EXEC_CRASH_AT=prune-chunk run exec-reconcile --prune-receipts 1d
	[ "$status" -eq 137 ] || fail "status $status: $output"
	[ "$(sql "SELECT count(*) FROM receipts")" = $((n + 1 - PRUNE_CHUNK_ROWS)) ]
	run exec-reconcile --prune-receipts 1d
	assert_success
	assert_output "pruned $((n - PRUNE_CHUNK_ROWS)) receipts, removed 0 output files"
	[ "$(sql "SELECT group_concat(run_id) FROM receipts")" = "p$((n + 1))" ]   # the recent one stays
}

@test "a heartbeat while another process holds the write lock still succeeds, within its timeout" {
	start_dispatcher
	open_session
	local before
	before=$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")
	hold_lock
	run --separate-stderr exec-session heartbeat --timeout-ms 3000
	assert_success
	assert_output current
	[[ $stderr == *"heartbeat: taken by the dispatcher, not recorded here"* ]] || fail "stderr: $stderr"
	release_lock
	# with the lock free again, the beat is recorded
	run --separate-stderr exec-session heartbeat
	assert_success
	[ -z "$stderr" ]
	[ "$(sql "SELECT last_beat_at > $before FROM sessions WHERE status = 'current'")" = 1 ]
}

# hold_queue: another process (util-linux flock(1)) holds the writers'
# queue, state.db-writers, until release_queue; SQLite's own lock stays free.
hold_queue() {
	local ctl=$BATS_TEST_TMPDIR/queue.ctl held=$BATS_TEST_TMPDIR/queued
	rm -f "$ctl" "$held"
	mkfifo "$ctl"
	flock "$EXEC_STATE_DIR/state.db-writers" sh -c 'touch "$1"; read -r _ <"$2"' sh "$held" "$ctl" &
	QUEUE_HOLDER=$!
	exec {QUEUE_FD}>"$ctl"
	wait_until '[ -e "$held" ]'
}

release_queue() {
	echo go >&"$QUEUE_FD"
	exec {QUEUE_FD}>&-
	wait "$QUEUE_HOLDER"
}

# The writers blocked in the kernel on the queue's lock (/proc/locks marks
# a waiter with "->"), by the queue file's inode.
queue_waiters() {
	local ino
	ino=$(stat -c %i "$EXEC_STATE_DIR/state.db-writers")
	grep -c -- "-> FLOCK .*:$ino " /proc/locks || true
}

@test "writers queue in the kernel: a writer waits for the one before it and goes on when it is done" {
	start_dispatcher
	open_session
	[ -f "$EXEC_STATE_DIR/state.db-writers" ]   # made by the first write, never written
	[ ! -s "$EXEC_STATE_DIR/state.db-writers" ]
	[ "$(stat -c %a "$EXEC_STATE_DIR/state.db-writers")" = 600 ]
	local before
	before=$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")
	hold_queue
	exec-session heartbeat --timeout-ms 60000 >"$BATS_TEST_TMPDIR/beat" 2>&1 &
	local beat=$!
	wait_until '[ "$(queue_waiters)" -ge 1 ]'
	[ "$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")" = "$before" ]
	release_queue
	wait "$beat" || fail "heartbeat: $(cat "$BATS_TEST_TMPDIR/beat")"
	[ "$(cat "$BATS_TEST_TMPDIR/beat")" = current ]
	[ "$(sql "SELECT last_beat_at > $before FROM sessions WHERE status = 'current'")" = 1 ]
}

@test "the queue's wait is bounded: past its timeout a writer tries SQLite's lock once, as any writer would" {
	start_dispatcher
	open_session
	local before after
	before=$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")
	hold_queue
	# the queue held for good, SQLite's lock free: recorded after the wait
	run --separate-stderr timeout "$WAIT_S" exec-session heartbeat --timeout-ms 300
	assert_success
	[ -z "$stderr" ] || fail "stderr: $stderr"
	after=$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")
	[ "$after" -gt "$before" ]
	# both held: the heartbeat's usual answer to a held lock
	hold_lock
	run --separate-stderr timeout "$WAIT_S" exec-session heartbeat --timeout-ms 300
	release_lock
	release_queue
	assert_success
	[[ $stderr == *"heartbeat: taken by the dispatcher, not recorded here"* ]] || fail "stderr: $stderr"
	[ "$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")" = "$after" ]
}
