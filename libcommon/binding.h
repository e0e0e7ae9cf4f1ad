/*
 * binding — control sessions and the bindings they give runs.
 *
 * A binding is (incarnation, session id).  At most one session is current
 * (a unique index says so).  Every row accepted under any other binding —
 * including the empty binding of rows older than bindings — is
 * quarantined: never started, never cancelled, never deleted, still read.
 */
#ifndef EK_BINDING_H
#define EK_BINDING_H

#include <stdbool.h>
#include <stdint.h>

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
};

bool binding_eq(const struct binding *a, const struct binding *b);

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

/* All sessions, oldest first; callback per row; stops on non-zero. */
int session_each(struct state *st, int (*fn)(const struct session *, void *), void *arg, struct ek_err *e);

#endif
