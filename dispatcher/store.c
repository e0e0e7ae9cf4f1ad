/*
 * store — the dispatcher's SQLite store: one connection under one mutex, and a
 * second one that only reads (for the heartbeats).
 *
 * The schema is schema/dispatcher/NNN_name.sql, compiled in as
 * dispatcher/schema_sql.h by build-aux/sql2c.sh, as the executor's is.
 * Unlike the executor's, which is created once and then version-checked,
 * every step here is applied at every open, in order, in one transaction:
 * each creates only what is missing (IF NOT EXISTS), so a store written
 * before a step existed gains its tables and nothing else changes.  The
 * store's one meta fact is its incarnation, created once and then kept
 * (a different --incarnation is ignored, with a note on stderr).
 *
 * A request's handler works in one transaction (store_begin() to write,
 * store_begin_read() to read, store_end()) under dsp_store.mu.  A second
 * connection, dsp_store.peek under its own mutex, only reads: a heartbeat
 * that has nothing to write answers from it (store_peek_begin()), so it
 * never waits for a write, nor for the sync of a group commit.  The store
 * knows no request and answers none: its functions fill a struct ek_err,
 * and http.c's tx_begin(), tx_read() and tx_end() turn a failure into the
 * handler's 500.
 *
 * Every statement comes from db_prep() (through sql_prep() or sql_exec())
 * and goes back through db_done(), under dsp_store.mu.  The connection
 * does not keep statements prepared (db.keep is off), so db_done()
 * finalizes each one.  db_prep()'s cache has no lock of its own; every use
 * here holds the mutex, so keeping would be safe, but it would change how
 * statements live across requests: left for a change of its own.  The
 * second connection keeps its one query prepared (under peek_mu).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "backup.h"
#include "random.h"

#include "util.h"
#include "store.h"

struct store dsp_store = { .mu = PTHREAD_MUTEX_INITIALIZER, .peek_mu = PTHREAD_MUTEX_INITIALIZER };

struct schema_step { const char *name; const char *sql; };
#include "dispatcher/schema_sql.h"
#define SCHEMA_STEPS ((int)(sizeof schema_steps / sizeof schema_steps[0]))

/* Prepare sql on the store and bind args by types ('s' text, 'i' int64). */
static sqlite3_stmt *
sql_vprep(struct ek_err *e, const char *sql, const char *types, va_list ap)
{
	sqlite3_stmt *st = db_prep(&dsp_store.db, sql, e);
	int i;

	for (i = 0; st && types[i]; i++) {
		if (types[i] == 's')
			db_bind_text(st, i + 1, va_arg(ap, const char *));
		else
			db_bind_i64(st, i + 1, va_arg(ap, int64_t));
	}
	return st;
}

sqlite3_stmt *
sql_prep(struct ek_err *e, const char *sql, const char *types, ...)
{
	va_list ap;
	sqlite3_stmt *st;

	va_start(ap, types);
	st = sql_vprep(e, sql, types, ap);
	va_end(ap);
	return st;
}

int
sql_exec(struct ek_err *e, const char *sql, const char *types, ...)
{
	va_list ap;
	sqlite3_stmt *st;

	va_start(ap, types);
	st = sql_vprep(e, sql, types, ap);
	va_end(ap);
	return st ? db_exec_stmt(&dsp_store.db, st, e) : -1;
}

