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
 *   show     everything stored about one run (the operator's view), its
 *            story first (story.h)
 *   logs     a run's captured output, printed or followed (runlog.h)
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
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "clock.h"
#include "complete.h"
#include "exec-inspect.h"
#include "file.h"
#include "inspect.h"
#include "jsonout.h"
#include "opts.h"
#include "metrics.h"
#include "proc.h"
#include "relay.h"
#include "runlog.h"
#include "runs.h"
#include "session.h"
#include "state.h"
#include "story.h"
#include "summary.h"
#include "table.h"
#include "text.h"
#include "timefmt.h"

static const char PROG[] = EXEC_INSPECT_PROG;

static const char USAGE_HEAD[] =
	"Usage: exec-inspect [OPTION]... lookup RUN_ID --session SID\n"
	"       exec-inspect [OPTION]... summary\n"
	"       exec-inspect [OPTION]... list KIND [--ids | -0] [-o COLUMNS] [FILTER]...\n"
	"       exec-inspect [OPTION]... show RUN_ID\n"
	"       exec-inspect [OPTION]... logs RUN_ID [--stderr] [-f]\n"
	"       exec-inspect [OPTION]... metrics [--output FILE]\n"
	"       exec-inspect [OPTION]... relay\n"
	"       exec-inspect [OPTION]... ids SET [PREFIX]\n"
	"Read stored runs without touching them.\n"
	"\n";

static const char USAGE_TAIL[] =
	"\n"
	"The executor is shutting down while the file 'shutdown' in the state\n"
	"directory is newer than its newest session; lookups then fail with 75.\n"
	"\n"
	"Exit status: 0 answered (FOUND, FILTERED and ABSENT alike; relay: every\n"
	"inspection fetched got its answer, ERROR included); 64 usage;\n"
	"65 malformed run id, stored transaction id over 256 bytes, or damaged state;\n"
	"66 no state directory, or show: nothing was ever recorded for the run, or\n"
	"logs: no such run, or it has no such output;\n"
	"69 relay: dispatcher unavailable; 71 relay: exec-inspect-relay cannot be run;\n"
	"73 metrics: cannot create the temporary file beside FILE; 74 write error;\n"
	"75 the database stayed locked past --timeout-ms, or the executor is shutting\n"
	"down; 76 relay: the dispatcher refused an answer (the others are still\n"
	"posted) or answered nonsense;\n"
	"77 no current session, or --session names another one, or relay: the\n"
	"session is over; 78 state from another version, or unsafe permissions.\n";

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

#ifndef RELAY_HELPER

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
cmd_relay(struct state *st, const struct opts *o, struct ek_err *e)
{
	const struct relay_ctx *r = o->relay;
	json_t *list, *item;
	size_t i, refused = 0;
	char n[48];
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
		rc = ek_fail(e, EK_PROTOCOL, "the dispatcher refused %zu of %s", refused,
		    cli_plural(n, sizeof n, (int64_t)json_array_size(list), "answer"));
	json_decref(list);
	return rc;
}

/* relay runs here. */
static int
relay_elsewhere(char **argv, struct ek_err *e)
{
	return 0;
}

#else /* RELAY_HELPER */

/* This exec-inspect is linked statically, for the lookups' sake: most of a
 * lookup's time is the start of its process (bench/README.md, "A static
 * exec-inspect").  relay talks HTTP, which needs the dynamic linker (the
 * resolver; libcurl for https), so it is this same file linked as the
 * other tools are, exec-inspect-relay, run in our place with our
 * arguments: from beside us when it is there (the build tree), else from
 * where make install put it. */
struct relay_ctx {
	char cred[1];
};

static int
relay_begin(struct state *st, struct relay_ctx *r, struct ek_err *e)
{
	return 0;
}

static int
cmd_relay(struct state *st, const struct opts *o, struct ek_err *e)
{
	return ek_fail(e, EK_SOFTWARE, "relay is %s's to run", RELAY_HELPER);
}

static int
relay_elsewhere(char **argv, struct ek_err *e)
{
	static const char name[] = "exec-inspect-relay";
	char path[4096], *slash;

	if (proc_self_exe(path, sizeof path) == 0 && (slash = strrchr(path, '/')) &&
	    (size_t)(slash + 1 - path) + sizeof name <= sizeof path) {
		memcpy(slash + 1, name, sizeof name);
		execv(path, argv);
	}
	execv(RELAY_HELPER, argv);
	return ek_fail(e, EK_OSERR, "relay: cannot run %s: %s (relay is the dynamically linked "
	    "exec-inspect; is execkit installed whole?)", RELAY_HELPER, strerror(errno));
}
#endif /* RELAY_HELPER */

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
	if (!(text = inspect_metrics_text(&f, st->executor_id)))
		return ek_fail(e, EK_OSERR, "out of memory");
	if (o->output)
		rc = file_write_atomic(o->output, text, strlen(text), 0644, e);
	else
		fputs(text, stdout);
	free(text);
	return rc;
}

