/*
 * world — where an isolated guest may write (isolate.h; doc/security.md).
 *
 * By default a guest writes to its own things only:
 *
 *   - a private /tmp, /var/tmp and /dev/shm: each a fresh tmpfs of
 *     WORLD_TMP_SIZE in the guest's mount namespace, so that nothing it
 *     leaves there is seen outside (and nothing outside, such as another
 *     process's scratch files, is seen inside);
 *   - its working directory, when the run names one (never "/");
 *   - the devices a program writes to: /dev/null, /dev/zero, /dev/full,
 *     /dev/tty, /dev/random, /dev/urandom, /dev/ptmx and /dev/pts;
 *
 * and Landlock (ABI 1 or later) denies every other write: creating,
 * removing, renaming, linking or truncating a file, or opening one for
 * writing.  Reads and execution are not restricted by it.
 *
 * The operator (exec-run --guest-writable PATH, EXEC_GUEST_WRITABLE) and
 * the run's policy ("writable": [PATH...]) may widen it: each such path is
 * writable too, and one that lies in a private directory is bound back into
 * it (the real one, shared with the host).  A path that is or holds one of
 * the private directories makes that one shared: "/tmp" widened is the
 * host's /tmp.
 *
 * A run, or the operator for every run, may also give a guest no network:
 * a network namespace of its own with loopback only (policy "network":
 * "none", exec-run --guest-network none, EXEC_GUEST_NETWORK).  The
 * operator's none holds whatever the policy says.
 *
 * A struct world is made in the supervisor (world_add resolves each path)
 * and entered in the guest's child between fork and exec (world_private,
 * world_landlock): those two make system calls only and allocate nothing.
 *
 * Like the rest of libcommon, nothing here prints or exits.
 */
#ifndef EK_WORLD_H
#define EK_WORLD_H

#include <limits.h>
#include <jansson.h>
#include <stdbool.h>

#include "err.h"

#define WORLD_MAX 40                 /* writable paths of one guest */
#define WORLD_POLICY_MAX 16          /* of them, named by a run's policy */
#define WORLD_OPERATOR_MAX (WORLD_MAX - WORLD_POLICY_MAX - 1)   /* and by the operator */
#define WORLD_TMP_SIZE "256m"        /* each private tmpfs */

struct world {
	int n;
	bool no_network;             /* a network namespace with loopback only */
	char path[WORLD_MAX][PATH_MAX];   /* resolved, absolute */
};

/* An empty w: private directories and devices only. */
void world_init(struct world *w);

/* Add path (absolute) to what w may write, resolved: 1 added, 0 it does not
 * exist (nothing to widen) or is already there, -1 (e filled: not
 * absolute, unresolvable, or too many). */
int world_add(struct world *w, const char *path, struct ek_err *e);

/* Each path of list, separated by ':' (EXEC_GUEST_WRITABLE): 0, or -1. */
int world_add_list(struct world *w, const char *list, struct ek_err *e);

/* Add the paths of EXEC_GUEST_WRITABLE (the operator's, at most
 * WORLD_OPERATOR_MAX in all) and EXEC_GUEST_NETWORK: 0, or -1 (e filled). */
int world_from_env(struct world *w, struct ek_err *e);

/* Set EXEC_GUEST_WRITABLE to w's paths (unset it if none) and
 * EXEC_GUEST_NETWORK, for the processes we start: 0, or -1. */
int world_to_env(const struct world *w, struct ek_err *e);

/* A run's world, malloc'd: the operator's (op, may be NULL), the paths of
 * its policy's "writable" (those that exist), its working directory cwd
 * (NULL or "/": none), no network if op or the policy says so.  NULL when
 * out of memory. */
struct world *world_for_run(const struct world *op, json_t *policy, const char *cwd);

/* In the guest's child, with the privilege to (root, or in a user
 * namespace of its own): enter a network namespace of its own whose only
 * interface is loopback, up.  0, or -1 (errno).  System calls only. */
int world_no_network(void);

/* "none" or "host" (a policy's or the operator's "network"): 0, -1 else. */
int world_parse_network(const char *s, bool *none);

/* What failed in world_private (for isolate_step_name). */
enum world_step { WORLD_TMPFS = 1, WORLD_MKDIR, WORLD_BIND };

/* In the guest's child, in a mount namespace of its own (every mount
 * private): a fresh tmpfs over each private directory that w does not
 * share, then each path of w that lies in one bound back into it.  0, or -1
 * (errno; *step says what failed). */
int world_private(const struct world *w, int *step);

/* Make the directories of path that are missing, path included (mode
 * 0755): 0, or -1 (errno).  System calls only. */
int world_mkdirs(const char *path);

/* In the guest's child, after PR_SET_NO_NEW_PRIVS: enter a Landlock domain
 * of ABI abi that lets it write only where w says (when w is set and abi
 * >= 1) and, with scope_signals, signal no process outside it.  0, or -1
 * (errno). */
int world_landlock(const struct world *w, int abi, bool scope_signals);

/* Would world_landlock let w's guest write at path (absolute, resolved) or
 * beneath it: does a directory or device it may write lie over path or
 * beneath it? */
bool world_reaches(const struct world *w, const char *path);

/* The kernel's Landlock ABI, 0 if none. */
int world_landlock_abi(void);

#endif
