/*
 * db — the only way execkit code touches SQLite.
 *
 * Writes happen only between db_begin_write() (BEGIN IMMEDIATE, so the
 * write lock is taken up front and the busy handler applies) and db_commit()
 * or db_rollback().  A commit hook refuses any commit that did not come
 * through db_commit(), so a stray autocommit write is caught in tests.
 * Statements are prepared with db_prep() and every value is bound.
 *
 * Contention: a statement waits up to DB_BUSY_TIMEOUT_MS for another
 * connection's lock, then fails with EK_TEMPFAIL and db->busy set.  A write
 * that must not be lost (a chosen result) waits longer, through db_wait;
 * long writers commit in chunks and leave the lock free between them
 * (db_yield()), so no other writer waits more than about a second
 * (exec-accept, exec-reconcile --export-evidence, --prune-receipts).
 */
#ifndef EK_DB_H
#define EK_DB_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* db_close() of a writer checkpoints a WAL larger than this. */
#define WAL_CHECKPOINT_BYTES (256 * 1024)

/* How long a statement waits for another connection's lock, trying again
 * every DB_BUSY_POLL_MS (db.c, busy_handler()). */
#define DB_BUSY_TIMEOUT_MS 5000
#define DB_BUSY_POLL_MS 5

/* The lock left free between two transactions of a chunked writer
 * (db_yield()) where writers do not queue: twice the poll, so that a
 * waiting writer gets in.  Where they queue, the writers that wait are
 * let in first, waited for at most DB_YIELD_MAX_MS after the commit. */
#define DB_YIELD_MS (2 * DB_BUSY_POLL_MS)
#define DB_YIELD_MAX_MS 100

/* db_wait: pauses between tries, and how often a waiter is told to say so. */
#define DB_WAIT_FIRST_MS 50
#define DB_WAIT_MAX_MS 1000
#define DB_WAIT_REPORT_MS 5000

/* Statements a connection keeps prepared (see db_prep()). */
#define DB_KEPT_MAX 48

struct db_kept {
	const char *sql;    /* the key: the address of the statement's text */
	sqlite3_stmt *st;
	bool busy;          /* handed out by db_prep(), not yet back through db_done() */
};

struct db {
	sqlite3 *h;
	const char *path;   /* for messages */
	bool in_write;      /* inside db_begin_write() */
	bool committing;    /* db_commit() in progress: the hook allows it */
	bool wrote;         /* a write transaction was committed */
	bool keep;          /* db_prep() keeps statements prepared (one thread only) */
	bool busy;          /* the last db_fail() was lock contention (db_begin_write() clears it) */
	bool full;          /* the last db_fail() was a full disk (SQLITE_FULL, or ENOSPC) */
	int64_t busy_ms;    /* the busy handler gives up after this long (db_busy_ms()) */
	int64_t busy_since; /* monotonic ms: when the current wait for a lock began */
	int64_t committed_at; /* monotonic ms of the last db_commit(), for db_yield() */
	bool lazy;          /* db_durable(false): commits synchronous=NORMAL */
	bool unsynced;      /* a lazy commit since the last synced one */
	int64_t changes_at; /* sqlite3_total_changes64() when the write began */
	/* db_queue_writers(): */
	int queue_dir;      /* where the writers' queue file is (-1: no queue) */
	const char *queue_name;
	int queue_fd;       /* open once, at the first write; -1: none */
	bool queued;        /* this connection holds the queue's lock */
	int64_t wait_from;  /* monotonic ms: when db_begin_write() began to wait */
	int nkept;
	struct db_kept kept[DB_KEPT_MAX];
};

/* Open path with the settings every connection needs (busy_timeout first,
 * WAL, synchronous=FULL, foreign keys, defensive).  create: allow creating
 * the file.  On failure fills e (corrupt file → EK_DATAERR). */
int db_open(struct db *db, const char *path, bool create, struct ek_err *e);

/* db_open() in two steps, so a caller can look at a file and refuse it
 * untouched: db_open_untouched() opens without any pragma that may write
 * (journal_mode=WAL rewrites the header of a rollback-journal file);
 * db_configure() then applies the settings and defines the SQL function
 * sha256_hex(X) (schema step 17).  On failure the caller closes. */
int db_open_untouched(struct db *db, const char *path, bool create, struct ek_err *e);
int db_configure(struct db *db, struct ek_err *e);
void db_close(struct db *db);

/*
 * Several processes writing one database (the state tools): writers queue
 * in the kernel.  With db_queue_writers(), db_begin_write() first takes an
 * flock on the file queue_name in the directory queue_dir (made at the
 * first write, 0600, only ever locked; without it, SQLite's lock alone
 * decides), waiting for it as long as the busy timeout allows, and
 * db_commit()/db_rollback() let it go.  A waiter is woken the moment the
 * writer before it is done, where the busy handler would sleep past that.
 * Other connections (an operator's sqlite3 shell) still meet SQLite's own
 * lock and the busy handler.  Single-threaded programs only (lockwait.h).
 */
void db_queue_writers(struct db *db, int queue_dir, const char *queue_name);

/* Whether the next commits must be on disk when db_commit() returns (on:
 * synchronous=FULL, the default) or may follow with a later sync (off:
 * synchronous=NORMAL, as atomic in WAL mode and kept through a kill of
 * the process).  The next durable commit that writes syncs them, and
 * db_close() syncs those that none followed. */
int db_durable(struct db *db, bool on, struct ek_err *e);

int db_begin_write(struct db *db, struct ek_err *e);
int db_commit(struct db *db, struct ek_err *e);
void db_rollback(struct db *db);

/* A read transaction: one snapshot for several statements, taking no
 * write lock; ended by db_rollback() (a reader has nothing to commit). */
int db_begin_read(struct db *db, struct ek_err *e);

