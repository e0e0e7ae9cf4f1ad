/* runspec — run specs: parsing and checking (see runs.h). */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "proc.h"
#include "runs.h"
#include "session.h"
#include "shares.h"
#include "text.h"
#include "world.h"

#define ARG_MAX_COUNT 1024
#define ARG_MAX_BYTES 32768
#define ENV_MAX_COUNT 256
#define PATH_BYTES 4096
#define TIMEOUT_MAX_MS (7LL * 24 * 3600 * 1000)

bool
run_id_valid(const char *id)
{
	return text_is_id(id, 1, RUN_ID_MAX);
}

static int
bad(struct ek_err *e, const char *field, const char *why)
{
	return ek_fail(e, EK_DATAERR, "field '%s': %s", field, why);
}

static int
want_string(json_t *o, const char *k, size_t maxlen, bool required, const char **out, struct ek_err *e)
{
	json_t *v = json_object_get(o, k);

	*out = NULL;
	if (!v)
		return required ? bad(e, k, "missing") : 0;
	if (!json_is_string(v))
		return bad(e, k, "must be a string");
	if (json_string_length(v) == 0 || json_string_length(v) > maxlen) {
		char why[64];
		snprintf(why, sizeof why, "must be 1 to %zu bytes", maxlen);
		return bad(e, k, why);
	}
	*out = json_string_value(v);
	return 0;
}

static int
want_int(json_t *o, const char *k, int64_t min, int64_t max, int64_t *out, struct ek_err *e)
{
	json_t *v = json_object_get(o, k);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return bad(e, k, "must be a whole number in range");
	*out = json_integer_value(v);
	return 0;
}

static int
check_args(json_t *args, struct ek_err *e)
{
	size_t i;
	json_t *v;

	if (!json_is_array(args))
		return bad(e, "args", "must be an array of strings");
	if (json_array_size(args) > ARG_MAX_COUNT)
		return bad(e, "args", "more than 1024 arguments");
	json_array_foreach(args, i, v)
		if (!json_is_string(v) || json_string_length(v) > ARG_MAX_BYTES)
			return bad(e, "args", "every argument must be a string of at most 32768 bytes");
	return 0;
}

