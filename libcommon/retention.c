/* retention — see retention.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "clock.h"
#include "crash.h"
#include "retention.h"
#include "runs.h"

/* No row that still tells the run's story or may still be delivered. */
#define NO_RESULT(t) "NOT EXISTS (SELECT 1 FROM results x WHERE x.run_id = " t ".run_id) " \
	"AND NOT EXISTS (SELECT 1 FROM receipts x WHERE x.run_id = " t ".run_id) "

/* Settled for good (schema step 16) and older than the cutoff ?1: a record
 * of an acknowledged result, alone; an acknowledged hand-back the
 * dispatcher re-queued, beside its never-started execution row at most. */
#define RECORD_GONE "r.known = 'finished' AND r.acked_at IS NOT NULL AND r.recorded_at < ?1 " \
	"AND " NO_RESULT("r") "AND NOT EXISTS (SELECT 1 FROM runs x WHERE x.run_id = r.run_id) " \
	"AND NOT EXISTS (SELECT 1 FROM handbacks x WHERE x.run_id = r.run_id)"
#define HANDBACK_GONE "h.acked_at IS NOT NULL AND h.requeued_as IS NOT NULL AND h.acked_at < ?1 " \
	"AND " NO_RESULT("h") "AND NOT EXISTS (SELECT 1 FROM run_records x WHERE x.run_id = h.run_id) " \
	"AND NOT EXISTS (SELECT 1 FROM runs x WHERE x.run_id = h.run_id AND x.state <> 'queued')"

/* Every binding a row still carries. */
#define BINDINGS "SELECT incarnation, session_id FROM accepts " \
	"UNION SELECT incarnation, session_id FROM runs UNION SELECT incarnation, session_id FROM results " \
	"UNION SELECT incarnation, session_id FROM receipts " \
	"UNION SELECT incarnation, session_id FROM handbacks " \
	"UNION SELECT incarnation, session_id FROM run_records"

/* An ended session older than ?1 that nothing refers to, not the newest. */
#define SESSION_GONE "s.status <> 'current' AND s.ended_at < ?1 " \
	"AND s.seq < (SELECT max(seq) FROM sessions) " \
	"AND (s.incarnation, s.session_id) NOT IN (" BINDINGS ")"

/* The two kinds of runs forgotten: which, oldest first (?1 cutoff, ?2
 * limit), and the deletes of one run (?1 its id), children first. */
static const struct kind {
	const char *what;
	const char *select;
	const char *del[3];
} kinds[] = {
	{ "record", "SELECT r.run_id FROM run_records r WHERE " RECORD_GONE " ORDER BY r.rowid LIMIT ?2",
	    { "DELETE FROM run_records WHERE run_id = ?1", "DELETE FROM accepts WHERE run_id = ?1",
	    NULL } },
	{ "handback", "SELECT h.run_id FROM handbacks h WHERE " HANDBACK_GONE " ORDER BY h.rowid LIMIT ?2",
	    { "DELETE FROM runs WHERE run_id = ?1 AND state = 'queued'",
	    "DELETE FROM handbacks WHERE run_id = ?1", "DELETE FROM accepts WHERE run_id = ?1" } },
};

static int
count_kept(struct state *st, int64_t cutoff, int64_t *kept, struct ek_err *e)
{
	return db_int64_at(&st->db, "SELECT (SELECT count(*) FROM run_records r "
	    "WHERE r.recorded_at < ?1 AND NOT (" RECORD_GONE ")) + (SELECT count(*) FROM handbacks h "
	    "WHERE IFNULL(h.acked_at, h.asked_at) < ?1 AND NOT (" HANDBACK_GONE "))", cutoff, kept, e);
}

/* The run ids of the next chunk of k, into ids (n of them). */
static int
take_chunk(struct state *st, const struct kind *k, int64_t cutoff, char (*ids)[RUN_ID_MAX + 1],
    int *n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, k->select, e);
	int rc;

	*n = 0;
	if (!q)
		return -1;
	db_bind_i64(q, 1, cutoff);
	db_bind_i64(q, 2, RETENTION_CHUNK_ROWS);
	while ((rc = db_step(&st->db, q, e)) == 1)
		db_col_text(q, 0, ids[(*n)++], RUN_ID_MAX + 1);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* Forget one run: every delete of its kind, in the caller's transaction. */
static int
forget_run(struct state *st, const struct kind *k, const char *id, struct ek_err *e)
{
	sqlite3_stmt *q;
	int i;

	for (i = 0; i < 3 && k->del[i]; i++) {
		if (!(q = db_prep(&st->db, k->del[i], e)))
			return -1;
		db_bind_text(q, 1, id);
		if (db_exec_stmt(&st->db, q, e) < 0)
			return -1;
	}
	return 0;
}

