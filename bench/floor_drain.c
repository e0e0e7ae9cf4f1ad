/*
 * floor_drain — the drain floor: the least a client can do to deliver N
 * retained results to a dispatcher, following doc/protocol.md, with one
 * keep-alive libcurl handle and nothing durable on our side.
 *
 *   floor_drain URL N CHOSEN_AT0
 *
 * Set-up (not timed): negotiates a session (POST /v1/sessions), pulls the
 * work feed (GET /v1/sessions/SID/work?max=1000) until N runs are handed
 * to it (so it owns them), and sends acceptance receipts.  Then, timed,
 * POSTs to /v1/results, one request per run and in feed order, the body
 * exec-run would have stored for a run that exited 0:
 *
 *   {"run_id":R,"incarnation":I,"session_id":S,"outcome":"exited",
 *    "exit_code":0,"wait_status":0,"message":"exited with status 0",
 *    "chosen_at":C}
 *
 * (compact, in that key order), with C = CHOSEN_AT0 + the number after the
 * run id's last '-' (0 if none), so that bench/run.sh can give its retained
 * results the same chosen_at.  Each answer must be 200 with a record_id.
 *
 * Output, one line on stdout:  <N> <seconds> <results per second>
 * Exit status: 0; 1 on any failure (an unexpected answer, fewer than N runs
 * handed out); 64 usage.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floor_client.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	char inc[64], sid[64];
	char (*ids)[RUN_ID_LEN];
	long n, got = 0, idle = 0, i;
	long long t0;
	double t_start, t_end;

	if (argc != 4)
		return fputs("usage: floor_drain URL N CHOSEN_AT0\n", stderr), 64;
	floor_prog = "floor_drain";
	base = argv[1];
	n = strtol(argv[2], NULL, 10);
	t0 = strtoll(argv[3], NULL, 10);
	if (n < 1 || n > 10000000)
		return fputs("floor_drain: N must be from 1 to 10000000\n", stderr), 64;
	if (!(ids = calloc((size_t)n, sizeof *ids)))
		return perror("calloc"), 1;
	if (floor_negotiate(inc, sid) != 0)
		return 1;

	/* Set-up: own N runs.  Bounded: at most 5 empty feed pulls in a row. */
	while (got < n && idle < 5) {
		long k = floor_take_page(sid, ids + got, n - got, got);

		if (k < 0)
			return 1;
		idle = k ? 0 : idle + 1;
		got += k;
	}
	if (got < n)
		return fprintf(stderr, "floor_drain: only %ld of %ld runs were handed out\n", got, n), 1;

	/* Timed: one result per run, as a drain sends them. */
	t_start = now_s();
	for (i = 0; i < n; i++) {
		const char *dash = strrchr(ids[i], '-');

		if (floor_report(ids[i], inc, sid, 0, 0, t0 + (dash ? strtoll(dash + 1, NULL, 10) : 0)))
			return 1;
	}
	t_end = now_s();
	printf("%ld %.6f %.1f\n", n, t_end - t_start, (double)n / (t_end - t_start));
	curl_easy_cleanup(cu);
	curl_global_cleanup();
	free(ids);
	return 0;
}
