/*
 * store — the dispatcher's store: its schema (schema/dispatcher/), the
 * query helpers, one transaction at a time (a read or a write) under one
 * mutex, and a second connection that only reads.  It knows no request
 * and answers none: a failure fills a struct ek_err, and the request's
 * layer (http.c's tx_begin(), tx_read(), tx_end()) answers it.
 *
 * Threads: dsp.cfg is written only before the server starts.  dsp_store.mu
 * guards the connection and every statement on it; only store.c takes and
 * leaves it (store_begin*(), store_end(); store_open() runs before any
 * other thread).  dsp_store.peek_mu guards the second connection, and is
 * never held while dsp_store.mu is taken, nor the other way round.  The
 * fault queue, the in-flight counts, group commit's queue and the gate's
 * limit have their own mutexes, private to faults.c, results.c and gate.c;
 * none is held while dsp_store.mu is taken (a group commit's leader leaves
 * the queue's before it records the batch, while the results it holds
 * wait for it to mark them done).
 */
#ifndef EK_DISPATCHER_STORE_H
#define EK_DISPATCHER_STORE_H

#include <pthread.h>
#include <stdbool.h>

#include <jansson.h>
#include <sqlite3.h>

#include "db.h"
#include "err.h"

struct store {
	struct db db;                    /* keep stays off: see store.c */
	pthread_mutex_t mu;              /* guards db and every statement on it */
	struct db peek;                  /* a second one, for reads only (store_peek_begin()) */
	pthread_mutex_t peek_mu;         /* guards peek */
	char incarnation[40];
};

/* The one store, defined in store.c. */
extern struct store dsp_store;

/* A run's state as the protocol shows it, for a query that names the run
 * r: past runs.state, the final state its settlement gave it. */
#define RUN_STATE "COALESCE((SELECT f.state FROM settlements f WHERE f.run_id = r.run_id), " \
	"(SELECT 'unknown' FROM run_unknowns u WHERE u.run_id = r.run_id), r.state)"

/* A session's status as a reader sees it, for a query naming sessions as
 * p ("s." or ""): a current session whose lease lapsed is expired,
 * written or not yet (a read transaction does not write the expiry; the
 * next write does). */
#define SESSION_STATUS(p) "CASE WHEN " p "status='current' AND " p "lease_expires_ms<dsp_now_ms()" \
	" THEN 'expired' ELSE " p "status END"

/* Open (creating if needed) the store at path, bring its schema up to
 * date and load its incarnation (want_inc for a new store). */
int store_open(const char *path, const char *want_inc, struct ek_err *e);
/* exec-dispatcher backup: a consistent copy of the store at path into to
 * (a new 0600 file, rollback-journal mode: backup.h), while a dispatcher
 * may be serving from it.  0, or -1 (e filled). */
int store_backup(const char *path, const char *to, struct ek_err *e);
void store_close(void);

/* Prepare sql (a string literal) on the store and bind args by types
 * ('s' text, 'i' int64); the caller steps it and hands it back with
 * db_done().  NULL with e filled.  Only under dsp_store.mu. */
sqlite3_stmt *sql_prep(struct ek_err *e, const char *sql, const char *types, ...);
/* Run one statement that returns no row; 0 or -1 with e filled. */
int sql_exec(struct ek_err *e, const char *sql, const char *types, ...);
/* Column text, or NULL for SQL NULL. */
const char *col(sqlite3_stmt *st, int i);
/* Column as a JSON string, or JSON null. */
json_t *col_json(sqlite3_stmt *st, int i);
/* Select rows with sql (bound to arg unless NULL) into obj[key] as a list
 * of objects named by names (integers stay integers); 0 or -1. */
int rows_into(struct ek_err *e, json_t *obj, const char *key, const char *sql, const char *arg,
    const char *const *names);

/* Lock the store, begin a write and expire lapsed leases: 0, or -1 (e
 * filled, the store unlocked again).  The store answers no request: a
 * handler's failure is told by tx_begin() (http.c), which calls this. */
int store_begin(struct ek_err *e);
/* store_begin() if nothing holds the store now; 1 if something does (a
 * write, a group commit's sync), without waiting for it. */
int store_begin_now(struct ek_err *e);
/* Lock the store and begin a write that expires no lease, for one that
 * reads no session (flight_persist()): now as store_begin_now(), else
 * waiting as store_begin().  0, 1 (now: the store is held), or -1 (e
 * filled, unlocked).  Ended by store_end(). */
int store_begin_plain(bool now, struct ek_err *e);
/* Lock the store and begin a read: one snapshot, no write lock, no
 * expiry written (queries read lapsed leases through SESSION_STATUS).
 * 0, or -1 (e filled, unlocked).  Ended by store_end() as a write is. */
int store_begin_read(struct ek_err *e);
/* End what store_begin*() began and unlock: a write is committed when
 * commit is set, else rolled back; a read is ended.  0, or -1 (e filled)
 * when the commit failed. */
int store_end(bool commit, struct ek_err *e);
/* Lock the second connection (dsp_store.peek, not dsp_store.mu) and
 * begin a read on it: a snapshot of what is committed, taken while a
 * write (a group commit's sync included) holds dsp_store.mu.  For a
 * handler's own statements on dsp_store.peek (db_prep(), not sql_prep(),
 * which is dsp_store.db's); ended by store_peek_end().  0, or -1 (e
 * filled, unlocked). */
int store_peek_begin(struct ek_err *e);
void store_peek_end(void);

#endif
