# Shared by tests/exec-inspect.bats and tests/inspect-relay.bats: stored
# runs of every kind a lookup must answer about, and a fingerprint of the
# state that proves a lookup wrote nothing.
# shellcheck shell=bash

# A write to the real state database, as a damaged or legacy state would be.
sql_write() {
	sqlite3 "$EXEC_STATE_DIR/state.db" "$1"
}

# A row accepted before bindings existed: empty incarnation and session id.
legacy_row() {
	sql_write "INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
		VALUES ('$1', '${2:-t-$1}', '', '', '{}', 'legacy:$1', 0);
		INSERT INTO runs(run_id, txn_id, incarnation, session_id, program, args, due_at)
		VALUES ('$1', '${2:-t-$1}', '', '', '/bin/true', '[]', 0);"
}

# Two runs under a first session, then a second session: a1 and a2 are
# quarantined; b1 is accepted under the second (current) one.
two_sessions() {
	start_dispatcher
	open_session
	OLD_SID=$(current_session)
	{ spec a1 /bin/echo '["secret-arg"]'; spec a2; } | exec-accept >/dev/null
	open_session
	SID=$(current_session)
	spec b1 | exec-accept >/dev/null
	[ -n "$OLD_SID" ] && [ -n "$SID" ] && [ "$OLD_SID" != "$SID" ]
}

# Hashes of state.db and its WAL (absent files hash as "none").
state_hash() {
	local f
	for f in "$EXEC_STATE_DIR/state.db" "$EXEC_STATE_DIR/state.db-wal"; do
		if [ -e "$f" ]; then sha256sum <"$f"; else echo none; fi
	done
}
