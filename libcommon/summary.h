/*
 * summary — counts of every population, read in one read transaction:
 * the startup report of exec-session and the operator summary.
 * "Quarantined" is any run whose binding is not the current session.
 */
#ifndef EK_SUMMARY_H
#define EK_SUMMARY_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "state.h"

struct summary {
	int64_t queued, started;             /* runs of the current session */
	int64_t quarantined, quarantined_queued, quarantined_started;
	int64_t unknown;                     /* every binding */
	int64_t deliverable, earlier_session, refused;   /* retained results */
	int64_t attempts;                    /* spent on the retained results */
	int64_t receipts;
	int64_t handed_back, handing_back;   /* acknowledged, and marked only (handback.h) */
	int64_t oldest_unreconciled_ms;      /* chosen_at of the oldest retained, 0 if none */
};

int summary_read(struct state *st, struct summary *s, struct ek_err *e);

/* The summary for a human, one population a line, plurals right. */
void summary_print(FILE *f, const struct summary *s);

/* The summary as a JSON object (fields documented in doc/json.md). */
json_t *summary_json(const struct summary *s);

#endif
