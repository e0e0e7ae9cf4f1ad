/* guest — see guest.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "guest.h"

extern char **environ;

#define GUEST_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define CONTAIN_WAIT_MS 5000   /* for each of cgroup.kill and the subreaper's sweep */

/* "key=value", malloc'd. */
static char *
kv(const char *k, const char *v)
{
	char *s = NULL;

	return asprintf(&s, "%s=%s", k, v) < 0 ? NULL : s;
}

/* argv = program + args; NULL-terminated, strings borrowed from json. */
static char **
build_argv(const struct guest_spec *gs)
{
	size_t n = json_array_size(gs->args), i;
	char **argv = calloc(n + 2, sizeof *argv);

	if (!argv)
		return NULL;
	argv[0] = (char *)gs->program;
	for (i = 0; i < n; i++)
		argv[i + 1] = (char *)json_string_value(json_array_get(gs->args, i));
	return argv;
}

/* Does path lie in dir (or is it dir)?  Both resolved; false if either
 * cannot be. */
static bool
inside(const char *path, const char *dir)
{
	char p[PATH_MAX], d[PATH_MAX];
	size_t n;

	if (!realpath(path, p) || !realpath(dir, d))
		return false;
	n = strlen(d);
	return strncmp(p, d, n) == 0 && (p[n] == '\0' || p[n] == '/' || n == 1);
}

/* The guest's home: the guest user's (user), else ours, unless it lies in
 * the state directory (the guest would learn where that is): then "/". */
static const char *
guest_home(const struct guest_spec *gs)
{
	const char *home = getenv("HOME");

	if (gs->iso->mode == ISOLATE_USER)
		return gs->iso->home;
	return home && *home && !inside(home, gs->st->dir) ? home : "/";
}

/* The environment names the guest's own things only: never the state
 * directory (limits is the path of its limits file as it sees it). */
static char **
build_env(const struct guest_spec *gs, const char *limits)
{
	size_t n = json_object_size(gs->env) + 8, i = 0;
	char **env = calloc(n, sizeof *env);
	const char *k;
	json_t *v;

	if (!env)
		return NULL;
	if (!json_object_get(gs->env, "PATH"))
		env[i++] = kv("PATH", GUEST_PATH);
	if (!json_object_get(gs->env, "HOME"))
		env[i++] = kv("HOME", guest_home(gs));
	env[i++] = kv("EXEC_RUN_ID", gs->run_id);
	env[i++] = kv("EXEC_TXN_ID", gs->txn_id);
	env[i++] = kv("EXEC_LIMITS_FILE", limits);
	json_object_foreach(gs->env, k, v)
		env[i++] = kv(k, json_string_value(v));
	return env;
}

static void
free_vec(char **v, int owned)
{
	size_t i;

	if (owned)
		for (i = 0; v && v[i]; i++)
			free(v[i]);
	free(v);
}

/* What the child reports through the fail pipe when it cannot exec. */
struct child_fail {
	int err;    /* errno */
	int step;   /* 0: exec (or dup2, chdir); else the isolation step (isolate.h) */
};

/* Where the child finds the guest's view: its path (userns) or its
 * descriptor (user). */
struct child_view {
	char path[PATH_MAX];
	int fd;
};

/* What the child needs, in the parent's memory. */
struct child_args {
	const struct guest_spec *gs;
	const struct world *world;   /* where it may write */
	const struct contain *cg;    /* the cgroups it joins itself (v1) */
	char **argv, **envp;
	int out, err, fail;
	const struct child_view *view;
};

/* In the child: never returns.  Reports a failure through a->fail.  It may
 * share our memory (contain_spawn): system calls only, and the environ it
 * sets for execvp is put back by guest_spawn. */
static void
child(void *arg)
{
	const struct child_args *a = arg;
	struct child_fail f = { 0, 0 };
	int null;

	contain_child_signals();
	setpgid(0, 0);
	null = open("/dev/null", O_RDONLY);
	/* The guest inherits stdin, stdout and stderr only (and, isolated as
	 * user, the descriptor of its view: isolate_enter keeps it). */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	umask(a->gs->umask);
	if (null < 0 || dup2(null, 0) < 0 || dup2(a->out, 1) < 0 || dup2(a->err, 2) < 0)
		goto fail;
	contain_child_join(a->cg);   /* while it still may */
	if (isolate_enter(a->gs->iso, a->world, a->gs->st->dir, a->view->path, a->view->fd, &f.step) < 0)
		goto fail;
	if (chdir(a->gs->cwd ? a->gs->cwd : "/") < 0)
		goto fail;
	environ = a->envp;
	execvp(a->argv[0], a->argv);
fail:
	f.err = errno;
	if (write(a->fail, &f, sizeof f) < 0)
		_exit(126);
	_exit(f.err == ENOENT || f.err == ENOTDIR ? 127 : 126);
}

