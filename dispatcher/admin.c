/*
 * admin — the /admin/ endpoints tests steer the dispatcher with: submit
 * runs and read them back (with their reports and ledger), a summary,
 * force a session's state or lease, issue and revoke the clients of the
 * inspection API, and queue or clear injected faults.  Only the holder of
 * the admin token reaches them (auth.c, invariant 11).  A run's env may hold
 * secrets: its values are shown only when asked for (?reveal_env=1).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "protocol.h"
#include "random.h"
#include "sha256.h"
#include "text.h"

#include "util.h"
#include "store.h"
#include "faults.h"
#include "gate.h"
#include "http.h"
#include "bell.h"
#include "results.h"
#include "admin.h"

enum { CLIENT_NAME_MAX = 128 };

/* Check one field of a RUNSPEC; NULL if valid, else why not. */
static const char *
spec_field(const char *k, json_t *v)
{
	const char *key;
	json_t *x;
	size_t i;

	if (!strcmp(k, "run_id"))
		return json_is_string(v) && is_run_id(json_string_value(v)) ? NULL :
		    "run_id must be " RUN_ID_SHAPE;
	if (!strcmp(k, "txn_id"))
		return json_is_string(v) && json_string_length(v) >= 1 && json_string_length(v) <= TXN_ID_MAX ?
		    NULL : "txn_id must be a string of 1.." PROTO_STR(TXN_ID_MAX) " bytes";
	if (!strcmp(k, "program"))
		return json_is_string(v) && json_string_length(v) ? NULL : "program must be a non-empty string";
	if (!strcmp(k, "cwd"))
		return json_is_string(v) ? NULL : "cwd must be a string";
	if (!strcmp(k, "due_at"))
		return json_is_integer(v) && json_integer_value(v) >= 0 ? NULL : "due_at must be an integer";
	if (!strcmp(k, "timeout_ms"))
		return json_is_integer(v) && json_integer_value(v) > 0 ? NULL : "timeout_ms must be a positive integer";
	if (!strcmp(k, "args")) {
		if (!json_is_array(v))
			return "args must be an array of strings";
		json_array_foreach(v, i, x)
			if (!json_is_string(x))
				return "args must be an array of strings";
		return NULL;
	}
	if (!strcmp(k, "env")) {
		if (!json_is_object(v))
			return "env must be an object of strings";
		json_object_foreach(v, key, x)
			if (!json_is_string(x))
				return "env must be an object of strings";
		return NULL;
	}
	if (!strcmp(k, "policy")) {
		x = json_object_get(v, "cost");
		if (!json_is_object(v) || (x && (!json_is_integer(x) || json_integer_value(x) < 0)))
			return "policy must be an object; policy.cost a non-negative integer";
		return NULL;
	}
	return "unknown field in run spec";
}

/* Check a RUNSPEC (adding "args":[] when absent); NULL if valid, else why. */
static const char *
spec_check(json_t *spec)
{
	const char *k, *why;
	json_t *v;

	if (!json_is_object(spec))
		return "a run spec must be an object";
	json_object_foreach(spec, k, v)
		if ((why = spec_field(k, v)))
			return why;
	if (!json_object_get(spec, "run_id") || !json_object_get(spec, "txn_id") ||
	    !json_object_get(spec, "program"))
		return "run_id, txn_id and program are required";
	if (!json_object_get(spec, "args"))
		json_object_set_new(spec, "args", json_array());
	return NULL;
}

/* Store one checked spec: 0 new, 1 identical duplicate, 2 conflict, -1 error. */
static int
spec_store(struct req *rq, json_t *spec, int64_t cost)
{
	const char *run_id = json_string_value(json_object_get(spec, "run_id"));
	char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	sqlite3_stmt *st = text ? sql_prep(&rq->e, "SELECT spec FROM runs WHERE run_id=?", "s", run_id) : NULL;
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;

	if (r == 1)
		r = strcmp(col(st, 0), text) == 0 ? 1 : 2;
	db_done(&dsp_store.db, st);
	if (r == 0 && sql_exec(&rq->e, "INSERT INTO runs(run_id, submit_seq, spec, cost, state,"
	    " submitted_ms) VALUES(?, (SELECT COALESCE(MAX(submit_seq), 0) + 1 FROM runs), ?, ?,"
	    " 'queued', ?)", "ssii", run_id, text, cost, now_ms()) < 0)
		r = -1;
	free(text);
	return r;
}

