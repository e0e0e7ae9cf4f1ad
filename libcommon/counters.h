/*
 * counters — the figures behind the dashboards' rates and alerts
 * (metrics.h writes them): counters that only go up
 * (schema/011_counters.sql keeps them by triggers, in the transactions of
 * the changes they count), the run-duration histogram (schema/013), the
 * session's liveness, and when the oldest retained results were chosen,
 * refused apart.
 */
#ifndef EK_COUNTERS_H
#define EK_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

/* The counters without a label, in the order of counter_names. */
enum counter { C_ACCEPTED, C_STARTED, C_DELIVERED, C_REFUSED, C_ATTEMPTS, C_PASSES, C_COUNT };

/* The outcomes a run finishes with: a result's outcome, or unknown. */
enum { C_OUTCOMES = 6 };
extern const char *const counter_outcomes[C_OUTCOMES];

/* The upper bounds (seconds) of the run-duration histogram's buckets, as
 * schema/013_run_durations.sql labels them; the last is "+Inf". */
enum { C_DURATION_BUCKETS = 10 };
extern const char *const duration_buckets[C_DURATION_BUCKETS];

struct counters {
	int64_t total[C_COUNT];
	int64_t finished[C_OUTCOMES];   /* by counter_outcomes */
	int64_t duration_le[C_DURATION_BUCKETS];   /* runs at most that long, cumulative */
	int64_t duration_sum_ms, duration_count;
	bool session_up;                /* a current session is recorded */
	int64_t last_good_ms;           /* last good heartbeat (or the open) of the
	                                 * current session, else of the latest
	                                 * session; 0 when there never was one */
	int64_t oldest_unrefused_ms;    /* chosen_at of the oldest retained result
	                                 * not refused; 0 when none */
	int64_t oldest_refused_ms;      /* the same for refused ones */
};

/* Read them, in the caller's read transaction.  0 or -1. */
int counters_read(struct state *st, struct counters *c, struct ek_err *e);

/* The runs started since the state was made, into *n (a statement of its
 * own).  0 or -1. */
int counters_started(struct state *st, int64_t *n, struct ek_err *e);

/* Add n reconcile passes (one write transaction).  0 or -1. */
int counters_add_passes(struct state *st, int64_t n, struct ek_err *e);

#endif