static bool
env_name_ok(const char *k)
{
	const char *p = k;

	if (!isalpha((unsigned char)*p) && *p != '_')
		return false;
	for (; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return strncmp(k, "EXEC_", 5) != 0 && p - k <= 256;
}

static int
check_env(json_t *env, struct ek_err *e)
{
	const char *k;
	json_t *v;

	if (!json_is_object(env))
		return bad(e, "env", "must be an object of strings");
	if (json_object_size(env) > ENV_MAX_COUNT)
		return bad(e, "env", "more than 256 variables");
	json_object_foreach(env, k, v) {
		if (!env_name_ok(k))
			return bad(e, "env", "names are [A-Za-z_][A-Za-z0-9_]* and EXEC_* is reserved");
		if (!json_is_string(v) || json_string_length(v) > ARG_MAX_BYTES)
			return bad(e, "env", "every value must be a string of at most 32768 bytes");
	}
	return 0;
}

/* policy.writable: where its guest may write besides its own (world.h). */
static int
check_writable(json_t *w, struct ek_err *e)
{
	json_t *v;
	size_t i;

	if (!w)
		return 0;
	if (!json_is_array(w) || json_array_size(w) > WORLD_POLICY_MAX)
		return bad(e, "policy.writable", "must be an array of at most 16 paths");
	json_array_foreach(w, i, v)
		if (!json_is_string(v) || json_string_value(v)[0] != '/' || json_string_length(v) >= PATH_MAX)
			return bad(e, "policy.writable", "every path must be absolute");
	return 0;
}

static int
check_policy(json_t *p, struct ek_err *e)
{
	json_t *d = json_object_get(p, "destinations"), *v;
	size_t i;

	if (!json_is_object(p))
		return bad(e, "policy", "must be an object");
	if (d) {
		if (!json_is_array(d) || json_array_size(d) > 100)
			return bad(e, "policy.destinations", "must be an array of at most 100 names");
		json_array_foreach(d, i, v)
			if (!json_is_string(v) || !run_id_valid(json_string_value(v)))
				return bad(e, "policy.destinations", "names are 1 to 128 bytes of [A-Za-z0-9._:-]");
	}
	if ((v = json_object_get(p, "weight")) && (!json_is_number(v) || json_number_value(v) < 1e-6 ||
	    json_number_value(v) > 1e6))
		return bad(e, "policy.weight", "must be a number from 0.000001 to 1000000");
	if ((v = json_object_get(p, "notify")) && (!json_is_string(v) || json_string_value(v)[0] != '/'))
		return bad(e, "policy.notify", "must be the absolute path of a program");
	if ((v = json_object_get(p, "cost")) && (!json_is_integer(v) || json_integer_value(v) < 0))
		return bad(e, "policy.cost", "must be a whole number >= 0");
	if ((v = json_object_get(p, "pids_max")) && (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > 4194304))
		return bad(e, "policy.pids_max", "must be a whole number from 1 to 4194304");
	if ((v = json_object_get(p, "memory_max")) && (!json_is_integer(v) ||
	    json_integer_value(v) < 1048576))
		return bad(e, "policy.memory_max", "must be a whole number of bytes >= 1048576");
	if ((v = json_object_get(p, "network")) && (!json_is_string(v) ||
	    world_parse_network(json_string_value(v), &(bool){ false }) < 0))
		return bad(e, "policy.network", "must be \"none\" or \"host\"");
	return check_writable(json_object_get(p, "writable"), e);
}

static int
check_fields(json_t *o, struct ek_err *e)
{
	static const char *const known[] = { "run_id", "txn_id", "program", "args",
		"due_at", "timeout_ms", "env", "cwd", "policy", NULL };
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
		if (!text_word_in(k, known))
			return ek_fail(e, EK_DATAERR, "unknown field '%.64s'", k);
	return 0;
}

/* The end of the JSON value that starts at p, in compact JSON (no space
 * outside strings): strings skipped whole, brackets counted. */
static const char *
value_end(const char *p)
{
	int depth = 0;

	do {
		if (*p == '"') {
			for (p++; *p != '"'; p++)
				if (*p == '\\')
					p++;
		} else if (*p == '[' || *p == '{') {
			depth++;
		} else if (*p == ']' || *p == '}') {
			depth--;
		} else if (depth == 0) {   /* a number or a literal */
			while (p[1] != ',' && p[1] != '}' && p[1] != ']' && p[1] != '\0')
				p++;
		}
		p++;
	} while (depth > 0);
	return p;
}

/* Find args, env and policy in the canonical content: each member's value
 * there is its own canonical form (json_dumps() of the value alone, with
 * the same flags, writes the same bytes), so the execution row takes it
 * from there instead of serializing it again. */
static void
find_members(struct runspec *rs)
{
	const char *c = rs->content, *p = c + 1, *key, *val;

	while (*p == '"') {
		key = p;
		val = value_end(p) + 1;   /* past the ':' */
		p = value_end(val);
		if (strncmp(key, "\"args\":", 7) == 0)
			rs->args_at.off = (size_t)(val - c), rs->args_at.len = (size_t)(p - val);
		else if (strncmp(key, "\"env\":", 6) == 0)
			rs->env_at.off = (size_t)(val - c), rs->env_at.len = (size_t)(p - val);
		else if (strncmp(key, "\"policy\":", 9) == 0)
			rs->policy_at.off = (size_t)(val - c), rs->policy_at.len = (size_t)(p - val);
		if (*p == ',')
			p++;
	}
}

int
runspec_from_json(json_t *o, struct runspec *rs, struct ek_err *e)
{
	memset(rs, 0, sizeof *rs);
	rs->due_at = -1;
	if (!json_is_object(o))
		return ek_fail(e, EK_DATAERR, "a run spec must be a JSON object");
	rs->root = json_incref(o);
	if (check_fields(o, e) < 0 ||
	    want_string(o, "run_id", RUN_ID_MAX, true, &rs->run_id, e) < 0 ||
	    want_string(o, "txn_id", TXN_ID_MAX, true, &rs->txn_id, e) < 0 ||
	    want_string(o, "program", PATH_BYTES, true, &rs->program, e) < 0 ||
	    want_string(o, "cwd", PATH_BYTES, false, &rs->cwd, e) < 0 ||
	    want_int(o, "due_at", 0, INT64_MAX / 2, &rs->due_at, e) < 0 ||
	    want_int(o, "timeout_ms", 1, TIMEOUT_MAX_MS, &rs->timeout_ms, e) < 0)
		goto fail;
	if (!run_id_valid(rs->run_id)) {
		bad(e, "run_id", "must be 1 to 128 bytes of [A-Za-z0-9._:-]");
		goto fail;
	}
	if (rs->cwd && rs->cwd[0] != '/') {
		bad(e, "cwd", "must be an absolute path");
		goto fail;
	}
	rs->args = json_object_get(o, "args");
	rs->env = json_object_get(o, "env");
	rs->policy = json_object_get(o, "policy");
	if ((rs->args && check_args(rs->args, e) < 0) || (rs->env && check_env(rs->env, e) < 0) ||
	    (rs->policy && check_policy(rs->policy, e) < 0))
		goto fail;
	rs->content = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	if (!rs->content) {
		ek_fail(e, EK_OSERR, "out of memory");
		goto fail;
	}
	find_members(rs);
	return 0;
fail:
	runspec_free(rs);
	return -1;
}

/* --- the plain path --------------------------------------------------------
 *
 * Most specs are a few plain strings: run_id, txn_id, program, cwd, args
 * (strings), due_at, timeout_ms, their strings printable ASCII without a
 * quote or backslash.  Such a line is read here in one pass, and its
 * canonical content written from its pieces, byte for byte what jansson
 * would parse and json_dumps() write back: the keys put in order, space
 * outside strings dropped, no character of these strings escaped, whole
 * numbers with no leading zero as they were.  Anything else (env, policy,
 * an escape, another byte, another form of number, a missing field, any
 * value out of range) goes to jansson, which also words every error: this
 * path never refuses a line.  tests/fuzz/fuzz_runspec.c holds the two
 * paths to the same result. */

enum { P_ARGS, P_CWD, P_DUE_AT, P_PROGRAM, P_RUN_ID, P_TIMEOUT_MS, P_TXN_ID, P_N };   /* key order */

static const struct { const char *name; size_t len; } plain_key[P_N] = {
	{ "args", 4 }, { "cwd", 3 }, { "due_at", 6 }, { "program", 7 }, { "run_id", 6 },
	{ "timeout_ms", 10 }, { "txn_id", 6 },
};

struct piece {
	const char *p;   /* a string's bytes between its quotes; a number's digits; an array whole */
	size_t n;
};

struct plain {
	struct piece v[P_N];
	unsigned seen;   /* bit per key */
	int64_t due_at, timeout_ms;
};

static bool
is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *
skip_ws(const char *p, const char *end)
{
	while (p < end && is_ws(*p))
		p++;
	return p;
}

/* A string of printable ASCII with no quote or backslash in it. */
static const char *
plain_string(const char *p, const char *end, struct piece *s)
{
	if (p == end || *p != '"')
		return NULL;
	s->p = ++p;
	while (p < end && *p != '"') {
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e || *p == '\\')
			return NULL;
		p++;
	}
	if (p == end)
		return NULL;
	s->n = (size_t)(p - s->p);
	return p + 1;
}

