/*
 * http — the dispatcher's HTTP below the handlers: a request, the helpers
 * every handler answers with and works in (its transaction on the store
 * among them), sending an answer, the gate's admission and counters,
 * listening.
 */
#ifndef EK_DISPATCHER_HTTP_H
#define EK_DISPATCHER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "err.h"
#include "faults.h"

/* What a request is, for the counters: the classes an operator of a fleet
 * tells apart (the executors' heartbeats, feeds and reports, the rest). */
enum req_kind { RK_HEARTBEAT, RK_NEGOTIATE, RK_FEED, RK_RESULT, RK_ADMIN, RK_CLOSE, RK_OTHER, RK_KINDS };

struct http_stats {
	int64_t by_kind[RK_KINDS];       /* requests since start, by enum req_kind */
	int64_t in_flight, max_in_flight, requests, gated_429;
	int64_t gated_rate;              /* of gated_429, refused by --max-rate */
	int64_t retry_after_max;         /* the longest Retry-After the gate told */
	int64_t waiting;                 /* parked: long polls, paced requests (not in flight) */
	int64_t paced;                   /* requests that waited for their turn at --max-rate */
	int64_t paced_left;              /* of paced, whose client left before its turn */
	int64_t rate_queue_ms;           /* how long a request arriving now waits for its turn */
	int64_t slot_waited;             /* requests that waited past the limit for a place */
	int64_t slot_waited_in;          /* of slot_waited, those that got one (not refused) */
};

/* The request counters since start (GET /admin/stats). */
void http_stats_read(struct http_stats *out);

struct route;

struct req {
	struct MHD_Connection *conn;
	char method[16], path[512], arg[200];   /* arg: the path's (last) "*" segment */
	char parent[200];                        /* the "*" segment before arg, if any */
	const struct route *route;
	char allow[64];                          /* methods the path supports */
	char *body;
	size_t len, cap, limit;
	bool too_big, rollback;
	int denied;                              /* /admin/ without the admin token: 401/403 */
	enum req_kind kind;                      /* what it is, for the counters and the gate */
	bool gated;                              /* counted in the stats' in-flight */
	bool gateable;                           /* ... and against --max-inflight */
	int retry_after_s;                       /* > 0: answer with Retry-After */
	json_t *in, *out;
	struct fault fault;
	struct ek_err e;
	int64_t t0;
};

typedef int handler_fn(struct req *rq);

/* Set rq->out to an error body; return status. */
int fail(struct req *rq, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Answer 410 session_over for a session in state status. */
int fail_over(struct req *rq, const char *status);
/* Answer 500 for the store error in rq->e; the transaction will roll back. */
int internal(struct req *rq);
/* A handler's transaction on the store (store_begin() and the like), each
 * failure answered 500: tx_begin() locks, begins a write and expires
 * lapsed leases; tx_read() begins a read; each 0, or -1 with 500 set.
 * tx_end() commits (or rolls back after an internal error, or ends a
 * read), unlocks, and returns the final status. */
int tx_begin(struct req *rq);
int tx_read(struct req *rq);
int tx_end(struct req *rq, int status);
/* Set rq->out to obj (NULL → 500); return status. */
int answer(struct req *rq, int status, json_t *obj);
/* The request body as JSON (parsed once); NULL with a 400 answer set. */
json_t *body_json(struct req *rq);
/* The token of the request's "Authorization: Bearer" header, or NULL. */
const char *req_bearer(struct req *rq);

/* Send rq->out with status. */
enum MHD_Result respond(struct req *rq, int status);
/* Send text (len bytes, freed here) with status as application/json. */
enum MHD_Result send_text(struct req *rq, int status, char *text, size_t len);
/* One log line per request (never a header, so never the credential). */
void log_request(struct req *rq, int status);

/* Has the client closed its end of the connection? */
bool peer_gone(struct MHD_Connection *conn);
/* Sleep up to ms in short slices; stop early on shutdown or, if conn is
 * given, when the client has gone. */
void nap(int64_t ms, struct MHD_Connection *conn);

/* The gate (see http.c), for a request's life (routes.c): rq arrives and
 * is counted; is it past the gate (answer 429 with rq->retry_after_s), or
 * must it wait *turn_ms for its turn first?  gate_wait_turn() waits,
 * false if its client left meanwhile; rq leaves the counts, once; a result
 * served took rtt_us (a sample of the adaptive limit, gate.c). */
void gate_enter(struct req *rq);
bool gate_closed(struct req *rq, int64_t *turn_ms);
bool gate_wait_turn(struct req *rq, int64_t turn_ms);
void gate_leave(struct req *rq);
void gate_served(int64_t rtt_us);

/* Take a waiting request out of the in-flight counts (parked), or put it
 * back. */
void http_park(struct req *rq, bool parked);

/* Start listening on 127.0.0.1:dsp.cfg.port with libmicrohttpd calling
 * on_request and on_completed (routes.c's); NULL with e filled. */
struct MHD_Daemon *http_start(MHD_AccessHandlerCallback on_request,
    MHD_RequestCompletedCallback on_completed, struct ek_err *e);

#endif
