/*
 * relay — the executor's half of an inspection a client asked through the
 * dispatcher's API (doc/protocol.md, "Inspections").  The dispatcher never
 * calls the executor: the executor fetches the inspections waiting for its
 * current session and posts one answer to each.  The answer itself is the
 * local lookup's (inspect.h); this module only carries it.
 *
 * Nothing here writes to the state directory, not even when the dispatcher
 * says the session is over: the next heartbeat ends it here.  Answers are
 * classified as client.h does (no answer, 429 and 5xx → EK_UNAVAILABLE;
 * 401/410 → EK_NOSESSION; anything else → EK_PROTOCOL), but for the 409 of
 * an inspection already answered.
 */
#ifndef EK_RELAY_H
#define EK_RELAY_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"
#include "session.h"

#define RELAY_MAX 32            /* inspections fetched at once */

/* The inspections waiting for session s, oldest first, at most RELAY_MAX:
 * *list is an array of objects whose inspection_id (insp- and 16 hex
 * digits, doc/protocol.md), run_id and session_id are strings — the run id and
 * session id exactly as the client sent them, for the lookup to judge.
 * 0, or -1 (a malformed list is EK_PROTOCOL). */
int relay_fetch(const struct session *s, const char *cred, int64_t timeout_ms,
    json_t **list, struct ek_err *e);

/* Post answer to inspection id of session s: 0 recorded, 1 it was
 * already answered (409: another relay was first), or -1. */
int relay_post(const struct session *s, const char *cred, const char *id, json_t *answer,
    int64_t timeout_ms, struct ek_err *e);

#endif