/* One transaction: the next chunk of k, selected and forgotten.  *n runs. */
static int
forget_chunk(struct state *st, const struct kind *k, int64_t cutoff, char (*ids)[RUN_ID_MAX + 1],
    int *n, struct ek_err *e)
{
	int i;

	db_yield(&st->db);   /* after a chunk, a waiting writer first */
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (take_chunk(st, k, cutoff, ids, n, e) < 0)
		goto fail;
	for (i = 0; i < *n; i++)
		if (forget_run(st, k, ids[i], e) < 0)
			goto fail;
	if (*n == 0) {
		db_rollback(&st->db);
		return 0;
	}
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

/* The ended sessions nothing refers to any more, read without the write
 * lock: fn(seq, session id) each.  No row can take an ended session's
 * binding again (rows come from execution rows, written under the current
 * session only), so what this read finds stays true for the delete. */
static int
each_gone_session(struct state *st, int64_t cutoff, int (*fn)(int64_t, const char *, void *),
    void *arg, struct ek_err *e)
{
	sqlite3_stmt *q;
	int rc;

	if (db_begin_read(&st->db, e) < 0)
		return -1;
	if (!(q = db_prep(&st->db, "SELECT s.seq, s.session_id FROM sessions s WHERE " SESSION_GONE
	    " ORDER BY s.seq", e))) {
		db_rollback(&st->db);
		return -1;
	}
	db_bind_i64(q, 1, cutoff);
	while ((rc = db_step(&st->db, q, e)) == 1)
		if (fn(sqlite3_column_int64(q, 0), (const char *)sqlite3_column_text(q, 1), arg) != 0) {
			rc = -1;
			break;
		}
	db_done(&st->db, q);
	db_rollback(&st->db);
	return rc < 0 ? -1 : 0;
}

struct seqs {
	int64_t *v;
	size_t n, cap;
	struct ek_err *e;
};

static int
add_seq(int64_t seq, const char *sid, void *arg)
{
	struct seqs *s = arg;
	int64_t *v;

	(void)sid;
	if (s->n == s->cap) {
		if (!(v = realloc(s->v, (s->cap ? 2 * s->cap : 16) * sizeof *v)))
			return ek_fail(s->e, EK_OSERR, "out of memory");
		s->v = v;
		s->cap = s->cap ? 2 * s->cap : 16;
	}
	s->v[s->n++] = seq;
	return 0;
}

/* Delete one session and the adoptions that name it, either side. */
static int
forget_session(struct state *st, int64_t seq, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "DELETE FROM adoptions WHERE EXISTS (SELECT 1 FROM sessions s "
	    "WHERE s.seq = ?1 AND s.status <> 'current' AND ((s.incarnation = adoptions.incarnation "
	    "AND s.session_id = adoptions.session_id) OR (s.incarnation = adoptions.by_incarnation "
	    "AND s.session_id = adoptions.by_session_id)))", e);

	if (!q)
		return -1;
	db_bind_i64(q, 1, seq);
	if (db_exec_stmt(&st->db, q, e) < 0 ||
	    !(q = db_prep(&st->db, "DELETE FROM sessions WHERE seq = ?1 AND status <> 'current'", e)))
		return -1;
	db_bind_i64(q, 1, seq);
	return db_exec_stmt(&st->db, q, e);
}

static int
forget_sessions(struct state *st, int64_t cutoff, int64_t *n, struct ek_err *e)
{
	struct seqs s = { .e = e };
	size_t i;
	int rc;

	if ((rc = each_gone_session(st, cutoff, add_seq, &s, e)) == 0 && s.n > 0 &&
	    (rc = db_begin_write(&st->db, e)) == 0) {
		for (i = 0; rc == 0 && i < s.n; i++)
			rc = forget_session(st, s.v[i], e);
		if (rc == 0)
			rc = db_commit(&st->db, e);
		else
			db_rollback(&st->db);
	}
	if (rc == 0)
		*n = (int64_t)s.n;
	free(s.v);
	return rc;
}

/* A chunked job failed after some chunks were done for good: say so in e. */
static int
failed_after(struct ek_err *e, const struct retention_count *c)
{
	char msg[sizeof e->msg], runs[48];

	cli_plural(runs, sizeof runs, c->records + c->handbacks, "run");
	if (c->records + c->handbacks > 0 && snprintf(msg, sizeof msg, "%s (%s forgotten before that)",
	    e->msg, runs) > 0)
		memcpy(e->msg, msg, sizeof msg);
	return -1;
}

