/*
 * shares — see shares.h for the model; doc/shares.md for the rule.
 *
 * Three paths, all over the same row shape (one membership with its
 * dimension and its cached share, "struct row"):
 *
 *   read     select the asked shares; if any is stale, select them again
 *            inside a write transaction and recompute exactly those
 *   change   one short write transaction on share_members or share_dims;
 *            the schema's triggers bump the generations
 *   publish  under out/limits.lock: recompute the stale shares of every
 *            member of the changed dimensions (one write transaction),
 *            rewrite their limits files, let go of the lock, run hooks
 *            (hooks.c)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "lockwait.h"
#include "crash.h"
#include "isolate.h"
#include "shares.h"
#include "shares_int.h"

#define LOCK_WAIT_MS 10000

/* One membership, its dimension and its share. */
struct row {
	struct share s;
	bool stale;
	char *notify;           /* the run's policy.notify (publish only), malloc'd */
};

struct rows {
	struct row *v;
	size_t n, cap;
};

enum sel { SEL_ONE, SEL_DIM, SEL_ALL, SEL_AFFECTED, SEL_JOINED };

/* The row shape; NOTIFY is the last column (publication reads the hook). */
#define SHARE_SELECT(NOTIFY) "SELECT m.run_id, m.dimension, m.weight, d.capacity, " \
	"d.total_weight, d.generation, c.share, c.generation, " NOTIFY " " \
	"FROM share_members m JOIN share_dims d ON d.dimension = m.dimension " \
	"LEFT JOIN share_cache c ON c.dimension = m.dimension AND c.run_id = m.run_id "
#define NO_NOTIFY "NULL"
#define NOTIFY "(SELECT json_extract(r.policy, '$.notify') FROM runs r WHERE r.run_id = m.run_id)"

/* ?1 run id, ?2 dimension, ?3 a JSON array of dimensions. */
static const char *const select_sql[] = {
	[SEL_ONE] = SHARE_SELECT(NO_NOTIFY) "WHERE m.run_id = ?1 AND m.dimension = ?2",
	[SEL_DIM] = SHARE_SELECT(NO_NOTIFY) "WHERE m.dimension = ?2 ORDER BY m.run_id",
	[SEL_ALL] = SHARE_SELECT(NO_NOTIFY) "ORDER BY m.run_id, m.dimension",
	[SEL_AFFECTED] = SHARE_SELECT(NOTIFY) "WHERE m.run_id IN (SELECT run_id FROM share_members "
	    "WHERE dimension IN (SELECT value FROM json_each(?3))) ORDER BY m.run_id, m.dimension",
	/* Self (?1) and the members of those of ?3 that have a capacity: in an
	 * unlimited dimension a join or a leave changes nobody else's limit. */
	[SEL_JOINED] = SHARE_SELECT(NOTIFY) "WHERE m.run_id = ?1 OR m.run_id IN (SELECT run_id "
	    "FROM share_members WHERE dimension IN (SELECT j.value FROM json_each(?3) j "
	    "JOIN share_dims sd ON sd.dimension = j.value WHERE sd.capacity IS NOT NULL)) "
	    "ORDER BY m.run_id, m.dimension",
};

/* See shares.h. */
bool
share_dimension_valid(const char *d)
{
	return strcmp(d, "executor") == 0 || (strncmp(d, "dest:", 5) == 0 && run_id_valid(d + 5));
}

/* See shares.h: the same path exec-run hands the guest. */
int
shares_limits_path(const struct state *st, const char *run_id, char *buf, size_t n)
{
	char name[RUN_ID_MAX + 16];

	snprintf(name, sizeof name, "out/%s.limits", run_id);
	return state_path(st, name, buf, n);
}

/* The rule: capacity × weight / total, rounded down, exactly (128 bits). */
static int64_t
share_of(int64_t capacity, int64_t weight, int64_t total)
{
	if (capacity == SHARE_UNLIMITED || total <= 0)
		return SHARE_UNLIMITED;
	return (int64_t)((unsigned __int128)capacity * (uint64_t)weight / (uint64_t)total);
}

