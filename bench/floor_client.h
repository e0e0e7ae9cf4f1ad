/*
 * floor_client.h — what the floors (floor_post.c, floor_drain.c) share: one
 * keep-alive libcurl handle, a request on it, a string field out of the
 * dispatcher's compact JSON, and the session negotiation.  Included once
 * per floor program; set floor_prog before anything else.
 */
#ifndef FLOOR_CLIENT_H
#define FLOOR_CLIENT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <curl/curl.h>

static const char *floor_prog;   /* for messages */
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
		fprintf(stderr, "%s: %s %s: %s\n", floor_prog, method, path, curl_easy_strerror(rc));
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

static int
fail(const char *what, long status, const struct buf *b)
{
	fprintf(stderr, "%s: %s: HTTP %ld %s\n", floor_prog, what, status, b->p ? b->p : "");
	free(b->p);
	return 1;
}

/* The enrollment token a new executor's first session needs, read from
 * the file $EXEC_ENROLL_TOKEN_FILE names, as exec-session open reads it;
 * "" without one. */
static void
floor_enroll_token(char *tok, size_t n)
{
	const char *path = getenv("EXEC_ENROLL_TOKEN_FILE");
	FILE *f = path && *path ? fopen(path, "r") : NULL;
	size_t len = f ? fread(tok, 1, n - 1, f) : 0;

	if (f)
		fclose(f);
	tok[len] = '\0';
	tok[strcspn(tok, "\r\n\"\\")] = '\0';
}

/* Open the handle and negotiate a session as a new executor, enrolled:
 * inc and sid (64 bytes each) are filled and the credential goes into
 * auth.  0, or 1 with the reason on stderr. */
static int
floor_negotiate(char *inc, char *sid)
{
	char body[512], exec_id[33], key[65], cred[80], tok[258];
	unsigned char raw[48];
	struct buf b;
	long status;
	int i;

	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return perror("getrandom"), 1;
	for (i = 0; i < 16; i++)
		sprintf(exec_id + 2 * i, "%02x", raw[i]);
	for (i = 0; i < 32; i++)
		sprintf(key + 2 * i, "%02x", raw[16 + i]);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!(cu = curl_easy_init()))
		return fprintf(stderr, "%s: curl_easy_init failed\n", floor_prog), 1;
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_NOPROXY, "*");
	floor_enroll_token(tok, sizeof tok);
	snprintf(body, sizeof body, "{\"executor_id\":\"%s\",\"executor_key\":\"%s\",\"enroll_token\":\"%s\"}",
	    exec_id, key, tok);
	status = call("POST", "/v1/sessions", body, &b);
	if (status != 201 || !str_field(b.p, "incarnation", inc, 64) ||
	    !str_field(b.p, "session_id", sid, 64) || !str_field(b.p, "credential", cred, sizeof cred))
		return fail("negotiate", status, &b);
	free(b.p);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", cred);
	return 0;
}

enum { RUN_ID_LEN = 160, FEED_PAGE = 1000 };

/* Pull one page of sid's work feed and receipt what it handed out: at most
 * cap run ids go into ids, receipts numbered from seq.  The number taken
 * (0: the feed had nothing), or -1 with the reason on stderr. */
static long
floor_take_page(const char *sid, char (*ids)[RUN_ID_LEN], long cap, long seq)
{
	char path[256], *rec = NULL;
	size_t reclen = 0;
	const char *p;
	struct buf b;
	long status, got = 0;
	FILE *rf;

	snprintf(path, sizeof path, "/v1/sessions/%s/work?max=%d", sid, FEED_PAGE);
	if ((status = call("GET", path, NULL, &b)) != 200)
		return -fail("work feed", status, &b);
	if (!(rf = open_memstream(&rec, &reclen)))
		return perror("open_memstream"), -1;
	fputs("{\"receipts\":[", rf);
	for (p = b.p; got < cap && (p = str_field(p, "run_id", ids[got], sizeof ids[0])); got++)
		fprintf(rf, "%s{\"run_id\":\"%s\",\"receipt\":\"floor:%ld\",\"outcome\":\"accepted\"}",
		    got ? "," : "", ids[got], seq + got);
	fputs("]}", rf);
	fclose(rf);
	free(b.p);
	if (got > 0) {
		snprintf(path, sizeof path, "/v1/sessions/%s/receipts", sid);
		if ((status = call("POST", path, rec, &b)) != 200) {
			free(rec);
			return -fail("receipts", status, &b);
		}
		free(b.p);
	}
	free(rec);
	return got;
}

/* POST the result body exec-run stores for run_id (compact, in its key
 * order); 0 when it was recorded, else 1 with the reason on stderr. */
static int
floor_report(const char *run_id, const char *inc, const char *sid, int exit_code,
    int wait_status, long long chosen_at)
{
	char body[1024];
	struct buf b;
	long status;

	snprintf(body, sizeof body, "{\"run_id\":\"%.159s\",\"incarnation\":\"%.63s\","
	    "\"session_id\":\"%.63s\",\"outcome\":\"exited\",\"exit_code\":%d,"
	    "\"wait_status\":%d,\"message\":\"exited with status %d\",\"chosen_at\":%lld}",
	    run_id, inc, sid, exit_code, wait_status, exit_code, chosen_at);
	status = call("POST", "/v1/results", body, &b);
	if (status != 200 || !strstr(b.p ? b.p : "", "record_id"))
		return fail("result", status, &b);
	free(b.p);
	return 0;
}

#endif
