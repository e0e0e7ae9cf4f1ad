/*
 * exec-shares — capacities and the bandwidth shares of running programs.
 *
 *   exec-shares capacity set DIMENSION VALUE   set (or lift) a capacity and
 *                                              rewrite every affected limits file
 *   exec-shares capacity show                  every dimension
 *   exec-shares show RUN_ID [--destination N]  one share of one run
 *   exec-shares list [DIMENSION]               every share (of one dimension)
 *
 * The rule and the cache live in libcommon/shares.h (doc/shares.md); this
 * tool parses, calls it and prints.  Reading a stale share recomputes that
 * share alone, so show and list may write; every write is one short
 * BEGIN IMMEDIATE transaction, safe beside exec-run starting and ending guests.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "jsonout.h"
#include "opts.h"
#include "runs.h"
#include "shares.h"
#include "state.h"
#include "text.h"

static const char PROG[] = "exec-shares";

static const char USAGE_HEAD[] =
	"Usage: exec-shares [OPTION]... capacity set DIMENSION VALUE\n"
	"       exec-shares [OPTION]... capacity show\n"
	"       exec-shares [OPTION]... show RUN_ID [--destination NAME]\n"
	"       exec-shares [OPTION]... list [DIMENSION]\n"
	"Bandwidth shares of running programs (doc/shares.md).\n"
	"\n"
	"DIMENSION is 'executor' or 'dest:NAME'.  A program's share of a dimension is\n"
	"capacity x weight / (sum of the weights of the programs running in it),\n"
	"rounded down to whole bytes/s.\n"
	"\n";

static const char USAGE_TAIL[] =
	"\n"
	"Exit status: 0 ok (a failing notify hook is reported, not fatal); 64 usage;\n"
	"65 corrupt state; 66 no state directory, or the run is not running; 68 the\n"
	"run did not declare that destination; 74 a limits file could not be\n"
	"rewritten (the capacity is set: run it again); 75 busy; 78 state from\n"
	"another version, or unsafe permissions.\n";
struct opts {
	const struct cli_command *cmd;
	const char *state_dir, *destination;
	char **operands;
	int noperands, json;
	int64_t capacity;   /* capacity set: VALUE */
};

static json_t *
bps_json(int64_t v)
{
	return v == SHARE_UNLIMITED ? json_null() : json_integer(v);
}

static const char *
bps_text(int64_t v, char *buf, size_t n)
{
	if (v == SHARE_UNLIMITED)
		return "unlimited";
	snprintf(buf, n, "%lld bytes/s", (long long)v);
	return buf;
}

static double
weight(int64_t millionths)
{
	return (double)millionths / SHARE_WEIGHT_UNIT;
}

/* --- capacity ------------------------------------------------------------- */

static void
print_failures(const struct opts *o, const struct shares_note *n)
{
	char safe[sizeof n->fail[0].detail], more[48];
	int i;

	for (i = 0; i < n->nfail; i++) {
		if (o->json)
			json_emit(stdout, json_pack("{s:s, s:s, s:s, s:s}", "event", "publish_failure",
			    "run_id", n->fail[i].run_id, "what", n->fail[i].what, "detail", n->fail[i].detail));
		fprintf(stderr, "%s: run '%s': %s: %s\n", PROG, n->fail[i].run_id, n->fail[i].what,
		    text_safe(safe, sizeof safe, n->fail[i].detail));
	}
	if (n->files_failed + n->hooks_failed > n->nfail)
		fprintf(stderr, "%s: and %s\n", PROG, cli_plural(more, sizeof more,
		    n->files_failed + n->hooks_failed - n->nfail, "more failure"));
}

