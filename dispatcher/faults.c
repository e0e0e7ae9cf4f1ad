/*
 * faults — failures injected on purpose, for the executor's tests.
 *
 * POST /admin/faults queues a fault of one kind for the next count
 * requests whose path starts with its path (default /v1/results); each
 * request takes one use of the first matching fault when it arrives, and
 * routes.c's fault hook then does what the kind says (only while some
 * fault is queued does a request look here at all: fault_any()):
 *
 *   delay      wait delay_ms, then serve as usual
 *   hang       wait delay_ms (default 60000) or until the client leaves,
 *              then close without an answer; the handler does not run
 *   reset      close without an answer; the handler does not run
 *   5xx, 429,  answer 503 unavailable, 429 overloaded or 400 invalid in
 *   4xx        the handler's place (kinds[] below); a 503 or 429 with
 *              delay_ms carries Retry-After: that many ms, in whole seconds
 *   drop_ack   run the handler, then close without its answer
 *   malformed  run the handler, then answer 200 with a broken body
 *   lie        answer status with body, verbatim, in the handler's place:
 *              a dispatcher that says anything at all (an id shaped "..",
 *              an escape sequence in a detail); with chunked, in chunks
 *              of a few bytes (Transfer-Encoding: chunked)
 *
 * A fault can also be queued at a point inside the dispatcher, named like
 * a path and taken there (fault_take_at()), never by a request:
 *
 *   /store/commit  a delay holds a group commit's batch (results.c),
 *                  recorded and uncommitted, delay_ms before its COMMIT
 *
 * A /v1/results request a fault kept from its handler is still kept in
 * `reports` (invariant 2), with the fault's name.
 *
 * This file is the queue only, below every other: the handlers queue
 * (admin.c) and take (results.c) faults, and the route layer serves them.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

#include "faults.h"

/* What each kind is called. */
static const char *const names[F_KINDS] = {
	[F_NONE] = "none", [F_DELAY] = "delay", [F_DROP_ACK] = "drop_ack", [F_5XX] = "5xx",
	[F_429] = "429", [F_RESET] = "reset", [F_MALFORMED] = "malformed", [F_HANG] = "hang",
	[F_4XX] = "4xx", [F_LIE] = "lie",
};

static struct {
	pthread_mutex_t mu;
	struct fault q[64];
	size_t n;
	atomic_bool any;         /* n > 0, read without the mutex */
} faults = { .mu = PTHREAD_MUTEX_INITIALIZER };

const char *
fault_name(int kind)
{
	return names[kind];
}

bool
fault_any(void)
{
	return atomic_load(&faults.any);
}

/* Take one of the first queued fault whose path matches: exactly, or as a
 * prefix of path when prefix is set. */
static struct fault
take(const char *path, bool prefix)
{
	struct fault f = { .kind = F_NONE };
	size_t i;

	if (!fault_any())
		return f;
	pthread_mutex_lock(&faults.mu);
	for (i = 0; i < faults.n; i++) {
		if (prefix ? strncmp(path, faults.q[i].path, strlen(faults.q[i].path)) != 0 :
		    strcmp(path, faults.q[i].path) != 0)
			continue;
		f = faults.q[i];
		if (--faults.q[i].count == 0) {
			memmove(faults.q + i, faults.q + i + 1, (faults.n - i - 1) * sizeof faults.q[0]);
			atomic_store(&faults.any, --faults.n > 0);
		}
		break;
	}
	pthread_mutex_unlock(&faults.mu);
	return f;
}

struct fault
fault_take(const char *path)
{
	struct fault none = { .kind = F_NONE };

	if (strcmp(path, PROTO_ADMIN "faults") == 0)
		return none;            /* faults can always be cleared */
	return take(path, true);
}

struct fault
fault_take_at(const char *point)
{
	return take(point, false);
}

/* The kind called name; F_NONE for no kind ("none" included). */
static int
kind_of(const char *name)
{
	int k;

	for (k = F_NONE + 1; name && k < F_KINDS; k++)
		if (strcmp(names[k], name) == 0)
			return k;
	return F_NONE;
}

/* A lie's status and body; NULL if valid, else why not. */
static const char *
lie_parse(json_t *in, struct fault *f)
{
	json_t *st = json_object_get(in, "status"), *body = json_object_get(in, "body");
	json_t *ch = json_object_get(in, "chunked");

	if (!json_is_integer(st) || json_integer_value(st) < 100 || json_integer_value(st) > 599)
		return "a lie needs a status from 100 to 599";
	if (!json_is_string(body) || json_string_length(body) >= sizeof f->body ||
	    strlen(json_string_value(body)) != json_string_length(body))
		return "a lie needs a body: a string without NUL, shorter than 2048 bytes";
	if (ch && !json_is_boolean(ch))
		return "chunked must be true or false";
	f->chunked = json_is_true(ch);
	f->status = (int)json_integer_value(st);
	snprintf(f->body, sizeof f->body, "%s", json_string_value(body));
	return NULL;
}

const char *
fault_parse(json_t *in, struct fault *f)
{
	json_t *c = json_object_get(in, "count"), *d = json_object_get(in, "delay_ms");
	json_t *p = json_object_get(in, "path");
	const char *kind = json_string_value(json_object_get(in, "kind")), *why;

	if (!json_is_object(in) || (f->kind = kind_of(kind)) == F_NONE)
		return "kind must be delay, drop_ack, 5xx, 429, reset, malformed, hang, 4xx or lie";
	if (f->kind == F_LIE && (why = lie_parse(in, f)))
		return why;
	if (c && (!json_is_integer(c) || json_integer_value(c) < 1))
		return "count must be a positive integer";
	if (d && (!json_is_integer(d) || json_integer_value(d) < 0))
		return "delay_ms must be a non-negative integer";
	if (p && (!json_is_string(p) || json_string_value(p)[0] != '/' ||
	    json_string_length(p) >= sizeof f->path))
		return "path must be a string starting with '/'";
	f->count = c ? json_integer_value(c) : 1;
	f->delay_ms = d ? json_integer_value(d) : f->kind == F_HANG ? 60000 : 0;
	snprintf(f->path, sizeof f->path, "%s", p ? json_string_value(p) : PROTO_RESULTS);
	return NULL;
}

int
fault_queue(const struct fault *f)
{
	bool full;

	pthread_mutex_lock(&faults.mu);
	full = faults.n == sizeof faults.q / sizeof faults.q[0];
	if (!full) {
		faults.q[faults.n++] = *f;
		atomic_store(&faults.any, true);
	}
	pthread_mutex_unlock(&faults.mu);
	return full ? -1 : 0;
}

size_t
fault_clear(void)
{
	size_t n;

	pthread_mutex_lock(&faults.mu);
	n = faults.n;
	faults.n = 0;
	atomic_store(&faults.any, false);
	pthread_mutex_unlock(&faults.mu);
	return n;
}