/* policy.weight in millionths, clamped to the schema's range; 1 when absent. */
static int64_t
weight_of(json_t *policy)
{
	json_t *w = json_object_get(policy, "weight");
	double v = json_is_number(w) ? json_number_value(w) : 1.0;

	if (!(v >= 1e-6))
		return 1;
	if (v > 1e6)
		return 1000000000000LL;
	return (int64_t)(v * SHARE_WEIGHT_UNIT + 0.5);
}

/* ["executor", "dest:NAME"...] for policy; NULL if a name is invalid. */
static json_t *
dims_of(json_t *policy)
{
	json_t *dims = json_pack("[s]", "executor"), *d;
	char name[SHARE_DIM_MAX + 1];
	size_t i;

	json_array_foreach(json_object_get(policy, "destinations"), i, d) {
		if (!json_is_string(d) || !run_id_valid(json_string_value(d))) {
			json_decref(dims);
			return NULL;
		}
		snprintf(name, sizeof name, "dest:%s", json_string_value(d));
		json_array_append_new(dims, json_string(name));
	}
	return dims;
}

/* --- rows ------------------------------------------------------------------- */

/* Empty r, keeping its memory. */
static void
rows_clear(struct rows *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->v[i].notify);
	r->n = 0;
}

/* Empty r and release its memory. */
static void
rows_free(struct rows *r)
{
	rows_clear(r);
	free(r->v);
	*r = (struct rows){ 0 };
}

/* Column col as an integer, or null_value when it is NULL. */
static int64_t
col_i64_or(sqlite3_stmt *q, int col, int64_t null_value)
{
	return sqlite3_column_type(q, col) == SQLITE_NULL ? null_value : sqlite3_column_int64(q, col);
}

/* Append the current row of q (SHARE_SELECT columns) to r. */
static int
rows_take(struct rows *r, sqlite3_stmt *q, struct ek_err *e)
{
	struct row *w;

	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		struct row *v = realloc(r->v, cap * sizeof *v);
		if (!v)
			return ek_fail(e, EK_OSERR, "out of memory reading shares");
		r->v = v;
		r->cap = cap;
	}
	w = &r->v[r->n++];
	memset(w, 0, sizeof *w);
	db_col_text(q, 0, w->s.run_id, sizeof w->s.run_id);
	db_col_text(q, 1, w->s.dimension, sizeof w->s.dimension);
	w->s.weight = sqlite3_column_int64(q, 2);
	w->s.capacity = col_i64_or(q, 3, SHARE_UNLIMITED);
	w->s.total_weight = sqlite3_column_int64(q, 4);
	w->s.generation = sqlite3_column_int64(q, 5);
	w->s.share = col_i64_or(q, 6, SHARE_UNLIMITED);
	w->stale = col_i64_or(q, 7, -1) != w->s.generation;
	if (sqlite3_column_type(q, 8) != SQLITE_NULL)
		w->notify = strdup((const char *)sqlite3_column_text(q, 8));
	return 0;
}

