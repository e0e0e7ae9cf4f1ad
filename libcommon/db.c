/* db — see db.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "lockwait.h"
#include "sha256.h"

/* SQLite's own busy handler (busy_timeout) sleeps up to 100 ms between
 * tries, so a waiter can miss the gaps that a chunked writer leaves between
 * its transactions (db_yield()) for seconds on end.  This one tries again
 * every DB_BUSY_POLL_MS, and gives up after db->busy_ms in all. */
static int
busy_handler(void *arg, int n)
{
	struct db *db = arg;
	int64_t now = mono_ms(), left;

	if (n == 0)   /* a db_begin_write() began to wait in the writers' queue */
		db->busy_since = db->wait_from ? db->wait_from : now;
	if ((left = db->busy_since + db->busy_ms - now) <= 0)
		return 0;
	sleep_ms(n < 2 ? n + 1 : left < DB_BUSY_POLL_MS ? left : DB_BUSY_POLL_MS);
	return 1;
}

static int
commit_hook(void *arg)
{
	struct db *db = arg;

	return db->committing ? 0 : 1;   /* non-zero turns the commit into a rollback */
}

int
db_fail(struct db *db, struct ek_err *e, const char *context)
{
	int rc = sqlite3_extended_errcode(db->h);
	int prim = rc & 0xff;
	int code = EK_SOFTWARE;

	db->busy = prim == SQLITE_BUSY || prim == SQLITE_LOCKED;
	db->full = prim == SQLITE_FULL || (prim == SQLITE_IOERR && sqlite3_system_errno(db->h) == ENOSPC);
	if (db->busy)
		code = EK_TEMPFAIL;
	else if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB)
		code = EK_DATAERR;
	else if (prim == SQLITE_IOERR || prim == SQLITE_FULL)
		code = EK_IOERR;
	else if (prim == SQLITE_CANTOPEN || prim == SQLITE_READONLY || prim == SQLITE_PERM)
		code = EK_CANTCREAT;
	if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB)
		return ek_fail(e, code, "%s: %s: %s (the state database is damaged; nothing was changed — restore it from a copy)",
		    db->path, context, sqlite3_errmsg(db->h));
	return ek_fail(e, code, "%s: %s: %s", db->path, context, sqlite3_errmsg(db->h));
}

