/*
 * exec-session — internal to cmd/exec-session.c and cmd/session-compact.c,
 * never included elsewhere: the compact command (session-compact.c).
 */
#ifndef EK_EXEC_SESSION_H
#define EK_EXEC_SESSION_H

#include <stdbool.h>

#include "state.h"

/* exec-session compact: give the state's free pages back (retention.h)
 * and say how much, as a line or a JSON record. */
int session_compact(struct state *st, bool json, struct ek_err *e);

#endif
