#!/usr/bin/env bats
# Loss of the state directory itself: restored from an older copy, written
# by another package version, damaged, or deleted.  The declared action is
# never a silent repair or a re-execution: stale authority stays fenced,
# foreign or damaged state is refused untouched, and a deleted state is a
# new executor that the dispatcher never hands the old work to.

load drill

# Every tool that opens existing state, with arguments that would write.
each_tool() {
	local rc
	for t in "exec-session heartbeat" "exec-session report" "exec-session show" "exec-accept" \
		"exec-run start --wait" "exec-run sweep" "exec-report w1" "exec-reconcile --drain"; do
		rc=0
		# shellcheck disable=SC2086 # a tool and its arguments
		$t </dev/null >"$BATS_TEST_TMPDIR/tool.out" 2>&1 || rc=$?
		echo "$t $rc $(head -c 600 "$BATS_TEST_TMPDIR/tool.out")"
	done
}

# A state with: w1 retained (never sent), w2 queued, w3 acknowledged.
witnessed_state() {
	start_dispatcher
	open_session
	submit "$(gspec w1)" "$(gspec w2)" "$(gspec w3)"
	exec-accept --from-dispatcher >/dev/null
	exec-run supervise w3 >/dev/null
	EXEC_CRASH_AT=retained exec-run supervise w1 >/dev/null 2>&1 || true
	exec-run sweep >/dev/null
	[ "$(val "SELECT attempts FROM results WHERE run_id = 'w1'")" = 0 ]
	[ "$(val "SELECT state FROM runs WHERE run_id = 'w2'")" = queued ]
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'w3'")" = 1 ]
	sqlite3 "$EXEC_STATE_DIR/state.db" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
}

dbsum() { sha256sum "$EXEC_STATE_DIR/state.db" | cut -d' ' -f1; }

@test "restored from an older copy: the copy's session stays fenced once a new one is open; stale claims give no authority" {
	start_dispatcher
	open_session
	A=$(current_session)
	submit "$(gspec o1)" "$(gspec o2)" "$(gspec o3)" "$(gspec o4)"
	exec-accept --from-dispatcher >/dev/null
	exec-run supervise o1 >/dev/null                            # o1 acknowledged
	EXEC_CRASH_AT=retained exec-run supervise o2 >/dev/null 2>&1 || true
	EXEC_CRASH_AT=retained exec-run supervise o3 >/dev/null 2>&1 || true
	exec-run sweep >/dev/null
	EXEC_CRASH_AT=claimed exec-report o3 >/dev/null 2>&1 || true   # o3: a claim whose owner is dead
	claim=$(val "SELECT claim_owner FROM results WHERE run_id = 'o3'")
	[ -n "$claim" ]
	# the copy: o1 acknowledged, o2 and o3 retained, o4 queued, session A current
	cp -a "$EXEC_STATE_DIR" "$BATS_TEST_TMPDIR/copy"
	# life goes on after the copy: everything is delivered and run, A replaced
	exec-reconcile --drain >/dev/null
	exec-run start --wait >/dev/null
	for id in o1 o2 o3 o4; do [ "$(ran "$id")" = 1 ]; [ "$(disp_charges "$id")" = 1 ]; done
	open_session
	# the loss: the directory is replaced by the older copy
	rm -rf "$EXEC_STATE_DIR"
	cp -a "$BATS_TEST_TMPDIR/copy" "$EXEC_STATE_DIR"
	[ "$(current_session)" = "$A" ]                             # stale: the copy believes A is current
	# declared action: negotiate a new session before anything else (exec-loop's first step)
	open_session
	run exec-session report --json
	assert_output --partial '"quarantined":{"total":1,'           # o4, queued under A
	assert_output --partial '"earlier_session":2'                 # o2 and o3
	exec-run start --wait >/dev/null
	[ "$(ran o4)" = 1 ]                                          # not run a second time
	# the stale claim neither blocks nor authorises: o3 is not sent under the new session
	reports=$(admin GET /admin/summary | grep -o '"reports":[0-9]*')
	run exec-report o3
	[ "$status" -eq "$EK_NOSESSION" ]
	run exec-reconcile --drain
	[ "$(admin GET /admin/summary | grep -o '"reports":[0-9]*')" = "$reports" ]
	[ "$(val "SELECT claim_owner FROM results WHERE run_id = 'o3'")" = "$claim" ]   # evidence untouched
	for id in o1 o2 o3 o4; do [ "$(disp_charges "$id")" = 1 ]; done
	# the dispatcher's records newer than the copy are named, not hidden
	check --restored
	assert_output --partial "note unretained: o4"
}

