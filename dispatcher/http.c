/*
 * http — the dispatcher's face to libmicrohttpd: the route table, a
 * request's life (collect the body up to a cap, take a queued fault,
 * dispatch to a handler, send the JSON answer, log one line), and the
 * helpers every handler answers with.
 *
 * libmicrohttpd calls on_request() once when a request arrives, once per
 * chunk of upload, and once more when the upload is complete; the request
 * is served then, and freed by on_completed().
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dispatcher.h"

enum { V1_MAX = 4 * 1024 * 1024, ADMIN_MAX = 64 * 1024 * 1024 };   /* beside RESULT_BODY_MAX */

int
fail(struct req *rq, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	char detail[512];

	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	json_decref(rq->out);
	rq->out = json_pack("{s:s, s:s}", "error", code, "detail", detail);
	return status;
}

const char *
req_bearer(struct req *rq)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);

	if (!h || strncasecmp(h, PROTO_BEARER, strlen(PROTO_BEARER)) != 0)
		return NULL;
	for (h += strlen(PROTO_BEARER); *h == ' '; h++)
		;
	return *h ? h : NULL;
}

int
fail_over(struct req *rq, const char *status)
{
	fail(rq, 410, "session_over", "the session is %s", status);
	json_object_set_new(rq->out, "status", json_string(status));
	return 410;
}

int
internal(struct req *rq)
{
	say("%s %s: %s", rq->method, rq->path, rq->e.msg);
	rq->rollback = true;
	return fail(rq, 500, "internal", "%s", rq->e.msg);
}

int
tx_begin(struct req *rq)
{
	if (store_begin(&rq->e) == 0)
		return 0;
	internal(rq);
	return -1;
}

int
tx_read(struct req *rq)
{
	if (store_begin_read(&rq->e) == 0)
		return 0;
	internal(rq);
	return -1;
}

int
tx_end(struct req *rq, int status)
{
	if (store_end(!rq->rollback && status < 500, &rq->e) < 0)
		status = -1;
	return status < 0 ? internal(rq) : status;
}

int
answer(struct req *rq, int status, json_t *obj)
{
	json_decref(rq->out);
	rq->out = obj;
	if (!obj)
		return fail(rq, 500, "internal", "out of memory");
	return status;
}

json_t *
body_json(struct req *rq)
{
	json_error_t je;

	if (rq->in)
		return rq->in;
	if (rq->too_big) {
		fail(rq, 400, "invalid", "body larger than %zu bytes", rq->limit);
		return NULL;
	}
	rq->in = json_loadb(rq->body ? rq->body : "", rq->len, JSON_REJECT_DUPLICATES, &je);
	if (!rq->in)
		fail(rq, 400, "invalid", "body is not JSON: %s", je.text);
	return rq->in;
}

bool
peer_gone(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	char c;

	return ci && recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void
nap(int64_t ms, struct MHD_Connection *conn)
{
	int64_t end = mono_ms() + ms;
	struct timespec slice = { 0, 20 * 1000 * 1000 };

	while (mono_ms() < end && !atomic_load(&dsp.stopping)) {
		if (conn && peer_gone(conn))
			return;
		nanosleep(&slice, NULL);
	}
}

/* libmicrohttpd's own messages, routed through say(). */
__attribute__((format(printf, 2, 0)))
static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[1024];
	size_t n;

	vsnprintf(line, sizeof line, fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	say("mhd: %s", line);
}

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

/* Does path match pat ("*" = one non-empty segment, copied to arg)? */
static bool
route_match(const char *pat, const char *path, char *arg, size_t argsz)
{
	size_t n;

	while (*pat && *path) {
		if (*pat == '*') {
			n = strcspn(path, "/");
			if (n == 0 || n >= argsz)
				return false;
			memcpy(arg, path, n);
			arg[n] = '\0';
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
		if (!route_match(routes[i].pattern, rq->path, rq->arg, sizeof rq->arg))
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
	} else if (is_admin_path(rq->path)) {
		rq->kind = RK_ADMIN;
		rq->limit = ADMIN_MAX;
	} else {
		rq->kind = RK_OTHER;
		rq->limit = V1_MAX;
	}
	rq->is_result = rq->kind == RK_RESULT;
}

void
log_request(struct req *rq, int status)
{
	char code[16] = "-";

	if (status > 0)
		snprintf(code, sizeof code, "%d", status);
	say("%s %s %s %" PRId64 "ms%s%s", rq->method, rq->path, code, mono_ms() - rq->t0,
	    rq->fault.kind ? " fault=" : "", rq->fault.kind ? fault_name(rq->fault.kind) : "");
}

enum MHD_Result
send_text(struct req *rq, int status, char *text, size_t len)
{
	struct MHD_Response *resp = text ?
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE) : NULL;
	enum MHD_Result r;

	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (status == 405)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rq->allow);
	if (rq->retry_after_s > 0) {
		char s[16];

		snprintf(s, sizeof s, "%d", rq->retry_after_s);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, s);
	}
	r = MHD_queue_response(rq->conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	log_request(rq, status);
	return r;
}

