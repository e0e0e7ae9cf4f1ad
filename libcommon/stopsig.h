/*
 * stopsig — the signals that ask a supervisor to stop its guest: SIGUSR1
 * is a cancel (exec-run cancel), TERM, INT and HUP a stop.  A cancel is
 * queued with the token of the run it names (chain_token()): one meant
 * for a run this supervisor has finished must not end the next run of its
 * chain, so it is ignored unless the token is the run supervised now.
 */
#ifndef EK_STOPSIG_H
#define EK_STOPSIG_H

#include <signal.h>

/* The signal that asked us to stop, or 0. */
extern volatile sig_atomic_t stop_signal;
/* The token of the run supervised now (0 between runs). */
extern volatile sig_atomic_t stop_run_token;

/* Catch the four signals, without SA_RESTART: a poll wakes up. */
void stopsig_catch(void);

#endif
