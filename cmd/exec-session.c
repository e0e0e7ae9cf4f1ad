/*
 * exec-session — negotiate, heartbeat, close and show the control session.
 *
 * Opening a session makes every row accepted under any other binding
 * quarantined (session.h) and prints the startup report: how many rows are
 * quarantined and how many retained results are unreconciled, by cause.
 * The credential is stored in state.db (0600) and never printed; so is the
 * executor key, which only open reads, to prove it at negotiation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backup.h"
#include "cli.h"
#include "client.h"
#include "clock.h"
#include "crash.h"
#include "exec-session.h"
#include "field.h"
#include "handback.h"
#include "inspect.h"
#include "jsonout.h"
#include "opts.h"
#include "notice.h"
#include "protocol.h"
#include "result.h"
#include "runs.h"
#include "session.h"
#include "state.h"
#include "summary.h"
#include "table.h"
#include "timefmt.h"

static const char PROG[] = "exec-session";

enum { ENROLL_TOKEN_MAX = 256 };


static const char USAGE_HEAD[] =
	"Usage: exec-session [OPTION]... open --dispatcher URL [--adopt]\n"
	"       exec-session [OPTION]... heartbeat|close|show|report\n"
	"       exec-session [OPTION]... show [--current] [--ids | -o COLUMNS]\n"
	"       exec-session [OPTION]... adopt SESSION_ID\n"
	"       exec-session [OPTION]... backup FILE\n"
	"       exec-session [OPTION]... compact\n"
	"Negotiate, keep and end the executor's control session.\n"
	"\n";

static const char USAGE_TAIL[] =
	"\n"
	"Exit status: 0 ok; 64 usage; 65 corrupt state, or no earlier session SID to\n"
	"adopt; 66 no state directory (or no --enroll-token-file); 69 dispatcher\n"
	"unavailable; 76 dispatcher answered nonsense or refused the adoption; 77 no\n"
	"current session, session over, or the dispatcher refused this executor's\n"
	"key or enrollment; 78 state from another version, unsafe permissions, or a\n"
	"restored copy the dispatcher or a backup's mark tells (open a new session);\n"
	"73 backup: cannot create FILE.\n";
struct opts {
	const struct cli_command *cmd;
	const char *state_dir, *dispatcher, *arg, *columns, *enroll_file;
	int64_t timeout_ms;
	int json, adopt, current, ids, utc, wide;
	bool enroll_env;                 /* enroll_file is $EXEC_ENROLL_TOKEN_FILE's */
};

static void
print_report(const struct opts *o, const struct session *s, const struct summary *sm, const char *event)
{
	char a[48];

	if (o->json) {
		json_t *j = summary_json(sm);
		json_object_set_new(j, "event", json_string(event));
		if (s) {
			json_object_set_new(j, "session_id", json_string(s->b.session_id));
			json_object_set_new(j, "incarnation", json_string(s->b.incarnation));
			json_object_set_new(j, "dispatcher", json_string(s->dispatcher));
		}
		json_emit(stdout, j);
		return;
	}
	if (s)
		printf("session %s (incarnation %s) is current at %s\n",
		    s->b.session_id, s->b.incarnation, s->dispatcher);
	else
		printf("no current session\n");
	printf("quarantined: %s of other sessions (%lld queued, %lld started)\n",
	    cli_plural(a, sizeof a, sm->quarantined, "run"), (long long)sm->quarantined_queued,
	    (long long)sm->quarantined_started);
	printf("unknown: %s\n", cli_plural(a, sizeof a, sm->unknown, "run"));
	printf("unreconciled results: %lld (deliverable now %lld, owned by an earlier session %lld, refused %lld)\n",
	    (long long)(sm->deliverable + sm->earlier_session + sm->refused), (long long)sm->deliverable,
	    (long long)sm->earlier_session, (long long)sm->refused);
	printf("receipts: %lld\n", (long long)sm->receipts);
	/* cumulative: said so, so that a startup report is not read as news
	 * (each run handed back at a stop is named then, in the loop's log) */
	printf("handed back: %s since the state began (%lld more marked, not acknowledged yet)\n",
	    cli_plural(a, sizeof a, sm->handed_back, "run"), (long long)sm->handing_back);
}

