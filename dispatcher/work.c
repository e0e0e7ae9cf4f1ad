/*
 * work — the work feed, acceptance receipts and hand-back.  A session's
 * feed hands out first the runs it was offered and has not receipted yet,
 * then new queued runs, which become offered to it; a receipt then marks
 * each run accepted or rejected for the session that owns it.
 *
 * A run its session never started goes back to the queue as a new run
 * (run_requeue()): same spec, same transaction id, a new run id `rq-` + 16
 * hex digits, linked both ways through settlements.requeued_as.  Why a new
 * id: to an executor the same run id with the same content is a duplicate
 * of what it once accepted, so the old id could be swallowed by the very
 * executor that handed it back.  The original is settled for good
 * (handed_back or requeued): the feed never hands it out again and its
 * results are refused (results.c), so the transaction is charged at most
 * once (invariant 8).  A session hands back its own runs with
 * POST /v1/sessions/{sid}/handback; settlement (settle.c) re-queues an
 * ended session's runs on its executor's answer.  A feed asked to wait
 * for work waits on the work bell (bell.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "clock.h"
#include "protocol.h"
#include "random.h"
#include "text.h"

#include "util.h"
#include "store.h"
#include "http.h"
#include "starts.h"
#include "bell.h"
#include "sessions.h"
#include "work.h"

enum { FEED_DEFAULT = 100, FEED_MAX = 1000, HANDBACK_MAX = 1000, REQUEUE_ID_TRIES = 8 };

/* Append to runs the specs selected by st (column 0 = spec); -1 on error. */
static int
append_specs(struct req *rq, sqlite3_stmt *st, json_t *runs, json_t *ids)
{
	int r;

	while ((r = db_step(&dsp_store.db, st, &rq->e)) == 1) {
		json_t *spec = json_loads(col(st, 0), 0, NULL);
		if (spec)
			json_array_append_new(runs, spec);
		if (ids)
			json_array_append_new(ids, json_string(col(st, 1)));
	}
	db_done(&dsp_store.db, st);
	return r;
}

/* Hand session sid up to max runs: its unreceipted ones, then new ones;
 * how many in *took.  With nothing to hand and wait set, no answer: 1,
 * the caller waits. */
static int
feed(struct req *rq, int64_t max, bool wait, int64_t *took)
{
	json_t *runs = json_array(), *ids = json_array(), *v;
	sqlite3_stmt *st;
	size_t i;
	int r = -1;

	st = sql_prep(&rq->e, "SELECT spec FROM runs r WHERE state='offered' AND owner_session=?"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id)"
	    " ORDER BY submit_seq LIMIT ?", "si", rq->arg, max);
	if (st && append_specs(rq, st, runs, NULL) == 0) {
		st = sql_prep(&rq->e, "SELECT spec, run_id FROM runs WHERE state='queued'"
		    " ORDER BY submit_seq LIMIT ?", "i", max - (int64_t)json_array_size(runs));
		r = st ? append_specs(rq, st, runs, ids) : -1;
	}
	json_array_foreach(ids, i, v)
		if (r == 0 && sql_exec(&rq->e, "UPDATE runs SET state='offered', owner_session=?"
		    " WHERE run_id=?", "ss", rq->arg, json_string_value(v)) < 0)
			r = -1;
	json_decref(ids);
	if (r < 0) {
		json_decref(runs);
		return internal(rq);
	}
	*took = (int64_t)json_array_size(runs);
	if (wait && *took == 0 && max > 0) {
		json_decref(runs);
		return 1;
	}
	return answer(rq, 200, json_pack("{s:o}", "runs", runs));
}

/* One look at the feed in a transaction of its own: the HTTP status, or
 * 1 (nothing to hand, and wait: the caller waits). */
static int
feed_look(struct req *rq, int64_t max, bool wait, int64_t *took)
{
	int status;

	*took = 0;
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false)))
		status = feed(rq, max, wait && !atomic_load(&dsp.stopping), took);
	if (status != 1)
		return tx_end(rq, status);
	tx_end(rq, 200);
	return 1;
}

/* GET /v1/sessions/{sid}/work?max=N&wait_ms=W: the work feed.  With W, an
 * empty feed waits up to W ms (at most 30000) for work to be queued; the
 * session is checked at every look, so a session that ends meanwhile gets
 * its 410.  A waiting request is not counted in flight (http_park). */
int
h_work(struct req *rq)
{
	const char *m = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "max");
	const char *w = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "wait_ms");
	int64_t max = FEED_DEFAULT, wait = 0, end, took = 0;
	bool rung = false;
	unsigned ends;
	int status;

	if (m && cli_parse_i64(m, 0, INT32_MAX, &max) < 0)
		return fail(rq, 400, "invalid", "max must be a number from 0 to %d", FEED_MAX);
	if (w && cli_parse_i64(w, 0, FEED_WAIT_MAX, &wait) < 0)
		return fail(rq, 400, "invalid", "wait_ms must be a number from 0 to %d", FEED_WAIT_MAX);
	if (max > FEED_MAX)
		max = FEED_MAX;
	if (wait == 0)
		return feed_look(rq, max, false, &took);
	/* the idle timeout must not end a long poll */
	MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)(wait / 1000 + 15));
	end = mono_ms() + wait;
	bell_register(true);
	/* the count before each look: an end between the look and the wait
	 * is not missed */
	while (ends = bell_ends(), (status = feed_look(rq, max, mono_ms() < end, &took)) == 1) {
		http_park(rq, true);
		rung = bell_await(end - mono_ms(), ends, rq->conn);
		http_park(rq, false);
		if (peer_gone(rq->conn)) {
			status = fail(rq, 400, "invalid", "the client went away");
			break;
		}
	}
	bell_register(false);
	if (rung && (status != 200 || took == max))
		work_ring();   /* what woke us may feed another */
	return status;
}

