/*
 * accept — see runs.h (the acceptor): accepting run specs in a batch, in
 * the caller's write transaction, idempotent by run id.  A new run gets an
 * accepts row (its identity, canonical content and receipt, kept until the
 * operator's retention forgets it: retention.h; the content alone gives way
 * to its digest once the run is settled for good, schema step 17) and an
 * execution row; the same id with the same content
 * is a duplicate answered with the original receipt, with other content a
 * conflict.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "runs.h"
#include "sha256.h"

/* --- acceptance ----------------------------------------------------------- */

struct acceptor {
	struct state *st;
	struct binding b;
	sqlite3_stmt *find, *ins_accept, *ins_run;
	int64_t seq;   /* receipts are "<executor id>:<seq>"; the batch holds the write lock */
	size_t id_len; /* of the executor id */
	int64_t added; /* new runs, counted once per batch (acceptor_count) */
};

void
acceptor_free(struct acceptor *a)
{
	if (!a)
		return;
	db_done(&a->st->db, a->find);
	db_done(&a->st->db, a->ins_accept);
	db_done(&a->st->db, a->ins_run);
	free(a);
}

/* The number of the last receipt given: every new run is counted
 * ('accepted', acceptor_count()) in its batch's transaction, so the count
 * only grows, also once settled runs' acceptances are forgotten (schema
 * step 16), where MAX(rowid) would fall back and numbers repeat. */
static int
last_seq(struct acceptor *a, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&a->st->db, "SELECT max(IFNULL((SELECT MAX(rowid) FROM accepts), 0), "
	    "(SELECT value FROM counters WHERE name = 'accepted' AND label = ''))", e);
	int rc;

	if (!q)
		return -1;
	if ((rc = db_step(&a->st->db, q, e)) == 1)
		a->seq = sqlite3_column_int64(q, 0);
	db_done(&a->st->db, q);
	return rc < 0 ? -1 : 0;
}

/* Bound without a copy: what is bound outlives the step (a spec, the
 * acceptor's binding, the caller's receipt buffer), and the statements are
 * reset before it goes.  Text of len bytes, or NUL-terminated if len < 0. */
static void
bind_text(sqlite3_stmt *q, int i, const char *s, int len)
{
	if (s)
		sqlite3_bind_text(q, i, s, len, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, i);
}

/* A member of the spec in its canonical form (runs.h), or NULL (absent). */
static void
bind_member(sqlite3_stmt *q, int i, const struct runspec *rs, size_t off, size_t len)
{
	bind_text(q, i, len ? rs->content + off : NULL, (int)len);
}

struct acceptor *
acceptor_new(struct state *st, const struct binding *b, struct ek_err *e)
{
	struct acceptor *a = calloc(1, sizeof *a);

	if (!a) {
		ek_fail(e, EK_OSERR, "out of memory");
		return NULL;
	}
	a->st = st;
	a->b = *b;
	a->id_len = strlen(st->executor_id);
	a->find = db_prep(&st->db, "SELECT content, receipt, content_sha256 FROM accepts "
	    "WHERE run_id = ?1", e);
	a->ins_accept = a->find ? db_prep(&st->db, "INSERT INTO accepts(run_id, txn_id, incarnation, "
	    "session_id, content, receipt, accepted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
	    "ON CONFLICT(run_id) DO NOTHING", e) : NULL;
	a->ins_run = a->ins_accept ? db_prep(&st->db, "INSERT INTO runs(run_id, txn_id, incarnation, "
	    "session_id, program, args, env, cwd, policy, due_at, timeout_ms) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", e) : NULL;
	if (!a->ins_run || last_seq(a, e) < 0) {
		acceptor_free(a);
		return NULL;
	}
	/* The binding is the same for every run of the batch: bound once. */
	bind_text(a->ins_accept, 3, a->b.incarnation, -1);
	bind_text(a->ins_accept, 4, a->b.session_id, -1);
	bind_text(a->ins_run, 3, a->b.incarnation, -1);
	bind_text(a->ins_run, 4, a->b.session_id, -1);
	return a;
}

/* Is the stored spec of row q (content, receipt, content_sha256) the
 * spec content?  A spec dropped once its run was settled for good (schema
 * step 17) is compared by its digest. */
