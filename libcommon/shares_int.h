/*
 * shares_int — internal to shares.c and hooks.c, never included elsewhere:
 * what the publication (shares.c) hands to the notify hooks (hooks.c).
 * The contracts callers rely on are in shares.h.
 */
#ifndef EK_SHARES_INT_H
#define EK_SHARES_INT_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "shares.h"
#include "state.h"

/* One running program to publish: its limits, its hook. */
struct pub {
	const char *run_id;     /* into the rows */
	const char *notify;     /* into the rows; NULL: no hook */
	char *body;             /* limits file content, malloc'd */
	char path[PATH_MAX];
	pid_t pid;
};

/* Count a failure of what ("limits" or "notify") in note (NULL: nothing)
 * and keep the first SHARES_NOTE_MAX of them with their detail. */
void shares_note_fail(struct shares_note *note, const char *run_id, const char *what,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

struct contain;

/* Start p's hook (hookspawn.c, once shares_hooks_isolation is called):
 * 0, or -1 (why filled). */
extern int (*shares_hook_spawner)(struct state *st, struct pub *p, struct contain *cg, char *why,
    size_t whyn);

/* Run the hooks of pubs (not skip's) at once; wait SHARES_HOOK_MS for all,
 * then kill the rest.  Failures go to note; none is fatal. */
void shares_hooks_run(struct state *st, struct pub *pubs, size_t n, const char *skip,
    struct shares_note *note);

#endif
