/*
 * results — POST /v1/results: a run's terminal result, checked in the
 * protocol's order and recorded once (invariant 1), and every report kept
 * in `reports` whatever its answer (invariant 2), a faulted one included.
 * A run handed back, re-queued or abandoned is never charged: its results
 * are refused (409 conflict, invariant 8).
 * Results that arrive together are committed together (group commit,
 * below).
 * Also the count of each run's reports in flight at once, which tests read
 * back as the run's max_in_flight.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "protocol.h"
#include "sha256.h"
#include "text.h"

#include "util.h"
#include "store.h"
#include "faults.h"
#include "http.h"
#include "sessions.h"
#include "results.h"

enum { MESSAGE_MAX = 4096 };

struct result {
	const char *run_id, *incarnation, *session_id;
};

/* Check a result body; NULL if valid, else why not (r filled as far as
 * the strings go, for the report log). */
static const char *
result_check(json_t *in, struct result *r)
{
	static const char *const fields[] = { "run_id", "incarnation", "session_id", "outcome",
		"exit_code", "wait_status", "message", "chosen_at", NULL };
	static const char *const outcomes[] = PROTO_OUTCOMES;
	const char *k, *o;
	json_t *v, *ws, *msg;

	if (!json_is_object(in))
		return "result is not a JSON object";
	r->run_id = json_string_value(json_object_get(in, "run_id"));
	r->incarnation = json_string_value(json_object_get(in, "incarnation"));
	r->session_id = json_string_value(json_object_get(in, "session_id"));
	json_object_foreach(in, k, v)
		if (!text_word_in(k, fields))
			return "unknown field in result";
	if (!r->run_id || !is_run_id(r->run_id) || !r->incarnation || !r->session_id)
		return "run_id, incarnation and session_id must be strings (run_id of [A-Za-z0-9._:-])";
	if (!(o = json_string_value(json_object_get(in, "outcome"))) || !text_word_in(o, outcomes))
		return "outcome must be exited, killed, timeout, cancelled or exec_failed";
	v = json_object_get(in, "exit_code");
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 255)
		return "exit_code must be an integer from 0 to 255";
	ws = json_object_get(in, "wait_status");
	if (!ws || !(json_is_integer(ws) || json_is_null(ws)))
		return "wait_status must be an integer or null";
	msg = json_object_get(in, "message");
	if (!json_is_string(msg) || json_string_length(msg) > MESSAGE_MAX)
		return "message must be a string of at most 4096 bytes";
	if (!json_is_integer(json_object_get(in, "chosen_at")))
		return "chosen_at must be an integer";
	return NULL;
}

/* Keep one report row: its run, session, body hash, answer and fault. */
static int
report_insert(struct req *rq, const struct result *r, const char *sha, int status)
{
	/* a report alone in flight is noted here too, in its batch's
	 * transaction, when flight_persist() found a commit under way */
	return sql_exec(&rq->e, "INSERT INTO reports(run_id, session_id, body_sha256, status,"
	    " error, fault, at) VALUES(?,?,?,?,?,?,?)", "sssissi", r->run_id, r->session_id, sha,
	    (int64_t)status, json_string_value(json_object_get(rq->out, "error")),
	    rq->fault.kind ? fault_name(rq->fault.kind) : NULL, now_ms()) < 0 ||
	    (r->run_id && sql_exec(&rq->e, "UPDATE runs SET max_in_flight=1 WHERE run_id=?"
	    " AND max_in_flight<1", "s", r->run_id) < 0) ? -1 : 0;
}

/* The session that adopted sid into *by: 1, 0 none, -1 store error. */
static int
adopter_of(struct req *rq, const char *sid, char *by, size_t n)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT by_session FROM adoptions WHERE session_id=?",
	    "s", sid);
	int r;

	if (!st)
		return -1;
	if ((r = db_step(&dsp_store.db, st, &rq->e)) == 1)
		db_col_text(st, 0, by, n);
	db_done(&dsp_store.db, st);
	return r;
}

/* Admit a report of r: the credential must be that of r's own session,
 * current, or, once r's session was adopted, that of its adopter, current
 * (the body keeps naming the session that accepted the run). */