enum MHD_Result
respond(struct req *rq, int status)
{
	char *text = json_dumps(rq->out ? rq->out : json_object(), JSON_COMPACT);

	return send_text(rq, status, text, text ? strlen(text) : 0);
}

int
dispatch(struct req *rq)
{
	if (rq->route)
		return rq->route->fn(rq);
	if (rq->allow[0])
		return fail(rq, 405, "method_not_allowed", "%s does not allow %s", rq->path, rq->method);
	return fail(rq, 404, "not_found", "no such endpoint '%s'", rq->path);
}

/*
 * The gate.  A limit on the requests it may refuse in flight, adapted from
 * the latency of results (gate.c; --gate off: none), and two optional
 * caps: --max-inflight N (the limit is at most N) and --max-rate N (a token
 * bucket: N a second, a burst of a tenth of that).  Past either, a request
 * is answered 429 with Retry-After, unhandled; past the rate only, one
 * whose turn comes within --rate-wait-ms waits for it, parked, and is then
 * served: its client asks once instead of coming back — except heartbeats and
 * negotiations, which are never refused for load (a session must not
 * expire because its executor's deliveries were throttled), and the admin
 * endpoints.  The gate counts the requests it may refuse, each from its
 * first byte to its answer; /admin/stats counts every request.
 */
static struct {
	atomic_llong in_flight, max_in_flight, requests, gated_429, gated_rate, retry_after_max;
	atomic_llong gateable;   /* in flight and not exempt: what the gate counts */
	atomic_llong waiting;    /* parked: long polls waiting for an event */
	atomic_llong paced;      /* waited for a turn at --max-rate */
	atomic_llong paced_left; /* ... and whose client left before it */
	atomic_llong by_kind[RK_KINDS];
} stats;

/* The gate's memory, under mu: the bucket, and what it admitted and
 * refused in this 1-s window and the one before (for Retry-After). */
static struct {
	pthread_mutex_t mu;
	bool filled;             /* the bucket started full */
	double tokens;           /* below 0: turns given to waiting requests */
	int64_t refill_ms, window;
	int64_t admitted[2], refused[2];
	uint64_t rng;
} gate = { .mu = PTHREAD_MUTEX_INITIALIZER };

enum { SPREAD_MAX_S = 60 };   /* the longest spread Retry-After adds */

/* Is rq one the gate never refuses? */
static bool
gate_exempt(const struct req *rq)
{
	/* a session's close only lightens the load: never turned away */
	return rq->kind == RK_ADMIN || rq->kind == RK_NEGOTIATE || rq->kind == RK_HEARTBEAT ||
	    rq->kind == RK_CLOSE;
}

/* Raise *high to v if v is higher (a running maximum). */
static void
atomic_raise(atomic_llong *high, long long v)
{
	long long was = atomic_load(high);

	while (v > was && !atomic_compare_exchange_weak(high, &was, v))
		;
}

static void
gate_enter(struct req *rq)
{
	atomic_fetch_add(&stats.requests, 1);
	atomic_fetch_add(&stats.by_kind[rq->kind], 1);
	atomic_raise(&stats.max_in_flight, atomic_fetch_add(&stats.in_flight, 1) + 1);
	rq->gated = true;
	if ((rq->gateable = !gate_exempt(rq)))
		atomic_fetch_add(&stats.gateable, 1);
}

/* Put n tokens into the bucket, which holds a tenth of a second's worth
 * at most, and at least 1 (under gate.mu). */
static void
gate_add(double n)
{
	double burst = dsp.cfg.max_rate / 10.0 < 1 ? 1 : dsp.cfg.max_rate / 10.0;

	gate.tokens = !gate.filled || gate.tokens + n > burst ? burst : gate.tokens + n;
	gate.filled = true;   /* it starts full */
}

