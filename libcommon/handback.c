/* handback — see handback.h. */
#include <string.h>

#include "clock.h"
#include "field.h"
#include "handback.h"
#include "runs.h"

static int
mark_queued(struct state *st, const struct binding *b, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "INSERT INTO handbacks(run_id, incarnation, session_id, "
	    "asked_at) SELECT run_id, incarnation, session_id, ?3 FROM runs WHERE incarnation = ?1 "
	    "AND session_id = ?2 AND state = 'queued' AND cancel_at IS NULL "
	    "AND NOT EXISTS (SELECT 1 FROM results x WHERE x.run_id = runs.run_id) "
	    "ON CONFLICT(run_id) DO NOTHING", e);

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, now_ms());
	return db_exec_stmt(&st->db, q, e);
}

static int
list_pending(struct state *st, const struct binding *b, json_t *ids, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id FROM handbacks WHERE incarnation = ?1 "
	    "AND session_id = ?2 AND acked_at IS NULL AND refused_why IS NULL ORDER BY asked_at, "
	    "run_id LIMIT ?3", e);
	int rc;

	if (!q)
		return -1;
	db_bind_binding(q, 1, b);
	db_bind_i64(q, 3, HANDBACK_BATCH);
	while ((rc = db_step(&st->db, q, e)) == 1)
		json_array_append_new(ids, json_string((const char *)sqlite3_column_text(q, 0)));
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
handback_mark(struct state *st, const struct binding *b, json_t **ids, struct ek_err *e)
{
	if (!(*ids = json_array()))
		return ek_fail(e, EK_OSERR, "out of memory");
	if (db_begin_write(&st->db, e) < 0)
		goto fail;
	if (mark_queued(st, b, e) < 0 || list_pending(st, b, *ids, e) < 0) {
		db_rollback(&st->db);
		goto fail;
	}
	if (db_commit(&st->db, e) == 0)
		return 0;
fail:
	json_decref(*ids);
	*ids = NULL;
	return -1;
}

/* One answer entry: acknowledge run (with its new id) or note why not. */
static int
settle_one(struct state *st, const char *run, const char *as, const char *why, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, why ?
	    "UPDATE handbacks SET refused_why = ?2 WHERE run_id = ?1 AND acked_at IS NULL" :
	    "UPDATE handbacks SET acked_at = ?3, requeued_as = ?2 WHERE run_id = ?1 "
	    "AND acked_at IS NULL", e);

	if (!q)
		return -1;
	db_bind_text(q, 1, run);
	db_bind_text(q, 2, why ? why : as);
	if (!why)
		db_bind_i64(q, 3, now_ms());
	return db_exec_stmt(&st->db, q, e);
}

/* Check the answer's shape before anything is written. */
static int
answer_ok(json_t *a)
{
	json_t *req = json_object_get(a, "requeued"), *no = json_object_get(a, "not_handed_back"), *x;
	size_t i;

	if (!json_is_array(req) || (no && !json_is_array(no)))
		return 0;
	json_array_foreach(req, i, x)
		if (!field_id(x, "run_id", RUN_ID_MAX) || !field_id(x, "as", RUN_ID_MAX))
			return 0;
	json_array_foreach(no, i, x)
		if (!field_id(x, "run_id", RUN_ID_MAX) || !json_is_string(json_object_get(x, "why")))
			return 0;
	return 1;
}

int
handback_settle(struct state *st, json_t *answer, int *acked, struct ek_err *e)
{
	json_t *req = json_object_get(answer, "requeued"), *no = json_object_get(answer, "not_handed_back");
	json_t *x;
	size_t i;
	char why[64];

	*acked = 0;
	if (!answer_ok(answer))
		return ek_fail(e, EK_PROTOCOL, "hand-back answer is not {\"requeued\":[{\"run_id\","
		    "\"as\"}],\"not_handed_back\":[{\"run_id\",\"why\"}]}: nothing acknowledged");
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	json_array_foreach(req, i, x) {
		if (settle_one(st, json_string_value(json_object_get(x, "run_id")),
		    json_string_value(json_object_get(x, "as")), NULL, e) < 0)
			goto fail;
		*acked += sqlite3_changes(st->db.h);
	}
	json_array_foreach(no, i, x) {
		snprintf(why, sizeof why, "%s", json_string_value(json_object_get(x, "why")));
		if (settle_one(st, json_string_value(json_object_get(x, "run_id")), NULL, why, e) < 0)
			goto fail;
	}
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

int
handback_counts(struct state *st, int64_t *acked, int64_t *pending, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT count(acked_at), count(*) - count(acked_at) "
	    "FROM handbacks", e);
	int rc;

	if (!q)
		return -1;
	rc = db_step(&st->db, q, e);
	if (rc == 1) {
		*acked = sqlite3_column_int64(q, 0);
		*pending = sqlite3_column_int64(q, 1);
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}
