/* world — see world.h. */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "world.h"

static const char *const private_dirs[] = { "/tmp", "/var/tmp", "/dev/shm" };

/* Written to by most programs; each gets file write access only. */
static const char *const devices[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/tty",
	"/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/pts" };

void
world_init(struct world *w)
{
	w->n = 0;
	w->no_network = false;
}

int
world_parse_network(const char *s, bool *none)
{
	if (strcmp(s, "none") != 0 && strcmp(s, "host") != 0)
		return -1;
	*none = strcmp(s, "none") == 0;
	return 0;
}

/* Is p (absolute) a or beneath it? */
static bool
beneath(const char *p, const char *a)
{
	size_t n = strlen(a);

	if (n == 1)
		return true;   /* "/" */
	return strncmp(p, a, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int
world_add(struct world *w, const char *path, struct ek_err *e)
{
	char real[PATH_MAX];
	int i;

	if (path[0] != '/')
		return ek_fail(e, EK_USAGE, "'%.200s' is not an absolute path", path);
	if (!realpath(path, real)) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return ek_fail(e, EK_USAGE, "'%.200s': %s", path, strerror(errno));
	}
	for (i = 0; i < w->n; i++)
		if (strcmp(w->path[i], real) == 0)
			return 0;
	if (w->n >= WORLD_MAX)
		return ek_fail(e, EK_USAGE, "more than %d writable paths", WORLD_MAX);
	strcpy(w->path[w->n++], real);
	return 1;
}

int
world_add_list(struct world *w, const char *list, struct ek_err *e)
{
	char buf[PATH_MAX];
	const char *p = list, *end;
	size_t n;

	while (p && *p) {
		end = strchr(p, ':');
		n = end ? (size_t)(end - p) : strlen(p);
		if (n >= sizeof buf)
			return ek_fail(e, EK_USAGE, "a writable path is too long");
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (n && world_add(w, buf, e) < 0)
			return -1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

struct world *
world_for_run(const struct world *op, json_t *policy, const char *cwd)
{
	struct world *w = malloc(sizeof *w);
	json_t *v;
	struct ek_err e;
	size_t i;

	if (!w)
		return NULL;
	world_init(w);
	for (i = 0; op && i < (size_t)op->n; i++)
		strcpy(w->path[w->n++], op->path[i]);
	v = json_object_get(policy, "network");
	w->no_network = (op && op->no_network) || (json_is_string(v) &&
	    strcmp(json_string_value(v), "none") == 0);
	/* Checked at acceptance (runs.c): absolute, at most WORLD_POLICY_MAX.
	 * One that cannot be resolved now widens nothing. */
	json_array_foreach(json_object_get(policy, "writable"), i, v)
		if (json_is_string(v) && i < WORLD_POLICY_MAX)
			(void)world_add(w, json_string_value(v), &e);
	if (cwd && strcmp(cwd, "/") != 0)
		(void)world_add(w, cwd, &e);
	return w;
}

int
world_from_env(struct world *w, struct ek_err *e)
{
	const char *list = getenv("EXEC_GUEST_WRITABLE"), *net = getenv("EXEC_GUEST_NETWORK");

	if (net && *net && world_parse_network(net, &w->no_network) < 0)
		return ek_fail(e, EK_USAGE, "EXEC_GUEST_NETWORK: '%.100s' is not none or host", net);
	if (list && world_add_list(w, list, e) < 0)
		return ek_fail(e, e->code, "EXEC_GUEST_WRITABLE: %s", e->msg);
	if (w->n > WORLD_OPERATOR_MAX)
		return ek_fail(e, EK_USAGE, "EXEC_GUEST_WRITABLE: more than %d paths", WORLD_OPERATOR_MAX);
	return 0;
}

int
world_to_env(const struct world *w, struct ek_err *e)
{
	char *list = calloc((size_t)w->n + 1, PATH_MAX + 1);
	size_t n = 0;
	int i, rc;

	if (!list)
		return ek_fail(e, EK_OSERR, "out of memory");
	for (i = 0; i < w->n; i++)
		n += (size_t)sprintf(list + n, "%s%s", i ? ":" : "", w->path[i]);
	rc = w->n ? setenv("EXEC_GUEST_WRITABLE", list, 1) : unsetenv("EXEC_GUEST_WRITABLE");
	free(list);
	if (rc == 0)
		rc = setenv("EXEC_GUEST_NETWORK", w->no_network ? "none" : "host", 1);
	return rc < 0 ? ek_fail(e, EK_OSERR, "setenv: %s", strerror(errno)) : 0;
}

/* --- in the guest's child: system calls only --------------------------------------- */

int
world_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t i, n = strlen(path);

	if (n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++)
		if (buf[i] == '/' || buf[i] == '\0') {
			buf[i] = '\0';
			/* 0755 whatever the umask: another guest user passes through */
			if (mkdir(buf, 0755) == 0 ? chmod(buf, 0755) < 0 : errno != EEXIST)
				return -1;
			buf[i] = path[i];
		}
	return 0;
}

int
world_no_network(void)
{
	struct ifreq ifr;
	int fd, rc, err;

	if (unshare(CLONE_NEWNET) < 0)
		return -1;
	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (rc == 0)
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	err = errno;
	close(fd);
	errno = err;
	return rc;
}

bool
world_reaches(const struct world *w, const char *path)
{
	const char *const *lists[] = { private_dirs, devices };
	size_t sizes[] = { sizeof private_dirs / sizeof private_dirs[0], sizeof devices / sizeof devices[0] }, l, i;
	int j;

	for (l = 0; l < 2; l++)
		for (i = 0; i < sizes[l]; i++)
			if (beneath(path, lists[l][i]) || beneath(lists[l][i], path))
				return true;
	for (j = 0; j < w->n; j++)
		if (beneath(path, w->path[j]) || beneath(w->path[j], path))
			return true;
	return false;
}

/* Does w share private directory d (a path of w is d or holds it)? */
static bool
shared(const struct world *w, const char *d)
{
	int i;

	for (i = 0; i < w->n; i++)
		if (beneath(d, w->path[i]))
			return true;
	return false;
}

static int
fail_at(int *step, int s)
{
	*step = s;
	return -1;
}

int
world_private(const struct world *w, int *step)
{
	int fd[WORLD_MAX], i, rc = 0;
	char fdpath[64];
	size_t d;

	/* Opened before any tmpfs covers them. */
	for (i = 0; i < w->n; i++)
		fd[i] = open(w->path[i], O_PATH | O_CLOEXEC);
	for (d = 0; rc == 0 && d < sizeof private_dirs / sizeof private_dirs[0]; d++) {
		if (shared(w, private_dirs[d]))
			continue;
		if (mount("tmpfs", private_dirs[d], "tmpfs", MS_NOSUID | MS_NODEV,
		    "mode=1777,size=" WORLD_TMP_SIZE ",nr_inodes=64k") < 0) {
			if (errno == ENOENT)   /* no such directory here: nothing to hide */
				continue;
			rc = fail_at(step, WORLD_TMPFS);
			break;
		}
		for (i = 0; rc == 0 && i < w->n; i++) {
			if (fd[i] < 0 || !beneath(w->path[i], private_dirs[d]))
				continue;
			snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd[i]);
			if (world_mkdirs(w->path[i]) < 0)
				rc = fail_at(step, WORLD_MKDIR);
			else if (mount(fdpath, w->path[i], NULL, MS_BIND | MS_REC, NULL) < 0)
				rc = fail_at(step, WORLD_BIND);
		}
	}
	for (i = 0; i < w->n; i++)
		if (fd[i] >= 0) {
			int err = errno;
			close(fd[i]);
			errno = err;
		}
	return rc;
}

/* --- Landlock --------------------------------------------------------------- */

/* The ruleset attribute as of ABI 6 (older headers lack its later fields). */
struct ll_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};
struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_VERSION_FLAG (1U << 0)       /* LANDLOCK_CREATE_RULESET_VERSION */
#define LL_RULE_PATH_BENEATH 1
#define LL_SCOPE_SIGNALS (1ULL << 1)
#define LL_WRITE_FILE (1ULL << 1)
#define LL_REMOVE_DIR (1ULL << 4)
#define LL_REMOVE_FILE (1ULL << 5)
#define LL_MAKE_ALL (0x7fULL << 6)      /* MAKE_CHAR .. MAKE_SYM */
#define LL_REFER (1ULL << 13)           /* ABI 2 */
#define LL_TRUNCATE (1ULL << 14)        /* ABI 3 */

