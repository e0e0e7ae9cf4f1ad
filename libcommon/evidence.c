/* evidence — see evidence.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "binding.h"
#include "evidence.h"
#include "jsonout.h"

/* Selects the population; the same WHERE clause deletes it afterwards. */
#define EVIDENCE_WHERE " WHERE (refused = 1 OR NOT " SQL_DELIVERABLE_HERE("results") ") " \
	"AND chosen_at <= ?1"

static json_t *
row_json(sqlite3_stmt *q)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:i, s:b, s:s?, s:s?, s:s%}",
	    "run_id", sqlite3_column_text(q, 0), "incarnation", sqlite3_column_text(q, 1),
	    "session_id", sqlite3_column_text(q, 2), "outcome", sqlite3_column_text(q, 3),
	    "exit_code", sqlite3_column_int(q, 4), "message", sqlite3_column_text(q, 5),
	    "chosen_at", (json_int_t)sqlite3_column_int64(q, 6), "attempts", sqlite3_column_int(q, 7),
	    "refused", sqlite3_column_int(q, 8), "refused_cause", sqlite3_column_text(q, 9),
	    "last_diag", sqlite3_column_text(q, 10),
	    "body", (const char *)sqlite3_column_blob(q, 11), (size_t)sqlite3_column_bytes(q, 11));
}

static int
write_rows(struct state *st, FILE *f, int64_t cutoff, int64_t *n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id, incarnation, session_id, outcome, "
	    "exit_code, message, chosen_at, attempts, refused, refused_cause, last_diag, body "
	    "FROM results" EVIDENCE_WHERE " ORDER BY chosen_at", e);
	int rc;

	if (!q)
		return -1;
	db_bind_i64(q, 1, cutoff);
	*n = 0;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		if (json_emit(f, row_json(q)) < 0) {
			rc = ek_fail(e, EK_IOERR, "writing the export: %s", strerror(errno));
			break;
		}
		(*n)++;
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

static int
delete_rows(struct state *st, int64_t cutoff, int64_t expect, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "DELETE FROM results" EVIDENCE_WHERE, e);

	if (!q)
		return -1;
	db_bind_i64(q, 1, cutoff);
	if (db_exec_stmt(&st->db, q, e) < 0)
		return -1;
	if (sqlite3_changes(st->db.h) != expect)
		return ek_fail(e, EK_SOFTWARE, "export wrote %lld rows but %d match now; nothing deleted",
		    (long long)expect, sqlite3_changes(st->db.h));
	return 0;
}

int
evidence_export(struct state *st, const char *path, int64_t *n, struct ek_err *e)
{
	int64_t cutoff = now_ms();
	int fd;
	FILE *f;

	/* One write transaction: the rows cannot change between export and delete. */
	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 || !(f = fdopen(fd, "w"))) {
		ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	if (write_rows(st, f, cutoff, n, e) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
		if (!e->code)
			ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
		fclose(f);
		goto fail;
	}
	if (fclose(f) != 0) {
		ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
		goto fail;
	}
	if (delete_rows(st, cutoff, *n, e) < 0)
		goto fail;
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

int
receipts_prune(struct state *st, int64_t age_ms, int64_t *n, struct ek_err *e)
{
	sqlite3_stmt *q;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	if (!(q = db_prep(&st->db, "DELETE FROM receipts WHERE acked_at < ?1", e))) {
		db_rollback(&st->db);
		return -1;
	}
	db_bind_i64(q, 1, now_ms() - age_ms);
	if ((*n = db_commit_stmt(&st->db, q, e)) < 0)
		return -1;
	return 0;
}