static int
make_pipes(int out[2], int err[2], int fail[2], struct ek_err *e)
{
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(fail, O_CLOEXEC) < 0)
		return ek_fail(e, EK_OSERR, "pipe: %s", strerror(errno));
	return 0;
}

/* Add a line's worth to g->warn (containment fell back or fell short). */
static void
warn(struct guest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
warn(struct guest *g, const char *fmt, ...)
{
	size_t n = strlen(g->warn.msg);
	va_list ap;

	if (n && n + 2 < sizeof g->warn.msg) {
		strcpy(g->warn.msg + n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(g->warn.msg + n, sizeof g->warn.msg - n, fmt, ap);
	va_end(ap);
	g->warn.code = EK_OSERR;
}

/* Whether the guest cannot write to cgroups under ours (freeze one, make
 * a child of one, change a limit), so that its cgroup may serve the next
 * guest: Landlock holds its writes to its world, and nothing of that
 * world lies over or under our cgroup. */
static bool
out_of_reach(const struct guest_spec *gs, const struct world *w, const char *our_cgroup)
{
	return gs->iso->mode != ISOLATE_NONE && gs->iso->landlock >= 1 && !world_reaches(w, our_cgroup);
}

/* Before the fork: become a subreaper, and give the guest a cgroup, its
 * limits set (the policy's pids_max and memory_max, else the defaults).
 * A guest out of reach of cgroups gets its supervisor's chain cgroup,
 * execkit-PID-chain, which goes from one such guest to the next while each
 * leaves it empty (contain_cgroup_end); another gets one of its own, named
 * for its run. */
static void
contain_prepare(const struct guest_spec *gs, const struct world *w, struct guest *g)
{
	json_t *pids = json_object_get(gs->policy, "pids_max"), *mem = json_object_get(gs->policy, "memory_max");
	struct contain_limits l = { pids ? json_integer_value(pids) : CONTAIN_PIDS_MAX,
		mem ? json_integer_value(mem) : CONTAIN_MEMORY_MAX, .slot = true };
	char name[NAME_MAX + 1], dir[PATH_MAX];
	struct ek_err e = { 0 };

	if (contain_subreaper(&e) < 0)
		warn(g, "%s: descendants that leave the guest's process group may outlive it", e.msg);
	snprintf(name, sizeof name, "%ld-chain", (long)getpid());
	g->cg_kept = contain_cgroup_dir(dir, sizeof dir, &e) == 0 && out_of_reach(gs, w, dir) &&
	    contain_cgroup_create(&g->cg, name, &e) == 0;
	if (!g->cg_kept) {
		snprintf(name, sizeof name, "%ld-%s", (long)getpid(), gs->run_id ? gs->run_id : "guest");
		if (contain_cgroup_create(&g->cg, name, &e) < 0)
			warn(g, "no cgroup for the guest (%s): its descendants are ended by the subreaper alone", e.msg);
	}
	if (contain_limit(&g->cg, name, &l, &e) < 0)
		warn(g, "its resource limits are not all set: %s", e.msg);
}

/* After the guest is reaped: end everything it left, wherever it went. */
static void
contain_end(struct guest *g)
{
	struct ek_err e = { 0 };

	if (contain_cgroup_end(&g->cg, g->cg_kept, CONTAIN_WAIT_MS, &e) < 0)
		warn(g, "after the guest ended: %s", e.msg);
	if (contain_reap_all(CONTAIN_WAIT_MS, &e) < 0)
		warn(g, "after the guest ended: %s", e.msg);
}

/* After fork: learn whether exec succeeded (the pipe closes on exec): 0,
 * or the errno of what failed (*step: 0 exec, else an isolation step). */
static int
exec_result(int fd, int *step)
{
	struct child_fail f = { 0, 0 };
	ssize_t n;

	do
		n = read(fd, &f, sizeof f);
	while (n < 0 && errno == EINTR);
	close(fd);
	*step = n == (ssize_t)sizeof f ? f.step : 0;
	return n == (ssize_t)sizeof f ? f.err : 0;
}

/* The guest's view, as the child needs it, and the path of its limits
 * file as the guest sees it. */
static int
open_view(const struct guest_spec *gs, struct child_view *v, char *limits, size_t n,
    struct ek_err *e)
{
	char name[NAME_MAX + 8], lim[NAME_MAX + 16];

	v->path[0] = '\0';
	v->fd = -1;
	snprintf(lim, sizeof lim, "out/%s.limits", gs->run_id);
	if (state_path(gs->st, lim, limits, n) < 0 || isolate_view_name(gs->run_id, name, sizeof name) < 0 ||
	    state_path(gs->st, name, v->path, sizeof v->path) < 0)
		return ek_fail(e, EK_SOFTWARE, "state directory path too long");
	/* userns binds the view at <state>/out: the limits file keeps its path.
	 * user reaches it through a descriptor of the view. */
	if (gs->iso->mode == ISOLATE_USER) {
		if ((v->fd = state_open_dir(gs->st, name, e)) < 0)
			return errno == ENOENT ? ek_fail(e, EK_SOFTWARE, "no view directory '%s'", v->path) : -1;
		snprintf(limits, n, "/proc/self/fd/%d/%s.limits", v->fd, gs->run_id);
	}
	return 0;
}

/* Capture file i, made on its first byte: a new file, never an existing
 * one, never through a link.  Its descriptor, or -1 once it could not be
 * made (that output is dropped from then on, and g->warn says why). */
static int
capture_file(struct guest *g, int i)
{
	struct ek_err e = { 0 };

	if (g->file[i] < 0 && !g->lost[i] &&
	    (g->file[i] = state_open_file(g->st, g->name[i], O_WRONLY | O_CREAT | O_EXCL, 0600, &e)) < 0) {
		g->lost[i] = true;
		if (!g->warn.code)
			ek_fail(&g->warn, e.code, "its %s is not kept: %s", i ? "stderr" : "stdout", e.msg);
	}
	return g->file[i];
}

/* The child could not enter its isolation and has exited: reap it (and
 * its cgroup), fill e. */
static void
not_isolated(const struct guest_spec *gs, struct guest *g, int err, int step, struct ek_err *e)
{
	struct ek_err ignored;

	while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
		;
	contain_cgroup_kill(&g->cg, CONTAIN_WAIT_MS, &ignored);
	ek_fail(e, EK_OSERR, "cannot isolate the guest (%s): %s: %s", isolate_mode_name(gs->iso->mode),
	    isolate_step_name(step), strerror(err));
}

int
guest_spawn(const struct guest_spec *gs, struct guest *g, struct ek_err *e)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, fail[2] = { -1, -1 };
	char **argv = build_argv(gs), **envp = NULL, **our_env = environ, limits[PATH_MAX];
	struct world *world = NULL;
	struct child_view view;
	struct child_args args;
	struct ek_err ignored, moved = { 0 };
	int rc, step;

	memset(g, 0, sizeof *g);
	g->pid = -1;
	g->out_pipe = g->err_pipe = g->pidfd = g->file[0] = g->file[1] = -1;
	g->st = gs->st;
	g->name[0] = gs->out_name;
	g->name[1] = gs->err_name;
	g->max_output = gs->max_output;
	g->quota = gs->quota;
	contain_init(&g->cg);
	view.fd = -1;
	if (open_view(gs, &view, limits, sizeof limits, e) < 0)
		goto fail;
	if (!argv || !(envp = build_env(gs, limits)) ||
	    !(world = world_for_run(gs->writable, gs->policy, gs->cwd))) {
		ek_fail(e, EK_OSERR, "out of memory");
		goto fail;
	}
	if (state_check_free(gs->st, gs->out_name, e) < 0 || state_check_free(gs->st, gs->err_name, e) < 0)
		goto fail;
	contain_prepare(gs, world, g);
	if (make_pipes(out, err, fail, e) < 0)
		goto fail;
	args = (struct child_args){ gs, world, &g->cg, argv, envp, out[1], err[1], fail[1], &view };
	g->pid = contain_spawn(&g->cg, child, &args, &moved);
	environ = our_env;
	if (g->pid < 0) {
		ek_fail(e, EK_OSERR, "fork: %s", strerror(errno));
		goto fail;
	}
	if (moved.code)
		warn(g, "no cgroup for the guest (%s): its descendants are ended by the subreaper alone", moved.msg);
	setpgid(g->pid, g->pid);   /* a copy of us may not have run yet: no race with kill(-pid) */
	close(out[1]);
	close(err[1]);
	close(fail[1]);
	g->out_pipe = out[0];
	g->err_pipe = err[0];
	g->pidfd = (int)syscall(SYS_pidfd_open, g->pid, 0);
	free_vec(argv, 0);
	free_vec(envp, 1);
	free(world);
	if (view.fd >= 0)
		close(view.fd);
	if ((rc = exec_result(fail[0], &step)) == 0 || step == 0)
		return rc;
	not_isolated(gs, g, rc, step, e);
	guest_close(g);
	return -1;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0) close(out[i]);
		if (err[i] >= 0) close(err[i]);
		if (fail[i] >= 0) close(fail[i]);
	}
	if (view.fd >= 0)
		close(view.fd);
	contain_cgroup_kill(&g->cg, CONTAIN_WAIT_MS, &ignored);   /* empty: just removed */
	guest_close(g);
	free_vec(argv, 0);
	free_vec(envp, 1);
	free(world);
	return -1;
}

