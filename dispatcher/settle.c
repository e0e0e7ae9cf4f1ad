/*
 * settle — settlement: what becomes of the runs an ended session still owns
 * (offered or accepted, no result, not handed back).  Only its executor
 * knows whether it started them, and it answers only through its current
 * session, which quarantined them when it was negotiated: so the
 * dispatcher asks there, --settle-after-ms after the end (time for the
 * executor to adopt and deliver what it retained first), with an
 * inspection of its own (client cli-settlement), and settles on the
 * answer (settle_answer(), invariant 7):
 *
 *   FOUND, the ended session's binding, started false  re-queued (work.c)
 *   ABSENT                                             re-queued
 *   FOUND, started true                                stays accepted,
 *                                                      settled: not asked again
 *   FOUND otherwise, FILTERED, ERROR                   no decision: asked
 *                                                      again SETTLE_RETRY_MS
 *                                                      later (asks.c)
 *   no answer (the asking session ended)               asked again through
 *                                                      the next session
 *
 * A run still unsettled --abandon-after-ms after its session's end is
 * abandoned by the sweep: final, visible, never re-run.
 *
 * Settlement sits above the handlers it composes.  The asking is below
 * it (asks.c: settle_ask(), which a heartbeat runs in its transaction);
 * an answer's endpoint is here: h_inspection_answer() records the answer
 * as inspections.c does and then settles on it, in one transaction;
 * settle_sweep() runs once a second from main, in a transaction of the
 * store's own (store_begin(): no request, so no answer to give).
 */
#include <inttypes.h>
#include <string.h>

#include "clock.h"

#include "util.h"
#include "store.h"
#include "http.h"
#include "starts.h"
#include "asks.h"
#include "work.h"
#include "inspections.h"
#include "settle.h"

/* Settle run_id on inspection id as started: it stays with its executor,
 * whose result comes through adoption; it is not asked about again. */
static int
settle_started(struct ek_err *e, const char *run_id, const char *id)
{
	return sql_exec(e, "INSERT INTO settlements(run_id, state, how, inspection_id, settled_ms)"
	    " VALUES(?, NULL, 'inspection_started', ?, ?)", "ssi", run_id, id, now_ms());
}

/* Inspection id was just answered with a: if the dispatcher asked it,
 * settle its run as the answer says (invariant 7); 0 or -1. */
static int
settle_answer(struct ek_err *e, const char *id, json_t *a)
{
	/* the asked run, if it still waits for settling: its ended session
	 * still owns it, no result, no settlement */
	sqlite3_stmt *st = sql_prep(e, "SELECT a.run_id, a.owner_session, o.incarnation"
	    " FROM settlement_asks a JOIN sessions o ON o.session_id=a.owner_session"
	    " JOIN runs r ON r.run_id=a.run_id AND r.owner_session=a.owner_session"
	    "  AND r.state IN ('offered','accepted')"
	    " WHERE a.inspection_id=?"
	    " AND NOT EXISTS(SELECT 1 FROM results s WHERE s.run_id=a.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=a.run_id)", "s", id);
	const char *outcome = json_string_value(json_object_get(a, "outcome"));
	const char *bsid = json_string_value(json_object_get(a, "session_id"));
	const char *binc = json_string_value(json_object_get(a, "incarnation"));
	json_t *started = json_object_get(a, "started");
	const char *state = json_string_value(json_object_get(a, "state"));
	char run_id[136] = "", owner[64] = "", inc[40] = "", as[24] = "";
	const char *how = NULL;
	int r = st ? db_step(&dsp_store.db, st, e) : -1;

	if (r == 1) {
		db_col_text(st, 0, run_id, sizeof run_id);
		db_col_text(st, 1, owner, sizeof owner);
		db_col_text(st, 2, inc, sizeof inc);
	}
	db_done(&dsp_store.db, st);
	if (r <= 0 || !outcome)
		return r < 0 ? -1 : 0;      /* a client's inspection, or nothing left to settle */
	if (strcmp(outcome, "ABSENT") == 0)
		how = "inspection_absent";
	else if (strcmp(outcome, "FOUND") == 0 && bsid && binc && strcmp(bsid, owner) == 0 &&
	    strcmp(binc, inc) == 0 && json_is_boolean(started))
		how = json_is_true(started) ? "inspection_started" : "inspection_not_started";
	else if (strcmp(outcome, "FOUND") == 0 && bsid && binc && strcmp(bsid, owner) == 0 &&
	    strcmp(binc, inc) == 0 && json_is_null(started) && state && strcmp(state, "unknown") == 0) {
		/* the executor itself cannot tell: an explicit unknown, kept */
		if (sql_exec(e, "INSERT OR IGNORE INTO run_unknowns(run_id, why, at_ms) VALUES(?,"
		    " 'its executor cannot tell whether it started', ?)", "si", run_id, now_ms()) < 0)
			return -1;
		how = "inspection_started";
	}
	/* "never started" and "absent" give way to what the dispatcher holds:
	 * a start notice or a report attempt proves the run ran */
	if (how && strcmp(how, "inspection_started") != 0 && (r = run_known_started(e, run_id)) != 0) {
		if (r < 0)
			return -1;
		say("settlement: run '%s' of session '%s': answered %s, but it is known started"
		    " (a start notice or a report): it stays", run_id, owner, how);
		how = "inspection_started";
	}
	if (!how) {                         /* no decision: asked again later */
		say("settlement: run '%s' of session '%s': %s answer decides nothing; asking again"
		    " later", run_id, owner, outcome);
		return 0;
	}
	if (strcmp(how, "inspection_started") == 0)
		r = settle_started(e, run_id, id);
	else
		r = run_requeue(e, run_id, "requeued", how, id, as);
	if (r == 0)
		say("settlement: run '%s' of session '%s': %s%s%s", run_id, owner, how,
		    as[0] ? ", re-queued as " : ", stays with its executor", as);
	return r;
}

