#!/usr/bin/env bats
# Exactly once means execution (SPEC section 3): a transaction's guest runs
# at most once, whatever housekeeping or restores happen.  Each drill: a
# witness, one loss (housekeeping, a state restored from an older copy,
# the loop killed), the declared action, and a fresh look: the ledger the
# guests write (one line per execution of a transaction), the lookup, and
# the dispatcher's store.

load drill

# xspec ID [GATED]: a guest that appends its transaction id to the ledger
# (a re-queued run keeps its transaction under a new run id); GATED=1 makes
# it wait for $GO, bounded.
xspec() {
	local script="echo \\\"\$EXEC_TXN_ID\\\" >> $LEDGER"
	[ "${2:-0}" = 1 ] && script="$script; $(guest_wait "$GO")"
	printf '{"run_id":"%s","txn_id":"t-%s","program":"/bin/sh","args":["-c","%s"]}' "$1" "$1" "$script"
}
ran_txn() { if [ -f "$LEDGER" ]; then grep -cx -- "t-$1" "$LEDGER" || true; else echo 0; fi; }

# One round of a loop, by hand: heartbeat, answer inspections, pull, start.
round() {
	exec-session heartbeat >/dev/null 2>&1 || true
	exec-inspect relay >/dev/null 2>&1 || true
	exec-accept --from-dispatcher >/dev/null 2>&1 || true
	exec-run start --wait >/dev/null 2>&1 || true
}

# A value of the dispatcher's store, read by a fresh sqlite3.
dstore() { sqlite3 -readonly -cmd ".timeout $WAIT_MS" "$BATS_TEST_TMPDIR/disp.db" "$1"; }
settled() { [ "$(dstore "SELECT count(*) FROM settlements WHERE run_id = '$1'")" = 1 ]; }
noticed() { [ "$(dstore "SELECT count(*) FROM run_starts")" = "$1" ]; }

# restore COPY: the state directory replaced by COPY (a copy of the whole
# directory, or a backup file), as an operator restores one.
restore() {
	rm -rf "$EXEC_STATE_DIR"
	if [ -d "$1" ]; then
		cp -a "$1" "$EXEC_STATE_DIR"
	else
		mkdir -m 700 "$EXEC_STATE_DIR" "$EXEC_STATE_DIR/out"
		cp "$1" "$EXEC_STATE_DIR/state.db"
		chmod 600 "$EXEC_STATE_DIR/state.db"
	fi
}

@test "export: a run that ran and was exported after its session was revoked is FOUND finished, never ABSENT; it is not re-queued; its guest ran once" {
	start_dispatcher --settle-after-ms 0
	open_session
	local old
	old=$(current_session)
	submit "$(xspec x1 1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null
	wait_until '[ "$(ran_txn x1)" = 1 ]'
	admin POST "/admin/sessions/$old/revoke" >/dev/null
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS"
	# witness: retained under the revoked session, never delivered
	[ "$(val "SELECT count(*) FROM results WHERE run_id = 'x1'")" = 1 ]
	# the loss: housekeeping, as the docs prescribe, under a new session
	open_session
	exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl" >/dev/null
	[ "$(val "SELECT count(*) FROM results")" = 0 ]
	run exec-inspect --json lookup x1 --session "$(current_session)"
	assert_success
	assert_output --partial '"started":true'
	assert_output --partial '"state":"finished"'
	assert_output --partial "evidence exported to $BATS_TEST_TMPDIR/evidence.jsonl"
	# declared action: the loop's rounds, while the dispatcher settles x1
	wait_until 'round; settled x1'
	round
	[ "$(ran_txn x1)" = 1 ]
	[ "$(dstore "SELECT state IS NULL FROM settlements WHERE run_id = 'x1'")" = 1 ]   # kept, not re-queued
}

@test "prune: a delivered run whose receipt was pruned is FOUND finished, with where its evidence went" {
	start_dispatcher
	open_session
	submit "$(xspec p1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --wait >/dev/null
	wait_until '[ "$(val "SELECT count(*) FROM receipts")" = 1 ]'
	exec-reconcile --prune-receipts 0s >/dev/null
	[ "$(val "SELECT count(*) FROM receipts")" = 0 ]
	open_session
	run exec-inspect --json lookup p1 --session "$(current_session)"
	assert_success
	assert_output --partial '"state":"finished"'
	assert_output --partial '"started":true'
	assert_output --partial 'receipt pruned'
	[ "$(val "SELECT outcome || ' ' || exit_code FROM run_records WHERE run_id = 'p1'")" = "exited 0" ]
}