/* Store every spec of list in one transaction; the HTTP status. */
static int
submit_all(struct req *rq, json_t *list)
{
	json_t *spec, *cost;
	int64_t n = 0, dups = 0;
	size_t i;
	int r = 0;

	if (tx_begin(rq) < 0)
		return 500;
	json_array_foreach(list, i, spec) {
		cost = json_object_get(json_object_get(spec, "policy"), "cost");
		if ((r = spec_store(rq, spec, cost ? json_integer_value(cost) : 0)) < 0)
			return tx_end(rq, internal(rq));
		if (r == 2) {
			rq->rollback = true;
			return tx_end(rq, fail(rq, 409, "conflict", "run '%s' was submitted with a"
			    " different spec", json_string_value(json_object_get(spec, "run_id"))));
		}
		n += r == 0;
		dups += r == 1;
	}
	if (n > 0)
		work_ring();   /* a feed waiting for work answers at once */
	return tx_end(rq, answer(rq, 200, json_pack("{s:I, s:I}", "submitted", (json_int_t)n,
	    "duplicates", (json_int_t)dups)));
}

/* POST /admin/runs: submit one RUNSPEC or {"runs":[...]}, all or nothing. */
int
h_submit(struct req *rq)
{
	json_t *in = body_json(rq), *list, *spec;
	const char *why;
	size_t i;
	int status = 0;

	if (!in)
		return 400;
	list = json_object_get(in, "runs");
	if (list && json_object_size(in) == 1 && json_is_array(list))
		json_incref(list);
	else
		list = json_pack("[O]", in);
	json_array_foreach(list, i, spec)
		if (!status && (why = spec_check(spec)))
			status = fail(rq, 400, "invalid", "run %zu: %s", i, why);
	if (!status)
		status = submit_all(rq, list);
	json_decref(list);
	return status;
}

/* GET /admin/runs: every run in submit order. */
int
h_list_runs(struct req *rq)
{
	static const char *const names[] = { "run_id", "state", "owner_session", "record_id", NULL };
	json_t *out = json_object();

	if (tx_read(rq) < 0) {
		json_decref(out);
		return 500;
	}
	if (rows_into(&rq->e, out, "runs", "SELECT r.run_id, " RUN_STATE ", r.owner_session, s.record_id"
	    " FROM runs r LEFT JOIN results s ON s.run_id=r.run_id ORDER BY r.submit_seq",
	    NULL, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* Build the record of run rq->arg: 1 found, 0 unknown, -1 error. */
static int
run_record(struct req *rq, json_t **out)
{
	static const char *const report_cols[] = { "seq", "session_id", "body_sha256", "status",
		"error", "fault", NULL };
	static const char *const ledger_cols[] = { "charge", "at", NULL };
	static const char *const ask_cols[] = { "inspection_id", "session_id", "status",
		"asked_ms", "outcome", NULL };
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT " RUN_STATE ", r.owner_session, r.receipt,"
	    " r.spec, s.body, s.record_id, r.max_in_flight, f.requeued_as,"
	    " (SELECT p.run_id FROM settlements p WHERE p.requeued_as=r.run_id), f.how"
	    " FROM runs r LEFT JOIN results s ON s.run_id=r.run_id"
	    " LEFT JOIN settlements f ON f.run_id=r.run_id WHERE r.run_id=?", "s", rq->arg);
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;

	if (r == 1)
		*out = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o}",
		    "run_id", rq->arg,
		    "state", col_json(st, 0), "owner_session", col_json(st, 1),
		    "receipt", col_json(st, 2), "spec", json_loads(col(st, 3), 0, NULL),
		    "result", col(st, 4) ? json_loads(col(st, 4), 0, NULL) : json_null(),
		    "record_id", col(st, 5) ? json_integer(sqlite3_column_int64(st, 5)) : json_null(),
		    "max_in_flight", (json_int_t)sqlite3_column_int64(st, 6),
		    "requeued_as", col_json(st, 7), "requeued_from", col_json(st, 8),
		    "settled", col_json(st, 9));
	db_done(&dsp_store.db, st);
	if (r == 1 && (rows_into(&rq->e, *out, "reports", "SELECT seq, session_id, body_sha256, status,"
	    " error, fault FROM reports WHERE run_id=? ORDER BY seq", rq->arg, report_cols) < 0 ||
	    rows_into(&rq->e, *out, "ledger", "SELECT charge, at FROM ledger WHERE run_id=?",
	    rq->arg, ledger_cols) < 0 ||
	    rows_into(&rq->e, *out, "asks", "SELECT a.inspection_id, i.session_id, i.status, a.asked_ms,"
	    " json_extract(i.answer, '$.outcome') FROM settlement_asks a JOIN inspections i"
	    " ON i.inspection_id=a.inspection_id WHERE a.run_id=? ORDER BY a.asked_ms, a.rowid",
	    rq->arg, ask_cols) < 0))
		r = -1;
	return r;
}

