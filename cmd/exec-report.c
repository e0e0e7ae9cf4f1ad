/*
 * exec-report — deliver retained results to the dispatcher by run id.
 *
 * Each result gets at most three attempts inside its own budget, sent
 * byte for byte as stored, under the binding that accepted the run and
 * only while that binding is the current session (deliver.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "deliver.h"
#include "jsonout.h"
#include "opts.h"
#include "runs.h"
#include "state.h"

static const char PROG[] = "exec-report";

struct opts {
	const char *state_dir;
	int64_t budget_ms;
	int json;
};

static const struct opt options[] = {
	OPTS_INT("budget-ms", budget_ms, 1, DELIVER_BUDGET_MAX_MS, "N",
	    "all attempts for one result end within N ms\n(default 5000)"),
	OPTS_STATE("one JSON line per run (doc/json.md)"),
};

static const char USAGE_HEAD[] =
	"Usage: exec-report [OPTION]... RUN_ID...\n"
	"       exec-report [OPTION]... [-] < RUN_IDS\n"
	"Deliver the retained result of each run (ids one per line on stdin when\n"
	"there are no operands and stdin is not a terminal, or with '-').\n"
	"\n"
	"Options:\n";

static const char USAGE_TAIL[] =
	"\n"
	"Exit status (of the last run that was not delivered): 0 all delivered;\n"
	"64 usage; 65 malformed run id; 66 no retained result; 75 transient failures\n"
	"used the budget, or another deliverer holds it; 76 refused by the dispatcher\n"
	"(kept as evidence); 77 the run's session is not current; 78 state from\n"
	"another version, or unsafe permissions.\n";

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options), .args = "RUN_ID...",
};

static void
print_report(const struct opts *o, const char *run_id, const struct deliver_report *r)
{
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:i, s:o, s:s}", "run_id", run_id,
		    "status", deliver_status_name(r->status), "attempts", r->attempts,
		    "record_id", r->record_id ? json_integer(r->record_id) : json_null(),
		    "detail", r->detail));
	else
		deliver_print_line(stdout, run_id, r);
}

/* Deliver one id; returns its exit code, or -1 on a local error. */
static int
report_one(struct state *st, const struct opts *o, const char *id, struct ek_err *e)
{
	struct deliver_report r;

	if (!run_id_valid(id)) {
		fprintf(stderr, "%s: '%.200s': not a valid run id\n", PROG, id);
		return EK_DATAERR;
	}
	if (deliver_result(st, id, DELIVER_MAX_ATTEMPTS, mono_ms() + o->budget_ms, &r, e) < 0)
		return -1;
	print_report(o, id, &r);
	return deliver_exit_code(r.status);
}

static int
report_stdin(struct state *st, const struct opts *o, struct ek_err *e)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc, worst = EK_OK;

	while ((n = getline(&line, &cap, stdin)) > 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		if ((rc = report_one(st, o, line, e)) < 0) {
			worst = -1;
			break;
		}
		if (rc)
			worst = rc;
	}
	free(line);
	return worst;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	o->budget_ms = DELIVER_BUDGET_MS;
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	if (optind == argc && isatty(STDIN_FILENO))
		return cli_usage_error(PROG, "no run id given");
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct state st;
	struct ek_err e = { 0 };
	int rc = parse_args(argc, argv, &o), i, worst = EK_OK;

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	if (state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	if (optind == argc || (optind + 1 == argc && strcmp(argv[optind], "-") == 0))
		worst = report_stdin(&st, &o, &e);
	for (i = optind; i < argc && worst >= 0 && strcmp(argv[i], "-") != 0; i++) {
		rc = report_one(&st, &o, argv[i], &e);
		worst = rc < 0 ? -1 : rc ? rc : worst;
	}
	state_close(&st);
	return cli_finish(PROG, worst < 0 ? ek_report(PROG, &e) : worst);
}
