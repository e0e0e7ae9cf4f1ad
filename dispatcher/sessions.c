/*
 * sessions — an executor's session with the dispatcher: negotiation (a
 * new session replaces the executor's earlier ones; the executor proves
 * the key its id is bound to, invariant 10), heartbeats that extend the
 * lease (and, while it is far from lapsing, only read: beat_peek()),
 * close, and adoption of an ended session's runs (only of sessions
 * negotiated with the same key).
 * sess_gate() is the one check every session-bound request passes: the
 * session is current and the Bearer credential hashes to the stored one.
 *
 * What becomes of an ended session's runs, settlement, is settle.c's,
 * above this file; a heartbeat here asks its questions (asks.c) through
 * the executor's current session.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "protocol.h"
#include "random.h"
#include "sha256.h"
#include "text.h"

#include "util.h"
#include "store.h"
#include "http.h"
#include "auth.h"
#include "starts.h"
#include "asks.h"
#include "bell.h"
#include "sessions.h"

int
sess_load(struct req *rq, const char *sid, struct sess *s)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT incarnation, executor_id, cred_sha256, "
	    SESSION_STATUS("") " FROM sessions WHERE session_id=?", "s", sid);
	int r;

	if (!st)
		return -1;
	r = db_step(&dsp_store.db, st, &rq->e);
	if (r == 1) {
		db_col_text(st, 0, s->incarnation, sizeof s->incarnation);
		db_col_text(st, 1, s->executor_id, sizeof s->executor_id);
		db_col_text(st, 2, s->cred_sha256, sizeof s->cred_sha256);
		db_col_text(st, 3, s->status, sizeof s->status);
	}
	db_done(&dsp_store.db, st);
	return r;
}

/* The executor of session sid into xid; 0, or an error status. */
static int
sess_executor(struct req *rq, const char *sid, char *xid, size_t n)
{
	struct sess s;
	int r = sess_load(rq, sid, &s);

	if (r < 0)
		return internal(rq);
	snprintf(xid, n, "%s", r == 1 ? s.executor_id : "");
	return 0;
}

/* Does the Bearer credential hash to want? */
static bool
cred_ok(struct req *rq, const char *want)
{
	const char *token = req_bearer(rq);
	char got[SHA256_HEX_LEN + 1];

	if (!token)
		return false;
	sha256_hex(token, strlen(token), got);
	return digest_eq(got, want);
}

/* Inside the negotiation's transaction: prove executor xid's key (may be
 * NULL), whose SHA-256 is key_sha, against its binding, or bind xid to it
 * if it has none (invariant 10).  0, or the error status (answer set). */
