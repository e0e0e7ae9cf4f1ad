/*
 * chain — a supervisor that, once its run is reported, takes the next due
 * run of its session itself (exec-run start --chain, which exec-loop
 * uses): no new process, no new database connection and no loop tick
 * between two runs of one slot.  The slot bound is checked in the start
 * marker's own transaction, so chains and starters together never run
 * more than --slots guests; `exec-run wait` (the loop's stop) ends every
 * chain, so that what is still queued is handed back, not started.
 */
#ifndef EK_CHAIN_H
#define EK_CHAIN_H

#include <stdbool.h>
#include <sys/types.h>

#include "err.h"
#include "runs.h"
#include "session.h"
#include "state.h"

/* Take the oldest due run of b and mark it started for this supervisor,
 * in one write transaction, while fewer than slots runs of b are started
 * and no stop was asked: 1 with *next loaded (the start-marker commit
 * point), 0 nothing to take, -1 error. */
int chain_next(struct state *st, const struct binding *b, int slots, pid_t sup_pid,
    int64_t sup_start, struct run *next, struct ek_err *e);

/* A started run's name in a cancel signal (sigqueue's value), so that a
 * cancel of a run this supervisor already finished is not taken for one
 * of the next run of its chain: never 0. */
int chain_token(int64_t started_at);

/* Hold (true) or deliver (false) SIGUSR1, the cancel, while the run it
 * would name changes. */
void chain_hold_cancels(bool hold);

/* Why run r could not be marked started by this session, as an error
 * (always -1): EK_NOSESSION when it is quarantined, else EK_TEMPFAIL. */
int chain_refusal(struct state *st, const struct run *r, struct ek_err *e);

/* Ask every chain to end after its current run (true), or allow them
 * again (false): the file out/chain.stop. */
int chain_stop(struct state *st, bool stop, struct ek_err *e);

#endif