@test "retention: --prune-records forgets only what the dispatcher settled for good; the exported run it may still ask about is kept, answered FOUND, never re-queued; each guest ran once" {
	start_dispatcher --settle-after-ms 0
	open_session
	local old
	old=$(current_session)
	submit "$(xspec p1)" "$(xspec x1 1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null
	wait_until '[ "$(ran_txn x1)" = 1 ] && [ "$(val "SELECT count(*) FROM receipts WHERE run_id = '"'p1'"'")" = 1 ]'
	admin POST "/admin/sessions/$old/revoke" >/dev/null
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS"
	# witness: p1 acknowledged, x1 retained under the revoked session
	open_session
	exec-reconcile --prune-receipts 0s >/dev/null
	exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl" >/dev/null
	[ "$(val "SELECT count(*) FROM run_records")" = 2 ]
	# the loss, declared: the retention pass, every record old enough
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE run_records SET recorded_at = recorded_at - 1000"
	run exec-reconcile --prune-records 0s
	assert_success
	assert_output --regexp "^1 record dropped, 1 kept: not settled for good;"
	run exec-inspect lookup p1 --session "$(current_session)"
	assert_output --partial ABSENT                        # forgotten: the dispatcher never asks
	run exec-inspect --json lookup x1 --session "$(current_session)"
	assert_output --partial '"state":"finished"'
	# declared action: the loop's rounds, while the dispatcher settles x1
	wait_until 'round; settled x1'
	round
	[ "$(ran_txn p1)" = 1 ]
	[ "$(ran_txn x1)" = 1 ]
	[ "$(dstore "SELECT state IS NULL FROM settlements WHERE run_id = 'x1'")" = 1 ]   # kept, not re-queued
	[ "$(dstore "SELECT count(*) FROM settlements WHERE run_id = 'p1'")" = 0 ]       # never asked about
}

@test "restored copy, same session (route a): the dispatcher has heard a higher start count; nothing starts from the copy" {
	start_dispatcher
	open_session
	submit "$(xspec a1 1)"
	exec-accept --from-dispatcher >/dev/null
	cp -a "$EXEC_STATE_DIR" "$BATS_TEST_TMPDIR/copy"      # a1 queued in the copy
	exec-run start >/dev/null
	wait_until '[ "$(ran_txn a1)" = 1 ]'
	exec-session heartbeat >/dev/null                    # the start count reaches the dispatcher
	noticed 1
	kill_recorded
	restore "$BATS_TEST_TMPDIR/copy"
	# witness: the copy believes a1 never started, under a session still current
	[ "$(val "SELECT state FROM runs WHERE run_id = 'a1'")" = queued ]
	run -"$EK_VERSION" exec-run start --wait
	assert_output --partial "older copy"
	[ "$(ran_txn a1)" = 1 ]
	[ "$(val "SELECT state FROM runs WHERE run_id = 'a1'")" = queued ]   # not even marked
}

@test "restored copy, new session with --adopt (route b): a run known started stays with its executor, never re-queued" {
	start_dispatcher --settle-after-ms 0
	open_session
	submit "$(xspec b1 1)"
	exec-accept --from-dispatcher >/dev/null
	cp -a "$EXEC_STATE_DIR" "$BATS_TEST_TMPDIR/copy"
	exec-run start >/dev/null
	wait_until '[ "$(ran_txn b1)" = 1 ]'
	exec-session heartbeat >/dev/null
	noticed 1
	kill_recorded
	restore "$BATS_TEST_TMPDIR/copy"
	exec-session open --dispatcher "$DISP_URL" --adopt --timeout-ms "$WAIT_MS" >/dev/null
	[ "$(dstore "SELECT count(*) FROM restores")" = 1 ]
	wait_until 'round; settled b1'
	round
	[ "$(ran_txn b1)" = 1 ]
	[ "$(dstore "SELECT requeued_as IS NULL FROM settlements WHERE run_id = 'b1'")" = 1 ]
	# and the restored state's count now starts from what the dispatcher saw
	[ "$(val "SELECT starts FROM start_counter")" -ge 1 ]
	exec-session heartbeat >/dev/null
}

@test "restored backup, started before any heartbeat told of it: the backup's mark stops every start; its runs become unknown, never re-queued" {
	start_dispatcher --settle-after-ms 0
	open_session
	submit "$(xspec k1 1)"
	exec-accept --from-dispatcher >/dev/null
	run exec-session backup "$BATS_TEST_TMPDIR/backup.db"
	assert_success
	[ "$(stat -c %a "$BATS_TEST_TMPDIR/backup.db")" = 600 ]
	run -"$EK_CANTCREAT" exec-session backup "$BATS_TEST_TMPDIR/backup.db"   # never over a file
	exec-run start --confirmed >/dev/null    # no heartbeat: the dispatcher never hears of it
	wait_until '[ "$(ran_txn k1)" = 1 ]'
	noticed 0
	kill_recorded
	restore "$BATS_TEST_TMPDIR/backup.db"
	run -"$EK_VERSION" exec-run start --wait --confirmed
	assert_output --partial "restored backup copy"
	run exec-session close                     # hands nothing back from a backup
	assert_output --partial "nothing handed back"
	[ "$(val "SELECT count(*) FROM handbacks")" = 0 ]
	exec-session open --dispatcher "$DISP_URL" --adopt --timeout-ms "$WAIT_MS" >/dev/null
	[ "$(dstore "SELECT backup FROM restores")" = 1 ]
	[ "$(val "SELECT count(*) FROM meta WHERE key = 'backup_taken_at'")" = 0 ]
	[ "$(admin GET /admin/runs/k1 | grep -o '"state":"[a-z_]*"' | head -1)" = '"state":"unknown"' ]
	admin GET /admin/summary | grep -q '"unknown":1'
	round
	round
	[ "$(ran_txn k1)" = 1 ]
}

