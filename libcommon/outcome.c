/*
 * outcome — see outcome.h.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "outcome.h"

void
outcome_describe(const struct guest_end *end, const char *program, int64_t timeout_ms,
    const char **outcome, int *code, char *msg, size_t n)
{
	int ws = end->wait_status;

	*code = guest_exit_code(end);
	if (end->why == GUEST_NOT_RUN) {
		*outcome = "exec_failed";
		*code = 126;
		snprintf(msg, n, "not run: %.440s", end->not_run);
	} else if (end->why == GUEST_EXEC_FAILED) {
		*outcome = "exec_failed";
		snprintf(msg, n, "cannot execute '%s': %s", program, strerror(end->exec_errno));
	} else if (end->why == GUEST_TIMEOUT) {
		*outcome = "timeout";
		*code = 124;
		snprintf(msg, n, "timed out after %lld ms", (long long)timeout_ms);
	} else if (end->why == GUEST_STOPPED) {
		*outcome = "cancelled";
		*code = 128 + SIGTERM;
		snprintf(msg, n, "%s", end->stop_signal == SIGUSR1 ? "cancelled" :
		    "cancelled: the supervisor was asked to stop");
	} else if (WIFSIGNALED(ws)) {
		*outcome = "killed";
		snprintf(msg, n, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
	} else {
		*outcome = "exited";
		snprintf(msg, n, "exited with status %d", WEXITSTATUS(ws));
	}
}