/* Replace every value of the spec's env with "[redacted]", the names kept,
 * unless the request asks for them (?reveal_env=1). */
static void
env_redact(struct req *rq, json_t *run)
{
	json_t *env = json_object_get(json_object_get(run, "spec"), "env"), *v;
	const char *reveal = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
	    "reveal_env");
	const char *k;

	if (reveal && strcmp(reveal, "1") == 0)
		return;
	json_object_foreach(env, k, v)
		json_object_set_new(env, k, json_string("[redacted]"));
}

/* GET /admin/runs/{id}: one run's record, reports and ledger. */
int
h_show_run(struct req *rq)
{
	json_t *run = NULL;
	int r;

	if (tx_read(rq) < 0)
		return 500;
	r = run_record(rq, &run);
	if (r < 0) {
		json_decref(run);
		return tx_end(rq, internal(rq));
	}
	if (r == 0)
		return tx_end(rq, fail(rq, 404, "unknown_run", "no run '%s'", rq->arg));
	env_redact(rq, run);
	return tx_end(rq, answer(rq, 200, run));
}

/* Run sql returning one integer; -1 on error. */
static int64_t
count(struct req *rq, const char *sql)
{
	sqlite3_stmt *st = sql_prep(&rq->e, sql, "");
	int64_t n = st && db_step(&dsp_store.db, st, &rq->e) == 1 ?
	    sqlite3_column_int64(st, 0) : -1;

	db_done(&dsp_store.db, st);
	return n;
}

/* Count the rows of sql (text, count) into obj[text]; 0 or -1. */
static int
count_into(struct req *rq, json_t *obj, const char *sql)
{
	sqlite3_stmt *st = sql_prep(&rq->e, sql, "");
	int r = -1;

	while (st && (r = db_step(&dsp_store.db, st, &rq->e)) == 1)
		json_object_set_new(obj, col(st, 0), json_integer(sqlite3_column_int64(st, 1)));
	db_done(&dsp_store.db, st);
	return r;
}

/* GET /admin/summary: counts for a quick look. */
int
h_summary(struct req *rq)
{
	json_t *states = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "queued", 0,
	    "offered", 0, "accepted", 0, "rejected", 0, "finished", 0, "handed_back", 0,
	    "requeued", 0, "abandoned", 0);
	json_t *settled = json_pack("{s:i, s:i, s:i, s:i, s:i}", "handback", 0,
	    "inspection_not_started", 0, "inspection_absent", 0, "inspection_started", 0,
	    "abandoned", 0);
	int64_t results, ledger, reports;
	int r = -1;

	if (tx_read(rq) < 0) {
		json_decref(states);
		json_decref(settled);
		return 500;
	}
	if (count_into(rq, states, "SELECT " RUN_STATE ", COUNT(*) FROM runs r GROUP BY 1") == 0)
		r = count_into(rq, settled, "SELECT how, COUNT(*) FROM settlements GROUP BY how");
	results = count(rq, "SELECT COUNT(*) FROM results");
	ledger = count(rq, "SELECT COALESCE(SUM(charge), 0) FROM ledger");
	reports = count(rq, "SELECT COUNT(*) FROM reports");
	if (r < 0 || results < 0 || ledger < 0 || reports < 0) {
		json_decref(states);
		json_decref(settled);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, json_pack("{s:s, s:o, s:o, s:I, s:I, s:I}",
	    "incarnation", dsp_store.incarnation, "runs", states, "settled", settled,
	    "results", (json_int_t)results, "ledger_total", (json_int_t)ledger,
	    "reports", (json_int_t)reports)));
}

