/*
 * routes — the dispatcher's top: the route table, and a request's life
 * through it in libmicrohttpd.
 *
 * libmicrohttpd calls on_request() once when a request arrives, once per
 * chunk of upload, and once more when the upload is complete; the request
 * is served then, and freed by on_completed().
 *
 * A request is classified once, when it arrives: its row in the route
 * table (for a path no row has, its prefix) gives its kind (the counters'
 * and the gate's classes) and its body's cap, and everything after reads
 * those.  Then, in order: an /admin/ request without the admin token is
 * refused (auth.c); the body is collected up to its cap; a report is
 * counted in flight (results.c); the gate admits the request, lets it
 * wait for its turn, or answers 429 (http.c); and the row's handler
 * answers.  A fault queued for its path (faults.c) is served instead,
 * here: a hook taken only while some fault is queued, so that a
 * dispatcher nobody injects faults into never enters this code.
 *
 * This file is the only one that names the handlers, and calls into every
 * layer below it (HACKING.md draws the order; tests/lint.bats checks it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "protocol.h"

#include "util.h"
#include "faults.h"
#include "gate.h"
#include "http.h"
#include "auth.h"
#include "sessions.h"
#include "work.h"
#include "results.h"
#include "inspections.h"
#include "admin.h"
#include "settle.h"
#include "routes.h"

enum { V1_MAX = 4 * 1024 * 1024, ADMIN_MAX = 64 * 1024 * 1024 };   /* beside RESULT_BODY_MAX */

/* The route table: each endpoint (doc/protocol.md's endpoint table, which
 * tests/docs.bats holds to this one), its handler, its kind (for the
 * counters and the gate) and the most its body may hold.  A request is
 * looked up here once, and everything about it follows from its row. */
