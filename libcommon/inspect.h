/*
 * inspect — read-only questions about stored runs: the InspectRetainedRun
 * point lookup (session-gated) and the operator's views (summary, lists,
 * everything about one run, the figures; metrics.h writes them as
 * Prometheus metrics).
 *
 * Nothing here writes.  inspect_guard() turns the state connection into an
 * inspector's before the first question:
 *
 *   - PRAGMA query_only: any statement that would change the database fails;
 *   - no checkpoint on close: closing leaves state.db and its WAL as found;
 *   - an authorizer that refuses, at prepare time, to read the session
 *     credential (every mode) and, in INSPECT_LOOKUP mode, a run's program,
 *     args, env, cwd and policy, and the accepted spec (accepts.content,
 *     which holds them too).  A future query that reads them fails loudly
 *     instead of quietly widening what a lookup touches.
 *
 * Shutting down.  An executor is shutting down while the file "shutdown"
 * exists in its state directory and is not older than the newest session
 * (its mtime >= that session's opened_at): whoever stops the executor (the
 * loop, a service manager, an operator) creates it first.  A marker left
 * from an earlier run is stale as soon as a new session is opened, so
 * nobody has to remove it.  The lookup checks it after its read, so a
 * shutdown that began during the read still withholds the answer.
 */
#ifndef EK_INSPECT_H
#define EK_INSPECT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "counters.h"
#include "runs.h"
#include "session.h"
#include "state.h"
#include "summary.h"

#define INSPECT_SHUTDOWN_FILE "shutdown"
#define INSPECT_MARKER_MAX 128
#define INSPECT_EVIDENCE_MAX 512   /* a record's evidence text, cut to fit */

enum inspect_mode { INSPECT_VIEW, INSPECT_LOOKUP };

/* Make st's connection read-only as described above; statements that wait
 * for a lock give up at the monotonic deadline (ms).  0 or -1. */
int inspect_guard(struct state *st, enum inspect_mode mode, int64_t deadline, struct ek_err *e);

/*
 * Lookups in flight, and the shutdown that joins them.  A lookup holds a
 * shared flock(2) on state.db for its whole read; closing the session
 * first leaves the shutdown marker (new lookups then answer "shutting
 * down") and then takes the flock exclusively, which it gets only once
 * every lookup in flight has finished.  flock(2) and SQLite's fcntl(2)
 * locks are independent on Linux, so neither ever blocks SQLite.
 */

/* Take the shared hold, waiting at most until deadline; returns the fd to
 * pass to inspect_release(), or -1 (EK_TEMPFAIL: a shutdown holds it). */
int inspect_hold(const struct state *st, int64_t deadline, struct ek_err *e);

/* Leave the shutdown marker, then wait (until deadline) for lookups in
 * flight; returns the fd to pass to inspect_unquiesce() once the session
 * is closed, or -1 (the marker is removed again). */
int inspect_quiesce(const struct state *st, int64_t deadline, struct ek_err *e);

/* Remove the marker and drop the exclusive hold: shutdown is over. */
void inspect_unquiesce(const struct state *st, int fd);

void inspect_release(int fd);

enum inspect_answer { INSPECT_ABSENT, INSPECT_FILTERED, INSPECT_FOUND };

/* The answer of one lookup.  For FOUND every field is set; FILTERED and
 * ABSENT carry the run id only. */
struct inspect_found {
	enum inspect_answer answer;
	char run_id[RUN_ID_MAX + 1];
	struct binding b;                  /* the binding that accepted the run */
	char txn_id[TXN_ID_MAX + 1];
	char state[16];                    /* queued, started, unknown: execution row;
	                                    * retained: only the retained result is left;
	                                    * acknowledged, handed_back, finished, unknown:
	                                    * only a record of the run is left */
	int started;                       /* 1 yes, 0 no, -1 not recorded (see below) */
	bool has_marker, has_due;
	char start_marker[INSPECT_MARKER_MAX];
	int64_t due_at;
	char evidence[INSPECT_EVIDENCE_MAX]; /* a record's word on where the evidence went, or "" */
};

