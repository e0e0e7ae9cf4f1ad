/*
 * exec-reconcile — one bounded reconciliation pass over the retained
 * results of the current session.
 *
 * A pass takes at most --max results (default 32): those never tried
 * first, then those whose last attempt is oldest (so results that fail
 * forever rotate behind the others instead of starving them), through
 * the results_deliverable index: only results this session can still
 * deliver (not refused, bound to this session or to one it adopted, see
 * exec-session adopt), so undeliverable rows never
 * crowd out deliverable ones however many there are.  It stops when its
 * budget is spent or the session turns out to be over.  It reads and
 * sends only: it never touches queued work and never runs a guest.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "counters.h"
#include "deliver.h"
#include "evidence.h"
#include "inspect.h"
#include "jsonout.h"
#include "opts.h"
#include "output.h"
#include "progress.h"
#include "retention.h"
#include "runs.h"
#include "session.h"
#include "state.h"
#include "timefmt.h"

static const char PROG[] = "exec-reconcile";

struct opts {
	const char *state_dir, *export_path;
	int64_t max, budget_ms, prune_age_ms, records_age_ms, output_cap;
	int json, drain, dry_run, adoptable;
};

#define PASS_MAX 32   /* the seed caps a pass at 32 results: the most --max allows */
#define NO_COLLECT (-2)   /* output_cap without --output-cap (-1: auto) */

/* The longest --budget-ms: a day, where exec-run's and exec-report's is an
 * hour (DELIVER_BUDGET_MAX_MS), on purpose: with --drain it bounds every
 * pass of a drain together, the step before moving a state to another
 * version, which may have a day of results to deliver. */
#define RECONCILE_BUDGET_MAX_MS 86400000

static const struct opt options[] = {
	OPTS_INT("max", max, 1, PASS_MAX, "N", "at most N results in a pass, 1 to 32 (default 32)"),
	OPTS_INT("budget-ms", budget_ms, 1, RECONCILE_BUDGET_MAX_MS, "N",
	    "the pass (or the whole drain) ends within N ms\n"
	    "(default 5000)"),
	OPTS_FLAG("drain", 0, drain,
	    "repeat passes until nothing deliverable is left or the\n"
	    "budget ends (the step before moving state to another\n"
	    "version)"),
	OPTS_AGE("prune-receipts", prune_age_ms,
	    "delete receipts older than AGE (e.g. 30d, 12h, 90m,\n"
	    "3600s); each run keeps a record (exec-inspect show)"),
	OPTS_AGE("prune-records", records_age_ms,
	    "forget runs the dispatcher settled for good (result\n"
	    "acknowledged, or handed back and re-queued) whose\n"
	    "record is older than AGE: record, spec and rows go, a\n"
	    "lookup then answers ABSENT; every other record is kept\n"
	    "and counted; then ended sessions nothing refers to"),
	OPTS_STRING("export-evidence", 0, export_path, "FILE",
	    "write refused and orphaned results to FILE (JSON\n"
	    "Lines, with the stored bodies), fsync it, then delete\n"
	    "those rows, each run keeping a record; results of an\n"
	    "ended session that exec-session adopt could still\n"
	    "deliver are kept back (and counted)"),
	OPTS_FLAG("include-adoptable", 0, adoptable,
	    "export those too: their runs are then never reported"),
	OPTS_FLAG("dry-run", 0, dry_run,
	    "prune, export: say what would go (--json: one line per\n"
	    "item), change nothing"),
	{ .name = "output-cap", .kind = OPTK_INT, .meta = "BYTES",
	  .off = offsetof(struct opts, output_cap), .min = 0, .max = INT64_MAX,
	  .word = "auto", .word_value = OUTPUT_QUOTA_AUTO, .help =
	    "remove captured output nothing refers to, then, while\n"
	    "out/ holds more than BYTES (0: no cap; auto: half the\n"
	    "default output quota, an eighth of the state's\n"
	    "filesystem, at most 512 MiB), the output of\n"
	    "acknowledged runs, oldest first (exec-loop: once a\n"
	    "minute)" },
	OPTS_STATE("one JSON line per result and per pass (doc/json.md)"),
};

