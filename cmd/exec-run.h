/*
 * exec-run — internal to cmd/exec-run.c and cmd/run-cancel.c, never
 * included elsewhere: the options every command reads, the result line
 * they print, and the cancel command (run-cancel.c).
 */
#ifndef EK_EXEC_RUN_H
#define EK_EXEC_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "deliver.h"
#include "isolate.h"
#include "state.h"

#define EXEC_RUN_PROG "exec-run"

struct opts {
	const struct cli_command *cmd;
	const char *state_dir, *session, *run_id, *guest_user, *ended_fifo;
	char **ids;             /* cancel: its RUN_ID operands, nids of them */
	int nids;
	int64_t slots, budget_ms, grace_ms, max_output, output_quota, timeout_ms, ready_fd, log_fd;
	int json, wait, confirmed, require_isolation, chain, log_stamps;
	enum isolate_mode isolation;
	bool isolation_given;     /* by --isolation, not EXEC_ISOLATION */
	const char *isolation_word, *network;   /* --isolation, --guest-network */
	struct world *writable;   /* the operator's: --guest-writable, EXEC_GUEST_WRITABLE */
};

/* A chosen result and how its delivery went: one line (or a JSON record
 * "result") on stdout; message is the result's.  A detached supervisor
 * writes it only at its log level (info for a run that exited 0 and was
 * delivered, warning for any other). */
int print_delivery(const struct opts *o, const char *run_id, const char *outcome, int code,
    const char *message, const struct deliver_report *d);

/* The --ended-fifo path: a relative one is in the state directory. */
const char *ended_path(const struct opts *o);

/* Guests fall back to no isolation: say so once, on stderr, naming
 * run_id if given (run-supervise.c). */
void say_isolation(const struct isolate *iso, const char *run_id);

/* What a command returns, besides 0 and -1 (e filled), when it did its
 * work but the dispatcher refused a result it chose: the result's line
 * said so, and the exit status is EK_PROTOCOL, as exec-report's. */
enum { CMD_REFUSED = 1 };

/* exec-run supervise RUN_ID (run-supervise.c): the supervisor of one run,
 * and with --chain of the session's next due runs.  CMD_REFUSED when the
 * dispatcher refused a result it chose. */
int cmd_supervise(struct state *st, const struct opts *o, struct ek_err *e);

/* exec-run cancel RUN_ID...: each run of the session (o->session, or the
 * current one) in turn; a failure is said and the rest go on. */
int cmd_cancel(struct state *st, const struct opts *o, struct ek_err *e);

#endif