/* Check a receipts body; NULL if valid, else why not. */
static const char *
receipts_check(json_t *list)
{
	static const char *const outcomes[] = { "accepted", "duplicate", "conflict", "invalid", NULL };
	json_t *r;
	size_t i;

	if (!json_is_array(list))
		return "receipts must be an array";
	json_array_foreach(list, i, r) {
		const char *o = json_string_value(json_object_get(r, "outcome"));
		if (!json_is_string(json_object_get(r, "run_id")) ||
		    !json_is_string(json_object_get(r, "receipt")))
			return "each receipt needs string run_id and receipt";
		if (!o || !text_word_in(o, outcomes))
			return "outcome must be accepted, duplicate, conflict or invalid";
	}
	return NULL;
}

/* Record one receipt of session sid; add 1 to *n if it named a run the
 * session owns (or an unowned one, which it then owns) that is not
 * settled: a handed-back run stays handed back. */
static int
receipt_record(struct req *rq, json_t *r, int64_t *n)
{
	const char *o = json_string_value(json_object_get(r, "outcome"));
	const char *state = strcmp(o, "conflict") == 0 || strcmp(o, "invalid") == 0 ?
	    "rejected" : "accepted";

	if (sql_exec(&rq->e, "UPDATE runs SET receipt=?, owner_session=?,"
	    " state=CASE state WHEN 'finished' THEN 'finished' ELSE ? END"
	    " WHERE run_id=? AND (owner_session=? OR owner_session IS NULL)"
	    " AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=runs.run_id)", "sssss",
	    json_string_value(json_object_get(r, "receipt")), rq->arg, state,
	    json_string_value(json_object_get(r, "run_id")), rq->arg) < 0)
		return -1;
	*n += sqlite3_changes(dsp_store.db.h);
	return 0;
}

/* POST /v1/sessions/{sid}/receipts: acceptance receipts. */
int
h_receipts(struct req *rq)
{
	json_t *in = body_json(rq), *list = in ? json_object_get(in, "receipts") : NULL, *r;
	const char *why;
	int64_t n = 0;
	size_t i;
	int status;

	if (!in)
		return 400;
	if ((why = receipts_check(list)))
		return fail(rq, 400, "invalid", "%s", why);
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false))) {
		json_array_foreach(list, i, r)
			if (!status && receipt_record(rq, r, &n) < 0)
				status = internal(rq);
		if (!status)
			status = answer(rq, 200, json_pack("{s:I}", "recorded", (json_int_t)n));
	}
	return tx_end(rq, status);
}

/* A fresh run id for a re-queued run, one no run has: 0, or -1. */
static int
requeue_id(struct ek_err *e, char *as)
{
	sqlite3_stmt *st;
	int i, r;

	for (i = 0; i < REQUEUE_ID_TRIES; i++) {
		if (random_hex(as, 24, "rq-", 8) < 0)
			return ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
		if (!(st = sql_prep(e, "SELECT 1 FROM runs WHERE run_id=?", "s", as)))
			return -1;
		r = db_step(&dsp_store.db, st, e);
		db_done(&dsp_store.db, st);
		if (r <= 0)
			return r;
	}
	return ek_fail(e, EK_SOFTWARE, "no free run id after %d tries", REQUEUE_ID_TRIES);
}

int
run_requeue(struct ek_err *e, const char *run_id, const char *state, const char *how,
    const char *insp, char *as)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT spec, cost FROM runs WHERE run_id=?", "s", run_id);
	json_t *spec = NULL;
	char *text = NULL;
	int64_t cost = 0, now = now_ms();
	int r = st ? db_step(&dsp_store.db, st, e) : -1;

	if (r == 1) {
		spec = json_loads(col(st, 0), 0, NULL);
		cost = sqlite3_column_int64(st, 1);
	}
	db_done(&dsp_store.db, st);
	if (r == 0)
		r = ek_fail(e, EK_SOFTWARE, "re-queue: no run '%s'", run_id);
	else if (r == 1 && !spec)
		r = ek_fail(e, EK_DATAERR, "re-queue: run '%s': its stored spec is not JSON", run_id);
	else if (r == 1 && (r = requeue_id(e, as)) == 0) {
		/* the same spec, canonical as admin.c stores it, under the new id */
		json_object_set_new(spec, "run_id", json_string(as));
		if (!(text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS)))
			r = ek_fail(e, EK_OSERR, "out of memory");
		else if (sql_exec(e, "INSERT INTO runs(run_id, submit_seq, spec, cost, state,"
		    " submitted_ms) VALUES(?, (SELECT COALESCE(MAX(submit_seq), 0) + 1 FROM runs),"
		    " ?, ?, 'queued', ?)", "ssii", as, text, cost, now) < 0 ||
		    sql_exec(e, "INSERT INTO settlements(run_id, state, how, requeued_as,"
		    " inspection_id, settled_ms) VALUES(?,?,?,?,?,?)", "sssssi", run_id, state, how,
		    as, insp, now) < 0)
			r = -1;
		else
			work_ring();
	}
	free(text);
	json_decref(spec);
	return r < 0 ? -1 : 0;
}

