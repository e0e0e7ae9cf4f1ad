/*
 * starts — what the dispatcher knows of an executor's starts: the start
 * counts and the start notices executors show.
 */
#ifndef EK_DISPATCHER_STARTS_H
#define EK_DISPATCHER_STARTS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "err.h"
#include "http.h"

/* starts_shown(): the count shown is below the highest one seen. */
#define STARTS_OLDER 1

/* Has run_id started, by what the dispatcher holds: a start notice, or
 * any report attempt (refused or not)?  1, 0, or -1 with e filled. */
int run_known_started(struct ek_err *e, const char *run_id);
/* The start count ("starts") in body in, shown by executor xid: 0 (kept
 * as its highest if it is), STARTS_OLDER if below the highest it showed
 * before, or an error status (answer set).  *seen: that highest before. */
int starts_shown(struct req *rq, const char *xid, json_t *in, int64_t *seen);
/* The start notices ("started": run ids) in body in, sent through session
 * sid: each run some session of its executor took is known started from
 * now on.  0, or an error status (answer set). */
int starts_noticed(struct req *rq, const char *sid, json_t *in);
/* Executor xid negotiated session sid from a restored state (its count
 * shown below seen, or backup): every run its ended sessions still hold
 * unsettled stays with it, and those not known started are unknown.
 * 0, or an error status (answer set). */
int starts_restored(struct req *rq, const char *xid, const char *sid, int64_t shown, int64_t seen,
    bool backup);

#endif
