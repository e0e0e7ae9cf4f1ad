/* runs — see runs.h and lifecycle.h: execution rows (run specs are in runspec.c). */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "proc.h"
#include "runs.h"
#include "session.h"
#include "shares.h"
#include "text.h"
#include "world.h"

/* --- execution rows ----------------------------------------------------- */

#define RUN_COLS "run_id, txn_id, incarnation, session_id, program, args, env, cwd, policy, " \
	"due_at, IFNULL(timeout_ms, 0), IFNULL(started_at, 0), IFNULL(cancel_at, 0), state, " \
	"IFNULL(sup_pid, 0), IFNULL(sup_start, -1), IFNULL(guest_pid, 0)"

static json_t *
col_json(sqlite3_stmt *q, int col)
{
	const char *t = (const char *)sqlite3_column_text(q, col);

	return t ? json_loads(t, 0, NULL) : NULL;
}

static char *
col_strdup(sqlite3_stmt *q, int col)
{
	const char *t = (const char *)sqlite3_column_text(q, col);

	return t ? strdup(t) : NULL;
}

static void
read_run(sqlite3_stmt *q, struct run *r)
{
	memset(r, 0, sizeof *r);
	db_col_text(q, 0, r->run_id, sizeof r->run_id);
	r->txn_id = col_strdup(q, 1);
	db_col_text(q, 2, r->b.incarnation, sizeof r->b.incarnation);
	db_col_text(q, 3, r->b.session_id, sizeof r->b.session_id);
	r->program = col_strdup(q, 4);
	r->args = col_json(q, 5);
	r->env = col_json(q, 6);
	r->cwd = col_strdup(q, 7);
	r->policy = col_json(q, 8);
	r->due_at = sqlite3_column_int64(q, 9);
	r->timeout_ms = sqlite3_column_int64(q, 10);
	r->started_at = sqlite3_column_int64(q, 11);
	r->cancel_at = sqlite3_column_int64(q, 12);
	db_col_text(q, 13, r->state, sizeof r->state);
	r->sup_pid = (pid_t)sqlite3_column_int64(q, 14);
	r->sup_start = sqlite3_column_int64(q, 15);
	r->guest_pid = (pid_t)sqlite3_column_int64(q, 16);
}

int
run_load(struct state *st, const char *run_id, struct run *r, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT " RUN_COLS " FROM runs WHERE run_id = ?1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	rc = db_step(&st->db, q, e);
	if (rc == 1)
		read_run(q, r);
	db_done(&st->db, q);
	return rc;
}

void
run_free(struct run *r)
{
	free(r->txn_id);
	free(r->program);
	free(r->cwd);
	json_decref(r->args);
	json_decref(r->env);
	json_decref(r->policy);
	memset(r, 0, sizeof *r);
}

int
run_mark_started_in(struct state *st, struct run *r, pid_t sup_pid, int64_t sup_start,
    int slots, struct ek_err *e)
{
	char marker[96];
	sqlite3_stmt *q;
	int64_t now = now_ms();
	int changes;

	q = db_prep(&st->db, "UPDATE runs SET state = 'started', started_at = ?1, start_marker = ?2, "
	    "sup_pid = ?3, sup_start = ?4 WHERE run_id = ?5 AND state = 'queued' AND cancel_at IS NULL "
	    "AND incarnation = ?6 AND session_id = ?7 AND EXISTS (SELECT 1 FROM sessions "
	    "WHERE status = 'current' AND incarnation = ?6 AND session_id = ?7) "
	    "AND NOT EXISTS (SELECT 1 FROM results WHERE run_id = ?5) "
	    "AND NOT EXISTS (SELECT 1 FROM handbacks WHERE run_id = ?5) "
	    "AND (?8 <= 0 OR (SELECT count(*) FROM runs s WHERE s.incarnation = ?6 "
	    "AND s.session_id = ?7 AND s.state = 'started') < ?8)", e);
	if (!q)
		return -1;
	snprintf(marker, sizeof marker, "%d:%lld@%lld", (int)sup_pid, (long long)sup_start, (long long)now);
	db_bind_i64(q, 1, now);
	db_bind_text(q, 2, marker);
	db_bind_i64(q, 3, sup_pid);
	db_bind_i64(q, 4, sup_start);
	db_bind_text(q, 5, r->run_id);
	db_bind_binding(q, 6, &r->b);
	db_bind_i64(q, 8, slots);
	if (db_exec_stmt(&st->db, q, e) < 0)
		return -1;
	/* The shares it will run under join in the same commit: a started run
	 * is always a member, and only the supervisor that started it joins. */
	if ((changes = sqlite3_changes(st->db.h)) > 0 && shares_join_in(st, r->run_id, r->policy, e) < 0)
		return -1;
	if (changes > 0)
		r->started_at = now;
	return changes;
}

