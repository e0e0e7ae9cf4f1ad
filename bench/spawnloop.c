/*
 * spawnloop — the benchmarks' timer: run a command N times, one fresh
 * process after the other, and print the mean wall time per invocation.
 *
 *   spawnloop [-i LINE | -f FILE] [-o OFFSET] N -- CMD [ARG]...
 *
 * Each child gets, on standard input, LINE + "\n" with every "%N" replaced
 * by OFFSET + the invocation's index (so each invocation can name a new
 * run), or the file FILE, or /dev/null.  Its standard output goes to
 * /dev/null; its standard error is left alone.  The clock is
 * CLOCK_MONOTONIC around the whole loop, so pipe set-up, posix_spawn() and
 * waitpid() are counted for every command alike.
 *
 * Output, one line on stdout:  <N> <total seconds> <microseconds per run>
 * Exit status: 0; 1 if any invocation could not start or did not exit 0
 * (the loop stops there); 64 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* LINE with every "%N" replaced by n, plus a newline; length in *len. */
static int
expand(const char *tpl, long n, char *out, size_t cap, size_t *len)
{
	size_t o = 0;
	const char *p;

	for (p = tpl; *p; p++) {
		if (p[0] == '%' && p[1] == 'N') {
			int w = snprintf(out + o, cap - o, "%ld", n);
			if (w < 0 || (size_t)w >= cap - o)
				return -1;
			o += (size_t)w;
			p++;
		} else {
			if (o + 1 >= cap)
				return -1;
			out[o++] = *p;
		}
	}
	if (o + 1 >= cap)
		return -1;
	out[o++] = '\n';
	*len = o;
	return 0;
}

static void
usage(void)
{
	fputs("usage: spawnloop [-i LINE | -f FILE] [-o OFFSET] N -- CMD [ARG]...\n", stderr);
	exit(64);
}

int
main(int argc, char **argv)
{
	const char *line = NULL, *file = NULL;
	long offset = 0, n, i;
	char buf[8192], *end;
	double t0, t1;
	int c;

	while ((c = getopt(argc, argv, "+i:f:o:")) != -1) {
		switch (c) {
		case 'i': line = optarg; break;
		case 'f': file = optarg; break;
		case 'o': offset = strtol(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (optind + 2 > argc || (line && file))
		usage();
	n = strtol(argv[optind], &end, 10);
	if (*end || n < 1 || n > 10000000)
		usage();
	optind++;
	if (strcmp(argv[optind], "--") == 0)
		optind++;
	if (optind >= argc)
		usage();

	t0 = now_s();
	for (i = 0; i < n; i++) {
		posix_spawn_file_actions_t fa;
		int pfd[2] = { -1, -1 }, in_fd, status, rc;
		size_t len = 0;
		pid_t pid;

		if (line) {
			if (expand(line, offset + i, buf, sizeof buf, &len) < 0) {
				fputs("spawnloop: input line too long\n", stderr);
				return 1;
			}
			/* A line fits in the pipe buffer: write it all, then spawn. */
			if (pipe2(pfd, O_CLOEXEC) < 0 || write(pfd[1], buf, len) != (ssize_t)len) {
				perror("spawnloop: pipe");
				return 1;
			}
			close(pfd[1]);
			in_fd = pfd[0];
		} else {
			in_fd = open(file ? file : "/dev/null", O_RDONLY | O_CLOEXEC);
			if (in_fd < 0) {
				perror(file ? file : "/dev/null");
				return 1;
			}
		}
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		rc = posix_spawnp(&pid, argv[optind], &fa, NULL, argv + optind, environ);
		posix_spawn_file_actions_destroy(&fa);
		close(in_fd);
		if (rc != 0) {
			fprintf(stderr, "spawnloop: %s: %s\n", argv[optind], strerror(rc));
			return 1;
		}
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR) {
				perror("spawnloop: waitpid");
				return 1;
			}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "spawnloop: %s (invocation %ld) failed: %s %d\n", argv[optind],
			    i, WIFEXITED(status) ? "exit" : "signal",
			    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			return 1;
		}
	}
	t1 = now_s();
	printf("%ld %.6f %.3f\n", n, t1 - t0, (t1 - t0) / (double)n * 1e6);
	return 0;
}
