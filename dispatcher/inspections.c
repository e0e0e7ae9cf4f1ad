/*
 * inspections — a client's InspectRetainedRun, relayed.
 *
 * The dispatcher never calls the executor, so a client's lookup waits in
 * `inspections` until the executor holding the named session pulls it
 * (its heartbeat says how many wait), answers it locally and posts the
 * answer, which is recorded once (invariant 5).  The run id is stored as
 * the client sent it: judging it is the executor's business, so a
 * malformed id comes back as an ERROR answer, never as ABSENT.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dispatcher.h"

enum { INSPECT_RUN_MAX = 4096, INSPECT_PENDING_MAX = 1024,
	INSPECT_WAIT_MAX = 30000, INSPECT_POLL_MS = 50, INSPECT_ANSWER_MAX = 16384 };

/* Check a client's inspection request; NULL if valid, else why not. */
static const char *
inspection_check(json_t *in)
{
	static const char *const fields[] = { "run_id", "session_id", "executor_id", NULL };
	json_t *run = json_object_get(in, "run_id"), *sid = json_object_get(in, "session_id");
	json_t *xid = json_object_get(in, "executor_id"), *v;
	const char *k;

	if (!json_is_object(in))
		return "body must be a JSON object";
	json_object_foreach(in, k, v)
		if (!one_of(k, fields))
			return "unknown field in inspection";
	if (!json_is_string(run) || json_string_length(run) > INSPECT_RUN_MAX)
		return "run_id must be a string of at most 4096 bytes";
	if (!sid == !xid)
		return "name exactly one of session_id and executor_id";
	if (sid && (!json_is_string(sid) || json_string_length(sid) > 128))
		return "session_id must be a string of at most 128 bytes";
	if (xid && (!json_is_string(xid) || !is_hex(json_string_value(xid), 32)))
		return "executor_id must be 32 hex digits";
	return NULL;
}

/* The session a request names (session_id, or executor_id's newest one)
 * into sid, which must be current: 0, or the error status (answer set). */
static int
inspection_session(struct req *rq, json_t *in, char *sid, size_t n)
{
	const char *want = json_string_value(json_object_get(in, "session_id"));
	const char *xid = json_string_value(json_object_get(in, "executor_id"));
	sqlite3_stmt *st = want ? sql_prep(&rq->e, "SELECT session_id, status FROM sessions"
	    " WHERE session_id=?", "s", want) : sql_prep(&rq->e, "SELECT session_id, status"
	    " FROM sessions WHERE executor_id=? ORDER BY status='current' DESC, created_ms DESC,"
	    " rowid DESC LIMIT 1", "s", xid);
	char status[16] = "";
	int r = st ? db_step(&dsp.store.db, st, &rq->e) : -1;

	if (r == 1) {
		db_col_text(st, 0, sid, n);
		db_col_text(st, 1, status, sizeof status);
	}
	db_done(&dsp.store.db, st);
	if (r < 0)
		return internal(rq);
	if (r == 0 && want)
		return fail(rq, 404, "unknown_session", "no session '%s'", want);
	if (r == 0)
		return fail(rq, 404, "unknown_session", "no session of executor '%s'", xid);
	return strcmp(status, "current") == 0 ? 0 : fail_over(rq, status);
}

int64_t
inspections_pending(struct req *rq, const char *sid)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT COUNT(*) FROM inspections"
	    " WHERE session_id=? AND status='pending'", "s", sid);
	int64_t n = st && db_step(&dsp.store.db, st, &rq->e) == 1 ?
	    sqlite3_column_int64(st, 0) : -1;

	db_done(&dsp.store.db, st);
	return n;
}

/* POST /v1/inspections: a client asks, through the executor holding a
 * current session, what that executor stores about a run. */
