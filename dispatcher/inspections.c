/*
 * inspections — a client's InspectRetainedRun, relayed.
 *
 * The dispatcher never calls the executor, so a client's lookup waits in
 * `inspections` until the executor holding the named session pulls it
 * (its heartbeat says how many wait), answers it locally and posts the
 * answer, which is recorded once (invariant 5).  The run id is stored as
 * the client sent it: judging it is the executor's business, so a
 * malformed id comes back as an ERROR answer, never as ABSENT.
 *
 * A client is someone an operator issued a token to (POST /admin/clients,
 * in admin.c).  client_gate() is the one check every client request
 * passes: the Bearer token hashes to an active client's.  The client
 * names the session it asks about, and only the client that asked an
 * inspection reads it (invariant 6): to any other it does not exist.
 *
 * The dispatcher asks too (settle_ask() in asks.c, as the reserved
 * client cli-settlement): its inspections wait in the same table, are
 * listed and answered exactly like a client's.  No client reads them.
 * An answer's endpoint is settle.c's, above this file: it records the
 * answer with inspection_answer_record() and then lets settlement decide
 * on it, in the same transaction.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "random.h"
#include "sha256.h"
#include "text.h"

#include "util.h"
#include "store.h"
#include "http.h"
#include "asks.h"
#include "sessions.h"
#include "inspections.h"

enum { INSPECT_RUN_MAX = 4096, INSPECT_SESSION_MAX = 128,
	INSPECT_WAIT_MAX = 30000, INSPECT_POLL_MS = 50, INSPECT_ANSWER_MAX = 16384,
	CLIENT_ID_SIZE = 24 };

/* Admit a client's request: its Bearer token hashes to an active client's
 * (only the hash is stored).  0 with the client's id in client, else the
 * error status (answer set).  Inside a transaction. */
static int
client_gate(struct req *rq, char *client, size_t n)
{
	const char *token = req_bearer(rq);
	char sha[SHA256_HEX_LEN + 1], status[16] = "";
	sqlite3_stmt *st;
	int r;

	if (!token)
		return fail(rq, 401, "unauthorized", "a client token is required"
		    " (Authorization: Bearer)");
	sha256_hex(token, strlen(token), sha);
	st = sql_prep(&rq->e, "SELECT client_id, status FROM clients WHERE token_sha256=?",
	    "s", sha);
	r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;
	if (r == 1) {
		db_col_text(st, 0, client, n);
		db_col_text(st, 1, status, sizeof status);
	}
	db_done(&dsp_store.db, st);
	if (r < 0)
		return internal(rq);
	if (r == 0)
		return fail(rq, 401, "unauthorized", "the client token is not known");
	if (strcmp(status, "active") != 0)
		return fail(rq, 401, "unauthorized", "the client token is %s", status);
	return 0;
}

/* Check a client's inspection request: 0, or 400 (answer set). */
static int
inspection_check(struct req *rq, json_t *in)
{
	json_t *run = json_object_get(in, "run_id"), *sid = json_object_get(in, "session_id"), *v;
	const char *k;

	if (!json_is_object(in))
		return fail(rq, 400, "invalid", "body must be a JSON object");
	json_object_foreach(in, k, v)
		if (strcmp(k, "executor_id") == 0)   /* it named no session: the caller must */
			return fail(rq, 400, "invalid", "'executor_id' is not accepted: name the"
			    " session with 'session_id'");
		else if (strcmp(k, "run_id") != 0 && strcmp(k, "session_id") != 0)
			return fail(rq, 400, "invalid", "unknown field '%.64s' in inspection", k);
	if (!json_is_string(run) || json_string_length(run) > INSPECT_RUN_MAX)
		return fail(rq, 400, "invalid", "'run_id' must be a string of at most %d bytes",
		    INSPECT_RUN_MAX);
	if (!json_is_string(sid) || json_string_length(sid) < 1 ||
	    json_string_length(sid) > INSPECT_SESSION_MAX ||
	    strlen(json_string_value(sid)) != json_string_length(sid))
		return fail(rq, 400, "invalid", "'session_id' must name the session: a string of"
		    " 1..%d bytes", INSPECT_SESSION_MAX);
	return 0;
}

/* Session sid, which the request names, must be current: 0, or the error
 * status (answer set). */
static int
inspection_session(struct req *rq, const char *sid)
{
	struct sess s;
	int r = sess_load(rq, sid, &s);

	if (r < 0)
		return internal(rq);
	if (r == 0)
		return fail(rq, 404, "unknown_session", "no session '%s'", sid);
	return strcmp(s.status, "current") == 0 ? 0 : fail_over(rq, s.status);
}

/* POST /v1/inspections: a client asks, through the executor holding the
 * current session it names, what that executor stores about a run. */