/* Move the 1-s windows and refill the bucket up to now (under gate.mu). */
static void
gate_advance(int64_t now)
{

	if (now / 1000 != gate.window) {
		bool next = now / 1000 == gate.window + 1;

		gate.admitted[1] = next ? gate.admitted[0] : 0;
		gate.refused[1] = next ? gate.refused[0] : 0;
		gate.admitted[0] = gate.refused[0] = 0;
		gate.window = now / 1000;
	}
	gate_add((double)(now - gate.refill_ms) * (double)dsp.cfg.max_rate / 1000.0);
	gate.refill_ms = now;
}

/*
 * The Retry-After of a refused request (under gate.mu): --retry-after plus
 * a random 0..spread seconds, the spread being the time the gate needs to
 * admit what it refused in the last two windows at its rate.  Refused
 * executors come back spread over the backlog the gate sees, not all a
 * second later.  The rate: --max-rate, else the most of what it admitted
 * in a window and what its limit lets through at the latency measured
 * (gate.c).  The admitted count alone undercounts at the start of a window
 * or after a quiet one: 54 s was told that way to a fleet the dispatcher
 * could have taken back in one.
 */
static int
gate_retry_after(int64_t limit)
{
	int64_t refused = gate.refused[0] + gate.refused[1], through = gate_rate(limit);
	int64_t rate = dsp.cfg.max_rate > 0 ? dsp.cfg.max_rate :
	    gate.admitted[1] > gate.admitted[0] ? gate.admitted[1] : gate.admitted[0];
	int64_t spread;

	if (dsp.cfg.max_rate <= 0 && through > rate)
		rate = through;
	spread = (refused + (rate > 0 ? rate : 1) - 1) / (rate > 0 ? rate : 1);

	if (spread > SPREAD_MAX_S)
		spread = SPREAD_MAX_S;
	gate.rng ^= gate.rng << 13;   /* xorshift64: jitter, not a secret */
	gate.rng ^= gate.rng >> 7;
	gate.rng ^= gate.rng << 17;
	return (int)(dsp.cfg.retry_after_s + (int64_t)(gate.rng % (uint64_t)(spread + 1)));
}

/* The ms until the bucket holds a whole token (under gate.mu). */
static int64_t
gate_turn_ms(void)
{
	return gate.tokens >= 1 ? 0 : (int64_t)((1 - gate.tokens) * 1000.0 / (double)dsp.cfg.max_rate) + 1;
}

/* Past the gate?  Then rq is answered 429 in the handler's place, with
 * rq->retry_after_s set.  Else *turn_ms is how long it waits for its turn
 * first (0: none): its token is taken now, so the bucket owes it. */
static bool
gate_closed(struct req *rq, int64_t *turn_ms)
{
	bool full, fast = false;

	int64_t limit = gate_limit();

	*turn_ms = 0;
	if (dsp.cfg.max_inflight > 0 && dsp.cfg.max_inflight < limit)
		limit = dsp.cfg.max_inflight;
	if (!rq->gateable)
		return false;
	pthread_mutex_lock(&gate.mu);
	if (!gate.rng)
		gate.rng = ((uint64_t)mono_ms() * 2654435761u ^ (uint64_t)getpid()) | 1;
	gate_advance(mono_ms());
	full = atomic_load(&stats.gateable) > limit;
	if (!full && dsp.cfg.max_rate > 0 && !(fast = (*turn_ms = gate_turn_ms()) > dsp.cfg.rate_wait_ms))
		gate.tokens -= 1;
	if (!full && !fast) {
		gate.admitted[0]++;
		pthread_mutex_unlock(&gate.mu);
		return false;
	}
	gate.refused[0]++;
	rq->retry_after_s = gate_retry_after(limit);
	pthread_mutex_unlock(&gate.mu);
	atomic_fetch_add(&stats.gated_429, 1);
	if (fast)
		atomic_fetch_add(&stats.gated_rate, 1);
	atomic_raise(&stats.retry_after_max, rq->retry_after_s);
	return true;
}

/* A request that waits for an event (a long poll) or for its turn is not
 * work in flight: parked, it leaves the in-flight count and the gate's.
 * The gate's count moves first when it leaves and last when it comes
 * back, so a reader who sees it waiting sees it out of the gate. */
