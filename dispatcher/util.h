/*
 * util — the bottom of the dispatcher: its options and its stop (the one
 * state every layer reads), the run id's check, the log line.
 */
#ifndef EK_DISPATCHER_UTIL_H
#define EK_DISPATCHER_UTIL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* "exec-dispatcher", defined beside main. */
extern const char PROG[];

enum { MAX_CONNECTIONS = 256 };          /* also bounds the in-flight table */

struct config {
	int64_t port, lease_ms, heartbeat_ms;
	int64_t max_inflight;            /* the gate's cap: 0 = none (see http.c) */
	bool gate_off;                   /* --gate off: no adaptive limit (gate.c) */
	int64_t max_rate;                /* the gate's requests a second: 0 = none */
	int64_t retry_after_s;           /* the least a gated request is told to wait */
	int64_t rate_wait_ms;            /* past --max-rate, wait this long for a turn */
	int64_t slot_wait_ms;            /* past the limit, wait this long for a place */
	int64_t settle_after_ms;         /* ask about an ended session's runs this long after */
	int64_t abandon_after_ms;        /* abandon them, unsettled, this long after */
	int64_t heartbeat_nice;          /* a heartbeat's thread's nice, if it may be raised */
	const char *port_file, *store, *incarnation;
	const char *admin_token_file;    /* NULL: STORE.admin-token, made at first start */
	bool quiet;
};

/* The server's state: one instance, defined beside main.  Its store is
 * store.c's own (dsp_store, store.h). */
struct dispatcher {
	struct config cfg;               /* set before the server starts, then read-only */
	atomic_bool stopping;            /* set once, when a stop signal arrives */
	int beat_nice;                   /* the nice heartbeats get (routes.c), set at start */
};

extern struct dispatcher dsp;

/* Is s a run id: 1..RUN_ID_MAX bytes of [A-Za-z0-9._:-]? */
bool is_run_id(const char *s);

/* Print "exec-dispatcher: ..." on stderr unless --quiet. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same, --quiet or not: what the operator must hear at start. */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