int
run_mark_started(struct state *st, struct run *r, pid_t sup_pid, int64_t sup_start,
    int slots, struct ek_err *e)
{
	int changes;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if ((changes = run_mark_started_in(st, r, sup_pid, sup_start, slots, e)) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	return db_commit(&st->db, e) < 0 ? -1 : changes;
}

int
run_set_guest(struct state *st, const char *run_id, pid_t guest, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	/* With its start time, so that a later sweep can tell this guest from
	 * a process that reused its pid. */
	q = db_prep(&st->db, "UPDATE runs SET guest_pid = ?1, guest_start = ?3 WHERE run_id = ?2", e);
	if (!q) {
		db_rollback(&st->db);
		return -1;
	}
	db_bind_i64(q, 1, guest);
	db_bind_text(q, 2, run_id);
	db_bind_i64(q, 3, proc_start_time(guest));
	return db_commit_stmt(&st->db, q, e) < 0 ? -1 : 0;
}

int
run_commits(struct state *st, enum run_commits how, struct ek_err *e)
{
	return db_durable(&st->db, how == RUN_DURABLE, e);
}

int
run_delete_in(struct state *st, const char *run_id, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "DELETE FROM runs WHERE run_id = ?1 AND state <> 'unknown' "
	    "AND (EXISTS (SELECT 1 FROM results WHERE run_id = ?1) "
	    "OR EXISTS (SELECT 1 FROM receipts WHERE run_id = ?1))", e);

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	return db_exec_stmt(&st->db, q, e);
}

/* Is there an execution row of run_id?  1, 0, or -1 (e filled). */
static int
run_exists(struct state *st, const char *run_id, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT 1 FROM runs WHERE run_id = ?1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	rc = db_step(&st->db, q, e);
	db_done(&st->db, q);
	return rc;
}