static const struct route {
	const char *method, *pattern;   /* "*" matches one path segment */
	handler_fn *fn;
	enum req_kind kind;
	size_t limit;
} routes[] = {
	{ "POST", "/v1/sessions", h_negotiate, RK_NEGOTIATE, V1_MAX },
	{ "POST", "/v1/sessions/*/heartbeat", h_heartbeat, RK_HEARTBEAT, V1_MAX },
	{ "DELETE", "/v1/sessions/*", h_close, RK_CLOSE, V1_MAX },
	{ "GET", "/v1/sessions/*/work", h_work, RK_FEED, V1_MAX },
	{ "POST", "/v1/sessions/*/receipts", h_receipts, RK_OTHER, V1_MAX },
	{ "POST", "/v1/sessions/*/adoptions", h_adopt, RK_OTHER, V1_MAX },
	{ "POST", "/v1/sessions/*/handback", h_handback, RK_OTHER, V1_MAX },
	{ "POST", "/v1/results", h_result, RK_RESULT, RESULT_BODY_MAX },
	{ "POST", "/v1/inspections", h_inspection_new, RK_OTHER, V1_MAX },
	{ "GET", "/v1/inspections/*", h_inspection_get, RK_OTHER, V1_MAX },
	{ "GET", "/v1/sessions/*/inspections", h_inspection_list, RK_OTHER, V1_MAX },
	{ "POST", "/v1/sessions/*/inspections/*", h_inspection_answer, RK_OTHER, V1_MAX },
	{ "POST", "/admin/runs", h_submit, RK_ADMIN, ADMIN_MAX },
	{ "GET", "/admin/runs", h_list_runs, RK_ADMIN, ADMIN_MAX },
	{ "GET", "/admin/runs/*", h_show_run, RK_ADMIN, ADMIN_MAX },
	{ "GET", "/admin/summary", h_summary, RK_ADMIN, ADMIN_MAX },
	{ "GET", "/admin/stats", h_stats, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/sessions/*/revoke", h_revoke, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/sessions/*/expire", h_expire, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/sessions/*/replace", h_replace, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/sessions/*/lease", h_lease, RK_ADMIN, ADMIN_MAX },
	{ "GET", "/admin/sessions", h_list_sessions, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/clients", h_client_new, RK_ADMIN, ADMIN_MAX },
	{ "GET", "/admin/clients", h_list_clients, RK_ADMIN, ADMIN_MAX },
	{ "DELETE", "/admin/clients/*", h_client_revoke, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/faults", h_add_fault, RK_ADMIN, ADMIN_MAX },
	{ "DELETE", "/admin/faults", h_clear_faults, RK_ADMIN, ADMIN_MAX },
	{ "POST", "/admin/enrollments", h_enroll_new, RK_ADMIN, ADMIN_MAX },
};

/* Does rq's path match pat ("*" = one non-empty segment)?  The segments
 * go to rq->arg, the last, and rq->parent, the one before it. */
static bool
route_match(const char *pat, struct req *rq)
{
	const char *path = rq->path;
	size_t n;

	rq->arg[0] = rq->parent[0] = '\0';
	while (*pat && *path) {
		if (*pat == '*') {
			n = strcspn(path, "/");
			if (n == 0 || n >= sizeof rq->arg)
				return false;
			memcpy(rq->parent, rq->arg, sizeof rq->parent);
			memcpy(rq->arg, path, n);
			rq->arg[n] = '\0';
			path += n;
			pat++;
		} else if (*pat++ != *path++)
			return false;
	}
	return !*pat && !*path;
}

/* Pick rq->route for the method and path; collect rq->allow for a 405.
 * The row rq is classified by: its route, else the first whose path it
 * has (a 405), else NULL (a 404). */
static const struct route *
route_find(struct req *rq)
{
	size_t i, n = sizeof routes / sizeof routes[0];
	const struct route *like = NULL;

	for (i = 0; i < n && !rq->route; i++) {
		if (!route_match(routes[i].pattern, rq))
			continue;
		if (!like)
			like = &routes[i];
		if (strcmp(routes[i].method, rq->method) == 0)
			rq->route = like = &routes[i];
		else if (!strstr(rq->allow, routes[i].method))
			snprintf(rq->allow + strlen(rq->allow), sizeof rq->allow - strlen(rq->allow),
			    "%s%s", rq->allow[0] ? ", " : "", routes[i].method);
	}
	return like;
}

/* rq's kind and body limit, from the route row r (route_find); a path no
 * route has is an operator's below PROTO_ADMIN, else "other". */
static void
req_classify(struct req *rq, const struct route *r)
{
	if (r) {
		rq->kind = r->kind;
		rq->limit = r->limit;
	} else if (strncmp(rq->path, PROTO_ADMIN, strlen(PROTO_ADMIN)) == 0) {
		rq->kind = RK_ADMIN;
		rq->limit = ADMIN_MAX;
	} else {
		rq->kind = RK_OTHER;
		rq->limit = V1_MAX;
	}
}

/*
 * A connection's thread (libmicrohttpd gives each its own) takes the CPU
 * priority of what it serves.  While a fleet delivers what it kept
 * through an outage, the CPU is all results and executors' processes, and
 * a heartbeat, which keeps a session, must not queue for it behind them:
 * a thread serving a result or the work feed takes BULK_STEPS of nice
 * below the dispatcher's own, and one serving a heartbeat --heartbeat-nice
 * (where the dispatcher may raise a priority: prio_probe()).  Linux's nice
 * is a thread's own (its thread id).  Without the right to raise one, a
 * thread that took the bulk nice keeps it: it ends with its connection.
 */
enum { BULK_STEPS = 10 };

static int base_nice;        /* the dispatcher's own, at its start */

/* prio_probe() raised a thread's priority (so dsp.beat_nice is below ours) */
static bool
may_raise(void)
{
	return dsp.beat_nice < base_nice;
}

static int
nice_for(enum req_kind kind)
{
	if (kind == RK_RESULT || kind == RK_FEED)
		return base_nice + BULK_STEPS < 19 ? base_nice + BULK_STEPS : 19;
	if (kind == RK_HEARTBEAT)
		return dsp.beat_nice;
	return base_nice;
}

static void
req_priority(const struct req *rq)
{
	static __thread bool known;
	static __thread int now;
	int want = nice_for(rq->kind);

	if (!known) {
		known = true;
		now = base_nice;
	}
	if (want == now || (want < now && !may_raise()))
		return;
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), want) == 0)
		now = want;
}

/* May this dispatcher raise a thread's priority to --heartbeat-nice?  Tried
 * on the calling thread, then given back; dsp.beat_nice is what heartbeats
 * get (the dispatcher's own nice if none), and a dispatcher that may not
 * says so once. */