int
h_inspection_new(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *why;
	char id[32], sid[72];
	int64_t pending;
	int status;

	if (!in)
		return 400;
	if ((why = inspection_check(in)))
		return fail(rq, 400, "invalid", "%s", why);
	if (random_id(id, sizeof id, "insp-", 8) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	if (tx_begin(rq) < 0)
		return 500;
	if ((status = inspection_session(rq, in, sid, sizeof sid)))
		return tx_end(rq, status);
	if ((pending = inspections_pending(rq, sid)) < 0)
		return tx_end(rq, internal(rq));
	if (pending >= INSPECT_PENDING_MAX)   /* the executor answers 32 a heartbeat */
		return tx_end(rq, fail(rq, 429, "overloaded", "%d inspections already wait for "
		    "session '%s'", INSPECT_PENDING_MAX, sid));
	if (sql_exec(&rq->e, "INSERT INTO inspections(inspection_id, session_id, run_id, status,"
	    " created_ms) VALUES(?,?,?,'pending',?)", "sssi", id, sid,
	    json_string_value(json_object_get(in, "run_id")), now_ms()) < 0)
		return tx_end(rq, internal(rq));
	return tx_end(rq, answer(rq, 202, json_pack("{s:s, s:s, s:s}", "inspection_id", id,
	    "status", "pending", "session_id", sid)));
}

/* Set rq->out to inspection rq->arg as it stands: 200 (*done once it is
 * answered, or can no longer be), 404, or 500.  A pending inspection whose
 * session is over is "unanswered": the session gate refuses every answer
 * from it now, so waiting longer cannot help the client. */
static int
inspection_read(struct req *rq, bool *done)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT i.run_id, i.session_id, CASE WHEN"
	    " i.status='pending' AND IFNULL(s.status, '')<>'current' THEN 'unanswered'"
	    " ELSE i.status END, i.answer, i.answered_ms, s.status FROM inspections i"
	    " LEFT JOIN sessions s ON s.session_id=i.session_id WHERE i.inspection_id=?",
	    "s", rq->arg);
	int r = st ? db_step(&dsp.store.db, st, &rq->e) : -1;
	json_t *o = NULL;

	if (r == 1) {
		*done = strcmp(col(st, 2), "pending") != 0;
		o = json_pack("{s:s, s:s, s:s, s:s, s:o}", "inspection_id", rq->arg,
		    "run_id", col(st, 0), "session_id", col(st, 1), "status", col(st, 2),
		    "session_status", col_json(st, 5));
		if (o && strcmp(col(st, 2), "answered") == 0) {
			json_t *a = col(st, 3) ? json_loads(col(st, 3), 0, NULL) : NULL;
			json_object_set_new(o, "answer", a ? a : json_null());
			json_object_set_new(o, "answered_ms", json_integer(sqlite3_column_int64(st, 4)));
		}
	}
	db_done(&dsp.store.db, st);
	if (r < 0)
		return internal(rq);
	if (r == 0)
		return fail(rq, 404, "unknown_inspection", "no inspection '%s'", rq->arg);
	return answer(rq, 200, o);
}

/* GET /v1/inspections/{id}?wait_ms=N: the inspection, once answered or
 * after N ms (at most 30000), whichever is first.  The wait bounds only
 * this request: the inspection stays, and a later request reads it. */
int
h_inspection_get(struct req *rq)
{
	const char *w = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "wait_ms");
	int64_t wait = 0, end, left;
	bool done = false;
	int status;

	if (w && cli_parse_i64(w, 0, INSPECT_WAIT_MAX, &wait) < 0)
		return fail(rq, 400, "invalid", "wait_ms must be a number from 0 to %d", INSPECT_WAIT_MAX);
	if (wait > 0)   /* the idle timeout must not end a long poll */
		MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT,
		    (unsigned int)(wait / 1000 + 15));
	end = mono_ms() + wait;
	for (;;) {
		if (tx_begin(rq) < 0)
			return 500;
		status = tx_end(rq, inspection_read(rq, &done));
		left = end - mono_ms();
		if (status != 200 || done || left <= 0 || atomic_load(&dsp.stopping) ||
		    peer_gone(rq->conn))
			return status;
		nap(left < INSPECT_POLL_MS ? left : INSPECT_POLL_MS, rq->conn);
	}
}

/* GET /v1/sessions/{sid}/inspections: the session's pending inspections,
 * oldest first, at most 32 (one relay's worth). */
