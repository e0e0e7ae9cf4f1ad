/*
 * fuzz_wire — libFuzzer target for the HTTP answer parser.
 *
 * Hands the input, as the bytes a dispatcher sent, to wire_parse()
 * (libcommon/wire.c), which every plain-HTTP request of every tool trusts
 * to find the status, the Retry-After and the body.  The first byte picks
 * the flags (the peer has closed; the answer is to HEAD), the rest is the
 * answer.  Contract checked: it never crashes or reads past the input;
 * with the peer closed it always decides (complete or refused, never
 * "incomplete"); a refusal says why; a complete answer has a status in
 * 200-599, a NUL-terminated body of at most 4 MiB and no longer than the
 * input, a Retry-After of -1 or 0..3600 s; and what is complete stays
 * complete, with the same status and body, when the peer then closes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static void
check(const struct http_reply *r, size_t size)
{
	if (r->status < 200 || r->status > 599 || !r->body || r->len > HTTP_REPLY_MAX || r->len > size ||
	    r->body[r->len] != '\0' || r->retry_after_ms < -1 || r->retry_after_ms > 3600 * 1000)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_reply r, again;
	const char *why = NULL, *in;
	bool keep = false, eof, no_body;
	int rc;

	if (size < 1)
		return 0;
	eof = data[0] & 1;
	no_body = data[0] & 2;
	in = (const char *)data + 1;
	size--;
	memset(&r, 0, sizeof r);
	rc = wire_parse(in, size, eof, no_body, &r, &keep, &why);
	if (rc < -1 || rc > 1 || (rc == 0 && eof) || (rc < 0 && (!why || !*why)))
		abort();
	if (rc != 1)
		return 0;
	check(&r, size);
	if (!eof) {
		memset(&again, 0, sizeof again);
		if (wire_parse(in, size, true, no_body, &again, &keep, &why) != 1 || again.status != r.status ||
		    again.len != r.len || memcmp(again.body, r.body, r.len) != 0)
			abort();
		free(again.body);
	}
	free(r.body);
	return 0;
}
