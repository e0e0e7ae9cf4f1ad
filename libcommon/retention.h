/*
 * retention — forgetting what the dispatcher settled for good, and giving
 * the space back (exec-reconcile --prune-records, exec-session compact).
 *
 * Once a run's result was acknowledged and its receipt pruned, or once it
 * was handed back and the dispatcher re-queued it under a new run id, the
 * dispatcher never asks about it again (doc/protocol.md, "Settlement").
 * records_prune() forgets such runs when their last row is older than the
 * operator's retention age:
 *  - a run record with acked_at (its receipt was pruned), and the run's
 *    acceptance (its stored spec) with it;
 *  - an acknowledged hand-back with its new run id, the run's execution
 *    row (queued, quarantined, never started) and its acceptance;
 *  - an ended session no row carries the binding of any more (never the
 *    newest session), with the adoptions that name it.
 * Every other record is kept, and counted: a record of an unknown run, of
 * a refused or undelivered result (exported evidence), a hand-back the
 * dispatcher has not acknowledged or refused.  The database refuses the
 * delete of those rows too (schema step 16).  A forgotten run answers
 * ABSENT to a lookup, and its id, offered again, would be a new run: the
 * dispatcher never does that (a re-queue takes a new id), and the age is
 * the operator's margin.
 *
 * state_compact() gives the freed pages back to the file system: an
 * incremental vacuum (states are created with auto_vacuum=INCREMENTAL),
 * a bounded number of pages per write transaction, the lock left free
 * between them (db_yield()), then a short TRUNCATE checkpoint, so it is
 * safe while the executor runs.
 */
#ifndef EK_RETENTION_H
#define EK_RETENTION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "state.h"

#define RETENTION_CHUNK_ROWS 1000   /* runs forgotten per transaction */
#define COMPACT_CHUNK_PAGES 2048    /* pages given back per transaction (8 MiB of 4 KiB pages) */
#define COMPACT_CHECKPOINT_MS 500   /* the longest the final checkpoint holds writers up */

struct retention_count {
	int64_t records;     /* run records forgotten, each with its acceptance */
	int64_t handbacks;   /* re-queued hand-backs forgotten, with the run's rows */
	int64_t sessions;    /* ended sessions forgotten */
	int64_t kept;        /* records and hand-backs older than the age, kept:
	                        not settled for good */
};

/* Forget what the dispatcher settled for good more than age_ms ago (see
 * above), RETENTION_CHUNK_ROWS runs per transaction (crash point
 * records-chunk after each); the sessions last, in one transaction.  On
 * failure c holds what was committed before it. */
int records_prune(struct state *st, int64_t age_ms, struct retention_count *c, struct ek_err *e);

/* What records_prune() would forget now: fn(item) per run and per session
 * (a new object {"event":"would_drop", "what":"record"|"handback", run_id}
 * or {"event":"would_drop", "what":"session", session_id}, which fn owns;
 * non-zero stops with -1, fn having set the error), and the counts.
 * Writes nothing. */
int records_plan(struct state *st, int64_t age_ms, int (*fn)(json_t *item, void *), void *arg,
    struct retention_count *c, struct ek_err *e);

struct compact_count {
	int64_t pages;          /* free pages given back */
	int64_t bytes_before;   /* state.db + its WAL, before and after */
	int64_t bytes_after;
	bool checkpointed;      /* false: the WAL still holds the change (busy) */
};

/* Give the state's free pages back (see above).  EK_DATAERR for a state
 * created without incremental auto-vacuum. */
int state_compact(struct state *st, struct compact_count *c, struct ek_err *e);

#endif
