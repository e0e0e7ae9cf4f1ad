/*
 * work — the work feed and acceptance receipts.  A session's feed hands
 * out first the runs it was offered and has not receipted yet, then new
 * queued runs, which become offered to it; a receipt then marks each run
 * accepted or rejected for the session that owns it.
 */
#include <string.h>

#include "cli.h"
#include "dispatcher.h"

enum { FEED_DEFAULT = 100, FEED_MAX = 1000 };

/* Append to runs the specs selected by st (column 0 = spec); -1 on error. */
static int
append_specs(struct req *rq, sqlite3_stmt *st, json_t *runs, json_t *ids)
{
	int r;

	while ((r = db_step(&dsp.store.db, st, &rq->e)) == 1) {
		json_t *spec = json_loads(col(st, 0), 0, NULL);
		if (spec)
			json_array_append_new(runs, spec);
		if (ids)
			json_array_append_new(ids, json_string(col(st, 1)));
	}
	db_done(&dsp.store.db, st);
	return r;
}

/* Hand session sid up to max runs: its unreceipted ones, then new ones. */
static int
feed(struct req *rq, int64_t max)
{
	json_t *runs = json_array(), *ids = json_array(), *v;
	sqlite3_stmt *st;
	size_t i;
	int r = -1;

	st = sql_prep(&rq->e, "SELECT spec FROM runs WHERE state='offered' AND owner_session=?"
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
	return answer(rq, 200, json_pack("{s:o}", "runs", runs));
}

/* GET /v1/sessions/{sid}/work?max=N: the work feed. */
int
h_work(struct req *rq)
{
	const char *m = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "max");
	int64_t max = FEED_DEFAULT;
	int status;

	if (m && cli_parse_i64(m, 0, INT32_MAX, &max) < 0)
		return fail(rq, 400, "invalid", "max must be a number from 0 to %d", FEED_MAX);
	if (max > FEED_MAX)
		max = FEED_MAX;
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false)))
		status = feed(rq, max);
	return tx_end(rq, status);
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
		if (!o || !one_of(o, outcomes))
			return "outcome must be accepted, duplicate, conflict or invalid";
	}
	return NULL;
}

/* Record one receipt of session sid; add 1 to *n if it named a run the
 * session owns (or an unowned one, which it then owns). */
static int
receipt_record(struct req *rq, json_t *r, int64_t *n)
{
	const char *o = json_string_value(json_object_get(r, "outcome"));
	const char *state = strcmp(o, "conflict") == 0 || strcmp(o, "invalid") == 0 ?
	    "rejected" : "accepted";

	if (sql_exec(&rq->e, "UPDATE runs SET receipt=?, owner_session=?,"
	    " state=CASE state WHEN 'finished' THEN 'finished' ELSE ? END"
	    " WHERE run_id=? AND (owner_session=? OR owner_session IS NULL)", "sssss",
	    json_string_value(json_object_get(r, "receipt")), rq->arg, state,
	    json_string_value(json_object_get(r, "run_id")), rq->arg) < 0)
		return -1;
	*n += sqlite3_changes(dsp.store.db.h);
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

