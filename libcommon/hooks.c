/*
 * hooks — the notify hooks of a publication (shares.h: "policy.notify"),
 * run by shares.c once it has let go of out/limits.lock.
 *
 * A hook is named by the run's policy, so by whoever submitted the run:
 * it is treated as a guest (doc/security.md).
 *
 *   - Only a program the operator allowed runs: its exact path is in
 *     EXEC_ALLOW_HOOKS (paths separated by ':'; exec-run --allow-hook,
 *     exec-loop --allow-hook).  Another is not run, and that is a failure
 *     of the publication's note, with the reason.
 *   - It is isolated as the publisher's guests are (shares_hooks_isolation;
 *     else resolved here once, as exec-run would: EXEC_ISOLATION, else
 *     auto): kept out of the state directory, its writes limited to its
 *     world (world.h: private /tmp, /var/tmp, /dev/shm and the operator's
 *     EXEC_GUEST_WRITABLE), signals scoped.  It reads its run's limits
 *     through the run's view, as the guest does.  Without isolation (none)
 *     it is not run unless EXEC_UNISOLATED_HOOKS=1 says so.
 *   - It is contained: it starts in a cgroup of its own where one can be
 *     made, and once it has ended (or its time is up) everything in that
 *     cgroup and its process group is killed.
 *
 * Every hook of one change starts at once, each in its own process group,
 * without a shell; all of them together get SHARES_HOOK_MS, then whatever
 * is left is killed.  A hook's failure is counted in the caller's
 * shares_note (shares_int.h), never returned: no hook can fail a
 * publication.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "contain.h"
#include "shares_int.h"

#define HOOK_KILL_MS 1000   /* to empty a hook's cgroup once it has ended */

/* Set by shares_hooks_isolation (hookspawn.c): a tool that never calls it
 * (exec-inspect, linked statically without the isolation code) runs no
 * hook. */
int (*shares_hook_spawner)(struct state *st, struct pub *p, struct contain *cg, char *why,
    size_t whyn);

/* Has the operator allowed program (its exact path, in EXEC_ALLOW_HOOKS)? */
static bool
allowed(const char *program)
{
	const char *list = getenv("EXEC_ALLOW_HOOKS"), *p = list, *end;
	size_t n = strlen(program);

	while (p && *p) {
		end = strchr(p, ':');
		if ((size_t)((end ? end : p + strlen(p)) - p) == n && strncmp(p, program, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

int
shares_allow_hook(const char *path, struct ek_err *e)
{
	const char *was = getenv("EXEC_ALLOW_HOOKS");
	char *list = NULL;
	int rc;

	if (path[0] != '/' || strchr(path, ':'))
		return ek_fail(e, EK_USAGE, "not an absolute path without ':'");
	if (asprintf(&list, "%s%s%s", was && *was ? was : "", was && *was ? ":" : "", path) < 0)
		return ek_fail(e, EK_OSERR, "out of memory");
	rc = setenv("EXEC_ALLOW_HOOKS", list, 1);
	free(list);
	return rc < 0 ? ek_fail(e, EK_OSERR, "setenv: %s", strerror(errno)) : 0;
}

/* After p's hook ended or was killed: nothing it started may outlive it. */
static void
hook_end(pid_t pid, struct contain *cg)
{
	struct ek_err e = { 0 };

	kill(-pid, SIGKILL);
	contain_cgroup_kill(cg, HOOK_KILL_MS, &e);
}

/* Reap p's hook if it ended: 1 ended (note updated), 0 still running. */
static int
hook_reap(struct pub *p, struct contain *cg, struct shares_note *note)
{
	int ws;
	pid_t r = waitpid(p->pid, &ws, WNOHANG);

	if (r == 0 || (r < 0 && errno == EINTR))
		return 0;
	hook_end(p->pid, cg);
	p->pid = 0;
	if (r < 0)
		shares_note_fail(note, p->run_id, "notify", "'%s': waitpid: %s", p->notify,
		    strerror(errno));
	else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
		if (note)
			note->notified++;
	} else if (WIFEXITED(ws))
		shares_note_fail(note, p->run_id, "notify", "'%s' exited with status %d", p->notify,
		    WEXITSTATUS(ws));
	else
		shares_note_fail(note, p->run_id, "notify", "'%s' killed by signal %d", p->notify,
		    WTERMSIG(ws));
	return 1;
}

/* See shares_int.h. */
void
shares_hooks_run(struct state *st, struct pub *pubs, size_t n, const char *skip,
    struct shares_note *note)
{
	struct timespec tick = { 0, 2 * 1000000L };
	int64_t until = mono_ms() + SHARES_HOOK_MS;
	struct contain *cg = NULL;
	size_t i, running = 0;
	char why[1024];

	for (i = 0; i < n; i++) {
		if (!pubs[i].notify || (skip && strcmp(pubs[i].run_id, skip) == 0))
			continue;
		if (!cg && !(cg = calloc(n, sizeof *cg))) {
			shares_note_fail(note, pubs[i].run_id, "notify", "out of memory");
			return;
		}
		contain_init(&cg[i]);
		if (pubs[i].notify[0] != '/')
			shares_note_fail(note, pubs[i].run_id, "notify", "'%s' is not an absolute path",
			    pubs[i].notify);
		else if (!allowed(pubs[i].notify))
			shares_note_fail(note, pubs[i].run_id, "notify", "'%s' is not an allowed hook: not "
			    "run (the operator allows one with --allow-hook or EXEC_ALLOW_HOOKS)",
			    pubs[i].notify);
		else if (!shares_hook_spawner)
			shares_note_fail(note, pubs[i].run_id, "notify", "'%s' not run: this tool runs no "
			    "hooks", pubs[i].notify);
		else if (shares_hook_spawner(st, &pubs[i], &cg[i], why, sizeof why) < 0)
			shares_note_fail(note, pubs[i].run_id, "notify", "%s", why);
		else
			running++;
	}
	while (running > 0 && mono_ms() < until) {
		for (i = 0; i < n; i++)
			if (pubs[i].pid > 0 && hook_reap(&pubs[i], &cg[i], note))
				running--;
		if (running)
			nanosleep(&tick, NULL);
	}
	for (i = 0; i < n; i++) {
		if (pubs[i].pid <= 0)
			continue;
		kill(-pubs[i].pid, SIGKILL);
		while (waitpid(pubs[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
		hook_end(pubs[i].pid, &cg[i]);
		pubs[i].pid = 0;
		shares_note_fail(note, pubs[i].run_id, "notify", "'%s' did not end within %d ms: killed",
		    pubs[i].notify, SHARES_HOOK_MS);
	}
	free(cg);
}
