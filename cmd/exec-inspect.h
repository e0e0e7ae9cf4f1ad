/*
 * exec-inspect — internal to cmd/exec-inspect.c, cmd/inspect-list.c and
 * cmd/inspect-summary.c, never included elsewhere: the options every
 * command reads, the list command (inspect-list.c: the views that fit the
 * terminal) and the summary (inspect-summary.c).
 */
#ifndef EK_EXEC_INSPECT_H
#define EK_EXEC_INSPECT_H

#include <stdint.h>

#include "state.h"

#define EXEC_INSPECT_PROG "exec-inspect"

struct opts {
	const struct cli_command *cmd;
	const struct relay_ctx *relay;   /* relay: read by main before the guard */
	const char *state_dir, *session, *arg, *output, *columns, *outcome, *prefix;
	int64_t timeout_ms, since_ms, limit;
	int json, ids, utc, err, follow, wide, no_headings, reverse, failed;
	char sep;
};

/* exec-inspect summary (inspect-summary.c): the counts, and the current
 * session, its dispatcher, its last heartbeat and whether a loop runs. */
int cmd_summary(struct state *st, const struct opts *o, struct ek_err *e);

/* exec-inspect list KIND: a table that fits the terminal (table.h), run
 * ids (--ids, -0) or JSON Lines, in the order and number asked. */
int cmd_list(struct state *st, const struct opts *o, struct ek_err *e);

#endif