int
db_exec(struct db *db, const char *sql, struct ek_err *e)
{
	if (sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(db, e, "exec");
	return 0;
}

/* Keep the WAL file between processes (saves creating and syncing it on
 * every call) but cap what it may keep (journal_size_limit), so it cannot
 * grow without bound.  No checkpoint on every close (three more syncs per
 * short-lived tool): db_close() checkpoints once the WAL has grown past
 * WAL_CHECKPOINT_BYTES, and only after this process wrote. */
static void
persist_wal(struct db *db)
{
	int persist = 1;

	sqlite3_file_control(db->h, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	sqlite3_db_config(db->h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
}

/* Before SQLite's first use in the process (later it is refused, and
 * harmless): no memory statistics, which nothing reads and which took a
 * global mutex and a sixth of a short lookup's instructions on every
 * allocation.  The one caller that has threads (exec-dispatcher) opens its
 * store before it starts them. */
static void
db_global_config(void)
{
	static bool done;

	if (!done)
		sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	done = true;
}

int
db_open_untouched(struct db *db, const char *path, bool create, struct ek_err *e)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
	    (create ? SQLITE_OPEN_CREATE : 0);

	db_global_config();
	memset(db, 0, sizeof *db);
	db->path = path;
	db->queue_dir = db->queue_fd = -1;
	if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
		int rc = db->h ? db_fail(db, e, "open") :
		    ek_fail(e, EK_OSERR, "%s: open: out of memory", path);
		sqlite3_close(db->h);
		db->h = NULL;
		return rc;
	}
	/* Before anything is read: a file we go on to refuse (damaged, another
	 * version) must keep its bytes, so closing it neither checkpoints the
	 * WAL into it nor deletes the -wal and -shm files. */
	persist_wal(db);
	/* The busy handler first: every later statement may meet a writer. */
	db->busy_ms = DB_BUSY_TIMEOUT_MS;
	sqlite3_busy_handler(db->h, busy_handler, db);
	sqlite3_extended_result_codes(db->h, 1);
	sqlite3_db_config(db->h, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(db->h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_db_config(db->h, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
	return 0;
}

/* sha256_hex(X): the SHA-256 of text X as 64 hex digits, so that a spec
 * is replaced by its digest in the statement that drops it (schema step
 * 17).  NULL for NULL. */
static void
sql_sha256_hex(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
	const unsigned char *t = sqlite3_value_text(argv[0]);
	char hex[SHA256_HEX_LEN + 1];

	(void)argc;
	if (!t) {
		sqlite3_result_null(cx);
		return;
	}
	sha256_hex(t, (size_t)sqlite3_value_bytes(argv[0]), hex);
	sqlite3_result_text(cx, hex, SHA256_HEX_LEN, SQLITE_TRANSIENT);
}

int
db_configure(struct db *db, struct ek_err *e)
{
	if (db_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	    "PRAGMA foreign_keys=ON; PRAGMA journal_size_limit=1048576;"
	    "PRAGMA cell_size_check=ON;", e) < 0)
		return -1;
	sqlite3_commit_hook(db->h, commit_hook, db);
	/* direct only: no trigger or view a state file brings may call it */
	if (sqlite3_create_function(db->h, "sha256_hex", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC |
	    SQLITE_DIRECTONLY, NULL, sql_sha256_hex, NULL, NULL) != SQLITE_OK)
		return db_fail(db, e, "sha256_hex");
	return 0;
}

int
db_open(struct db *db, const char *path, bool create, struct ek_err *e)
{
	if (db_open_untouched(db, path, create, e) < 0)
		return -1;
	if (db_configure(db, e) < 0) {
		db_close(db);
		return -1;
	}
	return 0;
}

/* A writer leaving a WAL past the threshold folds it back into the database
 * and truncates it, so every process start reads at most that much WAL.
 * A busy checkpoint is left to the next writer. */
static void
checkpoint_if_large(struct db *db)
{
	char wal[4096];
	struct stat sb;

	if (snprintf(wal, sizeof wal, "%s-wal", db->path) >= (int)sizeof wal ||
	    stat(wal, &sb) < 0 || sb.st_size < WAL_CHECKPOINT_BYTES)
		return;
	/* Never wait: TRUNCATE waits for readers holding the write lock, which
	 * would stall every writer for the whole busy timeout. */
	sqlite3_busy_timeout(db->h, 0);
	if (db->queue_fd >= 0 && flock(db->queue_fd, LOCK_EX | LOCK_NB) == 0)
		db->queued = true;   /* writers wait their turn instead of failing busy */
	sqlite3_wal_checkpoint_v2(db->h, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
}

bool
db_checkpoint(struct db *db, int64_t wait_ms)
{
	int64_t busy = db->busy_ms;
	int rc;

	db_busy_ms(db, wait_ms);
	rc = sqlite3_wal_checkpoint_v2(db->h, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	db_busy_ms(db, busy);
	return rc == SQLITE_OK;
}

/* The writers' queue (db_queue_writers()): its file opened at the first
 * write.  Only locked, never written, so read-only; never through a link,
 * and never a fifo's open that waits.  Where it cannot be had, SQLite's
 * lock alone orders the writers. */
static void
queue_open(struct db *db)
{
	struct stat sb;
	int fd;

	if (db->queue_fd >= 0 || db->queue_dir < 0)
		return;
	fd = openat(db->queue_dir, db->queue_name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC, 0600);
	if (fd >= 0 && (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		db->queue_dir = -1;   /* tried once */
	db->queue_fd = fd;
}

/* A writer that asks for its turn says so, from before it asks until it
 * has it (or gave up): a shared lock on byte 0 of the queue file, an open
 * file description lock, which is apart from the flock that is the turn.
 * db_yield() looks for it.  Best effort: unsaid, a waiter only waits for
 * one more chunk. */
static void
queue_say_waiting(struct db *db, bool waiting)
{
	struct flock l = { .l_type = waiting ? F_RDLCK : F_UNLCK, .l_whence = SEEK_SET, .l_len = 1 };

	fcntl(db->queue_fd, F_OFD_SETLK, &l);
}

/* Is a writer waiting for its turn (queue_say_waiting())? */
static bool
queue_has_waiter(struct db *db)
{
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };

	return fcntl(db->queue_fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
}

/* A wait that runs out goes on to BEGIN IMMEDIATE, whose busy handler
 * counts from wait_from: the lock is then tried once more, not waited for
 * a second time. */
static void
queue_take(struct db *db)
{
	queue_open(db);
	if (db->queue_fd < 0)
		return;
	queue_say_waiting(db, true);
	if (lock_wait(db->queue_fd, LOCK_EX, db->wait_from + db->busy_ms) == 0)
		db->queued = true;
	queue_say_waiting(db, false);
}

static void
queue_leave(struct db *db)
{
	if (db->queued)
		flock(db->queue_fd, LOCK_UN);
	db->queued = false;
}

void
db_queue_writers(struct db *db, int queue_dir, const char *queue_name)
{
	db->queue_dir = queue_dir;
	db->queue_name = queue_name;
}

int
db_durable(struct db *db, bool on, struct ek_err *e)
{
	if (db_exec(db, on ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", e) < 0)
		return -1;
	db->lazy = !on;
	return 0;
}

/* What the lazy commits left unsynced (db_durable()): the WAL's own file,
 * through SQLite's VFS, as a synchronous=FULL commit would sync it.  Best
 * effort: at the close, nothing can act on a failure. */
static void
sync_lazy(struct db *db)
{
	sqlite3_file *f = NULL;

	if (sqlite3_file_control(db->h, "main", SQLITE_FCNTL_JOURNAL_POINTER, &f) == SQLITE_OK &&
	    f && f->pMethods)
		f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
	db->unsynced = false;
}

void
db_close(struct db *db)
{
	if (!db->h)
		return;
	if (db->unsynced)
		sync_lazy(db);
	if (db->wrote)
		checkpoint_if_large(db);
	queue_leave(db);
	if (db->queue_fd >= 0)
		close(db->queue_fd);
	db->queue_fd = -1;
	sqlite3_commit_hook(db->h, NULL, NULL);
	db_drop_kept(db);
	sqlite3_close_v2(db->h);
	db->h = NULL;
}

int
db_begin_write(struct db *db, struct ek_err *e)
{
	int rc;

	db->busy = db->full = false;
	if (db->in_write)
		return ek_fail(e, EK_SOFTWARE, "%s: nested write transaction", db->path);
	db->wait_from = mono_ms();
	db->changes_at = sqlite3_total_changes64(db->h);
	queue_take(db);
	rc = db_exec(db, "BEGIN IMMEDIATE", e);
	db->wait_from = 0;
	if (rc < 0) {
		queue_leave(db);
		return -1;
	}
	db->in_write = true;
	return 0;
}

int
db_begin_read(struct db *db, struct ek_err *e)
{
	if (db->in_write)
		return ek_fail(e, EK_SOFTWARE, "%s: a read inside a write transaction", db->path);
	return db_exec(db, "BEGIN DEFERRED", e);
}

int
db_commit(struct db *db, struct ek_err *e)
{
	int rc;

	db->committing = true;
	rc = sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL);
	db->committing = false;
	db->wrote = true;
	if (rc != SQLITE_OK) {
		db_fail(db, e, "commit");
		db_rollback(db);
		return -1;
	}
	db->in_write = false;
	queue_leave(db);
	db->committed_at = mono_ms();
	/* A synchronous=FULL commit that wrote synced the WAL, and all before it. */
	if (db->lazy)
		db->unsynced = true;
	else if (sqlite3_total_changes64(db->h) != db->changes_at)
		db->unsynced = false;
	return 0;
}

void
db_rollback(struct db *db)
{
	if (sqlite3_get_autocommit(db->h) == 0)
		sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	db->in_write = false;
	queue_leave(db);
}

void
db_busy_ms(struct db *db, int64_t ms)
{
	db->busy_ms = ms < 1 ? 1 : ms;
}

void
db_yield(struct db *db)
{
	int64_t left = db->committed_at + DB_YIELD_MS - mono_ms();

	if (!db->committed_at)
		return;
	if (db->queue_fd < 0) {   /* no queue: the busy handler's tries must meet a gap */
		if (left > 0)
			sleep_ms(left);
		return;
	}
	/* The kernel woke the writers waiting for their turn when we let it
	 * go: wait until each has it, then queue behind them. */
	while (queue_has_waiter(db) && mono_ms() < db->committed_at + DB_YIELD_MAX_MS)
		sleep_ms(1);
}

void
db_wait_begin(struct db *db, struct db_wait *w)
{
	db->busy = db->full = false;
	*w = (struct db_wait){ .start = mono_ms(), .next_report = DB_WAIT_REPORT_MS,
		.pause_ms = DB_WAIT_FIRST_MS };
}

bool
db_wait_again(struct db *db, struct db_wait *w, bool *say)
{
	*say = false;
	if (!db->busy && !db->full)
		return false;
	db->busy = db->full = false;   /* consumed: the next failure says for itself */
	w->waited_ms = mono_ms() - w->start;
	/* The busy handler gives up at DB_BUSY_TIMEOUT_MS: a little slack so
	 * that the first line comes with the first such failure. */
	if (w->waited_ms + DB_WAIT_REPORT_MS / 10 >= w->next_report) {
		*say = true;
		w->next_report = w->waited_ms + DB_WAIT_REPORT_MS;
	}
	sleep_ms(w->pause_ms);
	if ((w->pause_ms *= 2) > DB_WAIT_MAX_MS)
		w->pause_ms = DB_WAIT_MAX_MS;
	return true;
}

sqlite3_stmt *
db_prep(struct db *db, const char *sql, struct ek_err *e)
{
	struct db_kept *k = NULL;
	sqlite3_stmt *st = NULL;
	int i;

	for (i = 0; db->keep && i < db->nkept; i++)
		if (db->kept[i].sql == sql && !db->kept[i].busy) {
			db->kept[i].busy = true;
			return db->kept[i].st;
		}
	if (db->keep && db->nkept < DB_KEPT_MAX)
		k = &db->kept[db->nkept];
	if (sqlite3_prepare_v3(db->h, sql, -1, k ? SQLITE_PREPARE_PERSISTENT : 0, &st, NULL) != SQLITE_OK) {
		db_fail(db, e, "prepare");
		return NULL;
	}
	if (k) {
		*k = (struct db_kept){ .sql = sql, .st = st, .busy = true };
		db->nkept++;
	}
	return st;
}

int
db_exists(struct db *db, const char *sql, const char *a, const char *b, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(db, sql, e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, a);
	if (b)
		db_bind_text(q, 2, b);
	rc = db_step(db, q, e);
	db_done(db, q);
	return rc;
}

void
db_done(struct db *db, sqlite3_stmt *st)
{
	int i;

	for (i = 0; st && i < db->nkept; i++)
		if (db->kept[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			db->kept[i].busy = false;
			return;
		}
	sqlite3_finalize(st);
}

void
db_drop_kept(struct db *db)
{
	while (db->nkept > 0)
		sqlite3_finalize(db->kept[--db->nkept].st);
}

void
db_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

void
db_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n)
{
	sqlite3_bind_blob(st, i, p, (int)n, SQLITE_TRANSIENT);
}

void
db_bind_i64(sqlite3_stmt *st, int i, int64_t v)
{
	sqlite3_bind_int64(st, i, v);
}

int
db_step(struct db *db, sqlite3_stmt *st, struct ek_err *e)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return db_fail(db, e, "step");
}

int
db_exec_stmt(struct db *db, sqlite3_stmt *st, struct ek_err *e)
{
	int rc = db_step(db, st, e);

	db_done(db, st);
	return rc < 0 ? -1 : 0;
}

int
db_commit_stmt(struct db *db, sqlite3_stmt *st, struct ek_err *e)
{
	int changes;

	if (db_exec_stmt(db, st, e) < 0) {
		db_rollback(db);
		return -1;
	}
	changes = sqlite3_changes(db->h);
	return db_commit(db, e) < 0 ? -1 : changes;
}

void
db_col_text(sqlite3_stmt *st, int col, char *buf, size_t n)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	snprintf(buf, n, "%s", t ? (const char *)t : "");
}

/* db_int64 and db_int64_at: bind ?1 to *arg when arg is not NULL. */
static int
int64_of(struct db *db, const char *sql, const int64_t *arg, int64_t *out, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(db, sql, e);
	int rc;

	*out = 0;
	if (!q)
		return -1;
	if (arg)
		db_bind_i64(q, 1, *arg);
	if ((rc = db_step(db, q, e)) == 1)
		*out = sqlite3_column_int64(q, 0);
	db_done(db, q);
	return rc < 0 ? -1 : 0;
}

int
db_int64(struct db *db, const char *sql, int64_t *out, struct ek_err *e)
{
	return int64_of(db, sql, NULL, out, e);
}

int
db_int64_at(struct db *db, const char *sql, int64_t arg, int64_t *out, struct ek_err *e)
{
	return int64_of(db, sql, &arg, out, e);
}

bool
db_wal_foreign(int dirfd, const char *name)
{
	unsigned char head[20];
	char wal[4096];
	struct stat sb;
	bool rollback;
	int fd;

	if (snprintf(wal, sizeof wal, "%s-wal", name) >= (int)sizeof wal ||
	    fstatat(dirfd, wal, &sb, AT_SYMLINK_NOFOLLOW) < 0 || sb.st_size == 0)
		return false;
	if ((fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;   /* the open says what it must */
	rollback = read(fd, head, sizeof head) == (ssize_t)sizeof head && head[18] == 1 && head[19] == 1;
	close(fd);
	return rollback;
}
