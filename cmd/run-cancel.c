/*
 * exec-run cancel RUN_ID... — cancel runs of the current session (the
 * session the caller names with --session, or else the current one).
 *
 * Each run in its own transaction (run_cancel): the session, the binding,
 * the supervisor's liveness and the mark are decided together, so a run
 * whose supervisor is gone becomes unknown, never cancelled, since its
 * guest may still be running.  A queued run gets its cancelled result here
 * and it is delivered; a started one is left to its supervisor, which
 * ends the guest and chooses.  One run that cannot be cancelled (another
 * session's, unknown, never accepted) is said on stderr and the others go
 * on; the exit status is then the first failure's.
 */
#include <signal.h>
#include <stdio.h>

#include "chain.h"
#include "cli.h"
#include "clock.h"
#include "crash.h"
#include "exec-run.h"
#include "jsonout.h"
#include "result.h"
#include "runs.h"

static const char PROG[] = EXEC_RUN_PROG;

/* A run still queued: nothing runs; its cancelled result is delivered here. */
static int
cancel_queued(struct state *st, const struct opts *o, const struct run *r, struct ek_err *e)
{
	struct deliver_report d;

	if (deliver_result(st, r->run_id, DELIVER_MAX_ATTEMPTS, mono_ms() + o->budget_ms, &d, e) < 0 ||
	    run_delete(st, r->run_id, e) < 0)
		return -1;
	return print_delivery(o, r->run_id, "cancelled", 128 + SIGTERM, "cancelled", &d);
}

/* Report a cancel that signalled a live supervisor, or found it gone. */
static int
print_cancel(const struct opts *o, const struct run *r, enum cancel_verdict v, struct ek_err *e)
{
	if (v == CANCEL_UNKNOWN)
		return ek_fail(e, EK_NOINPUT, "run '%s': its supervisor is gone, so nothing can "
		    "end its guest or know how it ended: marked unknown, not cancelled", r->run_id);
	if (o->json)
		return json_emit(stdout, json_pack("{s:s, s:s, s:s}", "event", "cancel",
		    "run_id", r->run_id, "status", "signalled"));
	printf("cancelling %s: its supervisor ends the guest and reports the result\n", r->run_id);
	return 0;
}

static int
cancel_one(struct state *st, const struct opts *o, const char *run_id, struct ek_err *e)
{
	enum cancel_verdict v;
	struct run r;
	bool won;
	int rc;

	if (run_cancel(st, o->session, run_id, &r, &v, e) < 0)
		return -1;
	crash_point("cancel-marked");
	if (v == CANCEL_QUEUED) {
		rc = result_choose(st, r.run_id, &r.b, "cancelled", 128 + SIGTERM, -1, "cancelled", NULL,
		    o->budget_ms + DELIVER_CLAIM_SLACK_MS, NULL, &won, e);
		if (rc == 0)
			rc = cancel_queued(st, o, &r, e);
	} else {
		if (v == CANCEL_SIGNAL)   /* the supervisor ends the guest and reports */
			sigqueue(r.sup_pid, SIGUSR1, (union sigval){ .sival_int = chain_token(r.started_at) });
		rc = print_cancel(o, &r, v, e);
	}
	run_free(&r);
	return rc;
}

int
cmd_cancel(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct ek_err first = { 0 };
	int i, failed = 0;
	char n[48];

	if (o->nids == 1)
		return cancel_one(st, o, o->ids[0], e);
	for (i = 0; i < o->nids; i++) {
		if (cancel_one(st, o, o->ids[i], e) == 0)
			continue;
		if (!failed++)
			first = *e;
		ek_report(PROG, e);   /* said now; the next runs go on */
		ek_clear(e);
		fflush(stdout);
	}
	if (!failed)
		return 0;
	return ek_fail(e, first.code, "%s not cancelled, of the %d named (each said above)",
	    cli_plural(n, sizeof n, failed, "run"), o->nids);
}
