/*
 * http — the dispatcher's HTTP below the handlers: the helpers every
 * handler answers with and works in (an error body, the JSON answer, the
 * request's body, its transaction on the store, a 500 for a store error),
 * sending an answer and its log line, the gate's admission and counters,
 * and listening on 127.0.0.1.  It names no handler: the route table and a
 * request's life through it are routes.c's, at the top.
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
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
#include "protocol.h"

#include "util.h"
#include "store.h"
#include "faults.h"
#include "gate.h"
#include "http.h"

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
	atomic_llong slot_waited, slot_waited_in;   /* waited past the limit; admitted so */
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

/* The waiters for a place in flight, woken when one frees. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t freed;
	atomic_int waiters;
} slot = { .mu = PTHREAD_MUTEX_INITIALIZER, .freed = PTHREAD_COND_INITIALIZER };

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

void
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

/* A place freed in flight: wake a waiter, if any (after the count fell). */
static void
slot_freed(void)
{
	if (atomic_load(&slot.waiters) > 0) {
		pthread_mutex_lock(&slot.mu);
		pthread_cond_signal(&slot.freed);
		pthread_mutex_unlock(&slot.mu);
	}
}

/* Take a place in the gate's count if it is below limit. */
static bool
slot_take(int64_t limit)
{
	long long n = atomic_load(&stats.gateable);

	while (n < limit)
		if (atomic_compare_exchange_weak(&stats.gateable, &n, n + 1))
			return true;
	return false;
}

/* rq is past the limit: wait up to --slot-wait-ms for a place, out of the
 * gate's count meanwhile.  True once it has one.  A result is served in a
 * millisecond or two, and a refusal sends its executor away for a second
 * or more (Retry-After): a short wait keeps the dispatcher busy where
 * refusals would leave it idle. */
static bool
slot_wait(struct req *rq, int64_t limit)
{
	int64_t end = mono_ms() + dsp.cfg.slot_wait_ms, left;
	struct timespec t;
	bool in;

	atomic_fetch_add(&stats.slot_waited, 1);
	atomic_fetch_sub(&stats.gateable, 1);
	pthread_mutex_lock(&slot.mu);
	atomic_fetch_add(&slot.waiters, 1);
	while (!(in = slot_take(limit)) && (left = end - mono_ms()) > 0 &&
	    !atomic_load(&dsp.stopping) && !peer_gone(rq->conn)) {
		/* woken by a freed place, or every 100 ms to see a stop or a
		 * client that left (pthread_cond_timedwait's clock: realtime) */
		clock_gettime(CLOCK_REALTIME, &t);
		left = left < 100 ? left : 100;
		t.tv_nsec += (long)left * 1000000L;
		t.tv_sec += t.tv_nsec / 1000000000L;
		t.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&slot.freed, &slot.mu, &t);
	}
	atomic_fetch_sub(&slot.waiters, 1);
	pthread_mutex_unlock(&slot.mu);
	if (in)
		atomic_fetch_add(&stats.slot_waited_in, 1);
	else
		atomic_fetch_add(&stats.gateable, 1);   /* back in the count, to be refused */
	return in;
}

/* Past the gate?  Then rq is answered 429 in the handler's place, with
 * rq->retry_after_s set.  Past the limit it first waits a moment for a
 * place (slot_wait()).  Else *turn_ms is how long it waits for its turn
 * first (0: none): its token is taken now, so the bucket owes it. */
bool
gate_closed(struct req *rq, int64_t *turn_ms)
{
	bool full, fast = false;

	int64_t limit = gate_limit();

	*turn_ms = 0;
	if (dsp.cfg.max_inflight > 0 && dsp.cfg.max_inflight < limit)
		limit = dsp.cfg.max_inflight;
	if (!rq->gateable)
		return false;
	full = atomic_load(&stats.gateable) > limit &&
	    (dsp.cfg.slot_wait_ms == 0 || !slot_wait(rq, limit));
	pthread_mutex_lock(&gate.mu);
	if (!gate.rng)
		gate.rng = ((uint64_t)mono_ms() * 2654435761u ^ (uint64_t)getpid()) | 1;
	gate_advance(mono_ms());
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

	if (rq->gateable && parked) {
		atomic_fetch_add(&stats.gateable, d);
		slot_freed();
	}
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
void
gate_leave(struct req *rq)
{
	if (rq->gated)
		atomic_fetch_sub(&stats.in_flight, 1);
	if (rq->gateable) {
		atomic_fetch_sub(&stats.gateable, 1);
		slot_freed();
	}
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
	out->slot_waited = atomic_load(&stats.slot_waited);
	out->slot_waited_in = atomic_load(&stats.slot_waited_in);
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

/* Wait turn_ms for rq's turn at --max-rate, parked; false if its client
 * left meanwhile.  The turn of a client that left is given back to the
 * bucket: it would otherwise be a turn nobody is served in. */
bool
gate_wait_turn(struct req *rq, int64_t turn_ms)
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

void
gate_served(int64_t rtt_us)
{
	gate_sample(rtt_us, atomic_load(&stats.gateable));
}

struct MHD_Daemon *
http_start(MHD_AccessHandlerCallback on_request, MHD_RequestCompletedCallback on_completed,
    struct ek_err *e)
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