static int
report_gate(struct req *rq, const struct result *r)
{
	char by[64];
	struct sess s;
	int adopted = adopter_of(rq, r->session_id, by, sizeof by), known;

	if (adopted < 0)
		return internal(rq);
	if (!adopted)
		return sess_gate(rq, r->session_id, r->incarnation, true);
	if ((known = sess_load(rq, r->session_id, &s)) < 0)
		return internal(rq);
	if (!known || strcmp(s.incarnation, r->incarnation) != 0)
		return fail(rq, 401, "unauthorized", "incarnation does not match the session");
	return sess_gate(rq, by, NULL, true);
}

/* Refuse a result for run_id, settled for good as fate (its new run: as,
 * or empty): 409 conflict, which an executor takes as a refusal, with the
 * run's state and new run for a reader. */
static int
settled_refusal(struct req *rq, const char *run_id, const char *fate, const char *as)
{
	int status = fail(rq, 409, "conflict", "run '%s' is %s%s%s: its results are refused",
	    run_id, fate, as[0] ? " and re-queued as " : "", as);

	json_object_set_new(rq->out, "state", json_string(fate));
	json_object_set_new(rq->out, "requeued_as", as[0] ? json_string(as) : json_null());
	return status;
}

/* Record r unless a protocol check refuses it; the HTTP status. */
static int
result_record(struct req *rq, const struct result *r, const char *sha)
{
	sqlite3_stmt *st;
	char owner[64] = "", rsha[SHA256_HEX_LEN + 1] = "", fate[16] = "", as[64] = "";
	int64_t record_id = 0;
	int found, status;

	if ((status = report_gate(rq, r)))
		return status;
	if (!(st = sql_prep(&rq->e, "SELECT r.owner_session, s.record_id, s.body_sha256, f.state,"
	    " f.requeued_as FROM runs r LEFT JOIN results s ON s.run_id=r.run_id"
	    " LEFT JOIN settlements f ON f.run_id=r.run_id WHERE r.run_id=?", "s", r->run_id)) ||
	    (found = db_step(&dsp_store.db, st, &rq->e)) < 0) {
		db_done(&dsp_store.db, st);
		return internal(rq);
	}
	if (found) {
		db_col_text(st, 0, owner, sizeof owner);
		record_id = sqlite3_column_int64(st, 1);
		db_col_text(st, 2, rsha, sizeof rsha);
		db_col_text(st, 3, fate, sizeof fate);
		db_col_text(st, 4, as, sizeof as);
	}
	db_done(&dsp_store.db, st);
	if (!found)
		return fail(rq, 404, "unknown_run", "no run '%s'", r->run_id);
	if (owner[0] && strcmp(owner, r->session_id) != 0)
		return fail(rq, 409, "wrong_session", "run '%s' is owned by another session", r->run_id);
	if (fate[0])   /* handed back, re-queued or abandoned: never charged (invariant 8) */
		return settled_refusal(rq, r->run_id, fate, as);
	if (record_id)
		return strcmp(rsha, sha) == 0 ? answer(rq, 200, json_pack("{s:s, s:I}",
		    "status", "duplicate", "record_id", (json_int_t)record_id)) :
		    fail(rq, 409, "conflict", "a different result is recorded for run '%s'", r->run_id);
	if (sql_exec(&rq->e, "INSERT INTO results(run_id, session_id, body, body_sha256,"
	    " recorded_at) VALUES(?,?,?,?,?)", "ssssi", r->run_id, r->session_id, rq->body, sha,
	    now_ms()) < 0)
		return internal(rq);
	record_id = sqlite3_last_insert_rowid(dsp_store.db.h);
	if (sql_exec(&rq->e, "INSERT INTO ledger(run_id, charge, at)"
	    " SELECT run_id, 1 + cost, ? FROM runs WHERE run_id=?", "is", now_ms(), r->run_id) < 0 ||
	    sql_exec(&rq->e, "UPDATE runs SET state='finished', owner_session=? WHERE run_id=?",
	    "ss", r->session_id, r->run_id) < 0)
		return internal(rq);
	return answer(rq, 200, json_pack("{s:s, s:I}", "status", "recorded",
	    "record_id", (json_int_t)record_id));
}

