/* complete — see complete.h. */
#include <string.h>

#include "complete.h"
#include "db.h"
#include "runs.h"
#include "session.h"
#include "text.h"

/* ?1 the prefix, ?2 the prefix followed by '~', ?3 the limit. */
#define RANGE(t) t ".run_id >= ?1 AND " t ".run_id < ?2"
/* Runs of the current session in one state, by the runs_due index. */
#define CURRENT_RUNS(states) "SELECT r.run_id FROM sessions s JOIN runs r ON " \
	"r.incarnation = s.incarnation AND r.session_id = s.session_id AND r.state IN (" states ") " \
	"WHERE s.status = 'current' AND " RANGE("r") " ORDER BY r.run_id LIMIT ?3"

const char *const complete_sets[] = { "all", "queued", "running", "live", "retained", NULL };

/* "all" is a compound SELECT ordered by run_id, which SQLite merges from the
 * four primary key ranges: the LIMIT stops it after the ids printed. */
static const char *const set_sql[] = {
	"SELECT a.run_id FROM accepts a WHERE " RANGE("a")
	" UNION SELECT r.run_id FROM runs r WHERE " RANGE("r")
	" UNION SELECT x.run_id FROM results x WHERE " RANGE("x")
	" UNION SELECT k.run_id FROM receipts k WHERE " RANGE("k") " ORDER BY 1 LIMIT ?3",
	CURRENT_RUNS("'queued'"),
	CURRENT_RUNS("'started'"),
	CURRENT_RUNS("'queued', 'started'"),
	"SELECT x.run_id FROM results x WHERE " RANGE("x") " AND x.refused = 0 ORDER BY x.run_id LIMIT ?3",
};

/* Whether some run id can start with p: the run id alphabet, short enough. */
static bool
prefix_possible(const char *p)
{
	return text_is_id(p, 0, RUN_ID_MAX);
}

int
complete_run_ids(struct state *st, const char *set, const char *prefix, FILE *out, struct ek_err *e)
{
	char upper[RUN_ID_MAX + 2], sets[128];
	sqlite3_stmt *q;
	int i = text_word_index(set, complete_sets), rc;

	if (i < 0)
		return ek_fail(e, EK_USAGE, "unknown set of run ids '%.40s' (%s)", set,
		    text_join(sets, sizeof sets, complete_sets));
	if (!prefix_possible(prefix))
		return 0;
	snprintf(upper, sizeof upper, "%s~", prefix);
	if (!(q = db_prep(&st->db, set_sql[i], e)))
		return -1;
	db_bind_text(q, 1, prefix);
	db_bind_text(q, 2, upper);
	db_bind_i64(q, 3, COMPLETE_MAX);
	while ((rc = db_step(&st->db, q, e)) == 1)
		fprintf(out, "%s\n", (const char *)sqlite3_column_text(q, 0));
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}
