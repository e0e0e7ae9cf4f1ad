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
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>

#include <curl/curl.h>

extern char **environ;

static CURL *cu;
static const char *base;
static char auth[128];

struct buf { char *p; size_t n; };

static size_t
on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t add = size * nmemb;
	char *np = realloc(b->p, b->n + add + 1);

	if (!np)
		return 0;
	memcpy(np + b->n, ptr, add);
	b->p = np;
	b->n += add;
	b->p[b->n] = '\0';
	return add;
}

/* One request; the answer's body in *out (caller frees); the HTTP status,
 * or -1 on a transport error. */
static long
call(const char *method, const char *path, const char *body, struct buf *out)
{
	struct curl_slist *h = NULL;
	char url[512];
	long status = -1;
	CURLcode rc;

	out->p = NULL;
	out->n = 0;
	snprintf(url, sizeof url, "%s%s", base, path);
	h = curl_slist_append(h, "Content-Type: application/json");
	if (auth[0])
		h = curl_slist_append(h, auth);
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, 5000L);
	if (body) {
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else {
		curl_easy_setopt(cu, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, method);
	}
	rc = curl_easy_perform(cu);
	if (rc == CURLE_OK)
		curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
	else
		fprintf(stderr, "floor_post: %s %s: %s\n", method, path, curl_easy_strerror(rc));
	curl_slist_free_all(h);
	return status;
}

/* Copy the string value of "key" found at or after p into out; the
 * position after it, or NULL.  Enough for the dispatcher's compact JSON. */
static const char *
str_field(const char *p, const char *key, char *out, size_t n)
{
	char pat[64];
	const char *s, *e;

	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	if (!p || !(s = strstr(p, pat)))
		return NULL;
	s += strlen(pat);
	if (!(e = strchr(s, '"')) || (size_t)(e - s) >= n)
		return NULL;
	memcpy(out, s, (size_t)(e - s));
	out[e - s] = '\0';
	return e + 1;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
fail(const char *what, long status, const struct buf *b)
{
	fprintf(stderr, "floor_post: %s: HTTP %ld %s\n", what, status, b->p ? b->p : "");
	free(b->p);
	return 1;
}

int
main(int argc, char **argv)
{
	char inc[64], sid[64], cred[80], path[256], body[1024], run_id[160], exec_id[33];
	char *prog_argv[2] = { NULL, NULL };
	unsigned char raw[16];
	long n, done = 0, status, idle = 0;
	struct buf b;
	int i;

	if (argc < 3 || argc > 4)
		return fputs("usage: floor_post URL N [PROGRAM]\n", stderr), 64;
	base = argv[1];
	n = strtol(argv[2], NULL, 10);
	prog_argv[0] = argc > 3 ? argv[3] : "/bin/true";
	if (n < 1)
		return fputs("floor_post: N must be positive\n", stderr), 64;
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return perror("getrandom"), 1;
	for (i = 0; i < 16; i++)
		sprintf(exec_id + 2 * i, "%02x", raw[i]);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!(cu = curl_easy_init()))
		return fputs("floor_post: curl_easy_init failed\n", stderr), 1;
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_NOPROXY, "*");

	snprintf(body, sizeof body, "{\"executor_id\":\"%s\"}", exec_id);
	status = call("POST", "/v1/sessions", body, &b);
	if (status != 201 || !str_field(b.p, "incarnation", inc, sizeof inc) ||
	    !str_field(b.p, "session_id", sid, sizeof sid) ||
	    !str_field(b.p, "credential", cred, sizeof cred))
		return fail("negotiate", status, &b);
	free(b.p);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", cred);

	/* Bounded: at most 50 feed pulls in a row that hand out nothing new. */
	while (done < n && idle < 50) {
		char *runs, *rec = NULL;
		size_t reclen = 0;
		const char *p;
		FILE *rf;
		long got = 0;

		snprintf(path, sizeof path, "/v1/sessions/%s/work?max=1000", sid);
		if ((status = call("GET", path, NULL, &b)) != 200)
			return fail("work feed", status, &b);
		runs = b.p;
		/* Receipts for everything handed out, in one request. */
		if (!(rf = open_memstream(&rec, &reclen)))
			return perror("open_memstream"), 1;
		fputs("{\"receipts\":[", rf);
		for (p = runs; (p = str_field(p, "run_id", run_id, sizeof run_id)); got++)
			fprintf(rf, "%s{\"run_id\":\"%s\",\"receipt\":\"floor:%ld\",\"outcome\":\"accepted\"}",
			    got ? "," : "", run_id, done + got);
		fputs("]}", rf);
		fclose(rf);
		if (got == 0) {
			free(runs);
			free(rec);
			idle++;
			continue;
		}
		idle = 0;
		snprintf(path, sizeof path, "/v1/sessions/%s/receipts", sid);
		if ((status = call("POST", path, rec, &b)) != 200)
			return fail("receipts", status, &b);
		free(b.p);
		free(rec);
		for (p = runs; (p = str_field(p, "run_id", run_id, sizeof run_id)); ) {
			pid_t pid;
			int ws, rc;

			if ((rc = posix_spawn(&pid, prog_argv[0], NULL, NULL, prog_argv, environ)) != 0)
				return fprintf(stderr, "floor_post: %s: %s\n", prog_argv[0], strerror(rc)), 1;
			while (waitpid(pid, &ws, 0) < 0)
				if (errno != EINTR)
					return perror("waitpid"), 1;
			if (!WIFEXITED(ws))
				return fprintf(stderr, "floor_post: %s did not exit\n", prog_argv[0]), 1;
			snprintf(body, sizeof body, "{\"run_id\":\"%s\",\"incarnation\":\"%s\","
			    "\"session_id\":\"%s\",\"outcome\":\"exited\",\"exit_code\":%d,"
			    "\"wait_status\":%d,\"message\":\"exited with status %d\",\"chosen_at\":%lld}",
			    run_id, inc, sid, WEXITSTATUS(ws), ws, WEXITSTATUS(ws), now_ms());
			status = call("POST", "/v1/results", body, &b);
			if (status != 200 || !strstr(b.p ? b.p : "", "record_id"))
				return fail("result", status, &b);
			free(b.p);
			done++;
		}
		free(runs);
	}
	curl_easy_cleanup(cu);
	curl_global_cleanup();
	if (done < n)
		return fprintf(stderr, "floor_post: only %ld of %ld runs were handed out\n", done, n), 1;
	return 0;
}
