/*
 * session — control sessions, and the bindings they give runs.
 *
 * A binding is (incarnation, session id).  At most one session is current
 * (a unique index says so).  Every row accepted under any other binding —
 * including the empty binding of rows older than bindings — is
 * quarantined: never started, never cancelled, never deleted, still read.
 */
#ifndef EK_SESSION_H
#define EK_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "state.h"

struct binding {
	char incarnation[72];
	char session_id[72];
};

struct session {
	int64_t seq;
	struct binding b;
	char dispatcher[1024];
	char status[16];
	int64_t opened_at, ended_at, lease_ms, heartbeat_ms, last_beat_at;
	int64_t retry_after_at;   /* no delivery before (epoch ms; 0: none asked) */
};

/* In the caller's write: no result of b's session is sent before until
 * (epoch ms), as the dispatcher asked with Retry-After; a later wait only. */
int session_wait_in(struct state *st, const struct binding *b, int64_t until, struct ek_err *e);

bool binding_eq(const struct binding *a, const struct binding *b);

/* Bind b to parameters i (the incarnation) and i + 1 (the session id). */
void db_bind_binding(sqlite3_stmt *q, int i, const struct binding *b);

/* Run sql, a count whose ?1 and ?2 are b's incarnation and session id,
 * into *n.  0 or -1. */
int binding_count(struct state *st, const char *sql, const struct binding *b, int64_t *n,
    struct ek_err *e);

/* The current session: 1 found, 0 none, -1 error. */
int session_current(struct state *st, struct session *s, struct ek_err *e);

/* The current session, which must exist and, when sid is not NULL, must be
 * sid.  EK_NOSESSION otherwise. */
int session_require(struct state *st, const char *sid, struct session *s, struct ek_err *e);

/* Look up any session by binding: 1 found, 0 none, -1 error. */
int session_find(struct state *st, const struct binding *b, struct session *s, struct ek_err *e);

/* The credential of b, only while b is the current session. */
int session_credential(struct state *st, const struct binding *b, char *buf, size_t n, struct ek_err *e);

/* Make s (with credential) the current session; the previous current one
 * becomes 'replaced'.  One transaction. */
int session_begin(struct state *st, const struct session *s, const char *cred, struct ek_err *e);

/* End b with status (closed, revoked, expired, replaced) if it is current. */
int session_end(struct state *st, const struct binding *b, const char *status, struct ek_err *e);
/* The same inside a transaction the caller began. */
int session_end_in(struct state *st, const struct binding *b, const char *status, struct ek_err *e);

/* Record a successful heartbeat of b. */
int session_beat(struct state *st, const struct binding *b, struct ek_err *e);

/*
 * Adoption (schema/003_adoptions.sql).  A result may be delivered by the
 * session that accepted its run while that session is current, or by the
 * current session if it adopted that binding (explicitly, after the
 * dispatcher recorded the same adoption).
 */

/* SQL: the current session may deliver the results of table t's row (t has
 * incarnation and session_id columns): the row is bound to it, or to a
 * session it adopted.  The one definition of "not orphaned". */
#define SQL_DELIVERABLE_HERE(t) "EXISTS (SELECT 1 FROM sessions cs WHERE cs.status = 'current' " \
	"AND ((cs.incarnation = " t ".incarnation AND cs.session_id = " t ".session_id) " \
	"OR EXISTS (SELECT 1 FROM adoptions ad WHERE ad.incarnation = " t ".incarnation " \
	"AND ad.session_id = " t ".session_id AND ad.by_incarnation = cs.incarnation " \
	"AND ad.by_session_id = cs.session_id)))"

/* Who may deliver what b accepted: 1 with *s the current session when b is
 * current or adopted by it; 0 when nobody may (*s is b's session when this
 * state knows it, status "unknown" otherwise); -1 error. */
int session_authority(struct state *st, const struct binding *b, struct session *s, struct ek_err *e);

/* The bindings adopted by `by`, oldest adoption first, at most max. */
int session_adopted(struct state *st, const struct binding *by, struct binding *out, int max,
    int *n, struct ek_err *e);

/* Record that `by` adopted `old` (one transaction; again is a no-op). */
int session_adopt(struct state *st, const struct binding *old, const struct binding *by, struct ek_err *e);

/* All sessions, oldest first; callback per row; stops on non-zero. */
int session_each(struct state *st, int (*fn)(const struct session *, void *), void *arg, struct ek_err *e);

#endif
