/*
 * exec-session — internal to cmd/exec-session.c, cmd/session-compact.c and
 * cmd/session-show.c, never included elsewhere: the compact and show
 * commands.
 */
#ifndef EK_EXEC_SESSION_H
#define EK_EXEC_SESSION_H

#include <stdbool.h>

#include "state.h"

/* exec-session compact: give the state's free pages back (retention.h)
 * and say how much, as a line or a JSON record. */
int session_compact(struct state *st, bool json, struct ek_err *e);

/* exec-session show: what its options ask for. */
struct session_show_opts {
	int current, ids, json, wide;
	const char *columns;         /* -o: the columns, or NULL: all */
};
/* show's columns, in their order (-o names them): NULL-ended. */
extern const char *const session_show_columns[];

int session_show(struct state *st, const struct session_show_opts *so, struct ek_err *e);

#endif