static const char USAGE_HEAD[] =
	"Usage: exec-reconcile [OPTION]...\n"
	"       exec-reconcile [OPTION]... --prune-receipts AGE [--dry-run]\n"
	"       exec-reconcile [OPTION]... --prune-records AGE [--dry-run]\n"
	"       exec-reconcile [OPTION]... --export-evidence FILE [--dry-run]\n"
	"       exec-reconcile [OPTION]... --output-cap BYTES\n"
	"Deliver retained results of the current session in one bounded pass.\n"
	"\n"
	"Options:\n";

static const char USAGE_TAIL[] =
	"\n"
	"Exit status: 0 every selected result was delivered or settled; 64 usage;\n"
	"65 corrupt state; 66 no state directory; 75 some results are still waiting\n"
	"(transient failures, claimed elsewhere, or budget spent); 77 no current\n"
	"session, or it ended during the pass; 78 state from another version, or\n"
	"unsafe permissions.\n";

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options),
};


struct pass {
	char ids[PASS_MAX][RUN_ID_MAX + 1];
	struct deliver_report reps[PASS_MAX];
	int n, delivered, refused, waiting;
	bool session_over;
};

/* Append up to max deliverable results of b to p->ids: never tried first,
 * then by oldest last attempt, then oldest chosen. */
static int
select_binding(struct state *st, const struct binding *b, int max, struct pass *p, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id FROM results INDEXED BY results_deliverable "
	    "WHERE incarnation = ?1 AND session_id = ?2 AND refused = 0 ORDER BY last_attempt_at, chosen_at LIMIT ?3", e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, max - p->n);
	while ((rc = db_step(&st->db, q, e)) == 1)
		db_col_text(q, 0, p->ids[p->n++], sizeof p->ids[0]);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* The pass's selection: the session's own results first, then those of
 * the bindings it adopted, each through the results_deliverable index. */
static int
select_batch(struct state *st, const struct binding *b, int max, struct pass *p, struct ek_err *e)
{
	struct binding adopted[RESULT_ADOPTED_MAX];
	int i, n = 0;

	p->n = 0;
	if (select_binding(st, b, max, p, e) < 0 ||
	    (p->n < max && session_adopted(st, b, adopted, RESULT_ADOPTED_MAX, &n, e) < 0))
		return -1;
	for (i = 0; p->n < max && i < n; i++)
		if (select_binding(st, &adopted[i], max, p, e) < 0)
			return -1;
	return 0;
}

/* The drain's progress line on a terminal: totals so far, the rate, and
 * what is left (with an ETA from it). */
static void
show_progress(struct state *st, const struct binding *b, struct progress *pg, int passes,
    int delivered, int refused, int waiting)
{
	struct ek_err e = { 0 };
	int64_t left = -1, done = delivered + refused;
	char extra[128];

	if (!pg->on)
		return;
	if (result_deliverable_by(st, b, &left, NULL, &e) < 0)
		left = -1;
	snprintf(extra, sizeof extra, "%d refused, %d waiting, pass %d", refused, waiting, passes);
	if (left >= 0)
		snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", %lld left",
		    (long long)left);
	progress_show(pg, delivered, "delivered", left >= 0 && done + left > 0 ?
	    (double)done / (double)(done + left) : -1, extra, true);
}

static void
print_one(const struct opts *o, const char *id, const struct deliver_report *r)
{
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:i, s:s}", "event", "reconcile_result",
		    "run_id", id, "status", deliver_status_name(r->status), "attempts", r->attempts,
		    "detail", r->detail));
	else
		deliver_print_line(stdout, id, r);
}

static int
run_pass(struct state *st, const struct opts *o, const struct binding *b, int64_t deadline,
    struct pass *p, struct ek_err *e)
{
	struct deliver_report *r = p->reps;
	const char *ids[PASS_MAX];
	int i;

