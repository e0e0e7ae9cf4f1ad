/*
 * hooks — the notify hooks of a publication (shares.h: "policy.notify"),
 * run by shares.c once it has let go of out/limits.lock.
 *
 * Every hook of one change starts at once, each in its own process group,
 * without a shell; all of them together get SHARES_HOOK_MS, then whatever
 * is left is killed with its group.  A hook's failure is counted in the
 * caller's shares_note (shares_int.h), never returned: no hook can fail a
 * publication.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "shares_int.h"

#define HOOK_PATH "/usr/local/bin:/usr/bin:/bin"

/* Start p's hook: program run_id limits_file, no shell, its own process
 * group, output to out/RUN_ID.notify (opened here, never through a link).
 * The hook is named by the run's policy, so by whoever submitted the run:
 * its environment names its own things only, never the state directory.
 * 0, or -1 (why filled). */
static int
hook_spawn(struct state *st, struct pub *p, char *why, size_t whyn)
{
	char *argv[] = { (char *)p->notify, (char *)p->run_id, p->path, NULL };
	char name[RUN_ID_MAX + 16], *env[4] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	struct ek_err e = { 0 };
	int rc, log;

	snprintf(name, sizeof name, "out/%s.notify", p->run_id);
	if ((log = state_open_file(st, name, O_WRONLY | O_CREAT | O_TRUNC, 0600, &e)) < 0) {
		snprintf(why, whyn, "%.500s", e.msg);
		return -1;
	}
	if (asprintf(&env[0], "PATH=%s", HOOK_PATH) < 0 || asprintf(&env[1], "EXEC_RUN_ID=%s", p->run_id) < 0 ||
	    asprintf(&env[2], "EXEC_LIMITS_FILE=%s", p->path) < 0)
		rc = ENOMEM;
	else {
		sigemptyset(&none);
		sigfillset(&all);
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		posix_spawn_file_actions_adddup2(&fa, log, 1);
		posix_spawn_file_actions_adddup2(&fa, log, 2);
		posix_spawnattr_init(&at);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
		posix_spawnattr_setpgroup(&at, 0);
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setsigdefault(&at, &all);
		rc = posix_spawn(&p->pid, p->notify, &fa, &at, argv, env);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&at);
	}
	close(log);
	for (int i = 0; env[i]; i++)
		free(env[i]);
	if (rc)
		snprintf(why, whyn, "cannot execute '%s': %s", p->notify, strerror(rc));
	return rc ? -1 : 0;
}

/* Reap p's hook if it ended: 1 ended (note updated), 0 still running. */
static int
hook_reap(struct pub *p, struct shares_note *note)
{
	int ws;
	pid_t r = waitpid(p->pid, &ws, WNOHANG);

	if (r == 0 || (r < 0 && errno == EINTR))
		return 0;
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
	size_t i, running = 0;
	char why[512];

	for (i = 0; i < n; i++) {
		if (!pubs[i].notify || (skip && strcmp(pubs[i].run_id, skip) == 0))
			continue;
		if (pubs[i].notify[0] != '/')
			shares_note_fail(note, pubs[i].run_id, "notify", "'%s' is not an absolute path",
			    pubs[i].notify);
		else if (hook_spawn(st, &pubs[i], why, sizeof why) < 0)
			shares_note_fail(note, pubs[i].run_id, "notify", "%s", why);
		else
			running++;
	}
	while (running > 0 && mono_ms() < until) {
		for (i = 0; i < n; i++)
			if (pubs[i].pid > 0 && hook_reap(&pubs[i], note))
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
		shares_note_fail(note, pubs[i].run_id, "notify", "'%s' did not end within %d ms: killed",
		    pubs[i].notify, SHARES_HOOK_MS);
	}
}
