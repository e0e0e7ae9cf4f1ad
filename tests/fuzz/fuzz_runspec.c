/*
 * fuzz_runspec — libFuzzer target for the run-spec parser.
 *
 * Feeds arbitrary bytes to runspec_parse() (libcommon/runs.c), the gate
 * every accepted line passes.  Contract checked: it never crashes, leaks
 * or reads out of bounds; it either fails with EK_DATAERR and a message,
 * or succeeds with a run id that run_id_valid() accepts, a transaction id
 * of 1..TXN_ID_MAX bytes, and canonical content that parses back to the
 * same canonical content (so a duplicate line is recognised as one).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "runs.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct runspec rs, again;
	struct ek_err e = { 0 };

	if (runspec_parse((const char *)data, size, &rs, &e) < 0) {
		if (e.code != EK_DATAERR || e.msg[0] == '\0')
			abort();
		return 0;
	}
	if (!rs.run_id || !run_id_valid(rs.run_id) || !rs.txn_id || !rs.program ||
	    strlen(rs.txn_id) == 0 || strlen(rs.txn_id) > TXN_ID_MAX || !rs.content)
		abort();
	/* The canonical form is a fixed point: parsing it gives it back. */
	if (runspec_parse(rs.content, strlen(rs.content), &again, &e) < 0 ||
	    strcmp(again.content, rs.content) != 0)
		abort();
	runspec_free(&again);
	runspec_free(&rs);
	return 0;
}