int
h_inspection_new(struct req *rq)
{
	json_t *in;
	const char *sid;
	char id[32], client[CLIENT_ID_SIZE];
	int64_t pending;
	int status;

	if (random_hex(id, sizeof id, "insp-", 8) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	if (tx_begin(rq) < 0)
		return 500;
	if ((status = client_gate(rq, client, sizeof client)))
		return tx_end(rq, status);
	if (!(in = body_json(rq)))
		return tx_end(rq, 400);
	if ((status = inspection_check(rq, in)))
		return tx_end(rq, status);
	sid = json_string_value(json_object_get(in, "session_id"));
	if ((status = inspection_session(rq, sid)))
		return tx_end(rq, status);
	if ((pending = inspections_pending(&rq->e, sid)) < 0)
		return tx_end(rq, internal(rq));
	if (pending >= INSPECT_PENDING_MAX)   /* the executor answers 32 a heartbeat */
		return tx_end(rq, fail(rq, 429, "overloaded", "%d inspections already wait for "
		    "session '%s'", INSPECT_PENDING_MAX, sid));
	if (sql_exec(&rq->e, "INSERT INTO inspections(inspection_id, session_id, run_id, status,"
	    " created_ms) VALUES(?,?,?,'pending',?)", "sssi", id, sid,
	    json_string_value(json_object_get(in, "run_id")), now_ms()) < 0 ||
	    sql_exec(&rq->e, "INSERT INTO inspection_clients(inspection_id, client_id)"
	    " VALUES(?,?)", "ss", id, client) < 0)
		return tx_end(rq, internal(rq));
	return tx_end(rq, answer(rq, 202, json_pack("{s:s, s:s, s:s}", "inspection_id", id,
	    "status", "pending", "session_id", sid)));
}

/* Set rq->out to inspection rq->arg of client as it stands: 200 (*done
 * once it is answered, or can no longer be), 404 (none, or another
 * client's), or 500.  A pending inspection whose session is over is
 * "unanswered": the session gate refuses every answer from it now, so
 * waiting longer cannot help the client. */
static int
inspection_read(struct req *rq, const char *client, bool *done)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT i.run_id, i.session_id, CASE WHEN"
	    " i.status='pending' AND IFNULL(" SESSION_STATUS("s.") ", '')<>'current'"
	    " THEN 'unanswered' ELSE i.status END, i.answer, i.answered_ms, " SESSION_STATUS("s.")
	    " FROM inspections i"
	    " JOIN inspection_clients c ON c.inspection_id=i.inspection_id AND c.client_id=?"
	    " LEFT JOIN sessions s ON s.session_id=i.session_id WHERE i.inspection_id=?",
	    "ss", client, rq->arg);
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;
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
	db_done(&dsp_store.db, st);
	if (r < 0)
		return internal(rq);
	if (r == 0)   /* another client's inspection does not exist for this one */
		return fail(rq, 404, "unknown_inspection", "no inspection '%s'", rq->arg);
	return answer(rq, 200, o);
}

/* GET /v1/inspections/{id}?wait_ms=N: the client's own inspection, once
 * answered or after N ms (at most 30000), whichever is first.  The wait
 * bounds only this request: the inspection stays, and a later request
 * reads it.  The token is checked at every look, so a revoked client's
 * wait ends with 401. */
int
h_inspection_get(struct req *rq)
{
	const char *w = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "wait_ms");
	int64_t wait = 0, end, left;
	char client[CLIENT_ID_SIZE];
	bool bad = w && cli_parse_i64(w, 0, INSPECT_WAIT_MAX, &wait) < 0, done = false;
	int status;

	if (bad)
		wait = 0;
	else if (wait > 0)   /* the idle timeout must not end a long poll */
		MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT,
		    (unsigned int)(wait / 1000 + 15));
	end = mono_ms() + wait;
	for (;;) {
		if (tx_read(rq) < 0)
			return 500;
		/* the token first: a stranger learns nothing, not even a 400 */
		status = client_gate(rq, client, sizeof client);
		if (!status && bad)
			status = fail(rq, 400, "invalid", "wait_ms must be a number from 0 to %d",
			    INSPECT_WAIT_MAX);
		else if (!status)
			status = inspection_read(rq, client, &done);
		status = tx_end(rq, status);
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

	if (tx_read(rq) < 0)
		return 500;
	if ((status = sess_gate(rq, rq->arg, NULL, false)))
		return tx_end(rq, status);
	out = json_object();
	if (rows_into(&rq->e, out, "inspections", "SELECT inspection_id, run_id, session_id"
	    " FROM inspections WHERE session_id=? AND status='pending'"
	    " ORDER BY created_ms, rowid LIMIT 32", rq->arg, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

enum { EVIDENCE_MAX = 512 };   /* INSPECT_EVIDENCE_MAX less its NUL, and a margin */

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
	 * cannot reach the store or a client by this route; a FOUND answer
	 * from a run's record may say, bounded, where its evidence went */
	json_object_foreach(a, k, v) {
		if (allowed == found && strcmp(k, "evidence") == 0) {
			if (!json_is_string(v) || json_string_length(v) > EVIDENCE_MAX)
				return "evidence must be a string of at most 512 bytes";
			continue;
		}
		if (!text_word_in(k, allowed))
			return "a field the answer's outcome does not have";
	}
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

	if (!json_is_object(a) || !o || !text_word_in(o, outcomes))
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
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;

	if (r == 1) {
		*answered = strcmp(col(st, 1), "answered") == 0;
		if (!(*run_id = strdup(col(st, 0))))
			r = ek_fail(&rq->e, EK_OSERR, "out of memory");
	}
	db_done(&dsp_store.db, st);
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

int
inspection_answer_check(struct req *rq, char *sid, size_t n)
{
	snprintf(sid, n, "%s", rq->parent);   /* the route's first "*" */
	if (!body_json(rq))
		return 400;
	if (rq->len > INSPECT_ANSWER_MAX)
		return fail(rq, 400, "invalid", "answer larger than %d bytes", INSPECT_ANSWER_MAX);
	return 0;
}

int
inspection_answer_record(struct req *rq, const char *sid)
{
	int status = sess_gate(rq, sid, NULL, false);

	return status ? status : inspection_record(rq, sid);
}
