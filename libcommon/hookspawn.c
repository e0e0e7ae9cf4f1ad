/* hookspawn — how a notify hook is started: allowed, isolated, contained.
 * See hooks.c for the rules; this part holds what needs the isolation code,
 * linked only into the tools that call shares_hooks_isolation(). */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contain.h"
#include "isolate.h"
#include "shares_int.h"
#include "world.h"

#define HOOK_PATH "/usr/local/bin:/usr/bin:/bin"

/* How hooks are isolated, decided once a process. */
static struct {
	bool decided;
	struct isolate iso;
	struct world *world;
	char why[600];   /* not "": hooks are not run, and why */
} hk;

/* Decide (once) how hooks run: 0, or -1 (hk.why says why none runs). */
static int
hooks_decide(const struct state *st)
{
	const char *mode = getenv("EXEC_ISOLATION"), *unisolated = getenv("EXEC_UNISOLATED_HOOKS");
	enum isolate_mode want = ISOLATE_AUTO;
	struct ek_err e = { 0 };

	if (!hk.world) {
		if (!(hk.world = world_for_run(NULL, NULL, NULL)))
			snprintf(hk.why, sizeof hk.why, "out of memory");
		else if (world_from_env(hk.world, &e) < 0)
			snprintf(hk.why, sizeof hk.why, "%.500s", e.msg);
		if (!hk.decided && mode && *mode && isolate_parse_mode(mode, &want) < 0)
			snprintf(hk.why, sizeof hk.why, "EXEC_ISOLATION: '%.100s' is not a mode", mode);
		if (!hk.why[0] && !hk.decided && isolate_resolve(want, NULL, false, st->dir, &hk.iso, &e) < 0)
			snprintf(hk.why, sizeof hk.why, "hooks cannot be isolated: %.500s", e.msg);
		hk.decided = true;
		if (!hk.why[0] && hk.iso.mode == ISOLATE_NONE && !(unisolated && strcmp(unisolated, "1") == 0))
			snprintf(hk.why, sizeof hk.why, "hooks are not run without isolation (%.400s); "
			    "EXEC_UNISOLATED_HOOKS=1 runs them all the same", hk.iso.why);
	}
	return hk.why[0] ? -1 : 0;
}

/* What the hook's child needs, in our memory (it may share it). */
struct hook_args {
	const struct state *st;
	char *argv[4], *env[4];
	char view[PATH_MAX];
	int view_fd, log, fail;
	const char *program;
	const struct contain *cg;
};

#define HOOK_PIDS_MAX 64                 /* a hook's limits */
#define HOOK_MEMORY_MAX (256LL << 20)

/* In the hook's child: never returns; a failure (errno, isolation step)
 * goes to a->fail.  System calls only. */
static void
hook_child(void *arg)
{
	const struct hook_args *a = arg;
	int f[2] = { 0, 0 }, null;

	contain_child_signals();
	setpgid(0, 0);
	null = open("/dev/null", O_RDONLY);
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	umask(a->st->umask_orig);
	if (null < 0 || dup2(null, 0) < 0 || dup2(a->log, 1) < 0 || dup2(a->log, 2) < 0)
		goto fail;
	contain_child_join(a->cg);
	if (isolate_enter(&hk.iso, hk.world, a->st->dir, a->view, a->view_fd, &f[1]) < 0)
		goto fail;
	if (chdir("/") < 0)
		goto fail;
	execve(a->program, a->argv, a->env);
fail:
	f[0] = errno;
	(void)!write(a->fail, f, sizeof f);
	_exit(126);
}

/* The hook's arguments and environment: its limits file as it sees it
 * (its run's view, as the guest's: isolate.h). */
