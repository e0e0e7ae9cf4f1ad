/*
 * fuzz_classify — libFuzzer target for the dispatcher-reply classifier.
 *
 * Builds a synthetic struct http_reply (status from the first two bytes,
 * the rest as the body) and hands it to deliver_classify()
 * (libcommon/deliver.c), which decides acknowledged / refused / session
 * over / transient for every report.  Contract checked: it never crashes
 * or reads past the body; the class is one of the four; an acknowledgement
 * comes only from a 200 with a positive record id; a refusal only from
 * 400/404/409 and names its cause; the end of a session only from 401/410;
 * no HTTP answer at all is transient; every string it fills is
 * NUL-terminated within its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "deliver.h"
#include "http.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long statuses[] = { 0, 200, 400, 401, 404, 409, 410, 429, 500, 502, 503, 504 };
	struct deliver_verdict v;
	struct http_reply r;

	if (size < 2)
		return 0;
	memset(&r, 0, sizeof r);
	/* first byte: a status the protocol names (or any, half the time) */
	r.status = data[0] & 1 ? statuses[(data[0] >> 1) % (sizeof statuses / sizeof statuses[0])] :
	    (long)data[0] * 4 + (data[1] & 3);
	r.len = size - 2;
	r.body = malloc(r.len + 1);   /* as http.c keeps it: NUL-terminated, malloc'd */
	if (!r.body)
		return 0;
	memcpy(r.body, data + 2, r.len);
	r.body[r.len] = '\0';
	if (r.status == 0)
		memcpy(r.transport, "connection refused", sizeof "connection refused");

	deliver_classify(&r, &v);

	if (memchr(v.cause, '\0', sizeof v.cause) == NULL || memchr(v.status, '\0', sizeof v.status) == NULL ||
	    memchr(v.diag, '\0', sizeof v.diag) == NULL)
		abort();
	switch (v.cls) {
	case DC_ACKED:
		if (r.status != 200 || v.record_id <= 0)
			abort();
		break;
	case DC_REFUSED:
		if ((r.status != 400 && r.status != 404 && r.status != 409) || v.cause[0] == '\0')
			abort();
		break;
	case DC_SESSION_OVER:
		if ((r.status != 401 && r.status != 410) || v.status[0] == '\0')
			abort();
		break;
	case DC_TRANSIENT:
		break;
	default:
		abort();
	}
	if (r.status == 0 && v.cls != DC_TRANSIENT)
		abort();
	free(r.body);
	return 0;
}
