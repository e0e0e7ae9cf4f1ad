/*
 * exec-inspect — read-only questions about stored runs.
 *
 *   lookup   the InspectRetainedRun point lookup: the caller names the
 *            current session it holds; the answer is FOUND (a run stored
 *            under another binding), FILTERED (the caller's own) or ABSENT
 *   relay    the same lookup for the inspections a client asked through
 *            the dispatcher's API: fetch those waiting for the current
 *            session, answer each exactly as lookup would, post the answers
 *   summary  the counts of every population
 *   list     one line per quarantined / unknown / retained / ... item
 *   show     everything stored about one run (the operator's view)
 *   metrics  the summary's figures in Prometheus text format, for
 *            node_exporter's textfile collector (written atomically)
 *
 * Invariant: nothing here writes (inspect.h: query_only, no checkpoint on
 * close), and a lookup never reads a run's program or arguments (an
 * authorizer refuses them).  Local file access is the operator's authority
 * for the views; the lookup is session-gated like every control effect.
 * relay needs the session credential to talk to the dispatcher: it reads
 * it before the guard goes up, and every lookup it answers runs under it.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "file.h"
#include "inspect.h"
#include "jsonout.h"
#include "metrics.h"
#include "relay.h"
#include "runs.h"
#include "state.h"
#include "summary.h"
#include "text.h"

static const char PROG[] = "exec-inspect";

enum { OPT_SESSION = OPT_FIRST_TOOL, OPT_TIMEOUT, OPT_IDS, OPT_OUTPUT, OPT_NUL = '0' };

static const struct option options[] = {
	CLI_COMMON_OPTIONS,
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "session", required_argument, NULL, OPT_SESSION },
	{ "timeout-ms", required_argument, NULL, OPT_TIMEOUT },
	{ "ids", no_argument, NULL, OPT_IDS },
	{ "null", no_argument, NULL, OPT_NUL },
	{ "output", required_argument, NULL, OPT_OUTPUT },
	{ NULL, 0, NULL, 0 },
};

static const char USAGE[] =
	"Usage: exec-inspect [OPTION]... lookup RUN_ID --session SID\n"
	"       exec-inspect [OPTION]... summary\n"
	"       exec-inspect [OPTION]... list KIND [--ids | -0]\n"
	"       exec-inspect [OPTION]... show RUN_ID\n"
	"       exec-inspect [OPTION]... metrics [--output FILE]\n"
	"       exec-inspect [OPTION]... relay\n"
	"Read stored runs without touching them.\n"
	"\n"
	"Commands:\n"
	"  lookup RUN_ID  InspectRetainedRun: FOUND (stored under another binding:\n"
	"                 run id, binding, txn id, started, start marker, due time;\n"
	"                 never the program or its arguments), FILTERED (stored under\n"
	"                 the caller's current session) or ABSENT (no execution row and\n"
	"                 no retained result); needs --session naming the current session\n"
	"  summary        counts of queued, running, quarantined, unknown, unreconciled\n"
	"                 results (and the delivery attempts spent on them) and receipts\n"
	"  list KIND      one line per item; KIND is quarantined (runs of other bindings),\n"
	"                 unknown, retained (results not refused), refused, orphaned\n"
	"                 (retained under a session that is not current), queued, running\n"
	"                 (of the current session) or receipts\n"
	"  show RUN_ID    everything stored about a run: accepted spec identity, execution\n"
	"                 row, retained result, receipt and binding; tells acknowledged\n"
	"                 from never recorded\n"
	"  metrics        the summary, counters (*_total) and session gauges as\n"
	"                 Prometheus text (metrics named execkit_*), for node_exporter's\n"
	"                 textfile collector\n"
	"  relay          answer the inspections the dispatcher holds for the current\n"
	"                 session (asked by clients of its API): each gets the answer\n"
	"                 lookup would give, or ERROR with the reason and exit status;\n"
	"                 one line per inspection answered\n"
	"\n"
	"Options:\n"
	"      --session SID      the current session the caller holds (lookup)\n"
	"      --timeout-ms N     wait at most N ms for the database, and relay: for each\n"
	"                         request to the dispatcher (default 5000)\n"
	"      --ids              list: run ids only, one per line (for exec-report)\n"
	"  -0, --null             list: run ids only, each ended by a NUL byte\n"
	"      --output FILE      metrics: replace FILE atomically (mode 0644) instead of\n"
	"                         writing to standard output\n"
	"      --json             JSON Lines output (doc/json.md)\n"
	"      --state-dir DIR    state directory (default $EXEC_STATE_DIR)\n"
	"  -h, --help             show this help and exit\n"
	"      --version          show the version and exit\n"
	"\n"
	"The executor is shutting down while the file 'shutdown' in the state\n"
	"directory is newer than its newest session; lookups then fail with 75.\n"
	"\n"
	"Exit status: 0 answered (FOUND, FILTERED and ABSENT alike; relay: every\n"
	"inspection fetched got its answer, ERROR included); 64 usage;\n"
	"65 malformed run id, stored transaction id over 256 bytes, or damaged state;\n"
	"66 no state directory, or show: nothing was ever recorded for the run;\n"
	"69 relay: dispatcher unavailable;\n"
	"73 metrics: cannot create the temporary file beside FILE; 74 write error;\n"
	"75 the database stayed locked past --timeout-ms, or the executor is shutting\n"
	"down; 76 relay: the dispatcher refused an answer (the others are still\n"
	"posted) or answered nonsense;\n"
	"77 no current session, or --session names another one, or relay: the\n"
	"session is over (or unsafe permissions); 78 state from another version.\n";

struct opts {
	const char *state_dir, *session, *cmd, *arg, *output;
	int64_t timeout_ms;
	int json, ids;
	char sep;
};

/* --- human output ------------------------------------------------------------ */

