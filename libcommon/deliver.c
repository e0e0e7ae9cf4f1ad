/* deliver — see deliver.h. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "crash.h"
#include "deliver.h"
#include "jsonout.h"
#include "proc.h"
#include "protocol.h"
#include "runs.h"
#include "session.h"
#include "text.h"

static const char *
json_str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static void
transient(struct deliver_verdict *v, const struct http_reply *r, const char *why)
{
	v->cls = DC_TRANSIENT;
	if (r->status == 0)
		snprintf(v->diag, sizeof v->diag, "transient: no answer: %s", r->transport);
	else if (!why)
		snprintf(v->diag, sizeof v->diag, "transient: HTTP %ld%s%.200s", r->status,
		    r->body && *r->body ? ": " : "", r->body ? r->body : "");
	else
		snprintf(v->diag, sizeof v->diag, "transient: HTTP %ld: %s: %.200s", r->status, why,
		    r->body ? r->body : "");
	utf8_clip(v->diag, RESULT_DIAG_MAX);
}

static void
classify_ok(json_t *o, const struct http_reply *r, struct deliver_verdict *v)
{
	const char *s = json_str(o, "status");
	json_t *id = json_object_get(o, "record_id");

	if ((strcmp(s, "recorded") == 0 || strcmp(s, "duplicate") == 0) &&
	    json_is_integer(id) && json_integer_value(id) > 0) {
		v->cls = DC_ACKED;
		v->record_id = json_integer_value(id);
		snprintf(v->diag, sizeof v->diag, "%s as record %lld", s, (long long)v->record_id);
		return;
	}
	transient(v, r, "acknowledgement without status and record_id");
}

static void
refused(struct deliver_verdict *v, const char *cause, const struct http_reply *r)
{
	v->cls = DC_REFUSED;
	snprintf(v->cause, sizeof v->cause, "%s", cause);
	snprintf(v->diag, sizeof v->diag, "HTTP %ld: refused: %.200s", r->status, r->body);
	utf8_clip(v->diag, RESULT_DIAG_MAX);
}

/* A 401 to a report: the credential refused.  The session is over for
 * delivery, but how is not said: revoked, or unknown to a dispatcher that
 * lost its store (a new session then goes on).  The heartbeat, which asks
 * about the session itself, ends it here and says how. */
#define CRED_REFUSED "refused"

static bool credential_refused;   /* deliver_credential_refused() */

bool
deliver_credential_refused(void)
{
	return credential_refused;
}

static void
session_over(struct deliver_verdict *v, const char *status, const struct http_reply *r)
{
	v->cls = DC_SESSION_OVER;
	snprintf(v->status, sizeof v->status, "%s", status);
	snprintf(v->diag, sizeof v->diag, "HTTP %ld: session %s", r->status, status);
}

void
deliver_classify(const struct http_reply *r, struct deliver_verdict *v)
{
	json_t *o = NULL;
	const char *err;

	memset(v, 0, sizeof *v);
	v->retry_after_ms = -1;
	if ((r->status == 429 || r->status == 503) && r->retry_after_ms >= 0) {
		/* the dispatcher's own gate: wait as asked, whatever the body says */
		v->cls = DC_TRANSIENT;
		v->retry_after_ms = r->retry_after_ms;
		snprintf(v->diag, sizeof v->diag, "transient: HTTP %ld: the dispatcher asks to wait "
		    "%lld ms (Retry-After)", r->status, (long long)r->retry_after_ms);
		return;
	}
	if (r->status == 429 || r->status >= 500) {
		/* unavailable, whatever the body is (a proxy's HTML page, say) */
		transient(v, r, NULL);
		return;
	}
	if (r->status != 0 && r->body)
		o = json_loadb(r->body, r->len, 0, NULL);
	if (r->status == 0 || !json_is_object(o)) {
		transient(v, r, "malformed reply");
		json_decref(o);
		return;
	}
	err = json_str(o, "error");
	if (r->status == 200)
		classify_ok(o, r, v);
	else if (r->status == 400 && strcmp(err, "invalid") == 0)
		refused(v, "invalid", r);
	else if (r->status == 404 && strcmp(err, "unknown_run") == 0)
		refused(v, "unknown_run", r);
	else if (r->status == 409 && (strcmp(err, "wrong_session") == 0 || strcmp(err, "conflict") == 0))
		refused(v, err, r);
	else if (r->status == 401 && strcmp(err, "unauthorized") == 0)
		session_over(v, CRED_REFUSED, r);
	else if (r->status == 410 && strcmp(err, "session_over") == 0) {
		const char *s = json_str(o, "status");
		session_over(v, strcmp(s, "expired") == 0 || strcmp(s, "replaced") == 0 ||
		    strcmp(s, "closed") == 0 ? s : "revoked", r);
	} else
		transient(v, r, "not an answer the protocol defines");
	json_decref(o);
}