/* Force session rq->arg into status. */
static int
admin_session(struct req *rq, const char *status)
{
	int64_t now = now_ms();

	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "UPDATE sessions SET status=?, lease_expires_ms=CASE WHEN ?='expired'"
	    " THEN MIN(lease_expires_ms, ?) ELSE lease_expires_ms END WHERE session_id=?",
	    "ssis", status, status, now, rq->arg) < 0)
		return tx_end(rq, internal(rq));
	if (sqlite3_changes(dsp_store.db.h) == 0)
		return tx_end(rq, fail(rq, 404, "unknown_session", "no session '%s'", rq->arg));
	work_session_ended();
	return tx_end(rq, answer(rq, 200, json_pack("{s:s}", "status", status)));
}

/* POST /admin/sessions/{sid}/revoke, /expire, /replace. */
int h_revoke(struct req *rq) { return admin_session(rq, "revoked"); }
int h_expire(struct req *rq) { return admin_session(rq, "expired"); }
int h_replace(struct req *rq) { return admin_session(rq, "replaced"); }

/* POST /admin/sessions/{sid}/lease {"ms":N}: the current session's lease
 * now runs out N ms from now, as if its last heartbeat had been that long
 * ago; the ordinary lapse then expires it (tests drill a lapse this way
 * without racing a short lease from the start). */
int
h_lease(struct req *rq)
{
	json_t *in = body_json(rq), *ms = in ? json_object_get(in, "ms") : NULL;

	if (!in)
		return 400;
	if (!json_is_integer(ms) || json_integer_value(ms) < 0 ||
	    json_integer_value(ms) > INT32_MAX)
		return fail(rq, 400, "invalid", "'ms' must be an integer from 0 to %d", INT32_MAX);
	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "UPDATE sessions SET lease_expires_ms=? WHERE session_id=?"
	    " AND status='current'", "is", now_ms() + (int64_t)json_integer_value(ms), rq->arg) < 0)
		return tx_end(rq, internal(rq));
	if (sqlite3_changes(dsp_store.db.h) == 0)
		return tx_end(rq, fail(rq, 404, "unknown_session", "no current session '%s'", rq->arg));
	return tx_end(rq, answer(rq, 200, json_pack("{s:s,s:I}", "status", "current",
	    "lease_ms", (json_int_t)json_integer_value(ms))));
}

