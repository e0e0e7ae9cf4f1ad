/* result — see result.h and lifecycle.h. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crash.h"
#include "jsonout.h"
#include "proc.h"
#include "result.h"
#include "shares.h"

/* The request body, built once and stored; every attempt sends these bytes. */
static char *
build_body(const char *run_id, const struct binding *b, const char *outcome,
    int exit_code, int wait_status, const char *message, int64_t chosen_at)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:o, s:s, s:I}",
	    "run_id", run_id, "incarnation", b->incarnation, "session_id", b->session_id,
	    "outcome", outcome, "exit_code", exit_code,
	    "wait_status", wait_status >= 0 ? json_integer(wait_status) : json_null(),
	    "message", message, "chosen_at", (json_int_t)chosen_at);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;

	json_decref(o);
	return s;
}

static int
insert_result(struct state *st, const char *run_id, const struct binding *b, const char *outcome,
    int exit_code, int wait_status, const char *message, const int64_t dropped[2],
    const char *body, int64_t now, int64_t claim_ms, struct ek_err *e)
{
	/* The run's start facts (schema step 5), program and args (step 10)
	 * go with its result.  A receipt is a result chosen, acknowledged and
	 * released, and a run record what is left once that receipt or the
	 * result itself is gone (schema step 12): a chooser that comes after
	 * either (a second cancel of a queued run, marked before the first
	 * chose) loses, as it would to the row. */
	sqlite3_stmt *q = db_prep(&st->db, "INSERT INTO results(run_id, incarnation, session_id, "
	    "outcome, exit_code, wait_status, message, chosen_at, body, claim_owner, claim_until, "
	    "due_at, started_at, start_marker, program, args, stdout_dropped, stderr_dropped) "
	    "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, r.due_at, "
	    "r.started_at, r.start_marker, r.program, r.args, ?12, ?13 FROM (SELECT 1) "
	    "LEFT JOIN runs r ON r.run_id = ?1 "
	    "WHERE NOT EXISTS (SELECT 1 FROM receipts WHERE run_id = ?1) "
	    "AND NOT EXISTS (SELECT 1 FROM run_records WHERE run_id = ?1) "
	    "ON CONFLICT(run_id) DO NOTHING", e);
	char owner[CLAIM_OWNER_MAX];

	if (!q)
		return -1;
	if (claim_ms > 0) {
		proc_self_id(owner, sizeof owner);
		db_bind_text(q, 10, owner);
		db_bind_i64(q, 11, now + claim_ms);
	}
	db_bind_text(q, 1, run_id);
	db_bind_binding(q, 2, b);
	db_bind_text(q, 4, outcome);
	db_bind_i64(q, 5, exit_code);
	if (wait_status >= 0)
		db_bind_i64(q, 6, wait_status);
	db_bind_text(q, 7, message);
	db_bind_i64(q, 8, now);
	db_bind_blob(q, 9, body, strlen(body));
	if (dropped) {
		db_bind_i64(q, 12, dropped[0]);
		db_bind_i64(q, 13, dropped[1]);
	}
	return db_exec_stmt(&st->db, q, e);
}

int
result_choose(struct state *st, const char *run_id, const struct binding *b,
    const char *outcome, int exit_code, int wait_status, const char *message,
    const int64_t dropped[2], int64_t claim_ms, json_t *left, bool *won, struct ek_err *e)
{
	char msg[RESULT_MESSAGE_MAX + 1];
	int64_t now = now_ms();
	char *body;
	int rc;

	snprintf(msg, sizeof msg, "%s", message);
	utf8_clip(msg, RESULT_MESSAGE_MAX);
	if (!(body = build_body(run_id, b, outcome, exit_code, wait_status, msg, now)))
		return ek_fail(e, EK_OSERR, "out of memory");
	*won = false;
	if (db_begin_write(&st->db, e) < 0) {
		free(body);
		return -1;
	}
	rc = insert_result(st, run_id, b, outcome, exit_code, wait_status, msg, dropped, body, now,
	    claim_ms, e);
	free(body);
	if (rc >= 0)
		*won = sqlite3_changes(st->db.h) == 1;
	if (rc >= 0 && left) {
		json_array_clear(left);   /* from an attempt that rolled back */
		rc = shares_leave_in(st, run_id, left, e);
	}
	if (rc < 0) {
		db_rollback(&st->db);
		return -1;
	}
	crash_point("result-chosen");
	if (db_commit(&st->db, e) < 0)
		return -1;
	crash_point("retained");
	return 0;
}

