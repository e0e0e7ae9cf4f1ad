/*
 * exec-accept — accept runs under the current session's binding.
 *
 * Input is JSON Lines (one run spec per line) on stdin, or the session's
 * work feed with --from-dispatcher.  The whole batch is one transaction:
 * every line gets an outcome (accepted, duplicate, conflict, invalid), a
 * bad line never touches the others, and nothing is printed until the
 * batch is durable.  Identity is the run id: the same content returns the
 * original receipt, different content is a conflict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "cli.h"
#include "client.h"
#include "crash.h"
#include "jsonout.h"
#include "runs.h"
#include "state.h"

static const char PROG[] = "exec-accept";

enum { OPT_SESSION = OPT_FIRST_TOOL, OPT_FROM_DISPATCHER, OPT_MAX, OPT_TIMEOUT };

static const struct option options[] = {
	CLI_COMMON_OPTIONS,
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "session", required_argument, NULL, OPT_SESSION },
	{ "from-dispatcher", no_argument, NULL, OPT_FROM_DISPATCHER },
	{ "max", required_argument, NULL, OPT_MAX },
	{ "timeout-ms", required_argument, NULL, OPT_TIMEOUT },
	{ NULL, 0, NULL, 0 },
};

static const char USAGE[] =
	"Usage: exec-accept [OPTION]... < RUNS.jsonl\n"
	"       exec-accept [OPTION]... --from-dispatcher\n"
	"Accept runs under the current session, idempotently by run id.\n"
	"\n"
	"Options:\n"
	"      --from-dispatcher  pull the session's work feed and send receipts back\n"
	"      --max N            with --from-dispatcher: at most N runs (default 100)\n"
	"      --session SID      refuse unless SID is the current session\n"
	"      --timeout-ms N     bound each dispatcher request to N ms (default 5000)\n"
	"      --json             one JSON outcome per input line (doc/json.md)\n"
	"      --state-dir DIR    state directory (default $EXEC_STATE_DIR)\n"
	"  -h, --help             show this help and exit\n"
	"      --version          show the version and exit\n"
	"\n"
	"Exit status: 0 every line accepted or a duplicate; 64 usage; 65 some line\n"
	"invalid or a conflict (the others are accepted); 66 no state directory;\n"
	"69 dispatcher unavailable; 75 state busy, try again; 77 no current session\n"
	"or not SID; 78 state from another version.\n";

struct opts {
	const char *state_dir, *session;
	int64_t max, timeout_ms;
	int json, from_dispatcher;
};

/* Outcomes are buffered and printed only once the batch has committed. */
struct batch {
	struct state *st;
	struct acceptor *acc;
	const struct opts *o;
	FILE *out;
	char *outbuf;
	size_t outlen;
	json_t *receipts;     /* for the dispatcher, with --from-dispatcher */
	long lines, accepted, duplicates, rejected;
};

static const char *const outcome_name[] = { "accepted", "duplicate", "conflict" };

static void
record(struct batch *b, long line, const char *run_id, const char *outcome,
    const char *receipt, const char *error)
{
	if (b->o->json) {
		json_t *j = json_pack("{s:I, s:s?, s:s, s:s?, s:s?}", "line", (json_int_t)line,
		    "run_id", run_id, "outcome", outcome, "receipt", receipt, "error", error);
		json_emit(b->out, j);
	} else if (error) {
		fprintf(b->out, "%s line %ld%s%s: %s\n", outcome, line, run_id ? " " : "",
		    run_id ? run_id : "", error);
	} else {
		fprintf(b->out, "%s %s %s\n", outcome, run_id, receipt);
	}
	if (b->receipts && run_id)
		json_array_append_new(b->receipts, json_pack("{s:s, s:s, s:s}", "run_id", run_id,
		    "receipt", receipt ? receipt : "", "outcome", outcome));
}

/* Accept one parsed spec; 0, or -1 on a state error that aborts the batch. */
static int
accept_spec(struct batch *b, long line, struct runspec *rs, struct ek_err *e)
{
	char receipt[128];
	enum accept_outcome out;

	if (acceptor_add(b->acc, rs, &out, receipt, sizeof receipt, e) < 0)
		return -1;
	if (out == ACCEPT_NEW)
		b->accepted++;
	else if (out == ACCEPT_DUPLICATE)
		b->duplicates++;
	else
		b->rejected++;
	record(b, line, rs->run_id, outcome_name[out], receipt,
	    out == ACCEPT_CONFLICT ? "a different run with this id was already accepted" : NULL);
	return 0;
}