/* A whole number >= 0 as jansson writes it back: 0, or up to 18 digits
 * with no leading zero (so it cannot overflow). */
static const char *
plain_int(const char *p, const char *end, struct piece *s, int64_t *v)
{
	for (s->p = p, *v = 0; p < end && *p >= '0' && *p <= '9' && p - s->p < 18; p++)
		*v = *v * 10 + (*p - '0');
	s->n = (size_t)(p - s->p);
	if (s->n == 0 || (s->n > 1 && *s->p == '0'))
		return NULL;
	if (p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
		return NULL;
	return p;
}

/* An array of plain strings, as check_args() would take it. */
static const char *
plain_args(const char *p, const char *end, struct piece *s)
{
	struct piece a;
	int n = 0;

	if (p == end || *p != '[')
		return NULL;
	s->p = p;
	p = skip_ws(p + 1, end);
	if (p < end && *p == ']')
		n = -1;
	while (n >= 0) {
		if (!(p = plain_string(p, end, &a)) || a.n > ARG_MAX_BYTES || ++n > ARG_MAX_COUNT)
			return NULL;
		p = skip_ws(p, end);
		if (p < end && *p == ']')
			break;
		if (p == end || *p != ',')
			return NULL;
		p = skip_ws(p + 1, end);
	}
	s->n = (size_t)(p + 1 - s->p);
	return p + 1;
}

static const char *
plain_value(const char *p, const char *end, int k, struct plain *pl)
{
	if (k == P_ARGS)
		return plain_args(p, end, &pl->v[k]);
	if (k == P_DUE_AT)
		return plain_int(p, end, &pl->v[k], &pl->due_at);
	if (k == P_TIMEOUT_MS)
		return plain_int(p, end, &pl->v[k], &pl->timeout_ms);
	return plain_string(p, end, &pl->v[k]);
}

static int
plain_key_of(const struct piece *k)
{
	int i;

	for (i = 0; i < P_N; i++)
		if (k->n == plain_key[i].len && memcmp(k->p, plain_key[i].name, k->n) == 0)
			return i;
	return -1;
}

/* One object of plain members, each key once, nothing but space after. */
static bool
plain_scan(const char *buf, size_t len, struct plain *pl)
{
	const char *end = buf + len, *p = skip_ws(buf, end);
	struct piece key;
	int k;

	if (p == end || *p != '{')
		return false;
	p = skip_ws(p + 1, end);
	for (;;) {
		if (!(p = plain_string(p, end, &key)) || (k = plain_key_of(&key)) < 0 ||
		    pl->seen & 1u << k)
			return false;
		pl->seen |= 1u << k;
		p = skip_ws(p, end);
		if (p == end || *p != ':')
			return false;
		if (!(p = plain_value(skip_ws(p + 1, end), end, k, pl)))
			return false;
		p = skip_ws(p, end);
		if (p < end && *p == '}')
			return skip_ws(p + 1, end) == end;
		if (p == end || *p != ',')
			return false;
		p = skip_ws(p + 1, end);
	}
}

/* The checks of runspec_from_json() that the scan did not make. */
static bool
plain_valid(const struct plain *pl)
{
	const struct piece *v = pl->v;
	unsigned need = 1u << P_RUN_ID | 1u << P_TXN_ID | 1u << P_PROGRAM;

	return (pl->seen & need) == need &&
	    v[P_RUN_ID].n >= 1 && v[P_RUN_ID].n <= RUN_ID_MAX &&
	    v[P_TXN_ID].n >= 1 && v[P_TXN_ID].n <= TXN_ID_MAX &&
	    v[P_PROGRAM].n >= 1 && v[P_PROGRAM].n <= PATH_BYTES &&
	    (!(pl->seen & 1u << P_CWD) ||
	    (v[P_CWD].n >= 1 && v[P_CWD].n <= PATH_BYTES && v[P_CWD].p[0] == '/')) &&
	    (!(pl->seen & 1u << P_TIMEOUT_MS) ||
	    (pl->timeout_ms >= 1 && pl->timeout_ms <= TIMEOUT_MAX_MS));
	/* due_at: 18 digits are within 0..INT64_MAX / 2 */
}

/* The bytes of s without the space outside its strings (which hold no
 * quote but their own). */
static char *
put_compact(char *w, const struct piece *s)
{
	bool in = false;
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (s->p[i] == '"')
			in = !in;
		if (in || !is_ws(s->p[i]))
			*w++ = s->p[i];
	}
	return w;
}

