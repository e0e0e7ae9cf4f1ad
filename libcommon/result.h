/*
 * result — the one terminal result of a run: chosen once, retained
 * durably with the exact request body, then released by an
 * acknowledgement (leaving a receipt) or kept as evidence.
 *
 * result_choose() is the only writer of a results row, and the primary key
 * makes the choice unique: of several racing choosers (exit, timeout,
 * cancel) exactly one wins and the others learn they lost.  A receipt
 * counts as that row: a chooser that comes after the result was
 * acknowledged and released (two cancels of one queued run) loses too.
 */
#ifndef EK_RESULT_H
#define EK_RESULT_H

#include <stdbool.h>
#include <stdint.h>

#include "runs.h"
#include "session.h"
#include "state.h"

#define RESULT_MESSAGE_MAX 1024
#define RESULT_DIAG_MAX 512
#define CLAIM_OWNER_MAX 64
#define RESULT_ADOPTED_MAX 256   /* adopted sessions a count or a pass looks at */

struct result {
	char run_id[RUN_ID_MAX + 1];
	struct binding b;
	char outcome[16];
	int exit_code;
	bool has_wait;
	int wait_status;
	char message[RESULT_MESSAGE_MAX + 1];
	int64_t chosen_at;
	unsigned char *body;   /* malloc'd, body_len bytes */
	size_t body_len;
	int attempts;
	int64_t last_attempt_at;
	bool refused;
	char refused_cause[32];
	char last_diag[RESULT_DIAG_MAX + 1];
	char claim_owner[CLAIM_OWNER_MAX];
	int64_t claim_until;
};

/* Choose the terminal result of run_id under b: one transaction that
 * inserts the row unless one exists, or a receipt for run_id does.  *won tells whether this call chose.
 * wait_status < 0 means none.  With claim_ms > 0 the row is born claimed
 * by this process for that long: a chooser that delivers its own result
 * next keeps a pass from taking it in between (0: unclaimed).  Commit
 * points result-chosen (before the commit) and retained (after).
 * dropped: bytes of stdout and stderr dropped past the capture bound, kept
 * beside the result (schema step 15); NULL when no guest output was read.
 * left: NULL, or (its guest has ended) the run leaves its share dimensions
 * in the same commit, their names appended to left for shares_left():
 * one transaction a run, not two (shares.h). */
int result_choose(struct state *st, const char *run_id, const struct binding *b,
    const char *outcome, int exit_code, int wait_status, const char *message,
    const int64_t dropped[2], int64_t claim_ms, json_t *left, bool *won, struct ek_err *e);

/* Load the retained result of run_id: 1 found, 0 none, -1 error. */
int result_load(struct state *st, const char *run_id, struct result *r, struct ek_err *e);
void result_free(struct result *r);

/*
 * The delivery writes.  Each runs inside a transaction the caller began
 * (deliver.c groups a batch of results into one), and returns the number
 * of rows changed, or -1 with e filled.
 */

/* Take r's delivery claim for owner until `until` (ms): 1 taken, 0 held by
 * a live owner whose claim has not expired.  r is as loaded in this
 * transaction. */
int result_claim_in(struct state *st, const struct result *r, const char *owner, int64_t until,
    struct ek_err *e);
int result_unclaim_in(struct state *st, const char *run_id, const char *owner, struct ek_err *e);

/* attempts += delta: +1 before an attempt is sent (0 attempts = never
 * sent), -1 to take back one counted but not sent. */
int result_count_in(struct state *st, const char *run_id, int delta, struct ek_err *e);

/* Acknowledged as record_id: write the receipt and release the row.  The
 * receipt keeps the times, the message and the bytes of output dropped
 * (schema steps 10 and 13), so the run's story outlives the row. */
int result_ack_in(struct state *st, const char *run_id, int64_t record_id, struct ek_err *e);

/* Keep a bounded diagnostic of the last failure; with refused_cause not
 * NULL, also mark the result refused for good (kept as evidence, out of
 * the deliverable set). */
int result_note_in(struct state *st, const char *run_id, const char *refused_cause,
    const char *diag, struct ek_err *e);

/* How many retained results of b are not refused (deliverable by whoever
 * may deliver b's results). */
int result_count_deliverable(struct state *st, const struct binding *b, int64_t *n, struct ek_err *e);

/* *n: how many results the session `by` may deliver: its own and those of
 * the sessions it adopted, not refused.  Index range counts, so the cost
 * does not grow with undeliverable rows (a heartbeat asks every second).
 * *due (unless due is NULL): is one of them waiting that nobody is
 * delivering (unclaimed, or its claim expired or its owner gone)?  What a
 * heartbeat's reconcile-due asks: a result its supervisor is delivering
 * is not due for a pass. */
int result_deliverable_by(struct state *st, const struct binding *by, int64_t *n, bool *due,
    struct ek_err *e);

/* A receipt exists for run_id: 1 yes, 0 no, -1 error. */
int receipt_exists(struct state *st, const char *run_id, struct ek_err *e);

#endif