/* Parse the negotiation answer into s and cred. */
static int
read_negotiation(json_t *a, struct session *s, char *cred, size_t n, struct ek_err *e)
{
	/* the shapes of doc/protocol.md "Identities": anything else is refused */
	const char *inc = field_shaped(a, "incarnation", "inc-", 16);
	const char *sid = field_shaped(a, "session_id", "ses-", 16);
	const char *c = field_shaped(a, "credential", "", 64);
	json_t *lease = json_object_get(a, "lease_ms"), *hb = json_object_get(a, "heartbeat_ms");

	if (!inc || !sid || !c)
		return ek_fail(e, EK_PROTOCOL, "negotiation answer refused: its %s is not %s "
		    "(doc/protocol.md, Identities); nothing was stored", !inc ? "incarnation" :
		    !sid ? "session_id" : "credential", !inc ? "'inc-' and 16 hex digits" :
		    !sid ? "'ses-' and 16 hex digits" : "64 hex digits");
	if (!json_is_integer(lease) || !json_is_integer(hb) ||
	    json_integer_value(lease) <= 0 || json_integer_value(hb) <= 0)
		return ek_fail(e, EK_PROTOCOL, "negotiation answer lacks a positive lease_ms or "
		    "heartbeat_ms; nothing was stored");
	snprintf(s->b.incarnation, sizeof s->b.incarnation, "%s", inc);
	snprintf(s->b.session_id, sizeof s->b.session_id, "%s", sid);
	snprintf(cred, n, "%s", c);
	s->lease_ms = json_integer_value(lease);
	s->heartbeat_ms = json_integer_value(hb);
	return 0;
}

/* Read the enrollment token from path into tok (one line).  A file named
 * by $EXEC_ENROLL_TOKEN_FILE (optional) that is gone leaves tok empty: an
 * enrolled executor needs it no more, and its operator may delete it. */
static int
read_enroll_token(const char *path, bool optional, char *tok, size_t n, struct ek_err *e)
{
	FILE *f = fopen(path, "re");
	size_t len;

	if (!f && optional && errno == ENOENT)
		return 0;
	if (!f)
		return ek_fail(e, EK_NOINPUT, "%s: cannot read '%s': %s", optional ?
		    "EXEC_ENROLL_TOKEN_FILE" : "--enroll-token-file", path, strerror(errno));
	len = fread(tok, 1, n - 1, f);
	fclose(f);
	tok[len] = '\0';
	tok[strcspn(tok, "\r\n")] = '\0';
	if (!tok[0])
		return ek_fail(e, EK_DATAERR, "%s: '%s' holds no token", optional ?
		    "EXEC_ENROLL_TOKEN_FILE" : "--enroll-token-file", path);
	return 0;
}

/* POST /v1/sessions with this executor's id and its key (the proof the
 * dispatcher binds the id to: doc/protocol.md, "The executor's key"), and
 * the enrollment token if one is given (which a new id needs).  The key and
 * the token live in this process only for the request, never printed. */