/*
 * Group commit.  Results that arrive while a commit is under way wait in
 * a queue; when it ends, one of them (the leader) takes the whole queue
 * and records it in one store transaction: one BEGIN and one COMMIT (one
 * sync) for all, as PostgreSQL's commit_delay and MySQL's binlog group
 * commit do.  Each result is checked and recorded as alone, in a savepoint
 * of its own: its refusal or conflict is its own answer, and an internal
 * error rolls back its savepoint only.  No result is answered before the
 * commit that holds it: each waits until the leader marks it done, after
 * the COMMIT returned (or with 500 if it failed, and nothing of the batch
 * is kept).  A delay fault at the point /store/commit holds each batch,
 * recorded and uncommitted, that long before its COMMIT (for the tests
 * that kill the dispatcher mid-batch).
 */
struct pending {
	struct req *rq;
	json_t *in;                      /* the body, parsed (NULL: not JSON) */
	const char *why;                 /* why the body is invalid, or NULL */
	struct result r;
	char sha[SHA256_HEX_LEN + 1];
	int status;                      /* the answer, once done */
	bool done;
	struct pending *next;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t done;             /* a batch was committed (or failed) */
	struct pending *head, **tail;
	bool leading;                    /* a leader is recording a batch */
	int64_t batches, results, largest;   /* for /admin/stats */
} gc = { .mu = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

/* Record one result of the open batch, as alone; its HTTP status. */
static int
result_one(struct pending *p)
{
	struct req *rq = p->rq;
	int status;

	if (!p->in)
		status = 400;
	else if (p->why)
		status = fail(rq, 400, "invalid", "%s", p->why);
	else
		status = result_record(rq, &p->r, p->sha);
	if (status < 500 && report_insert(rq, &p->r, rq->too_big ? NULL : p->sha, status) < 0)
		status = internal(rq);
	return status;
}

/* Answer p, and every result after it in its batch, 500 for e. */
static void
batch_fail(struct pending *p, const struct ek_err *e)
{
	for (; p; p = p->next) {
		p->rq->e = *e;
		p->status = internal(p->rq);
	}
}

/* In a savepoint of its own: record p, or roll back what it wrote. */
static int
batch_one(struct pending *p)
{
	struct ek_err e = { 0 };
	int status;

	if (sql_exec(&p->rq->e, "SAVEPOINT result", "") < 0)
		return internal(p->rq);
	status = result_one(p);
	if (status >= 500 && sqlite3_get_autocommit(dsp_store.db.h) == 0)
		sql_exec(&e, "ROLLBACK TO result", "");
	if (sqlite3_get_autocommit(dsp_store.db.h) == 0)
		sql_exec(&e, "RELEASE result", "");
	return status;
}

/* Record batch b (its first is the leader) in one transaction. */
static void
batch_record(struct pending *b)
{
	struct req *lead = b->rq;
	struct pending *p;
	struct fault f;

	if (tx_begin(lead) < 0) {
		batch_fail(b, &lead->e);
		return;
	}
	for (p = b; p; p = p->next) {
		p->status = batch_one(p);
		if (sqlite3_get_autocommit(dsp_store.db.h) != 0) {   /* SQLite ended it */
			batch_fail(b, &p->rq->e);
			store_end(false, &lead->e);   /* and so must the store: unlocked, no write open */
			return;
		}
	}
	if ((f = fault_take_at("/store/commit")).kind == F_DELAY)
		nap(f.delay_ms, NULL);
	if (store_end(true, &lead->e) < 0)
		batch_fail(b, &lead->e);
}

/* Queue p, and wait until a batch holding it is committed; its status.
 * The first to find no leader leads: it takes the queue, records it,
 * marks it done, and wakes the rest. */
static int
batch_join(struct pending *p)
{
	struct pending *b, *q;
	int64_t n;

	pthread_mutex_lock(&gc.mu);
	if (!gc.tail)
		gc.tail = &gc.head;
	*gc.tail = p;
	gc.tail = &p->next;
	while (!p->done) {
		if (gc.leading || !gc.head) {
			pthread_cond_wait(&gc.done, &gc.mu);
			continue;
		}
		b = gc.head;
		gc.head = NULL;
		gc.tail = &gc.head;
		gc.leading = true;
		pthread_mutex_unlock(&gc.mu);
		batch_record(b);
		pthread_mutex_lock(&gc.mu);
		for (n = 0, q = b; q; q = q->next, n++)
			q->done = true;
		gc.batches++;
		gc.results += n;
		if (n > gc.largest)
			gc.largest = n;
		gc.leading = false;
		pthread_cond_broadcast(&gc.done);
	}
	pthread_mutex_unlock(&gc.mu);
	return p->status;
}

/* POST /v1/results: one terminal result, checked in the protocol's order,
 * recorded in the next group commit. */
int
h_result(struct req *rq)
{
	struct pending p = { .rq = rq };

	sha256_hex(rq->body ? rq->body : "", rq->len, p.sha);
	if ((p.in = body_json(rq)))
		p.why = result_check(p.in, &p.r);
	return batch_join(&p);
}

void
results_commits(int64_t *batches, int64_t *results, int64_t *largest)
{
	pthread_mutex_lock(&gc.mu);
	*batches = gc.batches;
	*results = gc.results;
	*largest = gc.largest;
	pthread_mutex_unlock(&gc.mu);
}

void
report_fault(struct req *rq, int status)
{
	json_t *in = rq->in;
	struct result r = { json_string_value(json_object_get(in, "run_id")), NULL,
		json_string_value(json_object_get(in, "session_id")) };
	char sha[SHA256_HEX_LEN + 1];

	if (rq->kind != RK_RESULT)
		return;
	sha256_hex(rq->body ? rq->body : "", rq->len, sha);
	if (tx_begin(rq) < 0)
		return;
	if (report_insert(rq, &r, rq->too_big ? NULL : sha, status) < 0)
		rq->rollback = true;
	tx_end(rq, 0);            /* the fault's own status must not roll back */
}

/* Reports in flight, per run: each is on a connection of its own, so
 * MAX_CONNECTIONS slots hold every run in flight. */
static struct {
	pthread_mutex_t mu;
	struct { char run_id[RUN_ID_MAX + 1]; int cur; } v[MAX_CONNECTIONS];
} flights = { .mu = PTHREAD_MUTEX_INITIALIZER };

int
flight_enter(const char *run_id)
{
	int i, free_slot = -1, n = 0;

	pthread_mutex_lock(&flights.mu);
	for (i = 0; i < MAX_CONNECTIONS; i++) {
		if (flights.v[i].cur && strcmp(flights.v[i].run_id, run_id) == 0) {
			n = ++flights.v[i].cur;
			break;
		}
		if (!flights.v[i].cur && free_slot < 0)
			free_slot = i;
	}
	if (!n && free_slot >= 0) {
		snprintf(flights.v[free_slot].run_id, sizeof flights.v[0].run_id, "%s", run_id);
		n = flights.v[free_slot].cur = 1;
	}
	pthread_mutex_unlock(&flights.mu);
	return n;
}

void
flight_leave(const char *run_id)
{
	int i;

	pthread_mutex_lock(&flights.mu);
	for (i = 0; i < MAX_CONNECTIONS; i++)
		if (flights.v[i].cur && strcmp(flights.v[i].run_id, run_id) == 0) {
			flights.v[i].cur--;
			break;
		}
	pthread_mutex_unlock(&flights.mu);
}

void
flight_persist(const char *run_id, int n)
{
	struct ek_err e = { 0 };
	int r;

	/* One report alone waits for no commit under way (its batch's
	 * report_insert() notes it then): waiting here would keep it out of
	 * the batch that is gathering meanwhile. */
	if ((r = store_begin_plain(n <= 1, &e)) == 1)
		return;
	if (r == 0)
		store_end(sql_exec(&e, "UPDATE runs SET max_in_flight=? WHERE run_id=? AND"
		    " max_in_flight<?", "isi", (int64_t)n, run_id, (int64_t)n) == 0, &e);
	if (e.msg[0])
		say("%s: max_in_flight: %s", run_id, e.msg);
}