int
world_landlock_abi(void)
{
#ifdef SYS_landlock_create_ruleset
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_VERSION_FLAG);

	return v > 0 ? (int)v : 0;
#else
	return 0;
#endif
}

#ifdef SYS_landlock_create_ruleset
/* Let path (if it exists) be written as rights allow: dir holds for a
 * directory and what is beneath it, file for anything else. */
static int
allow(int ruleset, const char *path, uint64_t dir, uint64_t file)
{
	struct ll_path_beneath rule;
	struct stat sb;
	int fd = open(path, O_PATH | O_CLOEXEC), rc, err;

	if (fd < 0)
		return 0;   /* not here: nothing to allow */
	rule.parent_fd = fd;
	rule.allowed_access = fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode) ? dir : file;
	rc = (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0);
	err = errno;
	close(fd);
	errno = err;
	return rc;
}

/* Add w's rules to ruleset: 0, or -1 (errno). */
static int
allow_world(int ruleset, const struct world *w, uint64_t dir, uint64_t file)
{
	size_t i;
	int j;

	for (i = 0; i < sizeof private_dirs / sizeof private_dirs[0]; i++)
		if (allow(ruleset, private_dirs[i], dir, file) < 0)
			return -1;
	for (i = 0; i < sizeof devices / sizeof devices[0]; i++)
		if (allow(ruleset, devices[i], dir, file) < 0)
			return -1;
	for (j = 0; j < w->n; j++)
		if (allow(ruleset, w->path[j], dir, file) < 0)
			return -1;
	return 0;
}
#endif

int
world_landlock(const struct world *w, int abi, bool scope_signals)
{
#ifdef SYS_landlock_create_ruleset
	struct ll_attr attr = { 0, 0, 0 };
	uint64_t file = LL_WRITE_FILE | (abi >= 3 ? LL_TRUNCATE : 0);
	size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
	int fd, rc = 0, err;

	if (w && abi >= 1)
		attr.handled_access_fs = file | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_ALL |
		    (abi >= 2 ? LL_REFER : 0);
	if (scope_signals && abi >= 6)
		attr.scoped = LL_SCOPE_SIGNALS;
	if (!attr.handled_access_fs && !attr.scoped)
		return 0;
	if ((fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0)) < 0)
		return -1;
	if (attr.handled_access_fs)
		rc = allow_world(fd, w, attr.handled_access_fs, file);
	if (rc == 0)
		rc = (int)syscall(SYS_landlock_restrict_self, fd, 0);
	err = errno;
	close(fd);
	errno = err;
	return rc;
#else
	(void)w, (void)abi, (void)scope_signals;
	return 0;
#endif
}
