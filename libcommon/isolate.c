/* isolate — see isolate.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contain.h"
#include "isolate.h"
#include "world.h"

static const char *const mode_names[] = {
	[ISOLATE_AUTO] = "auto", [ISOLATE_NONE] = "none", [ISOLATE_USERNS] = "userns",
	[ISOLATE_USER] = "user",
};

const char *const isolate_modes[] = { "auto", "userns", "user", "none", NULL };

/* The steps of isolate_enter, for messages (index = *step). */
enum step { S_NONE, S_DUMPABLE, S_UNSHARE, S_SETGROUPS_DENY, S_UID_MAP, S_GID_MAP, S_PRIVATE,
	S_VIEW_OPEN, S_TMPFS, S_VIEW_DIR, S_VIEW_BIND, S_VIEW_RDONLY, S_TMPFS_RDONLY, S_SETGROUPS,
	S_SETGID, S_SETUID, S_NO_NEW_PRIVS, S_LANDLOCK, S_BOUNDING, S_AMBIENT, S_CAPSET, S_VIEW_FD,
	S_NEWNS, S_TMP, S_WRITABLE_DIR, S_WRITABLE_BIND, S_STATE_DIR, S_NETNS, S_TOO_LONG };

static const char *const step_names[] = {
	[S_NONE] = "nothing",
	[S_DUMPABLE] = "prctl(PR_SET_DUMPABLE)",
	[S_UNSHARE] = "unshare(CLONE_NEWUSER|CLONE_NEWNS)",
	[S_SETGROUPS_DENY] = "write /proc/self/setgroups",
	[S_UID_MAP] = "write /proc/self/uid_map",
	[S_GID_MAP] = "write /proc/self/gid_map",
	[S_PRIVATE] = "make every mount private",
	[S_VIEW_OPEN] = "open the guest's view directory",
	[S_TMPFS] = "mount a tmpfs over the state directory",
	[S_VIEW_DIR] = "make out/ in that tmpfs",
	[S_VIEW_BIND] = "bind the guest's view at out/",
	[S_VIEW_RDONLY] = "make the guest's view read-only",
	[S_TMPFS_RDONLY] = "make the tmpfs read-only",
	[S_SETGROUPS] = "setgroups",
	[S_SETGID] = "setresgid",
	[S_SETUID] = "setresuid",
	[S_NO_NEW_PRIVS] = "prctl(PR_SET_NO_NEW_PRIVS)",
	[S_LANDLOCK] = "enter a Landlock domain",
	[S_BOUNDING] = "drop the capability bounding set",
	[S_AMBIENT] = "clear the ambient capabilities",
	[S_CAPSET] = "drop every capability",
	[S_VIEW_FD] = "keep the guest's view descriptor",
	[S_NEWNS] = "unshare(CLONE_NEWNS)",
	[S_TMP] = "mount a private tmpfs over /tmp, /var/tmp or /dev/shm",
	[S_WRITABLE_DIR] = "make the mount point of a writable path",
	[S_WRITABLE_BIND] = "bind a writable path into a private directory",
	[S_STATE_DIR] = "make the state directory's mount point",
	[S_NETNS] = "enter a network namespace with loopback only",
	[S_TOO_LONG] = "build a path (too long)",
};

const char *
isolate_mode_name(enum isolate_mode m)
{
	return m >= ISOLATE_AUTO && m <= ISOLATE_USER ? mode_names[m] : "?";
}

int
isolate_parse_mode(const char *s, enum isolate_mode *m)
{
	int i;

	for (i = ISOLATE_AUTO; i <= ISOLATE_USER; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum isolate_mode)i;
			return 0;
		}
	return -1;
}

const char *
isolate_step_name(int step)
{
	return step >= 0 && step <= S_TOO_LONG ? step_names[step] : "?";
}

/* Record that step s failed (errno says why): -1. */
static int
at(int *step, int s)
{
	*step = s;
	return -1;
}

/* --- Landlock and capabilities ---------------------------------------------- */

/* Effective capability cap (a CAP_* number below 32)? */
static bool
has_cap(int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	return syscall(SYS_capget, &h, d) == 0 && (d[0].effective & (1U << cap));
}

/* Empty every capability set this process can: nothing is gained at exec. */
static int
drop_caps(bool bounding, int *step)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	int cap;

	memset(d, 0, sizeof d);
	if (bounding)
		for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
				return at(step, S_BOUNDING);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return at(step, S_AMBIENT);
	if (syscall(SYS_capset, &h, d) < 0)
		return at(step, S_CAPSET);
	return 0;
}