static int
key_prove(struct req *rq, const char *xid, const char *key, const char *key_sha)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT key_sha256 FROM executor_keys"
	    " WHERE executor_id=?", "s", xid);
	char want[SHA256_HEX_LEN + 1] = "";
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;

	if (r == 1)
		db_col_text(st, 0, want, sizeof want);
	db_done(&dsp_store.db, st);
	if (r < 0)
		return internal(rq);
	if (r == 1 && (!key || !digest_eq(key_sha, want)))
		return fail(rq, 403, "executor_key_mismatch", "executor '%s' is bound to another"
		    " executor_key: %s", xid, key ? "this one does not match" : "none was sent");
	if (r == 1)
		return 0;
	if (!key)
		return fail(rq, 400, "invalid", "executor_key must be %d hex digits", EXECUTOR_KEY_HEX);
	if ((r = enroll_take(rq, xid, json_string_value(json_object_get(rq->in, "enroll_token")))))
		return r;   /* invariant 11: a new id is bound only when enrolled */
	if (sql_exec(&rq->e, "INSERT INTO executor_keys(executor_id, key_sha256, bound_ms)"
	    " VALUES(?,?,?)", "ssi", xid, key_sha, now_ms()) < 0)
		return internal(rq);
	return 0;
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
	json_t *kv = in ? json_object_get(in, "executor_key") : NULL;
	const char *key = json_string_value(kv);
	char sid[24], cred[72], cred_sha[SHA256_HEX_LEN + 1], key_sha[SHA256_HEX_LEN + 1] = "";
	int64_t now = now_ms(), seen = 0, shown;
	json_t *backup = in ? json_object_get(in, "restored") : NULL;
	int status;

	if (!in)
		return 400;
	if (backup && !json_is_boolean(backup))
		return fail(rq, 400, "invalid", "restored must be true or false");
	if (!xid || !text_is_xdigits(xid, EXECUTOR_ID_HEX))
		return fail(rq, 400, "invalid", "executor_id must be %d hex digits", EXECUTOR_ID_HEX);
	if (kv && (!key || !text_is_xdigits(key, EXECUTOR_KEY_HEX)))   /* absent: key_prove() says what that means */
		return fail(rq, 400, "invalid", "executor_key must be %d hex digits", EXECUTOR_KEY_HEX);
	if (random_hex(sid, sizeof sid, "ses-", ISSUED_ID_HEX / 2) < 0 ||
	    random_hex(cred, sizeof cred, "", SECRET_HEX / 2) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	sha256_hex(cred, strlen(cred), cred_sha);
	if (key)
		sha256_hex(key, strlen(key), key_sha);
	if (tx_begin(rq) < 0)
		return 500;
	status = key_prove(rq, xid, key, key_sha);
	if (status == 0 && sql_exec(&rq->e, "UPDATE sessions SET status='replaced'"
	    " WHERE executor_id=? AND status='current'", "s", xid) < 0)
		status = internal(rq);
	else if (status == 0 && sqlite3_changes(dsp_store.db.h) > 0)
		work_session_ended();
	/* a state older than one this executor showed, or a restored backup:
	 * what its earlier sessions hold proves nothing about "never started" */
	if (status == 0 && (status = starts_shown(rq, xid, in, &seen)) == STARTS_OLDER)
		status = 0;
	shown = json_is_integer(json_object_get(in, "starts")) ?
	    json_integer_value(json_object_get(in, "starts")) : seen;
	if (status == 0 && (shown < seen || json_is_true(backup)))
		status = starts_restored(rq, xid, sid, shown, seen, json_is_true(backup));
	if (status == 0 && (sql_exec(&rq->e, "INSERT INTO sessions(session_id, incarnation, executor_id,"
	    " cred_sha256, status, lease_expires_ms, created_ms) VALUES(?,?,?,?,'current',?,?)",
	    "ssssii", sid, dsp_store.incarnation, xid, cred_sha, now + dsp.cfg.lease_ms, now) < 0 ||
	    sql_exec(&rq->e, "INSERT INTO session_keys(session_id, key_sha256) VALUES(?,?)",
	    "ss", sid, key_sha) < 0))
		status = internal(rq);
	else if (status == 0)
		status = answer(rq, 201, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}",
		    "incarnation", dsp_store.incarnation, "session_id", sid, "credential", cred,
		    "lease_ms", (json_int_t)dsp.cfg.lease_ms,
		    "heartbeat_ms", (json_int_t)dsp.cfg.heartbeat_ms,
		    "starts_seen", (json_int_t)(seen > shown ? seen : shown)));
	return tx_end(rq, status);
}

/* How far ahead a heartbeat keeps the lease: L/part of a lease, and at
 * least two heartbeats (a lease of two heartbeats or less: every one
 * renews). */
static int64_t
lease_ahead(int64_t part)
{
	int64_t l = dsp.cfg.lease_ms / part;

	return 2 * dsp.cfg.heartbeat_ms > l ? 2 * dsp.cfg.heartbeat_ms : l;
}

