/*
 * guest — spawn one guest program and supervise it to its end.
 *
 * The guest runs directly (program + args, no shell) in its own process
 * group, with a clean environment that names only its own things
 * (EXEC_RUN_ID, EXEC_TXN_ID, EXEC_LIMITS_FILE, PATH, HOME, then the spec's
 * env: never the state directory), stdin from /dev/null, and stdout/stderr
 * captured through pipes into files that keep at most max_output bytes
 * each.  The capture files are new files of the state directory
 * (state_open_file: never through a link), made when the first byte comes:
 * a guest that writes nothing to one leaves no file, and a run costs no
 * file it does not need.  Their names are checked free before the fork, so
 * a planted link still keeps the guest from running; one that cannot be
 * made later loses that output only (said in g->warn).  The guest gets
 * pipes, no path.  guest_wait() ends it on timeout or on request: SIGTERM to
 * the group, SIGKILL after the grace period.
 *
 * Isolation (isolate.h): between fork and exec the child enters the
 * isolation its spec names (always PR_SET_NO_NEW_PRIVS), and its world
 * (world.h): where it may write, the operator's writable paths, the run's
 * policy's and its working directory added.  If it cannot, the guest does
 * not run: guest_spawn() fails and says which step failed.
 *
 * Containment (contain.h): guest_spawn() makes the caller a child subreaper
 * and, where the caller's cgroup v2 directory is writable, starts the guest
 * in a cgroup that holds nothing else: the caller's chain cgroup,
 * execkit-PID-chain, for a guest Landlock keeps from writing to cgroups
 * (passed on to the next guest while each leaves it empty), else one of its
 * own, execkit-PID-RUN_ID.  Once the guest has ended, however it ended,
 * guest_wait() ends every process it started, in its process group or not
 * (cgroup.kill, then SIGKILL to every child of the caller until none is
 * left), before it returns.  A containment step that
 * fails never fails the guest: it falls back to what remains and says so
 * in g->warn.
 */
#ifndef EK_GUEST_H
#define EK_GUEST_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contain.h"
#include "err.h"
#include "isolate.h"
#include "output.h"
#include "world.h"
#include "state.h"

struct guest_spec {
	const char *program, *cwd;
	json_t *args, *env;
	const char *run_id, *txn_id;
	const struct state *st;          /* where its capture files and its view are */
	const struct isolate *iso;       /* how it is kept out of the state directory */
	const struct world *writable;    /* where the operator lets every guest write (world.h) */
	json_t *policy;                  /* the run's ("writable" widens its world) */
	const char *out_name, *err_name; /* its capture files: "out/RUN_ID.stdout", ... */
	mode_t umask;
	size_t max_output;
	struct output_quota *quota;      /* the executor's total (output.h); NULL: none */
};

/* GUEST_NOT_RUN: the supervisor did not spawn it at all (not_run says why). */
enum guest_why { GUEST_EXITED, GUEST_TIMEOUT, GUEST_STOPPED, GUEST_EXEC_FAILED, GUEST_NOT_RUN };

struct guest {
	pid_t pid;
	int out_pipe, err_pipe, pidfd;
	int file[2];            /* the capture files, once made; -1 before */
	bool lost[2];           /* ... or could not be made: that output is dropped */
	const struct state *st;
	const char *name[2];    /* the spec's out_name and err_name */
	size_t max_output;
	struct output_quota *quota;
	size_t kept[2], dropped[2];   /* dropped: past max_output or the quota, or not written */
	struct contain cg;      /* the guest's cgroup, if it has one */
	bool cg_kept;           /* ... which the guest cannot write to: kept for the next */
	struct ek_err warn;     /* code != 0: containment fell back or fell short, and why */
};

struct guest_end {
	enum guest_why why;
	int wait_status;      /* raw, from waitpid */
	int exec_errno;       /* GUEST_EXEC_FAILED */
	int stop_signal;      /* the signal that asked us to stop */
	char not_run[1024];   /* GUEST_NOT_RUN */
};

/* Start the guest, isolated and contained: 0 started, >0 the errno of a
 * failed exec (the child still has to be reaped with guest_wait), -1 the
 * guest did not run (e filled: a capture file could not be created, the
 * isolation could not be entered, ...; nothing is left to reap).  The caller
 * becomes a child subreaper.  g->warn says if the guest has no cgroup of
 * its own. */
int guest_spawn(const struct guest_spec *gs, struct guest *g, struct ek_err *e);

/* Supervise until the guest ends.  deadline (monotonic ms, 0 = none) is the
 * timeout; *stop non-zero asks it to end (its value is kept as the signal
 * that asked).  Always reaps the guest, then ends and reaps every other
 * descendant: every child of the caller is reaped, so the caller must have
 * no children but the guest.  g->warn says if one may have survived. */
int guest_wait(struct guest *g, int64_t deadline, volatile sig_atomic_t *stop,
    int64_t grace_ms, struct guest_end *end);

/* Close every descriptor guest_spawn opened (a cgroup is left in place). */
void guest_close(struct guest *g);

/* Shell conventions: 127 not found, 126 cannot execute, 128+N killed by
 * signal N, else the exit status. */
int guest_exit_code(const struct guest_end *end);

#endif
