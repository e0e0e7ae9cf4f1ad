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
#include <sys/random.h>
#include <time.h>

#include <curl/curl.h>

enum { RUN_ID_LEN = 160 };

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

/* One request on the one handle; the answer's body in *out (caller frees);
 * the HTTP status, or -1 on a transport error. */
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
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, 5000L);
	if (body) {
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
		curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, method);
	} else {
		curl_easy_setopt(cu, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, NULL);
	}
	rc = curl_easy_perform(cu);
	if (rc == CURLE_OK)
		curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
	else
		fprintf(stderr, "floor_drain: %s %s: %s\n", method, path, curl_easy_strerror(rc));
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

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
fail(const char *what, long status, const struct buf *b)
{
	fprintf(stderr, "floor_drain: %s: HTTP %ld %s\n", what, status, b->p ? b->p : "");
	free(b->p);
	return 1;
}

int
main(int argc, char **argv)
{
	char inc[64], sid[64], cred[80], path[256], body[1024], exec_id[33];
	char (*ids)[RUN_ID_LEN];
	unsigned char raw[16];
	long n, got = 0, status, idle = 0, i;
	long long t0;
	double t_start, t_end;
	struct buf b;

	if (argc != 4)
		return fputs("usage: floor_drain URL N CHOSEN_AT0\n", stderr), 64;
	base = argv[1];
	n = strtol(argv[2], NULL, 10);
	t0 = strtoll(argv[3], NULL, 10);
	if (n < 1 || n > 10000000)
		return fputs("floor_drain: N must be from 1 to 10000000\n", stderr), 64;
	if (!(ids = calloc((size_t)n, sizeof *ids)))
		return perror("calloc"), 1;
	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return perror("getrandom"), 1;
	for (i = 0; i < 16; i++)
		sprintf(exec_id + 2 * i, "%02x", raw[i]);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!(cu = curl_easy_init()))
		return fputs("floor_drain: curl_easy_init failed\n", stderr), 1;
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

	/* Set-up: own N runs.  Bounded: at most 5 empty feed pulls in a row. */
	while (got < n && idle < 5) {
		char *rec = NULL;
		size_t reclen = 0;
		const char *p;
		FILE *rf;
		long first = got;

		snprintf(path, sizeof path, "/v1/sessions/%s/work?max=1000", sid);
		if ((status = call("GET", path, NULL, &b)) != 200)
			return fail("work feed", status, &b);
		if (!(rf = open_memstream(&rec, &reclen)))
			return perror("open_memstream"), 1;
		fputs("{\"receipts\":[", rf);
		for (p = b.p; got < n && (p = str_field(p, "run_id", ids[got], sizeof ids[0])); got++)
			fprintf(rf, "%s{\"run_id\":\"%s\",\"receipt\":\"floor:%ld\",\"outcome\":\"accepted\"}",
			    got > first ? "," : "", ids[got], got);
		fputs("]}", rf);
		fclose(rf);
		free(b.p);
		if (got == first) {
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
	}
	if (got < n)
		return fprintf(stderr, "floor_drain: only %ld of %ld runs were handed out\n", got, n), 1;

	/* Timed: one result per run, as a drain sends them. */
	t_start = now_s();
	for (i = 0; i < n; i++) {
		const char *dash = strrchr(ids[i], '-');

		snprintf(body, sizeof body, "{\"run_id\":\"%s\",\"incarnation\":\"%s\","
		    "\"session_id\":\"%s\",\"outcome\":\"exited\",\"exit_code\":0,"
		    "\"wait_status\":0,\"message\":\"exited with status 0\",\"chosen_at\":%lld}",
		    ids[i], inc, sid, t0 + (dash ? strtoll(dash + 1, NULL, 10) : 0));
		status = call("POST", "/v1/results", body, &b);
		if (status != 200 || !strstr(b.p ? b.p : "", "record_id"))
			return fail("result", status, &b);
		free(b.p);
	}
	t_end = now_s();
	printf("%ld %.6f %.1f\n", n, t_end - t_start, (double)n / (t_end - t_start));
	curl_easy_cleanup(cu);
	curl_global_cleanup();
	free(ids);
	return 0;
}
