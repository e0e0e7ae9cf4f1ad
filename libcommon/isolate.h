/*
 * isolate — keep a guest out of the state directory (SPEC 3, "guests are
 * contained"; doc/security.md holds the threat model).
 *
 * A supervisor decides once, at startup, how its guest is isolated
 * (isolate_resolve: the mechanism asked for, or with ISOLATE_AUTO the
 * strongest available, probed for real), then the guest's child process
 * enters it between fork and exec (isolate_enter).  The mechanisms:
 *
 *   user     --guest-user USER: the guest runs as USER (its groups, its
 *            home), which needs root or CAP_SETUID, CAP_SETGID and CAP_KILL
 *            (the supervisor must still end it).  The state directory is
 *            0700 of the executor's user: the guest can open nothing in it.
 *   userns   the guest runs in a user namespace of its own, mapping only
 *            the executor's uid and gid to themselves, with no capability
 *            left, and in a mount namespace of its own where an empty
 *            read-only tmpfs covers the state directory.  Processes outside
 *            its user namespace are beyond its ptrace access (/proc/PID/fd,
 *            environ, mem, root, cwd), whatever their dumpable flag.
 *   none     no isolation: the guest runs as the executor's user and can
 *            read the state directory.  Chosen only when asked for, or when
 *            ISOLATE_AUTO finds nothing else (the supervisor says so).
 *
 * Every guest gets PR_SET_NO_NEW_PRIVS.  With user and userns, where the
 * kernel has Landlock ABI 6 or later, the guest also runs in a Landlock
 * domain scoped for signals: it cannot signal any process outside it (its
 * supervisor, the loop, other guests).  The domain restricts no file access.
 *
 * The guest's limits file.  The real one, out/RUN_ID.limits, is in the
 * hidden tree.  With user and userns the supervisor makes the guest's view,
 * out/RUN_ID.guest/, a directory that holds only RUN_ID.limits, which every
 * publisher rewrites with the real one (shares.c).  userns binds that
 * directory, read-only, at <state>/out in the guest's mount namespace, so
 * EXEC_LIMITS_FILE keeps its path <state>/out/RUN_ID.limits; user hands the
 * guest a descriptor N of it, EXEC_LIMITS_FILE=/proc/self/fd/N/RUN_ID.limits
 * (the directory is searchable by others, its file readable: nothing above
 * it is).  Both follow each rewrite: it is a new file renamed into the
 * directory the guest sees.
 *
 * Like the rest of libcommon, nothing here prints or exits.
 */
#ifndef EK_ISOLATE_H
#define EK_ISOLATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "err.h"
#include "state.h"
#include "world.h"

/* Isolation cannot be what was asked: EX_CONFIG (78), the code it shares
 * with EK_VERSION (a configuration the tool refuses to run with). */
#define ISOLATE_REFUSED EK_VERSION

#define ISOLATE_VIEW_SUFFIX ".guest"   /* out/RUN_ID.guest/: the guest's view */
#define ISOLATE_GROUPS_MAX 64
#define ISOLATE_LANDLOCK_SIGNALS 6     /* the Landlock ABI that scopes signals */
/* The guest user of a root executor that names none, the first that
 * exists: a dedicated one, else nobody. */
#define ISOLATE_DEFAULT_USERS { "execkit-guest", "nobody" }

enum isolate_mode { ISOLATE_AUTO, ISOLATE_NONE, ISOLATE_USERNS, ISOLATE_USER };

struct isolate {
	enum isolate_mode mode;        /* resolved: NONE, USERNS or USER */
	bool fallback;                 /* NONE because AUTO found nothing else */
	bool newns;                    /* USER: we may make the guest a mount namespace (root) */
	bool default_user;             /* USER: chosen because we are root (ISOLATE_DEFAULT_USERS) */
	int landlock;                  /* the kernel's Landlock ABI, 0 if none */
	uid_t uid;                     /* USERNS: the executor's; USER: the guest user's */
	gid_t gid;
	gid_t groups[ISOLATE_GROUPS_MAX];   /* USER: its supplementary groups */
	int ngroups;
	char user[64];                 /* USER: its name */
	char home[PATH_MAX];           /* USER: its home directory */
	char why[512];                 /* fallback: why userns is not available */
};

/* "auto", "none", "userns", "user". */
const char *isolate_mode_name(enum isolate_mode m);

/* The mode named s: 0, or -1 if s names none. */
int isolate_parse_mode(const char *s, enum isolate_mode *m);

/* The modes' names, NULL-ended, in the order the tools' help names them
 * (their --isolation takes one). */
extern const char *const isolate_modes[];

/* Decide how guests of the state directory state_dir are isolated: want,
 * or with ISOLATE_AUTO the strongest available (user when guest_user is
 * set or we are root, else userns, else none).  A root executor whose
 * guests would otherwise run as root (AUTO, no guest_user) runs them as
 * the first of ISOLATE_DEFAULT_USERS that exists, or refuses: guests never
 * run as uid 0 outside a user namespace but when asked for (--isolation
 * none; userns keeps uid 0 inside one, without capabilities).  The probe of userns enters it for real in
 * a throwaway child.  0 (iso filled), or -1 (e filled; ISOLATE_REFUSED when
 * want is not available, or require is set and only none is). */
int isolate_resolve(enum isolate_mode want, const char *guest_user, bool require,
    const char *state_dir, struct isolate *iso, struct ek_err *e);

/* One line saying how guests are isolated (and, for none, what that lets
 * them do). */
void isolate_describe(const struct isolate *iso, char *buf, size_t n);

/* "out/RUN_ID.guest": -1 if it does not fit.  Inline, so that naming the
 * view (exec-inspect does) does not link the rest of isolation. */
static inline int
isolate_view_name(const char *run_id, char *buf, size_t n)
{
	return snprintf(buf, n, "out/%s%s", run_id, ISOLATE_VIEW_SUFFIX) >= (int)n ? -1 : 0;
}

/* Make run_id's view directory (user and userns; nothing for none):
 * 0, or -1 (e filled). */
int isolate_view_create(const struct state *st, const struct isolate *iso, const char *run_id,
    struct ek_err *e);

/* Remove run_id's view directory and what it holds, if it is there. */
void isolate_view_remove(const struct state *st, const char *run_id);

/* In the guest's child, after fork, before exec, with its descriptors in
 * place: enter iso.  w (world.h) is where the guest may write: its private
 * /tmp, /var/tmp and /dev/shm are mounted (userns; user where iso->newns)
 * and Landlock limits its writes to them and w's paths (user and userns;
 * NULL: neither, writes are not limited).  state_dir is hidden; view is the path of the guest's
 * view directory (userns); view_fd its descriptor, kept open for the guest
 * (user).  0, or -1 (errno set, *step = what failed, for
 * isolate_step_name).  Allocates nothing. */
int isolate_enter(const struct isolate *iso, const struct world *w, const char *state_dir,
    const char *view, int view_fd, int *step);

/* What step (from isolate_enter) failed, in words. */
const char *isolate_step_name(int step);

#endif
