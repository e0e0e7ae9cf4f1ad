/*
 * wire — plain HTTP/1.1 to the dispatcher over a socket, without libcurl.
 *
 * Loading libcurl and its 31 libraries costs about 10 ms of CPU in every
 * process that talks HTTP, three times the rest of a heartbeat; an executor
 * pays it several times a tick and a fleet a hundred times over.  A plain
 * request needs a socket, one request and one answer, so http.c sends
 * http:// here and keeps libcurl for TLS and proxies.
 *
 * What the dispatcher sends is untrusted: the parser bounds the head and
 * the body, refuses what it does not understand, and nothing it read goes
 * into the transport message.
 */
#ifndef EK_WIRE_H
#define EK_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

#define WIRE_HEAD_MAX (64 * 1024)   /* status line and header fields */

/* http_request() over a socket of our own, for a url it takes: http://
 * with a plain host (a name, an IPv4 address or a bracketed IPv6 one), an
 * optional port, no user information, no control or space byte; and no
 * proxy to go through (http_proxy or all_proxy set in the environment,
 * unless the host is loopback, which is never proxied).  false, with
 * nothing done, for any other url.  One connection is kept per process and
 * reused while the dispatcher keeps it open; a reused connection that dies
 * before any answer is retried once on a fresh one, within the same
 * timeout. */
bool wire_request(const char *method, const char *url, const char *bearer,
    const void *body, size_t len, int64_t timeout_ms, struct http_reply *r);

/* Parse the answer in buf[0, len), eof when the peer has closed; no_body
 * for the answer to HEAD.  1: complete, r->status, r->body (malloc'd,
 * NUL-terminated), r->len and r->retry_after_ms filled, *keep tells whether
 * the connection may carry another request; 0: incomplete; -1: malformed
 * or too large, *why says which (static text). */
int wire_parse(const char *buf, size_t len, bool eof, bool no_body, struct http_reply *r,
    bool *keep, const char **why);

#endif
