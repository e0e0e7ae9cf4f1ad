/* session — see session.h. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "session.h"

#define SESSION_COLS "seq, incarnation, session_id, dispatcher, status, opened_at, " \
	"ended_at, lease_ms, heartbeat_ms, last_beat_at, IFNULL(retry_after_at, 0)"

void
db_bind_binding(sqlite3_stmt *q, int i, const struct binding *b)
{
	db_bind_text(q, i, b->incarnation);
	db_bind_text(q, i + 1, b->session_id);
}

bool
binding_eq(const struct binding *a, const struct binding *b)
{
	return strcmp(a->incarnation, b->incarnation) == 0 &&
	    strcmp(a->session_id, b->session_id) == 0;
}

static void
read_session(sqlite3_stmt *q, struct session *s)
{
	memset(s, 0, sizeof *s);
	s->seq = sqlite3_column_int64(q, 0);
	db_col_text(q, 1, s->b.incarnation, sizeof s->b.incarnation);
	db_col_text(q, 2, s->b.session_id, sizeof s->b.session_id);
	db_col_text(q, 3, s->dispatcher, sizeof s->dispatcher);
	db_col_text(q, 4, s->status, sizeof s->status);
	s->opened_at = sqlite3_column_int64(q, 5);
	s->ended_at = sqlite3_column_int64(q, 6);
	s->lease_ms = sqlite3_column_int64(q, 7);
	s->heartbeat_ms = sqlite3_column_int64(q, 8);
	s->last_beat_at = sqlite3_column_int64(q, 9);
	s->retry_after_at = sqlite3_column_int64(q, 10);
}

/* Run q (already bound) expecting at most one session row. */
static int
one_session(struct state *st, sqlite3_stmt *q, struct session *s, struct ek_err *e)
{
	int rc = db_step(&st->db, q, e);

	if (rc == 1)
		read_session(q, s);
	db_done(&st->db, q);
	return rc;
}

int
binding_count(struct state *st, const char *sql, const struct binding *b, int64_t *n,
    struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, sql, e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	if ((rc = db_step(&st->db, q, e)) == 1)
		*n = sqlite3_column_int64(q, 0);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
session_wait_in(struct state *st, const struct binding *b, int64_t until, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "UPDATE sessions SET retry_after_at = ?3 "
	    "WHERE incarnation = ?1 AND session_id = ?2 AND IFNULL(retry_after_at, 0) < ?3", e);

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, until);
	return db_exec_stmt(&st->db, q, e);
}

int
session_current(struct state *st, struct session *s, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT " SESSION_COLS
	    " FROM sessions WHERE status = 'current'", e);

	return q ? one_session(st, q, s, e) : -1;
}

int
session_find(struct state *st, const struct binding *b, struct session *s, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT " SESSION_COLS
	    " FROM sessions WHERE incarnation = ?1 AND session_id = ?2", e);

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	return one_session(st, q, s, e);
}

int
session_require(struct state *st, const char *sid, struct session *s, struct ek_err *e)
{
	int rc = session_current(st, s, e);

	if (rc < 0)
		return -1;
	if (rc == 0)
		return ek_fail(e, EK_NOSESSION, "no current session (open one with 'exec-session open')");
	if (sid && strcmp(sid, s->b.session_id) != 0)
		return ek_fail(e, EK_NOSESSION, "session '%s' is not the current session", sid);
	return 0;
}

int
session_credential(struct state *st, const struct binding *b, char *buf, size_t n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT credential FROM sessions "
	    "WHERE incarnation = ?1 AND session_id = ?2 AND status = 'current'", e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	rc = db_step(&st->db, q, e);
	if (rc == 1)
		db_col_text(q, 0, buf, n);
	db_done(&st->db, q);
	if (rc == 0)
		return ek_fail(e, EK_NOSESSION, "session '%s' is not current", b->session_id);
	return rc < 0 ? -1 : 0;
}

static int
end_current(struct state *st, const char *status, const struct binding *only, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "UPDATE sessions SET status = ?1, ended_at = ?2 "
	    "WHERE status = 'current' AND (?3 IS NULL OR (incarnation = ?3 AND session_id = ?4))", e);

	if (!q)
		return -1;
	db_bind_text(q, 1, status);
	db_bind_i64(q, 2, now_ms());
	db_bind_text(q, 3, only ? only->incarnation : NULL);
	db_bind_text(q, 4, only ? only->session_id : NULL);
	return db_exec_stmt(&st->db, q, e);
}

