/*
 * isolate_cost — what isolating a guest costs, per guest, against spawning
 * it bare: the floor of the "isolation" rows of bench/run.sh.
 *
 *   isolate_cost WAY N CGROUP-DIR
 *
 * Spawns /bin/true N times, one after the other (clone3, then waitpid),
 * and prints "<microseconds of wall time per guest> <of CPU per guest>"
 * (CPU: ours and our children's, user + system).  WAY:
 *
 *   bare       no namespace, no cgroup
 *   fresh      as exec-run did for every guest: a cgroup made for it (the
 *              guest born in it, clone3 CLONE_INTO_CGROUP), killed and
 *              removed after, and in the guest a user and a mount namespace of its
 *              own: maps written, / made private, a tmpfs for /tmp and one
 *              over a directory, a read-only bind
 *   kept       the same namespaces, in one cgroup kept for every guest
 *              and checked empty between them (exec-run now)
 *   spawner    a spawner that made the user namespace once: each guest
 *              gets only a mount namespace of its own, in the kept cgroup
 *   shared     a spawner that made the user and the mount namespace once
 *              and mounts a new tmpfs and bind in it before each guest (no
 *              namespace per guest at all), in the kept cgroup
 *
 * CGROUP-DIR is a writable cgroup v2 directory to make children in.
 * Exit status: 0; 1 a step failed (said on stderr); 64 usage.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum way { BARE, FRESH, KEPT, SPAWNER, SHARED };

static int parent = -1;       /* CGROUP-DIR */
static char dir[64];          /* our cgroup in it, once named */

/* Say what failed, and leave no cgroup of ours behind. */
static void
die(const char *what)
{
	perror(what);
	if (parent >= 0 && dir[0])
		unlinkat(parent, dir, AT_REMOVEDIR);
	exit(1);
}

static void
put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

static void
enter_userns(void)
{
	unsigned uid = getuid(), gid = getgid();   /* 65534 once unshared */
	char map[32];

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		die("unshare");
	put("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
	put("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
	put("/proc/self/gid_map", map);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("private /");
}

/* A guest's private mounts: /tmp, a tmpfs hiding /mnt, /mnt/out a
 * read-only bind of /etc (a stand-in for the view). */
static void
guest_mounts(void)
{
	if (mount("ek", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") < 0 ||
	    mount("ek", "/mnt", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k") < 0 ||
	    mkdir("/mnt/out", 0755) < 0 || mount("/etc", "/mnt/out", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/mnt/out", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
		die("mount");
}

static void
guest(enum way w)
{
	if (w == FRESH || w == KEPT)
		enter_userns();
	if (w == SPAWNER) {
		if (unshare(CLONE_NEWNS) < 0)
			die("unshare mount");
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			die("private /");
	}
	if (w == FRESH || w == KEPT || w == SPAWNER)
		guest_mounts();
	execl("/bin/true", "true", (char *)NULL);
	_exit(127);
}

static void
spawn(enum way w, int cg)
{
	struct clone_args a = { .exit_signal = SIGCHLD };
	long pid;
	int st;

	if (cg >= 0) {
		a.flags = CLONE_INTO_CGROUP;
		a.cgroup = (unsigned)cg;
	}
	if ((pid = syscall(SYS_clone3, &a, sizeof a)) < 0)
		die("clone3");
	if (pid == 0)
		guest(w);
	if (waitpid((pid_t)pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("guest");
}

/* After a guest: kill what is left in the cgroup, as exec-run did for a
 * cgroup it then removed (kill), and check it empty.  A cgroup kept for the
 * next guest is only checked: on Linux 6.18 here a child born with
 * CLONE_INTO_CGROUP into a cgroup that was ever killed is killed at birth,
 * so exec-run kills and removes one that a guest left holding a process,
 * and the guests here leave nothing. */
static void
empty(int cg, int kill)
{
	char buf[256];
	int fd = kill ? openat(cg, "cgroup.kill", O_WRONLY | O_CLOEXEC) : -1;
	ssize_t n;

	if (kill && (fd < 0 || write(fd, "1", 1) != 1))
		die("cgroup.kill");
	if (kill)
		close(fd);
	if ((fd = openat(cg, "cgroup.events", O_RDONLY | O_CLOEXEC)) < 0 || (n = read(fd, buf, sizeof buf - 1)) < 0)
		die("cgroup.events");
	close(fd);
	buf[n] = '\0';
	if (!strstr(buf, "populated 0"))
		die("populated");
}

static double
secs(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
	static const char *const names[] = { "bare", "fresh", "kept", "spawner", "shared" };
	struct timespec t0, t1;
	struct rusage self, kids;
	int way = -1, n, i, cg = -1;

	for (i = 0; argc == 4 && i < 5; i++)
		if (strcmp(argv[1], names[i]) == 0)
			way = i;
	if (way < 0 || (n = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: isolate_cost bare|fresh|kept|spawner|shared N CGROUP-DIR\n");
		return 64;
	}
	if ((parent = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die(argv[3]);
	if (way == SPAWNER || way == SHARED)
		enter_userns();
	snprintf(dir, sizeof dir, "isolate-cost-%ld", (long)getpid());
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (way >= KEPT && (mkdirat(parent, dir, 0755) < 0 || (cg = openat(parent, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
		die("cgroup");
	for (i = 0; i < n; i++) {
		if (way == FRESH && (mkdirat(parent, dir, 0755) < 0 || (cg = openat(parent, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
			die("cgroup");
		if (way == SHARED) {
			if (i > 0 && (umount2("/mnt/out", MNT_DETACH) < 0 || umount2("/mnt", MNT_DETACH) < 0 ||
			    umount2("/tmp", MNT_DETACH) < 0))
				die("umount");
			guest_mounts();
		}
		spawn(way, cg);
		if (way == FRESH) {
			empty(cg, 1);
			close(cg);
			if (unlinkat(parent, dir, AT_REMOVEDIR) < 0)
				die("rmdir");
			cg = -1;
		} else if (way >= KEPT)
			empty(cg, 0);
	}
	if (cg >= 0 && (close(cg), unlinkat(parent, dir, AT_REMOVEDIR) < 0))
		die("rmdir");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	printf("%.1f %.1f\n", ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9) / n * 1e6,
	    (secs(self.ru_utime) + secs(self.ru_stime) + secs(kids.ru_utime) + secs(kids.ru_stime)) / n * 1e6);
	return 0;
}