/*
 * A heartbeat writes only what it must, and waits for no write that it
 * need not make.  It answers from the second connection
 * (store_peek_begin()), which waits for no write and no sync, when it has
 * nothing to write: its session is current and its credential matches, it
 * names no started run, its start count is the one stored (a new one is
 * written, a lower one refused), and no ended session of its executor
 * holds a run that settlement may ask about (where settle_ask() would ask:
 * a superset, so a run already asked about sends its executor's heartbeats
 * down the write path until it is settled).  The lease is renewed (to a
 * whole lease from now) once less than lease_ahead(2) is left: at once
 * when the store is free, else by a later heartbeat; once less than
 * lease_ahead(4) is left, whatever it waits for.  So a session whose
 * executor beats more often than lease_ahead(4) (7.5 s of the default 30 s
 * lease; heartbeat_ms is at most half that) never lapses, and a fleet's
 * heartbeats do not queue behind its results' group commits.  Anything
 * else, a refusal included, takes the write path, which answers as it
 * always did.
 */
enum { BEAT_WRITE, BEAT_BEGUN };   /* else beat_peek() answered: its status */

static int
beat_peek(struct req *rq, json_t *in)
{
	json_t *started = in ? json_object_get(in, "started") : NULL;
	json_t *starts = in ? json_object_get(in, "starts") : NULL;
	struct db *db = &dsp_store.peek;
	int64_t now = now_ms(), pending = 0, left = 0;
	char want[SHA256_HEX_LEN + 1] = "";
	struct ek_err e = { 0 };
	sqlite3_stmt *st;
	bool quiet = false;
	int r;

	if ((started && (!json_is_array(started) || json_array_size(started) > 0)) ||
	    (starts && !json_is_integer(starts)) || store_peek_begin(&e) < 0)
		return BEAT_WRITE;
	st = db_prep(db, "SELECT s.cred_sha256, s.lease_expires_ms - ?2, (SELECT COUNT(*)"
	    "  FROM inspections WHERE session_id=s.session_id AND status='pending'),"
	    " ?4 IS NULL OR ?4=(SELECT starts FROM executor_starts WHERE executor_id=s.executor_id),"
	    " NOT EXISTS(SELECT 1 FROM sessions o"
	    "  JOIN session_ends x ON x.session_id=o.session_id AND x.ended_ms<=?3"
	    "  JOIN runs r ON r.owner_session=o.session_id AND r.state IN ('offered','accepted')"
	    "  WHERE o.executor_id=s.executor_id AND o.status<>'current'"
	    "  AND NOT EXISTS(SELECT 1 FROM results v WHERE v.run_id=r.run_id)"
	    "  AND NOT EXISTS(SELECT 1 FROM settlements f WHERE f.run_id=r.run_id))"
	    " FROM sessions s WHERE s.session_id=?1 AND s.status='current'"
	    " AND s.lease_expires_ms>?2+?5", &e);
	if (st) {
		db_bind_text(st, 1, rq->arg);
		db_bind_i64(st, 2, now);
		db_bind_i64(st, 3, now - dsp.cfg.settle_after_ms);
		if (starts)
			db_bind_i64(st, 4, json_integer_value(starts));
		db_bind_i64(st, 5, lease_ahead(4));
		if (db_step(db, st, &e) == 1) {
			db_col_text(st, 0, want, sizeof want);
			left = sqlite3_column_int64(st, 1);
			pending = sqlite3_column_int64(st, 2);
			quiet = sqlite3_column_int(st, 3) && sqlite3_column_int(st, 4);
		}
	}
	db_done(db, st);
	store_peek_end();
	if (!quiet || !cred_ok(rq, want))
		return BEAT_WRITE;
	/* a renewal due: now, if the store is free (if it fails: the write path) */
	if (left < lease_ahead(2) && (r = store_begin_now(&e)) != 1)
		return r == 0 ? BEAT_BEGUN : BEAT_WRITE;
	return answer(rq, 200, json_pack("{s:s, s:I, s:I}", "status", "current",
	    "lease_ms", (json_int_t)dsp.cfg.lease_ms, "inspections_pending", (json_int_t)pending));
}