static void
reject(struct batch *b, long line, const char *run_id, const struct ek_err *why)
{
	char msg[sizeof why->msg];

	/* The message may quote input cut mid-character: keep it valid UTF-8,
	 * or json_pack() refuses it and the line loses its outcome. */
	memcpy(msg, why->msg, sizeof msg);
	msg[sizeof msg - 1] = '\0';
	utf8_clip(msg, sizeof msg - 1);
	b->rejected++;
	record(b, line, run_id, "invalid", NULL, msg);
}

/* Read one line of at most SPEC_LINE_MAX bytes; longer lines are consumed
 * and reported as too long.  Returns length, -1 at EOF; *toolong set. */
static long
read_line(FILE *in, char *buf, int *toolong)
{
	long n = 0;
	int c;

	*toolong = 0;
	while ((c = getc_unlocked(in)) != EOF && c != '\n') {
		if (n < SPEC_LINE_MAX)
			buf[n++] = (char)c;
		else
			*toolong = 1;
	}
	buf[n] = '\0';
	if (c == EOF && n == 0 && !*toolong)
		return -1;
	return n;
}

static int
accept_stdin(struct batch *b, struct ek_err *e)
{
	char *buf = malloc(SPEC_LINE_MAX + 1);
	struct runspec rs;
	struct ek_err le;
	int toolong, rc = 0;
	long n;

	if (!buf)
		return ek_fail(e, EK_OSERR, "out of memory");
	while (rc == 0 && (n = read_line(stdin, buf, &toolong)) >= 0) {
		b->lines++;
		if (toolong) {
			ek_fail(&le, EK_DATAERR, "line is over the %d-byte limit", SPEC_LINE_MAX);
			reject(b, b->lines, NULL, &le);
		} else if (strspn(buf, " \t\r") < (size_t)n) {   /* skip blank lines */
			if (runspec_parse(buf, (size_t)n, &rs, &le) < 0) {
				reject(b, b->lines, NULL, &le);
				continue;
			}
			rc = accept_spec(b, b->lines, &rs, e);
			runspec_free(&rs);
		}
	}
	free(buf);
	if (rc == 0 && ferror(stdin))
		return ek_fail(e, EK_IOERR, "reading standard input failed");
	return rc;
}

static int
accept_feed(struct batch *b, json_t *runs, struct ek_err *e)
{
	struct runspec rs;
	struct ek_err le;
	size_t i;
	json_t *v;

	json_array_foreach(runs, i, v) {
		b->lines++;
		if (runspec_from_json(v, &rs, &le) < 0) {
			reject(b, b->lines, json_string_value(json_object_get(v, "run_id")), &le);
			continue;
		}
		if (accept_spec(b, b->lines, &rs, e) < 0) {
			runspec_free(&rs);
			return -1;
		}
		runspec_free(&rs);
	}
	return 0;
}

/* One transaction around the whole batch; outcomes go out after COMMIT. */
static int
run_batch(struct batch *b, const struct session *s, json_t *feed, struct ek_err *e)
{
	struct session cur;
	int rc;

	if (db_begin_write(&b->st->db, e) < 0)
		return -1;
	/* Checked inside the transaction: no session can be opened meanwhile. */
	if (session_require(b->st, b->o->session, &cur, e) < 0 || !binding_eq(&cur.b, &s->b) ||
	    !(b->acc = acceptor_new(b->st, &cur.b, e))) {
		if (!e->code)
			ek_fail(e, EK_NOSESSION, "the current session changed while accepting");
		db_rollback(&b->st->db);
		return -1;
	}
	rc = feed ? accept_feed(b, json_object_get(feed, "runs"), e) : accept_stdin(b, e);
	acceptor_free(b->acc);
	b->acc = NULL;
	if (rc < 0) {
		db_rollback(&b->st->db);
		return -1;
	}
	crash_point("accept-before-commit");
	if (db_commit(&b->st->db, e) < 0)
		return -1;
	crash_point("accept-after-commit");
	return 0;
}

