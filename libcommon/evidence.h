/*
 * evidence — the explicit, operator-driven end of retained evidence.
 *
 * Nothing in execkit removes refused or orphaned results, or receipts, on
 * its own.  These two operations do, when an operator asks:
 *  - evidence_export() writes every refused and every orphaned result (one
 *    JSON object per line, with the stored request body), makes the file
 *    durable, and only then deletes exactly the rows it wrote;
 *  - receipts_prune() deletes receipts older than a retention window.
 * "Orphaned" means retained, not refused, and bound to a session that is
 * not the current one (so this session can never deliver it).  An
 * orphaned result that adoption could still deliver (its session is an
 * ended, unrevoked session of this executor: exec-session adopt) is kept
 * back unless the caller includes adoptable results.
 *
 * The plans are the dry runs: the same selection, one JSON item per row,
 * read only.
 *
 * Both work in chunks, one transaction each, so that no other writer waits
 * long for the lock however many rows there are; a kill between chunks
 * leaves every row either still in the database or in the synced file.
 */
#ifndef EK_EVIDENCE_H
#define EK_EVIDENCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "state.h"

#define EVIDENCE_CHUNK_ROWS 1000   /* results exported and deleted per transaction */
#define PRUNE_CHUNK_ROWS 5000      /* receipts deleted per transaction */

struct evidence_count {
	int64_t rows;             /* exported and deleted (or, planned, would be) */
	int64_t kept_adoptable;   /* orphaned, kept back: adoption could deliver them */
};

/* Export refused and orphaned results (adoptable ones only if adoptable)
 * to a new file at path (refused if it exists), chunk by chunk: write a
 * chunk, fsync the file, then delete exactly those rows and commit (crash
 * point export-chunk after each).  c->rows = rows exported and deleted; on
 * failure, those of the chunks committed before it. */
int evidence_export(struct state *st, const char *path, bool adoptable, struct evidence_count *c,
    struct ek_err *e);

/* What evidence_export() would export now: fn(item) per row (a new object
 * {"event":"would_export", run_id, session_id, refused, chosen_at}, which
 * fn owns; non-zero stops with -1, fn having set the error), and the
 * counts.  Writes nothing. */
int evidence_plan(struct state *st, bool adoptable, int (*fn)(json_t *item, void *), void *arg,
    struct evidence_count *c, struct ek_err *e);

/* Delete receipts acknowledged before now - age_ms, PRUNE_CHUNK_ROWS per
 * transaction (crash point prune-chunk after each), each replaced by a run
 * record that keeps what the story shows of the spec, the spec itself
 * dropped for its digest (schema step 17).  *n = rows deleted. */
int receipts_prune(struct state *st, int64_t age_ms, int64_t *n, struct ek_err *e);

/* What receipts_prune() would delete now: fn(item) per receipt (a new
 * object {"event":"would_prune", run_id, acked_at}) and *n.  Writes nothing. */
int receipts_plan(struct state *st, int64_t age_ms, int (*fn)(json_t *item, void *), void *arg,
    int64_t *n, struct ek_err *e);

#endif
