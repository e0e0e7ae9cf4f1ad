/* stopsig — see stopsig.h. */
#include <string.h>

#include "stopsig.h"

volatile sig_atomic_t stop_signal;
volatile sig_atomic_t stop_run_token;

static void
on_stop(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGUSR1 && si->si_code == SI_QUEUE && si->si_value.sival_int != stop_run_token)
		return;
	stop_signal = sig;
}

void
stopsig_catch(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_stop;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}
