/*
 * deliver — report retained results to the dispatcher.  exec-run,
 * exec-report and exec-reconcile all deliver through deliver_batch().
 *
 * Invariants: every attempt sends the stored body unchanged (it names the
 * binding that accepted the run), only while that binding is the current
 * session or was adopted by it (session.h), with the current session's
 * credential; at most max_attempts attempts, all before the deadline, which a
 * failing report never extends; one deliverer per result at a time (a
 * claim); the attempt is counted durably before it is sent.
 */
#ifndef EK_DELIVER_H
#define EK_DELIVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "http.h"
#include "result.h"
#include "state.h"

#define DELIVER_MAX_ATTEMPTS 3
#define DELIVER_BUDGET_MS 5000
/* The longest --budget-ms of one result's delivery (exec-run, exec-report): an hour. */
#define DELIVER_BUDGET_MAX_MS 3600000
/* A claim outlives the budget it was taken for by this much. */
#define DELIVER_CLAIM_SLACK_MS 1000

/* The outcome classes of doc/protocol.md. */
enum deliver_class { DC_ACKED, DC_REFUSED, DC_SESSION_OVER, DC_TRANSIENT };

struct deliver_verdict {
	enum deliver_class cls;
	int64_t record_id;        /* DC_ACKED */
	char cause[32];           /* DC_REFUSED: invalid, unknown_run, wrong_session, conflict */
	char status[16];          /* DC_SESSION_OVER: revoked, expired, replaced, closed, or
	                           * refused (a 401: the heartbeat ends the session) */
	char diag[RESULT_DIAG_MAX + 1];
	int64_t retry_after_ms;   /* DC_TRANSIENT: a 429 or 503 asked to wait this long; else -1 */
};

/* Classify one exchange; pure, no I/O. */
void deliver_classify(const struct http_reply *r, struct deliver_verdict *v);

enum deliver_status {
	DELIVERED,          /* acknowledged now: receipt written, row released */
	DELIVER_REFUSED,    /* refused now or earlier: kept as evidence */
	DELIVER_SESSION_OVER, /* the run's session is not current: kept */
	DELIVER_FAILED,     /* transient failures used up attempts or budget: kept */
	DELIVER_BUSY,       /* another live deliverer holds the claim */
	DELIVER_NONE,       /* no retained result (acknowledged earlier, or none) */
};

struct deliver_report {
	enum deliver_status status;
	int attempts;             /* attempts made by this call */
	int64_t record_id;
	char detail[RESULT_DIAG_MAX + 64];
};

/* Deliver the retained results of run_ids[0..n-1], in order, finishing
 * before deadline_mono: each with at most max_attempts attempts; one
 * commit claims the batch and two per round serve all of it (deliver.c).  reps[i] tells run_ids[i]'s fate.
 * 0, or -1 on a local error. */
int deliver_batch(struct state *st, const char *const *run_ids, int n, int max_attempts,
    int64_t deadline_mono, struct deliver_report *reps, struct ek_err *e);

/* Deliver run_id's retained result, finishing before deadline_mono (ms on
 * the monotonic clock).  0 with rep filled, or -1 on a local error. */
int deliver_result(struct state *st, const char *run_id, int max_attempts,
    int64_t deadline_mono, struct deliver_report *rep, struct ek_err *e);

/* Has a report of this process been refused its session's credential
 * (a 401)?  The session may be unknown to a dispatcher that lost its
 * store: a chaining supervisor then takes no further run of it, and the
 * heartbeat decides how the session ended. */
bool deliver_credential_refused(void);

/* Map a delivery status to the tools' exit code. */
int deliver_exit_code(enum deliver_status s);

/* The status in words for a human line that also names the run's own exit
 * ("x1 exited 0: delivery failed"), so it cannot be read as the guest's. */
const char *deliver_status_words(enum deliver_status s);

/* The status's name in JSON output and in the "STATUS RUN_ID (N attempts):
 * detail" lines of exec-reconcile and exec-report: delivered, refused,
 * session_over, failed, busy, none (doc/json.md). */
const char *deliver_status_name(enum deliver_status s);

/* Print that line for run_id on f, the detail made safe for a terminal. */
void deliver_print_line(FILE *f, const char *run_id, const struct deliver_report *r);

#endif
