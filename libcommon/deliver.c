/* deliver — see deliver.h. */
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "binding.h"
#include "cli.h"
#include "crash.h"
#include "deliver.h"
#include "jsonout.h"
#include "proc.h"

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
		snprintf(v->diag, sizeof v->diag, "no answer: %s", r->transport);
	else
		snprintf(v->diag, sizeof v->diag, "HTTP %ld: %s: %.200s", r->status, why,
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
		session_over(v, "revoked", r);
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

/* Is b still the current session here?  Fills rep when it is not. */
static int
session_usable(struct state *st, const struct binding *b, struct deliver_report *rep,
    struct session *s, struct ek_err *e)
{
	int rc = session_find(st, b, s, e);

	if (rc < 0)
		return -1;
	if (rc == 1 && strcmp(s->status, "current") == 0)
		return 1;
	rep->status = DELIVER_SESSION_OVER;
	snprintf(rep->detail, sizeof rep->detail, "the run's session '%s' is %s",
	    b->session_id[0] ? b->session_id : "(empty binding)", rc ? s->status : "unknown here");
	return 0;
}

/* Pause before retry i (100, 200, ... ms), never past the deadline. */
static void
backoff(int i, int64_t deadline)
{
	int64_t ms = 100LL << i, left = deadline - mono_ms();
	struct timespec ts;

	if (left < ms)
		ms = left;
	if (ms <= 0)
		return;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* Apply one verdict to the state; 1 = stop, 0 = try again, -1 = error. */
static int
settle(struct state *st, const struct result *r, const struct deliver_verdict *v,
    struct deliver_report *rep, struct ek_err *e)
{
	snprintf(rep->detail, sizeof rep->detail, "%s", v->diag);
	switch (v->cls) {
	case DC_ACKED:
		rep->status = DELIVERED;
		rep->record_id = v->record_id;
		return result_acked(st, r->run_id, v->record_id, e) < 0 ? -1 : 1;
	case DC_REFUSED:
		rep->status = DELIVER_REFUSED;
		snprintf(rep->detail, sizeof rep->detail, "refused (%s): %s", v->cause, v->diag);
		return result_refused(st, r->run_id, v->cause, v->diag, e) < 0 ? -1 : 1;
	case DC_SESSION_OVER:
		rep->status = DELIVER_SESSION_OVER;
		if (result_diag(st, r->run_id, v->diag, e) < 0 ||
		    session_end(st, &r->b, v->status, e) < 0)
			return -1;
		return 1;
	case DC_TRANSIENT:
		rep->status = DELIVER_FAILED;
		return result_diag(st, r->run_id, v->diag, e) < 0 ? -1 : 0;
	}
	return -1;
}

/* One attempt: count it durably, send the stored body, classify. */
static int
attempt(struct state *st, const struct result *r, const struct session *s, const char *cred,
    int64_t deadline, struct deliver_verdict *v, struct ek_err *e)
{
	char url[1200];
	struct http_reply reply;

	snprintf(url, sizeof url, "%s/v1/results", s->dispatcher);
	if (result_attempt(st, r->run_id, e) < 0)
		return -1;
	crash_point("attempt-counted");
	if (http_request("POST", url, cred, r->body, r->body_len, deadline - mono_ms(), &reply, e) < 0)
		return -1;
	crash_point("request-sent");
	deliver_classify(&reply, v);
	http_reply_free(&reply);
	return 0;
}

static int
attempts_loop(struct state *st, const struct result *r, int max_attempts, int64_t deadline,
    struct deliver_report *rep, struct ek_err *e)
{
	char cred[256];
	struct session s;
	struct deliver_verdict v;
	int rc, i;

	for (i = 0; i < max_attempts && mono_ms() < deadline; i++) {
		/* Another process may have learned that the session ended. */
		if ((rc = session_usable(st, &r->b, rep, &s, e)) <= 0)
			return rc;
		if (session_credential(st, &r->b, cred, sizeof cred, e) < 0)
			return -1;
		rc = attempt(st, r, &s, cred, deadline, &v, e);
		memset(cred, 0, sizeof cred);
		if (rc < 0)
			return -1;
		rep->attempts++;
		if ((rc = settle(st, r, &v, rep, e)) != 0)
			return rc < 0 ? -1 : 0;
		if (i + 1 < max_attempts)
			backoff(i, deadline);
	}
	if (rep->attempts == 0) {
		rep->status = DELIVER_FAILED;
		snprintf(rep->detail, sizeof rep->detail, "budget spent before any attempt");
	}
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

int
deliver_result(struct state *st, const char *run_id, int max_attempts,
    int64_t deadline_mono, struct deliver_report *rep, struct ek_err *e)
{
	char owner[CLAIM_OWNER_MAX];
	struct result r;
	struct session s;
	int rc;

	memset(rep, 0, sizeof *rep);
	if ((rc = result_load(st, run_id, &r, e)) <= 0)
		return rc < 0 ? -1 : no_result(st, run_id, rep, e);
	if (r.refused) {
		rep->status = DELIVER_REFUSED;
		snprintf(rep->detail, sizeof rep->detail, "refused earlier (%s); kept as evidence",
		    r.refused_cause);
		rc = 0;
	} else if ((rc = session_usable(st, &r.b, rep, &s, e)) == 1) {
		proc_self_id(owner, sizeof owner);
		rc = result_claim(st, run_id, owner, now_ms() + (deadline_mono - mono_ms()) + 1000, e);
		if (rc == 1) {
			crash_point("claimed");
			rc = attempts_loop(st, &r, max_attempts, deadline_mono, rep, e);
			if (rep->status != DELIVERED && rep->status != DELIVER_NONE &&
			    result_unclaim(st, run_id, owner, e) < 0)
				rc = -1;
		} else if (rc == 0) {
			rep->status = DELIVER_BUSY;
			snprintf(rep->detail, sizeof rep->detail, "another deliverer holds the claim");
		}
	}
	result_free(&r);
	return rc < 0 ? -1 : 0;
}
