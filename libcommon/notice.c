/* notice — see notice.h. */
#include "clock.h"
#include "db.h"
#include "notice.h"

int
notice_count(struct state *st, int64_t *starts, bool *backup, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT starts, EXISTS(SELECT 1 FROM meta WHERE key = ?1) "
	    "FROM start_counter", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, NOTICE_BACKUP_KEY);
	if ((rc = db_step(&st->db, q, e)) == 1) {
		*starts = sqlite3_column_int64(q, 0);
		*backup = sqlite3_column_int(q, 1) != 0;
	} else if (rc == 0)
		rc = ek_fail(e, EK_DATAERR, "'%s': no start count (damaged state)", st->dbpath);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

int
notice_body(struct state *st, json_t **body, int64_t *upto, struct ek_err *e)
{
	json_t *list = json_array();
	sqlite3_stmt *q = NULL;
	int64_t starts = 0;
	bool backup;
	int rc = -1;

	*body = NULL;
	*upto = 0;
	if (!list)
		return ek_fail(e, EK_OSERR, "out of memory");
	if (db_begin_read(&st->db, e) < 0)
		goto out;
	if (notice_count(st, &starts, &backup, e) < 0 ||
	    !(q = db_prep(&st->db, "SELECT seq, run_id FROM start_notices ORDER BY seq LIMIT ?1", e)))
		goto out;
	db_bind_i64(q, 1, NOTICE_MAX);
	while ((rc = db_step(&st->db, q, e)) == 1) {
		*upto = sqlite3_column_int64(q, 0);
		if (json_array_append_new(list, json_string((const char *)sqlite3_column_text(q, 1))) < 0) {
			rc = ek_fail(e, EK_OSERR, "out of memory");
			break;
		}
	}
	if (rc == 0 && !(*body = json_pack("{s:I, s:O}", "starts", (json_int_t)starts, "started", list)))
		rc = ek_fail(e, EK_OSERR, "out of memory");
out:
	db_done(&st->db, q);
	db_rollback(&st->db);
	json_decref(list);
	return rc < 0 ? -1 : 0;
}

int
notice_sent(struct state *st, int64_t upto, int64_t busy_ms, struct ek_err *e)
{
	sqlite3_stmt *q;
	int rc;

	if (upto <= 0)
		return 0;
	db_busy_ms(&st->db, busy_ms);
	rc = db_begin_write(&st->db, e);
	if (rc == 0 && !(q = db_prep(&st->db, "DELETE FROM start_notices WHERE seq <= ?1", e)))
		rc = -1, db_rollback(&st->db);
	else if (rc == 0) {
		db_bind_i64(q, 1, upto);
		rc = db_commit_stmt(&st->db, q, e) < 0 ? -1 : 0;
	}
	db_busy_ms(&st->db, DB_BUSY_TIMEOUT_MS);
	if (rc < 0 && st->db.busy) {   /* told again next time: harmless */
		ek_clear(e);
		return 0;
	}
	return rc;
}

int
notice_rebase(struct state *st, int64_t seen, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (!(q = db_prep(&st->db, "UPDATE start_counter SET starts = ?1 WHERE starts < ?1", e)))
		goto fail;
	db_bind_i64(q, 1, seen);
	if (db_exec_stmt(&st->db, q, e) < 0 ||
	    !(q = db_prep(&st->db, "DELETE FROM meta WHERE key = ?1", e)))
		goto fail;
	db_bind_text(q, 1, NOTICE_BACKUP_KEY);
	return db_commit_stmt(&st->db, q, e) < 0 ? -1 : 0;
fail:
	db_rollback(&st->db);
	return -1;
}
