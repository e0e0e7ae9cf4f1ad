/* lockwait — see lockwait.h. */
#include <errno.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/time.h>

#include "clock.h"
#include "lockwait.h"

/* How often a blocked wait wakes to look at its deadline; also what saves
 * a wait whose first alarm came before flock() began to block. */
#define LOCK_WAIT_TICK_US 20000

static void
on_alarm(int sig)
{
	(void)sig;   /* only to interrupt flock() */
}

int
lock_wait(int fd, int op, int64_t until_ms)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old_sa;
	struct itimerval tick = { { 0, LOCK_WAIT_TICK_US }, { 0, LOCK_WAIT_TICK_US } }, old_tick;
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	sigset_t alrm, old_mask;
	int rc, err;

	if (flock(fd, op | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK || mono_ms() >= until_ms)
		return -1;
	/* No SA_RESTART: the alarm must end the blocked call. */
	sigemptyset(&sa.sa_mask);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigaction(SIGALRM, &sa, &old_sa);
	sigprocmask(SIG_UNBLOCK, &alrm, &old_mask);
	setitimer(ITIMER_REAL, &tick, &old_tick);
	while ((rc = flock(fd, op)) < 0 && errno == EINTR && mono_ms() < until_ms)
		;
	err = rc < 0 && errno == EINTR ? EWOULDBLOCK : errno;
	/* The timer off before the handler goes: no alarm may meet SIG_DFL. */
	setitimer(ITIMER_REAL, &off, NULL);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	if (old_tick.it_value.tv_sec || old_tick.it_value.tv_usec)
		setitimer(ITIMER_REAL, &old_tick, NULL);
	errno = err;
	return rc;
}