static int
cmd_show(struct state *st, const struct opts *o, struct ek_err *e)
{
	json_t *j;
	int rc;

	if (inspect_show(st, o->arg, &j, e) < 0)
		return -1;
	if (!j)
		return ek_fail(e, EK_NOINPUT, "run '%s': never recorded here, or forgotten "
		    "once the dispatcher settled it for good (exec-reconcile --prune-records)", o->arg);
	if (o->json) {
		json_emit(stdout, j);
		return 0;
	}
	rc = story_print(stdout, j);
	json_decref(j);
	return rc < 0 ? ek_fail(e, EK_OSERR, "out of memory") : 0;
}

/* --- logs ------------------------------------------------------------------------------ */

static volatile sig_atomic_t stop_follow;

static void
on_stop(int sig)
{
	(void)sig;
	stop_follow = 1;
}

/* Ctrl-C (or SIGTERM) ends a follow cleanly: what was read is printed. */
static void
catch_stop(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);   /* no SA_RESTART: the wait is cut short */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static int
cmd_logs(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct runlog r = { o->arg, o->err, o->follow, isatty(STDOUT_FILENO) };
	int64_t dropped;

	if (o->follow)
		catch_stop();
	if (runlog_print(st, &r, &stop_follow, e) < 0 || runlog_dropped(st, &r, &dropped, e) < 0)
		return -1;
	if (dropped > 0)   /* said after the output, on stderr: a pipe gets the bytes alone */
		fprintf(stderr, "%s: run '%s': its %s was cut at the capture bound (exec-run "
		    "--max-output): %lld more bytes were dropped\n", PROG, o->arg,
		    o->err ? "stderr" : "stdout", (long long)dropped);
	return 0;
}

/* The run ids of a set, for the bash completion (complete.h). */
static int
cmd_ids(struct state *st, const struct opts *o, struct ek_err *e)
{
	return complete_run_ids(st, o->arg, o->prefix ? o->prefix : "", stdout, e);
}

/* --- commands and arguments ------------------------------------------------------------ */

/* The commands, as git's commands[]; needs is the guard each runs under:
 * a lookup, and relay which answers lookups, run under the lookup's guard,
 * which forbids reading a run's program and arguments (inspect.h). */