int
deliver_exit_code(enum deliver_status s)
{
	switch (s) {
	case DELIVERED: return EK_OK;
	case DELIVER_REFUSED: return EK_PROTOCOL;
	case DELIVER_SESSION_OVER: return EK_NOSESSION;
	case DELIVER_FAILED: return EK_TEMPFAIL;
	case DELIVER_BUSY: return EK_TEMPFAIL;
	case DELIVER_NONE: return EK_NOINPUT;
	}
	return EK_SOFTWARE;
}

const char *
deliver_status_words(enum deliver_status s)
{
	switch (s) {
	case DELIVERED: return "delivered";
	case DELIVER_REFUSED: return "delivery refused";
	case DELIVER_SESSION_OVER: return "not delivered: session over";
	case DELIVER_FAILED: return "delivery failed";
	case DELIVER_BUSY: return "not delivered: another deliverer holds it";
	case DELIVER_NONE: return "nothing to deliver";
	}
	return "?";
}

const char *
deliver_status_name(enum deliver_status s)
{
	switch (s) {
	case DELIVERED: return "delivered";
	case DELIVER_REFUSED: return "refused";
	case DELIVER_SESSION_OVER: return "session_over";
	case DELIVER_FAILED: return "failed";
	case DELIVER_BUSY: return "busy";
	case DELIVER_NONE: return "none";
	}
	return "?";
}

void
deliver_print_line(FILE *f, const char *run_id, const struct deliver_report *r)
{
	char safe[sizeof r->detail], n[32];

	fprintf(f, "%s %s (%s): %s\n", deliver_status_name(r->status), run_id,
	    cli_plural(n, sizeof n, r->attempts, "attempt"), text_safe(safe, sizeof safe, r->detail));
}

/* May b's results be delivered now: b is the current session, or the
 * current session adopted b?  1 with *s the session whose credential
 * carries the report; 0 with rep filled; -1 error. */
static int
session_usable(struct state *st, const struct binding *b, struct deliver_report *rep,
    struct session *s, struct ek_err *e)
{
	int rc = session_authority(st, b, s, e);

	if (rc != 0)
		return rc;
	rep->status = DELIVER_SESSION_OVER;
	snprintf(rep->detail, sizeof rep->detail, "the run's session '%s' is %s%s",
	    b->session_id[0] ? b->session_id : "(empty binding)",
	    strcmp(s->status, "unknown") == 0 ? "unknown here" : s->status,
	    strcmp(s->status, "unknown") == 0 ? "" : " and not adopted by the current session");
	return 0;
}

static int
no_result(struct state *st, const char *run_id, struct deliver_report *rep, struct ek_err *e)
{
	int rc = receipt_exists(st, run_id, e);

	if (rc < 0)
		return -1;
	rep->status = DELIVER_NONE;
	snprintf(rep->detail, sizeof rep->detail, rc ? "already acknowledged (receipt kept)" :
	    "no retained result and no receipt");
	return 0;
}

/*
 * A batch is claimed in one transaction, then goes through rounds.  Each
 * round is three steps: count one attempt for every pending result (one
 * transaction), send them one by one over the process's keep-alive
 * connection, then settle every answer (one transaction: receipts,
 * refusals, diagnostics).  So a batch of n costs 1 + 2 commits per round
 * instead of 3 per result, and an attempt is still counted durably before
 * it is sent.  An attempt counted but not sent
 * (the budget ran out, or the session ended first) is taken back when the
 * round settles.  The claims taken at the start are released in the last
 * round's transaction.
 */
struct job {
	const char *run_id;
	struct deliver_report *rep;
	struct result r;
	struct binding auth;   /* whose credential carries it: r.b's, or its adopter's */
	bool claimed;   /* ours until released */
	bool done;      /* settled for this call: no further attempt */
	bool counted;   /* an attempt counted in this round */
	bool sent;      /* ... and sent; v holds its verdict */
	struct deliver_verdict v;
};

