/* client — see client.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "http.h"
#include "notice.h"
#include "protocol.h"
#include "session.h"

/* Is a 404 unknown_session to url about the session its path names?  So
 * for every /v1/sessions/{sid}/... request but an adoption, whose 404 is
 * about the earlier session named in its body (doc/protocol.md). */
static bool
about_own_session(const char *url)
{
	const char *q = strchr(url, '?');
	size_t n = q ? (size_t)(q - url) : strlen(url);
	static const char adopt[] = PROTO_S_ADOPTIONS;

	return !(n >= sizeof adopt - 1 && memcmp(url + n - (sizeof adopt - 1), adopt, sizeof adopt - 1) == 0);
}

int
client_end_over(struct state *st, const struct binding *b, const char *over, struct ek_err *e)
{
	/* the state's session statuses have no word for "unknown": as
	 * revoked, its authority is gone and nothing of it can be adopted */
	return session_end(st, b, strcmp(over, CLIENT_OVER_UNKNOWN) == 0 ? "revoked" : over, e);
}

int
client_answer_error(const char *url, const struct http_reply *r, json_t *o, char *over, struct ek_err *e)
{
	const char *err = json_string_value(json_object_get(o, "error"));
	const char *st = json_string_value(json_object_get(o, "status"));
	const char *detail = json_string_value(json_object_get(o, "detail"));

	if (r->status == 0)
		return ek_fail(e, EK_UNAVAILABLE, "%s: dispatcher unavailable: %s", url, r->transport);
	if (r->status == 429 || r->status >= 500)
		return ek_fail(e, EK_UNAVAILABLE, "%s: dispatcher unavailable (transient: HTTP %ld)", url,
		    r->status);
	if (r->status == 401 || r->status == 410) {
		if (over)
			snprintf(over, 16, "%s", r->status == 410 && st ? st : "revoked");
		return ek_fail(e, EK_NOSESSION, "%s: session is over (%s)", url,
		    r->status == 410 && st ? st : "credential refused");
	}
	if (r->status == 409 && err && strcmp(err, "state_restored") == 0)
		return ek_fail(e, EK_VERSION, "%s: the dispatcher has seen a higher start count from "
		    "this executor: this state is an older copy (a restore), and nothing is started "
		    "from it; open a new session ('exec-session open': doc/recovery.md, \"Backup and "
		    "restore\")", url);
	if (r->status == 404 && err && strcmp(err, "unknown_session") == 0 && over &&
	    about_own_session(url)) {
		/* the dispatcher has no record of the session (it lost its
		 * store, say): it is over as surely as a revoked one */
		snprintf(over, 16, "%s", CLIENT_OVER_UNKNOWN);
		return ek_fail(e, EK_NOSESSION, "%s: session is over (the dispatcher does not know it"
		    " any more)", url);
	}
	if (r->status == 403)   /* not this executor's key, say (doc/protocol.md) */
		return ek_fail(e, EK_NOSESSION, "%s: dispatcher refused this executor: HTTP 403%s%s%s%.300s",
		    url, err ? ": " : "", err ? err : "", detail ? ": " : "", detail ? detail : "");
	return ek_fail(e, EK_PROTOCOL, "%s: dispatcher answered HTTP %ld%s%s%s%.300s", url, r->status,
	    err ? ": " : "", err ? err : "", detail ? ": " : "", detail ? detail : "");
}

/* Whether the last client_call() made no connection at all. */
static bool unreached;

bool
client_unreached(void)
{
	return unreached;
}

int
client_call(const char *base, const char *method, const char *path, const char *cred,
    json_t *body, int64_t timeout_ms, json_t **out, char *over, struct ek_err *e)
{
	char url[2048];
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct http_reply r;
	json_t *o = NULL;
	int rc;

	*out = NULL;
	snprintf(url, sizeof url, "%s%s", base, path);
	unreached = false;
	rc = http_request(method, url, cred, text, text ? strlen(text) : 0, timeout_ms, &r, e);
	free(text);
	if (rc < 0)
		return -1;
	unreached = r.status == 0 && r.unreached;
	if (r.status != 0)
		o = json_loadb(r.body, r.len, 0, NULL);
	if (r.status >= 200 && r.status < 300 && json_is_object(o)) {
		*out = o;
		rc = 0;
	} else if (r.status >= 200 && r.status < 300) {
		rc = ek_fail(e, EK_PROTOCOL, "%s: malformed answer (not a JSON object)", url);
	} else {
		rc = client_answer_error(url, &r, o, over, e);
	}
	if (rc < 0)
		json_decref(o);
	http_reply_free(&r);
	return rc;
}

int
session_heartbeat(struct state *st, struct session *s, int64_t timeout_ms, struct ek_err *e)
{
	int64_t pending;

	return session_heartbeat_pending(st, s, timeout_ms, &pending, e);
}

int
session_heartbeat_pending(struct state *st, struct session *s, int64_t timeout_ms,
    int64_t *pending, struct ek_err *e)
{
	char path[256], cred[256], over[16] = "";
	json_t *ans = NULL, *n, *body;
	int64_t upto;
	struct ek_err e2;
	int rc;

	*pending = 0;
	if (notice_body(st, &body, &upto, e) < 0)
		return -1;
	if (session_credential(st, &s->b, cred, sizeof cred, e) < 0) {
		json_decref(body);
		return -1;
	}
	snprintf(path, sizeof path, PROTO_SESSIONS "/%s" PROTO_S_HEARTBEAT, s->b.session_id);
	rc = client_call(s->dispatcher, "POST", path, cred, body, timeout_ms, &ans, over, e);
	json_decref(body);
	memset(cred, 0, sizeof cred);
	/* a dispatcher without inspections says nothing: none are pending */
	n = json_object_get(ans, "inspections_pending");
	if (json_is_integer(n) && json_integer_value(n) > 0)
		*pending = json_integer_value(n);
	json_decref(ans);
	if (rc < 0 && over[0] && client_end_over(st, &s->b, over, &e2) < 0)
		*e = e2;
	if (rc < 0)
		return -1;
	return session_beat(st, &s->b, e) < 0 || notice_sent(st, upto, DB_BUSY_TIMEOUT_MS, e) < 0 ? -1 : 0;
}

int
session_confirm(struct state *st, struct session *s, int64_t timeout_ms, struct ek_err *e)
{
	if (session_heartbeat(st, s, timeout_ms, e) == 0)
		return 0;
	/* A stored lease is no proof: a copy of the state restored from before
	 * the session ended carries one too.  Only the dispatcher's answer now,
	 * to this process, confirms the session. */
	if (e->code == EK_UNAVAILABLE)
		return ek_wrap(e, EK_UNAVAILABLE, "cannot confirm session '%s' with the dispatcher, so "
		    "nothing is started (a stored lease is no proof of a current session)",
		    s->b.session_id);
	return -1;
}