/* A string as a shell word: bare when plain, else single-quoted; made
 * safe for a terminal first (text.h). */
static void
fmt_word(const char *raw, char *buf, size_t n)
{
	char safe[4096];
	const char *s = text_safe(safe, sizeof safe, raw);
	size_t i = 0;

	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._:@/+=,-") == strlen(s)) {
		snprintf(buf, n, "%s", s);
		return;
	}
	buf[i++] = '\'';
	for (; *s && i + 5 < n; s++) {
		if (*s == '\'') {
			memcpy(buf + i, "'\\''", 4);
			i += 4;
		} else
			buf[i++] = *s;
	}
	buf[i++] = '\'';
	buf[i] = '\0';
}

/* A JSON value as human text: null "-", booleans yes/no. */
static void
fmt_value(json_t *v, char *buf, size_t n)
{
	char *dump;

	if (json_is_string(v))
		fmt_word(json_string_value(v), buf, n);
	else if (json_is_integer(v))
		snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, n, "%s", json_is_true(v) ? "yes" : "no");
	else if (!v || json_is_null(v))
		snprintf(buf, n, "-");
	else if ((dump = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII))) {
		snprintf(buf, n, "%s", dump);
		free(dump);
	} else
		snprintf(buf, n, "?");
}

/* --- lookup ---------------------------------------------------------------- */

/* An answer on one line, without its end: the value of key bare, then
 * key=value for every other field. */
static void
print_answer(json_t *o, const char *key)
{
	char buf[2048];
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		if (strcmp(k, key) == 0) {
			fputs(json_string_value(v), stdout);
			continue;
		}
		fmt_value(v, buf, sizeof buf);
		printf(" %s=%s", k, buf);
	}
}

/* The lookup for lookup and relay alike, under the shared hold that lets
 * a closing session join it before it closes. */
static int
lookup_held(struct state *st, const char *sid, const char *run_id, int64_t timeout_ms,
    struct inspect_found *f, struct ek_err *e)
{
	int hold, rc;

	if ((hold = inspect_hold(st, mono_ms() + timeout_ms, e)) < 0)
		return -1;
	rc = inspect_lookup(st, sid, run_id, f, e);
	inspect_release(hold);
	return rc;
}