struct batch {
	struct state *st;
	struct job *jobs;
	int n, round, max_attempts;
	int64_t deadline;
	int64_t ack_ms;     /* how long the last acknowledgement took to come */
	bool short_budget;  /* what was left of the budget was shorter than that */
	bool stopped;   /* a session was found over: send nothing more */
	int64_t throttle_until;   /* a Retry-After ended the batch: wait until (epoch ms) */
	struct binding throttled; /* ... the session it was asked of */
	char owner[CLAIM_OWNER_MAX];
};

/* In the claim transaction: may j be sent by us now?  1 yes, 0 no (its
 * report says why), -1 error. */
static int
claim_check(struct batch *b, struct job *j, struct ek_err *e)
{
	struct session s;
	int rc;

	if ((rc = result_load(b->st, j->run_id, &j->r, e)) <= 0)
		return rc < 0 ? -1 : no_result(b->st, j->run_id, j->rep, e);
	if (j->r.refused) {
		j->rep->status = DELIVER_REFUSED;
		snprintf(j->rep->detail, sizeof j->rep->detail, "refused earlier (%s); kept as evidence",
		    j->r.refused_cause);
		return 0;
	}
	if ((rc = session_usable(b->st, &j->r.b, j->rep, &s, e)) <= 0)
		return rc;
	j->auth = s.b;
	if (s.retry_after_at > now_ms()) {
		j->rep->status = DELIVER_FAILED;
		snprintf(j->rep->detail, sizeof j->rep->detail, "not sent: the dispatcher asked to "
		    "wait %lld ms more (Retry-After)", (long long)(s.retry_after_at - now_ms()));
		return 0;
	}
	return 1;
}

/* In the claim transaction: claim j if it is deliverable by us now.  A
 * result that is not, and that its chooser (us) claimed at birth, is let
 * go (*released), so that a pass may take it. */
static int
claim_one(struct batch *b, struct job *j, int64_t until, bool *released, struct ek_err *e)
{
	int rc;

	j->done = true;
	if ((rc = claim_check(b, j, e)) <= 0) {
		if (rc == 0 && strcmp(j->r.claim_owner, b->owner) == 0) {
			if (result_unclaim_in(b->st, j->run_id, b->owner, e) < 0)
				return -1;
			*released = true;
		}
		return rc;
	}
	if ((rc = result_claim_in(b->st, &j->r, b->owner, until, e)) < 0)
		return -1;
	if (rc == 0) {
		j->rep->status = DELIVER_BUSY;
		snprintf(j->rep->detail, sizeof j->rep->detail, "another deliverer holds the claim");
		return 0;
	}
	j->claimed = true;
	j->done = false;
	return 0;
}

/* Count an attempt of j, about to be sent (caller's write transaction). */
static int
count_one(struct batch *b, struct job *j, struct ek_err *e)
{
	if (result_count_in(b->st, j->run_id, 1, e) < 0)
		return -1;
	j->counted = true;
	j->sent = false;
	return 0;
}

/* One transaction claiming every deliverable result and counting its
 * first attempt (the first round's count: one commit, not two); the
 * number claimed. */
static int
claim_all(struct batch *b, struct ek_err *e)
{
	int64_t until = now_ms() + (b->deadline - mono_ms()) + DELIVER_CLAIM_SLACK_MS;
	int i, claimed = 0;
	bool released = false;

	if (db_begin_write(&b->st->db, e) < 0)
		return -1;
	for (i = 0; i < b->n; i++) {
		if (claim_one(b, &b->jobs[i], until, &released, e) < 0 ||
		    (b->jobs[i].claimed && count_one(b, &b->jobs[i], e) < 0)) {
			db_rollback(&b->st->db);
			return -1;
		}
		claimed += b->jobs[i].claimed;
	}
	if (claimed == 0 && !released) {
		db_rollback(&b->st->db);
		return 0;
	}
	if (db_commit(&b->st->db, e) < 0)
		return -1;
	if (claimed > 0) {
		crash_point("claimed");
		crash_point("attempt-counted");
	}
	return claimed;
}

/* Count the attempts of a later round, in one transaction (none when the
 * claim counted them already). */
static int
count_round(struct batch *b, struct ek_err *e)
{
	struct job *j;
	int i, n = 0;

	for (i = 0; i < b->n; i++)
		n += !b->jobs[i].done && !b->jobs[i].counted;
	if (n == 0)
		return 0;
	if (db_begin_write(&b->st->db, e) < 0)
		return -1;
	for (i = 0; i < b->n; i++) {
		if (!(j = &b->jobs[i])->done && !j->counted && count_one(b, j, e) < 0) {
			db_rollback(&b->st->db);
			return -1;
		}
	}
	if (db_commit(&b->st->db, e) < 0)
		return -1;
	crash_point("attempt-counted");
	return 0;
}

