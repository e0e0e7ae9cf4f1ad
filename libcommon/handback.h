/*
 * handback — give back, on a clean stop, the runs accepted and never
 * started (doc/protocol.md "Hand-back"; schema/008_handbacks.sql).
 *
 * Two commits around one request, so that a crash anywhere is safe:
 *
 *   handback_mark()    the session's queued runs get a handback row: from
 *                      this commit on they never start here
 *   POST /v1/sessions/{sid}/handback      (exec-session close)
 *   handback_settle()  the dispatcher's answer: each run it took back is
 *                      acknowledged, with the id it was re-queued as
 *
 * A crash between the two leaves marked rows: never started here, and
 * settled by the dispatcher (it took them back, or it asks through
 * InspectRetainedRun and re-queues what never started).
 */
#ifndef EK_HANDBACK_H
#define EK_HANDBACK_H

#include <jansson.h>
#include <stdint.h>

#include "session.h"
#include "state.h"

#define HANDBACK_BATCH 1000   /* run ids in one request */

/* In one write transaction, mark every queued, never-started, uncancelled
 * run of b without a result, then list in *ids (a new array, at most
 * HANDBACK_BATCH) b's marked runs the dispatcher has not acknowledged.
 * 0 or -1. */
int handback_mark(struct state *st, const struct binding *b, json_t **ids, struct ek_err *e);

/* Apply the dispatcher's answer (its "requeued" and "not_handed_back"
 * lists) in one write transaction; *acked gets how many it took back.
 * 0, or -1 (a malformed answer is EK_PROTOCOL, nothing applied). */
int handback_settle(struct state *st, json_t *answer, int *acked, struct ek_err *e);

/* Runs handed back and acknowledged, and marked but not acknowledged. */
int handback_counts(struct state *st, int64_t *acked, int64_t *pending, struct ek_err *e);

#endif