static int
negotiate(struct state *st, const struct opts *o, json_t **ans, struct ek_err *e)
{
	char key[EXECUTOR_KEY_HEX + 1], tok[ENROLL_TOKEN_MAX + 2] = "";
	int64_t starts;
	bool backup;
	json_t *req;
	int rc;

	if ((o->enroll_file && read_enroll_token(o->enroll_file, o->enroll_env, tok, sizeof tok, e) < 0) ||
	    notice_count(st, &starts, &backup, e) < 0 || state_executor_key(st, key, sizeof key, e) < 0)
		return -1;
	/* the start count and a backup copy's mark: how the dispatcher tells
	 * a restored state (notice.h) */
	req = json_pack("{s:s, s:s, s:I, s:b}", "executor_id", st->executor_id, "executor_key", key,
	    "starts", (json_int_t)starts, "restored", backup);
	explicit_bzero(key, sizeof key);
	if (req && tok[0])
		json_object_set_new(req, "enroll_token", json_string(tok));
	explicit_bzero(tok, sizeof tok);
	if (!req)
		return ek_fail(e, EK_OSERR, "out of memory");
	rc = client_call(o->dispatcher, "POST", PROTO_SESSIONS, NULL, req, o->timeout_ms, ans, NULL, e);
	json_decref(req);
	return rc;
}

static int adopt_earlier(struct state *st, const struct opts *o, struct session *cur,
    struct ek_err *e);

static int
cmd_open(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct session s = { 0 };
	struct summary sm;
	char cred[256];
	json_t *ans;
	int64_t seen;
	int unknown, finished, rc;

	if (run_sweep(st, &unknown, &finished, e) < 0 || negotiate(st, o, &ans, e) < 0)
		return -1;
	rc = read_negotiation(ans, &s, cred, sizeof cred, e);
	seen = json_integer_value(json_object_get(ans, "starts_seen"));
	json_decref(ans);
	/* the count rises to what the dispatcher has seen before the session is
	 * recorded: a state that lags it never heartbeats under the new one */
	if (rc < 0 || notice_rebase(st, seen, e) < 0)
		return -1;
	snprintf(s.dispatcher, sizeof s.dispatcher, "%s", o->dispatcher);
	s.opened_at = now_ms();
	crash_point("session-negotiated");
	rc = session_begin(st, &s, cred, e);
	memset(cred, 0, sizeof cred);
	if (rc < 0 || (o->adopt && adopt_earlier(st, o, &s, e) < 0) || summary_read(st, &sm, e) < 0)
		return -1;
	snprintf(s.status, sizeof s.status, "current");
	print_report(o, &s, &sm, "session_open");
	return 0;
}

/* Ask the dispatcher about the current session; mark it over if it says so. */
static int
session_call(struct state *st, const struct opts *o, const char *method, const char *what,
    json_t *body, json_t **ans, struct session *s, struct ek_err *e)
{
	char path[256], cred[256], over[16] = "";
	int rc;

	if (session_require(st, NULL, s, e) < 0 ||
	    session_credential(st, &s->b, cred, sizeof cred, e) < 0)
		return -1;
	snprintf(path, sizeof path, PROTO_SESSIONS "/%s%s", s->b.session_id, what);
	rc = client_call(s->dispatcher, method, path, cred, body, o->timeout_ms, ans, over, e);
	memset(cred, 0, sizeof cred);
	if (rc < 0 && over[0]) {
		struct ek_err e2;
		snprintf(s->status, sizeof s->status, "%s", over);   /* heartbeat says it */
		if (client_end_over(st, &s->b, over, &e2) < 0)
			*e = e2;
	}
	return rc;
}

/* Record here the beat the dispatcher took (sessions.last_beat_at).
 * Another writer may hold the lock: wait for it only until deadline (the
 * heartbeat's own --timeout-ms), then leave the beat unrecorded, which is
 * safe (the beat only looks older here than it is; the dispatcher, which
 * decides the lease, has it) and never worth failing the heartbeat. */
static int
record_beat(struct state *st, const struct session *s, int64_t deadline, struct ek_err *e)
{
	int rc;

	db_busy_ms(&st->db, deadline - mono_ms());
	rc = session_beat(st, &s->b, e);
	db_busy_ms(&st->db, DB_BUSY_TIMEOUT_MS);
	if (rc < 0 && st->db.busy) {
		fprintf(stderr, "%s: heartbeat: taken by the dispatcher, not recorded here: %s\n", PROG, e->msg);
		ek_clear(e);
		return 0;
	}
	return rc;
}