/* Check a hand-back body: {"runs": [run id, ...]} of at most HANDBACK_MAX
 * ids; NULL if valid, else why not. */
static const char *
handback_check(json_t *in)
{
	json_t *list = json_object_get(in, "runs"), *v;
	size_t i;

	if (!json_is_object(in) || json_object_size(in) != 1 || !json_is_array(list))
		return "the body must be {\"runs\": [run id, ...]}";
	if (json_array_size(list) > HANDBACK_MAX)
		return "at most 1000 runs at once";
	json_array_foreach(list, i, v)
		if (!json_is_string(v) || !is_run_id(json_string_value(v)))
			return "each run id must be " RUN_ID_SHAPE;
	return NULL;
}

/* Was id named earlier in list, before index i? */
static bool
named_before(json_t *list, size_t i, const char *id)
{
	while (i-- > 0)
		if (strcmp(json_string_value(json_array_get(list, i)), id) == 0)
			return true;
	return false;
}

/* Hand back run id of session sid into the answer's lists; 0 or -1. */
static int
handback_one(struct req *rq, const char *sid, const char *id, json_t *out)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT r.owner_session, " RUN_STATE ","
	    " f.requeued_as, EXISTS(SELECT 1 FROM results x WHERE x.run_id=r.run_id), f.how"
	    " FROM runs r LEFT JOIN settlements f ON f.run_id=r.run_id WHERE r.run_id=?", "s", id);
	char owner[64] = "", state[16] = "", as[24] = "", how[32] = "";
	const char *why = NULL;
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1, result = 0;

	if (r == 1) {
		db_col_text(st, 0, owner, sizeof owner);
		db_col_text(st, 1, state, sizeof state);
		db_col_text(st, 2, as, sizeof as);
		result = sqlite3_column_int(st, 3);
		db_col_text(st, 4, how, sizeof how);
	}
	db_done(&dsp_store.db, st);
	if (r < 0)
		return -1;
	if (r == 0)
		why = "unknown_run";
	else if (strcmp(owner, sid) != 0)
		why = "not_yours";
	else if (result || strcmp(state, "finished") == 0)
		why = "finished";
	else if (strcmp(state, "handed_back") == 0)
		;                              /* handed back before: the same answer again */
	else if (strcmp(state, "offered") != 0 && strcmp(state, "accepted") != 0)
		why = state;                   /* rejected, requeued or abandoned */
	else if (how[0])
		why = "settled";               /* answered as started: it stays */
	else if ((r = run_known_started(&rq->e, id)) != 0) {
		if (r < 0)
			return -1;
		why = "started";               /* a start notice or a report says it ran */
	} else if (run_requeue(&rq->e, id, "handed_back", "handback", NULL, as) < 0)
		return -1;
	if (why)
		r = json_array_append_new(json_object_get(out, "not_handed_back"),
		    json_pack("{s:s, s:s}", "run_id", id, "why", why));
	else if ((r = json_array_append_new(json_object_get(out, "handed_back"),
	    json_string(id))) == 0)
		r = json_array_append_new(json_object_get(out, "requeued"),
		    json_pack("{s:s, s:s}", "run_id", id, "as", as));
	return r < 0 ? ek_fail(&rq->e, EK_OSERR, "out of memory") : 0;
}

/* POST /v1/sessions/{sid}/handback {"runs":[...]}: the session hands back
 * runs it accepted and never started; each is re-queued as a new run of
 * its transaction.  Idempotent: handing back again answers the same. */
int
h_handback(struct req *rq)
{
	json_t *in = body_json(rq), *list, *out, *v;
	const char *why;
	size_t i;
	int status;

	if (!in)
		return 400;
	if ((why = handback_check(in)))
		return fail(rq, 400, "invalid", "%s", why);
	list = json_object_get(in, "runs");
	if (tx_begin(rq) < 0)
		return 500;
	if ((status = sess_gate(rq, rq->arg, NULL, false)))
		return tx_end(rq, status);
	out = json_pack("{s:[], s:[], s:[]}", "handed_back", "requeued", "not_handed_back");
	json_array_foreach(list, i, v)
		if (out && !named_before(list, i, json_string_value(v)) &&
		    handback_one(rq, rq->arg, json_string_value(v), out) < 0) {
			json_decref(out);
			return tx_end(rq, internal(rq));
		}
	return tx_end(rq, answer(rq, 200, out));
}