static int
cmd_lookup(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct inspect_found f;
	json_t *j;

	if (lookup_held(st, o->session, o->arg, o->timeout_ms, &f, e) < 0)
		return -1;
	if (!(j = inspect_found_json(&f, "answer")))
		return ek_fail(e, EK_OSERR, "out of memory");
	if (o->json)
		json_emit(stdout, j);
	else {
		print_answer(j, "answer");
		putchar('\n');
		json_decref(j);
	}
	return 0;
}

/* --- relay ------------------------------------------------------------------- */

/* What relay needs to talk to the dispatcher as the current session. */
struct relay_ctx {
	struct session s;
	char cred[256];
};

/* Read the current session and its credential: before inspect_guard(),
 * which forbids the credential to every later statement. */
static int
relay_begin(struct state *st, struct relay_ctx *r, struct ek_err *e)
{
	return session_require(st, NULL, &r->s, e) < 0 ||
	    session_credential(st, &r->s.b, r->cred, sizeof r->cred, e) < 0 ? -1 : 0;
}

/* The answer to one inspection: the lookup's, or ERROR with its reason
 * and the exit status lookup would have given.  NULL: out of memory. */
static json_t *
relay_answer(struct state *st, const struct opts *o, json_t *item)
{
	struct inspect_found f;
	struct ek_err why = { 0 };

	if (lookup_held(st, json_string_value(json_object_get(item, "session_id")),
	    json_string_value(json_object_get(item, "run_id")), o->timeout_ms, &f, &why) == 0)
		return inspect_found_json(&f, "outcome");
	utf8_clip(why.msg, strlen(why.msg));   /* it may quote a cut of the request */
	return json_pack("{s:s, s:s, s:i}", "outcome", "ERROR", "reason", why.msg,
	    "exit_code", why.code ? why.code : EK_SOFTWARE);
}

/* Answer one inspection, post the answer, print it. */
static int
relay_one(struct state *st, const struct opts *o, const struct relay_ctx *r, json_t *item,
    struct ek_err *e)
{
	const char *id = json_string_value(json_object_get(item, "inspection_id"));
	json_t *a = relay_answer(st, o, item);
	int rc;

	if (!a)
		return ek_fail(e, EK_OSERR, "out of memory");
	if ((rc = relay_post(&r->s, r->cred, id, a, o->timeout_ms, e)) < 0) {
		json_decref(a);
		return -1;
	}
	if (o->json) {   /* a failed write is caught at exit (cli_finish) */
		json_emit(stdout, json_pack("{s:s, s:b, s:o}", "inspection_id", id,
		    "recorded", rc == 0, "answer", a));
		return 0;
	}
	printf("%s ", id);
	print_answer(a, "outcome");
	puts(rc == 0 ? "" : " (not recorded: already answered)");
	json_decref(a);
	return 0;
}

/* Answer every inspection waiting for the current session, oldest first.
 * A refused answer is reported and the round goes on, so one inspection
 * the dispatcher will not take cannot hold back the ones behind it every
 * heartbeat.  Any other failure (dispatcher unavailable, session over)
 * stops the round; what is left waits for the next one. */
static int
cmd_relay(struct state *st, const struct opts *o, const struct relay_ctx *r, struct ek_err *e)
{
	json_t *list, *item;
	size_t i, refused = 0;
	int rc = 0;

	if (relay_fetch(&r->s, r->cred, o->timeout_ms, &list, e) < 0)
		return -1;
	json_array_foreach(list, i, item) {
		if ((rc = relay_one(st, o, r, item, e)) == 0)
			continue;
		if (e->code != EK_PROTOCOL)
			break;
		ek_report(PROG, e);
		ek_clear(e);
		refused++;
		rc = 0;
	}
	if (rc == 0 && refused)
		rc = ek_fail(e, EK_PROTOCOL, "the dispatcher refused %zu of %zu answers",
		    refused, json_array_size(list));
	json_decref(list);
	return rc;
}