/* A NUL-terminated copy of s at w; w moves past it. */
static const char *
put_string(char **w, const struct piece *s)
{
	char *at = *w;

	memcpy(at, s->p, s->n);
	at[s->n] = '\0';
	*w += s->n + 1;
	return at;
}

/* The canonical content, then the strings the spec's fields point to, in
 * one allocation (runspec_free() frees content). */
static int
plain_build(const struct plain *pl, size_t len, struct runspec *rs)
{
	char *buf = malloc(2 * len + 8), *w = buf;
	int k;

	if (!buf)
		return -1;
	*w++ = '{';
	for (k = 0; k < P_N; k++) {
		if (!(pl->seen & 1u << k))
			continue;
		if (w > buf + 1)
			*w++ = ',';
		*w++ = '"';
		memcpy(w, plain_key[k].name, plain_key[k].len);
		w += plain_key[k].len;
		*w++ = '"';
		*w++ = ':';
		if (k == P_ARGS) {
			rs->args_at.off = (size_t)(w - buf);
			w = put_compact(w, &pl->v[k]);
			rs->args_at.len = (size_t)(w - buf) - rs->args_at.off;
		} else if (k == P_DUE_AT || k == P_TIMEOUT_MS) {
			memcpy(w, pl->v[k].p, pl->v[k].n);
			w += pl->v[k].n;
		} else {
			*w++ = '"';
			memcpy(w, pl->v[k].p, pl->v[k].n);
			w += pl->v[k].n;
			*w++ = '"';
		}
	}
	*w++ = '}';
	*w++ = '\0';
	rs->content = buf;
	rs->run_id = put_string(&w, &pl->v[P_RUN_ID]);
	rs->txn_id = put_string(&w, &pl->v[P_TXN_ID]);
	rs->program = put_string(&w, &pl->v[P_PROGRAM]);
	if (pl->seen & 1u << P_CWD)
		rs->cwd = put_string(&w, &pl->v[P_CWD]);
	rs->due_at = pl->seen & 1u << P_DUE_AT ? pl->due_at : -1;
	rs->timeout_ms = pl->seen & 1u << P_TIMEOUT_MS ? pl->timeout_ms : 0;
	return 0;
}

