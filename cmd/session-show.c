/*
 * exec-session show — every session of the state (--current: the current
 * one only) as a table, their ids, or JSON records (doc/json.md).
 */
#include <string.h>
#include <unistd.h>

#include "exec-session.h"
#include "jsonout.h"
#include "session.h"
#include "table.h"
#include "timefmt.h"

struct shower {
	const struct session_show_opts *o;
	struct table *t;
	int rows, failed;
};

const char *const session_show_columns[] = { "session_id", "incarnation", "status", "opened",
	"ended", "last_beat", "lease", "dispatcher", NULL };

static void
show_row(struct shower *w, const struct session *s)
{
	char opened[64], ended[64], beat[64], lease[32];
	const char *cells[] = { s->b.session_id, s->b.incarnation, s->status,
		timefmt_when(opened, sizeof opened, s->opened_at),
		timefmt_when(ended, sizeof ended, s->ended_at),
		timefmt_when(beat, sizeof beat, s->last_beat_at),
		timefmt_elapsed(lease, sizeof lease, s->lease_ms), s->dispatcher };
	size_t i;

	if (table_row(w->t) < 0)
		w->failed = 1;
	for (i = 0; !w->failed && i < sizeof cells / sizeof cells[0]; i++)
		if (table_cell(w->t, cells[i]) < 0)
			w->failed = 1;
}

static int
show_one(const struct session *s, void *arg)
{
	struct shower *w = arg;
	const struct session_show_opts *o = w->o;

	if (o->current && strcmp(s->status, "current") != 0)
		return 0;
	w->rows++;
	if (o->ids)
		puts(s->b.session_id);
	else if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:I, s:I}",
		    "session_id", s->b.session_id, "incarnation", s->b.incarnation,
		    "dispatcher", s->dispatcher, "status", s->status,
		    "opened_at", (json_int_t)s->opened_at,
		    "ended_at", s->ended_at ? json_integer(s->ended_at) : json_null(),
		    "lease_ms", (json_int_t)s->lease_ms, "heartbeat_ms", (json_int_t)s->heartbeat_ms));
	else
		show_row(w, s);
	return 0;
}

int
session_show(struct state *st, const struct session_show_opts *o, struct ek_err *e)
{
	struct shower w = { o, table_new(), 0, 0 };
	const char *const *c;
	char why[512];
	int rc = w.t ? 0 : ek_fail(e, EK_OSERR, "out of memory");

	for (c = session_show_columns; rc == 0 && *c; c++)
		if (table_column(w.t, *c) < 0)
			rc = ek_fail(e, EK_OSERR, "out of memory");
	if (rc == 0 && o->columns && table_select(w.t, o->columns, why, sizeof why) < 0)
		rc = ek_fail(e, EK_USAGE, "-o: %s", why);
	if (rc == 0)
		rc = session_each(st, show_one, &w, e);
	if (rc == 0 && w.failed)
		rc = ek_fail(e, EK_OSERR, "out of memory");
	if (rc == 0 && o->current && w.rows == 0)
		rc = ek_fail(e, EK_NOSESSION, "no current session (open one with 'exec-session open')");
	if (rc == 0 && w.rows && !o->ids && !o->json)
		table_print_fit(w.t, stdout, &(struct table_fit){ table_term_width(STDOUT_FILENO),
		    o->wide, true });
	table_free(w.t);
	return rc;
}