/* Move what the pipe holds into the capture file, keeping at most max and
 * what the executor's output quota allows; what is not kept is counted. */
static int
drain(struct guest *g, int i)
{
	size_t max = g->max_output;
	int *pipe_fd = i ? &g->err_pipe : &g->out_pipe;
	char buf[16384];
	ssize_t n = read(*pipe_fd, buf, sizeof buf);
	size_t keep;

	if (n < 0 && errno == EINTR)
		return 0;
	if (n < 0 && errno == EAGAIN)
		return 1;
	if (n <= 0) {
		close(*pipe_fd);
		*pipe_fd = -1;
		return 1;
	}
	keep = g->kept[i] < max ? max - g->kept[i] : 0;
	keep = output_quota_take(g->quota, keep < (size_t)n ? keep : (size_t)n);
	if (keep && capture_file(g, i) >= 0 && write(g->file[i], buf, keep) == (ssize_t)keep)
		g->kept[i] += keep;
	else
		keep = 0;   /* a full disk, say: dropped as well */
	g->dropped[i] += (size_t)n - keep;
	return 0;
}

static void
poll_once(struct guest *g, int64_t wait_ms)
{
	struct pollfd p[3];
	int i;

	p[0] = (struct pollfd){ .fd = g->out_pipe, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = g->err_pipe, .events = POLLIN };
	p[2] = (struct pollfd){ .fd = g->pidfd, .events = POLLIN };
	if (poll(p, 3, (int)wait_ms) <= 0)
		return;
	for (i = 0; i < 2; i++)
		if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
			drain(g, i);
}