	if (select_batch(st, b, (int)o->max, p, e) < 0)
		return -1;
	for (i = 0; i < p->n; i++)
		ids[i] = p->ids[i];
	if (p->n == 0 || mono_ms() >= deadline) {
		p->waiting = p->n;
		return 0;
	}
	if (deliver_batch(st, ids, p->n, DELIVER_MAX_ATTEMPTS, deadline, r, e) < 0)
		return -1;
	for (i = 0; i < p->n; i++) {
		print_one(o, p->ids[i], &r[i]);
		p->delivered += r[i].status == DELIVERED;
		p->refused += r[i].status == DELIVER_REFUSED;
		p->waiting += r[i].status == DELIVER_FAILED || r[i].status == DELIVER_BUSY;
		p->session_over |= r[i].status == DELIVER_SESSION_OVER;
	}
	return 0;
}

/* The passes that did work, for execkit_reconcile_passes_total.  Their
 * results are settled already: a failure here is said, and changes nothing
 * of the exit status. */
static void
count_passes(struct state *st, int n)
{
	struct ek_err e = { 0 };

	if (n > 0 && counters_add_passes(st, n, &e) < 0)
		fprintf(stderr, "%s: warning: the pass counter was not updated: %s\n", PROG, e.msg);
}

/* How long a Retry-After the dispatcher gave still holds deliveries back
 * (ms; 0: none, or unreadable: the next pass says why). */
static int64_t
hold_left(struct state *st)
{
	struct ek_err e = { 0 };
	struct session cur;
	int64_t now = now_ms();

	if (session_current(st, &cur, &e) <= 0 || cur.retry_after_at <= now)
		return 0;
	return cur.retry_after_at - now;
}

/* Whether a drain goes on after pass p: a Retry-After that ends within
 * the budget is waited out here (a pass then goes at once, not at the
 * caller's next tick); else while full passes still settle something. */
static bool
drain_goes_on(struct state *st, const struct opts *o, const struct pass *p, int64_t deadline)
{
	int64_t held;

	if (!o->drain || p->session_over || mono_ms() >= deadline)
		return false;
	if ((held = hold_left(st)) > 0) {
		if (mono_ms() + held >= deadline)
			return false;
		sleep_ms(held);
		return true;
	}
	return p->n == o->max && p->delivered + p->refused > 0;
}

static int
reconcile(struct state *st, const struct opts *o, struct ek_err *e)
{
	int64_t deadline = mono_ms() + o->budget_ms;
	struct pass p;
	struct session s;
	int passes = 0, worked = 0, delivered = 0, refused = 0;
	struct progress pg;

	if (session_require(st, NULL, &s, e) < 0)
		return -1;
	progress_begin(&pg, PROG);
	pg.on = pg.on && o->drain;
	do {
		memset(&p, 0, sizeof p);
		if (run_pass(st, o, &s.b, deadline, &p, e) < 0)
			return -1;
		passes++;
		worked += p.n > 0;
		delivered += p.delivered;
		refused += p.refused;
		if (o->json)
			json_emit(stdout, json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:b, s:I}", "event",
			    "reconcile_pass", "pass", passes, "selected", p.n, "delivered", p.delivered,
			    "refused", p.refused, "waiting", p.waiting, "session_over", p.session_over,
			    "hold_ms", (json_int_t)hold_left(st)));
		show_progress(st, &s.b, &pg, passes, delivered, refused, p.waiting);
	} while (drain_goes_on(st, o, &p, deadline));
	progress_end(&pg);
	count_passes(st, worked);
	if (!o->json)
		printf("%d delivered, %d refused, %d waiting in %d pass%s\n", delivered, refused,
		    p.waiting, passes, passes == 1 ? "" : "es");
	if (p.session_over)
		return ek_fail(e, EK_NOSESSION, "session '%s' ended during the pass", s.b.session_id);
	if (p.waiting)
		return ek_fail(e, EK_TEMPFAIL, "%d result%s still waiting for delivery", p.waiting,
		    p.waiting == 1 ? "" : "s");
	return 0;
}