int
records_prune(struct state *st, int64_t age_ms, struct retention_count *c, struct ek_err *e)
{
	char (*ids)[RUN_ID_MAX + 1] = malloc(RETENTION_CHUNK_ROWS * sizeof *ids);
	int64_t cutoff = now_ms() - age_ms, *count[] = { &c->records, &c->handbacks };
	size_t k;
	int n = 0, rc = 0;

	memset(c, 0, sizeof *c);
	if (!ids)
		return ek_fail(e, EK_OSERR, "out of memory");
	for (k = 0; rc == 0 && k < sizeof kinds / sizeof kinds[0]; k++)
		do {
			if ((rc = forget_chunk(st, &kinds[k], cutoff, ids, &n, e)) == 0 && n > 0) {
				*count[k] += n;
				crash_point("records-chunk");
			}
		} while (rc == 0 && n == RETENTION_CHUNK_ROWS);
	free(ids);
	if (rc < 0 || forget_sessions(st, cutoff, &c->sessions, e) < 0 ||
	    count_kept(st, cutoff, &c->kept, e) < 0)
		return failed_after(e, c);
	return 0;
}

struct plan {
	int (*fn)(json_t *item, void *);
	void *arg;
	int64_t n;
};

static int
plan_session(int64_t seq, const char *sid, void *arg)
{
	struct plan *p = arg;

	(void)seq;
	p->n++;
	return p->fn ? p->fn(json_pack("{s:s, s:s, s:s}", "event", "would_drop", "what", "session",
	    "session_id", sid), p->arg) : 0;
}

int
records_plan(struct state *st, int64_t age_ms, int (*fn)(json_t *item, void *), void *arg,
    struct retention_count *c, struct ek_err *e)
{
	int64_t cutoff = now_ms() - age_ms, *count[] = { &c->records, &c->handbacks };
	struct plan p = { fn, arg, 0 };
	sqlite3_stmt *q;
	size_t k;
	int rc = 0;

	memset(c, 0, sizeof *c);
	for (k = 0; rc == 0 && k < sizeof kinds / sizeof kinds[0]; k++) {
		if (!(q = db_prep(&st->db, kinds[k].select, e)))
			return -1;
		db_bind_i64(q, 1, cutoff);
		db_bind_i64(q, 2, -1);   /* no limit */
		while ((rc = db_step(&st->db, q, e)) == 1) {
			(*count[k])++;
			if (fn && fn(json_pack("{s:s, s:s, s:s}", "event", "would_drop", "what",
			    kinds[k].what, "run_id", sqlite3_column_text(q, 0)), arg) != 0) {
				rc = -1;   /* fn said why in its arg */
				break;
			}
		}
		db_done(&st->db, q);
	}
	if (rc < 0 || each_gone_session(st, cutoff, plan_session, &p, e) < 0 ||
	    count_kept(st, cutoff, &c->kept, e) < 0)
		return -1;
	c->sessions = p.n;
	return 0;
}

/* --- compaction --------------------------------------------------------------- */

/* A pragma binds nothing: its constant argument is spelled into the text. */
#define PAGES_TEXT(n) PAGES_TEXT_(n)
#define PAGES_TEXT_(n) #n

/* state.db and its WAL, in bytes (a missing WAL counts 0). */
static int64_t
file_bytes(const struct state *st)
{
	char wal[sizeof st->dbpath + 4];
	struct stat sb;
	int64_t n = 0;

	if (stat(st->dbpath, &sb) == 0)
		n += sb.st_size;
	snprintf(wal, sizeof wal, "%s-wal", st->dbpath);
	if (stat(wal, &sb) == 0)
		n += sb.st_size;
	return n;
}

/* One transaction: give back up to COMPACT_CHUNK_PAGES free pages.
 * *freed pages given back; 0 when none was free. */
static int
compact_chunk(struct state *st, int64_t *freed, struct ek_err *e)
{
	int64_t before = 0, after = 0;

	*freed = 0;
	db_yield(&st->db);   /* after a chunk, a waiting writer first */
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (db_int64(&st->db, "PRAGMA freelist_count", &before, e) < 0)
		goto fail;
	if (before == 0) {
		db_rollback(&st->db);
		return 0;
	}
	if (db_exec(&st->db, "PRAGMA incremental_vacuum(" PAGES_TEXT(COMPACT_CHUNK_PAGES) ")", e) < 0 ||
	    db_int64(&st->db, "PRAGMA freelist_count", &after, e) < 0)
		goto fail;
	*freed = before - after;
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

int
state_compact(struct state *st, struct compact_count *c, struct ek_err *e)
{
	int64_t mode = 0, freed;

	memset(c, 0, sizeof *c);
	c->bytes_before = file_bytes(st);
	if (db_int64(&st->db, "PRAGMA auto_vacuum", &mode, e) < 0)
		return -1;
	if (mode != 2)
		return ek_fail(e, EK_DATAERR, "%s: created without incremental auto-vacuum (mode %lld): "
		    "its free pages cannot be given back while the executor runs", st->dbpath,
		    (long long)mode);
	do {
		if (compact_chunk(st, &freed, e) < 0)
			return -1;
		c->pages += freed;
	} while (freed > 0);
	c->checkpointed = db_checkpoint(&st->db, COMPACT_CHECKPOINT_MS);
	c->bytes_after = file_bytes(st);
	return 0;
}
