/*
 * reserve — room on the disk kept for the one write that must not fail.
 *
 * A full disk while a guest runs must not cost its result (SPEC 3, "a
 * chosen result is never lost").  The state directory keeps a file of
 * RESERVE_BYTES, allocated on the disk in advance; a supervisor whose
 * result cannot be committed for want of space deletes it, which gives
 * SQLite the few pages the commit needs, and tries again.  The next
 * `exec-run start` makes the reserve anew once there is room.
 */
#ifndef EK_RESERVE_H
#define EK_RESERVE_H

#include <stdbool.h>

#include "err.h"
#include "state.h"

#define RESERVE_FILE "reserve"          /* in the state directory */
#define RESERVE_BYTES (4 * 1024 * 1024)

/* Make the reserve unless it is there: 0, or -1 (e filled; nothing left
 * behind: no room is not an error the caller has to act on). */
int reserve_ensure(const struct state *st, struct ek_err *e);

/* Give the reserve's room back to the disk: true when there was one. */
bool reserve_release(const struct state *st);

#endif