int
run_delete(struct state *st, const char *run_id, struct ek_err *e)
{
	int rc = run_exists(st, run_id, e);

	/* Most often its settle has deleted it already: no write then. */
	if (rc <= 0)
		return rc;
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (run_delete_in(st, run_id, e) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	return db_commit(&st->db, e);
}

int
run_each_due(struct state *st, const struct binding *b, int64_t now, int limit,
    int (*fn)(const char *, void *), void *arg, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id FROM runs WHERE incarnation = ?1 "
	    "AND session_id = ?2 AND state = 'queued' AND due_at <= ?3 AND cancel_at IS NULL "
	    "AND NOT EXISTS (SELECT 1 FROM handbacks h WHERE h.run_id = runs.run_id) "
	    "ORDER BY due_at, rowid LIMIT ?4", e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, now);
	db_bind_i64(q, 4, limit);
	while ((rc = db_step(&st->db, q, e)) == 1)
		if (fn((const char *)sqlite3_column_text(q, 0), arg) != 0)
			break;
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
run_count_queued(struct state *st, const struct binding *b, int64_t *n, struct ek_err *e)
{
	return binding_count(st, "SELECT count(*) FROM runs WHERE incarnation = ?1 "
	    "AND session_id = ?2 AND state = 'queued' AND NOT EXISTS "
	    "(SELECT 1 FROM handbacks h WHERE h.run_id = runs.run_id)", b, n, e);
}

int
run_count_due_by(struct state *st, const struct binding *b, int64_t until, int64_t *n,
    struct ek_err *e)
{
	/* runs_due's range: (binding, state) then due_at */
	sqlite3_stmt *q = db_prep(&st->db, "SELECT count(*) FROM runs WHERE incarnation = ?1 "
	    "AND session_id = ?2 AND state = 'queued' AND due_at <= ?3 AND NOT EXISTS "
	    "(SELECT 1 FROM handbacks h WHERE h.run_id = runs.run_id)", e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, until);
	if ((rc = db_step(&st->db, q, e)) == 1)
		*n = sqlite3_column_int64(q, 0);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
run_count_live(struct state *st, const struct binding *b, int *n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, b ? "SELECT sup_pid, sup_start FROM runs WHERE "
	    "incarnation = ?1 AND session_id = ?2 AND state = 'started'" :
	    "SELECT sup_pid, sup_start FROM runs WHERE state = 'started'", e);
	int rc;

	if (!q)
		return -1;
	*n = 0;
	if (b)
		db_bind_binding(q, 1, b);
	while ((rc = db_step(&st->db, q, e)) == 1)
		if (proc_alive((pid_t)sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1)))
			(*n)++;
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* Settle one started run whose supervisor is gone.  A run of the current
 * session (mine) with a result is finished: its row goes, the result
 * outlives it.  A quarantined run's row is never deleted, result or not. */
static int
settle_orphan(struct state *st, const char *run_id, pid_t pid, int64_t start, bool mine,
    int *unknown, int *finished, struct ek_err *e)
{
	char why[160];
	sqlite3_stmt *q;
	int changes;

	q = db_prep(&st->db, "DELETE FROM runs WHERE run_id = ?1 AND state = 'started' AND ?2 AND "
	    "(EXISTS (SELECT 1 FROM results WHERE run_id = ?1) OR "
	    "EXISTS (SELECT 1 FROM receipts WHERE run_id = ?1))", e);
	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	db_bind_i64(q, 2, mine);
	if (db_exec_stmt(&st->db, q, e) < 0)
		return -1;
	if ((changes = sqlite3_changes(st->db.h)) > 0) {
		(*finished)++;
		return 0;
	}
	snprintf(why, sizeof why, "supervisor %d (start time %lld) is gone and chose no result",
	    (int)pid, (long long)start);
	q = db_prep(&st->db, "UPDATE runs SET state = 'unknown', unknown_at = ?1, unknown_why = ?2 "
	    "WHERE run_id = ?3 AND state = 'started' AND NOT EXISTS "
	    "(SELECT 1 FROM results WHERE run_id = ?3) AND NOT EXISTS "
	    "(SELECT 1 FROM receipts WHERE run_id = ?3)", e);
	if (!q)
		return -1;
	db_bind_i64(q, 1, now_ms());
	db_bind_text(q, 2, why);
	db_bind_text(q, 3, run_id);
	if (db_exec_stmt(&st->db, q, e) < 0)
		return -1;
	*unknown += sqlite3_changes(st->db.h);
	return 0;
}

/* Unknown runs still holding share memberships leave once their guest is
 * confirmed gone (never spawned, or its pid no longer names the process
 * that started): until then the orphan may still be using its bandwidth. */
static int
release_gone_guests(struct state *st, struct ek_err *e)
{
	sqlite3_stmt *q, *del;
	int rc;

	q = db_prep(&st->db, "SELECT run_id, IFNULL(guest_pid, 0), IFNULL(guest_start, -1) FROM runs "
	    "WHERE state = 'unknown' AND run_id IN (SELECT run_id FROM share_members)", e);
	if (!q)
		return -1;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		pid_t pid = (pid_t)sqlite3_column_int64(q, 1);

		if (pid > 0 && proc_alive(pid, sqlite3_column_int64(q, 2)))
			continue;
		if (!(del = db_prep(&st->db, "DELETE FROM share_members WHERE run_id = ?1", e))) {
			rc = -1;
			break;
		}
		sqlite3_bind_value(del, 1, sqlite3_column_value(q, 0));
		if ((rc = db_exec_stmt(&st->db, del, e)) < 0)
			break;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
run_sweep(struct state *st, int *unknown, int *finished, struct ek_err *e)
{
	sqlite3_stmt *q;
	int rc;

	*unknown = *finished = 0;
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	q = db_prep(&st->db, "SELECT run_id, sup_pid, sup_start, (incarnation, session_id) IN "
	    "(SELECT incarnation, session_id FROM sessions WHERE status = 'current') "
	    "FROM runs WHERE state = 'started'", e);
	if (!q)
		goto fail;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		pid_t pid = (pid_t)sqlite3_column_int64(q, 1);
		int64_t start = sqlite3_column_int64(q, 2);
		bool mine = sqlite3_column_int(q, 3) != 0;
		char id[RUN_ID_MAX + 1];

		if (proc_alive(pid, start))
			continue;
		db_col_text(q, 0, id, sizeof id);
		if (settle_orphan(st, id, pid, start, mine, unknown, finished, e) < 0) {
			rc = -1;
			break;
		}
	}
	db_done(&st->db, q);
	if (rc < 0 || release_gone_guests(st, e) < 0)
		goto fail;
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

/* Why the current session (named sid) may not cancel r, as an error; 0 if it may. */
static int
cancel_refused(struct state *st, const char *sid, const struct run *r, struct ek_err *e)
{
	struct session cur;

	if (session_require(st, sid, &cur, e) < 0)
		return -1;
	if (!binding_eq(&cur.b, &r->b))
		return ek_fail(e, EK_NOSESSION, "run '%s' belongs to session '%s': quarantined, "
		    "the current session cannot cancel it", r->run_id,
		    r->b.session_id[0] ? r->b.session_id : "(empty)");
	if (strcmp(r->state, "unknown") == 0)
		return ek_fail(e, EK_NOINPUT, "run '%s' has an unknown outcome: nothing to cancel",
		    r->run_id);
	return 0;
}

/* Inside the cancel's transaction: the verdict for r, and its write. */
static int
cancel_write(struct state *st, struct run *r, enum cancel_verdict *v, struct ek_err *e)
{
	char why[160];
	sqlite3_stmt *q;

	*v = strcmp(r->state, "queued") == 0 ? CANCEL_QUEUED :
	    proc_alive(r->sup_pid, r->sup_start) ? CANCEL_SIGNAL : CANCEL_UNKNOWN;
	if (*v == CANCEL_UNKNOWN) {
		snprintf(why, sizeof why, "supervisor %d (start time %lld) was gone when the run "
		    "was cancelled", (int)r->sup_pid, (long long)r->sup_start);
		q = db_prep(&st->db, "UPDATE runs SET state = 'unknown', unknown_at = ?1, "
		    "unknown_why = ?2 WHERE run_id = ?3 AND state = 'started'", e);
		if (!q)
			return -1;
		db_bind_i64(q, 1, now_ms());
		db_bind_text(q, 2, why);
		db_bind_text(q, 3, r->run_id);
		return db_exec_stmt(&st->db, q, e);
	}
	q = db_prep(&st->db, "UPDATE runs SET cancel_at = IFNULL(cancel_at, ?1) WHERE run_id = ?2", e);
	if (!q)
		return -1;
	db_bind_i64(q, 1, now_ms());
	db_bind_text(q, 2, r->run_id);
	if (db_exec_stmt(&st->db, q, e) < 0)
		return -1;
	if (!r->cancel_at)
		r->cancel_at = now_ms();
	return 0;
}

int
run_cancel(struct state *st, const char *sid, const char *run_id, struct run *r,
    enum cancel_verdict *v, struct ek_err *e)
{
	int rc;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if ((rc = run_load(st, run_id, r, e)) == 0)
		ek_fail(e, EK_NOINPUT, "run '%s': no execution row (never accepted, or it has "
		    "already ended)", run_id);
	if (rc <= 0) {
		db_rollback(&st->db);
		return -1;
	}
	if (cancel_refused(st, sid, r, e) < 0 || cancel_write(st, r, v, e) < 0 ||
	    db_commit(&st->db, e) < 0) {
		db_rollback(&st->db);
		run_free(r);
		return -1;
	}
	return 0;
}
