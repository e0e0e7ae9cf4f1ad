/* runlog — see runlog.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runlog.h"
#include "text.h"

#define POLL_MS 100
#define LINE_MAX_BYTES 4096

/* Bytes of a line not yet printed (safe mode prints whole lines). */
struct carry {
	char buf[LINE_MAX_BYTES + 1];
	size_t n;
};

/* Is the run still to produce output: queued or started, no result yet? */
static int
run_pending(struct state *st, const char *run_id, bool *pending, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = ?1 "
	    "AND state IN ('queued', 'started')) AND NOT EXISTS (SELECT 1 FROM results "
	    "WHERE run_id = ?1) AND NOT EXISTS (SELECT 1 FROM receipts WHERE run_id = ?1)", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	if ((rc = db_step(&st->db, q, e)) == 1)
		*pending = sqlite3_column_int(q, 0) != 0;
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

static void
flush_line(struct carry *c, bool newline)
{
	char safe[LINE_MAX_BYTES + 1];

	c->buf[c->n] = '\0';
	fputs(text_safe(safe, sizeof safe, c->buf), stdout);
	if (newline)
		putchar('\n');
	c->n = 0;
}

/* Print n bytes: raw, or line by line made safe for a terminal. */
static void
emit(const char *b, size_t n, bool safe, struct carry *c)
{
	size_t i;

	if (!safe) {
		fwrite(b, 1, n, stdout);
		return;
	}
	for (i = 0; i < n; i++) {
		if (b[i] == '\n') {
			flush_line(c, true);
			continue;
		}
		c->buf[c->n++] = b[i];
		if (c->n == LINE_MAX_BYTES)
			flush_line(c, false);
	}
}

/* Copy fd to stdout until its current end. */
static int
drain(int fd, const char *name, bool safe, struct carry *c, struct ek_err *e)
{
	char b[65536];
	ssize_t n;

	while ((n = read(fd, b, sizeof b)) != 0) {
		if (n < 0 && errno == EINTR)
			return 0;   /* a signal: the caller looks at *stop */
		if (n < 0)
			return ek_fail(e, EK_IOERR, "out/%s: %s", name, strerror(errno));
		emit(b, (size_t)n, safe, c);
	}
	fflush(stdout);
	return ferror(stdout) ? ek_fail(e, EK_IOERR, "write error: %s", strerror(errno)) : 0;
}

static void
nap(void)
{
	struct timespec t = { 0, POLL_MS * 1000000L };

	nanosleep(&t, NULL);   /* a signal cuts it short, as it should */
}

/* Why there is nothing to print: no such run, or no such output. */
static int
no_output(struct state *st, const struct runlog *r, const char *name, struct ek_err *e)
{
	int known = db_exists(&st->db, "SELECT 1 FROM accepts WHERE run_id = ?1", r->run_id, NULL, e);

	if (known < 0)
		return -1;
	if (!known)
		return ek_fail(e, EK_NOINPUT, "run '%s': no such run (nothing was ever accepted under "
		    "that id here)", r->run_id);
	return ek_fail(e, EK_NOINPUT, "run '%s': no captured %s (out/%s): it wrote none, "
	    "or it was removed%s", r->run_id, r->err ? "stderr" : "stdout", name,
	    r->follow ? "" : ", or it has not written any yet (-f waits for it)");
}

/* Open the output file into *fd; while following a pending run, wait for
 * it (a guest's capture file is made on its first byte).  0 with *fd open;
 * 0 with *fd -1 when *stop ended the wait before there was anything to
 * print (not an error: the follow is over); or -1 (e filled). */
static int
open_output(struct state *st, const struct runlog *r, const char *name,
    volatile sig_atomic_t *stop, int *fd, struct ek_err *e)
{
	char rel[320];
	bool pending = false;

	*fd = -1;
	snprintf(rel, sizeof rel, "out/%s", name);
	for (;;) {
		if (r->follow && run_pending(st, r->run_id, &pending, e) < 0)
			return -1;
		if ((*fd = state_open_file(st, rel, O_RDONLY, 0, NULL)) >= 0)
			return 0;
		if (errno != ENOENT) {   /* again, to say why */
			*fd = state_open_file(st, rel, O_RDONLY, 0, e);
			return *fd < 0 ? -1 : 0;
		}
		if (*stop)
			return 0;
		if (!pending)
			return no_output(st, r, name, e);
		nap();
	}
}

int
runlog_dropped(struct state *st, const struct runlog *r, int64_t *dropped, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, r->err ?
	    "SELECT stderr_dropped FROM results WHERE run_id = ?1 UNION ALL "
	    "SELECT stderr_dropped FROM receipts WHERE run_id = ?1 UNION ALL "
	    "SELECT stderr_dropped FROM run_records WHERE run_id = ?1" :
	    "SELECT stdout_dropped FROM results WHERE run_id = ?1 UNION ALL "
	    "SELECT stdout_dropped FROM receipts WHERE run_id = ?1 UNION ALL "
	    "SELECT stdout_dropped FROM run_records WHERE run_id = ?1", e);
	int rc;

	*dropped = -1;
	if (!q)
		return -1;
	db_bind_text(q, 1, r->run_id);
	while ((rc = db_step(&st->db, q, e)) == 1 && *dropped < 0)
		if (sqlite3_column_type(q, 0) != SQLITE_NULL)
			*dropped = sqlite3_column_int64(q, 0);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
runlog_print(struct state *st, const struct runlog *r, volatile sig_atomic_t *stop,
    struct ek_err *e)
{
	char name[300];
	struct carry c = { .n = 0 };
	bool pending = false;
	int fd, rc;

	snprintf(name, sizeof name, "%s.%s", r->run_id, r->err ? "stderr" : "stdout");
	if (open_output(st, r, name, stop, &fd, e) < 0)
		return -1;
	if (fd < 0)
		return 0;   /* stopped before the file was there: nothing to print */
	for (;;) {
		/* Asked before the read: once it says finished, this read is the last. */
		if ((rc = r->follow ? run_pending(st, r->run_id, &pending, e) : 0) < 0 ||
		    (rc = drain(fd, name, r->safe, &c, e)) < 0)
			break;
		if (!r->follow || !pending || *stop)
			break;
		nap();
	}
	if (c.n)
		flush_line(&c, false);
	close(fd);
	return rc;
}