static const struct cli_command commands[] = {
	{ .name = "lookup", .run = cmd_lookup, .needs = INSPECT_LOOKUP,
	  .operand = "RUN_ID", .args = "RUN_ID",
	  .help = "InspectRetainedRun: FOUND (stored under another binding:\n"
	    "run id, binding, txn id, started, start marker, due time;\n"
	    "never the program or its arguments), FILTERED (stored under\n"
	    "the caller's current session) or ABSENT (no execution row and\n"
	    "no retained result); needs --session naming the current session" },
	{ .name = "summary", .run = cmd_summary, .needs = INSPECT_VIEW,
	  .help = "counts of queued, running, quarantined, unknown, unreconciled\n"
	    "results (and the delivery attempts spent on them), receipts,\n"
	    "output held, and when the oldest unreconciled result was chosen" },
	{ .name = "list", .run = cmd_list, .needs = INSPECT_VIEW,
	  .operand = "KIND", .args = "KIND", .words = inspect_list_kinds,
	  .help = "one line per item; KIND is quarantined (runs of other\n"
	    "bindings), unknown, retained (results not refused), refused,\n"
	    "orphaned (retained under a session that is not current),\n"
	    "queued, running (of the current session), receipts, or all\n"
	    "(every accepted run, one row each: its state, program,\n"
	    "elapsed time or duration); a table sized to its content and\n"
	    "cut to the terminal's width (-w: whole); FILTER is --since\n"
	    "AGE, --outcome OUTCOME, --failed, --session SID" },
	{ .name = "show", .run = cmd_show, .needs = INSPECT_VIEW,
	  .operand = "RUN_ID", .args = "RUN_ID",
	  .help = "a run's story (program, args, env names, cwd, timeout,\n"
	    "binding, times, outcome, message, whether output was cut,\n"
	    "delivery, where the evidence went, hand-back, output files),\n"
	    "then everything stored about it: accepted spec identity,\n"
	    "execution row, retained result, receipt, run record,\n"
	    "hand-back; tells acknowledged from never recorded" },
	{ .name = "logs", .run = cmd_logs, .needs = INSPECT_VIEW,
	  .operand = "RUN_ID", .args = "RUN_ID",
	  .help = "print the run's captured standard output (--stderr: its\n"
	    "standard error); made safe for a terminal when on one;\n"
	    "says on stderr when the capture dropped part of it" },
	{ .name = "metrics", .run = cmd_metrics, .needs = INSPECT_VIEW,
	  .help = "the summary, counters (*_total) and session gauges as\n"
	    "Prometheus text (metrics named execkit_*), for node_exporter's\n"
	    "textfile collector" },
	{ .name = "relay", .run = cmd_relay, .needs = INSPECT_LOOKUP,
	  .help = "answer the inspections the dispatcher holds for the current\n"
	    "session (asked by clients of its API): each gets the answer\n"
	    "lookup would give, or ERROR with the reason and exit status;\n"
	    "one line per inspection answered" },
	{ .name = "ids", .run = cmd_ids, .needs = INSPECT_VIEW,
	  .operand = "SET", .args = "SET PREFIX",
	  .help = "the run ids the shell completion offers, those starting with\n"
	    "PREFIX, in id order, at most 1000: SET is all (acknowledged\n"
	    "included), queued, running or live (both; of the current\n"
	    "session), or retained (results not refused)" },
};

/* -0, --null: run ids, each ended by a NUL byte. */
static int
null_opt(void *v, const char *arg)
{
	struct opts *o = v;

	(void)arg;
	o->ids = 1;
	o->sep = '\0';
	return 0;
}

static const struct opt options[] = {
	OPTS_INT("timeout-ms", timeout_ms, 1, CLIENT_TIMEOUT_MAX_MS, "N",
	    "wait at most N ms for the database, and relay: for each\n"
	    "request to the dispatcher (default 5000)"),
	OPTS_FLAG("ids", 0, ids,
	    "list: run ids only, one per line (for exec-report)"),
	OPTS_CALL("null", '0', null_opt, NULL,
	    "list: run ids only, each ended by a NUL byte"),
	OPTS_TABLE_VIEW("list"),
	OPTS_FLAG("no-headings", 0, no_headings,
	    "list: no header line"),
	OPTS_INT("limit", limit, 1, INT64_MAX, "N",
	    "list: at most N rows (the first in the list's order)"),
	OPTS_FLAG("reverse", 0, reverse,
	    "list: newest first (with --limit N: the newest N)"),
	OPTS_AGE("since", since_ms,
	    "list: rows at most AGE old (30d, 12h, 90m, 3600s; by\n"
	    "the time the list is ordered by)"),
	OPTS_ENUM("outcome", outcome, inspect_outcomes, "OUTCOME",
	    "list retained, refused, orphaned, receipts, all: rows\n"
	    "of that outcome (exited, killed, timeout, cancelled,\n"
	    "exec_failed)"),
	OPTS_FLAG("failed", 0, failed,
	    "list retained, refused, orphaned, receipts, all: runs\n"
	    "that failed (not exited 0, not cancelled; or unknown)"),
	OPTS_STRING("session", 0, session, "SID",
	    "lookup: the current session the caller holds;\n"
	    "list: rows bound to session SID"),
	OPTS_FLAG("stderr", 0, err,
	    "logs: the standard error instead"),
	OPTS_FLAG("follow", 'f', follow,
	    "logs: keep printing what the run writes; ends once the\n"
	    "run has finished and its output is printed"),
	OPTS_FLAG("utc", 0, utc,
	    "print times in UTC, not the local time zone"),
	OPTS_STRING("output", 0, output, "FILE",
	    "metrics: replace FILE atomically (mode 0644) instead of\n"
	    "writing to standard output"),
	OPTS_STATE("JSON Lines output (doc/json.md)"),
};