@test "the loop killed with -9 and its state restored from a copy (route c): the runs in flight at the kill never run again; new work runs once" {
	start_dispatcher --settle-after-ms 0
	exec-loop --dispatcher "$DISP_URL" --tick 0.1 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	local loop=$! i old
	remember "$loop"
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	# before any run, a consistent copy taken another way than exec-session
	# backup (SQLite's own, while the loop runs): it carries no mark
	sqlite3 -cmd ".timeout $WAIT_MS" "$EXEC_STATE_DIR/state.db" ".backup '$BATS_TEST_TMPDIR/copy.db'"
	for i in 1 2 3 4; do submit "$(xspec c$i 1)"; done      # one per slot
	wait_until '[ "$(wc -l <"$LEDGER" 2>/dev/null || echo 0)" = 4 ]'
	wait_until 'noticed 4'
	old=$(current_session)
	# the loop and what it was running (a feed request could otherwise
	# still accept work into the state about to be replaced)
	pkill -KILL -P "$loop" || true
	kill -KILL "$loop"
	wait "$loop" || true
	kill_recorded
	restore "$BATS_TEST_TMPDIR/copy.db"
	exec-loop --dispatcher "$DISP_URL" --tick 0.1 2>>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	wait_until '[ "$(current_session 2>/dev/null)" != "$old" ]'
	for i in 6 7 8; do submit "$(xspec c$i)"; done
	wait_until '[ "$(ran_txn c6)$(ran_txn c7)$(ran_txn c8)" = 111 ]'
	wait_until '[ "$(dstore "SELECT count(*) FROM settlements")" = 4 ]'
	for i in 1 2 3 4 6 7 8; do
		[ "$(ran_txn c$i)" = 1 ] || fail "t-c$i ran $(ran_txn c$i) times"
	done
	[ "$(dstore "SELECT count(*) FROM settlements WHERE requeued_as IS NOT NULL")" = 0 ]
	kill -TERM "$loop"
	wait "$loop"
}

@test "a backup restored beside the live state's WAL is refused, untouched: that WAL belongs to another database" {
	start_dispatcher
	open_session
	exec-session backup "$BATS_TEST_TMPDIR/backup.db" >/dev/null
	submit "$(xspec w1 1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null
	wait_until '[ "$(ran_txn w1)" = 1 ]'
	kill_recorded                        # a supervisor killed with the database open
	[ -s "$EXEC_STATE_DIR/state.db-wal" ]
	cp "$BATS_TEST_TMPDIR/backup.db" "$EXEC_STATE_DIR/state.db"     # restored over, the WAL left
	local before
	before=$(sha256sum "$EXEC_STATE_DIR"/state.db*)
	run -"$EK_DATAERR" exec-session report
	assert_output --partial "belongs to another database"
	run -"$EK_DATAERR" exec-run start --wait
	[ "$(sha256sum "$EXEC_STATE_DIR"/state.db*)" = "$before" ]
	# the documented restore: without the WAL, the copy opens as a backup
	rm "$EXEC_STATE_DIR/state.db-wal" "$EXEC_STATE_DIR/state.db-shm"
	run -"$EK_VERSION" exec-run start --wait --confirmed
	assert_output --partial "restored backup copy"
	[ "$(ran_txn w1)" = 1 ]
}

@test "the dispatcher's store restored from an older copy: the work it resurrects is recognised by the executor that ran it, by run id, and never runs again" {
	start_dispatcher
	open_session
	submit "$(xspec s1)"
	# the dispatcher's copy: s1 queued in it
	sqlite3 -cmd ".timeout $WAIT_MS" "$BATS_TEST_TMPDIR/disp.db" ".backup '$BATS_TEST_TMPDIR/disp-copy.db'"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --wait >/dev/null
	wait_until '[ "$(val "SELECT count(*) FROM receipts")" = 1 ]'
	[ "$(ran_txn s1)" = 1 ]
	# the loss: the store replaced by its older copy
	kill_dispatcher
	rm -f "$BATS_TEST_TMPDIR/disp.db-wal" "$BATS_TEST_TMPDIR/disp.db-shm"
	cp "$BATS_TEST_TMPDIR/disp-copy.db" "$BATS_TEST_TMPDIR/disp.db"
	restart_dispatcher
	[ "$(admin GET /admin/runs/s1 | grep -o '"state":"[a-z_]*"' | head -1)" = '"state":"queued"' ]
	# declared action: the executor goes on; the feed hands s1 out again
	round
	round
	[ "$(ran_txn s1)" = 1 ]                     # the same run id: a duplicate, never a new run
	[ "$(val "SELECT count(*) FROM runs")" = 0 ]
	# what the executor knows of s1 is its receipt: an ended session's s1 is settled as started
	exec-session close >/dev/null
	open_session
	[ "$(exec-inspect lookup s1 --session "$(current_session)" | grep -o 'state=[a-z_]*')" = state=acknowledged ]
}
