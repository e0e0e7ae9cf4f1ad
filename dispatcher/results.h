/*
 * results — terminal results (group commit), the report log, reports in
 * flight.
 */
#ifndef EK_DISPATCHER_RESULTS_H
#define EK_DISPATCHER_RESULTS_H

#include <stdint.h>

#include "http.h"

/* Keep a report row for a /v1/results request a fault kept from handling. */
void report_fault(struct req *rq, int status);
/* Count one more report of run_id in flight; return the new count. */
int flight_enter(const char *run_id);
/* Count one report of run_id no longer in flight. */
void flight_leave(const char *run_id);
/* Raise the stored max_in_flight of run_id to at least n. */
void flight_persist(const char *run_id, int n);

handler_fn h_result;

/* Group commit, since start: the batches committed, the results they
 * held, and the most in one batch. */
void results_commits(int64_t *batches, int64_t *results, int64_t *largest);

#endif