static bool
same_spec(sqlite3_stmt *q, const char *content)
{
	const char *stored = (const char *)sqlite3_column_text(q, 0);
	const char *digest = (const char *)sqlite3_column_text(q, 2);
	char hex[SHA256_HEX_LEN + 1];

	if (stored && *stored)
		return strcmp(stored, content) == 0;
	sha256_hex(content, strlen(content), hex);
	return digest && strcmp(digest, hex) == 0;
}

/* Look the run id up: 1 known (outcome + receipt filled), 0 new, -1 error. */
static int
find_known(struct acceptor *a, const struct runspec *rs, enum accept_outcome *out,
    char *receipt, size_t n, struct ek_err *e)
{
	int rc;

	sqlite3_reset(a->find);
	bind_text(a->find, 1, rs->run_id, -1);
	rc = db_step(&a->st->db, a->find, e);
	if (rc == 1) {
		*out = same_spec(a->find, rs->content) ? ACCEPT_DUPLICATE : ACCEPT_CONFLICT;
		db_col_text(a->find, 1, receipt, n);
	}
	sqlite3_reset(a->find);
	return rc;
}

static int
insert_run(struct acceptor *a, const struct runspec *rs, int64_t now, struct ek_err *e)
{
	sqlite3_stmt *q = a->ins_run;
	int rc;

	bind_text(q, 1, rs->run_id, -1);
	bind_text(q, 2, rs->txn_id, -1);
	bind_text(q, 5, rs->program, -1);
	if (rs->args_at.len)
		bind_member(q, 6, rs, rs->args_at.off, rs->args_at.len);
	else
		bind_text(q, 6, "[]", 2);
	bind_member(q, 7, rs, rs->env_at.off, rs->env_at.len);
	bind_text(q, 8, rs->cwd, -1);
	bind_member(q, 9, rs, rs->policy_at.off, rs->policy_at.len);
	db_bind_i64(q, 10, rs->due_at >= 0 ? rs->due_at : now);
	if (rs->timeout_ms > 0)
		db_bind_i64(q, 11, rs->timeout_ms);
	else
		sqlite3_bind_null(q, 11);
	rc = db_step(&a->st->db, q, e);
	sqlite3_reset(q);
	return rc < 0 ? -1 : 0;
}

/* The receipt of the next new run, "<executor id>:<seq>", written without
 * printf (a batch writes one a run). */
static void
next_receipt(const struct acceptor *a, char *receipt, size_t n)
{
	char digits[24], *d = digits + sizeof digits;
	unsigned long long v = (unsigned long long)(a->seq + 1);
	size_t len;

	do
		*--d = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	len = (size_t)(digits + sizeof digits - d);
	if (a->id_len + 1 + len >= n) {   /* never with the callers' buffers */
		snprintf(receipt, n, "%s:%lld", a->st->executor_id, (long long)(a->seq + 1));
		return;
	}
	memcpy(receipt, a->st->executor_id, a->id_len);
	receipt[a->id_len] = ':';
	memcpy(receipt + a->id_len + 1, d, len);
	receipt[a->id_len + 1 + len] = '\0';
}

int
acceptor_add(struct acceptor *a, const struct runspec *rs, enum accept_outcome *out,
    char *receipt, size_t n, struct ek_err *e)
{
	sqlite3_stmt *q = a->ins_accept;
	int64_t now = now_ms();
	int rc;

	/* Insert first: a new run is the common case, a known id the exception. */
	next_receipt(a, receipt, n);
	bind_text(q, 1, rs->run_id, -1);
	bind_text(q, 2, rs->txn_id, -1);
	bind_text(q, 5, rs->content, -1);
	bind_text(q, 6, receipt, -1);
	db_bind_i64(q, 7, now);
	rc = db_step(&a->st->db, q, e);
	sqlite3_reset(q);
	if (rc < 0)
		return -1;
	if (sqlite3_changes(a->st->db.h) == 0)   /* accepted before: same content or not? */
		return find_known(a, rs, out, receipt, n, e) == 1 ? 0 :
		    ek_fail(e, EK_SOFTWARE, "run '%s': conflict without a row", rs->run_id);
	a->seq++;
	a->added++;
	*out = ACCEPT_NEW;
	return insert_run(a, rs, now, e);
}

int
acceptor_count(struct acceptor *a, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (a->added == 0)
		return 0;
	if (!(q = db_prep(&a->st->db, "UPDATE counters SET value = value + ?1 "
	    "WHERE name = 'accepted' AND label = ''", e)))
		return -1;
	db_bind_i64(q, 1, a->added);
	a->added = 0;
	return db_exec_stmt(&a->st->db, q, e);
}

