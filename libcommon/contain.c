/* contain — see contain.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>   /* struct clone_args, CLONE_INTO_CGROUP */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "contain.h"

void
contain_init(struct contain *c)
{
	c->parent_fd = c->dir_fd = -1;
	c->v1_parent[0] = c->v1_parent[1] = c->v1_procs[0] = c->v1_procs[1] = -1;
	c->name[0] = c->path[0] = '\0';
}

void
contain_close(struct contain *c)
{
	int i;

	if (c->dir_fd >= 0)
		close(c->dir_fd);
	if (c->parent_fd >= 0)
		close(c->parent_fd);
	for (i = 0; i < 2; i++) {
		if (c->v1_procs[i] >= 0)
			close(c->v1_procs[i]);
		if (c->v1_parent[i] >= 0) {
			/* Empty by now (cgroup.kill) where there is a v2 cgroup: else
			 * rmdir fails, and it is left. */
			unlinkat(c->v1_parent[i], c->name, AT_REMOVEDIR);
			close(c->v1_parent[i]);
		}
	}
	contain_init(c);
}

/* --- where our cgroup is ------------------------------------------------------ */

/* Undo mountinfo's octal escapes ("\040" for a space) in place. */
static void
unescape(char *s)
{
	char *d = s;

	for (; *s; s++, d++)
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else
			*d = *s;
	*d = '\0';
}

/* The cgroup directories this process uses, each looked up once: a
 * supervisor goes on through a chain of runs, and reading mountinfo and our
 * cgroup again for every run (and sweeping the parents for what a vanished
 * supervisor left) was most of what a run's cgroups cost.  Only a lookup
 * that succeeded is kept. */
struct cg_dir { bool found, swept; char dir[PATH_MAX]; };
static struct cg_dir v2_dir, v1_dirs[2];

/* Sweep parent_fd for a vanished supervisor's cgroups, once per process. */
static void remove_stale(int parent_fd);
static void
sweep_once(struct cg_dir *c, int parent_fd)
{
	if (!c->swept)
		remove_stale(parent_fd);
	c->swept = true;
}

/* The first cgroup2 mount: its mount point and the cgroup it shows as its
 * root (fields 5 and 4 of /proc/self/mountinfo, fstype after " - "). */
static int
cgroup2_mount(char mnt[PATH_MAX], char root[PATH_MAX], struct ek_err *e)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *sep, *save, *field[5];
	size_t cap = 0;
	int found = 0, i;

	if (!f)
		return ek_fail(e, EK_OSERR, "cannot read /proc/self/mountinfo: %s", strerror(errno));
	while (!found && getline(&line, &cap, f) > 0) {
		if (!(sep = strstr(line, " - ")) || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		*sep = '\0';
		for (i = 0; i < 5; i++)
			field[i] = strtok_r(i ? NULL : line, " ", &save);
		if (!field[4])
			continue;
		unescape(field[3]);
		unescape(field[4]);
		if (strlen(field[3]) < PATH_MAX && strlen(field[4]) < PATH_MAX) {
			strcpy(root, field[3]);
			strcpy(mnt, field[4]);
			found = 1;
		}
	}
	free(line);
	fclose(f);
	return found ? 0 : ek_fail(e, EK_UNAVAILABLE, "no cgroup2 hierarchy is mounted");
}

/* Our cgroup v2 path, from the "0::PATH" line of /proc/self/cgroup. */
static int
own_cgroup(char own[PATH_MAX], struct ek_err *e)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int found = 0;

	if (!f)
		return ek_fail(e, EK_OSERR, "cannot read /proc/self/cgroup: %s", strerror(errno));
	while (!found && (n = getline(&line, &cap, f)) > 0) {
		if (strncmp(line, "0::", 3) != 0 || (size_t)n - 3 >= PATH_MAX)
			continue;
		line[strcspn(line, "\n")] = '\0';
		strcpy(own, line + 3);
		found = 1;
	}
	free(line);
	fclose(f);
	return found ? 0 : ek_fail(e, EK_UNAVAILABLE, "this process is in no cgroup v2 hierarchy");
}