int
session_begin(struct state *st, const struct session *s, const char *cred, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (end_current(st, "replaced", NULL, e) < 0)
		goto fail;
	q = db_prep(&st->db, "INSERT INTO sessions(incarnation, session_id, dispatcher, credential, "
	    "status, opened_at, lease_ms, heartbeat_ms, last_beat_at) "
	    "VALUES (?1, ?2, ?3, ?4, 'current', ?5, ?6, ?7, ?5)", e);
	if (!q)
		goto fail;
	db_bind_binding(q, 1, &s->b);
	db_bind_text(q, 3, s->dispatcher);
	db_bind_text(q, 4, cred);
	db_bind_i64(q, 5, s->opened_at);
	db_bind_i64(q, 6, s->lease_ms);
	db_bind_i64(q, 7, s->heartbeat_ms);
	if (db_exec_stmt(&st->db, q, e) < 0)
		goto fail;
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

int
session_end_in(struct state *st, const struct binding *b, const char *status, struct ek_err *e)
{
	return end_current(st, status, b, e);
}

int
session_end(struct state *st, const struct binding *b, const char *status, struct ek_err *e)
{
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (end_current(st, status, b, e) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	return db_commit(&st->db, e);
}

int
session_beat(struct state *st, const struct binding *b, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	q = db_prep(&st->db, "UPDATE sessions SET last_beat_at = ?1 "
	    "WHERE incarnation = ?2 AND session_id = ?3", e);
	if (!q) {
		db_rollback(&st->db);
		return -1;
	}
	db_bind_i64(q, 1, now_ms());
	db_bind_binding(q, 2, b);
	return db_commit_stmt(&st->db, q, e) < 0 ? -1 : 0;
}

int
session_each(struct state *st, int (*fn)(const struct session *, void *), void *arg, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT " SESSION_COLS " FROM sessions ORDER BY seq", e);
	struct session s;
	int rc;

	if (!q)
		return -1;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		read_session(q, &s);
		if (fn(&s, arg) != 0)
			break;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* Is `old` adopted by the current session?  1, 0, or -1. */
static int
adopted_by_current(struct state *st, const struct binding *old, struct ek_err *e)
{
	return db_exists(&st->db, "SELECT 1 FROM adoptions a JOIN sessions s "
	    "ON s.incarnation = a.by_incarnation AND s.session_id = a.by_session_id "
	    "WHERE a.incarnation = ?1 AND a.session_id = ?2 AND s.status = 'current'",
	    old->incarnation, old->session_id, e);
}

int
session_authority(struct state *st, const struct binding *b, struct session *s, struct ek_err *e)
{
	int rc = session_find(st, b, s, e), adopted;

	if (rc < 0)
		return -1;
	if (rc == 0) {
		memset(s, 0, sizeof *s);
		s->b = *b;
		snprintf(s->status, sizeof s->status, "unknown");
	}
	if (rc == 1 && strcmp(s->status, "current") == 0)
		return 1;
	if (rc == 0 || (adopted = adopted_by_current(st, b, e)) == 0)
		return 0;
	if (adopted < 0)
		return -1;
	return session_current(st, s, e) < 0 ? -1 : 1;
}

int
session_adopted(struct state *st, const struct binding *by, struct binding *out, int max,
    int *n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT incarnation, session_id FROM adoptions "
	    "WHERE by_incarnation = ?1 AND by_session_id = ?2 ORDER BY adopted_at, session_id LIMIT ?3", e);
	int rc;

	*n = 0;
	if (!q)
		return -1;
	db_bind_binding(q, 1, by);
	db_bind_i64(q, 3, max);
	while ((rc = db_step(&st->db, q, e)) == 1) {
		db_col_text(q, 0, out[*n].incarnation, sizeof out[*n].incarnation);
		db_col_text(q, 1, out[*n].session_id, sizeof out[*n].session_id);
		(*n)++;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
session_adopt(struct state *st, const struct binding *old, const struct binding *by, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	q = db_prep(&st->db, "INSERT INTO adoptions(incarnation, session_id, by_incarnation, "
	    "by_session_id, adopted_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING", e);
	if (!q) {
		db_rollback(&st->db);
		return -1;
	}
	db_bind_binding(q, 1, old);
	db_bind_binding(q, 3, by);
	db_bind_i64(q, 5, now_ms());
	return db_commit_stmt(&st->db, q, e) < 0 ? -1 : 0;
}