/* --- summary ------------------------------------------------------------------- */

static int
cmd_summary(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct inspect_figures f;
	const struct summary *s = &f.s;
	json_t *j;

	if (inspect_figures(st, &f, e) < 0)
		return -1;
	if (o->json) {
		if (!(j = summary_json(s)) ||
		    json_object_set_new(j, "unreconciled_attempts", json_integer(f.s.attempts)) < 0 ||
		    json_object_set_new(j, "output", json_pack("{s:I, s:I}", "files",
		    (json_int_t)f.output_files, "bytes", (json_int_t)f.output_bytes)) < 0) {
			json_decref(j);
			return ek_fail(e, EK_OSERR, "out of memory");
		}
		json_emit(stdout, j);
		return 0;
	}
	printf("queued: %lld runs of the current session\n", (long long)s->queued);
	printf("running: %lld runs of the current session\n", (long long)s->started);
	printf("quarantined: %lld runs of other sessions (%lld queued, %lld started)\n",
	    (long long)s->quarantined, (long long)s->quarantined_queued, (long long)s->quarantined_started);
	printf("unknown: %lld runs\n", (long long)s->unknown);
	printf("unreconciled results: %lld (deliverable now %lld, owned by an earlier session %lld, "
	    "refused %lld; %lld delivery attempts so far)\n",
	    (long long)(s->deliverable + s->earlier_session + s->refused), (long long)s->deliverable,
	    (long long)s->earlier_session, (long long)s->refused, (long long)f.s.attempts);
	printf("receipts: %lld\n", (long long)s->receipts);
	printf("handed back: %lld runs (%lld more marked, not acknowledged yet)\n",
	    (long long)s->handed_back, (long long)s->handing_back);
	printf("output: %lld files, %lld bytes\n", (long long)f.output_files, (long long)f.output_bytes);
	if (s->oldest_unreconciled_ms)
		printf("oldest unreconciled result chosen at: %lld ms\n", (long long)s->oldest_unreconciled_ms);
	return 0;
}

/* --- metrics ---------------------------------------------------------------------- */

/* The figures as Prometheus text: on stdout, or replacing --output FILE. */
static int
cmd_metrics(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct inspect_figures f;
	char *text;
	int rc = 0;

	if (inspect_figures(st, &f, e) < 0)
		return -1;
	if (!(text = inspect_metrics_text(&f)))
		return ek_fail(e, EK_OSERR, "out of memory");
	if (o->output)
		rc = file_write_atomic(o->output, text, strlen(text), 0644, e);
	else
		fputs(text, stdout);
	free(text);
	return rc;
}

/* --- list ------------------------------------------------------------------------- */

struct lister {
	const struct opts *o;
	int rows;
};

static int
col_width(const char *name)
{
	if (strcmp(name, "run_id") == 0)
		return 24;
	if (strcmp(name, "incarnation") == 0 || strcmp(name, "session_id") == 0)
		return 20;
	return strstr(name, "_at") ? 14 : 10;
}

/* A table row (or, first, the header): every column but the last padded. */
static void
print_row(json_t *row, bool header)
{
	char buf[2048], name[64];
	size_t i = 0, n = json_object_size(row);
	const char *k;
	json_t *v;

	json_object_foreach(row, k, v) {
		if (header) {
			for (i = 0; k[i] && i + 1 < sizeof name; i++)
				name[i] = (char)toupper((unsigned char)k[i]);
			name[i] = '\0';
			snprintf(buf, sizeof buf, "%s", name);
		} else
			fmt_value(v, buf, sizeof buf);
		if (--n)
			printf("%-*s ", col_width(k), buf);
		else
			printf("%s\n", buf);
	}
}

static int
list_one(json_t *row, void *arg)
{
	struct lister *l = arg;

	if (l->o->ids) {
		fputs(json_string_value(json_object_get(row, "run_id")), stdout);
		putchar(l->o->sep);
	} else if (l->o->json)
		json_emit(stdout, json_incref(row));
	else {
		if (l->rows == 0)
			print_row(row, true);
		print_row(row, false);
	}
	l->rows++;
	return ferror(stdout) ? 1 : 0;
}