int
runspec_parse_plain(const char *buf, size_t len, struct runspec *rs)
{
	struct plain pl = { .seen = 0 };

	memset(rs, 0, sizeof *rs);
	if (len > SPEC_LINE_MAX || !plain_scan(buf, len, &pl) || !plain_valid(&pl))
		return 0;
	if (plain_build(&pl, len, rs) < 0 || !run_id_valid(rs->run_id)) {
		runspec_free(rs);
		return 0;
	}
	return 1;
}

int
runspec_parse(const char *buf, size_t len, struct runspec *rs, struct ek_err *e)
{
	const char *nul = memchr(buf, '\0', len);
	json_error_t je;
	json_t *o;
	int rc;

	if (runspec_parse_plain(buf, len, rs) == 1)
		return 0;
	if (len > SPEC_LINE_MAX)
		return ek_fail(e, EK_DATAERR, "line of %zu bytes is over the %d-byte limit", len, SPEC_LINE_MAX);
	if (nul)   /* jansson would only say "end of file expected" */
		return ek_fail(e, EK_DATAERR, "malformed JSON: NUL byte at byte %zu", (size_t)(nul - buf) + 1);
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return ek_fail(e, EK_DATAERR, "malformed JSON at column %d: %s", je.column, je.text);
	rc = runspec_from_json(o, rs, e);
	json_decref(o);
	return rc;
}

void
runspec_free(struct runspec *rs)
{
	json_decref(rs->root);
	free(rs->content);
	memset(rs, 0, sizeof *rs);
}