/* Ask the whole group to end: TERM now, KILL when the grace runs out. */
static void
escalate(struct guest *g, int64_t *kill_at, int64_t grace_ms)
{
	if (*kill_at == 0) {
		kill(-g->pid, SIGTERM);
		*kill_at = mono_ms() + grace_ms;
	} else if (mono_ms() >= *kill_at) {
		kill(-g->pid, SIGKILL);
		*kill_at = INT64_MAX;
	}
}

/* Reap whatever has ended: true once the guest itself is reaped (*status
 * set).  Orphaned descendants, ours as their subreaper, are reaped as they
 * end, so that a long guest cannot fill the process table with zombies. */
static bool
reaped(struct guest *g, int *status)
{
	pid_t r;
	int ws;

	while ((r = waitpid(-1, &ws, WNOHANG | __WALL)) > 0)
		if (r == g->pid) {
			*status = ws;
			return true;
		}
	return false;
}

/* After the guest is reaped: take what is already in the pipes, then close. */
static void
final_drain(struct guest *g)
{
	int i, rounds;

	for (i = 0; i < 2; i++) {
		int fd = i ? g->err_pipe : g->out_pipe;
		if (fd < 0)
			continue;
		fcntl(fd, F_SETFL, O_NONBLOCK);
		for (rounds = 0; rounds < 1024 && (i ? g->err_pipe : g->out_pipe) >= 0; rounds++)
			if (drain(g, i) == 1)
				break;
	}
}

int
guest_wait(struct guest *g, int64_t deadline, volatile sig_atomic_t *stop,
    int64_t grace_ms, struct guest_end *end)
{
	int64_t kill_at = 0, now, wait;
	int status = 0;

	memset(end, 0, sizeof *end);
	end->why = GUEST_EXITED;
	while (!reaped(g, &status)) {
		now = mono_ms();
		if (end->why == GUEST_EXITED && *stop) {
			end->why = GUEST_STOPPED;
			end->stop_signal = *stop;
		} else if (end->why == GUEST_EXITED && deadline && now >= deadline) {
			end->why = GUEST_TIMEOUT;
		}
		if (end->why != GUEST_EXITED)
			escalate(g, &kill_at, grace_ms);
		wait = g->pidfd >= 0 ? 100 : 20;
		if (deadline && end->why == GUEST_EXITED && deadline - now < wait)
			wait = deadline - now > 0 ? deadline - now : 0;
		poll_once(g, wait);
	}
	end->wait_status = status;
	kill(-g->pid, SIGKILL);   /* whatever the guest left behind in its group */
	contain_end(g);           /* and everything it started outside it */
	final_drain(g);
	return 0;
}

void
guest_close(struct guest *g)
{
	int *fds[] = { &g->out_pipe, &g->err_pipe, &g->pidfd, &g->file[0], &g->file[1] };
	size_t i;

	for (i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	contain_close(&g->cg);
}

int
guest_exit_code(const struct guest_end *end)
{
	if (end->why == GUEST_NOT_RUN)
		return 126;
	if (end->why == GUEST_EXEC_FAILED)
		return end->exec_errno == ENOENT || end->exec_errno == ENOTDIR ? 127 : 126;
	if (WIFSIGNALED(end->wait_status))
		return 128 + WTERMSIG(end->wait_status);
	return WEXITSTATUS(end->wait_status);
}