void
http_park(struct req *rq, bool parked)
{
	long long d = parked ? -1 : 1;

	if (rq->gateable && parked)
		atomic_fetch_add(&stats.gateable, d);
	if (rq->gated)
		atomic_fetch_add(&stats.in_flight, d);
	atomic_fetch_add(&stats.waiting, -d);
	if (rq->gateable && !parked)
		atomic_fetch_add(&stats.gateable, d);
}

/* rq is answered (or dropped): it leaves the counts, once.  Called as soon
 * as its answer is queued, not only at libmicrohttpd's completion: a
 * client that has its answer may send the next request before the
 * completion runs on a loaded machine, and must not find the gate full of
 * a request already answered. */
static void
gate_leave(struct req *rq)
{
	if (rq->gated)
		atomic_fetch_sub(&stats.in_flight, 1);
	if (rq->gateable)
		atomic_fetch_sub(&stats.gateable, 1);
	rq->gated = rq->gateable = false;
}

void
http_stats_read(struct http_stats *out)
{
	out->in_flight = atomic_load(&stats.in_flight);
	out->waiting = atomic_load(&stats.waiting);
	out->max_in_flight = atomic_load(&stats.max_in_flight);
	out->requests = atomic_load(&stats.requests);
	out->gated_429 = atomic_load(&stats.gated_429);
	out->gated_rate = atomic_load(&stats.gated_rate);
	out->retry_after_max = atomic_load(&stats.retry_after_max);
	out->paced = atomic_load(&stats.paced);
	out->paced_left = atomic_load(&stats.paced_left);
	out->rate_queue_ms = 0;
	if (dsp.cfg.max_rate > 0) {
		pthread_mutex_lock(&gate.mu);
		gate_advance(mono_ms());
		out->rate_queue_ms = gate_turn_ms();
		pthread_mutex_unlock(&gate.mu);
	}
	for (int k = 0; k < RK_KINDS; k++)
		out->by_kind[k] = atomic_load(&stats.by_kind[k]);
}

/* A new request: copy method and path, route it, take a fault. */
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
	/* an /admin/ request without the admin token is refused before
	 * anything else: it takes no fault and reaches no handler */
	if (is_admin_path(rq->path) && (rq->denied = auth_admin(rq)))
		rq->limit = 0;
	else
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

/* Wait turn_ms for rq's turn at --max-rate, parked; false if its client
 * left meanwhile.  The turn of a client that left is given back to the
 * bucket: it would otherwise be a turn nobody is served in. */
static bool
wait_turn(struct req *rq, int64_t turn_ms)
{
	bool gone;

	atomic_fetch_add(&stats.paced, 1);
	http_park(rq, true);
	nap(turn_ms, rq->conn);
	http_park(rq, false);
	if ((gone = peer_gone(rq->conn))) {
		pthread_mutex_lock(&gate.mu);
		gate_add(1);
		pthread_mutex_unlock(&gate.mu);
		atomic_fetch_add(&stats.paced_left, 1);
	}
	return !gone;
}

/* The body is complete: count the report in flight, then serve it. */
static enum MHD_Result
req_finish(struct req *rq)
{
	const char *id = rq->is_result && body_json(rq) ?
	    json_string_value(json_object_get(rq->in, "run_id")) : NULL;
	char run_id[RUN_ID_MAX + 1] = "";
	enum MHD_Result r;
	int64_t turn_ms, t_us;
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
	} else if (turn_ms > 0 && !wait_turn(rq, turn_ms)) {
		log_request(rq, 0);   /* its client left while it waited: nobody to answer */
		r = MHD_NO;
	} else {
		t_us = gate_now_us();
		r = fault_serve(rq);
		/* the limit's sample: a result its handler served (a fault that
		 * answers in its place says nothing of the store's pace) */
		if (rq->kind == RK_RESULT && turn_ms == 0 &&
		    (rq->fault.kind == F_NONE || rq->fault.kind == F_DELAY))
			gate_sample(gate_now_us() - t_us, atomic_load(&stats.gateable));
	}
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
http_start(struct ek_err *e)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct MHD_Daemon *d;

	sa.sin_port = htons((uint16_t)dsp.cfg.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_ERROR_LOG, (uint16_t)dsp.cfg.port, NULL, NULL, on_request, NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)15,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	    MHD_OPTION_END);
	if (!d)
		ek_fail(e, EK_OSERR, "cannot listen on 127.0.0.1:%" PRId64, dsp.cfg.port);
	return d;
}