/* Say how the dispatcher said s is over: "over STATUS" (exec-loop reads
 * the record's status: "unknown", a dispatcher that lost its store, calls
 * for a new session; the others stop the loop). */
static void
say_over(const struct opts *o, const struct session *s)
{
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:b, s:I}", "event", "heartbeat",
		    "session_id", s->b.session_id, "status", s->status, "reconcile_due", false,
		    "deliverable", (json_int_t)0, "hold_ms", (json_int_t)0, "inspect_due", false,
		    "inspections_pending", (json_int_t)0));
	else
		printf("over %s\n", s->status);
}

/* Beat at the dispatcher (the session is ended here if it says it is
 * over), record the beat, and say what waits. */
static int
cmd_heartbeat(struct state *st, const struct opts *o, struct ek_err *e)
{
	int64_t deadline = mono_ms() + o->timeout_ms, n, pending = 0, hold;
	struct session s = { 0 };
	json_t *ans = NULL, *p, *body;
	int64_t upto;
	bool due;
	int rc;

	if (notice_body(st, &body, &upto, e) < 0)
		return -1;
	rc = session_call(st, o, "POST", PROTO_S_HEARTBEAT, body, &ans, &s, e);
	json_decref(body);
	if (rc < 0 && e->code == EK_NOSESSION && s.status[0] && strcmp(s.status, "current") != 0)
		say_over(o, &s);
	/* a dispatcher without inspections says nothing: none are pending */
	if (json_is_integer(p = json_object_get(ans, "inspections_pending")) && json_integer_value(p) > 0)
		pending = json_integer_value(p);
	json_decref(ans);
	/* due: a result waits that nobody is delivering (its supervisor
	 * delivers its own, claimed from the moment it was chosen) */
	if (rc < 0 || record_beat(st, &s, deadline, e) < 0 ||
	    notice_sent(st, upto, deadline - mono_ms(), e) < 0 ||
	    result_deliverable_by(st, &s.b, &n, &due, e) < 0)
		return -1;
	/* a Retry-After the dispatcher gave: how long no pass should start */
	hold = s.retry_after_at > now_ms() ? s.retry_after_at - now_ms() : 0;
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:b, s:I}", "event", "heartbeat",
		    "session_id", s.b.session_id, "status", "current", "reconcile_due", due,
		    "deliverable", (json_int_t)n, "hold_ms", (json_int_t)hold, "inspect_due", pending > 0,
		    "inspections_pending", (json_int_t)pending));
	else if (due && hold > 0)   /* for people: exec-loop reads the record */
		printf("reconcile-due hold-ms=%lld%s\n", (long long)hold, pending > 0 ? " inspect-due" : "");
	else
		printf("%s%s\n", due ? "reconcile-due" : "current", pending > 0 ? " inspect-due" : "");
	return 0;
}

/* Tell the dispatcher, then end the session here whatever it said. */
static int
close_session(struct state *st, const struct opts *o, struct session *s, struct ek_err *e)
{
	json_t *ans = NULL;
	int rc = session_call(st, o, "DELETE", "", NULL, &ans, s, e);

	json_decref(ans);
	if (rc < 0 && e->code != EK_UNAVAILABLE && e->code != EK_PROTOCOL)
		return -1;
	/* Closing is the operator's decision: it holds here even if the
	 * dispatcher could not be told, and the exit code says so. */
	if (session_end(st, &s->b, "closed", rc < 0 ? NULL : e) < 0 && rc == 0)
		return -1;
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:b}", "event", "session_close",
		    "session_id", s->b.session_id, "status", "closed", "dispatcher_told", rc == 0));
	else
		printf("session %s closed%s\n", s->b.session_id,
		    rc == 0 ? "" : " here; the dispatcher could not be told");
	return rc;
}

/* Each run the dispatcher took back, old id and new, one line each on
 * stderr (the loop's log links the two; ids are checked by handback_settle). */
