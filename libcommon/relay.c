/* relay — see relay.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "field.h"
#include "http.h"
#include "protocol.h"
#include "relay.h"

/* Is item a well-formed pending inspection? */
static int
item_ok(json_t *item)
{
	return field_shaped(item, "inspection_id", "insp-", 16) &&
	    json_is_string(json_object_get(item, "run_id")) &&
	    json_is_string(json_object_get(item, "session_id"));
}

int
relay_fetch(const struct session *s, const char *cred, int64_t timeout_ms,
    json_t **list, struct ek_err *e)
{
	char path[256];
	json_t *ans, *l, *item;
	size_t i;

	*list = NULL;
	snprintf(path, sizeof path, PROTO_SESSIONS "/%s" PROTO_S_INSPECTIONS, s->b.session_id);
	/* over = NULL: a session over is reported, not recorded (relay.h) */
	if (client_call(s->dispatcher, "GET", path, cred, NULL, timeout_ms, &ans, NULL, e) < 0)
		return -1;
	l = json_object_get(ans, "inspections");
	if (!json_is_array(l) || json_array_size(l) > RELAY_MAX) {
		json_decref(ans);
		return ek_fail(e, EK_PROTOCOL, "%s%s: malformed answer (no list of at most %d "
		    "inspections)", s->dispatcher, path, RELAY_MAX);
	}
	json_array_foreach(l, i, item)
		if (!item_ok(item)) {
			json_decref(ans);
			return ek_fail(e, EK_PROTOCOL, "%s%s: malformed answer (inspection %zu lacks a "
			    "valid inspection_id, run_id or session_id)", s->dispatcher, path, i);
		}
	*list = json_incref(l);
	json_decref(ans);
	return 0;
}

int
relay_post(const struct session *s, const char *cred, const char *id, json_t *answer,
    int64_t timeout_ms, struct ek_err *e)
{
	char url[2048];
	char *text = json_dumps(answer, JSON_COMPACT);
	struct http_reply r;
	int rc;

	if (!text)
		return ek_fail(e, EK_OSERR, "out of memory");
	snprintf(url, sizeof url, "%s" PROTO_SESSIONS "/%s" PROTO_S_INSPECTIONS "/%s", s->dispatcher,
	    s->b.session_id, id);
	rc = http_request("POST", url, cred, text, strlen(text), timeout_ms, &r, e);
	free(text);
	if (rc < 0)
		return -1;
	if (r.status >= 200 && r.status < 300)
		rc = 0;
	else if (r.status == 409)
		rc = 1;
	else {
		json_t *o = r.status ? json_loadb(r.body, r.len, 0, NULL) : NULL;
		rc = client_answer_error(url, &r, o, NULL, e);
		json_decref(o);
	}
	http_reply_free(&r);
	return rc;
}