static void
prio_probe(void)
{
	id_t tid = (id_t)syscall(SYS_gettid);
	int err;

	errno = 0;
	base_nice = getpriority(PRIO_PROCESS, tid);
	if (errno)
		base_nice = 0;
	dsp.beat_nice = base_nice;
	if (dsp.cfg.heartbeat_nice >= base_nice)
		return;
	if (setpriority(PRIO_PROCESS, tid, (int)dsp.cfg.heartbeat_nice) < 0) {
		err = errno;
		warn("heartbeats keep nice %d: raising a thread to nice %" PRId64 " needs CAP_SYS_NICE"
		    " or an RLIMIT_NICE of %" PRId64 " (%s); --heartbeat-nice %d asks for none",
		    base_nice, dsp.cfg.heartbeat_nice, 20 - dsp.cfg.heartbeat_nice, strerror(err),
		    base_nice);
		return;
	}
	(void)setpriority(PRIO_PROCESS, tid, base_nice);
	dsp.beat_nice = (int)dsp.cfg.heartbeat_nice;
}

/* Run the request's handler (or answer 404/405); the HTTP status. */
static int
dispatch(struct req *rq)
{
	if (rq->route)
		return rq->route->fn(rq);
	if (rq->allow[0])
		return fail(rq, 405, "method_not_allowed", "%s does not allow %s", rq->path, rq->method);
	return fail(rq, 404, "not_found", "no such endpoint '%s'", rq->path);
}

/*
 * The fault hook: rq took a fault (faults.c says what each kind does).
 * The kinds that answer in the handler's place with an error have its
 * status and code here.  A /v1/results request a fault keeps from its
 * handler is still kept in `reports` (report_fault(), invariant 2).
 */
static const struct {
	int status;
	const char *code;
} in_place[F_KINDS] = {
	[F_5XX] = { 503, "unavailable" },
	[F_429] = { 429, "overloaded" },
	[F_4XX] = { 400, "invalid" },
};

