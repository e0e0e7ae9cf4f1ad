/*
 * runs — run specs, acceptance and execution rows.  lifecycle.h draws the
 * states; this module performs the run-side transitions.
 *
 * A run spec is one JSON object (doc/json.md, "run spec"):
 *   run_id, txn_id, program, args, [due_at, timeout_ms, env, cwd, policy]
 * Its identity is the run id; its content is the canonical form of the
 * object as submitted (sorted keys, compact), so the same line submitted
 * twice is recognised and a changed line is a conflict.
 */
#ifndef EK_RUNS_H
#define EK_RUNS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"
#include "session.h"
#include "state.h"

#define SPEC_LINE_MAX (1024 * 1024)

struct runspec {
	json_t *root;          /* the parsed object; fields below point into it */
	const char *run_id, *txn_id, *program, *cwd;
	json_t *args, *env, *policy;   /* NULL, as root, when the plain path read it */
	int64_t due_at;        /* -1 when absent: due at acceptance */
	int64_t timeout_ms;    /* 0 when absent */
	char *content;         /* canonical JSON, malloc'd */
	/* where args, env and policy are in content, each in its canonical
	 * form (length 0: absent): the execution row stores them so */
	struct { size_t off, len; } args_at, env_at, policy_at;
};

/* A run id is 1..128 bytes of [A-Za-z0-9._:-]. */
bool run_id_valid(const char *id);

/* Parse and validate one spec (len bytes, not NUL-terminated); EK_DATAERR
 * with the offending field named on failure. */
int runspec_parse(const char *buf, size_t len, struct runspec *rs, struct ek_err *e);
/* The plain path of runspec_parse() alone (runspec.c): 1 read (rs filled,
 * no JSON tree: root, args, env and policy NULL, the content's ranges
 * set), 0 not a plain spec (rs empty; runspec_parse() gives the answer). */
int runspec_parse_plain(const char *buf, size_t len, struct runspec *rs);
int runspec_from_json(json_t *obj, struct runspec *rs, struct ek_err *e);
void runspec_free(struct runspec *rs);

enum accept_outcome { ACCEPT_NEW, ACCEPT_DUPLICATE, ACCEPT_CONFLICT };

/* Acceptance of a batch: prepared statements reused across many runs,
 * inside one write transaction the caller holds. */
struct acceptor;
struct acceptor *acceptor_new(struct state *st, const struct binding *b, struct ek_err *e);
int acceptor_add(struct acceptor *a, const struct runspec *rs, enum accept_outcome *out,
    char *receipt, size_t n, struct ek_err *e);
/* Add the runs the acceptor took since the last call to the counter
 * 'accepted' (schema step 11), in the caller's transaction: once per batch,
 * before its commit, rather than by a trigger on every row (which cost 15%
 * of a batch accept).  0 or -1. */
int acceptor_count(struct acceptor *a, struct ek_err *e);
void acceptor_free(struct acceptor *a);

/* One execution row, as the supervisor needs it. */
struct run {
	char run_id[RUN_ID_MAX + 1];
	char *txn_id;
	struct binding b;
	char *program;
	json_t *args, *env, *policy;
	char *cwd;
	int64_t due_at, timeout_ms, started_at, cancel_at;
	char state[16];
	pid_t sup_pid, guest_pid;
	int64_t sup_start;
};

/* Load run_id: 1 found, 0 no execution row, -1 error. */
int run_load(struct state *st, const char *run_id, struct run *r, struct ek_err *e);
void run_free(struct run *r);

/* queued → started for r under its binding, only if that binding is
 * current and the run is not cancelled, with r's share memberships joined
 * in the same transaction (r->started_at set): 1 done, 0 not startable (or slots > 0 runs of
 * its session already started), -1 error (nothing changed).  The
 * start-marker commit point. */
int run_mark_started(struct state *st, struct run *r, pid_t sup_pid, int64_t sup_start,
    int slots, struct ek_err *e);
/* The same in the caller's write transaction (0 or 1 changes, -1 error).
 * slots > 0: only while fewer than slots runs of the binding are started. */
int run_mark_started_in(struct state *st, struct run *r, pid_t sup_pid, int64_t sup_start,
    int slots, struct ek_err *e);

/* Record the guest's pid (commit point after-spawn). */
int run_set_guest(struct state *st, const char *run_id, pid_t guest, struct ek_err *e);

/* How the supervisor's next commits are written (outside a transaction):
 * RUN_DURABLE (synced before the commit returns, db_durable()) or
 * RUN_LAZY (in WAL mode just as atomic and kept when the process is
 * killed, synced by the next durable commit or the close).  A power
 * loss keeps a prefix of the commits, so only the commits SPEC 3 orders
 * before an outside effect need be durable (lifecycle.h). */
enum run_commits { RUN_DURABLE, RUN_LAZY };
int run_commits(struct state *st, enum run_commits how, struct ek_err *e);

/* Delete the execution row of a run that has a result or a receipt (not
 * an unknown one): 0, or -1 (e filled).  run_delete_in() inside the
 * caller's write transaction; run_delete() in its own, none when the row
 * is gone already. */
int run_delete_in(struct state *st, const char *run_id, struct ek_err *e);
int run_delete(struct state *st, const char *run_id, struct ek_err *e);

/* Due queued runs of b, oldest first, up to limit: fn(run_id) per row. */
int run_each_due(struct state *st, const struct binding *b, int64_t now, int limit,
    int (*fn)(const char *run_id, void *), void *arg, struct ek_err *e);

/* Runs of b queued here and still startable (not handed back). */
int run_count_queued(struct state *st, const struct binding *b, int64_t *n, struct ek_err *e);

/* Of those, the runs due by `until` (epoch ms): what a queue bound counts
 * (exec-accept --prefetch), so that runs due far ahead fill no slot. */
int run_count_due_by(struct state *st, const struct binding *b, int64_t until, int64_t *n,
    struct ek_err *e);

/* Runs of b (NULL: of any session) in state started whose supervisor is
 * alive. */
int run_count_live(struct state *st, const struct binding *b, int *n, struct ek_err *e);

/* Settle started runs whose supervisor is gone: with a result, a run of the
 * current session loses its row (the result is retained) while a
 * quarantined run keeps it; without one, the run becomes unknown. */
int run_sweep(struct state *st, int *unknown, int *finished, struct ek_err *e);

/* What a cancel decided: a queued run is cancelled here; a started one is
 * signalled, and its supervisor chooses the result once the guest has
 * ended; a started one whose supervisor is gone became unknown. */
enum cancel_verdict { CANCEL_QUEUED, CANCEL_SIGNAL, CANCEL_UNKNOWN };

/* Cancel run_id for the current session, named sid, in one write
 * transaction that re-checks the session, the run's binding and (for a
 * started run) its supervisor's liveness, then marks cancel_at, or marks the
 * run unknown if the supervisor is gone.  Fills r (run_free it) and *v.
 * 0, or -1 with EK_NOSESSION (not the current session, or the run is
 * quarantined), EK_NOINPUT (no such row, or the run is already unknown). */
int run_cancel(struct state *st, const char *sid, const char *run_id, struct run *r,
    enum cancel_verdict *v, struct ek_err *e);

#endif