/* POST /v1/sessions/{sid}/heartbeat: extend the lease; ask about the
 * executor's ended sessions' runs, then say how many inspections wait for
 * this session (the clients' and the dispatcher's), so the executor
 * relays them.  One with nothing to write only reads (beat_peek()). */
int
h_heartbeat(struct req *rq)
{
	json_t *in = NULL;
	int64_t pending, seen;
	char xid[64] = "";
	int status;

	/* a body is optional: the start count and notices (starts.c) */
	if (rq->len > 0 && !(in = body_json(rq)))
		return 400;
	if ((status = beat_peek(rq, in)) > BEAT_BEGUN)
		return status;
	if (status == BEAT_WRITE && tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false)) &&
	    (status = in ? sess_executor(rq, rq->arg, xid, sizeof xid) : 0) == 0 && in &&
	    (status = starts_shown(rq, xid, in, &seen)) == STARTS_OLDER)
		status = fail(rq, 409, "state_restored", "this state's start count %" PRId64 " is below "
		    "%" PRId64 ", which executor %s showed before: it is an older copy (a restore); "
		    "open a new session", (int64_t)json_integer_value(json_object_get(in, "starts")), seen, xid);
	if (!status && in)
		status = starts_noticed(rq, rq->arg, in);
	if (!status) {
		if (sql_exec(&rq->e, "UPDATE sessions SET lease_expires_ms=? WHERE session_id=?",
		    "is", now_ms() + dsp.cfg.lease_ms, rq->arg) < 0 ||
		    settle_ask(&rq->e, rq->arg) < 0 ||
		    (pending = inspections_pending(&rq->e, rq->arg)) < 0)
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
		else {
			work_session_ended();
			status = answer(rq, 200, json_pack("{s:s}", "status", "closed"));
		}
	}
	return tx_end(rq, status);
}

/* Were sessions a and b negotiated with the same key?  1 yes, 0 no (or
 * one of them predates keys), -1 store error. */
static int
same_key(struct req *rq, const char *a, const char *b)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT ka.key_sha256, kb.key_sha256 FROM session_keys ka"
	    " JOIN session_keys kb ON kb.session_id=? WHERE ka.session_id=?", "ss", b, a);
	char x[SHA256_HEX_LEN + 1] = "", y[SHA256_HEX_LEN + 1] = "";
	int r = st ? db_step(&dsp_store.db, st, &rq->e) : -1;

	if (r == 1) {
		db_col_text(st, 0, x, sizeof x);
		db_col_text(st, 1, y, sizeof y);
	}
	db_done(&dsp_store.db, st);
	return r < 0 ? -1 : r == 1 && digest_eq(x, y);
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
	if ((r = same_key(rq, old, by)) != 1)   /* invariant 10 */
		return r < 0 ? internal(rq) : fail(rq, 403, "executor_key_mismatch", "session '%s' was"
		    " not negotiated with this session's executor_key", old);
	if (strcmp(o.status, "current") == 0)
		return fail(rq, 409, "live_session", "session '%s' is current: nothing to adopt", old);
	if (strcmp(o.status, "revoked") == 0)   /* invariant 9: its authority was taken away */
		return fail(rq, 409, "revoked", "session '%s' was revoked: it cannot be adopted", old);
	return 0;
}

/* POST /v1/sessions/{sid}/adoptions {"session_id": old}: let sid report
 * the runs of old, an ended session of the same executor: closed, expired
 * or replaced, never revoked (invariant 9).  The latest adopter wins: an
 * earlier adopter is over, since an executor has one current session at
 * most. */
int
h_adopt(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *old = in ? json_string_value(json_object_get(in, "session_id")) : NULL;
	int status;

	if (!in)
		return 400;
	if (!old || !is_run_id(old) || strlen(old) > ADOPTED_ID_MAX)   /* same alphabet as run ids */
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