static int
cmd_list(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct lister l = { o, 0 };

	return inspect_list(st, o->arg, list_one, &l, e);
}

/* --- show --------------------------------------------------------------------------- */

static void
print_section(const char *title, json_t *v)
{
	char buf[4096];
	const char *k;
	json_t *x;

	if (!json_is_object(v)) {
		printf("%s: none\n", title);
		return;
	}
	printf("%s:\n", title);
	json_object_foreach(v, k, x) {
		fmt_value(x, buf, sizeof buf);
		printf("  %s: %s\n", k, buf);
	}
}

static void
print_show(json_t *o)
{
	json_t *b = json_object_get(o, "binding");
	const char *status = json_string_value(json_object_get(b, "session_status"));
	char inc[256], sid[256];

	printf("run %s: %s\n", json_string_value(json_object_get(o, "run_id")),
	    json_string_value(json_object_get(o, "detail")));
	if (json_is_object(b)) {
		fmt_value(json_object_get(b, "incarnation"), inc, sizeof inc);
		fmt_value(json_object_get(b, "session_id"), sid, sizeof sid);
		printf("binding: incarnation=%s session_id=%s (session %s; %s)\n", inc, sid,
		    status ? status : "never negotiated here",
		    json_is_true(json_object_get(b, "current")) ? "current" : "not current: quarantined");
	}
	print_section("accepted", json_object_get(o, "accepted"));
	print_section("execution row", json_object_get(o, "run"));
	print_section("retained result", json_object_get(o, "result"));
	print_section("receipt", json_object_get(o, "receipt"));
}

static int
cmd_show(struct state *st, const struct opts *o, struct ek_err *e)
{
	json_t *j;

	if (inspect_show(st, o->arg, &j, e) < 0)
		return -1;
	if (!j)
		return ek_fail(e, EK_NOINPUT, "run '%s': never recorded here (no accepted run, "
		    "execution row, retained result or receipt)", o->arg);
	if (o->json) {
		json_emit(stdout, j);
		return 0;
	}
	print_show(j);
	json_decref(j);
	return 0;
}

/* --- arguments ----------------------------------------------------------------------- */

static bool
list_kind_known(const char *kind)
{
	const char *const *k;

	for (k = inspect_list_kinds; *k; k++)
		if (strcmp(*k, kind) == 0)
			return true;
	return false;
}