/* The results kept back, and why, after an export or its plan. */
static void
say_kept(const struct opts *o, int64_t kept)
{
	char n[48];

	if (kept > 0 && !o->json)
		printf("%s %s that adoption could still deliver (their sessions ended "
		    "unrevoked: exec-session adopt SESSION_ID; --include-adoptable exports them)\n",
		    o->dry_run ? "would keep back" : "kept back", cli_plural(n, sizeof n, kept, "result"));
}

/* Housekeeping: --prune-receipts or --export-evidence. */
static int
housekeeping(struct state *st, const struct opts *o, struct ek_err *e)
{
	const char *what = o->export_path ? "exported" : "pruned";
	struct evidence_count c = { 0 };
	int64_t files = 0;
	char rows[48], out[48];

	if (o->export_path ? evidence_export(st, o->export_path, o->adoptable, &c, e) < 0 :
	    receipts_prune(st, o->prune_age_ms, &c.rows, e) < 0)
		return -1;
	/* their output goes with them: nothing refers to it any more (output.h) */
	if (output_collect(st, 0, &files, e) < 0)
		return -1;
	if (o->json)
		json_emit(stdout, o->export_path ?
		    json_pack("{s:s, s:b, s:I, s:I, s:I}", "event", what, "dry_run", 0, "rows",
		    (json_int_t)c.rows, "kept_adoptable", (json_int_t)c.kept_adoptable, "output_files",
		    (json_int_t)files) :
		    json_pack("{s:s, s:b, s:I, s:I}", "event", what, "dry_run", 0, "rows", (json_int_t)c.rows,
		    "output_files", (json_int_t)files));
	else
		printf("%s %s, removed %s\n", what, cli_plural(rows, sizeof rows, c.rows,
		    o->export_path ? "result" : "receipt"), cli_plural(out, sizeof out, files, "output file"));
	say_kept(o, c.kept_adoptable);
	return 0;
}

static int
emit_item(json_t *item, void *arg)
{
	return json_emit(stdout, item) < 0 ? ek_fail(arg, EK_IOERR, "writing standard output") : 0;
}

/* --prune-records, or its --dry-run: what was (would be) forgotten. */
static void
say_forgotten(const struct opts *o, const struct retention_count *c, int64_t files)
{
	char runs[48], ses[48], out[48];
	const char *would = o->dry_run ? "would be " : "";

	if (o->json) {
		json_t *j = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "event", "records_pruned",
		    "dry_run", o->dry_run, "records", (json_int_t)c->records, "handbacks",
		    (json_int_t)c->handbacks, "sessions", (json_int_t)c->sessions, "kept",
		    (json_int_t)c->kept);

		if (!o->dry_run)
			json_object_set_new(j, "output_files", json_integer(files));
		json_emit(stdout, j);
		return;
	}
	cli_plural(runs, sizeof runs, c->records + c->handbacks, "record");
	cli_plural(ses, sizeof ses, c->sessions, "ended session");
	cli_plural(out, sizeof out, files, "output file");
	printf("%s %sdropped, %lld kept: not settled for good; %s %sdropped%s%s\n", runs, would,
	    (long long)c->kept, ses, would, o->dry_run ? " (dry run: nothing changed)" : "; removed ",
	    o->dry_run ? "" : out);
}

/* --prune-records: forget what the dispatcher settled for good. */
static int
forget(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct retention_count c;
	int64_t files = 0;

	if (records_prune(st, o->records_age_ms, &c, e) < 0 ||
	    output_collect(st, 0, &files, e) < 0)   /* their output goes with them */
		return -1;
	say_forgotten(o, &c, files);
	return 0;
}

/* --dry-run: the same selection, read through an inspector's connection
 * (inspect.h: query_only, no checkpoint on close), so that not a byte of
 * the state changes; the export's file is not created either. */
