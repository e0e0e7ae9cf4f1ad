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
 * row stores them from there).  A line the plain path reads
 * (runspec_parse_plain()) gives what jansson's path gives, field by field.
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

static bool
same_str(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) == 0 : a == b;
}

/* What jansson's path makes of the line (runspec_parse() without its
 * plain path): the plain path must make the same. */
static void
check_plain(const uint8_t *data, size_t size)
{
	struct runspec plain, slow;
	struct ek_err e = { 0 };
	json_t *o;

	if (runspec_parse_plain((const char *)data, size, &plain) != 1)
		return;
	if (!(o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL)) ||
	    runspec_from_json(o, &slow, &e) < 0)
		abort();
	json_decref(o);
	if (!same_str(plain.content, slow.content) || !same_str(plain.run_id, slow.run_id) ||
	    !same_str(plain.txn_id, slow.txn_id) || !same_str(plain.program, slow.program) ||
	    !same_str(plain.cwd, slow.cwd) || plain.due_at != slow.due_at ||
	    plain.timeout_ms != slow.timeout_ms || slow.env || slow.policy ||
	    plain.args_at.off != slow.args_at.off || plain.args_at.len != slow.args_at.len)
		abort();
	runspec_free(&slow);
	runspec_free(&plain);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct runspec rs, again;
	struct ek_err e = { 0 };

	check_plain(data, size);

	if (runspec_parse((const char *)data, size, &rs, &e) < 0) {
		if (e.code != EK_DATAERR || e.msg[0] == '\0')
			abort();
		return 0;
	}
	if (!rs.run_id || !run_id_valid(rs.run_id) || !rs.txn_id || !rs.program ||
	    strlen(rs.txn_id) == 0 || strlen(rs.txn_id) > TXN_ID_MAX || !rs.content)
		abort();
	if (rs.root) {   /* jansson's path: the plain one is checked above */
		check_member(&rs, rs.args, rs.args_at.off, rs.args_at.len);
		check_member(&rs, rs.env, rs.env_at.off, rs.env_at.len);
		check_member(&rs, rs.policy, rs.policy_at.off, rs.policy_at.len);
	}
	/* The canonical form is a fixed point: parsing it gives it back. */
	if (runspec_parse(rs.content, strlen(rs.content), &again, &e) < 0 ||
	    strcmp(again.content, rs.content) != 0)
		abort();
	runspec_free(&again);
	runspec_free(&rs);
	return 0;
}
