/*
 * lockwait — wait for an flock(2) in the kernel, with a deadline.
 *
 * A waiter blocked in flock() is woken the moment the holder lets go; one
 * that polls with LOCK_NB sleeps past the release (SQLite's busy handler
 * does, a millisecond or more a try, for transactions that hold the lock a
 * tenth of that).  flock() has no timeout: a repeating SIGALRM interrupts
 * the wait so that the deadline is checked.  For single-threaded programs
 * that use neither SIGALRM nor ITIMER_REAL themselves (the state tools).
 */
#ifndef EK_LOCKWAIT_H
#define EK_LOCKWAIT_H

#include <stdint.h>

/* Take an flock on fd (op: LOCK_EX or LOCK_SH), waiting until the
 * monotonic time until_ms (clock.h, mono_ms()) at most.  0: taken; -1: not
 * (errno EWOULDBLOCK when the deadline passed, else flock's own). */
int lock_wait(int fd, int op, int64_t until_ms);

#endif