/* --- entering it (in the child) -------------------------------------------------- */

static int
write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), err;
	ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));

	err = errno;
	if (fd >= 0)
		close(fd);
	errno = err;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The mount flags a remount of path must keep (those a less privileged
 * mount namespace may not change), plus extra. */
static unsigned long
kept_flags(const char *path, unsigned long extra)
{
	static const struct { unsigned long st, ms; } map[] = {
		{ ST_NOSUID, MS_NOSUID }, { ST_NODEV, MS_NODEV }, { ST_NOEXEC, MS_NOEXEC },
		{ ST_NOATIME, MS_NOATIME }, { ST_NODIRATIME, MS_NODIRATIME }, { ST_RELATIME, MS_RELATIME },
	};
	struct statvfs sv;
	unsigned long f = extra;
	size_t i;

	if (statvfs(path, &sv) == 0)
		for (i = 0; i < sizeof map / sizeof map[0]; i++)
			if (sv.f_flag & map[i].st)
				f |= map[i].ms;
	return f;
}

/* The guest's private /tmp, /var/tmp and /dev/shm, and what w binds back
 * into them (world.h), in the mount namespace we are in. */
static int
enter_world(const struct world *w, int *step)
{
	int ws = 0;

	if (w && world_private(w, &ws) < 0)
		return at(step, ws == WORLD_TMPFS ? S_TMP : ws == WORLD_MKDIR ? S_WRITABLE_DIR :
		    S_WRITABLE_BIND);
	return 0;
}

/* userns: a user namespace that maps our ids to themselves, a mount
 * namespace with the guest's private directories (w) where a read-only
 * tmpfs hides state_dir and out/ in it is the guest's view directory,
 * read-only. */
