/*
 * runlog — print or follow a run's captured output (out/RUN.stdout or
 * out/RUN.stderr), for `exec-inspect logs`.
 *
 * The file is opened with state_open_file(), never through a link.  When
 * safe is set (standard output is a terminal) every line goes through
 * text_safe() (text.h), so a guest cannot drive the operator's terminal;
 * otherwise the bytes pass unchanged, for a pipe or a file.
 *
 * Following ends by itself: once the run is no longer queued or started
 * without a result (it finished, became unknown, or is not stored), the
 * file is read to its end one last time and the follow is over.  *stop
 * (set by a signal handler) ends it early, cleanly.
 */
#ifndef EK_RUNLOG_H
#define EK_RUNLOG_H

#include <signal.h>
#include <stdbool.h>

#include "state.h"

struct runlog {
	const char *run_id;
	bool err;      /* out/RUN.stderr instead of out/RUN.stdout */
	bool follow;   /* -f */
	bool safe;     /* sanitize for a terminal */
};

/* 0, or -1: EK_NOINPUT when the run has no such output (and, following,
 * will never have), EK_IOERR on a read or write error. */
int runlog_print(struct state *st, const struct runlog *r, volatile sig_atomic_t *stop,
    struct ek_err *e);

/* How many bytes of r's stream the capture dropped past its bound (exec-run
 * --max-output), as its result, receipt or run record keeps it (schema
 * step 15): *dropped, or -1 when none of them says.  0 or -1 (e). */
int runlog_dropped(struct state *st, const struct runlog *r, int64_t *dropped, struct ek_err *e);

#endif