static int
cmd_capacity_set(struct state *st, const struct opts *o, struct ek_err *e)
{
	const char *dim = o->operands[0];
	int64_t capacity = o->capacity;
	struct shares_note n = { 0 };
	int64_t gen = 0;
	char buf[64], files[48], hooks[48];

	if (shares_set_capacity(st, dim, capacity, 0, &gen, &n, e) < 0)
		return -1;
	print_failures(o, &n);
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:o, s:I, s:i, s:i, s:i, s:i}", "event", "capacity_set",
		    "dimension", dim, "capacity_bps", bps_json(capacity), "generation", (json_int_t)gen,
		    "rewritten", n.rewritten, "notified", n.notified, "files_failed", n.files_failed,
		    "hooks_failed", n.hooks_failed));
	else
		printf("%s: capacity %s, generation %lld; %s rewritten, %s notified\n", dim,
		    bps_text(capacity, buf, sizeof buf), (long long)gen,
		    cli_plural(files, sizeof files, n.rewritten, "limits file"),
		    cli_plural(hooks, sizeof hooks, n.notified, "hook"));
	if (n.files_failed)
		return ek_fail(e, EK_IOERR, "%s could not be rewritten; the capacity is set: "
		    "run the command again", cli_plural(files, sizeof files, n.files_failed, "limits file"));
	return 0;
}

static int
print_dim(const struct share_dim *d, void *arg)
{
	const struct opts *o = arg;
	char buf[64];

	if (o->json)
		return json_emit(stdout, json_pack("{s:s, s:o, s:I, s:I, s:f}", "dimension", d->dimension,
		    "capacity_bps", bps_json(d->capacity), "generation", (json_int_t)d->generation,
		    "members", (json_int_t)d->members, "total_weight", weight(d->total_weight)));
	printf("%s %s, generation %lld, %lld running (total weight %g)\n", d->dimension,
	    bps_text(d->capacity, buf, sizeof buf), (long long)d->generation, (long long)d->members,
	    weight(d->total_weight));
	return 0;
}

static int
cmd_capacity_show(struct state *st, const struct opts *o, struct ek_err *e)
{
	return shares_dims(st, print_dim, (void *)o, e);
}

/* --- shares ------------------------------------------------------------------ */

static int
print_share(const struct share *s, void *arg)
{
	const struct opts *o = arg;
	char a[64], b[64];

	if (o->json)
		return json_emit(stdout, json_pack("{s:s, s:s, s:o, s:o, s:f, s:f, s:I, s:b}",
		    "run_id", s->run_id, "dimension", s->dimension, "share_bps", bps_json(s->share),
		    "capacity_bps", bps_json(s->capacity), "weight", weight(s->weight),
		    "total_weight", weight(s->total_weight), "generation", (json_int_t)s->generation,
		    "recomputed", s->recomputed));
	printf("%s %s %s (weight %g of %g, capacity %s, generation %lld)\n", s->run_id, s->dimension,
	    bps_text(s->share, a, sizeof a), weight(s->weight), weight(s->total_weight),
	    bps_text(s->capacity, b, sizeof b), (long long)s->generation);
	return 0;
}

static int
cmd_show(struct state *st, const struct opts *o, struct ek_err *e)
{
	char dim[SHARE_DIM_MAX + 1] = "executor";
	struct share s;

	if (o->destination)
		snprintf(dim, sizeof dim, "dest:%s", o->destination);
	if (shares_read(st, o->operands[0], dim, &s, e) < 0)
		return -1;
	return print_share(&s, (void *)o);
}

static int
cmd_list(struct state *st, const struct opts *o, struct ek_err *e)
{
	return shares_list(st, o->noperands ? o->operands[0] : NULL, print_share, (void *)o, e);
}

/* --- commands, options and main ------------------------------------------------ */

/* Each command checks its operands (what follows its word) into o. */

static int
check_capacity_set(struct opts *o)
{
	if (o->noperands != 2)
		return cli_usage_error(PROG, "capacity set needs DIMENSION and VALUE");
	if (!share_dimension_valid(o->operands[0]))
		return cli_usage_error(PROG, "'%.200s' is not a dimension ('executor' or 'dest:NAME')",
		    o->operands[0]);
	o->capacity = SHARE_UNLIMITED;
	if (strcmp(o->operands[1], "unlimited") != 0 &&
	    cli_parse_i64(o->operands[1], 0, SHARE_CAPACITY_MAX, &o->capacity) < 0)
		return cli_usage_error(PROG, "'%.200s' is not a capacity (bytes/s from 0 to %lld, "
		    "or 'unlimited')", o->operands[1], SHARE_CAPACITY_MAX);
	return 0;
}

