/* contain_reap — the subreaper's half of contain.h: become one, and end
 * every child a guest's descendants left us. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "contain.h"

int
contain_subreaper(struct ek_err *e)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) < 0)
		return ek_fail(e, EK_OSERR, "prctl PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	return 0;
}

/* The parent of process pid (a /proc entry name), from field 4 of its stat. */
static pid_t
parent_of(const char *pid)
{
	char path[64], buf[512], *p;
	int fd, ppid;
	ssize_t n;

	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "PID (COMM) STATE PPID ...": COMM may hold anything, ')' too. */
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

/* SIGKILL every child of ours; how many there were.  A child stays ours
 * (its pid cannot be reused) until we reap it, so the kill is safe. */
static int
kill_children(void)
{
	pid_t self = getpid();
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (isdigit((unsigned char)de->d_name[0]) && parent_of(de->d_name) == self) {
			kill((pid_t)atoi(de->d_name), SIGKILL);
			n++;
		}
	closedir(d);
	return n;
}

int
contain_reap_all(int64_t wait_ms, struct ek_err *e)
{
	struct timespec tick = { 0, 1000000L };
	int64_t until = mono_ms() + wait_ms;
	int left;
	pid_t r;

	for (;;) {
		while ((r = waitpid(-1, NULL, WNOHANG | __WALL)) > 0)
			;
		if (r < 0 && errno == ECHILD)
			return 0;
		/* Killing a child hands its own children to us: the next round. */
		if ((left = kill_children()) < 0)
			return ek_fail(e, EK_OSERR, "cannot list processes in /proc: %s", strerror(errno));
		if (mono_ms() >= until)
			return ek_fail(e, EK_TEMPFAIL, "%d descendant%s still alive %lld ms after the "
			    "guest ended", left, left == 1 ? "" : "s", (long long)wait_ms);
		nanosleep(&tick, NULL);
	}
}