/* A lie in chunks: a few bytes at each call, so the body comes in several. */
static ssize_t
drip(void *cls, uint64_t pos, char *buf, size_t max)
{
	const char *text = cls;
	size_t len = strlen(text), n;

	if (pos >= len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	n = len - (size_t)pos < 5 ? len - (size_t)pos : 5;
	n = n < max ? n : max;
	memcpy(buf, text + pos, n);
	return (ssize_t)n;
}

static enum MHD_Result
send_chunked(struct req *rq, int status, char *text)
{
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, drip, text, free);
	enum MHD_Result r;

	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	r = MHD_queue_response(rq->conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	log_request(rq, status);
	return r;
}

/* Serve rq under its fault; MHD_NO closes without an answer. */
static enum MHD_Result
serve_faulted(struct req *rq)
{
	int kind = rq->fault.kind, status;
	char *junk;

	if (kind == F_HANG)
		nap(rq->fault.delay_ms, rq->conn);
	if (kind == F_RESET || kind == F_HANG) {
		report_fault(rq, 0);
		log_request(rq, 0);
		return MHD_NO;
	}
	if (kind == F_LIE && (junk = strdup(rq->fault.body))) {
		report_fault(rq, rq->fault.status);
		return rq->fault.chunked ? send_chunked(rq, rq->fault.status, junk) :
		    send_text(rq, rq->fault.status, junk, strlen(junk));
	}
	if (in_place[kind].status) {
		if ((kind == F_5XX || kind == F_429) && rq->fault.delay_ms > 0)
			rq->retry_after_s = (int)((rq->fault.delay_ms + 999) / 1000);
		status = fail(rq, in_place[kind].status, in_place[kind].code, "injected fault");
		report_fault(rq, status);
		return respond(rq, status);
	}
	if (kind == F_DELAY)
		nap(rq->fault.delay_ms, NULL);
	status = dispatch(rq);
	if (kind == F_DROP_ACK) {
		log_request(rq, 0);
		return MHD_NO;
	}
	if (kind == F_MALFORMED && (junk = strdup("{\"status\":\"recorded\",<html>")))
		return send_text(rq, 200, junk, strlen(junk));
	return respond(rq, status);
}

/* A new request: copy method and path, classify it, refuse an /admin/
 * one without the token, take a fault if any is queued. */
static struct req *
req_new(struct MHD_Connection *conn, const char *url, const char *method)
{
	struct req *rq = calloc(1, sizeof *rq);

	if (!rq)
		return NULL;
	rq->conn = conn;
	rq->t0 = mono_ms();
	snprintf(rq->method, sizeof rq->method, "%s", method);
	if (strlen(url) < sizeof rq->path) {
		snprintf(rq->path, sizeof rq->path, "%s", url);
		req_classify(rq, route_find(rq));
	} else {
		snprintf(rq->path, sizeof rq->path, "%.*s", 64, url);
		req_classify(rq, NULL);
	}
	req_priority(rq);
	/* an /admin/ request without the admin token is refused before
	 * anything else: it takes no fault and reaches no handler */
	if (rq->kind == RK_ADMIN && (rq->denied = auth_admin(rq)))
		rq->limit = 0;
	else if (fault_any())
		rq->fault = fault_take(rq->path);
	gate_enter(rq);
	return rq;
}

/* Append upload data to the body, up to rq->limit; beyond it, discard. */
static void
req_append(struct req *rq, const char *data, size_t n)
{
	size_t want = rq->len + n + 1;
	char *p;

	if (rq->too_big || want > rq->limit + 1) {
		rq->too_big = true;
		return;
	}
	if (want > rq->cap) {
		size_t cap = rq->cap ? rq->cap : 4096;
		while (cap < want)
			cap *= 2;
		if (!(p = realloc(rq->body, cap))) {
			rq->too_big = true;
			return;
		}
		rq->body = p;
		rq->cap = cap;
	}
	memcpy(rq->body + rq->len, data, n);
	rq->len += n;
	rq->body[rq->len] = '\0';
}

/* Past the gate: serve rq, by its handler or under its fault.  A result
 * its handler served is a sample of the gate's limit (a fault that
 * answers in its place says nothing of the store's pace). */
static enum MHD_Result
req_serve(struct req *rq, int64_t turn_ms)
{
	int64_t t_us = gate_now_us();
	enum MHD_Result r = rq->fault.kind ? serve_faulted(rq) : respond(rq, dispatch(rq));

	if (rq->kind == RK_RESULT && turn_ms == 0 &&
	    (rq->fault.kind == F_NONE || rq->fault.kind == F_DELAY))
		gate_served(gate_now_us() - t_us);
	return r;
}

/* The body is complete: count the report in flight, then serve it. */
static enum MHD_Result
req_finish(struct req *rq)
{
	const char *id = rq->kind == RK_RESULT && body_json(rq) ?
	    json_string_value(json_object_get(rq->in, "run_id")) : NULL;
	char run_id[RUN_ID_MAX + 1] = "";
	enum MHD_Result r;
	int64_t turn_ms;
	int n;

	if (id && is_run_id(id)) {
		snprintf(run_id, sizeof run_id, "%s", id);
		if ((n = flight_enter(run_id)) > 0)
			flight_persist(run_id, n);
	}
	if (rq->denied) {           /* answered as auth_admin() said, nothing else done */
		r = respond(rq, rq->denied);
		gate_leave(rq);
		return r;
	}
	json_decref(rq->out);       /* a 400 from body_json() is answered by the handler */
	rq->out = NULL;
	if (gate_closed(rq, &turn_ms)) {
		json_decref(rq->in);
		rq->in = NULL;
		r = respond(rq, fail(rq, 429, "overloaded", "past the gate (limit %lld, --max-inflight"
		    " %lld, --max-rate %lld); retry after %d s", (long long)gate_limit(),
		    (long long)dsp.cfg.max_inflight, (long long)dsp.cfg.max_rate, rq->retry_after_s));
	} else if (turn_ms > 0 && !gate_wait_turn(rq, turn_ms)) {
		log_request(rq, 0);   /* its client left while it waited: nobody to answer */
		r = MHD_NO;
	} else
		r = req_serve(rq, turn_ms);
	if (run_id[0])
		flight_leave(run_id);
	gate_leave(rq);
	return r;
}

/* libmicrohttpd's access handler: called once per request, then per
 * chunk of upload, then once more when the upload is complete. */
static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *data, size_t *size, void **ctx)
{
	struct req *rq = *ctx;

	if (!rq) {
		*ctx = req_new(conn, url, method);
		return *ctx ? MHD_YES : MHD_NO;
	}
	if (*size) {
		req_append(rq, data, *size);
		*size = 0;
		return MHD_YES;
	}
	return req_finish(rq);
}

/* Free a request's state when libmicrohttpd is done with it. */
static void
on_completed(void *cls, struct MHD_Connection *conn, void **ctx,
    enum MHD_RequestTerminationCode toe)
{
	struct req *rq = *ctx;

	if (!rq)
		return;
	gate_leave(rq);
	json_decref(rq->in);
	json_decref(rq->out);
	free(rq->body);
	free(rq);
	*ctx = NULL;
}

struct MHD_Daemon *
routes_start(struct ek_err *e)
{
	prio_probe();
	return http_start(on_request, on_completed, e);
}
