/*
 * show — inspect_show() (inspect.h): everything stored about one run, for
 * `exec-inspect show`.  Every row that may tell something of the run is
 * read in one read transaction: its acceptance, execution row, retained
 * result, receipt, run record (what is left once housekeeping removed the
 * others, schema steps 12 and 15) and hand-back.  The verdict names the
 * most telling of them; story.c gathers the story out of them all.
 */
#include <stdio.h>
#include <string.h>

#include "inspect.h"
#include "inspect_int.h"
#include "story.h"
#include "timefmt.h"

/* The rows, by the key each gets in the object; NULL: none stored. */
static const char *const show_sql[][2] = {
	{ "accepted", "SELECT txn_id, incarnation, session_id, receipt, accepted_at "
	    "FROM accepts WHERE run_id = ?1" },
	{ "run", "SELECT state, txn_id, incarnation, session_id, program, args, env, cwd, policy, "
	    "due_at, timeout_ms, started_at, start_marker, sup_pid, sup_start, guest_pid, cancel_at, "
	    "unknown_at, unknown_why FROM runs WHERE run_id = ?1" },
	{ "result", "SELECT incarnation, session_id, outcome, exit_code, wait_status, message, "
	    "chosen_at, attempts, last_attempt_at, refused, refused_cause, last_diag, claim_owner, "
	    "claim_until, CAST(body AS TEXT) AS body, due_at, started_at, start_marker, program, args, "
	    "stdout_dropped, stderr_dropped FROM results WHERE run_id = ?1" },
	{ "receipt", "SELECT incarnation, session_id, outcome, exit_code, acked_at, record_id, "
	    "attempts, started_at, chosen_at, message, stdout_dropped, stderr_dropped "
	    "FROM receipts WHERE run_id = ?1" },
	{ "record", "SELECT known, txn_id, incarnation, session_id, outcome, exit_code, started_at, "
	    "chosen_at, acked_at, message, stdout_dropped, stderr_dropped, evidence, recorded_at, "
	    "program, args, env_names, cwd, timeout_ms FROM run_records WHERE run_id = ?1" },
	{ "handback", "SELECT incarnation, session_id, asked_at, acked_at, requeued_as, refused_why "
	    "FROM handbacks WHERE run_id = ?1" },
};

#define NROWS (sizeof show_sql / sizeof show_sql[0])
#define SHOW_REDACTED "(value not shown)"

/* One row selected by ?1 = key (and ?2 = key2) as an object, or JSON null. */
static int
one_row(struct state *st, const char *sql, const char *key, const char *key2, json_t **out,
    struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, sql, e);
	int rc;

	*out = NULL;
	if (!q)
		return -1;
	db_bind_text(q, 1, key);
	if (key2)
		db_bind_text(q, 2, key2);
	rc = db_step(&st->db, q, e);
	if (rc >= 0)
		*out = rc == 1 ? inspect_row_json(q) : json_null();
	db_done(&st->db, q);
	if (rc >= 0 && !*out)
		return ek_fail(e, EK_OSERR, "out of memory");
	return rc < 0 ? -1 : 0;
}

/* The binding the rows carry and what became of its session. */
static int
show_binding(struct state *st, json_t *o, struct ek_err *e)
{
	struct session cur;
	json_t *src = NULL, *sess;
	const char *inc, *sid;
	size_t i;
	int rc;

	for (i = 0; i < NROWS && !json_is_object(src); i++)
		src = json_object_get(o, show_sql[i][0]);
	inc = json_string_value(json_object_get(src, "incarnation"));
	sid = json_string_value(json_object_get(src, "session_id"));
	if (!inc || !sid)
		return 0;   /* stays null */
	if ((rc = session_current(st, &cur, e)) < 0 ||
	    one_row(st, "SELECT status, opened_at, ended_at FROM sessions WHERE incarnation = ?1 "
	    "AND session_id = ?2", inc, sid, &sess, e) < 0)
		return -1;
	json_object_set_new(o, "binding", json_pack("{s:s, s:s, s:O, s:b}", "incarnation", inc,
	    "session_id", sid, "session_status", json_is_object(sess) ? json_object_get(sess, "status") :
	    json_null(), "current", rc == 1 && strcmp(cur.b.incarnation, inc) == 0 &&
	    strcmp(cur.b.session_id, sid) == 0));
	json_decref(sess);
	return 0;
}

static const char *
str(json_t *row, const char *key)
{
	return json_string_value(json_object_get(row, key));
}

/* The hand-back in words: "handed back at T, re-queued as X", or what
 * stands in its way. */
static const char *
handback_detail(json_t *h, char *d, size_t n)
{
	char at[64];
	json_t *acked = json_object_get(h, "acked_at");

	if (json_is_integer(acked))
		snprintf(d, n, "handed back at %s%s%s; never started here",
		    timefmt_when(at, sizeof at, json_integer_value(acked)),
		    str(h, "requeued_as") ? ", re-queued as " : "",
		    str(h, "requeued_as") ? str(h, "requeued_as") : "");
	else if (str(h, "refused_why"))
		snprintf(d, n, "marked for hand-back at %s, but the dispatcher kept it (%s); never "
		    "started here", timefmt_when(at, sizeof at,
		    json_integer_value(json_object_get(h, "asked_at"))), str(h, "refused_why"));
	else
		snprintf(d, n, "marked for hand-back at %s, not acknowledged yet; never starts here",
		    timefmt_when(at, sizeof at, json_integer_value(json_object_get(h, "asked_at"))));
	return "handed_back";
}