@test "restored from an older copy, then exec-run start before a new session: the session is confirmed first, nothing runs again" {
	start_dispatcher
	open_session
	submit "$(gspec g1)"
	exec-accept --from-dispatcher >/dev/null
	cp -a "$EXEC_STATE_DIR" "$BATS_TEST_TMPDIR/copy"
	exec-run start --wait >/dev/null
	open_session
	rm -rf "$EXEC_STATE_DIR"
	cp -a "$BATS_TEST_TMPDIR/copy" "$EXEC_STATE_DIR"
	run exec-run start --wait
	[ "$status" -eq "$EK_NOSESSION" ]                           # the dispatcher says A was replaced
	[ "$(ran g1)" = 1 ]
	[ "$(val "SELECT status FROM sessions WHERE status <> 'current' LIMIT 1")" = replaced ]
}

@test "restored from an older copy while the dispatcher is unreachable: its stored lease is no authority, nothing runs again" {
	start_dispatcher
	open_session
	submit "$(gspec g1)"
	exec-accept --from-dispatcher >/dev/null
	exec-session heartbeat >/dev/null                            # a fresh lease in the copy
	cp -a "$EXEC_STATE_DIR" "$BATS_TEST_TMPDIR/copy"
	exec-run start --wait >/dev/null                             # g1 runs once
	# the loss: the older copy comes back, and the dispatcher cannot be reached
	rm -rf "$EXEC_STATE_DIR"
	cp -a "$BATS_TEST_TMPDIR/copy" "$EXEC_STATE_DIR"
	kill_dispatcher
	run exec-run start --wait
	[ "$status" -eq "$EK_UNAVAILABLE" ]
	assert_output --partial "a stored lease is no proof"
	[ "$(ran g1)" = 1 ]                                          # never a second time
	[ "$(val "SELECT state FROM runs WHERE run_id = 'g1'")" = queued ]
	# declared action: a new session; the copy's run stays quarantined
	restart_dispatcher
	open_session
	exec-run start --wait >/dev/null
	[ "$(ran g1)" = 1 ]
	[ "$(val "SELECT state FROM runs WHERE run_id = 'g1'")" = queued ]
}

@test "state from another package version: every tool refuses it untouched (78, naming both versions); draining with its own version works" {
	witnessed_state
	version=$(val "SELECT value FROM meta WHERE key = 'package_version'")
	schema=$(val 'PRAGMA user_version')
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE meta SET value = '0.0.9-other' WHERE key = 'package_version'"
	before=$(dbsum)
	run each_tool
	echo "$output"
	[ "$(grep -c " $EK_VERSION .*0.0.9-other.*" <<<"$output")" = 8 ]
	[ "$(grep -c "drain it with execkit 0.0.9-other" <<<"$output")" = 8 ]
	run exec-loop --dispatcher "$DISP_URL" --tick 0.05
	[ "$status" -eq "$EK_VERSION" ]
	[ "$(dbsum)" = "$before" ]                                    # untouched
	[ "$(ran w2)" = 0 ]                                           # nothing ran
	[ "$(disp_reports w1)" = 0 ]                                  # nothing was sent
	# a schema from another version is refused the same way
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE meta SET value = '$version' WHERE key = 'package_version'; PRAGMA user_version = 99"
	run exec-run start --wait
	[ "$status" -eq "$EK_VERSION" ]
	assert_output --partial "schema version 99"
	# declared action: the version that wrote the state drains it (here: the
	# state is given back its own version, as that version would see it)
	sqlite3 "$EXEC_STATE_DIR/state.db" "PRAGMA user_version = $schema"
	exec-run start --wait >/dev/null
	exec-reconcile --drain >/dev/null
	[ "$(ran w2)" = 1 ]
	[ "$(disp_charges w1)" = 1 ]
	check --drained
}

# The bytes of the database and of its WAL, and that the -shm file is there
# (its bytes are the readers' shared index and locks: every reader writes them).
dbsums() {
	sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal
	[ -f "$EXEC_STATE_DIR/state.db-shm" ] && echo shm
}

# wal_sql SQL: write with the sqlite3 shell but leave the frames in the WAL
# (the shell would otherwise checkpoint them into state.db when it closes).
wal_sql() { sqlite3 -cmd '.dbconfig no_ckpt_on_close on' "$EXEC_STATE_DIR/state.db" "$1" >/dev/null; }

@test "a refused state keeps every byte, its WAL frames included: another version (78), a damaged meta (65)" {
	witnessed_state
	wal_sql "UPDATE meta SET value = '0.0.9-other' WHERE key = 'package_version'"
	[ "$(stat -c %s "$EXEC_STATE_DIR/state.db-wal")" -gt 0 ]      # the change is only in the WAL
	before=$(dbsums)
	run each_tool
	[ "$(grep -c " $EK_VERSION " <<<"$output")" = 8 ]
	[ "$(dbsums)" = "$before" ]                                   # no checkpoint, no WAL removal
	run exec-session report
	assert_output --partial "0.0.9-other"
	# a meta without the executor id: damaged, refused the same way
	wal_sql "UPDATE meta SET value = '$(exec-session --version | sed 's/.* //')' WHERE key = 'package_version'; DELETE FROM meta WHERE key = 'executor_id'"
	before=$(dbsums)
	run exec-run start --wait
	[ "$status" -eq "$EK_DATAERR" ]
	[ "$(dbsums)" = "$before" ]
	[ "$(ran w2)" = 0 ]
}

