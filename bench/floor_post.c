/*
 * floor_post — the end-to-end floor: the least an executor can do to run
 * N trivial runs for a dispatcher and report them, following
 * doc/protocol.md, in one process with one keep-alive libcurl handle and
 * nothing durable on our side.
 *
 *   floor_post URL N [PROGRAM]
 *
 * Negotiates a session (POST /v1/sessions), pulls the work feed
 * (GET /v1/sessions/SID/work?max=1000), sends acceptance receipts, then for
 * each run spawns PROGRAM (default /bin/true: the feed is not parsed
 * beyond the run ids, the benchmark submits only that program), waits
 * for it, and POSTs the same result body exec-run sends to /v1/results.
 * Stops when N results were recorded.  Exit status: 0, 1 on any failure
 * (an unexpected answer, a failed spawn, no progress), 64 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "floor_client.h"

extern char **environ;

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
main(int argc, char **argv)
{
	static char page[FEED_PAGE][RUN_ID_LEN];
	char inc[64], sid[64];
	char *prog_argv[2] = { NULL, NULL };
	long n, done = 0, idle = 0;

	if (argc < 3 || argc > 4)
		return fputs("usage: floor_post URL N [PROGRAM]\n", stderr), 64;
	floor_prog = "floor_post";
	base = argv[1];
	n = strtol(argv[2], NULL, 10);
	prog_argv[0] = argc > 3 ? argv[3] : "/bin/true";
	if (n < 1)
		return fputs("floor_post: N must be positive\n", stderr), 64;
	if (floor_negotiate(inc, sid) != 0)
		return 1;

	/* Bounded: at most 50 feed pulls in a row that hand out nothing new. */
	while (done < n && idle < 50) {
		long k = floor_take_page(sid, page, FEED_PAGE, done), i;

		if (k < 0)
			return 1;
		idle = k ? 0 : idle + 1;
		for (i = 0; i < k; i++, done++) {
			pid_t pid;
			int ws, rc;

			if ((rc = posix_spawn(&pid, prog_argv[0], NULL, NULL, prog_argv, environ)) != 0)
				return fprintf(stderr, "floor_post: %s: %s\n", prog_argv[0], strerror(rc)), 1;
			while (waitpid(pid, &ws, 0) < 0)
				if (errno != EINTR)
					return perror("waitpid"), 1;
			if (!WIFEXITED(ws))
				return fprintf(stderr, "floor_post: %s did not exit\n", prog_argv[0]), 1;
			if (floor_report(page[i], inc, sid, WEXITSTATUS(ws), ws, now_ms()))
				return 1;
		}
	}
	curl_easy_cleanup(cu);
	curl_global_cleanup();
	if (done < n)
		return fprintf(stderr, "floor_post: only %ld of %ld runs were handed out\n", done, n), 1;
	return 0;
}