static void
say_requeued(const struct opts *o, json_t *ans)
{
	json_t *x;
	size_t i;

	if (o->json)
		return;
	json_array_foreach(json_object_get(ans, "requeued"), i, x)
		fprintf(stderr, "%s: handed back run '%s', re-queued as %s\n", PROG,
		    json_string_value(json_object_get(x, "run_id")), json_string_value(json_object_get(x, "as")));
}

/* Hand back every run of s accepted and never started (handback.h), in
 * batches, before the session ends.  A dispatcher that cannot take them
 * now does not stop the close: the runs are marked, never start here, and
 * the dispatcher settles them later.  0, or -1 when s turned out over. */
static int
hand_back(struct state *st, const struct opts *o, struct session *s, struct ek_err *e)
{
	json_t *ids = NULL, *req, *ans;
	int acked, total = 0, batches, rc = 0;

	/* a restored backup cannot say what never started: it hands back nothing */
	if (state_refuse_backup(st, e) < 0) {
		if (e->code != EK_VERSION)
			return -1;
		fprintf(stderr, "%s: close: nothing handed back: %s\n", PROG, e->msg);
		ek_clear(e);
		return 0;
	}
	for (batches = 0; rc == 0 && batches < 1000; batches++) {
		if (handback_mark(st, &s->b, &ids, e) < 0)
			return -1;
		if (json_array_size(ids) == 0) {
			json_decref(ids);
			break;
		}
		crash_point("handback-marked");
		req = json_pack("{s:o}", "runs", ids);
		ans = NULL;
		rc = session_call(st, o, "POST", PROTO_S_HANDBACK, req, &ans, s, e);
		json_decref(req);
		if (rc == 0)
			crash_point("handback-acked");
		if (rc == 0 && (rc = handback_settle(st, ans, &acked, e)) == 0) {
			say_requeued(o, ans);
			total += acked;
			rc = acked > 0 || json_array_size(json_object_get(ans, "not_handed_back")) > 0 ?
			    0 : ek_fail(e, EK_PROTOCOL, "the dispatcher settled none of the runs handed back");
		}
		json_decref(ans);
	}
	if (total > 0 && !o->json)
		fprintf(stderr, "%s: handed back %d run%s never started here\n", PROG, total,
		    total == 1 ? "" : "s");
	if (rc < 0 && e->code == EK_NOSESSION)
		return -1;
	if (rc < 0)   /* not fatal: marked runs stay unstarted and are settled later */
		fprintf(stderr, "%s: hand-back incomplete, the dispatcher will settle the rest: %s\n",
		    PROG, e->msg);
	ek_clear(e);
	return 0;
}

static int
cmd_close(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct session s;
	int rc, hold;

	if (session_require(st, NULL, &s, e) < 0)
		return -1;
	/* New lookups now answer "shutting down"; those in flight finish first. */
	if ((hold = inspect_quiesce(st, mono_ms() + o->timeout_ms, e)) < 0)
		return -1;
	rc = hand_back(st, o, &s, e);
	if (rc == 0)
		rc = close_session(st, o, &s, e);
	inspect_unquiesce(st, hold);
	return rc;
}

/* The earlier session sid of this state, which the current one may adopt. */
static int
adoptable(struct state *st, const char *sid, const struct session *cur, struct session *old,
    struct ek_err *e)
{
	struct binding b = cur->b;
	int rc;

	snprintf(b.session_id, sizeof b.session_id, "%s", sid);
	if ((rc = session_find(st, &b, old, e)) < 0)
		return -1;
	if (rc == 0)
		return ek_fail(e, EK_DATAERR, "no session '%s' of dispatcher incarnation '%s' in this "
		    "state (a dispatcher adopts only sessions it issued itself)", sid, b.incarnation);
	if (strcmp(old->status, "current") == 0)
		return ek_fail(e, EK_DATAERR, "session '%s' is the current session: its results "
		    "need no adoption", sid);
	return 0;
}

