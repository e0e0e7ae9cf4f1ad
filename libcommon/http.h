/*
 * http — one bounded HTTP request to the dispatcher.
 *
 * Plain http:// goes over a socket of our own (wire.h); libcurl, for TLS
 * and proxies, is loaded with dlopen() at the first such request: its
 * dependency tree costs ~10 ms at every process start that loads it.  Every request has a connect timeout and a total timeout,
 * follows no redirect, uses no signals, and verifies TLS for https.
 * The credential goes only into the Authorization header.
 */
#ifndef EK_HTTP_H
#define EK_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HTTP_REPLY_MAX (4 * 1024 * 1024)

struct http_reply {
	long status;        /* 0: no HTTP answer (see transport) */
	char *body;         /* NUL-terminated, malloc'd */
	size_t len;
	char transport[256];/* why there was no answer: timeout, refused, reset, ... */
	int timed_out;
	int unreached;      /* no connection was ever made: the peer saw nothing */
	int64_t retry_after_ms;  /* the answer's Retry-After, -1 when it had none */
};

/* Send method url with an optional JSON body and bearer credential, waiting
 * at most timeout_ms in all.  Returns 0 when the exchange ended (with an
 * answer or a transport failure, both in r); -1 only when the client
 * cannot run at all (libcurl missing), with e filled. */
int http_request(const char *method, const char *url, const char *bearer,
    const void *body, size_t len, int64_t timeout_ms, struct http_reply *r, struct ek_err *e);
void http_reply_free(struct http_reply *r);

/* A Retry-After value v[0, n) in ms: seconds; what is not a number (an
 * HTTP date) counts as 1 s, and more than an hour as an hour. */
int64_t http_retry_after_ms(const char *v, size_t n);

#endif
