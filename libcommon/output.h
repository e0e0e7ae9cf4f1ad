/*
 * output — the life of a run's captured output (out/RUN.stdout, .stderr,
 * and its notify hook's out/RUN.notify).
 *
 * Output is disposable once the result is acknowledged (doc/recovery.md),
 * and it must not fill the disk under the state.  So it goes when nothing
 * refers to its run any more — the receipt pruned (`--prune-receipts`),
 * the result exported (`--export-evidence`) — and, past a total cap, the
 * output of acknowledged runs goes oldest first.  Output of a run that is
 * queued, running, unknown or retained is never removed: it may be
 * evidence still.
 */
#ifndef EK_OUTPUT_H
#define EK_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "state.h"

/* The executor's output quota, the total of its captured output that the
 * supervisors' capture keeps under (past it, a run's output is truncated
 * and flagged), is by default sized to the state's filesystem: a quarter
 * of it, at most 1 GiB, so that output alone never fills the disk the
 * results are committed to.  Collection (output_collect) keeps the output
 * of acknowledged runs to half of that by default, room for the next. */
#define OUTPUT_QUOTA_MAX (1024LL * 1024 * 1024)
#define OUTPUT_QUOTA_FS_SHARE 4
#define OUTPUT_QUOTA_AUTO (-1)    /* an option's "auto": output_quota_default() */

/* Why a run's output was truncated, the marker beside it: out/RUN.truncated. */
#define OUTPUT_TRUNCATED "truncated"

struct output_usage {
	int64_t bytes, files;
};

/* The output files in out/ and their bytes. */
int output_usage(const struct state *st, struct output_usage *u, struct ek_err *e);

/* Remove the output of runs nothing refers to (no execution row, no
 * result, no receipt), then, while the total exceeds cap (0: no cap), the
 * output of acknowledged runs, oldest receipt first.  *removed gets the
 * files removed.  0 or -1. */
int output_collect(struct state *st, int64_t cap, int64_t *removed, struct ek_err *e);

/* The default output quota for the state's filesystem (see above): 0 when
 * its size cannot be read (then: no quota). */
int64_t output_quota_default(const struct state *st);

/* A supervisor's share of the quota, taken as its guest writes.  Every so
 * often (a grant used up) out/ is measured again, so supervisors running
 * at once overshoot the quota by at most their last grants. */
struct output_quota {
	const struct state *st;
	int64_t quota;        /* bytes; 0: none */
	int64_t granted;      /* may still be written before out/ is measured again */
	bool reached;         /* some output was dropped for it */
};

/* How many of want bytes the guest's capture may write now (want, or
 * fewer once the quota is reached).  q NULL or q->quota 0: want. */
size_t output_quota_take(struct output_quota *q, size_t want);

/* This process's share of the quota (bytes, OUTPUT_QUOTA_AUTO or 0), one
 * for all the runs it supervises (a chain's grant goes on from run to
 * run), its "reached" cleared for the next run. */
struct output_quota *output_quota_for(const struct state *st, int64_t quota);

struct guest;

/* Flag a run whose guest g's output was truncated: out/RUN.truncated, one
 * line per stream that lost bytes (kept and dropped bytes, and why: its
 * max_output, its quota, or a write that failed), made new, never through
 * a link.  1 flagged (its text in msg), 0 nothing was dropped, -1 (e
 * filled; msg says what was dropped). */
int output_flag_truncated(const struct state *st, const char *run_id, const struct guest *g,
    char *msg, size_t n, struct ek_err *e);

#endif