/* Adopt old's retained results for cur: the dispatcher first, which
 * fences it (only this executor's current session, only an ended, not
 * revoked one), then here.  Nothing is relabelled: results keep their
 * binding.  *n gets how many are deliverable now. */
static int
adopt_one(struct state *st, const struct opts *o, struct session *cur, const struct session *old,
    int64_t *n, struct ek_err *e)
{
	json_t *req = json_pack("{s:s}", "session_id", old->b.session_id), *ans = NULL;
	int rc = session_call(st, o, "POST", PROTO_S_ADOPTIONS, req, &ans, cur, e);

	json_decref(req);
	json_decref(ans);
	if (rc == 0)
		crash_point("adopted-there");
	if (rc < 0 || session_adopt(st, &old->b, &cur->b, e) < 0 ||
	    result_count_deliverable(st, &old->b, n, e) < 0)
		return -1;
	return 0;
}

static void
print_adoption(const struct opts *o, const struct session *cur, const struct session *old, int64_t n)
{
	char w[48];

	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:I}", "event", "session_adopt",
		    "session_id", old->b.session_id, "by", cur->b.session_id, "deliverable", (json_int_t)n));
	else
		printf("session %s (%s) adopted by %s: %s now deliverable\n", old->b.session_id,
		    old->status, cur->b.session_id, cli_plural(w, sizeof w, n, "retained result"));
}

static int
cmd_adopt(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct session cur, old;
	int64_t n;

	if (session_require(st, NULL, &cur, e) < 0 || adoptable(st, o->arg, &cur, &old, e) < 0 ||
	    adopt_one(st, o, &cur, &old, &n, e) < 0)
		return -1;
	print_adoption(o, &cur, &old, n);
	return 0;
}

/* Is cur still this state's current session?  A refusal of one adoption
 * (403: not this executor's key) leaves it current; a session found over
 * (401, 410) was ended here by session_call(). */
static bool
session_still_current(struct state *st, const struct session *cur)
{
	struct session now;
	struct ek_err e2;

	return session_require(st, cur->b.session_id, &now, &e2) == 0;
}

/* open --adopt: every earlier session of the same dispatcher incarnation
 * that still holds retained, unrefused results, or runs still running, is
 * adopted, so results retained before a restart (or chosen after it by a
 * supervisor that outlived its loop) go out on the first good heartbeat.  A refusal
 * (a revoked session, say) is reported and the others go on. */
static int
adopt_earlier(struct state *st, const struct opts *o, struct session *cur, struct ek_err *e)
{
	/* results retained there, or runs still running there whose results
	 * will be: both go out through this session once it has adopted */
	sqlite3_stmt *q = db_prep(&st->db, "SELECT session_id FROM results WHERE refused = 0 "
	    "AND incarnation = ?1 AND session_id <> ?2 UNION SELECT session_id FROM runs WHERE "
	    "state = 'started' AND incarnation = ?1 AND session_id <> ?2 LIMIT ?3", e);
	char sids[RESULT_ADOPTED_MAX][64];
	struct session old;
	int rc, n = 0, i;
	int64_t count;

	if (!q)
		return -1;
	db_bind_binding(q, 1, &cur->b);
	db_bind_i64(q, 3, RESULT_ADOPTED_MAX);
	while ((rc = db_step(&st->db, q, e)) == 1)
		db_col_text(q, 0, sids[n++], sizeof sids[0]);
	db_done(&st->db, q);
	for (i = 0; rc == 0 && i < n; i++) {
		if (adoptable(st, sids[i], cur, &old, e) < 0 || adopt_one(st, o, cur, &old, &count, e) < 0) {
			if (e->code == EK_NOSESSION && !session_still_current(st, cur))
				return -1;   /* our own session is over: nothing to adopt for */
			fprintf(stderr, "%s: open --adopt: session '%s' not adopted: %s\n", PROG, sids[i],
			    e->msg);
			ek_clear(e);
			continue;
		}
		print_adoption(o, cur, &old, count);
	}
	return rc < 0 ? -1 : 0;
}