const char *
col(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

json_t *
col_json(sqlite3_stmt *st, int i)
{
	const char *s = col(st, i);

	return s ? json_string(s) : json_null();
}

int
rows_into(struct ek_err *e, json_t *obj, const char *key, const char *sql, const char *arg,
    const char *const *names)
{
	json_t *list = json_array(), *row;
	sqlite3_stmt *st = arg ? sql_prep(e, sql, "s", arg) : sql_prep(e, sql, "");
	int r = -1, i;

	while (st && (r = db_step(&dsp_store.db, st, e)) == 1) {
		row = json_object();
		for (i = 0; names[i]; i++)
			json_object_set_new(row, names[i],
			    sqlite3_column_type(st, i) == SQLITE_INTEGER ?
			    json_integer(sqlite3_column_int64(st, i)) : col_json(st, i));
		json_array_append_new(list, row);
	}
	db_done(&dsp_store.db, st);
	json_object_set_new(obj, key, list);
	return r;
}

/* Read or create the store's incarnation inside the open transaction. */
static int
store_incarnation(const char *want, struct ek_err *e)
{
	struct store *s = &dsp_store;
	sqlite3_stmt *st = sql_prep(e, "SELECT value FROM meta WHERE key='incarnation'", "");
	int r;

	if (!st)
		return -1;
	r = db_step(&s->db, st, e);
	if (r == 1)
		db_col_text(st, 0, s->incarnation, sizeof s->incarnation);
	db_done(&s->db, st);
	if (r != 0)
		return r < 0 ? -1 : 0;
	if (want)
		snprintf(s->incarnation, sizeof s->incarnation, "%s", want);
	else if (random_hex(s->incarnation, sizeof s->incarnation, "inc-", 8) < 0)
		return ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
	return sql_exec(e, "INSERT INTO meta(key, value) VALUES('incarnation', ?)", "s",
	    s->incarnation);
}

/* Apply every schema step, then read or create the incarnation. */
static int
store_init(const char *want_inc, struct ek_err *e)
{
	int i;

	for (i = 0; i < SCHEMA_STEPS; i++)
		if (db_exec(&dsp_store.db, schema_steps[i].sql, e) < 0)
			return -1;
	return store_incarnation(want_inc, e);
}

/* The store's file (and its -wal, -shm) where it exists: a regular file
 * of this user's, never a link; readable by others, it is made 0600 (the
 * stores of versions that made them 0644), with a note.  It holds the runs'
 * specs, their env included. */
static int
store_file_check(const char *path, struct ek_err *e)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC), err;
	struct stat sb;

	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		err = errno;
		return ek_fail(e, err == ELOOP ? EK_DATAERR : EK_IOERR, "'%s': %s", path,
		    err == ELOOP ? "it is a symbolic link (not followed)" : strerror(err));
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
		err = errno;
		close(fd);
		return ek_fail(e, EK_UNSAFE, "'%s': %s", path, err ? strerror(err) :
		    "not a regular file of this user's");
	}
	if ((sb.st_mode & 077) && fchmod(fd, 0600) < 0) {
		err = errno;
		close(fd);
		return ek_fail(e, EK_UNSAFE, "'%s': mode %04o lets others in, and chmod failed: %s",
		    path, (unsigned)(sb.st_mode & 07777), strerror(err));
	}
	if (sb.st_mode & 077)
		say("%s: was mode %04o, now 0600", path, (unsigned)(sb.st_mode & 07777));
	close(fd);
	return 0;
}

/* Check the store's three files (store_file_check). */
static int
store_files_check(const char *path, struct ek_err *e)
{
	static const char *const ends[] = { "", "-wal", "-shm" };
	char side[4096];
	size_t i;

	for (i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		if (snprintf(side, sizeof side, "%s%s", path, ends[i]) >= (int)sizeof side)
			return ek_fail(e, EK_USAGE, "'%s': path too long", path);
		if (store_file_check(side, e) < 0)
			return -1;
	}
	return 0;
}

/* SQL's dsp_now_ms(): the wall clock in ms, as now_ms() reads it, so a
 * read transaction can tell a lapsed lease (SESSION_STATUS) without the
 * write that expires it. */
static void
sql_now_ms(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
	(void)argc;
	(void)argv;
	sqlite3_result_int64(cx, now_ms());
}

/* Register dsp_now_ms() on the connection db. */
static int
store_functions(struct db *db, struct ek_err *e)
{
	if (sqlite3_create_function(db->h, "dsp_now_ms", 0, SQLITE_UTF8, NULL, sql_now_ms,
	    NULL, NULL) == SQLITE_OK)
		return 0;
	return db_fail(db, e, "dsp_now_ms");
}

/* The second connection (store_peek_begin()), once the schema is there:
 * WAL lets it read a snapshot while the first writes and syncs.  It
 * only reads (query_only), so it never takes the write lock.  It keeps
 * its statements prepared: every use holds dsp_store.peek_mu, and
 * preparing the heartbeat's query was most of a heartbeat's CPU. */
static int
store_peek_open(const char *path, struct ek_err *e)
{
	struct db *p = &dsp_store.peek;

	if (db_open(p, path, false, e) < 0)
		return -1;
	p->keep = true;
	if (store_functions(p, e) < 0 || db_exec(p, "PRAGMA query_only=ON", e) < 0) {
		db_close(p);
		return -1;
	}
	return 0;
}

