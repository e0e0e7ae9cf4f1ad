/*
 * state — the state directory: one directory per executor, mode 0700,
 * holding state.db (mode 0600) and out/ (bounded guest output).
 *
 * state_open() is the gate every tool passes: it refuses a directory that
 * others may read or write, a file that is not an execkit database, a
 * damaged database (reported, never repaired by deleting rows) and state
 * written by another package version (EK_VERSION, naming both versions).
 */
#ifndef EK_STATE_H
#define EK_STATE_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "db.h"
#include "err.h"

#define EK_APPLICATION_ID 0x45584b54   /* "EXKT" */

enum { STATE_CREATE = 1 };

struct state {
	char dir[PATH_MAX];
	char dbpath[PATH_MAX];
	struct db db;
	char executor_id[40];
	mode_t umask_orig;   /* the caller's umask, restored for guests */
};

/* Open (and with STATE_CREATE, create) the state directory dir. */
int state_open(struct state *st, const char *dir, int flags, struct ek_err *e);
void state_close(struct state *st);

/* path = dir/name; -1 if it does not fit. */
int state_path(const struct state *st, const char *name, char *buf, size_t n);

#endif