int
contain_cgroup_dir(char *dir, size_t size, struct ek_err *e)
{
	char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX];
	const char *rest;
	size_t n;

	if (v2_dir.found)
		return snprintf(dir, size, "%s", v2_dir.dir) >= (int)size ?
		    ek_fail(e, EK_UNAVAILABLE, "cgroup path too long") : 0;
	if (cgroup2_mount(mnt, root, e) < 0 || own_cgroup(own, e) < 0)
		return -1;
	n = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(own, root, n) != 0 || (own[n] != '/' && own[n] != '\0'))
		return ek_fail(e, EK_UNAVAILABLE, "our cgroup '%s' is outside the cgroup2 mount at '%s'",
		    own, mnt);
	rest = strcmp(own + n, "/") == 0 ? "" : own + n;
	if (snprintf(dir, size, "%s%s", mnt, rest) >= (int)size)
		return ek_fail(e, EK_UNAVAILABLE, "cgroup path too long");
	v2_dir.found = snprintf(v2_dir.dir, sizeof v2_dir.dir, "%s", dir) < (int)sizeof v2_dir.dir;
	return 0;
}

/* --- the guest's cgroup ------------------------------------------------------- */

/* Remove what a vanished supervisor left: PREFIX + PID + "-..." whose PID is
 * gone.  One that still holds processes stays (rmdir refuses it). */