/* --- show ----------------------------------------------------------------- */

/* Every session (--current: the current one only): session-show.c. */
static int
cmd_show(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct session_show_opts so = { o->current, o->ids, o->json, o->wide, o->columns };

	return session_show(st, &so, e);
}

/* A consistent copy of the state, while the executor runs (backup.h). */
static int
cmd_backup(struct state *st, const struct opts *o, struct ek_err *e)
{
	if (state_backup(st, o->arg, e) < 0)
		return -1;
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s}", "event", "backup", "file", o->arg));
	else
		printf("backup of %s in %s (mode 0600: it holds the session credential and the "
		    "executor key)\n", st->dbpath, o->arg);
	return 0;
}

static int
cmd_compact(struct state *st, const struct opts *o, struct ek_err *e)
{
	return session_compact(st, o->json, e);
}

static int
cmd_report(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct session s;
	struct summary sm;
	int rc = session_current(st, &s, e);

	if (rc < 0 || summary_read(st, &sm, e) < 0)
		return -1;
	print_report(o, rc ? &s : NULL, &sm, "startup_report");
	return 0;
}

/* --- commands, options and main ------------------------------------------ */

/* What a command needs: one SESSION_ID operand; the state directory
 * created when there is none yet. */
enum { NEEDS_SID = 1, CREATES_STATE = 2, NEEDS_FILE = 4 };

static const struct cli_command commands[] = {
	{ .name = "open", .run = cmd_open, .needs = CREATES_STATE,
	  .help = "negotiate a new session (the previous one becomes replaced),\n"
	    "quarantine rows of every other binding, print the startup report" },
	{ .name = "heartbeat", .run = cmd_heartbeat,
	  .help = "extend the lease; says 'reconcile-due' when results wait (with\n"
	    "'hold-ms=N' while a Retry-After holds them back N ms more), and\n"
	    "adds 'inspect-due' when the dispatcher holds inspections for it" },
	{ .name = "close", .run = cmd_close,
	  .help = "hand back the runs accepted and never started, then end the\n"
	    "session at the dispatcher and here" },
	{ .name = "show", .run = cmd_show,
	  .help = "list every session this state has had, oldest first (a table:\n"
	    "SESSION_ID INCARNATION STATUS OPENED ENDED LAST_BEAT LEASE\n"
	    "DISPATCHER)" },
	{ .name = "report", .run = cmd_report,
	  .help = "print the startup report without opening a session" },
	{ .name = "adopt", .run = cmd_adopt, .needs = NEEDS_SID, .operand = "SID", .args = "SESSION_ID",
	  .help = "let the current session deliver the results retained under the\n"
	    "earlier session SID, once the dispatcher has recorded the adoption" },
	{ .name = "backup", .run = cmd_backup, .needs = NEEDS_FILE, .operand = "FILE", .args = "FILE",
	  .help = "copy the state, consistently while the executor runs, into the\n"
	    "new FILE (mode 0600: it holds the credential and the executor\n"
	    "key), marked as a backup: restored, it starts nothing until a new\n"
	    "session is opened (doc/recovery.md, \"Backup and restore\")" },
	{ .name = "compact", .run = cmd_compact,
	  .help = "give the free pages pruning left back to the file system, a\n"
	    "bounded step at a time: safe while the executor runs" },
};