/* Send j's stored body once, unless its session is over by now. */
static int
send_one(struct batch *b, struct job *j, struct ek_err *e)
{
	char url[1200], cred[256];
	struct http_reply reply;
	struct session s;
	int64_t t0;
	int rc;

	/* Another process may have learned that the session ended. */
	if ((rc = session_usable(b->st, &j->r.b, j->rep, &s, e)) <= 0) {
		j->done = true;
		return rc;
	}
	j->auth = s.b;
	if (session_credential(b->st, &j->auth, cred, sizeof cred, e) < 0)
		return -1;
	snprintf(url, sizeof url, "%s" PROTO_RESULTS, s.dispatcher);
	t0 = mono_ms();
	rc = http_request("POST", url, cred, j->r.body, j->r.body_len, b->deadline - t0, &reply, e);
	memset(cred, 0, sizeof cred);
	if (rc < 0)
		return -1;
	j->sent = true;
	j->rep->attempts++;
	crash_point("request-sent");
	deliver_classify(&reply, &j->v);
	http_reply_free(&reply);
	if (j->v.cls == DC_ACKED)
		b->ack_ms = mono_ms() - t0;
	if (j->v.cls == DC_SESSION_OVER)
		b->stopped = true;   /* stop at once: no authority left */
	if (j->v.retry_after_ms >= 0 && !b->throttle_until) {
		b->throttle_until = now_ms() + j->v.retry_after_ms;   /* stop the pass */
		b->throttled = j->auth;
	}
	return 0;
}

/*
 * Is there time for one more request?  Not when less of the budget is left
 * than the last acknowledgement took: behind a dispatcher that paces its
 * requests (a queue of turns), such a request would only time out, and
 * cost an attempt and the dispatcher a turn.  The next pass sends it.
 */
static bool
time_for_one(struct batch *b)
{
	int64_t left = b->deadline - mono_ms();

	b->short_budget = left > 0 && left < b->ack_ms;
	return left > 0 && !b->short_budget;
}

static int
send_round(struct batch *b, struct ek_err *e)
{
	struct job *j;
	int i;

	for (i = 0; i < b->n && !b->stopped && !b->throttle_until && time_for_one(b); i++)
		if ((j = &b->jobs[i])->counted && !j->done && send_one(b, j, e) < 0)
			return -1;
	return 0;
}

/* Apply j's verdict inside the settle transaction. */
static int
settle_one(struct batch *b, struct job *j, struct ek_err *e)
{
	struct deliver_report *rep = j->rep;
	const struct deliver_verdict *v = &j->v;

	snprintf(rep->detail, sizeof rep->detail, "%s", v->diag);
	j->done = v->cls != DC_TRANSIENT;
	switch (v->cls) {
	/* Settled for good: its execution row (a supervisor's, still there
	 * until it goes on) goes in the same commit, not one more. */
	case DC_ACKED:
		rep->status = DELIVERED;
		rep->record_id = v->record_id;
		j->claimed = false;   /* the row, and its claim, are gone */
		return result_ack_in(b->st, j->run_id, v->record_id, e) < 0 ? -1 :
		    run_delete_in(b->st, j->run_id, e);
	case DC_REFUSED:
		rep->status = DELIVER_REFUSED;
		snprintf(rep->detail, sizeof rep->detail, "refused (%s): %s", v->cause, v->diag);
		return result_note_in(b->st, j->run_id, v->cause, v->diag, e) < 0 ? -1 :
		    run_delete_in(b->st, j->run_id, e);
	case DC_SESSION_OVER:
		rep->status = DELIVER_SESSION_OVER;
		if (result_note_in(b->st, j->run_id, NULL, v->diag, e) < 0)
			return -1;
		if (strcmp(v->status, CRED_REFUSED) == 0)
			return (credential_refused = true), 0;
		return session_end_in(b->st, &j->auth, v->status, e);
	case DC_TRANSIENT:
		rep->status = DELIVER_FAILED;
		return result_note_in(b->st, j->run_id, NULL, v->diag, e);
	}
	return -1;
}

