/*
 * exec-inspect list KIND — one line per item of a population, oldest
 * first (--reverse: newest first), at most --limit N of them.
 *
 * On a terminal the table fits its width (table.h: the widest columns are
 * narrowed and their cells cut with an ellipsis; -w keeps them whole), so
 * one 115-character run id no longer widens every row past the screen.
 * An empty list still prints its header, so "nothing" is told apart from
 * "no answer".  --ids, -0 and --json are for programs: never cut.
 */
#include <stdio.h>
#include <unistd.h>

#include "exec-inspect.h"
#include "inspect.h"
#include "jsonout.h"
#include "table.h"

struct lister {
	const struct opts *o;
	struct table *t;
	int failed;
};

static int
list_one(json_t *row, void *arg)
{
	struct lister *l = arg;
	const char *k;
	json_t *v;

	if (l->o->ids) {
		fputs(json_string_value(json_object_get(row, "run_id")), stdout);
		putchar(l->o->sep);
	} else if (l->o->json)
		json_emit(stdout, json_incref(row));
	else if (table_row(l->t) < 0)
		l->failed = 1;
	else
		json_object_foreach(row, k, v)
			if (table_cell_json(l->t, k, v) < 0)
				l->failed = 1;
	return l->failed || ferror(stdout) ? 1 : 0;
}

/* The table of a list: its columns, narrowed by -o. */
static int
list_table(struct state *st, const struct opts *o, struct table **out, struct ek_err *e)
{
	struct table *t = table_new();
	json_t *names = NULL, *n;
	char why[512];
	size_t i;

	*out = t;
	if (!t || inspect_list_columns(st, o->arg, &names, e) < 0)
		return t ? -1 : ek_fail(e, EK_OSERR, "out of memory");
	json_array_foreach(names, i, n)
		if (table_column(t, json_string_value(n)) < 0) {
			json_decref(names);
			return ek_fail(e, EK_OSERR, "out of memory");
		}
	json_decref(names);
	if (o->columns && table_select(t, o->columns, why, sizeof why) < 0)
		return ek_fail(e, EK_USAGE, "-o: list %s: %s", o->arg, why);
	return 0;
}

int
cmd_list(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct inspect_filter f = { o->since_ms, o->outcome, o->session, o->limit, o->reverse,
		o->failed };
	struct table_fit fit = { table_term_width(STDOUT_FILENO), o->wide, !o->no_headings };
	struct lister l = { o, NULL, 0 };
	int rc = o->ids || o->json ? 0 : list_table(st, o, &l.t, e);

	if (rc == 0)
		rc = inspect_list(st, o->arg, &f, list_one, &l, e);
	if (rc == 0 && l.failed)
		rc = ek_fail(e, EK_OSERR, "out of memory");
	if (rc == 0 && l.t && table_print_fit(l.t, stdout, &fit) < 0)
		rc = ek_fail(e, EK_IOERR, "printing the table: out of memory, or a write error");
	table_free(l.t);
	return rc;
}