/* POST /v1/sessions/{sid}/inspections/{id}: the executor's answer,
 * recorded once (a second answer is a conflict), and settled on in the
 * same transaction when the question was the dispatcher's own. */
int
h_inspection_answer(struct req *rq)
{
	char sid[200];
	int status;

	if ((status = inspection_answer_check(rq, sid, sizeof sid)))
		return status;
	if (tx_begin(rq) < 0)
		return 500;
	if ((status = inspection_answer_record(rq, sid)) == 200 &&
	    settle_answer(&rq->e, rq->arg, rq->in) < 0)
		status = internal(rq);
	return tx_end(rq, status);
}

/* Abandon the runs whose session ended --abandon-after-ms ago and that
 * nothing settled; 0 or -1. */
static int
settle_abandon(struct ek_err *e, int64_t now)
{
	int n;

	if (sql_exec(e, "INSERT INTO settlements(run_id, state, how, settled_ms)"
	    " SELECT r.run_id, 'abandoned', 'abandoned', ? FROM runs r"
	    " JOIN sessions o ON o.session_id=r.owner_session AND o.status<>'current'"
	    " JOIN session_ends x ON x.session_id=o.session_id AND x.ended_ms<=?"
	    " WHERE r.state IN ('offered','accepted')"
	    " AND NOT EXISTS(SELECT 1 FROM results s WHERE s.run_id=r.run_id)"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id)",
	    "ii", now, now - dsp.cfg.abandon_after_ms) < 0)
		return -1;
	if ((n = sqlite3_changes(dsp_store.db.h)) > 0)
		say("settlement: %d run%s abandoned: unsettled %" PRId64 " ms after their session"
		    " ended", n, n == 1 ? "" : "s", dsp.cfg.abandon_after_ms);
	return 0;
}

/* Ask through every current session whose executor has an ended session
 * with runs to settle; 0 or -1. */
static int
settle_ask_all(struct ek_err *e)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT DISTINCT c.session_id FROM sessions c"
	    " JOIN sessions o ON o.executor_id=c.executor_id AND o.status<>'current'"
	    " JOIN runs r ON r.owner_session=o.session_id AND r.state IN ('offered','accepted')"
	    " WHERE c.status='current'"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id)", "");
	json_t *sids = json_array();
	size_t i;
	int r = st && sids ? 0 : -1;

	while (r == 0 && (r = db_step(&dsp_store.db, st, e)) == 1)
		r = json_array_append_new(sids, json_string(col(st, 0)));
	db_done(&dsp_store.db, st);
	for (i = 0; r == 0 && i < json_array_size(sids); i++)
		r = settle_ask(e, json_string_value(json_array_get(sids, i)));
	json_decref(sids);
	return r;
}

void
settle_sweep(void)
{
	struct ek_err e = { 0 };
	int rc;

	if ((rc = store_begin(&e)) == 0) {
		rc = settle_abandon(&e, now_ms()) == 0 && settle_ask_all(&e) == 0 ? 0 : -1;
		if (store_end(rc == 0, &e) < 0)
			rc = -1;
	}
	if (rc < 0)   /* logged as a request's internal error was: it is one */
		say("SWEEP settlement: %s", e.msg);
}