int
h_inspection_list(struct req *rq)
{
	static const char *const names[] = { "inspection_id", "run_id", "session_id", NULL };
	json_t *out;
	int status;

	if (tx_begin(rq) < 0)
		return 500;
	if ((status = sess_gate(rq, rq->arg, NULL, false)))
		return tx_end(rq, status);
	out = json_object();
	if (rows_into(rq, out, "inspections", "SELECT inspection_id, run_id, session_id"
	    " FROM inspections WHERE session_id=? AND status='pending'"
	    " ORDER BY created_ms, rowid LIMIT 32", rq->arg, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* Check the members of an answer for its outcome; NULL if valid. */
static const char *
answer_fields_check(json_t *a, const char *outcome)
{
	static const char *const found[] = { "outcome", "run_id", "incarnation", "session_id",
		"txn_id", "state", "started", "start_marker", "due_at", NULL };
	static const char *const error[] = { "outcome", "reason", "exit_code", NULL };
	static const char *const other[] = { "outcome", "run_id", NULL };
	const char *const *allowed = strcmp(outcome, "FOUND") == 0 ? found :
	    strcmp(outcome, "ERROR") == 0 ? error : other;
	const char *k;
	json_t *v;
	size_t i;

	/* an answer never carries more, so the program or its arguments
	 * cannot reach the store or a client by this route */
	json_object_foreach(a, k, v)
		if (!one_of(k, allowed))
			return "a field the answer's outcome does not have";
	for (i = 0; allowed[i]; i++)
		if (!json_object_get(a, allowed[i]))
			return "a field of the answer's outcome is missing";
	if (allowed == error)
		return json_is_string(json_object_get(a, "reason")) &&
		    json_is_integer(json_object_get(a, "exit_code")) ? NULL :
		    "reason must be a string, exit_code an integer";
	return NULL;
}

/* Check an executor's answer to an inspection of run_id; NULL if valid. */
static const char *
answer_check(json_t *a, const char *run_id)
{
	static const char *const outcomes[] = { "FOUND", "FILTERED", "ABSENT", "ERROR", NULL };
	const char *o = json_string_value(json_object_get(a, "outcome")), *why;
	const char *r = json_string_value(json_object_get(a, "run_id"));

	if (!json_is_object(a) || !o || !one_of(o, outcomes))
		return "outcome must be FOUND, FILTERED, ABSENT or ERROR";
	if ((why = answer_fields_check(a, o)))
		return why;
	if (strcmp(o, "ERROR") != 0 && (!r || strcmp(r, run_id) != 0))
		return "run_id is not the inspected run's";
	return NULL;
}

/* Load inspection id of session sid: 1 with run_id (malloc'd) and
 * *answered, 0 unknown or another session's, -1 store error. */
static int
inspection_load(struct req *rq, const char *id, const char *sid, char **run_id, bool *answered)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT run_id, status FROM inspections"
	    " WHERE inspection_id=? AND session_id=?", "ss", id, sid);
	int r = st ? db_step(&dsp.store.db, st, &rq->e) : -1;

	if (r == 1) {
		*answered = strcmp(col(st, 1), "answered") == 0;
		if (!(*run_id = strdup(col(st, 0))))
			r = ek_fail(&rq->e, EK_OSERR, "out of memory");
	}
	db_done(&dsp.store.db, st);
	return r;
}

/* Record the answer in rq->in for inspection rq->arg of session sid. */
static int
inspection_record(struct req *rq, const char *sid)
{
	char *run_id = NULL, *text = NULL;
	const char *why;
	bool answered = false;
	int r = inspection_load(rq, rq->arg, sid, &run_id, &answered), status;

	if (r < 0)
		status = internal(rq);
	else if (r == 0)   /* another session's inspection is none of this one's business */
		status = fail(rq, 404, "unknown_inspection", "no inspection '%s' for session '%s'",
		    rq->arg, sid);
	else if (answered)
		status = fail(rq, 409, "conflict", "inspection '%s' is already answered", rq->arg);
	else if ((why = answer_check(rq->in, run_id)))
		status = fail(rq, 400, "invalid", "%s", why);
	else if (!(text = json_dumps(rq->in, JSON_COMPACT)) ||
	    sql_exec(&rq->e, "UPDATE inspections SET status='answered', answer=?, answered_ms=?"
	    " WHERE inspection_id=? AND status='pending'", "sis", text, now_ms(), rq->arg) < 0)
		status = text ? internal(rq) : fail(rq, 500, "internal", "out of memory");
	else
		status = answer(rq, 200, json_pack("{s:s, s:s}", "status", "recorded",
		    "inspection_id", rq->arg));
	free(text);
	free(run_id);
	return status;
}

/* POST /v1/sessions/{sid}/inspections/{id}: the executor's answer,
 * recorded once; a second answer is a conflict. */
int
h_inspection_answer(struct req *rq)
{
	const char *p = rq->path + strlen("/v1/sessions/");
	char sid[200];
	int status;

	/* the route matched, so p starts with a non-empty sid segment */
	snprintf(sid, sizeof sid, "%.*s", (int)strcspn(p, "/"), p);
	if (!body_json(rq))
		return 400;
	if (rq->len > INSPECT_ANSWER_MAX)
		return fail(rq, 400, "invalid", "answer larger than %d bytes", INSPECT_ANSWER_MAX);
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, sid, NULL, false)))
		status = inspection_record(rq, sid);
	return tx_end(rq, status);
}