static const struct opts_only only[] = {
	{ "ids null columns wide no-headings limit reverse since outcome failed", "list" },
	{ "session", "lookup list" },
	{ "stderr follow", "logs" },
	{ "output", "metrics" },
};

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options), .cmds = OPTS_TABLE(commands), .only = OPTS_TABLE(only),
	.cmds_column = 17,
};


/* Operands: COMMAND [ARG]; which commands take which options. */
static int check_options(const struct opts *o);

static int
check_operands(int argc, char **argv, struct opts *o)
{
	char names[256];
	int rc;

	if ((rc = opts_command(&spec, argc, argv, &o->cmd)) != 0)
		return rc;
	if (o->cmd->run == cmd_list && optind < argc && !text_word_in(argv[optind], inspect_list_kinds))
		return cli_usage_error(PROG, "unknown list '%s' (%s)", argv[optind],
		    text_join(names, sizeof names, inspect_list_kinds));
	if (o->cmd->operand && optind == argc)
		return cli_usage_error(PROG, "%s needs a %s", o->cmd->name, o->cmd->operand);
	o->arg = o->cmd->operand ? argv[optind++] : NULL;
	if (o->cmd->run == cmd_ids && optind < argc)
		o->prefix = argv[optind++];
	if (optind != argc)
		return cli_usage_error(PROG, "unexpected operand '%s'", argv[optind]);
	if (o->cmd->run == cmd_lookup && !o->session)
		return cli_usage_error(PROG, "lookup needs --session SID (the current session "
		    "the caller holds)");
	return check_options(o);
}

/* What the options mean together, beyond which commands take them (only[]). */
static int
check_options(const struct opts *o)
{
	if ((o->outcome || o->failed) && !inspect_list_has_outcome(o->arg))
		return cli_usage_error(PROG, "%s goes with list retained, refused, orphaned, "
		    "receipts or all (list %s has no outcome)", o->outcome ? "--outcome" : "--failed",
		    o->arg);
	if ((o->columns || o->wide || o->no_headings) && (o->ids || o->json))
		return cli_usage_error(PROG, "-o, -w and --no-headings go with list's table, not with "
		    "--ids, -0 or --json");
	if (o->cmd->run == cmd_logs && o->json)
		return cli_usage_error(PROG, "logs prints the output itself; --json does not go with it");
	if (o->ids && o->json)
		return cli_usage_error(PROG, "--ids or -0 and --json exclude each other");
	if (o->json && o->cmd->run == cmd_metrics)
		return cli_usage_error(PROG, "metrics writes Prometheus text; for JSON use 'summary --json'");
	return 0;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	o->timeout_ms = CLIENT_TIMEOUT_MS;
	o->sep = '\n';
	o->since_ms = -1;
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	if (o->output && !*o->output)
		return cli_usage_error(PROG, "--output: empty file name");
	return check_operands(argc, argv, o);
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

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	if (o.cmd->run == cmd_relay && relay_elsewhere(argv, &e) < 0)
		return ek_report(PROG, &e);
	deadline = mono_ms() + o.timeout_ms;
	timefmt_utc(o.utc);
	if (o.cmd->operand && strcmp(o.cmd->operand, "RUN_ID") == 0 && !run_id_valid(o.arg)) {
		/* an error, never an answer about a run */
		ek_fail(&e, EK_DATAERR, "malformed run id: a run id is 1 to %d bytes of [A-Za-z0-9._:-]",
		    RUN_ID_MAX);
		return ek_report(PROG, &e);
	}
	if (state_open_within(&st, cli_state_dir(o.state_dir), 0, deadline - mono_ms(), &e) < 0)
		return ek_report(PROG, &e);
	o.relay = &r;
	rc = o.cmd->run == cmd_relay ? relay_begin(&st, &r, &e) : 0;
	if (rc == 0)
		rc = inspect_guard(&st, (enum inspect_mode)o.cmd->needs, deadline, &e);
	if (rc == 0)
		rc = o.cmd->run(&st, &o, &e);
	memset(r.cred, 0, sizeof r.cred);
	state_close(&st);
	return cli_finish(PROG, rc < 0 ? ek_report(PROG, &e) : EK_OK);
}
