/*
 * bell — the work bell a waiting feed waits on: rung when runs become
 * queued, or a session ends.
 */
#ifndef EK_DISPATCHER_BELL_H
#define EK_DISPATCHER_BELL_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

/* Ring the work bell: runs became queued; a waiting feed looks again. */
void work_ring(void);
/* A session ended: every waiting feed looks again (its own gets its 410). */
void work_session_ended(void);
/* A feed waiting for work: how many sessions ended so far; register as a
 * waiter (in) before the first look, or leave; wait for a ring's token,
 * until ms pass, a session ends after the count ends, the dispatcher stops
 * or the peer hangs up (in slices, so that the last two are noticed): true
 * when this waiter took a token. */
unsigned bell_ends(void);
void bell_register(bool in);
bool bell_await(int64_t ms, unsigned ends, struct MHD_Connection *conn);

#endif
