/* http — see http.h. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "http.h"
#include "protocol.h"
#include "wire.h"

/* The few libcurl entry points we use, resolved once from libcurl.so.4. */
static struct {
	void *lib;
	CURLcode (*global_init)(long);
	CURL *(*init)(void);
	void (*reset)(CURL *);
	CURLcode (*setopt)(CURL *, CURLoption, ...);
	CURLcode (*perform)(CURL *);
	CURLcode (*getinfo)(CURL *, CURLINFO, ...);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	const char *(*strerror)(CURLcode);
} cu;

static int
load_curl(struct ek_err *e)
{
	if (cu.lib)
		return 0;
	if (!(cu.lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL)))
		return ek_fail(e, EK_UNAVAILABLE, "cannot load libcurl: %s", dlerror());
	*(void **)&cu.global_init = dlsym(cu.lib, "curl_global_init");
	*(void **)&cu.init = dlsym(cu.lib, "curl_easy_init");
	*(void **)&cu.reset = dlsym(cu.lib, "curl_easy_reset");
	*(void **)&cu.setopt = dlsym(cu.lib, "curl_easy_setopt");
	*(void **)&cu.perform = dlsym(cu.lib, "curl_easy_perform");
	*(void **)&cu.getinfo = dlsym(cu.lib, "curl_easy_getinfo");
	*(void **)&cu.slist_append = dlsym(cu.lib, "curl_slist_append");
	*(void **)&cu.slist_free_all = dlsym(cu.lib, "curl_slist_free_all");
	*(void **)&cu.strerror = dlsym(cu.lib, "curl_easy_strerror");
	if (!cu.global_init || !cu.init || !cu.reset || !cu.setopt || !cu.perform || !cu.getinfo ||
	    !cu.slist_append || !cu.slist_free_all || !cu.strerror) {
		dlclose(cu.lib);
		cu.lib = NULL;
		return ek_fail(e, EK_UNAVAILABLE, "libcurl.so.4 lacks an expected function");
	}
	cu.global_init(CURL_GLOBAL_DEFAULT);
	return 0;
}

/* Append to the reply, refusing answers larger than HTTP_REPLY_MAX. */
static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	struct http_reply *r = arg;
	size_t add = size * n;
	char *nb;

	if (r->len + add > HTTP_REPLY_MAX || !(nb = realloc(r->body, r->len + add + 1)))
		return 0;   /* makes curl fail the transfer */
	memcpy(nb + r->len, p, add);
	r->body = nb;
	r->len += add;
	r->body[r->len] = '\0';
	return add;
}

int64_t
http_retry_after_ms(const char *v, size_t n)
{
	char tmp[32], *end;
	long long s;

	snprintf(tmp, sizeof tmp, "%.*s", (int)(n < sizeof tmp ? n : sizeof tmp - 1), v);
	s = strtoll(tmp, &end, 10);
	return end == tmp || s < 0 ? 1000 : s > 3600 ? 3600 * 1000LL : s * 1000;
}

/* Note the answer's Retry-After. */
static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	static const char name[] = "retry-after:";
	struct http_reply *r = arg;
	size_t len = size * n;

	if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0)
		r->retry_after_ms = http_retry_after_ms(p + sizeof name - 1, len - (sizeof name - 1));
	return len;
}

static struct curl_slist *
headers_for(const char *bearer, int has_body)
{
	char auth[512];
	struct curl_slist *h = cu.slist_append(NULL, "Accept: application/json");

	if (has_body)
		h = cu.slist_append(h, "Content-Type: application/json");
	h = cu.slist_append(h, "Expect:");   /* no 100-continue round trip */
	if (bearer) {
		snprintf(auth, sizeof auth, "Authorization: " PROTO_BEARER "%s", bearer);
		h = cu.slist_append(h, auth);
		memset(auth, 0, sizeof auth);
	}
	return h;
}

static void
set_options(CURL *c, const char *method, const char *url, const void *body, size_t len,
    int64_t timeout_ms, struct curl_slist *h, struct http_reply *r)
{
	long total = timeout_ms > 0 ? (long)timeout_ms : 1;

	cu.setopt(c, CURLOPT_URL, url);
	cu.setopt(c, CURLOPT_CUSTOMREQUEST, method);
	cu.setopt(c, CURLOPT_HTTPHEADER, h);
	cu.setopt(c, CURLOPT_NOSIGNAL, 1L);
	cu.setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	cu.setopt(c, CURLOPT_TIMEOUT_MS, total);
	cu.setopt(c, CURLOPT_CONNECTTIMEOUT_MS, total < 2000 ? total : 2000L);
	cu.setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	cu.setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	cu.setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	cu.setopt(c, CURLOPT_WRITEDATA, r);
	cu.setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	cu.setopt(c, CURLOPT_HEADERDATA, r);
	cu.setopt(c, CURLOPT_NOPROXY, "127.0.0.1,localhost,::1");
	if (body) {
		cu.setopt(c, CURLOPT_POSTFIELDS, body);
		cu.setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
}

/* One handle per process, reset before each request: its connection cache
 * keeps the connection to the dispatcher open across the requests of a
 * reconciliation pass or a drain. */
static CURL *
handle(void)
{
	static CURL *c;

	if (c)
		cu.reset(c);
	else
		c = cu.init();
	return c;
}

static int
curl_request(const char *method, const char *url, const char *bearer,
    const void *body, size_t len, int64_t timeout_ms, struct http_reply *r, struct ek_err *e)
{
	struct curl_slist *h;
	CURLcode rc;
	CURL *c;

	if (load_curl(e) < 0)
		return -1;
	if (!(c = handle()))
		return ek_fail(e, EK_OSERR, "curl_easy_init failed");
	h = headers_for(bearer, body != NULL);
	set_options(c, method, url, body, len, timeout_ms, h, r);
	rc = cu.perform(c);
	if (rc == CURLE_OK) {
		cu.getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	} else {
		r->status = 0;
		r->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
		r->unreached = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
		    rc == CURLE_COULDNT_RESOLVE_PROXY;
		snprintf(r->transport, sizeof r->transport, "%s", cu.strerror(rc));
	}
	cu.slist_free_all(h);
	return 0;
}

int
http_request(const char *method, const char *url, const char *bearer,
    const void *body, size_t len, int64_t timeout_ms, struct http_reply *r, struct ek_err *e)
{
	memset(r, 0, sizeof *r);
	r->retry_after_ms = -1;
	if (!wire_request(method, url, bearer, body, len, timeout_ms, r) &&
	    curl_request(method, url, bearer, body, len, timeout_ms, r, e) < 0)
		return -1;
	if (!r->body && (r->body = malloc(1)))
		r->body[0] = '\0';
	return 0;
}

void
http_reply_free(struct http_reply *r)
{
	free(r->body);
	r->body = NULL;
}