/* What a run record says: "finished (exited 0); EVIDENCE at T". */
static const char *
record_detail(json_t *r, char *d, size_t n)
{
	char at[64];
	const char *known = str(r, "known");

	timefmt_when(at, sizeof at, json_integer_value(json_object_get(r, "recorded_at")));
	if (known && strcmp(known, "unknown") == 0) {
		snprintf(d, n, "unknown outcome; %s at %s", str(r, "evidence"), at);
		return "unknown";
	}
	snprintf(d, n, "finished (%s %" JSON_INTEGER_FORMAT "); %s at %s",
	    str(r, "outcome") ? str(r, "outcome") : "outcome not recorded",
	    json_integer_value(json_object_get(r, "exit_code")), str(r, "evidence"), at);
	return "finished";
}

/* Name what the stored rows say about the run (inspect.h: verdict). */
static void
show_verdict(json_t *o)
{
	json_t *run = json_object_get(o, "run"), *res = json_object_get(o, "result");
	json_t *rcpt = json_object_get(o, "receipt"), *hb = json_object_get(o, "handback");
	json_t *rec = json_object_get(o, "record");
	const char *state = str(run, "state"), *v;
	char d[1024];

	if (state && strcmp(state, "unknown") == 0) {
		v = "unknown";
		snprintf(d, sizeof d, "unknown outcome: started, but its supervisor vanished without "
		    "choosing a result; kept as evidence, never re-run");
	} else if (json_is_object(rcpt)) {
		v = "acknowledged";
		snprintf(d, sizeof d, "acknowledged (receipt: dispatcher record %" JSON_INTEGER_FORMAT ")",
		    json_integer_value(json_object_get(rcpt, "record_id")));
	} else if (json_is_true(json_object_get(res, "refused"))) {
		v = "refused";
		snprintf(d, sizeof d, "refused by the dispatcher (%s); kept as evidence, never retried",
		    str(res, "refused_cause") ? str(res, "refused_cause") : "no cause recorded");
	} else if (json_is_object(res)) {
		v = "retained";
		snprintf(d, sizeof d, "result retained, not acknowledged yet (%" JSON_INTEGER_FORMAT
		    " delivery attempts)", json_integer_value(json_object_get(res, "attempts")));
	} else if (json_is_object(hb)) {
		v = handback_detail(hb, d, sizeof d);
	} else if (state) {
		v = state;
		snprintf(d, sizeof d, "%s", strcmp(state, "queued") == 0 ? "accepted, not started yet" :
		    "started, no result chosen yet");
	} else if (json_is_object(rec)) {
		v = record_detail(rec, d, sizeof d);
	} else {
		v = "accepted";
		snprintf(d, sizeof d, "accepted, but no execution row, result, receipt or record is "
		    "stored");
	}
	json_object_set_new(o, "verdict", json_string(v));
	json_object_set_new(o, "detail", json_string(d));
}

/* The run's story (story.h), with the accepted spec for what the rows
 * no longer hold. */
static int
show_story(struct state *st, const char *run_id, json_t *o, struct ek_err *e)
{
	json_t *spec;
	int rc;

	if (one_row(st, "SELECT content FROM accepts WHERE run_id = ?1", run_id, NULL, &spec, e) < 0)
		return -1;
	rc = story_add(st, o, json_string_value(json_object_get(spec, "content")));
	json_decref(spec);
	return rc < 0 ? ek_fail(e, EK_OSERR, "out of memory") : 0;
}

/* The execution row's environment with its values left out: they may be
 * secrets, and show is read by whoever may read the state.  The names say
 * what was set. */
static int
redact_env(json_t *run)
{
	json_t *env = json_object_get(run, "env"), *v;
	const char *k;

	json_object_foreach(env, k, v)
		if (json_object_set_new(env, k, json_string(SHOW_REDACTED)) < 0)
			return -1;
	return 0;
}

static int
show_snapshot(struct state *st, const char *run_id, json_t *o, struct ek_err *e)
{
	json_t *v;
	size_t i;

	for (i = 0; i < NROWS; i++) {
		if (one_row(st, show_sql[i][1], run_id, NULL, &v, e) < 0)
			return -1;
		json_object_set_new(o, show_sql[i][0], v);
	}
	if (redact_env(json_object_get(o, "run")) < 0)
		return ek_fail(e, EK_OSERR, "out of memory");
	return show_binding(st, o, e) < 0 ? -1 : show_story(st, run_id, o, e);
}

int
inspect_show(struct state *st, const char *run_id, json_t **out, struct ek_err *e)
{
	json_t *o = json_pack("{s:s, s:n, s:n, s:n}", "run_id", run_id, "verdict", "detail", "binding");
	size_t i;
	int rc;

	*out = NULL;
	if (!o)
		return ek_fail(e, EK_OSERR, "out of memory");
	if ((rc = db_begin_read(&st->db, e)) == 0)
		rc = show_snapshot(st, run_id, o, e);
	db_rollback(&st->db);
	for (i = 0; rc == 0 && i < NROWS; i++)
		if (json_is_object(json_object_get(o, show_sql[i][0])))
			break;
	if (rc < 0 || i == NROWS) {
		json_decref(o);
		return rc;   /* an error, or never recorded */
	}
	show_verdict(o);
	*out = o;
	return 0;
}
