/* summary — see summary.h. */
#include <string.h>

#include "binding.h"
#include "summary.h"

/* One pass over each table; "current" is the one current session, if any;
 * a result is "mine" (deliverable unless refused) when its binding is the
 * current session or one the current session adopted. */
static const char SUMMARY_SQL[] =
	"WITH cur AS (SELECT incarnation, session_id FROM sessions WHERE status = 'current'),"
	" r AS (SELECT state, EXISTS (SELECT 1 FROM cur WHERE cur.incarnation = runs.incarnation"
	"        AND cur.session_id = runs.session_id) AS mine FROM runs),"
	" x AS (SELECT refused, chosen_at, " SQL_DELIVERABLE_HERE("results") " AS mine FROM results)"
	" SELECT"
	"  (SELECT count(*) FROM r WHERE mine AND state = 'queued'),"
	"  (SELECT count(*) FROM r WHERE mine AND state = 'started'),"
	"  (SELECT count(*) FROM r WHERE NOT mine AND state = 'queued'),"
	"  (SELECT count(*) FROM r WHERE NOT mine AND state = 'started'),"
	"  (SELECT count(*) FROM r WHERE state = 'unknown'),"
	"  (SELECT count(*) FROM x WHERE mine AND NOT refused),"
	"  (SELECT count(*) FROM x WHERE NOT mine AND NOT refused),"
	"  (SELECT count(*) FROM x WHERE refused),"
	"  (SELECT count(*) FROM receipts),"
	"  (SELECT IFNULL(min(chosen_at), 0) FROM x)";

int
summary_read(struct state *st, struct summary *s, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, SUMMARY_SQL, e);
	int rc;

	memset(s, 0, sizeof *s);
	if (!q)
		return -1;
	rc = db_step(&st->db, q, e);
	if (rc == 1) {
		s->queued = sqlite3_column_int64(q, 0);
		s->started = sqlite3_column_int64(q, 1);
		s->quarantined_queued = sqlite3_column_int64(q, 2);
		s->quarantined_started = sqlite3_column_int64(q, 3);
		s->unknown = sqlite3_column_int64(q, 4);
		s->deliverable = sqlite3_column_int64(q, 5);
		s->earlier_session = sqlite3_column_int64(q, 6);
		s->refused = sqlite3_column_int64(q, 7);
		s->receipts = sqlite3_column_int64(q, 8);
		s->oldest_unreconciled_ms = sqlite3_column_int64(q, 9);
		s->quarantined = s->quarantined_queued + s->quarantined_started;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

json_t *
summary_json(const struct summary *s)
{
	return json_pack("{s:I, s:I, s:{s:I, s:I, s:I}, s:I, s:{s:I, s:I, s:I, s:I}, s:I, s:I}",
	    "queued", (json_int_t)s->queued, "running", (json_int_t)s->started,
	    "quarantined", "total", (json_int_t)s->quarantined,
	    "queued", (json_int_t)s->quarantined_queued, "started", (json_int_t)s->quarantined_started,
	    "unknown", (json_int_t)s->unknown,
	    "unreconciled", "total", (json_int_t)(s->deliverable + s->earlier_session + s->refused),
	    "deliverable", (json_int_t)s->deliverable, "earlier_session", (json_int_t)s->earlier_session,
	    "refused", (json_int_t)s->refused,
	    "receipts", (json_int_t)s->receipts,
	    "oldest_unreconciled_ms", (json_int_t)s->oldest_unreconciled_ms);
}
