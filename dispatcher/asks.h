/*
 * asks — settlement's questions: the dispatcher's own inspections about
 * an ended session's runs, asked through its executor's current session;
 * the count of those waiting.
 */
#ifndef EK_DISPATCHER_ASKS_H
#define EK_DISPATCHER_ASKS_H

#include <stdint.h>

#include "err.h"

/* At most this many inspections wait for one session's answer. */
enum { INSPECT_PENDING_MAX = 1024 };

/* How many inspections wait for session sid's answer (the clients' and
 * the dispatcher's own); -1 on error. */
int64_t inspections_pending(struct ek_err *e, const char *sid);

/* Ask, through current session sid, about the unsettled runs of its
 * executor's ended sessions (past --settle-after-ms), as far as the
 * pending caps allow; 0 or -1 with e filled. */
int settle_ask(struct ek_err *e, const char *sid);

#endif