/* Operands: COMMAND [ARG]; which commands take which options. */
static int
check_operands(int argc, char **argv, struct opts *o)
{
	bool lookup, needs_arg;

	if (optind == argc)
		return cli_usage_error(PROG, "missing command (lookup, summary, list, show, metrics "
		    "or relay)");
	o->cmd = argv[optind++];
	lookup = strcmp(o->cmd, "lookup") == 0;
	needs_arg = lookup || strcmp(o->cmd, "list") == 0 || strcmp(o->cmd, "show") == 0;
	if (!needs_arg && strcmp(o->cmd, "summary") != 0 && strcmp(o->cmd, "metrics") != 0 &&
	    strcmp(o->cmd, "relay") != 0)
		return cli_usage_error(PROG, "unknown command '%s'", o->cmd);
	if (strcmp(o->cmd, "list") == 0 && optind < argc && !list_kind_known(argv[optind]))
		return cli_usage_error(PROG, "unknown list '%s' (quarantined, unknown, retained, refused, "
		    "orphaned, queued, running or receipts)", argv[optind]);
	if (needs_arg && optind == argc)
		return cli_usage_error(PROG, "%s needs %s", o->cmd, strcmp(o->cmd, "list") ? "a RUN_ID" : "a KIND");
	o->arg = needs_arg ? argv[optind++] : NULL;
	if (optind != argc)
		return cli_usage_error(PROG, "unexpected operand '%s'", argv[optind]);
	if (lookup != (o->session != NULL))
		return cli_usage_error(PROG, lookup ? "lookup needs --session SID (the current session "
		    "the caller holds)" : "--session goes with lookup only");
	if (o->ids && strcmp(o->cmd, "list") != 0)
		return cli_usage_error(PROG, "--ids and -0 go with list only");
	if (o->ids && o->json)
		return cli_usage_error(PROG, "--ids or -0 and --json exclude each other");
	if (o->output && strcmp(o->cmd, "metrics") != 0)
		return cli_usage_error(PROG, "--output goes with metrics only");
	if (o->json && strcmp(o->cmd, "metrics") == 0)
		return cli_usage_error(PROG, "metrics writes Prometheus text; for JSON use 'summary --json'");
	return 0;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int c;

	o->timeout_ms = 5000;
	o->sep = '\n';
	opterr = 0;   /* cli_bad_option() says it, once */
	while ((c = getopt_long(argc, argv, "h0", options, NULL)) != -1) {
		switch (c) {
		case OPT_HELP: fputs(USAGE, stdout); return CLI_DONE;
		case OPT_VERSION: cli_version(PROG); return CLI_DONE;
		case OPT_STATE_DIR: o->state_dir = optarg; break;
		case OPT_JSON: o->json = 1; break;
		case OPT_SESSION: o->session = optarg; break;
		case OPT_IDS: o->ids = 1; break;
		case OPT_NUL: o->ids = 1; o->sep = '\0'; break;
		case OPT_OUTPUT:
			if (!*optarg)
				return cli_usage_error(PROG, "--output: empty file name");
			o->output = optarg;
			break;
		case OPT_TIMEOUT:
			if (cli_parse_i64(optarg, 1, 3600000, &o->timeout_ms) < 0)
				return cli_usage_error(PROG, "--timeout-ms: '%s' is not a number of ms from 1 to 3600000", optarg);
			break;
		default: return cli_bad_option(PROG, argv);
		}
	}
	return check_operands(argc, argv, o);
}

static int
dispatch(struct state *st, const struct opts *o, struct ek_err *e)
{
	if (strcmp(o->cmd, "lookup") == 0)
		return cmd_lookup(st, o, e);
	if (strcmp(o->cmd, "list") == 0)
		return cmd_list(st, o, e);
	if (strcmp(o->cmd, "show") == 0)
		return cmd_show(st, o, e);
	if (strcmp(o->cmd, "metrics") == 0)
		return cmd_metrics(st, o, e);
	return cmd_summary(st, o, e);
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct state st;
	struct ek_err e = { 0 };
	struct relay_ctx r = { 0 };
	int64_t deadline;
	int rc = parse_args(argc, argv, &o);
	bool relay;

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	deadline = mono_ms() + o.timeout_ms;
	relay = strcmp(o.cmd, "relay") == 0;
	if ((strcmp(o.cmd, "lookup") == 0 || strcmp(o.cmd, "show") == 0) && !run_id_valid(o.arg)) {
		/* an error, never an answer about a run */
		ek_fail(&e, EK_DATAERR, "malformed run id: a run id is 1 to %d bytes of [A-Za-z0-9._:-]",
		    RUN_ID_MAX);
		return ek_report(PROG, &e);
	}
	if (inspect_wait_readable(cli_state_dir(o.state_dir), deadline, &e) < 0 ||
	    state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	rc = relay ? relay_begin(&st, &r, &e) : 0;
	if (rc == 0)
		rc = inspect_guard(&st, relay || strcmp(o.cmd, "lookup") == 0 ? INSPECT_LOOKUP :
		    INSPECT_VIEW, deadline, &e);
	if (rc == 0)
		rc = relay ? cmd_relay(&st, &o, &r, &e) : dispatch(&st, &o, &e);
	memset(r.cred, 0, sizeof r.cred);
	state_close(&st);
	return cli_finish(PROG, rc < 0 ? ek_report(PROG, &e) : EK_OK);
}
