/*
 * svlog — where a detached supervisor writes its lines: out/supervisors.log,
 * or, when its starter names a descriptor (exec-run start --log-fd N, as
 * exec-loop does with its own standard error), there, so that they join
 * the loop's activity log in one stream (the journal, under systemd).
 * Either way each line of a detached supervisor begins with the time.
 *
 * The log file is kept to about SVLOG_MAX bytes: a starter that finds it
 * larger when it opens it for its supervisors renames it to
 * supervisors.log.1 (replacing the one before) and starts a new one.  A
 * long chain keeps writing to the file it was given, so the bound is
 * about, not exact.
 */
#ifndef EK_SVLOG_H
#define EK_SVLOG_H

#include <stdbool.h>

#include "state.h"

enum { SVLOG_MAX = 1 << 20 };

#define SVLOG_FILE "supervisors.log"

/* The descriptor detached supervisors write their standard output and
 * error to: log_fd when it is not -1, else the log file (rotated past
 * SVLOG_MAX).  A log that cannot be opened is said on standard error, and
 * -1 returned: the supervisors run all the same. */
int svlog_open(struct state *st, int log_fd, const char *prog);

/* From now on (a detached supervisor) svlog_prefix() begins each line,
 * and svlog_shows() filters by $EXEC_LOG_LEVEL (unset: every line). */
void svlog_stamp_lines(void);

/* Whether $JOURNAL_STREAM names fd's device and inode: journald reads
 * it, and stamps and ranks each line itself (sd_journal_stream, sd-daemon(3)). */
bool svlog_journal(int fd);

/* A log level, syslog's priority: err, warning, notice, info, debug or
 * 3..7; -1 for anything else (NULL included). */
int svlog_level(const char *v);

/* Whether a line of priority prio (LOG_ERR..LOG_DEBUG) is written: always,
 * unless svlog_stamp_lines() was called, then up to the level. */
bool svlog_shows(int prio);

/* What begins a line of priority prio once svlog_stamp_lines() was called:
 * "<4>" when journald reads standard error (svlog_journal), else the time,
 * "2026-12-01T20:40:01+0000 "; before, "". */
const char *svlog_prefix(int prio);

/* A supervisor's diagnostic (a warning), "prog: line" after svlog_prefix(): on
 * stderr (the log, for a detached one), and to syslog too when that write
 * fails — a full disk must not silence the line that says the disk is full. */
void svlog_say(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Once its guest has run, what a supervisor writes must not be lost:
 * should the write of WHAT for run_id that failed with e be tried again?
 * When another process holds the write lock, or the disk is full (then the
 * state's reserve is given back first: reserve.h), after a pause, with one
 * line about every 5 s of waiting (db_wait_again).  A stop (stop_signal)
 * ends a wait for disk space: the run's own captured output is given back
 * to the disk (the result is worth more), and the write is tried again for
 * SVLOG_STOP_WAIT_MS at most. */
struct guest;

/* Output of guest g that was dropped: flagged beside run_id
 * (output_flag_truncated: out/RUN.truncated) and said in one line. */
void svlog_truncated(const struct state *st, const char *prog, const char *run_id,
    const struct guest *g);

#define SVLOG_STOP_WAIT_MS 5000

bool svlog_wait_again(struct state *st, struct db_wait *w, const char *prog, const char *run_id,
    const char *what, const struct ek_err *e);

#endif
