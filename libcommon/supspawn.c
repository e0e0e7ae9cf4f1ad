/* supspawn — see supspawn.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contain.h"
#include "err.h"
#include "runs.h"
#include "supspawn.h"

struct child_args {
	const struct supspawn *s;
	char *const *argv;
	int ready, fail;   /* fail: write end for the errno of a failed exec */
};

/* In the child, which may share our memory: system calls only. */
static void
child(void *arg)
{
	const struct child_args *a = arg;
	const struct supspawn *s = a->s;
	int err;

	contain_child_signals();
	if ((s->in >= 0 && dup2(s->in, STDIN_FILENO) < 0) ||
	    (s->log >= 0 && (dup2(s->log, STDOUT_FILENO) < 0 || dup2(s->log, STDERR_FILENO) < 0)))
		goto fail;
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (fcntl(a->ready, F_SETFD, 0) < 0)
		goto fail;
	setsid();
	execv(s->path, a->argv);
fail:
	err = errno;
	(void)!write(a->fail, &err, sizeof err);
	_exit(EK_OSERR);
}

pid_t
supspawn_start(const struct supspawn *s, const char *run_id, int ready)
{
	char budget[32], grace[32], maxout[32], quota[32], readyfd[32], slots[40];
	char *argv[28];
	struct child_args a = { s, argv, ready, -1 };
	struct contain none;
	int n = 0, fail[2], err;
	pid_t pid;

	snprintf(readyfd, sizeof readyfd, "%d", ready);
	snprintf(budget, sizeof budget, "%lld", s->budget_ms);
	snprintf(grace, sizeof grace, "%lld", s->grace_ms);
	snprintf(maxout, sizeof maxout, "%lld", s->max_output);
	if (s->quota < 0)
		snprintf(quota, sizeof quota, "auto");
	else
		snprintf(quota, sizeof quota, "%lld", s->quota);
	snprintf(slots, sizeof slots, "--slots=%lld", s->slots);
	argv[n++] = (char *)s->prog;
	argv[n++] = "--budget-ms", argv[n++] = budget;
	argv[n++] = "--grace-ms", argv[n++] = grace;
	argv[n++] = "--max-output", argv[n++] = maxout;
	argv[n++] = "--output-quota", argv[n++] = quota;
	argv[n++] = "--ready-fd", argv[n++] = readyfd;
	argv[n++] = "--isolation", argv[n++] = (char *)s->isolation;
	if (s->guest_user)
		argv[n++] = "--guest-user", argv[n++] = (char *)s->guest_user;
	if (s->require_isolation)
		argv[n++] = "--require-isolation";
	if (s->json)
		argv[n++] = "--json";
	if (s->chain)
		argv[n++] = "--chain", argv[n++] = slots;
	if (s->detached)
		argv[n++] = "--log-stamps";   /* its lines join a log */
	if (s->ended_fifo)
		argv[n++] = "--ended-fifo", argv[n++] = (char *)s->ended_fifo;
	argv[n++] = "supervise", argv[n++] = "--", argv[n++] = (char *)run_id;
	argv[n] = NULL;
	if (pipe2(fail, O_CLOEXEC) < 0)
		return -1;
	a.fail = fail[1];
	contain_init(&none);
	pid = contain_spawn(&none, child, &a, NULL);
	err = errno;
	close(fail[1]);
	if (pid >= 0 && read(fail[0], &err, sizeof err) == (ssize_t)sizeof err)
		fprintf(stderr, "%s: cannot execute '%s': %s\n", s->prog, s->path, strerror(err));
	close(fail[0]);
	errno = err;
	return pid;
}

bool
supspawn_await(int fd, const char *run_id, char *id, size_t n)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char word[RUN_ID_MAX + 2];
	ssize_t got = 0;

	if (poll(&p, 1, 10000) == 1)
		got = read(fd, word, sizeof word - 1);
	close(fd);
	if (got == 1 && word[0] == '1')
		snprintf(id, n, "%s", run_id);
	else if (got > 1 && word[0] == '2')
		snprintf(id, n, "%.*s", (int)(got - 1), word + 1);
	else
		return false;
	return true;
}

bool
supspawn_is_fifo(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode);
}

/* One line to the fifo at path, never waiting. */
static void
fifo_line(const char *path, const char *line, size_t n)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	struct stat sb;

	if (fd < 0)
		return;   /* its reader is gone (ENXIO), or the fifo (ENOENT) */
	if (fstat(fd, &sb) == 0 && S_ISFIFO(sb.st_mode))
		(void)!write(fd, line, n);   /* a full fifo (EAGAIN): its reader is far behind */
	close(fd);
}

void
supspawn_ended(const char *path)
{
	fifo_line(path, "\n", 1);
}

void
supspawn_ran(const char *path, bool ok)
{
	fifo_line(path, ok ? "o\n" : "f\n", 2);
}
