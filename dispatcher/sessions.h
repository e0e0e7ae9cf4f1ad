/*
 * sessions — an executor's session: negotiation, heartbeat, close,
 * adoption; the session gate every session-bound request passes.
 */
#ifndef EK_DISPATCHER_SESSIONS_H
#define EK_DISPATCHER_SESSIONS_H

#include <stdbool.h>

#include "http.h"

struct sess {
	char incarnation[40], executor_id[40], cred_sha256[65], status[16];
};

/* Load session sid: 1 found, 0 unknown, -1 store error (rq->e). */
int sess_load(struct req *rq, const char *sid, struct sess *s);
/* Admit a request for session sid (and incarnation inc, if given): 0 if
 * current and the credential matches, else the error status (answer set).
 * unknown_401: an unknown session is 401 (results) rather than 404. */
int sess_gate(struct req *rq, const char *sid, const char *inc, bool unknown_401);

handler_fn h_negotiate, h_heartbeat, h_close, h_adopt;

#endif
