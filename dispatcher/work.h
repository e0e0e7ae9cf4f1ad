/*
 * work — the work feed, acceptance receipts, hand-back, and re-queueing
 * a run as a new run of its transaction.
 */
#ifndef EK_DISPATCHER_WORK_H
#define EK_DISPATCHER_WORK_H

#include "err.h"
#include "http.h"

/* Re-queue run_id (offered or accepted, no result, not settled) as a new
 * run of its transaction, queued; settle the original as state (handed_back
 * or requeued) and how, on inspection id insp if any.  0 with the new id in
 * as (at least 24 bytes), or -1 with e filled. */
int run_requeue(struct ek_err *e, const char *run_id, const char *state, const char *how,
    const char *insp, char *as);

handler_fn h_work, h_receipts, h_handback;

#endif