/* GET /admin/sessions: every session, oldest first. */
int
h_list_sessions(struct req *rq)
{
	static const char *const names[] = { "session_id", "executor_id", "status",
		"incarnation", "adopted_by", NULL };
	json_t *out = json_object();

	if (tx_read(rq) < 0) {
		json_decref(out);
		return 500;
	}
	if (rows_into(&rq->e, out, "sessions", "SELECT s.session_id, executor_id, " SESSION_STATUS("s.") ", incarnation,"
	    " a.by_session FROM sessions s LEFT JOIN adoptions a ON a.session_id = s.session_id"
	    " ORDER BY created_ms, s.rowid", NULL, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* POST /admin/clients {"name":N}: issue a client of the inspection API.
 * Its token is in this answer and nowhere else: the store keeps only its
 * SHA-256 (invariant 3), so a lost token is revoked and another issued. */
int
h_client_new(struct req *rq)
{
	json_t *in = body_json(rq), *name = in ? json_object_get(in, "name") : NULL;
	char id[24], token[72], sha[SHA256_HEX_LEN + 1];
	int status;

	if (!in)
		return 400;
	if (!json_is_object(in) || json_object_size(in) != 1 || !json_is_string(name) ||
	    json_string_length(name) < 1 || json_string_length(name) > CLIENT_NAME_MAX ||
	    strlen(json_string_value(name)) != json_string_length(name))
		return fail(rq, 400, "invalid", "the body must be {\"name\": a string of 1..%d"
		    " bytes}", CLIENT_NAME_MAX);
	if (random_hex(id, sizeof id, "cli-", 8) < 0 || random_hex(token, sizeof token, "", SECRET_HEX / 2) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	sha256_hex(token, strlen(token), sha);
	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "INSERT INTO clients(client_id, name, token_sha256, status,"
	    " created_ms) VALUES(?,?,?,'active',?)", "sssi", id, json_string_value(name), sha,
	    now_ms()) < 0)
		status = internal(rq);
	else
		status = answer(rq, 201, json_pack("{s:s, s:s, s:s}", "client_id", id,
		    "name", json_string_value(name), "token", token));
	return tx_end(rq, status);
}

/* GET /admin/clients: every client, oldest first; never a token. */
int
h_list_clients(struct req *rq)
{
	static const char *const names[] = { "client_id", "name", "status", "created_ms",
		"revoked_ms", NULL };
	json_t *out = json_object();

	if (tx_read(rq) < 0) {
		json_decref(out);
		return 500;
	}
	if (rows_into(&rq->e, out, "clients", "SELECT client_id, name, status, created_ms, revoked_ms"
	    " FROM clients ORDER BY created_ms, rowid", NULL, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* DELETE /admin/clients/{id}: revoke the client; its token is refused
 * from now on, its inspections stay.  Revoking again changes nothing. */
int
h_client_revoke(struct req *rq)
{
	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "UPDATE clients SET status='revoked',"
	    " revoked_ms=COALESCE(revoked_ms, ?) WHERE client_id=?", "is", now_ms(), rq->arg) < 0)
		return tx_end(rq, internal(rq));
	if (sqlite3_changes(dsp_store.db.h) == 0)
		return tx_end(rq, fail(rq, 404, "unknown_client", "no client '%s'", rq->arg));
	return tx_end(rq, answer(rq, 200, json_pack("{s:s, s:s}", "client_id", rq->arg,
	    "status", "revoked")));
}

/* POST /admin/faults: queue a fault for the next matching requests. */
int
h_add_fault(struct req *rq)
{
	json_t *in = body_json(rq);
	struct fault f;
	const char *why;

	if (!in)
		return 400;
	if ((why = fault_parse(in, &f)))
		return fail(rq, 400, "invalid", "%s", why);
	if (fault_queue(&f) < 0)
		return fail(rq, 400, "invalid", "too many queued faults");
	return answer(rq, 200, json_pack("{s:s, s:s, s:I, s:I, s:s}", "status", "queued",
	    "kind", fault_name(f.kind), "count", (json_int_t)f.count,
	    "delay_ms", (json_int_t)f.delay_ms, "path", f.path));
}

/* DELETE /admin/faults: forget every queued fault. */
int
h_clear_faults(struct req *rq)
{
	return answer(rq, 200, json_pack("{s:I}", "cleared", (json_int_t)fault_clear()));
}

/* GET /admin/stats: the request counters (http.c) and the gate. */
int
h_stats(struct req *rq)
{
	struct http_stats st;
	struct gate_stats gs;
	int64_t batches, results, largest;

	http_stats_read(&st);
	gate_read(&gs);
	results_commits(&batches, &results, &largest);
	return answer(rq, 200, json_pack("{s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:I,"
	    " s:i}",
	    "in_flight", (json_int_t)st.in_flight, "waiting", (json_int_t)st.waiting,
	    "requests_by", "heartbeat", (json_int_t)st.by_kind[RK_HEARTBEAT],
	    "negotiate", (json_int_t)st.by_kind[RK_NEGOTIATE], "feed", (json_int_t)st.by_kind[RK_FEED],
	    "result", (json_int_t)st.by_kind[RK_RESULT], "admin", (json_int_t)st.by_kind[RK_ADMIN],
	    "other", (json_int_t)(st.by_kind[RK_OTHER] + st.by_kind[RK_CLOSE]),
	    "max_in_flight", (json_int_t)st.max_in_flight, "requests", (json_int_t)st.requests,
	    "gated_429", (json_int_t)st.gated_429, "gated_rate", (json_int_t)st.gated_rate,
	    "retry_after_max", (json_int_t)st.retry_after_max, "paced", (json_int_t)st.paced,
	    "paced_left", (json_int_t)st.paced_left, "slot_waited", (json_int_t)st.slot_waited,
	    "slot_waited_in", (json_int_t)st.slot_waited_in, "rate_queue_ms", (json_int_t)st.rate_queue_ms,
	    "max_inflight", (json_int_t)dsp.cfg.max_inflight, "max_rate", (json_int_t)dsp.cfg.max_rate,
	    "rate_wait_ms", (json_int_t)dsp.cfg.rate_wait_ms, "slot_wait_ms", (json_int_t)dsp.cfg.slot_wait_ms,
	    "commit_batches", (json_int_t)batches, "commit_results", (json_int_t)results,
	    "commit_batch_max", (json_int_t)largest,
	    "gate", dsp.cfg.gate_off ? "off" : "adaptive", "gate_limit", (json_int_t)gs.limit,
	    "gate_limit_lowest", (json_int_t)gs.lowest, "min_rtt_us", (json_int_t)gs.min_rtt_us,
	    "sample_rtt_us", (json_int_t)gs.sample_rtt_us, "heartbeat_nice", dsp.beat_nice));
}