/* The rows of selection sel into r; *stale counts the stale ones. */
static int
rows_select(struct state *st, enum sel sel, const char *run_id, const char *dim, const char *dims,
    struct rows *r, int *stale, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, select_sql[sel], e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	db_bind_text(q, 2, dim);
	db_bind_text(q, 3, dims);
	*stale = 0;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		if ((rc = rows_take(r, q, e)) < 0)
			break;
		*stale += r->v[r->n - 1].stale;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* Recompute and store the stale rows of r, and only those (caller's write). */
static int
rows_refresh(struct state *st, struct rows *r, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "INSERT INTO share_cache(run_id, dimension, share, "
	    "generation, computed_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(run_id, dimension) "
	    "DO UPDATE SET share = excluded.share, generation = excluded.generation, "
	    "computed_at = excluded.computed_at", e);
	int64_t now = now_ms();
	size_t i;
	int rc = 0;

	if (!q)
		return -1;
	for (i = 0; i < r->n && rc == 0; i++) {
		struct share *s = &r->v[i].s;
		if (!r->v[i].stale)
			continue;
		s->share = share_of(s->capacity, s->weight, s->total_weight);
		s->recomputed = true;
		sqlite3_reset(q);
		db_bind_text(q, 1, s->run_id);
		db_bind_text(q, 2, s->dimension);
		if (s->share == SHARE_UNLIMITED)
			sqlite3_bind_null(q, 3);
		else
			db_bind_i64(q, 3, s->share);
		db_bind_i64(q, 4, s->generation);
		db_bind_i64(q, 5, now);
		rc = db_step(&st->db, q, e) < 0 ? -1 : 0;
		r->v[i].stale = false;
	}
	db_done(&st->db, q);
	return rc;
}

/* Select and recompute the stale rows, inside the caller's write transaction. */
static int
rows_fresh_in_write(struct state *st, enum sel sel, const char *run_id, const char *dim,
    const char *dims, struct rows *r, struct ek_err *e)
{
	int stale;

	rows_clear(r);
	if (rows_select(st, sel, run_id, dim, dims, r, &stale, e) < 0)
		return -1;
	return stale ? rows_refresh(st, r, e) : 0;
}

/* The read path: a plain read; a write transaction only if something is stale. */
static int
rows_read(struct state *st, enum sel sel, const char *run_id, const char *dim, struct rows *r,
    struct ek_err *e)
{
	int stale;

	if (rows_select(st, sel, run_id, dim, NULL, r, &stale, e) < 0)
		return -1;
	if (stale == 0)
		return 0;
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (rows_fresh_in_write(st, sel, run_id, dim, NULL, r, e) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	return db_commit(&st->db, e);
}

/* --- publication ----------------------------------------------------------- */

/* See shares_int.h. */
void
shares_note_fail(struct shares_note *note, const char *run_id, const char *what,
    const char *fmt, ...)
{
	va_list ap;

	if (!note)
		return;
	if (strcmp(what, "notify") == 0)
		note->hooks_failed++;
	else
		note->files_failed++;
	if (note->nfail == SHARES_NOTE_MAX)
		return;
	snprintf(note->fail[note->nfail].run_id, sizeof note->fail[0].run_id, "%s", run_id);
	snprintf(note->fail[note->nfail].what, sizeof note->fail[0].what, "%s", what);
	va_start(ap, fmt);
	vsnprintf(note->fail[note->nfail].detail, sizeof note->fail[0].detail, fmt, ap);
	va_end(ap);
	note->nfail++;
}

/* The limits file content of the rows v[0..n) of one run. */
static char *
limits_body(const struct row *v, size_t n)
{
	json_t *dests = json_object(), *exec_bps = json_null(), *o;
	int64_t gen = 0;
	char *body;
	size_t i;

	for (i = 0; i < n; i++) {
		json_t *bps = v[i].s.share == SHARE_UNLIMITED ? json_null() : json_integer(v[i].s.share);
		gen += v[i].s.generation;
		if (strcmp(v[i].s.dimension, "executor") == 0) {
			json_decref(exec_bps);
			exec_bps = bps;
		} else {
			json_object_set_new(dests, v[i].s.dimension + 5, bps);
		}
	}
	o = json_pack("{s:s, s:o, s:o, s:I}", "run_id", v[0].s.run_id, "executor_bps", exec_bps,
	    "destinations", dests, "generation", (json_int_t)gen);
	body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return body;
}

/* Group the rows (sorted by run id) into one pub per run. */
static struct pub *
pubs_build(const struct state *st, const struct rows *r, size_t *npubs)
{
	struct pub *p = calloc(r->n ? r->n : 1, sizeof *p);
	size_t i = 0, j, n = 0;

	if (!p)
		return NULL;
	while (i < r->n) {
		for (j = i; j < r->n && strcmp(r->v[j].s.run_id, r->v[i].s.run_id) == 0; j++)
			;
		p[n].run_id = r->v[i].s.run_id;
		p[n].notify = r->v[i].notify;
		p[n].body = limits_body(&r->v[i], j - i);
		if (shares_limits_path(st, p[n].run_id, p[n].path, sizeof p[n].path) < 0)
			p[n].path[0] = '\0';
		n++;
		i = j;
	}
	*npubs = n;
	return p;
}

/* Rewrite run_id's limits file with body, atomically (state.h), and its
 * name in the guest's view where it has one (isolate.h): one file under
 * both names, readable by whoever may search the view directory (out/
 * itself lets nobody else in).  0, or -1 (e filled). */
static int
write_limits(const struct state *st, const char *run_id, const char *body, struct ek_err *e)
{
	char name[NAME_MAX + 16], out[PATH_MAX], view[NAME_MAX + 16], vpath[PATH_MAX];
	mode_t mode = 0600;
	struct stat sb;
	int fd, rc;

	if (snprintf(name, sizeof name, "%s.limits", run_id) >= (int)sizeof name ||
	    state_path(st, "out", out, sizeof out) < 0 || isolate_view_name(run_id, view, sizeof view) < 0 ||
	    state_path(st, view, vpath, sizeof vpath) < 0)
		return ek_fail(e, EK_SOFTWARE, "path too long");
	if (st->out_fd < 0)
		return ek_fail(e, EK_CANTCREAT, "no directory '%s'", out);
	if ((fd = state_open_dir(st, view, e)) < 0 && errno != ENOENT)
		return -1;
	if (fd >= 0 && fstat(fd, &sb) == 0 && (sb.st_mode & 0011))
		mode = 0644;
	rc = state_write_atomic_at(st->out_fd, out, name, body, mode, false, e);
	if (rc == 0 && fd >= 0 && state_link_atomic_at(st->out_fd, fd, vpath, name, e) < 0 &&
	    errno != ENOENT)
		rc = -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Take out/limits.lock (bounded wait); the descriptor, or -1 (e filled). */
static int
lock_limits(struct state *st, struct ek_err *e)
{
	char path[PATH_MAX];
	int fd, err;

	state_path(st, "out/limits.lock", path, sizeof path);
	/* Only locked, never written: read-only is enough for flock. */
	if ((fd = state_open_file(st, "out/limits.lock", O_RDONLY | O_CREAT, 0600, e)) < 0)
		return -1;
	if (lock_wait(fd, LOCK_EX, mono_ms() + LOCK_WAIT_MS) == 0)
		return fd;
	err = errno;
	close(fd);
	return ek_fail(e, EK_TEMPFAIL, "'%s': %s", path, err == EWOULDBLOCK ?
	    "held by another publisher for too long" : strerror(err));
}

/* --- publish ------------------------------------------------------------------ */

/* Recompute what dims changed, under the lock; rows get every share of
 * self and of every member of the limited ones of dims. */
static int
publish_collect(struct state *st, enum sel sel, const char *self, const char *dims, struct rows *r,
    struct ek_err *e)
{
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (rows_fresh_in_write(st, sel, self, NULL, dims, r, e) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	return db_commit(&st->db, e);
}

/* Write every pub's limits file; -1 only if self's failed (e filled). */
static int
publish_files(const struct state *st, struct pub *pubs, size_t n, const char *self,
    struct shares_note *note, struct ek_err *e)
{
	struct ek_err w = { 0 };
	const char *why;
	size_t i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		if (!pubs[i].body)
			why = "out of memory";
		else if (write_limits(st, pubs[i].run_id, pubs[i].body, &w) == 0) {
			if (note)
				note->rewritten++;
			continue;
		} else
			why = w.msg;
		shares_note_fail(note, pubs[i].run_id, "limits", "%s", why);
		if (self && strcmp(pubs[i].run_id, self) == 0)
			rc = ek_fail(e, EK_IOERR, "limits file of run '%s': %s", self, why);
	}
	return rc;
}

/* Whether any of dims (JSON array text) has a capacity: 1, 0, or -1 (e). */
static int
dims_limited(struct state *st, const char *dimtext, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT EXISTS (SELECT 1 FROM share_dims WHERE "
	    "capacity IS NOT NULL AND dimension IN (SELECT value FROM json_each(?1)))", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, dimtext);
	if ((rc = db_step(&st->db, q, e)) == 1)
		rc = sqlite3_column_int(q, 0) != 0;
	db_done(&st->db, q);
	return rc;
}

/* A run that joins or leaves dimensions none of which has a capacity
 * changes no one's share, its own included (unlimited): there is nothing
 * to publish, and no limits file to write (its absence says "no limit";
 * doc/shares.md).  Its membership is committed before this read, so a
 * capacity set after it reaches the run through that publisher.  One that
 * already has a file (a capacity was set and then lifted) has it brought
 * up to date, or removed when it leaves. */
static bool
nothing_to_publish(struct state *st, const char *dimtext, const char *self, bool leaving)
{
	char name[RUN_ID_MAX + 16];
	struct ek_err e = { 0 };

	if (!self || snprintf(name, sizeof name, "%s.limits", self) >= (int)sizeof name ||
	    dims_limited(st, dimtext, &e) != 0)
		return false;   /* an error takes the full path, which says it */
	if (leaving)
		return unlinkat(st->out_fd, name, 0) == 0 || errno == ENOENT;
	return faccessat(st->out_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

/* Bring the limits files of every member of dims (a JSON array) up to
 * date and run their hooks (except self's).  leaving: self has left; its
 * file is removed under the same lock. */
static int
publish(struct state *st, json_t *dims, const char *self, bool leaving, struct shares_note *note,
    struct ek_err *e)
{
	struct rows r = { 0 };
	struct pub *pubs = NULL;
	char *dimtext = json_dumps(dims, JSON_COMPACT), path[PATH_MAX], name[RUN_ID_MAX + 16];
	size_t n = 0, i;
	int lock, rc = -1;

	if (!dimtext)
		return ek_fail(e, EK_OSERR, "out of memory");
	if (nothing_to_publish(st, dimtext, self, leaving)) {
		free(dimtext);
		return 0;
	}
	if ((lock = lock_limits(st, e)) < 0)
		goto out;
	/* A capacity change (no self) touches every member of its dimension. */
	if (publish_collect(st, self ? SEL_JOINED : SEL_AFFECTED, self, dimtext, &r, e) == 0 &&
	    ((pubs = pubs_build(st, &r, &n)) || !ek_fail(e, EK_OSERR, "out of memory")))
		rc = publish_files(st, pubs, n, leaving ? NULL : self, note, e);
	if (rc == 0 && leaving && shares_limits_path(st, self, path, sizeof path) == 0 &&
	    snprintf(name, sizeof name, "out/%s.limits", self) < (int)sizeof name &&
	    state_unlink(st, name) < 0)
		shares_note_fail(note, self, "limits", "unlink '%s': %s", path, strerror(errno));
	close(lock);   /* hooks run outside the lock: a slow hook delays no publisher */
	if (pubs)
		shares_hooks_run(st, pubs, n, self, note);
out:
	for (i = 0; i < n; i++)
		free(pubs[i].body);
	free(pubs);
	rows_free(&r);
	free(dimtext);
	return rc;
}

/* --- changes ---------------------------------------------------------------------- */

/* run_id joins each of dims with weight (caller's write); joining twice is a no-op. */
static int
insert_members(struct state *st, const char *run_id, json_t *dims, int64_t weight,
    struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "INSERT INTO share_members(run_id, dimension, weight, "
	    "joined_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING", e);
	int64_t now = now_ms();
	json_t *d;
	size_t i;
	int rc = 0;

	if (!q)
		return -1;
	json_array_foreach(dims, i, d) {
		sqlite3_reset(q);
		db_bind_text(q, 1, run_id);
		db_bind_text(q, 2, json_string_value(d));
		db_bind_i64(q, 3, weight);
		db_bind_i64(q, 4, now);
		if ((rc = db_step(&st->db, q, e)) < 0)
			break;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* The dimensions policy names for run_id, checked; NULL with e filled. */
static json_t *
join_dims(const char *run_id, json_t *policy, struct ek_err *e)
{
	json_t *dims = NULL;

	if (!run_id_valid(run_id))
		ek_fail(e, EK_USAGE, "'%.200s' is not a valid run id", run_id);
	else if (policy && !json_is_object(policy))
		ek_fail(e, EK_DATAERR, "run '%s': policy is not an object", run_id);
	else if (!(dims = dims_of(policy)))
		ek_fail(e, EK_DATAERR, "run '%s': policy.destinations holds an invalid name", run_id);
	return dims;
}

int
shares_join_in(struct state *st, const char *run_id, json_t *policy, struct ek_err *e)
{
	json_t *dims = join_dims(run_id, policy, e);
	int rc;

	if (!dims)
		return -1;
	rc = insert_members(st, run_id, dims, weight_of(policy), e);
	json_decref(dims);
	return rc;
}

int
shares_publish_joined(struct state *st, const char *run_id, json_t *policy, int flags,
    struct shares_note *note, struct ek_err *e)
{
	json_t *dims = join_dims(run_id, policy, e);
	int rc;

	if (!dims)
		return -1;
	rc = flags & SHARES_NO_PUBLISH ? 0 : publish(st, dims, run_id, false, note, e);
	json_decref(dims);
	return rc;
}

int
shares_join(struct state *st, const char *run_id, json_t *policy, int flags,
    struct shares_note *note, struct ek_err *e)
{
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (shares_join_in(st, run_id, policy, e) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	if (db_commit(&st->db, e) < 0)
		return -1;
	return shares_publish_joined(st, run_id, policy, flags, note, e);
}

int
shares_leave_in(struct state *st, const char *run_id, json_t *left, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT dimension FROM share_members WHERE run_id = ?1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	while ((rc = db_step(&st->db, q, e)) == 1)
		json_array_append_new(left, json_string((const char *)sqlite3_column_text(q, 0)));
	db_done(&st->db, q);
	if (rc < 0 || !(q = db_prep(&st->db, "DELETE FROM share_members WHERE run_id = ?1", e)))
		return -1;
	db_bind_text(q, 1, run_id);
	return db_exec_stmt(&st->db, q, e);
}

int
shares_left(struct state *st, const char *run_id, json_t *left, int flags,
    struct shares_note *note, struct ek_err *e)
{
	if (!run_id_valid(run_id))
		return ek_fail(e, EK_USAGE, "'%.200s' is not a valid run id", run_id);
	return flags & SHARES_NO_PUBLISH ? 0 : publish(st, left, run_id, true, note, e);
}

/* Upsert the capacity (the trigger bumps the generation), then read the
 * generation it left (caller's write transaction). */
static int
store_capacity(struct state *st, const char *dim, int64_t capacity, int64_t *gen, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "INSERT INTO share_dims(dimension, capacity, changed_at) "
	    "VALUES (?1, ?2, ?3) ON CONFLICT(dimension) DO UPDATE SET capacity = excluded.capacity, "
	    "changed_at = excluded.changed_at", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, dim);
	if (capacity == SHARE_UNLIMITED)
		sqlite3_bind_null(q, 2);
	else
		db_bind_i64(q, 2, capacity);
	db_bind_i64(q, 3, now_ms());
	if (db_exec_stmt(&st->db, q, e) < 0 ||
	    !(q = db_prep(&st->db, "SELECT generation FROM share_dims WHERE dimension = ?1", e)))
		return -1;
	db_bind_text(q, 1, dim);
	if ((rc = db_step(&st->db, q, e)) == 1)
		*gen = sqlite3_column_int64(q, 0);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
shares_set_capacity(struct state *st, const char *dimension, int64_t capacity, int flags,
    int64_t *generation, struct shares_note *note, struct ek_err *e)
{
	json_t *dims;
	int64_t gen = 0;
	int rc;

	if (!share_dimension_valid(dimension))
		return ek_fail(e, EK_USAGE, "'%.200s' is not a dimension ('executor' or 'dest:NAME')", dimension);
	if (capacity != SHARE_UNLIMITED && (capacity < 0 || capacity > SHARE_CAPACITY_MAX))
		return ek_fail(e, EK_USAGE, "capacity %lld is out of range", (long long)capacity);
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (store_capacity(st, dimension, capacity, &gen, e) < 0) {
		db_rollback(&st->db);
		return -1;
	}
	if (db_commit(&st->db, e) < 0)
		return -1;
	if (generation)
		*generation = gen;
	crash_point("shares-changed");   /* committed, not yet published: shares pending */
	if (flags & SHARES_NO_PUBLISH)
		return 0;
	dims = json_pack("[s]", dimension);
	rc = publish(st, dims, NULL, false, note, e);
	json_decref(dims);
	return rc;
}

/* --- reading ------------------------------------------------------------------------ */

/* Why (run_id, dim) has no share: not running, or an undeclared destination. */
static int
no_share(struct state *st, const char *run_id, const char *dim, struct ek_err *e)
{
	int rc = db_exists(&st->db, "SELECT 1 FROM share_members WHERE run_id = ?1 LIMIT 1",
	    run_id, NULL, e);

	if (rc < 0)
		return -1;
	if (rc == 0)
		return ek_fail(e, EK_NOINPUT, "run '%s' is not running: it has no shares", run_id);
	return ek_fail(e, EK_NODEST, "run '%s' did not declare destination '%s'", run_id, dim + 5);
}

int
shares_read(struct state *st, const char *run_id, const char *dimension, struct share *out,
    struct ek_err *e)
{
	struct rows r = { 0 };
	int rc;

	if (!share_dimension_valid(dimension))
		return ek_fail(e, EK_USAGE, "'%.200s' is not a dimension ('executor' or 'dest:NAME')", dimension);
	rc = rows_read(st, SEL_ONE, run_id, dimension, &r, e);
	if (rc == 0 && r.n == 0)
		rc = no_share(st, run_id, dimension, e);
	else if (rc == 0)
		*out = r.v[0].s;
	rows_free(&r);
	return rc;
}

int
shares_list(struct state *st, const char *dimension, int (*fn)(const struct share *, void *),
    void *arg, struct ek_err *e)
{
	struct rows r = { 0 };
	size_t i;
	int rc;

	if (dimension && !share_dimension_valid(dimension))
		return ek_fail(e, EK_USAGE, "'%.200s' is not a dimension ('executor' or 'dest:NAME')", dimension);
	rc = rows_read(st, dimension ? SEL_DIM : SEL_ALL, NULL, dimension, &r, e);
	for (i = 0; rc == 0 && i < r.n; i++)
		rc = fn(&r.v[i].s, arg);
	rows_free(&r);
	return rc;
}

int
shares_dims(struct state *st, int (*fn)(const struct share_dim *, void *), void *arg,
    struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT dimension, capacity, generation, members, "
	    "total_weight FROM share_dims ORDER BY dimension", e);
	struct share_dim d;
	int rc, stop = 0;

	if (!q)
		return -1;
	while (!stop && (rc = db_step(&st->db, q, e)) == 1) {
		db_col_text(q, 0, d.dimension, sizeof d.dimension);
		d.capacity = col_i64_or(q, 1, SHARE_UNLIMITED);
		d.generation = sqlite3_column_int64(q, 2);
		d.members = sqlite3_column_int64(q, 3);
		d.total_weight = sqlite3_column_int64(q, 4);
		stop = fn(&d, arg);
	}
	db_done(&st->db, q);
	return stop ? stop : (rc < 0 ? -1 : 0);
}