# garble FILE OFFSET: 12 bytes of 0xff at OFFSET (a b-tree page header).
garble() {
	printf '\377\377\377\377\377\377\377\377\377\377\377\377' |
		dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

@test "corrupt database: reported where it is read, never repaired, nothing runs or is sent; a backup restores it" {
	witnessed_state
	sqlite3 "$EXEC_STATE_DIR/state.db" ".backup '$BATS_TEST_TMPDIR/backup.db'"
	cp "$EXEC_STATE_DIR/state.db" "$BATS_TEST_TMPDIR/intact.db"
	# loss 1: the schema page is garbage — every tool refuses at open
	garble "$EXEC_STATE_DIR/state.db" 100
	before=$(dbsum)
	run each_tool
	echo "$output"
	[ "$(grep -c " $EK_DATAERR .*malformed.*damaged; nothing was changed" <<<"$output")" = 8 ]
	[ "$(dbsum)" = "$before" ]                                    # never "repaired"
	# loss 2: the runs table's page is garbage — whoever reads it refuses
	cp "$BATS_TEST_TMPDIR/intact.db" "$EXEC_STATE_DIR/state.db"
	page=$(val "SELECT rootpage FROM sqlite_schema WHERE name = 'runs'")
	garble "$EXEC_STATE_DIR/state.db" $(((page - 1) * $(val 'PRAGMA page_size')))
	before=$(dbsum)
	for t in "exec-run start --wait" "exec-run sweep"; do
		run $t
		[ "$status" -eq "$EK_DATAERR" ]
		assert_output --partial "damaged"
	done
	[ "$(dbsum)" = "$before" ]
	[ "$(ran w2)" = 0 ]                                           # nothing ran
	run "$DRILLS/check-invariants" "$EXEC_STATE_DIR" "$DISP_URL"   # a fresh checker sees it
	[ "$status" -ne 0 ]
	assert_output --partial "VIOLATION integrity"
	# a file that is not a database at all: refused, unchanged
	mkdir -m 700 "$BATS_TEST_TMPDIR/noisy"
	head -c 8192 /dev/urandom >"$BATS_TEST_TMPDIR/noisy/state.db"
	chmod 600 "$BATS_TEST_TMPDIR/noisy/state.db"
	cp "$BATS_TEST_TMPDIR/noisy/state.db" "$BATS_TEST_TMPDIR/noise"
	run exec-run --state-dir "$BATS_TEST_TMPDIR/noisy" start
	[ "$status" -eq "$EK_DATAERR" ]
	cmp "$BATS_TEST_TMPDIR/noise" "$BATS_TEST_TMPDIR/noisy/state.db"
	# declared action: restore the operator's backup, then it works
	rm -f "$EXEC_STATE_DIR"/state.db*
	cp "$BATS_TEST_TMPDIR/backup.db" "$EXEC_STATE_DIR/state.db"
	chmod 600 "$EXEC_STATE_DIR/state.db"
	exec-run start --wait >/dev/null
	exec-reconcile --drain >/dev/null
	[ "$(ran w2)" = 1 ]
	[ "$(disp_charges w1)" = 1 ]
	check --drained
}

@test "deleted state: refused by every tool; a new state is a new executor, and the dispatcher never hands it the old runs" {
	witnessed_state
	old_exec=$(val "SELECT value FROM meta WHERE key = 'executor_id'")
	OLD=$(current_session)
	rm -rf "$EXEC_STATE_DIR"                                      # the loss
	run each_tool
	echo "$output"
	[ "$(grep -c " $EK_NOINPUT " <<<"$output")" = 8 ]
	[ ! -e "$EXEC_STATE_DIR" ]                                    # nothing re-created behind our back
	# declared action: an operator starts the executor again; it makes a new state
	submit "$(gspec n1)"
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	wait_until '[ "$(disp_field n1 state)" = "\"finished\"" ]'
	kill -TERM "$loop"
	wait "$loop"
	[ "$(val "SELECT value FROM meta WHERE key = 'executor_id'")" != "$old_exec" ]
	[ "$(val "SELECT count(*) FROM accepts WHERE run_id IN ('w1', 'w2', 'w3')")" = 0 ]
	[ "$(ran w2)" = 0 ]                                           # the old queued run is not re-run
	[ "$(ran w1)" = 1 ]
	[ "$(ran w3)" = 1 ]
	[ "$(disp_field w2 owner_session)" = "\"$OLD\"" ]             # still the old session's, visibly
	[ "$(disp_field w2 state)" = '"accepted"' ]
	[ "$(ran n1)" = 1 ]
	check --drained
}