#define RESULT_COLS "run_id, incarnation, session_id, outcome, exit_code, wait_status, message, " \
	"chosen_at, body, attempts, IFNULL(last_attempt_at, 0), refused, refused_cause, last_diag, " \
	"claim_owner, IFNULL(claim_until, 0)"

static int
read_result(sqlite3_stmt *q, struct result *r)
{
	const void *body = sqlite3_column_blob(q, 8);
	size_t n = (size_t)sqlite3_column_bytes(q, 8);

	memset(r, 0, sizeof *r);
	db_col_text(q, 0, r->run_id, sizeof r->run_id);
	db_col_text(q, 1, r->b.incarnation, sizeof r->b.incarnation);
	db_col_text(q, 2, r->b.session_id, sizeof r->b.session_id);
	db_col_text(q, 3, r->outcome, sizeof r->outcome);
	r->exit_code = sqlite3_column_int(q, 4);
	r->has_wait = sqlite3_column_type(q, 5) != SQLITE_NULL;
	r->wait_status = sqlite3_column_int(q, 5);
	db_col_text(q, 6, r->message, sizeof r->message);
	r->chosen_at = sqlite3_column_int64(q, 7);
	if (!(r->body = malloc(n + 1)))
		return -1;
	memcpy(r->body, body ? body : "", n);
	r->body[n] = '\0';
	r->body_len = n;
	r->attempts = sqlite3_column_int(q, 9);
	r->last_attempt_at = sqlite3_column_int64(q, 10);
	r->refused = sqlite3_column_int(q, 11) != 0;
	db_col_text(q, 12, r->refused_cause, sizeof r->refused_cause);
	db_col_text(q, 13, r->last_diag, sizeof r->last_diag);
	db_col_text(q, 14, r->claim_owner, sizeof r->claim_owner);
	r->claim_until = sqlite3_column_int64(q, 15);
	return 0;
}

int
result_load(struct state *st, const char *run_id, struct result *r, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT " RESULT_COLS " FROM results WHERE run_id = ?1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	rc = db_step(&st->db, q, e);
	if (rc == 1 && read_result(q, r) < 0)
		rc = ek_fail(e, EK_OSERR, "out of memory");
	db_done(&st->db, q);
	return rc;
}

void
result_free(struct result *r)
{
	free(r->body);
	r->body = NULL;
}

/* Run a bound statement inside the caller's transaction; -1 or rows changed. */
static int
exec_in(struct state *st, sqlite3_stmt *q, struct ek_err *e)
{
	return db_exec_stmt(&st->db, q, e) < 0 ? -1 : sqlite3_changes(st->db.h);
}

/* A claim stands while its owner lives and has not overrun its expiry. */
static bool
claim_stands(const char *owner, int64_t until, int64_t now)
{
	return owner[0] && until > now && proc_id_alive(owner);
}

int
result_claim_in(struct state *st, const struct result *r, const char *owner, int64_t until,
    struct ek_err *e)
{
	sqlite3_stmt *q;

	if (strcmp(r->claim_owner, owner) != 0 && claim_stands(r->claim_owner, r->claim_until, now_ms()))
		return 0;
	if (!(q = db_prep(&st->db, "UPDATE results SET claim_owner = ?1, claim_until = ?2 "
	    "WHERE run_id = ?3", e)))
		return -1;
	db_bind_text(q, 1, owner);
	db_bind_i64(q, 2, until);
	db_bind_text(q, 3, r->run_id);
	return exec_in(st, q, e) < 0 ? -1 : 1;
}

int
result_unclaim_in(struct state *st, const char *run_id, const char *owner, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "UPDATE results SET claim_owner = NULL, "
	    "claim_until = NULL WHERE run_id = ?1 AND claim_owner = ?2", e);

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	db_bind_text(q, 2, owner);
	return exec_in(st, q, e);
}

int
result_count_in(struct state *st, const char *run_id, int delta, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "UPDATE results SET attempts = attempts + ?1, "
	    "last_attempt_at = CASE WHEN ?1 > 0 THEN ?2 ELSE last_attempt_at END WHERE run_id = ?3", e);

	if (!q)
		return -1;
	db_bind_i64(q, 1, delta);
	db_bind_i64(q, 2, now_ms());
	db_bind_text(q, 3, run_id);
	return exec_in(st, q, e);
}