static int
dry_run(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct evidence_count c = { 0 };
	int (*fn)(json_t *, void *) = o->json ? emit_item : NULL;
	char rows[48];

	if (o->export_path && access(o->export_path, F_OK) == 0)
		return ek_fail(e, EK_CANTCREAT, "'%s' exists: an export never overwrites a file",
		    o->export_path);
	if (inspect_guard(st, INSPECT_VIEW, mono_ms() + o->budget_ms, e) < 0)
		return -1;
	if (o->records_age_ms >= 0) {
		struct retention_count rc;

		if (records_plan(st, o->records_age_ms, fn, e, &rc, e) < 0)
			return -1;
		say_forgotten(o, &rc, 0);
		return 0;
	}
	if ((o->export_path ? evidence_plan(st, o->adoptable, fn, e, &c, e) :
	    receipts_plan(st, o->prune_age_ms, fn, e, &c.rows, e)) < 0)
		return -1;
	if (o->json && o->export_path)
		json_emit(stdout, json_pack("{s:s, s:b, s:I, s:I}", "event", "exported", "dry_run", 1,
		    "rows", (json_int_t)c.rows, "kept_adoptable", (json_int_t)c.kept_adoptable));
	else if (o->json)
		json_emit(stdout, json_pack("{s:s, s:b, s:I}", "event", "pruned", "dry_run", 1,
		    "rows", (json_int_t)c.rows));
	else
		printf("would %s %s (dry run: nothing changed)\n", o->export_path ? "export" : "prune",
		    cli_plural(rows, sizeof rows, c.rows, o->export_path ? "result" : "receipt"));
	say_kept(o, c.kept_adoptable);
	return 0;
}

/* --output-cap: the output nothing refers to, then the cap (output.h). */
static int
collect(struct state *st, const struct opts *o, struct ek_err *e)
{
	int64_t files = 0, cap = o->output_cap == OUTPUT_QUOTA_AUTO ? output_quota_default(st) / 2 :
	    o->output_cap;
	char out[48];

	if (output_collect(st, cap, &files, e) < 0)
		return -1;
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:I}", "event", "collected", "output_files",
		    (json_int_t)files));
	else
		printf("removed %s\n", cli_plural(out, sizeof out, files, "output file"));
	return 0;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	o->max = PASS_MAX;
	o->budget_ms = DELIVER_BUDGET_MS;
	o->prune_age_ms = o->records_age_ms = -1;
	o->output_cap = NO_COLLECT;
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	if (optind != argc)
		return cli_usage_error(PROG, "unexpected operand '%s'", argv[optind]);
	if ((o->export_path != NULL) + (o->prune_age_ms >= 0) + (o->records_age_ms >= 0) +
	    (o->output_cap != NO_COLLECT) > 1)
		return cli_usage_error(PROG, "--export-evidence, --prune-receipts, --prune-records and "
		    "--output-cap are separate steps");
	if (o->dry_run && !o->export_path && o->prune_age_ms < 0 && o->records_age_ms < 0)
		return cli_usage_error(PROG, "--dry-run goes with --prune-receipts, --prune-records or "
		    "--export-evidence");
	if (o->adoptable && !o->export_path)
		return cli_usage_error(PROG, "--include-adoptable goes with --export-evidence");
	if ((o->export_path || o->prune_age_ms >= 0 || o->records_age_ms >= 0 ||
	    o->output_cap != NO_COLLECT) && o->drain)
		return cli_usage_error(PROG, "--drain does not go with --export-evidence, --prune-receipts, "
		    "--prune-records or --output-cap");
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct state st;
	struct ek_err e = { 0 };
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	if (state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	rc = o.output_cap != NO_COLLECT ? collect(&st, &o, &e) : o.dry_run ? dry_run(&st, &o, &e) :
	    o.records_age_ms >= 0 ? forget(&st, &o, &e) :
	    o.export_path || o.prune_age_ms >= 0 ? housekeeping(&st, &o, &e) : reconcile(&st, &o, &e);
	state_close(&st);
	return cli_finish(PROG, rc < 0 ? ek_report(PROG, &e) : EK_OK);
}
