/*
 * sessions — an executor's session with the dispatcher: negotiation (a
 * new session replaces the executor's earlier ones), heartbeats that
 * extend the lease, close, and adoption of an ended session's runs.
 * sess_gate() is the one check every session-bound request passes: the
 * session is current and the Bearer credential hashes to the stored one.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "dispatcher.h"
#include "sha256.h"

int
sess_load(struct req *rq, const char *sid, struct sess *s)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT incarnation, executor_id, cred_sha256, status"
	    " FROM sessions WHERE session_id=?", "s", sid);
	int r;

	if (!st)
		return -1;
	r = db_step(&dsp.store.db, st, &rq->e);
	if (r == 1) {
		db_col_text(st, 0, s->incarnation, sizeof s->incarnation);
		db_col_text(st, 1, s->executor_id, sizeof s->executor_id);
		db_col_text(st, 2, s->cred_sha256, sizeof s->cred_sha256);
		db_col_text(st, 3, s->status, sizeof s->status);
	}
	db_done(&dsp.store.db, st);
	return r;
}

/* Does the Bearer credential hash to want (compared in constant time)? */
static bool
cred_ok(struct req *rq, const char *want)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	char got[SHA256_HEX_LEN + 1];
	unsigned diff = 0;
	size_t i;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0 || strlen(want) != SHA256_HEX_LEN)
		return false;
	for (h += 7; *h == ' '; h++)
		;
	sha256_hex(h, strlen(h), got);
	for (i = 0; i < SHA256_HEX_LEN; i++)
		diff |= (unsigned)(got[i] ^ want[i]);
	return diff == 0;
}

int
sess_gate(struct req *rq, const char *sid, const char *inc, bool unknown_401)
{
	struct sess s;
	int r = sess_load(rq, sid, &s);

	if (r < 0)
		return internal(rq);
	if (r == 0 && !unknown_401)
		return fail(rq, 404, "unknown_session", "no session '%s'", sid);
	if (r == 0 || !cred_ok(rq, s.cred_sha256))
		return fail(rq, 401, "unauthorized", "credential does not match the session");
	if (inc && strcmp(inc, s.incarnation) != 0)
		return fail(rq, 401, "unauthorized", "incarnation does not match the session");
	if (strcmp(s.status, "current") != 0)
		return fail_over(rq, s.status);
	return 0;
}

/* POST /v1/sessions: negotiate a new session, replacing earlier ones. */
int
h_negotiate(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *xid = in ? json_string_value(json_object_get(in, "executor_id")) : NULL;
	char sid[24], cred[72], cred_sha[SHA256_HEX_LEN + 1];
	int64_t now = now_ms();
	int status;

	if (!in)
		return 400;
	if (!xid || !is_hex(xid, 32))
		return fail(rq, 400, "invalid", "executor_id must be 32 hex digits");
	if (random_id(sid, sizeof sid, "ses-", 8) < 0 || random_id(cred, sizeof cred, "", 32) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	sha256_hex(cred, strlen(cred), cred_sha);
	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "UPDATE sessions SET status='replaced'"
	    " WHERE executor_id=? AND status='current'", "s", xid) < 0 ||
	    sql_exec(&rq->e, "INSERT INTO sessions(session_id, incarnation, executor_id,"
	    " cred_sha256, status, lease_expires_ms, created_ms) VALUES(?,?,?,?,'current',?,?)",
	    "ssssii", sid, dsp.store.incarnation, xid, cred_sha, now + dsp.cfg.lease_ms, now) < 0)
		status = internal(rq);
	else
		status = answer(rq, 201, json_pack("{s:s, s:s, s:s, s:I, s:I}",
		    "incarnation", dsp.store.incarnation, "session_id", sid, "credential", cred,
		    "lease_ms", (json_int_t)dsp.cfg.lease_ms,
		    "heartbeat_ms", (json_int_t)dsp.cfg.heartbeat_ms));
	return tx_end(rq, status);
}

/* POST /v1/sessions/{sid}/heartbeat: extend the lease; say how many
 * inspections wait for this session, so the executor relays them. */
int
h_heartbeat(struct req *rq)
{
	int64_t pending;
	int status;

	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false))) {
		if (sql_exec(&rq->e, "UPDATE sessions SET lease_expires_ms=? WHERE session_id=?",
		    "is", now_ms() + dsp.cfg.lease_ms, rq->arg) < 0 ||
		    (pending = inspections_pending(rq, rq->arg)) < 0)
			status = internal(rq);
		else
			status = answer(rq, 200, json_pack("{s:s, s:I, s:I}", "status", "current",
			    "lease_ms", (json_int_t)dsp.cfg.lease_ms,
			    "inspections_pending", (json_int_t)pending));
	}
	return tx_end(rq, status);
}

/* DELETE /v1/sessions/{sid}: close the session. */
int
h_close(struct req *rq)
{
	int status;

	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false))) {
		if (sql_exec(&rq->e, "UPDATE sessions SET status='closed' WHERE session_id=?",
		    "s", rq->arg) < 0)
			status = internal(rq);
		else
			status = answer(rq, 200, json_pack("{s:s}", "status", "closed"));
	}
	return tx_end(rq, status);
}

/* Can by (current, gated) adopt old?  0, or the error status (answer set). */
static int
adoption_check(struct req *rq, const char *old, const char *by)
{
	struct sess o, b;
	int r = sess_load(rq, old, &o);

	if (r < 0 || sess_load(rq, by, &b) < 0)
		return internal(rq);
	if (r == 0)
		return fail(rq, 404, "unknown_session", "no session '%s'", old);
	if (strcmp(o.executor_id, b.executor_id) != 0)
		return fail(rq, 409, "foreign_session", "session '%s' belongs to another executor", old);
	if (strcmp(o.status, "current") == 0)
		return fail(rq, 409, "live_session", "session '%s' is current: nothing to adopt", old);
	return 0;
}

/* POST /v1/sessions/{sid}/adoptions {"session_id": old}: let sid report
 * the runs of old, an ended session of the same executor.  The latest
 * adopter wins: an earlier adopter is over, since an executor has one
 * current session at most. */
int
h_adopt(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *old = in ? json_string_value(json_object_get(in, "session_id")) : NULL;
	int status;

	if (!in)
		return 400;
	if (!old || !is_run_id(old) || strlen(old) > 64)   /* same alphabet as run ids */
		return fail(rq, 400, "invalid", "session_id must name a session");
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false)) &&
	    !(status = adoption_check(rq, old, rq->arg))) {
		if (sql_exec(&rq->e, "INSERT INTO adoptions(session_id, by_session, adopted_ms)"
		    " VALUES(?,?,?) ON CONFLICT(session_id) DO UPDATE SET by_session=excluded.by_session,"
		    " adopted_ms=excluded.adopted_ms", "ssi", old, rq->arg, now_ms()) < 0)
			status = internal(rq);
		else
			status = answer(rq, 200, json_pack("{s:s, s:s, s:s}", "status", "adopted",
			    "session_id", old, "by", rq->arg));
	}
	return tx_end(rq, status);
}

