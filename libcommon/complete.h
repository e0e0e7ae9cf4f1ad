/*
 * complete — the run ids the bash completion offers: one population's ids
 * that start with what is typed, found by a range over the primary keys
 * (run ids are [A-Za-z0-9._:-], all below '~'), in id order, at most
 * COMPLETE_MAX.  The cost follows the ids printed, not the size of the
 * state: 100 000 queued runs do not slow the completion of another word.
 */
#ifndef EK_COMPLETE_H
#define EK_COMPLETE_H

#include <stdio.h>

#include "err.h"
#include "state.h"

/* Type more of the id to see the rest. */
#define COMPLETE_MAX 1000

/* The populations, as the words that take a run id want them:
 *   all       every run the state knows, acknowledged ones included (show)
 *   queued    queued runs of the current session (supervise)
 *   running   started runs of the current session (exec-shares show)
 *   live      queued and started runs of the current session (cancel)
 *   retained  results waiting for delivery, not refused (exec-report) */
extern const char *const complete_sets[];

/* Print the ids of set that start with prefix, one a line, on out.  A
 * prefix that no run id can start with prints nothing.  0, or -1 with e
 * (EK_USAGE for an unknown set). */
int complete_run_ids(struct state *st, const char *set, const char *prefix, FILE *out,
    struct ek_err *e);

#endif
