/* svlog — see svlog.h. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "output.h"
#include "runs.h"
#include "reserve.h"
#include "stopsig.h"
#include "svlog.h"

static bool stamping, journal;
static int level = LOG_DEBUG;   /* every line, unless $EXEC_LOG_LEVEL says (the loop does) */

/* Past SVLOG_MAX, under the log's lock: rename it to .1 if the path still
 * names the file we hold (another supervisor may have just done it), and
 * open a new one.  The descriptor to write to. */
static int
rotate(struct state *st, int fd, struct ek_err *e)
{
	struct stat held, named;

	if (st->out_fd < 0 || flock(fd, LOCK_EX) < 0)
		return fd;
	if (fstat(fd, &held) == 0 && held.st_size > SVLOG_MAX &&
	    fstatat(st->out_fd, SVLOG_FILE, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
	    named.st_ino == held.st_ino && named.st_dev == held.st_dev &&
	    renameat(st->out_fd, SVLOG_FILE, st->out_fd, SVLOG_FILE ".1") == 0) {
		close(fd);   /* drops the lock too */
		return state_open_file(st, "out/" SVLOG_FILE, O_WRONLY | O_CREAT | O_APPEND, 0600, e);
	}
	flock(fd, LOCK_UN);
	return fd;
}

int
svlog_open(struct state *st, int log_fd, const char *prog)
{
	struct ek_err e = { 0 };
	int fd;

	if (log_fd >= 0)
		return log_fd;
	if ((fd = state_open_file(st, "out/" SVLOG_FILE, O_WRONLY | O_CREAT | O_APPEND, 0600, &e)) >= 0)
		fd = rotate(st, fd, &e);
	if (fd < 0)
		ek_report(prog, &e);
	return fd;
}

bool
svlog_journal(int fd)
{
	const char *v = getenv("JOURNAL_STREAM");
	uintmax_t dev, ino;
	struct stat sb;
	char end;

	/* "DEV:INO" of the stream journald reads (sd_journal_stream's rule):
	 * set, but for another descriptor (a child's stderr redirected), it
	 * says nothing about this one. */
	return v && sscanf(v, "%ju:%ju%c", &dev, &ino, &end) == 2 && fstat(fd, &sb) == 0 &&
	    (uintmax_t)sb.st_dev == dev && (uintmax_t)sb.st_ino == ino;
}

int
svlog_level(const char *v)
{
	static const char *const names[] = { "err", "warning", "notice", "info", "debug" };
	size_t i;

	if (v && v[0] >= '0' + LOG_ERR && v[0] <= '0' + LOG_DEBUG && v[1] == '\0')
		return v[0] - '0';
	for (i = 0; v && i < sizeof names / sizeof names[0]; i++)
		if (strcmp(v, names[i]) == 0)
			return LOG_ERR + (int)i;
	return -1;
}

void
svlog_stamp_lines(void)
{
	int l = svlog_level(getenv("EXEC_LOG_LEVEL"));

	stamping = true;
	journal = svlog_journal(STDERR_FILENO);
	if (l >= 0)
		level = l;
}

bool
svlog_shows(int prio)
{
	return !stamping || prio <= level;
}

const char *
svlog_prefix(int prio)
{
	static char buf[48];
	time_t t;
	struct tm tm;

	if (!stamping)
		return "";
	if (journal) {
		snprintf(buf, sizeof buf, "<%d>", prio & LOG_PRIMASK);
		return buf;
	}
	t = time(NULL);
	if (!localtime_r(&t, &tm) || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z ", &tm) == 0)
		return "";
	return buf;
}

void
svlog_say(const char *prog, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (!svlog_shows(LOG_WARNING))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (fprintf(stderr, "%s%s: %s\n", svlog_prefix(LOG_WARNING), prog, line) < 0 || fflush(stderr) != 0)
		syslog(LOG_ERR, "%s", line);
}

void
svlog_truncated(const struct state *st, const char *prog, const char *run_id, const struct guest *g)
{
	char msg[512] = "";
	struct ek_err e = { 0 };
	int rc = output_flag_truncated(st, run_id, g, msg, sizeof msg, &e);

	if (rc != 0)
		svlog_say(prog, "run '%s': output truncated: %s%s%s", run_id, msg,
		    rc < 0 ? "; not flagged: " : "", rc < 0 ? e.msg : "");
}

/* A stop while the disk is full: run_id's captured output goes, said
 * once, so that its result finds room.  False once the stop has waited
 * SVLOG_STOP_WAIT_MS: give up. */
static bool
stop_while_full(struct state *st, struct db_wait *w, const char *prog, const char *run_id)
{
	static const char *const streams[] = { "stdout", "stderr" };
	char name[RUN_ID_MAX + 16];
	struct stat sb;
	long long freed = 0;
	size_t i;

	if (w->stop_at)
		return mono_ms() - w->stop_at < SVLOG_STOP_WAIT_MS;
	w->stop_at = mono_ms();
	for (i = 0; st->out_fd >= 0 && i < sizeof streams / sizeof streams[0]; i++) {
		snprintf(name, sizeof name, "%s.%s", run_id, streams[i]);
		if (fstatat(st->out_fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
		    unlinkat(st->out_fd, name, 0) == 0)
			freed += (long long)sb.st_size;
	}
	svlog_say(prog, "run '%s': asked to stop while the disk is full: gave its captured output "
	    "(%lld byte%s) back to the disk for its result, trying %d s more", run_id, freed,
	    freed == 1 ? "" : "s", SVLOG_STOP_WAIT_MS / 1000);
	return true;
}

bool
svlog_wait_again(struct state *st, struct db_wait *w, const char *prog, const char *run_id,
    const char *what, const struct ek_err *e)
{
	bool full = st->db.full, say_now;

	if (full && stop_signal && !stop_while_full(st, w, prog, run_id)) {
		svlog_say(prog, "run '%s': stopped: the disk is still full, its %s is not written: %s",
		    run_id, what, e->msg);
		return false;
	}
	if (!db_wait_again(&st->db, w, &say_now))
		return false;
	if (full && reserve_release(st))
		svlog_say(prog, "run '%s': the disk is full: released the state's reserve for its %s",
		    run_id, what);
	if (say_now)
		svlog_say(prog, "run '%s': %s waits for %s (%lld s): %s", run_id, what, full ? "disk space" :
		    "the write lock", (long long)(w->waited_ms / 1000), e->msg);
	return true;
}