static int
hook_args(const struct state *st, const struct pub *p, struct hook_args *a, char *limits,
    size_t n, char *why, size_t whyn)
{
	char name[NAME_MAX + 8];
	struct ek_err e = { 0 };

	a->view_fd = -1;
	snprintf(limits, n, "%s", p->path);
	if (isolate_view_name(p->run_id, name, sizeof name) < 0 ||
	    state_path(st, name, a->view, sizeof a->view) < 0) {
		snprintf(why, whyn, "state directory path too long");
		return -1;
	}
	if (hk.iso.mode == ISOLATE_USER) {
		if ((a->view_fd = state_open_dir(st, name, &e)) < 0) {
			snprintf(why, whyn, "no view of its limits: %.400s", e.msg);
			return -1;
		}
		snprintf(limits, n, "/proc/self/fd/%d/%s.limits", a->view_fd, p->run_id);
	}
	a->argv[0] = (char *)p->notify;
	a->argv[1] = (char *)p->run_id;
	a->argv[2] = limits;
	a->argv[3] = NULL;
	memset(a->env, 0, sizeof a->env);
	if (asprintf(&a->env[0], "PATH=%s", HOOK_PATH) < 0 || asprintf(&a->env[1], "EXEC_RUN_ID=%s",
	    p->run_id) < 0 || asprintf(&a->env[2], "EXEC_LIMITS_FILE=%s", limits) < 0) {
		snprintf(why, whyn, "out of memory");
		return -1;
	}
	return 0;
}

/* Start p's hook, isolated and in cgroup cg where one can be made: program
 * run_id limits_file, no shell, its own process group, output to
 * out/RUN_ID.notify (opened here, never through a link).  0, or -1 (why
 * filled). */
static int
hook_spawn(struct state *st, struct pub *p, struct contain *cg, char *why, size_t whyn)
{
	char name[RUN_ID_MAX + 16], limits[PATH_MAX];
	struct hook_args a = { .st = st, .program = p->notify, .log = -1, .fail = -1 };
	struct ek_err e = { 0 };
	int fail[2] = { -1, -1 }, f[2] = { 0, 0 }, rc = -1;

	if (hooks_decide(st) < 0) {
		snprintf(why, whyn, "'%s' not run: %.900s", p->notify, hk.why);
		return -1;
	}
	if (hook_args(st, p, &a, limits, sizeof limits, why, whyn) < 0)
		goto out;
	snprintf(name, sizeof name, "out/%s.notify", p->run_id);
	if ((a.log = state_open_file(st, name, O_WRONLY | O_CREAT | O_TRUNC, 0600, &e)) < 0) {
		snprintf(why, whyn, "%.500s", e.msg);
		goto out;
	}
	if (pipe2(fail, O_CLOEXEC) < 0) {
		snprintf(why, whyn, "pipe: %s", strerror(errno));
		goto out;
	}
	a.fail = fail[1];
	snprintf(name, sizeof name, "%ld-hook-%s", (long)getpid(), p->run_id);
	if (contain_cgroup_create(cg, name, &e) < 0)
		ek_clear(&e);   /* its process group is killed all the same */
	if (contain_limit(cg, name, &(struct contain_limits){ HOOK_PIDS_MAX, HOOK_MEMORY_MAX, false }, &e) < 0)
		ek_clear(&e);
	a.cg = cg;
	p->pid = contain_spawn(cg, hook_child, &a, &e);
	close(fail[1]);
	if (p->pid < 0)
		snprintf(why, whyn, "cannot start '%s': %s", p->notify, strerror(errno));
	else if (read(fail[0], f, sizeof f) == (ssize_t)sizeof f) {
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		p->pid = 0;
		snprintf(why, whyn, "cannot execute '%s': %s%s%s", p->notify,
		    f[1] ? isolate_step_name(f[1]) : "", f[1] ? ": " : "", strerror(f[0]));
	} else
		rc = 0;
	close(fail[0]);
	if (rc < 0)
		contain_cgroup_kill(cg, 1000, &e);   /* empty: just removed */
out:
	if (a.log >= 0)
		close(a.log);
	if (a.view_fd >= 0)
		close(a.view_fd);
	for (int i = 0; a.env[i] && i < 3; i++)
		free(a.env[i]);
	return rc;
}


void
shares_hooks_isolation(const struct isolate *iso)
{
	if (iso) {
		hk.iso = *iso;
		hk.decided = true;
	}
	shares_hook_spawner = hook_spawn;
}
