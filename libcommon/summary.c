/* summary — see summary.h. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "handback.h"
#include "session.h"
#include "summary.h"
#include "timefmt.h"

/* Runs and deliverable results are counted per binding first, through
 * the indexes that already order them by binding (runs_due,
 * results_deliverable), and only those few groups are matched against the
 * current session: a per-row check of the session would cost a subquery
 * per row, seconds on a million rows.  What no index holds (refused rows,
 * the oldest result, the attempts) comes from one plain scan of results.
 * A handed-back run keeps its execution row (never started, never
 * deleted, schema step 8), but it waits for nothing: it is counted as
 * handed back, never as queued or quarantined, so each group takes its
 * handed-back rows away (one pass over handbacks, by the runs key).
 * A run or result is "mine" when its binding is the current session or,
 * for a result, one the current session adopted (then it is deliverable
 * unless refused). */
static const char SUMMARY_SQL[] =
	"WITH g AS (SELECT incarnation, session_id, state, count(*) AS n FROM runs"
	"   GROUP BY incarnation, session_id, state"
	"  UNION ALL SELECT r.incarnation, r.session_id, r.state, -count(*) FROM handbacks hb"
	"   JOIN runs r ON r.run_id = hb.run_id GROUP BY r.incarnation, r.session_id, r.state),"
	" gm AS (SELECT state, n, EXISTS (SELECT 1 FROM sessions cs WHERE cs.status = 'current'"
	"   AND cs.incarnation = g.incarnation AND cs.session_id = g.session_id) AS mine FROM g),"
	" h AS (SELECT incarnation, session_id, count(*) AS n"
	"   FROM results WHERE refused = 0 GROUP BY incarnation, session_id),"
	" hm AS (SELECT n, " SQL_DELIVERABLE_HERE("h") " AS mine FROM h)"
	" SELECT"
	"  (SELECT IFNULL(sum(n), 0) FROM gm WHERE mine AND state = 'queued'),"
	"  (SELECT IFNULL(sum(n), 0) FROM gm WHERE mine AND state = 'started'),"
	"  (SELECT IFNULL(sum(n), 0) FROM gm WHERE NOT mine AND state = 'queued'),"
	"  (SELECT IFNULL(sum(n), 0) FROM gm WHERE NOT mine AND state = 'started'),"
	"  (SELECT IFNULL(sum(n), 0) FROM gm WHERE state = 'unknown'),"
	"  (SELECT IFNULL(sum(n), 0) FROM hm WHERE mine),"
	"  (SELECT IFNULL(sum(n), 0) FROM hm WHERE NOT mine),"
	"  f.*, (SELECT count(*) FROM receipts)"
	" FROM (SELECT count(*) FILTER (WHERE refused <> 0), IFNULL(min(chosen_at), 0),"
	"   IFNULL(sum(attempts), 0) FROM results) f";

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
		s->oldest_unreconciled_ms = sqlite3_column_int64(q, 8);
		s->attempts = sqlite3_column_int64(q, 9);
		s->receipts = sqlite3_column_int64(q, 10);
		s->quarantined = s->quarantined_queued + s->quarantined_started;
	}
	db_done(&st->db, q);
	if (rc < 0 || handback_counts(st, &s->handed_back, &s->handing_back, e) < 0)
		return -1;
	return 0;
}

json_t *
summary_json(const struct summary *s)
{
	return json_pack("{s:I, s:I, s:{s:I, s:I, s:I}, s:I, s:{s:I, s:I, s:I, s:I}, s:I, s:I, "
	    "s:{s:I, s:I}}",
	    "queued", (json_int_t)s->queued, "running", (json_int_t)s->started,
	    "quarantined", "total", (json_int_t)s->quarantined,
	    "queued", (json_int_t)s->quarantined_queued, "started", (json_int_t)s->quarantined_started,
	    "unknown", (json_int_t)s->unknown,
	    "unreconciled", "total", (json_int_t)(s->deliverable + s->earlier_session + s->refused),
	    "deliverable", (json_int_t)s->deliverable, "earlier_session", (json_int_t)s->earlier_session,
	    "refused", (json_int_t)s->refused,
	    "receipts", (json_int_t)s->receipts,
	    "oldest_unreconciled_ms", (json_int_t)s->oldest_unreconciled_ms,
	    "handed_back", "acknowledged", (json_int_t)s->handed_back,
	    "pending", (json_int_t)s->handing_back);
}

void
summary_print(FILE *f, const struct summary *s)
{
	char a[48], b[48];

	fprintf(f, "queued: %s of the current session\n", cli_plural(a, sizeof a, s->queued, "run"));
	fprintf(f, "running: %s of the current session\n", cli_plural(a, sizeof a, s->started, "run"));
	fprintf(f, "quarantined: %s of other sessions (%lld queued, %lld started)\n",
	    cli_plural(a, sizeof a, s->quarantined, "run"), (long long)s->quarantined_queued,
	    (long long)s->quarantined_started);
	fprintf(f, "unknown: %s\n", cli_plural(a, sizeof a, s->unknown, "run"));
	fprintf(f, "unreconciled results: %lld (deliverable now %lld, owned by an earlier session %lld, "
	    "refused %lld; %s so far)\n", (long long)(s->deliverable + s->earlier_session + s->refused),
	    (long long)s->deliverable, (long long)s->earlier_session, (long long)s->refused,
	    cli_plural(b, sizeof b, s->attempts, "delivery attempt"));
	fprintf(f, "receipts: %lld\n", (long long)s->receipts);
	fprintf(f, "handed back: %s (%lld more marked, not acknowledged yet)\n",
	    cli_plural(a, sizeof a, s->handed_back, "run"), (long long)s->handing_back);
}
