/*
 * fuzz_runspec — libFuzzer target for the run-spec parser.
 *
 * Feeds arbitrary bytes to runspec_parse() (libcommon/runs.c), the gate
 * every accepted line passes.  Contract checked: it never crashes, leaks
 * or reads out of bounds; it either fails with EK_DATAERR and a message,
 * or succeeds with a run id that run_id_valid() accepts, a transaction id
 * of 1..TXN_ID_MAX bytes, and canonical content that parses back to the
 * same canonical content (so a duplicate line is recognised as one), and
 * args, env and policy found in it as each alone serializes (the execution
 * row stores them from there).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "runs.h"

/* The member at off/len of the content is v's own canonical form. */
static void
check_member(const struct runspec *rs, json_t *v, size_t off, size_t len)
{
	char *d = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;

	if (v ? !d || strlen(d) != len || memcmp(rs->content + off, d, len) != 0 : len != 0)
		abort();
	free(d);
}

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
	check_member(&rs, rs.args, rs.args_at.off, rs.args_at.len);
	check_member(&rs, rs.env, rs.env_at.off, rs.env_at.len);
	check_member(&rs, rs.policy, rs.policy_at.off, rs.policy_at.len);
	/* The canonical form is a fixed point: parsing it gives it back. */
	if (runspec_parse(rs.content, strlen(rs.content), &again, &e) < 0 ||
	    strcmp(again.content, rs.content) != 0)
		abort();
	runspec_free(&again);
	runspec_free(&rs);
	return 0;
}
