/*
 * asks — settlement's questions: the dispatcher's own inspections (client
 * cli-settlement) about the runs an executor's ended sessions still own,
 * asked through its current session (settle.c says why, and decides on
 * the answers).
 *
 * Asking is below settlement and below the handlers: a heartbeat asks for
 * its own session inside its transaction (sessions.c), so that the count
 * of waiting inspections it answers already holds these; settle.c's sweep
 * asks through every current session once a second.  An ask is an
 * inspection like a client's: it waits in the same table, under the same
 * cap (INSPECT_PENDING_MAX), and is relayed and answered the same way.
 * The count of all that wait for a session, the clients' and these, is
 * here too (inspections_pending()): it caps both, and a heartbeat tells
 * it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "random.h"

#include "util.h"
#include "store.h"
#include "asks.h"

enum { SETTLE_PENDING_MAX = 512,     /* the dispatcher's own share of a session's cap */
	SETTLE_RETRY_MS = 5000 };    /* after an answer that decided nothing */

int64_t
inspections_pending(struct ek_err *e, const char *sid)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT COUNT(*) FROM inspections"
	    " WHERE session_id=? AND status='pending'", "s", sid);
	int64_t n = st && db_step(&dsp_store.db, st, e) == 1 ?
	    sqlite3_column_int64(st, 0) : -1;

	db_done(&dsp_store.db, st);
	return n;
}

/* How many of the dispatcher's own inspections wait for session sid. */
static int64_t
settle_pending(struct ek_err *e, const char *sid)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT COUNT(*) FROM settlement_asks a JOIN inspections i"
	    " ON i.inspection_id=a.inspection_id WHERE i.session_id=? AND i.status='pending'",
	    "s", sid);
	int64_t n = st && db_step(&dsp_store.db, st, e) == 1 ? sqlite3_column_int64(st, 0) : -1;

	db_done(&dsp_store.db, st);
	return n;
}

/* Ask session sid about run_id, owned by the ended session owner. */
static int
settle_ask_one(struct ek_err *e, const char *sid, const char *run_id, const char *owner,
    int64_t now)
{
	char id[32];

	if (random_hex(id, sizeof id, "insp-", 8) < 0)
		return ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
	return sql_exec(e, "INSERT INTO inspections(inspection_id, session_id, run_id, status,"
	    " created_ms) VALUES(?,?,?,'pending',?)", "sssi", id, sid, run_id, now) < 0 ||
	    sql_exec(e, "INSERT INTO settlement_asks(inspection_id, run_id, owner_session,"
	    " asked_ms) VALUES(?,?,?,?)", "sssi", id, run_id, owner, now) < 0 ? -1 : 0;
}

int
settle_ask(struct ek_err *e, const char *sid)
{
	int64_t now = now_ms(), pending = inspections_pending(e, sid), own, room;
	json_t *todo;
	sqlite3_stmt *st;
	size_t i;
	int r;

	if (pending < 0 || (own = settle_pending(e, sid)) < 0)
		return -1;
	room = INSPECT_PENDING_MAX - pending < SETTLE_PENDING_MAX - own ?
	    INSPECT_PENDING_MAX - pending : SETTLE_PENDING_MAX - own;
	if (room <= 0)
		return 0;
	/* the runs of sid's executor's ended sessions that no answer settled
	 * yet, not asked in sid already, nor answered lately */
	st = sql_prep(e, "SELECT r.run_id, r.owner_session FROM sessions c"
	    " JOIN sessions o ON o.executor_id=c.executor_id AND o.status<>'current'"
	    " JOIN session_ends x ON x.session_id=o.session_id AND x.ended_ms<=?"
	    " JOIN runs r ON r.owner_session=o.session_id AND r.state IN ('offered','accepted')"
	    " WHERE c.session_id=? AND c.status='current'"
	    " AND NOT EXISTS(SELECT 1 FROM results s WHERE s.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM settlement_asks a JOIN inspections i"
	    "  ON i.inspection_id=a.inspection_id WHERE a.run_id=r.run_id"
	    "  AND ((i.status='pending' AND i.session_id=c.session_id)"
	    "   OR (i.status='answered' AND i.answered_ms>?)))"
	    " ORDER BY r.submit_seq LIMIT ?", "isii", now - dsp.cfg.settle_after_ms, sid,
	    now - SETTLE_RETRY_MS, room);
	if (!st || !(todo = json_array())) {
		db_done(&dsp_store.db, st);
		return st ? ek_fail(e, EK_OSERR, "out of memory") : -1;
	}
	while ((r = db_step(&dsp_store.db, st, e)) == 1)
		json_array_append_new(todo, json_pack("[s, s]", col(st, 0), col(st, 1)));
	db_done(&dsp_store.db, st);
	for (i = 0; r == 0 && i < json_array_size(todo); i++)
		r = settle_ask_one(e, sid, json_string_value(json_array_get(json_array_get(todo, i), 0)),
		    json_string_value(json_array_get(json_array_get(todo, i), 1)), now);
	json_decref(todo);
	return r;
}