/*
 * InspectRetainedRun.  sid must name the current session (EK_NOSESSION).
 * A stored row is an execution row (runs) or, once that is deleted, a
 * retained result (results).  A retained result without its execution row
 * has no start marker and no due time any more (has_marker = has_due =
 * false); it was started unless it was cancelled with no guest status, in
 * which case the result alone cannot tell (started = -1).  Receipts and
 * accepts rows are not stored runs: a run known only by them is ABSENT.
 * Errors, never ABSENT: malformed id (EK_DATAERR), stored transaction id
 * over TXN_ID_MAX bytes (EK_DATAERR), read failure, shutting down
 * (EK_TEMPFAIL).  One read transaction.
 */
int inspect_lookup(struct state *st, const char *sid, const char *run_id,
    struct inspect_found *f, struct ek_err *e);

/* The answer as a new JSON object: {key: "FOUND"|"FILTERED"|"ABSENT",
 * "run_id"} and, for FOUND, incarnation, session_id, txn_id, started,
 * start_marker, due_at and state, in that order.  key is "answer" for
 * exec-inspect lookup and "outcome" for an answer relayed to the
 * dispatcher.  NULL when out of memory. */
json_t *inspect_found_json(const struct inspect_found *f, const char *key);

/* The list kinds, NULL-terminated: quarantined unknown retained refused
 * orphaned queued running receipts, and all (every accepted run, one row
 * each, its state whichever population holds it). */
extern const char *const inspect_list_kinds[];

/* The column names of list kind, in order, as a new JSON array of strings. */
int inspect_list_columns(struct state *st, const char *kind, json_t **names, struct ek_err *e);

/* The outcomes a result or receipt can hold, NULL-terminated. */
extern const char *const inspect_outcomes[];

/* Does list kind have an outcome column (retained, refused, orphaned,
 * receipts, all)? */
bool inspect_list_has_outcome(const char *kind);

/* Which rows a list keeps, and in which order: each filter unset (-1,
 * NULL) keeps them all.  since_ms: the row's time (the column the list is
 * ordered by: due_at, unknown_at, chosen_at, started_at or acked_at) is at
 * most that old.  limit: at most that many rows, the first in the list's
 * order (0: all); newest_first: that order reversed. */
struct inspect_filter {
	int64_t since_ms;      /* -1: any age */
	const char *outcome;   /* one of inspect_outcomes */
	const char *session;   /* the session id of the row's binding */
	int64_t limit;         /* 0: every row that passes */
	bool newest_first;
	bool failed;           /* only runs that failed: not exited 0 (cancelled is no
	                        * failure), or unknown */
};

/* One row per item of kind that passes f (NULL: every item), oldest
 * first unless f says newest first: fn(row) with row a JSON object whose
 * keys come in column order, run_id first.  fn returning non-zero stops
 * the listing.  EK_USAGE for an unknown kind. */
int inspect_list(struct state *st, const char *kind, const struct inspect_filter *f,
    int (*fn)(json_t *row, void *), void *arg, struct ek_err *e);

/* Everything stored about run_id (never the session credential), as a new
 * object: run_id, verdict, detail, binding, accepted, run, result, receipt,
 * story (story.h).
 * 0 with *out NULL when nothing at all was ever recorded under run_id. */
int inspect_show(struct state *st, const char *run_id, json_t **out, struct ek_err *e);

/*
 * The operator's figures: the summary (summary.h), read in one snapshot,
 * with the wall-clock time of the read.  `exec-inspect summary --json` and
 * `exec-inspect metrics` (metrics.h) print these same figures; doc/json.md
 * (record summary) maps each JSON field to its metric.
 */
struct inspect_figures {
	struct summary s;
	int64_t read_at_ms;     /* wall clock of the snapshot */
	int64_t output_files, output_bytes;   /* captured output held in out/ */
	struct counters c;      /* counters, liveness, oldest ages (metrics only) */
};

/* Read the figures in one read transaction.  0 or -1. */
int inspect_figures(struct state *st, struct inspect_figures *f, struct ek_err *e);

#endif
