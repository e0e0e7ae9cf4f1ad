/* counters — see counters.h. */
#include <string.h>

#include "counters.h"

static const char *const counter_names[C_COUNT] = {
	"accepted", "started", "delivered", "refused", "attempts", "passes" };

const char *const counter_outcomes[C_OUTCOMES] = {
	"exited", "killed", "timeout", "cancelled", "exec_failed", "unknown" };

const char *const duration_buckets[C_DURATION_BUCKETS] = {
	"0.1", "0.5", "1", "5", "30", "60", "300", "1800", "3600", "+Inf" };

static int
index_of(const char *const *names, int n, const char *name)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

static int
read_counters(struct state *st, struct counters *c, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT name, label, value FROM counters", e);
	char name[32], label[32];
	int rc, i;

	if (!q)
		return -1;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		db_col_text(q, 0, name, sizeof name);
		db_col_text(q, 1, label, sizeof label);
		if (strcmp(name, "finished") == 0 && (i = index_of(counter_outcomes, C_OUTCOMES, label)) >= 0)
			c->finished[i] = sqlite3_column_int64(q, 2);
		else if (strcmp(name, "duration") == 0 &&
		    (i = index_of(duration_buckets, C_DURATION_BUCKETS, label)) >= 0)
			c->duration_le[i] = sqlite3_column_int64(q, 2);
		else if (strcmp(name, "duration_sum_ms") == 0)
			c->duration_sum_ms = sqlite3_column_int64(q, 2);
		else if (strcmp(name, "duration_count") == 0)
			c->duration_count = sqlite3_column_int64(q, 2);
		else if ((i = index_of(counter_names, C_COUNT, name)) >= 0)
			c->total[i] = sqlite3_column_int64(q, 2);
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* The session's liveness (exec-session heartbeat records each good beat in
 * sessions.last_beat_at; the open counts as one) and the two oldest ages.
 * The refused and unrefused minima come from one scan of results, as the
 * summary's own oldest does. */
static const char LIVENESS_SQL[] =
	"SELECT EXISTS (SELECT 1 FROM sessions WHERE status = 'current'),"
	" IFNULL((SELECT max(IFNULL(last_beat_at, 0), opened_at) FROM sessions"
	"   ORDER BY status = 'current' DESC, seq DESC LIMIT 1), 0),"
	" IFNULL(min(chosen_at) FILTER (WHERE refused = 0), 0),"
	" IFNULL(min(chosen_at) FILTER (WHERE refused <> 0), 0)"
	" FROM results";

static int
read_liveness(struct state *st, struct counters *c, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, LIVENESS_SQL, e);
	int rc;

	if (!q)
		return -1;
	if ((rc = db_step(&st->db, q, e)) == 1) {
		c->session_up = sqlite3_column_int(q, 0) != 0;
		c->last_good_ms = sqlite3_column_int64(q, 1);
		c->oldest_unrefused_ms = sqlite3_column_int64(q, 2);
		c->oldest_refused_ms = sqlite3_column_int64(q, 3);
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
counters_read(struct state *st, struct counters *c, struct ek_err *e)
{
	memset(c, 0, sizeof *c);
	return read_counters(st, c, e) < 0 || read_liveness(st, c, e) < 0 ? -1 : 0;
}

int
counters_started(struct state *st, int64_t *n, struct ek_err *e)
{
	return db_int64(&st->db, "SELECT value FROM counters WHERE name = 'started' AND label = ''", n, e);
}

int
counters_add_passes(struct state *st, int64_t n, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (!(q = db_prep(&st->db, "UPDATE counters SET value = value + ?1 "
	    "WHERE name = 'passes' AND label = ''", e))) {
		db_rollback(&st->db);
		return -1;
	}
	db_bind_i64(q, 1, n);
	return db_commit_stmt(&st->db, q, e) < 0 ? -1 : 0;
}