static int
pull_feed(struct state *st, const struct session *s, const struct opts *o, json_t **feed, struct ek_err *e)
{
	char path[256], cred[256];
	int rc;

	if (session_credential(st, &s->b, cred, sizeof cred, e) < 0)
		return -1;
	snprintf(path, sizeof path, "/v1/sessions/%s/work?max=%lld", s->b.session_id, (long long)o->max);
	rc = client_call(s->dispatcher, "GET", path, cred, NULL, o->timeout_ms, feed, NULL, e);
	memset(cred, 0, sizeof cred);
	if (rc == 0 && !json_is_array(json_object_get(*feed, "runs"))) {
		json_decref(*feed);
		return ek_fail(e, EK_PROTOCOL, "work feed answer has no 'runs' array");
	}
	return rc;
}

/* Tell the dispatcher what became of each run it handed us.  A lost
 * receipt is harmless: the feed hands the run out again and acceptance is
 * idempotent. */
static int
send_receipts(struct state *st, const struct session *s, const struct opts *o, json_t *receipts, struct ek_err *e)
{
	char path[256], cred[256];
	json_t *body, *ans = NULL;
	int rc;

	if (json_array_size(receipts) == 0)
		return 0;
	if (session_credential(st, &s->b, cred, sizeof cred, e) < 0)
		return -1;
	snprintf(path, sizeof path, "/v1/sessions/%s/receipts", s->b.session_id);
	body = json_pack("{s:O}", "receipts", receipts);
	rc = client_call(s->dispatcher, "POST", path, cred, body, o->timeout_ms, &ans, NULL, e);
	memset(cred, 0, sizeof cred);
	json_decref(body);
	json_decref(ans);
	return rc;
}

static int
accept_all(struct state *st, const struct opts *o, struct batch *b, struct ek_err *e)
{
	struct session s;
	json_t *feed = NULL;
	int rc;

	if (session_require(st, o->session, &s, e) < 0)
		return -1;
	if (o->from_dispatcher && pull_feed(st, &s, o, &feed, e) < 0)
		return -1;
	if (!(b->out = open_memstream(&b->outbuf, &b->outlen))) {
		json_decref(feed);
		return ek_fail(e, EK_OSERR, "out of memory");
	}
	b->receipts = feed ? json_array() : NULL;
	rc = run_batch(b, &s, feed, e);
	fclose(b->out);
	if (rc == 0)
		fwrite(b->outbuf, 1, b->outlen, stdout);
	if (rc == 0 && feed)
		rc = send_receipts(st, &s, o, b->receipts, e);
	json_decref(b->receipts);
	json_decref(feed);
	free(b->outbuf);
	return rc;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int c;

	o->max = 100;
	o->timeout_ms = CLIENT_TIMEOUT_MS;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (c) {
		case OPT_HELP: fputs(USAGE, stdout); return -2;
		case OPT_VERSION: cli_version(PROG); return -2;
		case OPT_STATE_DIR: o->state_dir = optarg; break;
		case OPT_JSON: o->json = 1; break;
		case OPT_SESSION: o->session = optarg; break;
		case OPT_FROM_DISPATCHER: o->from_dispatcher = 1; break;
		case OPT_MAX:
			if (cli_parse_i64(optarg, 1, 1000, &o->max) < 0)
				return cli_usage_error(PROG, "--max: '%s' is not a number from 1 to 1000", optarg);
			break;
		case OPT_TIMEOUT:
			if (cli_parse_i64(optarg, 1, 3600000, &o->timeout_ms) < 0)
				return cli_usage_error(PROG, "--timeout-ms: '%s' is not a number of ms from 1 to 3600000", optarg);
			break;
		default: return cli_bad_option(PROG, argv);
		}
	}
	if (optind != argc)
		return cli_usage_error(PROG, "unexpected operand '%s' (runs are read from standard input)", argv[optind]);
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct batch b = { 0 };
	struct state st;
	struct ek_err e = { 0 };
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == -2 ? cli_finish(PROG, EK_OK) : rc;
	if (state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	b.st = &st;
	b.o = &o;
	rc = accept_all(&st, &o, &b, &e);
	state_close(&st);
	if (rc < 0)
		return cli_finish(PROG, ek_report(PROG, &e));
	if (isatty(STDERR_FILENO) && b.lines > 1000)
		fprintf(stderr, "%s: %ld accepted, %ld duplicates, %ld rejected\n", PROG,
		    b.accepted, b.duplicates, b.rejected);
	return cli_finish(PROG, b.rejected ? EK_DATAERR : EK_OK);
}