/* Will there be no further round?  Then this round releases the claims. */
static bool
last_round(const struct batch *b)
{
	int i;

	if (b->stopped || b->throttle_until || b->round + 1 >= b->max_attempts ||
	    mono_ms() + (100LL << b->round) + b->ack_ms >= b->deadline)
		return true;
	for (i = 0; i < b->n; i++)
		if (!b->jobs[i].done)
			return false;
	return true;
}

/* Take back j's count if it was not sent; apply its verdict if it was. */
static int
settle_job(struct batch *b, struct job *j, bool *acked, bool *refused, struct ek_err *e)
{
	int rc;

	if (!j->counted)
		return 0;
	j->counted = false;
	if (!j->sent)
		return result_count_in(b->st, j->run_id, -1, e);
	rc = settle_one(b, j, e);
	*acked |= j->v.cls == DC_ACKED;
	*refused |= j->v.cls == DC_REFUSED;
	return rc;
}

static int
settle_round(struct batch *b, bool *last, struct ek_err *e)
{
	bool acked = false, refused = false;
	struct job *j;
	int i;

	if (db_begin_write(&b->st->db, e) < 0)
		return -1;
	for (i = 0; i < b->n; i++)
		if (settle_job(b, &b->jobs[i], &acked, &refused, e) < 0)
			goto fail;
	*last = last_round(b);
	if (b->throttle_until && session_wait_in(b->st, &b->throttled, b->throttle_until, e) < 0)
		goto fail;
	for (i = 0; i < b->n && *last; i++)
		if ((j = &b->jobs[i])->claimed && result_unclaim_in(b->st, j->run_id, b->owner, e) < 0)
			goto fail;
	if (acked)
		crash_point("acked-before-release");
	if (refused)
		crash_point("refusal-before-evidence");
	if (db_commit(&b->st->db, e) < 0)
		return -1;
	if (acked)
		crash_point("after-release");
	return 0;
fail:
	db_rollback(&b->st->db);
	return -1;
}

/* Pause before the next round (100, 200, ... ms), never past the deadline. */
static void
backoff(const struct batch *b)
{
	int64_t ms = 100LL << (b->round - 1), left = b->deadline - mono_ms();

	sleep_ms(left < ms ? left : ms);
}

static int
rounds(struct batch *b, struct ek_err *e)
{
	bool last = false;
	struct job *j;
	int i;

	for (b->round = 0; !last; b->round++) {
		if (b->round > 0)
			backoff(b);
		if (count_round(b, e) < 0 || send_round(b, e) < 0 || settle_round(b, &last, e) < 0)
			return -1;
	}
	for (i = 0; i < b->n; i++) {
		if ((j = &b->jobs[i])->done || (j->rep->attempts > 0 && !b->stopped))
			continue;   /* settled, or failed with its last diagnostic */
		j->rep->status = b->stopped ? DELIVER_SESSION_OVER : DELIVER_FAILED;
		snprintf(j->rep->detail, sizeof j->rep->detail, "%s", b->stopped ?
		    "not sent: the session ended during the batch" : b->throttle_until ?
		    "not sent: the dispatcher asked to wait (Retry-After)" : b->short_budget ?
		    "not sent: less of the budget was left than an acknowledgement took" :
		    "budget spent before any attempt");
	}
	return 0;
}

int
deliver_batch(struct state *st, const char *const *run_ids, int n, int max_attempts,
    int64_t deadline_mono, struct deliver_report *reps, struct ek_err *e)
{
	struct batch b = { .st = st, .n = n, .max_attempts = max_attempts, .deadline = deadline_mono };
	int i, rc;

	if (!(b.jobs = calloc((size_t)(n > 0 ? n : 1), sizeof *b.jobs)))
		return ek_fail(e, EK_OSERR, "out of memory");
	proc_self_id(b.owner, sizeof b.owner);
	for (i = 0; i < n; i++) {
		memset(&reps[i], 0, sizeof reps[i]);
		reps[i].status = DELIVER_FAILED;   /* until something better is known */
		b.jobs[i].run_id = run_ids[i];
		b.jobs[i].rep = &reps[i];
	}
	if ((rc = claim_all(&b, e)) > 0)
		rc = rounds(&b, e);
	for (i = 0; i < n; i++)
		result_free(&b.jobs[i].r);
	free(b.jobs);
	return rc < 0 ? -1 : 0;
}

int
deliver_result(struct state *st, const char *run_id, int max_attempts,
    int64_t deadline_mono, struct deliver_report *rep, struct ek_err *e)
{
	const char *ids[1] = { run_id };

	return deliver_batch(st, ids, 1, max_attempts, deadline_mono, rep, e);
}