static const struct opt options[] = {
	OPTS_CHECKED("dispatcher", dispatcher, "URL", cli_is_url, "an http:// or https:// URL",
	    "dispatcher base URL (open only),\n"
	    "e.g. http://127.0.0.1:8080"),
	OPTS_FLAG("adopt", 0, adopt,
	    "open: then adopt every earlier session that still holds\n"
	    "retained results (exec-loop does this by default)"),
	OPTS_STRING("enroll-token-file", 0, enroll_file, "FILE",
	    "\n"
	    "open: the enrollment token the dispatcher's operator\n"
	    "issued, which its first session needs (default\n"
	    "$EXEC_ENROLL_TOKEN_FILE)"),
	OPTS_INT("timeout-ms", timeout_ms, 1, CLIENT_TIMEOUT_MAX_MS, "N",
	    "bound each request to N ms (default 5000)"),
	OPTS_FLAG("current", 0, current,
	    "show: the current session only (exit 77 if none)"),
	OPTS_FLAG("ids", 0, ids,
	    "show: session ids only, one per line"),
	OPTS_TABLE_VIEW("show"),
	OPTS_FLAG("utc", 0, utc,
	    "show: times in UTC, not the local time zone"),
	OPTS_STATE("JSON Lines output (doc/json.md)"),
};

/* -o's columns of show, for the completion. */
static void
complete_columns(FILE *f)
{
	const char *const *c;

	fputs("columns\texec-session show\t", f);
	for (c = session_show_columns; *c; c++)
		fprintf(f, "%s%s", *c, c[1] ? " " : "\n");
}

static const struct opts_only only[] = {
	{ "dispatcher adopt enroll-token-file", "open" },
	{ "current ids columns wide utc", "show" },
};

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options), .cmds = OPTS_TABLE(commands), .only = OPTS_TABLE(only),
	.cmds_column = 13, .complete_more = complete_columns,
};

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	o->timeout_ms = CLIENT_TIMEOUT_MS;
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	if ((rc = opts_command(&spec, argc, argv, &o->cmd)) != 0)
		return rc;
	if ((o->cmd->needs & NEEDS_SID) && optind + 1 != argc)
		return cli_usage_error(PROG, "%s needs one SESSION_ID (an earlier session of this state)",
		    o->cmd->name);
	if ((o->cmd->needs & NEEDS_FILE) && optind + 1 != argc)
		return cli_usage_error(PROG, "%s needs one FILE (a new file for the copy)", o->cmd->name);
	if (!(o->cmd->needs & (NEEDS_SID | NEEDS_FILE)) && optind != argc)
		return cli_usage_error(PROG, "too many operands");
	o->arg = argv[optind];
	if (o->cmd->run == cmd_open && !o->dispatcher)
		return cli_usage_error(PROG, "open needs --dispatcher URL");
	if (!o->enroll_file && o->cmd->run == cmd_open) {
		o->enroll_file = getenv("EXEC_ENROLL_TOKEN_FILE");
		o->enroll_env = o->enroll_file && *o->enroll_file;
		if (!o->enroll_env)
			o->enroll_file = NULL;
	}
	if ((o->ids || o->columns || o->wide) && o->json)
		return cli_usage_error(PROG, "--ids, -o and -w go with the table, not with --json");
	if (o->ids && o->columns)
		return cli_usage_error(PROG, "--ids and -o exclude each other");
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct state st;
	struct ek_err e = { 0 };
	const char *dir;
	bool made;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	timefmt_utc(o.utc);   /* show only (parse_args) */
	dir = cli_state_dir(o.state_dir);
	made = (o.cmd->needs & CREATES_STATE) && access(dir, F_OK) < 0 && errno == ENOENT;
	if (state_open(&st, dir, o.cmd->needs & CREATES_STATE ? STATE_CREATE : 0, &e) < 0)
		return ek_report(PROG, &e);
	rc = o.cmd->run(&st, &o, &e);
	state_close(&st);
	/* A first open whose dispatcher was never reached leaves nothing: no
	 * one saw the executor id and key it made.  One that reached it keeps
	 * them, whatever the answer: it may have bound them. */
	if (rc < 0) {
		rc = ek_report(PROG, &e);
		if (made && client_unreached() && state_unmake(dir) == 0)
			fprintf(stderr, "%s: removed '%s', made for this open: the dispatcher never "
			    "saw it\n", PROG, dir);
		return cli_finish(PROG, rc);
	}
	return cli_finish(PROG, EK_OK);
}