int
store_open(const char *path, const char *want_inc, struct ek_err *e)
{
	struct store *s = &dsp_store;

	if (store_files_check(path, e) < 0)
		return -1;
	if (db_wal_foreign(AT_FDCWD, path))
		return ek_fail(e, EK_DATAERR, "'%s' is a copy in rollback-journal mode (exec-dispatcher "
		    "backup) with a %s-wal beside it, which belongs to another database: replayed over "
		    "the copy it would make a hybrid of both; nothing was opened.  To restore the copy, "
		    "move %s-wal and %s-shm away (doc/recovery.md, \"Backup and restore\")", path, path,
		    path, path);
	if (db_open(&s->db, path, true, e) < 0)
		return -1;
	if (store_functions(&s->db, e) < 0)
		goto fail;
	if (db_begin_write(&s->db, e) < 0)
		goto fail;
	if (store_init(want_inc, e) < 0) {
		db_rollback(&s->db);
		goto fail;
	}
	if (db_commit(&s->db, e) < 0)
		goto fail;
	if (store_peek_open(path, e) < 0)
		goto fail;
	if (want_inc && strcmp(want_inc, s->incarnation) != 0)
		say("%s: keeping the stored incarnation '%s'", path, s->incarnation);
	return 0;
fail:
	db_close(&s->db);
	return -1;
}

int
store_backup(const char *path, const char *to, struct ek_err *e)
{
	sqlite3 *src = NULL;
	int rc;

	if (store_files_check(path, e) < 0)
		return -1;
	/* the store as it is: never made, its schema never touched */
	rc = sqlite3_open_v2(path, &src, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL);
	if (rc != SQLITE_OK) {
		ek_fail(e, rc == SQLITE_CANTOPEN ? EK_NOINPUT : EK_IOERR, "cannot open the store '%s': %s",
		    path, src ? sqlite3_errmsg(src) : sqlite3_errstr(rc));
		sqlite3_close(src);
		return -1;
	}
	sqlite3_busy_timeout(src, 5000);
	rc = db_backup_to(src, to, NULL, e);
	sqlite3_close(src);
	return rc;
}

void
store_close(void)
{
	db_close(&dsp_store.peek);
	db_close(&dsp_store.db);
}

/* Take dsp_store.mu: wait for it, or (now) only if nothing holds it;
 * 0, or 1 when something does. */
static int
store_lock(bool now)
{
	if (now)
		return pthread_mutex_trylock(&dsp_store.mu) != 0;
	pthread_mutex_lock(&dsp_store.mu);
	return 0;
}

/* Once the mutex is held: begin a write and, if asked, expire lapsed
 * leases; 0, or -1 (e filled, rolled back and unlocked). */
static int
store_begin_locked(bool expire, struct ek_err *e)
{
	if (db_begin_write(&dsp_store.db, e) == 0 && (!expire ||
	    sql_exec(e, "UPDATE sessions SET status='expired'"
	    " WHERE status='current' AND lease_expires_ms<?", "i", now_ms()) == 0))
		return 0;
	db_rollback(&dsp_store.db);
	pthread_mutex_unlock(&dsp_store.mu);
	return -1;
}

int
store_begin(struct ek_err *e)
{
	store_lock(false);
	return store_begin_locked(true, e);
}

int
store_begin_now(struct ek_err *e)
{
	if (store_lock(true))
		return 1;
	return store_begin_locked(true, e);
}

int
store_begin_plain(bool now, struct ek_err *e)
{
	if (store_lock(now))
		return 1;
	return store_begin_locked(false, e);
}

int
store_begin_read(struct ek_err *e)
{
	pthread_mutex_lock(&dsp_store.mu);
	if (db_begin_read(&dsp_store.db, e) == 0)
		return 0;
	db_rollback(&dsp_store.db);
	pthread_mutex_unlock(&dsp_store.mu);
	return -1;
}

int
store_end(bool commit, struct ek_err *e)
{
	int rc = 0;

	if (!dsp_store.db.in_write || !commit)   /* a read, or a write given up */
		db_rollback(&dsp_store.db);
	else
		rc = db_commit(&dsp_store.db, e);
	pthread_mutex_unlock(&dsp_store.mu);
	return rc;
}

int
store_peek_begin(struct ek_err *e)
{
	pthread_mutex_lock(&dsp_store.peek_mu);
	if (db_begin_read(&dsp_store.peek, e) == 0)
		return 0;
	db_rollback(&dsp_store.peek);
	pthread_mutex_unlock(&dsp_store.peek_mu);
	return -1;
}

void
store_peek_end(void)
{
	db_rollback(&dsp_store.peek);
	pthread_mutex_unlock(&dsp_store.peek_mu);
}
