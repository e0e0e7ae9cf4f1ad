/*
 * starts — what the dispatcher knows of an executor's starts
 * (schema/dispatcher/007_starts.sql; doc/protocol.md, "Start notices and
 * the start count").
 *
 * Every executor counts the starts it commits and shows the count on its
 * negotiations and heartbeats, with the runs started since it last told
 * (start notices).  Three rules follow, each one function here:
 *
 *   starts_noticed()     a noticed run is known started: never re-queued
 *   run_known_started()  a run with a notice or any report attempt (even
 *                        one refused) ran: settlement and hand-back keep it
 *   starts_shown()       a count below the highest one the executor showed,
 *                        or a state that says it is a restored backup, is
 *                        an older copy: its heartbeats are refused
 *                        (409 state_restored), and when it negotiates, the
 *                        runs its earlier sessions still hold become an
 *                        explicit unknown (starts_restored()), never
 *                        re-queued on their own.
 *
 * The window between a start and its notice (a heartbeat, at most a
 * heartbeat interval later) stays ambiguous: a state restored from a copy
 * taken inside it shows the same count as the dispatcher has.
 */
#include <inttypes.h>
#include <string.h>

#include "clock.h"
#include "protocol.h"

#include "util.h"
#include "store.h"
#include "http.h"
#include "starts.h"

enum { NOTICE_MAX = 1024 };   /* run ids one heartbeat may name */

int
run_known_started(struct ek_err *e, const char *run_id)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT EXISTS(SELECT 1 FROM run_starts WHERE run_id=?1)"
	    " OR EXISTS(SELECT 1 FROM reports WHERE run_id=?1)", "s", run_id);
	int r = st ? db_step(&dsp_store.db, st, e) : -1;

	if (r == 1)
		r = sqlite3_column_int(st, 0);
	db_done(&dsp_store.db, st);
	return r;
}

/* The executor of session sid into xid; 1, 0 unknown, -1. */
static int
executor_of(struct ek_err *e, const char *sid, char *xid, size_t n)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT executor_id FROM sessions WHERE session_id=?", "s", sid);
	int r = st ? db_step(&dsp_store.db, st, e) : -1;

	if (r == 1)
		db_col_text(st, 0, xid, n);
	db_done(&dsp_store.db, st);
	return r;
}

int
starts_shown(struct req *rq, const char *xid, json_t *in, int64_t *seen)
{
	json_t *v = json_object_get(in, "starts");
	int64_t shown;
	sqlite3_stmt *st;
	int r;

	*seen = 0;
	if (!(st = sql_prep(&rq->e, "SELECT starts FROM executor_starts WHERE executor_id=?", "s", xid)))
		return internal(rq);
	if ((r = db_step(&dsp_store.db, st, &rq->e)) == 1)
		*seen = sqlite3_column_int64(st, 0);
	db_done(&dsp_store.db, st);
	if (r < 0)
		return internal(rq);
	if (!v)                      /* an executor that counts nothing */
		return 0;
	if (!json_is_integer(v) || (shown = json_integer_value(v)) < 0)
		return fail(rq, 400, "invalid", "starts must be a count (an integer >= 0)");
	if (shown < *seen)
		return STARTS_OLDER;
	if (sql_exec(&rq->e, "INSERT INTO executor_starts(executor_id, starts, seen_ms) VALUES(?,?,?)"
	    " ON CONFLICT(executor_id) DO UPDATE SET starts=excluded.starts, seen_ms=excluded.seen_ms"
	    " WHERE excluded.starts > starts", "sii", xid, shown, now_ms()) < 0)
		return internal(rq);
	return 0;
}

int
starts_noticed(struct req *rq, const char *sid, json_t *in)
{
	json_t *list = json_object_get(in, "started"), *v;
	char xid[64] = "";
	int64_t now = now_ms();
	size_t i;

	if (!list)
		return 0;
	if (!json_is_array(list) || json_array_size(list) > NOTICE_MAX)
		return fail(rq, 400, "invalid", "started must be a list of at most %d run ids", NOTICE_MAX);
	json_array_foreach(list, i, v)
		if (!json_is_string(v) || !is_run_id(json_string_value(v)))
			return fail(rq, 400, "invalid", "each started run id must be " RUN_ID_SHAPE);
	if (executor_of(&rq->e, sid, xid, sizeof xid) < 0)
		return internal(rq);
	/* only runs some session of the same executor took: another's are not its to tell */
	json_array_foreach(list, i, v)
		if (sql_exec(&rq->e, "INSERT OR IGNORE INTO run_starts(run_id, session_id, noticed_ms)"
		    " SELECT r.run_id, ?, ? FROM runs r JOIN sessions o ON o.session_id=r.owner_session"
		    " WHERE r.run_id=? AND o.executor_id=?", "siss", sid, now, json_string_value(v),
		    xid) < 0)
			return internal(rq);
	return 0;
}

int
starts_restored(struct req *rq, const char *xid, const char *sid, int64_t shown, int64_t seen,
    bool backup)
{
	int64_t now = now_ms();
	int n;

	/* every run an ended session of xid still holds, unsettled and without
	 * a result: those known started stay with the executor (their results
	 * come through adoption); the others become unknown as well */
	if (sql_exec(&rq->e, "INSERT INTO run_unknowns(run_id, why, at_ms)"
	    " SELECT r.run_id, 'held by a state restored from an older copy', ? FROM runs r"
	    " JOIN sessions o ON o.session_id=r.owner_session AND o.status<>'current'"
	    " WHERE o.executor_id=? AND r.state IN ('offered','accepted')"
	    " AND NOT EXISTS(SELECT 1 FROM results s WHERE s.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM run_starts k WHERE k.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM run_unknowns u WHERE u.run_id=r.run_id)", "is", now, xid) < 0)
		return internal(rq);
	n = sqlite3_changes(dsp_store.db.h);
	if (sql_exec(&rq->e, "INSERT INTO settlements(run_id, state, how, settled_ms)"
	    " SELECT r.run_id, NULL, 'inspection_started', ? FROM runs r"
	    " JOIN sessions o ON o.session_id=r.owner_session AND o.status<>'current'"
	    " WHERE o.executor_id=? AND r.state IN ('offered','accepted')"
	    " AND NOT EXISTS(SELECT 1 FROM results s WHERE s.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id)", "is", now, xid) < 0 ||
	    sql_exec(&rq->e, "INSERT INTO restores(executor_id, session_id, starts, seen, backup,"
	    " runs_unknown, at_ms) VALUES(?,?,?,?,?,?,?)", "ssiiiii", xid, sid, shown, seen,
	    (int64_t)backup, (int64_t)n, now) < 0)
		return internal(rq);
	say("executor %s negotiated from a restored state (%s; starts %" PRId64 ", seen %" PRId64
	    "): %d run%s of its earlier sessions %s unknown, none re-queued", xid,
	    backup ? "a backup copy" : "an older start count", shown, seen, n, n == 1 ? "" : "s",
	    n == 1 ? "is" : "are");
	return 0;
}
