/*
 * client — JSON calls to the dispatcher's session endpoints (negotiate,
 * heartbeat, close, work feed, receipts), with one mapping from answers to
 * exit codes: no answer, 429 and 5xx → EK_UNAVAILABLE; 401/410, and a 404
 * unknown_session about the session the request names → the session is
 * over (EK_NOSESSION, *over names how); anything else unexpected →
 * EK_PROTOCOL.  Result reports go through deliver.h instead.
 */
#ifndef EK_CLIENT_H
#define EK_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "http.h"

#define CLIENT_TIMEOUT_MS 5000
/* The longest --timeout-ms a tool takes for one request: an hour. */
#define CLIENT_TIMEOUT_MAX_MS 3600000

/* The longest a work feed request waits for work (?wait_ms=, doc/protocol.md). */
#define FEED_WAIT_MAX 30000

/* What *over says when the dispatcher has no record of the session at
 * all (404 unknown_session): it lost its store, or was replaced. */
#define CLIENT_OVER_UNKNOWN "unknown"

/* Did the last client_call() make no connection at all (refused, no such
 * host)?  Then the dispatcher saw nothing of it. */
bool client_unreached(void);

/* Call base+path.  On a 2xx answer *out is the parsed object (caller
 * decrefs).  over (16 bytes, may be NULL) receives the session status when
 * the answer says the session is over. */
int client_call(const char *base, const char *method, const char *path, const char *cred,
    json_t *body, int64_t timeout_ms, json_t **out, char *over, struct ek_err *e);

/* The error of a reply that is not a 2xx answer (o: its parsed body or
 * NULL), classified as client_call() does; returns -1. */
int client_answer_error(const char *url, const struct http_reply *r, json_t *o, char *over,
    struct ek_err *e);

struct state;
struct session;
struct binding;

/* End session b here as the dispatcher said (over, from client_call()):
 * "unknown" is recorded as revoked.  0 or -1. */
int client_end_over(struct state *st, const struct binding *b, const char *over, struct ek_err *e);

/* Heartbeat the current session s at its dispatcher.  On success the beat
 * is recorded; when the dispatcher says the session is over, it is ended
 * here too (EK_NOSESSION).  0 or -1. */
int session_heartbeat(struct state *st, struct session *s, int64_t timeout_ms, struct ek_err *e);

/* As session_heartbeat; *pending receives how many inspections the
 * dispatcher holds for this session (exec-inspect relay answers them),
 * 0 when it does not say. */
int session_heartbeat_pending(struct state *st, struct session *s, int64_t timeout_ms,
    int64_t *pending, struct ek_err *e);

/* Make sure s is still the dispatcher's current session before starting
 * work, by asking it now: 0 only on its answer.  An unreachable dispatcher
 * is an error (EK_UNAVAILABLE) whatever lease the state stores, since a
 * restored copy of the state stores one too. */
int session_confirm(struct state *st, struct session *s, int64_t timeout_ms, struct ek_err *e);

#endif
