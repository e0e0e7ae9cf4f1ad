/*
 * shares — the bandwidth each running program may use, per dimension.
 *
 * A dimension is the executor as a whole ("executor") or one destination
 * ("dest:NAME").  Each has a capacity in bytes/s (none set: no limit).  A
 * running program is a member of the executor dimension and of each
 * destination its policy declared, with the policy's weight (default 1).
 * Its share of a dimension is capacity × weight / Σ weights of the members,
 * rounded down (doc/shares.md has the rule and a worked example).
 *
 * Every share is cached per (run, dimension) and stamped with the
 * generation of its dimension; schema/002_shares.sql bumps a dimension's
 * generation when its capacity changes or a program joins or leaves it,
 * and only then.  A share is recomputed when it is read stale, alone:
 * reading one share never refreshes, or forgets, another.
 *
 * Publication: after a change, every running program of the changed
 * dimensions gets its limits file, <state>/out/RUN_ID.limits (the
 * EXEC_LIMITS_FILE of its guest), rewritten atomically, and its policy's
 * "notify" hook run.  Publishers take out/limits.lock, so the last file
 * written always reflects the newest committed state.
 *
 *   {"run_id":"r1","executor_bps":500,"destinations":{"a":250},"generation":7}
 *
 * (null = no limit; generation = Σ of the run's dimension generations, so it
 * rises whenever any of its shares may have changed.)
 */
#ifndef EK_SHARES_H
#define EK_SHARES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "runs.h"
#include "state.h"

#define SHARE_DIM_MAX (5 + RUN_ID_MAX)            /* "dest:" + a name */
#define SHARE_CAPACITY_MAX 9007199254740991LL     /* 2^53 - 1: exact in any JSON */
#define SHARE_UNLIMITED (-1)                      /* no capacity set */
#define SHARE_WEIGHT_UNIT 1000000                 /* weights are kept in millionths */
#define SHARES_HOOK_MS 2000                       /* all hooks of one change, at most */
#define SHARES_NOTE_MAX 8

/* flags */
enum { SHARES_NO_PUBLISH = 1 };   /* change the tables only (bulk loading, benchmarks) */

struct share {
	char run_id[RUN_ID_MAX + 1];
	char dimension[SHARE_DIM_MAX + 1];
	int64_t share;          /* bytes/s, or SHARE_UNLIMITED */
	int64_t capacity;       /* bytes/s, or SHARE_UNLIMITED */
	int64_t weight;         /* this run's, in millionths */
	int64_t total_weight;   /* Σ of the dimension's, in millionths */
	int64_t generation;     /* of the dimension, that the share was computed at */
	bool recomputed;        /* this read recomputed it (it was stale) */
};

struct share_dim {
	char dimension[SHARE_DIM_MAX + 1];
	int64_t capacity;       /* or SHARE_UNLIMITED */
	int64_t generation, members, total_weight;
};

/* What a publication did, for the caller to report; failures never undo it. */
struct shares_note {
	int rewritten;          /* limits files written */
	int notified;           /* hooks that exited 0 */
	int files_failed, hooks_failed;
	int nfail;              /* entries in fail[] (the first SHARES_NOTE_MAX) */
	struct {
		char run_id[RUN_ID_MAX + 1];
		char what[8];           /* "limits" or "notify" */
		char detail[256];
	} fail[SHARES_NOTE_MAX];
};

/* "executor" or "dest:NAME" with NAME a valid destination name. */
bool share_dimension_valid(const char *dimension);

/* Join run_id to the executor dimension and each destination of policy
 * (may be NULL) in one write transaction, then publish: the run's own
 * limits file is written (failure: -1) and the other members of those
 * dimensions get theirs rewritten.  Joining twice changes nothing. */
int shares_join(struct state *st, const char *run_id, json_t *policy, int flags,
    struct shares_note *note, struct ek_err *e);

/* shares_join in two halves, so a caller can join in its own write
 * transaction: the memberships (in the caller's write; 0 or -1), then,
 * after the commit, the publication (the run's own limits file: -1 if it
 * could not be written). */
int shares_join_in(struct state *st, const char *run_id, json_t *policy, struct ek_err *e);
int shares_publish_joined(struct state *st, const char *run_id, json_t *policy, int flags,
    struct shares_note *note, struct ek_err *e);

/* Leaving, in two steps as joining: the memberships deleted (in the
 * caller's write: result_choose() leaves in its commit; 0 or -1), their
 * dimensions appended to left; then, after the commit, the remaining
 * members of those dimensions published and the run's limits file
 * removed.  A run that was no member: nothing to do, 0. */
int shares_leave_in(struct state *st, const char *run_id, json_t *left, struct ek_err *e);
int shares_left(struct state *st, const char *run_id, json_t *left, int flags,
    struct shares_note *note, struct ek_err *e);

/* Set the capacity of dimension (SHARE_UNLIMITED removes it) in one write
 * transaction; *generation (may be NULL) gets the dimension's generation.
 * Then publish every member of that dimension, hooks included. */
int shares_set_capacity(struct state *st, const char *dimension, int64_t capacity, int flags,
    int64_t *generation, struct shares_note *note, struct ek_err *e);

/* One share, recomputed (only it) if stale.  EK_NOINPUT: run_id has no
 * shares (not running); EK_NODEST: it did not declare that destination. */
int shares_read(struct state *st, const char *run_id, const char *dimension, struct share *out,
    struct ek_err *e);

/* Every share of dimension (NULL: of every dimension), by run id: the stale
 * ones among them are recomputed in one write transaction, then fn is
 * called for each (a non-zero return stops the walk and is returned). */
int shares_list(struct state *st, const char *dimension, int (*fn)(const struct share *, void *),
    void *arg, struct ek_err *e);

/* Every dimension with its capacity, generation and members, by name. */
int shares_dims(struct state *st, int (*fn)(const struct share_dim *, void *), void *arg,
    struct ek_err *e);

/* <state>/out/RUN_ID.limits; -1 if it does not fit. */
int shares_limits_path(const struct state *st, const char *run_id, char *buf, size_t n);

/* This process runs notify hooks (none until it calls this), isolated as
 * iso says (a supervisor's guests' isolation); with iso NULL, resolved
 * (EXEC_ISOLATION, else auto) when it first runs one.  Hooks run only when
 * allowed (EXEC_ALLOW_HOOKS) and, without isolation, only with
 * EXEC_UNISOLATED_HOOKS=1 (hooks.c). */
struct isolate;
void shares_hooks_isolation(const struct isolate *iso);

/* Allow the hook at path (absolute, no ':'): added to EXEC_ALLOW_HOOKS, for
 * this process and those it starts.  0, or -1 (e filled). */
int shares_allow_hook(const char *path, struct ek_err *e);

#endif