static int
enter_userns(const struct isolate *iso, const struct world *w, const char *state_dir,
    const char *view, int *step)
{
	struct stat sb;
	char map[64], out[PATH_MAX], fdpath[64];
	int fd;

	if (snprintf(out, sizeof out, "%s/out", state_dir) >= (int)sizeof out) {
		errno = ENAMETOOLONG;
		return at(step, S_TOO_LONG);
	}
	/* A non-dumpable process cannot write its own maps (they belong to root). */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return at(step, S_DUMPABLE);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return at(step, S_UNSHARE);
	if (write_file("/proc/self/setgroups", "deny") < 0)
		return at(step, S_SETGROUPS_DENY);
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)iso->uid, (unsigned)iso->uid);
	if (write_file("/proc/self/uid_map", map) < 0)
		return at(step, S_UID_MAP);
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)iso->gid, (unsigned)iso->gid);
	if (write_file("/proc/self/gid_map", map) < 0)
		return at(step, S_GID_MAP);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return at(step, S_PRIVATE);
	/* Opened in this mount namespace, before the tmpfs hides it. */
	if ((fd = open(view, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return at(step, S_VIEW_OPEN);
	snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
	if (enter_world(w, step) < 0)
		return -1;
	/* A state directory in a private /tmp is not there any more, but the
	 * guest's view keeps its path (EXEC_LIMITS_FILE): its mount point. */
	if (stat(state_dir, &sb) < 0 && world_mkdirs(state_dir) < 0)
		return at(step, S_STATE_DIR);
	if (mount("execkit", state_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0755,size=16k,nr_inodes=8") < 0)
		return at(step, S_TMPFS);
	if (mkdir(out, 0755) < 0)
		return at(step, S_VIEW_DIR);
	if (mount(fdpath, out, NULL, MS_BIND, NULL) < 0)
		return at(step, S_VIEW_BIND);
	close(fd);
	if (mount(NULL, out, NULL, kept_flags(out, MS_REMOUNT | MS_BIND | MS_RDONLY), NULL) < 0)
		return at(step, S_VIEW_RDONLY);
	if (mount(NULL, state_dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, NULL) < 0)
		return at(step, S_TMPFS_RDONLY);
	return 0;
}

/* user: become the guest user, its groups included.  The system calls
 * themselves: glibc's wrappers change every thread of a process that has
 * several, and a child that shares our memory would change ours. */
static int
enter_user(const struct isolate *iso, const struct world *w, int *step)
{
	/* As root, a mount namespace for its private directories first. */
	if (w && iso->newns) {
		if (unshare(CLONE_NEWNS) < 0)
			return at(step, S_NEWNS);
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return at(step, S_PRIVATE);
		if (enter_world(w, step) < 0)
			return -1;
	}
	if (syscall(SYS_setgroups, (size_t)iso->ngroups, iso->groups) < 0)
		return at(step, S_SETGROUPS);
	if (syscall(SYS_setresgid, iso->gid, iso->gid, iso->gid) < 0)
		return at(step, S_SETGID);
	if (syscall(SYS_setresuid, iso->uid, iso->uid, iso->uid) < 0)
		return at(step, S_SETUID);
	return 0;
}

int
isolate_enter(const struct isolate *iso, const struct world *w, const char *state_dir,
    const char *view, int view_fd, int *step)
{
	*step = S_NONE;
	if (iso->mode == ISOLATE_USERNS && enter_userns(iso, w, state_dir, view, step) < 0)
		return -1;
	/* No network: with the privilege userns gives, or root's before user
	 * drops it (none: only as root; else the guest does not run). */
	if (w && w->no_network && world_no_network() < 0)
		return at(step, S_NETNS);
	if (iso->mode == ISOLATE_USER && fcntl(view_fd, F_SETFD, 0) < 0)
		return at(step, S_VIEW_FD);
	if (iso->mode == ISOLATE_USER && enter_user(iso, w, step) < 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return at(step, S_NO_NEW_PRIVS);
	if (iso->mode == ISOLATE_NONE)
		return 0;
	if (world_landlock(w, iso->landlock, true) < 0)
		return at(step, S_LANDLOCK);
	/* userns: uid 0 in the namespace (an executor run as root) would get
	 * every capability in it back at exec, and with them could unmount the
	 * tmpfs: the bounding set goes too. */
	return drop_caps(iso->mode == ISOLATE_USERNS, step);
}

/* --- deciding --------------------------------------------------------------- */

/* A sysctl's first line into buf ("" if unreadable). */
static void
read_sysctl(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (f && fgets(buf, (int)n, f))
		buf[strcspn(buf, "\n")] = '\0';
	if (f)
		fclose(f);
}

/* The directory the probe hides: the state directory, or before there is
 * one its nearest existing ancestor (never "/": a mount there would not
 * cover the process's root), else /tmp. */
static void
probe_target(const char *state_dir, char *buf, size_t n)
{
	struct stat sb;
	char *slash;

	snprintf(buf, n, "%s", state_dir);
	while (buf[0] && (stat(buf, &sb) < 0 || !S_ISDIR(sb.st_mode)))
		if ((slash = strrchr(buf, '/')))
			*slash = '\0';
		else
			buf[0] = '\0';
	if (!buf[0] || strcmp(buf, "/") == 0)
		snprintf(buf, n, "/tmp");
}

struct probe_args {
	const struct isolate *iso;
	const char *dir;
	int fd;   /* where a failure's errno and step go */
};

/* The probe's child: it may share our memory (contain_spawn), so it makes
 * system calls only, and _exits. */
static void
probe_child(void *arg)
{
	const struct probe_args *a = arg;
	int msg[2] = { 0, 0 };

	if (isolate_enter(a->iso, NULL, a->dir, a->dir, -1, &msg[1]) < 0) {
		msg[0] = errno;
		(void)!write(a->fd, msg, sizeof msg);
	}
	_exit(0);
}

/* Enter userns for real in a throwaway child, hiding the state directory
 * (probe_target) and binding it back as its own view: 0, or -1 (iso->why
 * says why not). */
static int
probe_userns(struct isolate *iso, const char *state_dir)
{
	char clone[32], max[32], dir[PATH_MAX];
	int p[2], msg[2] = { 0, 0 }, ws = 0;
	struct probe_args a = { iso, dir, -1 };
	struct contain none;
	pid_t pid;
	ssize_t n;

	probe_target(state_dir, dir, sizeof dir);
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(iso->why, sizeof iso->why, "cannot probe: pipe: %s", strerror(errno));
		return -1;
	}
	a.fd = p[1];
	contain_init(&none);
	pid = contain_spawn(&none, probe_child, &a, NULL);
	close(p[1]);
	if (pid < 0) {
		snprintf(iso->why, sizeof iso->why, "cannot probe: fork: %s", strerror(errno));
		close(p[0]);
		return -1;
	}
	while ((n = read(p[0], msg, sizeof msg)) < 0 && errno == EINTR)
		;
	close(p[0]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof msg && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return 0;
	read_sysctl("/proc/sys/kernel/unprivileged_userns_clone", clone, sizeof clone);
	read_sysctl("/proc/sys/user/max_user_namespaces", max, sizeof max);
	snprintf(iso->why, sizeof iso->why, "user namespaces: %s: %s%s%s%s", isolate_step_name(msg[1]),
	    n == (ssize_t)sizeof msg ? strerror(msg[0]) : "the probe died",
	    strcmp(clone, "0") == 0 ? " (kernel.unprivileged_userns_clone is 0)" : "",
	    strcmp(max, "0") == 0 ? " (user.max_user_namespaces is 0)" : "",
	    msg[1] == S_UNSHARE && msg[0] == EPERM ? " (a seccomp filter or a systemd "
	    "RestrictNamespaces= may forbid them)" : "");
	return -1;
}

/* user: look the guest user up and check that we can become it. */
static int
resolve_user(const char *name, struct isolate *iso, struct ek_err *e)
{
	struct passwd *pw = getpwnam(name);
	int n = ISOLATE_GROUPS_MAX;
	char *end;
	long v;

	if (!pw && isdigit((unsigned char)name[0]) && (v = strtol(name, &end, 10)) >= 0 && !*end)
		pw = getpwuid((uid_t)v);
	if (!pw)
		return ek_fail(e, ISOLATE_REFUSED, "--guest-user: no user '%s'", name);
	if (pw->pw_uid == 0 || pw->pw_uid == geteuid())
		return ek_fail(e, ISOLATE_REFUSED, "--guest-user: '%s' is %s: guests need a user of their "
		    "own", name, pw->pw_uid == 0 ? "root" : "the executor's own user");
	if (geteuid() != 0 && !(has_cap(CAP_SETUID) && has_cap(CAP_SETGID) && has_cap(CAP_KILL)))
		return ek_fail(e, ISOLATE_REFUSED, "--guest-user needs root, or the capabilities "
		    "CAP_SETUID, CAP_SETGID and CAP_KILL (to end the guest)");
	iso->uid = pw->pw_uid;
	iso->gid = pw->pw_gid;
	snprintf(iso->user, sizeof iso->user, "%s", pw->pw_name);
	snprintf(iso->home, sizeof iso->home, "%s", pw->pw_dir && *pw->pw_dir ? pw->pw_dir : "/");
	if (getgrouplist(pw->pw_name, pw->pw_gid, iso->groups, &n) < 0)
		return ek_fail(e, ISOLATE_REFUSED, "--guest-user: '%s' is in more than %d groups", name,
		    ISOLATE_GROUPS_MAX);
	iso->ngroups = n;
	/* A mount namespace for its private /tmp needs CAP_SYS_ADMIN. */
	iso->newns = geteuid() == 0 || has_cap(CAP_SYS_ADMIN);
	return 0;
}

/* user, as root with no --guest-user: the first default guest user that
 * exists, or refuse (guests would write as root everywhere). */
static int
resolve_default_user(struct isolate *iso, struct ek_err *e)
{
	static const char *const users[] = ISOLATE_DEFAULT_USERS;
	size_t i;

	for (i = 0; i < sizeof users / sizeof users[0]; i++)
		if (getpwnam(users[i])) {
			iso->default_user = true;
			return resolve_user(users[i], iso, e);
		}
	return ek_fail(e, ISOLATE_REFUSED, "running as root, guests would run as root: no guest user "
	    "(%s, %s) exists; name one with --guest-user USER, or choose --isolation userns or none",
	    users[0], users[1]);
}

int
isolate_resolve(enum isolate_mode want, const char *guest_user, bool require,
    const char *state_dir, struct isolate *iso, struct ek_err *e)
{
	memset(iso, 0, sizeof *iso);
	iso->landlock = world_landlock_abi();
	iso->uid = geteuid();
	iso->gid = getegid();
	iso->mode = want == ISOLATE_AUTO ? (guest_user || geteuid() == 0 ? ISOLATE_USER :
	    ISOLATE_USERNS) : want;
	if (iso->mode == ISOLATE_USER && !guest_user && want == ISOLATE_AUTO)
		return resolve_default_user(iso, e);
	if (iso->mode == ISOLATE_USER)
		return resolve_user(guest_user ? guest_user : "", iso, e);
	if (iso->mode == ISOLATE_NONE)
		snprintf(iso->why, sizeof iso->why, "--isolation none");
	if (iso->mode == ISOLATE_USERNS && probe_userns(iso, state_dir) < 0) {
		if (want == ISOLATE_USERNS)
			return ek_fail(e, ISOLATE_REFUSED, "--isolation userns is not available here: %s",
			    iso->why);
		iso->mode = ISOLATE_NONE;
		iso->fallback = true;
	}
	if (iso->mode == ISOLATE_NONE && require)
		return ek_fail(e, ISOLATE_REFUSED, "guests would not be isolated (%s) and "
		    "--require-isolation is given: no guest is run", iso->why);
	return 0;
}

void
isolate_describe(const struct isolate *iso, char *buf, size_t n)
{
	char sig[256];

	if (iso->landlock >= ISOLATE_LANDLOCK_SIGNALS)
		snprintf(sig, sizeof sig, "they write only to their working directory, private "
		    "directories and the paths made writable, and cannot signal processes outside "
		    "(Landlock ABI %d)", iso->landlock);
	else
		snprintf(sig, sizeof sig, "%sthey can still signal any process of their uid (Landlock "
		    "ABI %d; scoping signals needs %d)", iso->landlock >= 1 ? "they write only to their "
		    "working directory, private directories and the paths made writable; " :
		    "their writes are not limited by Landlock; ", iso->landlock, ISOLATE_LANDLOCK_SIGNALS);
	if (iso->mode == ISOLATE_USER)
		snprintf(buf, n, "user: guests run as '%s' (uid %u%s), shut out of the state directory, "
		    "%s; %s", iso->user, (unsigned)iso->uid, iso->default_user ? ", the default guest user "
		    "of a root executor" : "", iso->newns ? "with a private /tmp, /var/tmp and /dev/shm" :
		    "sharing /tmp, /var/tmp and /dev/shm (a private one needs CAP_SYS_ADMIN)", sig);
	else if (iso->mode == ISOLATE_USERNS)
		snprintf(buf, n, "userns: guests run in user and mount namespaces of their own%s, the "
		    "state directory hidden, a private /tmp, /var/tmp and /dev/shm; %s",
		    iso->uid == 0 ? " (as uid 0 in theirs, without capabilities)" : "", sig);
	else
		snprintf(buf, n, "none: guests are not isolated (%s): they run as uid %u and can read "
		    "the state directory", iso->why, (unsigned)geteuid());
}

/* --- the guest's view ------------------------------------------------------ */

int
isolate_view_create(const struct state *st, const struct isolate *iso, const char *run_id,
    struct ek_err *e)
{
	/* user: the guest user searches it (through its descriptor) and reads
	 * the file in it; nothing above it lets it further. */
	mode_t mode = iso->mode == ISOLATE_USER ? 0711 : 0700;
	char name[NAME_MAX + 8], path[PATH_MAX];
	int fd = -1;

	if (iso->mode == ISOLATE_NONE)
		return 0;
	if (isolate_view_name(run_id, name, sizeof name) < 0 || state_path(st, name, path, sizeof path) < 0)
		return ek_fail(e, EK_SOFTWARE, "state directory path too long");
	if (st->out_fd < 0 || mkdirat(st->out_fd, name + 4, mode) < 0 ||
	    (fd = state_open_dir(st, name, NULL)) < 0 || fchmod(fd, mode) < 0) {
		ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", path,
		    st->out_fd < 0 ? "no out/ directory" : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

void
isolate_view_remove(const struct state *st, const char *run_id)
{
	char name[NAME_MAX + 8], file[NAME_MAX + 8];
	int fd;

	int tries;

	if (isolate_view_name(run_id, name, sizeof name) < 0 || (fd = state_open_dir(st, name, NULL)) < 0)
		return;
	/* A publisher that chose this run before it left may still be writing
	 * its copy: a second round catches that. */
	for (tries = 0; tries < 2; tries++) {
		snprintf(file, sizeof file, "%s.limits", run_id);
		unlinkat(fd, file, 0);
		snprintf(file, sizeof file, "%s.limits.tmp", run_id);
		unlinkat(fd, file, 0);
		if (unlinkat(st->out_fd, name + 4, AT_REMOVEDIR) == 0 || errno != ENOTEMPTY)
			break;
	}
	close(fd);
}