int
result_ack_in(struct state *st, const char *run_id, int64_t record_id, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "INSERT OR IGNORE INTO receipts(run_id, incarnation, "
	    "session_id, outcome, exit_code, acked_at, record_id, attempts, started_at, chosen_at, "
	    "message, stdout_dropped, stderr_dropped) "
	    "SELECT run_id, incarnation, session_id, outcome, exit_code, ?1, ?2, attempts, "
	    "started_at, chosen_at, message, stdout_dropped, stderr_dropped FROM results "
	    "WHERE run_id = ?3", e);

	if (!q)
		return -1;
	db_bind_i64(q, 1, now_ms());
	db_bind_i64(q, 2, record_id);
	db_bind_text(q, 3, run_id);
	if (exec_in(st, q, e) < 0 ||
	    !(q = db_prep(&st->db, "DELETE FROM results WHERE run_id = ?1", e)))
		return -1;
	db_bind_text(q, 1, run_id);
	return exec_in(st, q, e);
}

int
result_note_in(struct state *st, const char *run_id, const char *refused_cause,
    const char *diag, struct ek_err *e)
{
	char d[RESULT_DIAG_MAX + 1];
	sqlite3_stmt *q = db_prep(&st->db, "UPDATE results SET last_diag = ?1, "
	    "refused = CASE WHEN ?2 IS NOT NULL THEN 1 ELSE refused END, "
	    "refused_cause = IFNULL(?2, refused_cause) WHERE run_id = ?3", e);

	if (!q)
		return -1;
	snprintf(d, sizeof d, "%s", diag ? diag : "");
	utf8_clip(d, RESULT_DIAG_MAX);
	db_bind_text(q, 1, d);
	db_bind_text(q, 2, refused_cause);
	db_bind_text(q, 3, run_id);
	return exec_in(st, q, e);
}

int
receipt_exists(struct state *st, const char *run_id, struct ek_err *e)
{
	return db_exists(&st->db, "SELECT 1 FROM receipts WHERE run_id = ?1", run_id, NULL, e);
}

int
result_count_deliverable(struct state *st, const struct binding *b, int64_t *n, struct ek_err *e)
{
	return binding_count(st, "SELECT count(*) FROM results INDEXED BY results_deliverable "
	    "WHERE incarnation = ?1 AND session_id = ?2 AND refused = 0", b, n, e);
}

/* 1 when one of b's deliverable results is claimed by a process that is
 * gone (a pass takes such a claim over at once), 0 when not, -1 on error.
 * Asked when every deliverable result is claimed: a few owners at most. */
static int
any_fallen_claim(struct state *st, const struct binding *b, int64_t now, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT claim_owner, max(claim_until) FROM results "
	    "INDEXED BY results_deliverable WHERE incarnation = ?1 AND session_id = ?2 "
	    "AND refused = 0 AND claim_owner IS NOT NULL GROUP BY claim_owner LIMIT 64", e);
	char owner[CLAIM_OWNER_MAX];
	int rc, fallen = 0;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	while (!fallen && (rc = db_step(&st->db, q, e)) == 1) {
		db_col_text(q, 0, owner, sizeof owner);
		fallen = !claim_stands(owner, sqlite3_column_int64(q, 1), now);
	}
	db_done(&st->db, q);
	return fallen ? 1 : rc < 0 ? -1 : 0;
}

/* 1 when b has a deliverable result that nobody is delivering: no claim,
 * or one that no longer stands; 0 when not, -1 on error.  EXISTS stops at
 * the first unclaimed row, and the rows it passes over are claimed ones: a
 * batch's worth at most. */
static int
any_unclaimed(struct state *st, const struct binding *b, int64_t now, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT EXISTS (SELECT 1 FROM results "
	    "INDEXED BY results_deliverable WHERE incarnation = ?1 AND session_id = ?2 "
	    "AND refused = 0 AND (claim_owner IS NULL OR IFNULL(claim_until, 0) <= ?3))", e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, now);
	if ((rc = db_step(&st->db, q, e)) == 1)
		rc = sqlite3_column_int(q, 0) != 0;
	db_done(&st->db, q);
	return rc == 0 ? any_fallen_claim(st, b, now, e) : rc;
}

int
result_deliverable_by(struct state *st, const struct binding *by, int64_t *n, bool *due,
    struct ek_err *e)
{
	struct binding v[RESULT_ADOPTED_MAX + 1];
	int64_t one, now = now_ms();
	int i, k, rc = 0;

	v[0] = *by;
	if (session_adopted(st, by, v + 1, RESULT_ADOPTED_MAX, &k, e) < 0)
		return -1;
	*n = 0;
	for (i = 0; i <= k; i++) {
		if (result_count_deliverable(st, &v[i], &one, e) < 0)
			return -1;
		*n += one;
		if (due && rc == 0 && one > 0 && (rc = any_unclaimed(st, &v[i], now, e)) < 0)
			return -1;
	}
	if (due)
		*due = rc == 1;
	return 0;
}
