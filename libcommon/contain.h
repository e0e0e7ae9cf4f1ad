/*
 * contain — end every process a guest started, in its process group or not.
 *
 * Two mechanisms, and the second always runs:
 *
 *   cgroup     where the caller's own cgroup v2 directory is writable, the
 *              guest gets a child cgroup of it; when the guest has ended,
 *              cgroup.kill ends everything in it at once (a process that
 *              forks faster than anyone can reap cannot escape it), then
 *              the empty cgroup is removed, or kept for the caller's next
 *              guest if it was left empty (contain_cgroup_end).
 *   subreaper  the caller is a child subreaper, so every orphaned
 *              descendant (setsid, a daemon's double fork) becomes its
 *              child; contain_reap_all() kills and reaps its children,
 *              round after round, until it has none left.
 *
 * Like the rest of libcommon, nothing here prints or exits: a function that
 * fails fills the struct ek_err and returns -1, and the caller decides what
 * a failure means (for a guest: fall back, say so once, never fail the run).
 */
#ifndef EK_CONTAIN_H
#define EK_CONTAIN_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define CONTAIN_PREFIX "execkit-"   /* names of the cgroups we create */

struct contain {
	int parent_fd;               /* our own cgroup's directory, or -1 */
	int dir_fd;                  /* the guest's cgroup directory, or -1: no cgroup */
	char name[NAME_MAX + 1];     /* its name under the parent */
	char path[PATH_MAX];         /* its full path, for messages */
	/* Where a limit's controller is only in a cgroup v1 hierarchy (pids,
	 * memory): a cgroup of the same name there, which the child joins. */
	int v1_parent[2], v1_procs[2];
};

/* A guest's resource limits (0: none), in its cgroup. */
struct contain_limits {
	int64_t pids_max;            /* processes and threads at once */
	int64_t memory_max;          /* bytes */
	/* Where a limit's controller is only in a v1 hierarchy: set it in the
	 * caller's own slot cgroup there, which the caller joins the first
	 * time and stays in, so that every guest it starts is born in it.
	 * Writing cgroup.procs takes a lock that waits for an RCU grace
	 * period: paid once per supervisor, not once per guest.  The caller
	 * counts in it (one more process; what it allocates after joining),
	 * and opts out of the kernel's OOM killer where it may. */
	bool slot;
};
#define CONTAIN_PIDS_MAX 1024             /* the defaults: doc/security.md */
#define CONTAIN_MEMORY_MAX (2LL << 30)

/* Apply l to c: in its cgroup v2 directory where the controller is
 * enabled there, else in a cgroup CONTAIN_PREFIX + name in the
 * controller's v1 hierarchy (the child joins it: contain_child_join), or
 * the caller's slot cgroup there (l->slot).  0 every limit
 * applied, or -1 (warn says which is not and why; the others are). */
int contain_limit(struct contain *c, const char *name, const struct contain_limits *l,
    struct ek_err *warn);

/* In the child, before it drops privileges: join c's v1 cgroups, and take
 * back the OOM score its supervisor gave up in a slot.  System calls
 * only. */
void contain_child_join(const struct contain *c);

/* An empty c: no cgroup, no descriptor. */
void contain_init(struct contain *c);

/* Make the caller a child subreaper (orphaned descendants become its
 * children): 0, or -1 (e filled). */
int contain_subreaper(struct ek_err *e);

/* The directory of the caller's own cgroup v2 (under the cgroup2 mount)
 * into dir: 0, or -1 (e says why there is none). */
int contain_cgroup_dir(char *dir, size_t size, struct ek_err *e);

/* Create cgroup CONTAIN_PREFIX + name under the caller's own cgroup v2 and
 * check that it can be killed as a whole: 0 (c holds it), or -1 (c empty, e
 * says why it is not available here).  The one contain_cgroup_end kept,
 * if it has that name, is taken instead. */
int contain_cgroup_create(struct contain *c, const char *name, struct ek_err *e);

/* Start fn(arg) in a new process, born in c's cgroup when c has one: its
 * pid, or -1 (errno).  fn must not return, and it runs with every signal
 * blocked and our handlers still set.  Where it can (x86-64, Linux 5.7), the
 * child shares our memory until it execs or exits, and we wait for that
 * (clone3 CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP): no page table is
 * copied, and we take no copy-on-write fault after it.  So fn only makes
 * system calls, writes nothing of ours but errno and what its caller puts
 * back, and then execs or _exits.  Else a copy of us runs fn, born in the
 * cgroup or, on an older kernel, moved there before fn runs (writing
 * cgroup.procs waits for an RCU grace period, 10 to 20 ms a guest): if that
 * move fails, warn says why and c is empty. */
pid_t contain_spawn(struct contain *c, void (*fn)(void *), void *arg, struct ek_err *warn);

/* In a child of contain_spawn that is about to exec: every signal back to
 * its default action, then none blocked, so that none of our handlers can
 * run in it. */
void contain_child_signals(void);

/* Move process pid into c's cgroup: 0, or -1 (e filled; the cgroup is
 * removed and c is empty). */
int contain_cgroup_enter(struct contain *c, pid_t pid, struct ek_err *e);

/* Kill everything in c's cgroup, wait at most wait_ms until it is empty,
 * remove it: 0 (also when c has no cgroup), or -1 (e filled).  c is empty
 * afterwards either way. */
int contain_cgroup_kill(struct contain *c, int64_t wait_ms, struct ek_err *e);

/* After a guest: where keep (the guest could not write to its cgroup) and
 * the guest left it empty, keep c's cgroup for this process's next
 * contain_cgroup_create of the same name, which takes it instead of
 * making one (a supervisor's chain: a cgroup's mkdir and rmdir were a
 * third of what isolating a guest costs, bench/README.md; a cgroup v2 cannot be
 * renamed); else contain_cgroup_kill.
 * One that was killed is never kept: on Linux 6.18 a child born with
 * CLONE_INTO_CGROUP into a cgroup that cgroup.kill was ever written to is
 * killed at birth.  The kept cgroup is removed at exit().  Its limits
 * stay as they were: contain_limit writes a guest's (all of them: a
 * guest's are never 0). */
int contain_cgroup_end(struct contain *c, bool keep, int64_t wait_ms, struct ek_err *e);

/* SIGKILL every child of the caller and reap it, round after round, until
 * none is left or wait_ms has passed: 0 none left, -1 (e says how many). */
int contain_reap_all(int64_t wait_ms, struct ek_err *e);

/* Close c's descriptors, leaving any cgroup where it is; c is empty after. */
void contain_close(struct contain *c);

#endif