/* Set how long statements wait for another connection's lock (ms; at
 * least 1): a caller bounded by its own timeout lowers it, then puts back
 * DB_BUSY_TIMEOUT_MS. */
void db_busy_ms(struct db *db, int64_t ms);

/* Fold the WAL back into the database file and truncate it (a TRUNCATE
 * checkpoint), waiting at most wait_ms for readers and writers: the writer
 * lock is held while it waits, so keep wait_ms short.  Outside any
 * transaction.  false: not complete (busy; the next checkpoint does it). */
bool db_checkpoint(struct db *db, int64_t wait_ms);

/* Between the transactions of a long writer, so that a writer waiting for
 * the lock (a supervisor with a chosen result, a heartbeat) gets in
 * instead of waiting for the whole job.  Where writers queue
 * (db_queue_writers()), each writer says that it waits for its turn, and
 * this lets every one that waits take its turn first (the kernel woke
 * them at the commit), then returns: no pause when none waits.  Without
 * a queue, the lock is left free until DB_YIELD_MS have passed since the
 * last commit, for busy handlers to find it free.  A connection outside
 * the queue (an operator's sqlite3 shell) finds the lock free only in the
 * gaps between chunks. */
void db_yield(struct db *db);

/*
 * Waiting out another writer: a write that must not be lost is tried
 * again for as long as it fails only because another connection holds the
 * lock (SQLITE_BUSY or SQLITE_LOCKED), never given up for that:
 *
 *	db_wait_begin(db, &w);
 *	while (the_write(..., e) < 0)      // begins and commits, or rolls back
 *		if (!db_wait_again(db, &w, &say))
 *			return -1;             // failed for another reason
 *		else if (say)
 *			tell the operator: w.waited_ms so far, e->msg
 *
 * The write must leave nothing behind when it fails (its own transaction).
 */
struct db_wait {
	int64_t start;        /* monotonic ms at db_wait_begin() */
	int64_t waited_ms;    /* since then, as of the last failure */
	int64_t next_report;  /* waited_ms at which *say is next set */
	int64_t pause_ms;     /* the next pause: DB_WAIT_FIRST_MS doubling to DB_WAIT_MAX_MS */
	int64_t stop_at;      /* the caller's: when a stop found it waiting (0: none) */
};

void db_wait_begin(struct db *db, struct db_wait *w);

/* After a failed write: false if it did not fail for the lock or for a
 * full disk (give up, e holds why); true after a pause (try again).  A
 * full disk is waited out like a held lock: space may come back.  *say is set about every
 * DB_WAIT_REPORT_MS of waiting, so that the caller says once that it
 * waits (the library never prints). */
bool db_wait_again(struct db *db, struct db_wait *w, bool *say);

/* Prepare sql; NULL with e filled on failure.  Hand the statement back
 * with db_done(), never sqlite3_finalize(): when db->keep is set, the
 * statement stays prepared for the next db_prep() of the same text (keyed
 * by the address of sql, a string literal), which saves parsing it again
 * on every row of a batch or a drain. */
sqlite3_stmt *db_prep(struct db *db, const char *sql, struct ek_err *e);

/* Done with st (NULL is fine): reset and unbound if db keeps it, which
 * also ends its read; finalized otherwise. */
void db_done(struct db *db, sqlite3_stmt *st);

/* Finalize every kept statement, before a change to what preparing checks
 * (an authorizer).  None may be in use. */
void db_drop_kept(struct db *db);

/* Bind helpers: index is 1-based; text NULL binds SQL NULL. */
void db_bind_text(sqlite3_stmt *st, int i, const char *s);
void db_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n);
void db_bind_i64(sqlite3_stmt *st, int i, int64_t v);

/* Step a statement that returns no row; db_done() it. 0 or -1 (e filled). */
int db_exec_stmt(struct db *db, sqlite3_stmt *st, struct ek_err *e);

/* Finish a write of one statement: step st inside the transaction the
 * caller began, db_done() it, commit; roll back on failure.  Returns the
 * number of rows st changed, or -1 (e filled). */
int db_commit_stmt(struct db *db, sqlite3_stmt *st, struct ek_err *e);

/* Does the query sql, with its text parameters ?1 = a and (unless NULL)
 * ?2 = b, return a row?  1, 0, or -1 (e filled). */
int db_exists(struct db *db, const char *sql, const char *a, const char *b, struct ek_err *e);

/* Step once: 1 = row, 0 = done, -1 = error (e filled). */
int db_step(struct db *db, sqlite3_stmt *st, struct ek_err *e);

/* Run constant SQL with no parameters (pragmas, schema). */
int db_exec(struct db *db, const char *sql, struct ek_err *e);

/* Fill e from the connection's last error, with context; return -1. */
int db_fail(struct db *db, struct ek_err *e, const char *context);

/* Copy a text column (NULL → empty) into a caller buffer, truncating. */
void db_col_text(sqlite3_stmt *st, int col, char *buf, size_t n);

/* One integer of sql (its first column of its first row; 0 when there is
 * none), a pragma or a count, say: 0, or -1 (e filled).  db_int64_at()
 * binds its ?1 to arg. */
int db_int64(struct db *db, const char *sql, int64_t *out, struct ek_err *e);
int db_int64_at(struct db *db, const char *sql, int64_t arg, int64_t *out, struct ek_err *e);

/* Does the WAL beside database file name (in dirfd, or AT_FDCWD) belong
 * to another database?  A file in rollback-journal mode (its header's
 * bytes 18 and 19 are 1: a copy db_backup_to made) never had one, and
 * SQLite would replay it over the copy and make a hybrid of the two:
 * true when such a file has a non-empty NAME-wal beside it. */
bool db_wal_foreign(int dirfd, const char *name);

#endif