static void
remove_stale(int parent_fd)
{
	size_t np = strlen(CONTAIN_PREFIX);
	int fd = dup(parent_fd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;
	char *end;
	long pid;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strncmp(de->d_name, CONTAIN_PREFIX, np) == 0 && isdigit((unsigned char)de->d_name[np]) &&
		    (pid = strtol(de->d_name + np, &end, 10)) > 0 && *end == '-' &&
		    kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			unlinkat(parent_fd, de->d_name, AT_REMOVEDIR);
	closedir(d);
}

/* Fill e with "what 'path': cause", undo what create did, return -1. */
static int
give_up(struct contain *c, bool created, struct ek_err *e, const char *what, const char *path, int err)
{
	ek_fail(e, err == ENOENT || err == EACCES || err == EPERM || err == EROFS ? EK_UNAVAILABLE : EK_OSERR,
	    "%s '%s': %s", what, path, strerror(err));
	if (created)
		unlinkat(c->parent_fd, c->name, AT_REMOVEDIR);
	contain_close(c);
	return -1;
}

/* The cgroup a guest of ours left empty, kept for the next
 * (contain_cgroup_end): its parent's descriptor, its own, its name. */
static struct contain spare = { .parent_fd = -1, .dir_fd = -1, .v1_parent = { -1, -1 },
	.v1_procs = { -1, -1 } };

static void
drop_spare(void)
{
	if (spare.dir_fd >= 0)
		unlinkat(spare.parent_fd, spare.name, AT_REMOVEDIR);
	contain_close(&spare);
}

/* Give c the spare cgroup if it has c's name: true, or false. */
static bool
take_spare(struct contain *c)
{
	if (spare.dir_fd < 0 || strcmp(spare.name, c->name) != 0)
		return false;
	c->parent_fd = spare.parent_fd;
	c->dir_fd = spare.dir_fd;
	spare.parent_fd = spare.dir_fd = -1;
	contain_close(&spare);
	return true;
}

int
contain_cgroup_create(struct contain *c, const char *name, struct ek_err *e)
{
	char dir[PATH_MAX];
	int made;

	contain_init(c);
	if (contain_cgroup_dir(dir, sizeof dir, e) < 0)
		return -1;
	if (snprintf(c->name, sizeof c->name, "%s%s", CONTAIN_PREFIX, name) >= (int)sizeof c->name ||
	    snprintf(c->path, sizeof c->path, "%s/%s", dir, c->name) >= (int)sizeof c->path) {
		contain_init(c);
		return ek_fail(e, EK_UNAVAILABLE, "cgroup path too long");
	}
	if (take_spare(c))
		return 0;
	if ((c->parent_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return give_up(c, false, e, "cannot open our cgroup", dir, errno);
	sweep_once(&v2_dir, c->parent_fd);
	made = mkdirat(c->parent_fd, c->name, 0755) == 0;
	if (!made && errno == EEXIST)   /* our pid's, so a vanished supervisor's */
		made = unlinkat(c->parent_fd, c->name, AT_REMOVEDIR) == 0 &&
		    mkdirat(c->parent_fd, c->name, 0755) == 0;
	if (!made)
		return give_up(c, false, e, "cannot create cgroup", c->path, errno);
	if ((c->dir_fd = openat(c->parent_fd, c->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return give_up(c, true, e, "cannot open cgroup", c->path, errno);
	if (faccessat(c->dir_fd, "cgroup.kill", W_OK, 0) < 0)
		return give_up(c, true, e, "no cgroup.kill (Linux 5.14 or later) in", c->path, errno);
	return 0;
}

/* --- resource limits ------------------------------------------------------------ */

/* The v1 hierarchy of controller ctl: its mount point and root (mountinfo:
 * fstype "cgroup", ctl among the super options), and our cgroup in it
 * (/proc/self/cgroup: "N:ctl,...:PATH"): its directory in dir. */
static int
v1_lookup(const char *ctl, char *dir, size_t size)
{
	char *line = NULL, *sep, *save, *field[5], *opt, mnt[PATH_MAX] = "", root[PATH_MAX] = "";
	size_t cap = 0, n = strlen(ctl), i;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	const char *rest = NULL;

	while (f && !mnt[0] && getline(&line, &cap, f) > 0) {
		if (!(sep = strstr(line, " - cgroup ")) || !(opt = strrchr(sep, ' ')))
			continue;
		for (opt++; *opt && !mnt[0]; opt += strcspn(opt, ","), opt += *opt == ',')
			if (strncmp(opt, ctl, n) == 0 && (opt[n] == ',' || opt[n] == '\n' || !opt[n])) {
				*sep = '\0';
				for (i = 0; i < 5; i++)
					field[i] = strtok_r(i ? NULL : line, " ", &save);
				if (field[4] && strlen(field[4]) < PATH_MAX && strlen(field[3]) < PATH_MAX) {
					unescape(field[3]);
					unescape(field[4]);
					strcpy(root, field[3]);
					strcpy(mnt, field[4]);
				}
				break;
			}
	}
	if (f)
		fclose(f);
	f = mnt[0] ? fopen("/proc/self/cgroup", "re") : NULL;
	while (f && !rest && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (!(sep = strchr(line, ':')) || !(opt = strchr(sep + 1, ':')))
			continue;
		*opt = '\0';
		for (sep++; *sep && !rest; sep += strcspn(sep, ","), sep += *sep == ',')
			if (strncmp(sep, ctl, n) == 0 && (sep[n] == ',' || !sep[n]))
				rest = opt + 1;
	}
	if (f)
		fclose(f);
	n = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (rest && strncmp(rest, root, n) == 0)
		rest += n;
	i = rest && snprintf(dir, size, "%s%s", mnt, strcmp(rest, "/") == 0 ? "" : rest) < (int)size;
	free(line);
	return i ? 0 : -1;
}

/* v1_lookup, once per process and controller (i: 0 pids, 1 memory). */
static int
v1_dir(int i, const char *ctl, char *dir, size_t size)
{
	struct cg_dir *c = &v1_dirs[i];

	if (!c->found && v1_lookup(ctl, c->dir, sizeof c->dir) == 0)
		c->found = true;
	return c->found && snprintf(dir, size, "%s", c->dir) < (int)size ? 0 : -1;
}

/* Write value into file of directory fd: 0, or -1 (errno). */
static int
write_value(int fd, const char *file, int64_t value)
{
	char buf[32];
	int f = openat(fd, file, O_WRONLY | O_CLOEXEC), n = snprintf(buf, sizeof buf, "%lld",
	    (long long)value), rc, err;

	if (f < 0)
		return -1;
	rc = write(f, buf, (size_t)n) == n ? 0 : -1;
	err = errno;
	close(f);
	errno = err;
	return rc;
}

static const char *const v1_ctl[] = { "pids", "memory" }, *const v1_file[] = { "pids.max",
	"memory.limit_in_bytes" };

/* Make (or find) cgroup name in controller i's v1 hierarchy, sweeping
 * the parent for a vanished supervisor's first: its directory's
 * descriptor, or -1 (why says what failed).  *parent (NULL: closed) gets
 * the parent's. */
static int
v1_child(int i, const char *name, int *parent, char *why, size_t n)
{
	char dir[PATH_MAX];
	int p, fd = -1;

	if (v1_dir(i, v1_ctl[i], dir, sizeof dir) < 0) {
		snprintf(why, n, "no %s controller in cgroup v2 here, nor a v1 hierarchy", v1_ctl[i]);
		return -1;
	}
	if ((p = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		sweep_once(&v1_dirs[i], p);
		if (mkdirat(p, name, 0755) == 0 || errno == EEXIST)
			fd = openat(p, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		snprintf(why, n, "cannot make cgroup '%.200s/%.100s': %s", dir, name, strerror(errno));
	if (parent && fd >= 0)
		*parent = p;
	else if (p >= 0)
		close(p);
	return fd;
}

/* Limit i (0 pids, 1 memory) in a v1 cgroup of c's name: 0, or -1 (why). */
static int
limit_v1(struct contain *c, int i, int64_t value, char *why, size_t n)
{
	int fd = v1_child(i, c->name, &c->v1_parent[i], why, n);

	if (fd < 0)
		return -1;
	if (write_value(fd, v1_file[i], value) < 0 ||
	    (c->v1_procs[i] = openat(fd, "cgroup.procs", O_WRONLY | O_CLOEXEC)) < 0) {
		snprintf(why, n, "cannot set %s of cgroup '%.100s': %s", v1_file[i], c->name,
		    strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* This process's slot cgroups in the v1 hierarchies (contain_limit_slot):
 * the directory once made and joined, and the limit last written there. */
static struct { int fd; int64_t value; } slot[2] = { { -1, 0 }, { -1, 0 } };
/* Our OOM score before we made ourselves unkillable in a slot, which the
 * guest's child takes back (contain_child_join); empty: left as it was. */
static char oom_orig[16];

/* A kernel OOM kill in the memory slot must pick the guest, never its
 * supervisor: where we may (CAP_SYS_RESOURCE), the supervisor opts out. */
static void
oom_opt_out(void)
{
	char buf[16] = "";
	int fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	if ((n = read(fd, buf, sizeof buf - 1)) > 0 && lseek(fd, 0, SEEK_SET) == 0 &&
	    write(fd, "-1000", 5) == 5) {
		buf[n] = '\0';
		snprintf(oom_orig, sizeof oom_orig, "%s", buf);
	}
	close(fd);
}

/* Make, and join, this process's slot cgroup of controller i: 0, or -1. */
static int
slot_join(int i, char *why, size_t n)
{
	char name[NAME_MAX + 1];
	int fd, procs = -1;

	snprintf(name, sizeof name, "%s%ld-slot", CONTAIN_PREFIX, (long)getpid());
	if ((fd = v1_child(i, name, NULL, why, n)) < 0)
		return -1;
	if ((procs = openat(fd, "cgroup.procs", O_WRONLY | O_CLOEXEC)) < 0 || write(procs, "0", 1) != 1) {
		snprintf(why, n, "cannot join cgroup '%.100s': %s", name, strerror(errno));
		if (procs >= 0)
			close(procs);
		close(fd);
		return -1;
	}
	close(procs);
	slot[i].fd = fd;
	if (i == 1)
		oom_opt_out();
	return 0;
}

/* Limit i in our slot cgroup: value for the guest, plus ourselves (one
 * process; the few pages we allocate after joining). */
static int
limit_slot(int i, int64_t value, char *why, size_t n)
{
	int64_t total = value + (i == 0 ? 1 : 0);

	if (slot[i].fd < 0 && slot_join(i, why, n) < 0)
		return -1;
	if (slot[i].value == total)
		return 0;
	if (write_value(slot[i].fd, v1_file[i], total) < 0) {
		snprintf(why, n, "cannot set %s of our slot cgroup: %s", v1_file[i], strerror(errno));
		slot[i].value = 0;
		return -1;
	}
	slot[i].value = total;
	return 0;
}

int
contain_limit(struct contain *c, const char *name, const struct contain_limits *l,
    struct ek_err *warn)
{
	static const char *const v2[] = { "pids.max", "memory.max" };
	int64_t value[2] = { l->pids_max, l->memory_max };
	char why[2][PATH_MAX + 128] = { "", "" };
	int i;

	if (!l->slot && !c->name[0] && snprintf(c->name, sizeof c->name, "%s%s", CONTAIN_PREFIX,
	    name) >= (int)sizeof c->name)
		return ek_fail(warn, EK_UNAVAILABLE, "cgroup name too long");
	for (i = 0; i < 2; i++)
		if (value[i] > 0 && (c->dir_fd < 0 || write_value(c->dir_fd, v2[i], value[i]) < 0)) {
			if (l->slot)
				limit_slot(i, value[i], why[i], sizeof why[i]);
			else
				limit_v1(c, i, value[i], why[i], sizeof why[i]);
		}
	if (!why[0][0] && !why[1][0])
		return 0;
	return ek_fail(warn, EK_UNAVAILABLE, "%s%s%s", why[0], why[0][0] && why[1][0] ? "; " : "",
	    why[1]);
}

void
contain_child_join(const struct contain *c)
{
	int i, fd;

	for (i = 0; c && i < 2; i++)
		if (c->v1_procs[i] >= 0)
			(void)!write(c->v1_procs[i], "0", 1);
	if (oom_orig[0] && (fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC)) >= 0) {
		(void)!write(fd, oom_orig, strlen(oom_orig));
		close(fd);
	}
}

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
/* clone3(args, size); in the child, fn(arg) on the stack args names, and
 * exit(127) should fn return: its pid or -errno.  In assembly because a
 * child that shares our memory must not return through our stack frames
 * (glibc exports no clone3 wrapper).  Left out under AddressSanitizer:
 * its checks do not follow a change of stack. */
#define STR_(x) #x
#define STR(x) STR_(x)
long ek_clone3(struct clone_args *args, size_t size, void (*fn)(void *), void *arg);
__asm__(".text\n"
	".globl ek_clone3\n"
	".hidden ek_clone3\n"
	".type ek_clone3, @function\n"
	"ek_clone3:\n"
	"	mov %rdx, %r8\n"
	"	mov %rcx, %r9\n"
	"	mov $" STR(SYS_clone3) ", %eax\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jnz 1f\n"
	"	xor %ebp, %ebp\n"
	"	mov %r9, %rdi\n"
	"	call *%r8\n"
	"	mov $127, %edi\n"
	"	mov $" STR(SYS_exit) ", %eax\n"
	"	syscall\n"
	"	hlt\n"
	"1:	ret\n"
	".size ek_clone3, .-ek_clone3\n");

#define VM_STACK_SIZE (256 * 1024)

/* The child shares our memory and page tables until it execs or exits, and
 * we wait for that (CLONE_VFORK): nothing is copied, and we take no
 * copy-on-write fault afterwards.  One stack does for every child. */
static pid_t
clone_vm(const struct contain *c, void (*fn)(void *), void *arg)
{
	static char *stack;
	struct clone_args args = { .flags = CLONE_VM | CLONE_VFORK, .exit_signal = SIGCHLD };
	long page = sysconf(_SC_PAGESIZE), pid;

	if (!stack) {
		void *p = mmap(NULL, VM_STACK_SIZE + (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

		if (p == MAP_FAILED)
			return -1;
		(void)mprotect(p, (size_t)page, PROT_NONE);   /* a guard below it */
		stack = (char *)p + page;
	}
	args.stack = (uint64_t)(uintptr_t)stack;
	args.stack_size = VM_STACK_SIZE;
	if (c->dir_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)c->dir_fd;
	}
	pid = ek_clone3(&args, sizeof args, fn, arg);
	if (pid < 0) {
		errno = (int)-pid;
		return -1;
	}
	return (pid_t)pid;
}
#else
static pid_t
clone_vm(const struct contain *c, void (*fn)(void *), void *arg)
{
	(void)c, (void)fn, (void)arg;
	errno = ENOSYS;
	return -1;
}
#endif

/* fork(), the child born in c's cgroup when the kernel can (clone3
 * CLONE_INTO_CGROUP, Linux 5.7): *born_in is then true. */
static pid_t
clone_copy(const struct contain *c, bool *born_in)
{
	struct clone_args args = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD,
		.cgroup = (uint64_t)c->dir_fd };
	long pid;

	*born_in = false;
	if (c->dir_fd >= 0) {
		pid = syscall(SYS_clone3, &args, sizeof args);
		if (pid >= 0) {
			*born_in = true;
			return (pid_t)pid;
		}
		/* an older kernel (ENOSYS, E2BIG, EINVAL): fork, then move it */
	}
	return fork();
}

/* A copy of us runs fn(arg); one not born in c's cgroup waits until we
 * have moved it there. */
static pid_t
fork_copy(struct contain *c, void (*fn)(void *), void *arg, struct ek_err *warn)
{
	int go[2] = { -1, -1 };
	bool born_in;
	pid_t pid;
	char b;

	if (c->dir_fd >= 0 && pipe2(go, O_CLOEXEC) < 0)
		return -1;
	if ((pid = clone_copy(c, &born_in)) == 0) {
		if (go[0] >= 0 && !born_in) {
			close(go[1]);
			while (read(go[0], &b, 1) < 0 && errno == EINTR)
				;
		}
		fn(arg);
		_exit(127);
	}
	if (pid > 0 && !born_in && c->dir_fd >= 0)
		contain_cgroup_enter(c, pid, warn);
	if (go[0] >= 0) {
		close(go[0]);
		close(go[1]);      /* the child goes on */
	}
	return pid;
}

pid_t
contain_spawn(struct contain *c, void (*fn)(void *), void *arg, struct ek_err *warn)
{
	sigset_t all, old;
	pid_t pid;
	int err;

	/* None of our handlers may run in the child: it may share our memory. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = clone_vm(c, fn, arg);
	if (pid < 0 && (errno == ENOSYS || errno == E2BIG || errno == EINVAL || errno == ENOMEM))
		pid = fork_copy(c, fn, arg, warn);
	err = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return pid;
}

void
contain_child_signals(void)
{
	sigset_t none;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int
contain_cgroup_enter(struct contain *c, pid_t pid, struct ek_err *e)
{
	char buf[32];
	int fd, n = snprintf(buf, sizeof buf, "%d", (int)pid), err = 0;

	if (c->dir_fd < 0)
		return ek_fail(e, EK_SOFTWARE, "no cgroup to enter");
	if ((fd = openat(c->dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC)) < 0 || write(fd, buf, (size_t)n) != n)
		err = errno ? errno : EIO;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	if (err)
		return give_up(c, true, e, "cannot move the guest into cgroup", c->path, err);
	return 0;
}

/* From cgroup.events: 1 populated, 0 empty, -1 unreadable (errno set). */
static int
populated(int fd)
{
	char buf[256], *p;
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) < 0 || (n = read(fd, buf, sizeof buf - 1)) < 0)
		return -1;
	buf[n] = '\0';
	if (!(p = strstr(buf, "populated "))) {
		errno = EPROTO;
		return -1;
	}
	return p[10] != '0';
}

int
contain_cgroup_kill(struct contain *c, int64_t wait_ms, struct ek_err *e)
{
	int64_t until = mono_ms() + wait_ms, left;
	struct pollfd p = { .fd = -1, .events = POLLPRI };
	int fd, rc = 0, full;

	if (c->dir_fd < 0) {
		contain_close(c);
		return 0;
	}
	if ((fd = openat(c->dir_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC)) < 0 || write(fd, "1", 1) != 1)
		rc = ek_fail(e, EK_OSERR, "cannot write '%s/cgroup.kill': %s", c->path, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (p.fd = openat(c->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC)) < 0)
		rc = ek_fail(e, EK_OSERR, "cannot open '%s/cgroup.events': %s", c->path, strerror(errno));
	/* cgroup.events signals POLLPRI when it changes: wait on it, bounded. */
	while (rc == 0 && (full = populated(p.fd)) != 0) {
		if (full < 0)
			rc = ek_fail(e, EK_OSERR, "cannot read '%s/cgroup.events': %s", c->path, strerror(errno));
		else if ((left = until - mono_ms()) <= 0)
			rc = ek_fail(e, EK_TEMPFAIL, "cgroup '%s' still holds processes %lld ms after "
			    "cgroup.kill", c->path, (long long)wait_ms);
		else
			poll(&p, 1, left < 100 ? (int)left : 100);
	}
	if (p.fd >= 0)
		close(p.fd);
	/* A cgroup left here (still populated) is removed by a later create. */
	if (rc == 0 && unlinkat(c->parent_fd, c->name, AT_REMOVEDIR) < 0)
		rc = ek_fail(e, EK_OSERR, "cannot remove cgroup '%s': %s", c->path, strerror(errno));
	contain_close(c);
	return rc;
}

int
contain_cgroup_end(struct contain *c, bool keep, int64_t wait_ms, struct ek_err *e)
{
	static bool registered;
	int fd;

	keep = keep && c->dir_fd >= 0 && spare.dir_fd < 0 && c->v1_parent[0] < 0 && c->v1_parent[1] < 0;
	if (keep && (fd = openat(c->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC)) >= 0) {
		keep = populated(fd) == 0;
		close(fd);
	} else
		keep = false;
	if (!keep || (!registered && atexit(drop_spare) != 0))
		return contain_cgroup_kill(c, wait_ms, e);
	registered = true;
	spare = *c;
	c->parent_fd = c->dir_fd = -1;
	contain_close(c);
	return 0;
}