static int
check_capacity_show(struct opts *o)
{
	return o->noperands ? cli_usage_error(PROG, "capacity needs 'set DIMENSION VALUE' or 'show'") : 0;
}

/* The commands, as git's commands[], and the subcommands of capacity. */
static const struct cli_command capacity_commands[] = {
	{ .name = "set", .check = check_capacity_set, .run = cmd_capacity_set,
	  .operand = "DIMENSION VALUE", .args = "DIMENSION VALUE",
	  .help = "set the capacity to VALUE bytes/s, or lift it\n"
	    "with 'unlimited'; the limits file of every running\n"
	    "program of DIMENSION is rewritten at once and its\n"
	    "policy's notify hook run" },
	{ .name = "show", .check = check_capacity_show, .run = cmd_capacity_show,
	  .help = "every dimension: capacity, generation, programs" },
};

/* capacity SUBCOMMAND ...: o->cmd becomes the subcommand. */
static int
check_capacity(struct opts *o)
{
	if (o->noperands == 0 ||
	    !(o->cmd = cli_find_command(o->operands[0], CLI_TABLE(capacity_commands))))
		return cli_usage_error(PROG, "capacity needs 'set DIMENSION VALUE' or 'show'");
	o->operands++, o->noperands--;
	return o->cmd->check(o);
}

static int
check_show(struct opts *o)
{
	if (o->noperands != 1)
		return cli_usage_error(PROG, "show needs exactly one RUN_ID");
	if (!run_id_valid(o->operands[0]))
		return cli_usage_error(PROG, "'%.200s' is not a valid run id", o->operands[0]);
	if (o->destination && !run_id_valid(o->destination))
		return cli_usage_error(PROG, "'%.200s' is not a destination name", o->destination);
	return 0;
}

static int
check_list(struct opts *o)
{
	if (o->noperands > 1)
		return cli_usage_error(PROG, "unexpected operand '%s'", o->operands[1]);
	if (o->noperands == 1 && !share_dimension_valid(o->operands[0]))
		return cli_usage_error(PROG, "'%.200s' is not a dimension ('executor' or 'dest:NAME')",
		    o->operands[0]);
	return 0;
}

static const struct cli_command commands[] = {
	{ .name = "capacity", .check = check_capacity,   /* runs its subcommand */
	  .sub = capacity_commands, .nsub = sizeof capacity_commands / sizeof capacity_commands[0] },
	{ .name = "show", .check = check_show, .run = cmd_show, .operand = "RUN_ID", .args = "RUN_ID",
	  .help = "the run's executor share (with --destination, its\n"
	    "share of that destination); only that share is\n"
	    "recomputed if stale" },
	{ .name = "list", .check = check_list, .run = cmd_list, .operand = "[DIMENSION]",
	  .args = "DIMENSION", .help = "every share of every running program (of DIMENSION)" },
};

static const struct opt options[] = {
	OPTS_STRING("destination", 0, destination, "NAME", "show: the share of destination NAME"),
	OPTS_STATE("JSON Lines output (doc/json.md)"),
};

static const struct opts_only only[] = {
	{ "destination", "show" },
};

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options), .cmds = OPTS_TABLE(commands), .only = OPTS_TABLE(only),
	.cmds_column = 25,
};

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	*o = (struct opts){ 0 };
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	if ((rc = opts_command(&spec, argc, argv, &o->cmd)) != 0)
		return rc;
	o->operands = argv + optind;
	o->noperands = argc - optind;
	return o->cmd->check(o);
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct state st;
	struct ek_err e = { 0 };
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	shares_hooks_isolation(NULL);   /* its hooks isolated as exec-run's guests would be */
	if (state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	rc = o.cmd->run(&st, &o, &e);
	state_close(&st);
	return cli_finish(PROG, rc < 0 ? ek_report(PROG, &e) : EK_OK);
}
