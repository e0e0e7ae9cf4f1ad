/* evidence — see evidence.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "crash.h"
#include "evidence.h"
#include "jsonout.h"
#include "session.h"

/* An orphaned result that adoption could still deliver: its session is an
 * ended, unrevoked session of this executor (exec-session adopt: the
 * dispatcher adopts closed, expired and replaced sessions, never a revoked
 * one), and no current session of another dispatcher incarnation says the
 * dispatcher that issued it lost its store. */
#define SQL_ADOPTABLE "EXISTS (SELECT 1 FROM sessions os WHERE os.incarnation = results.incarnation " \
	"AND os.session_id = results.session_id AND os.status NOT IN ('current', 'revoked') " \
	"AND NOT EXISTS (SELECT 1 FROM sessions oc WHERE oc.status = 'current' " \
	"AND oc.incarnation <> os.incarnation))"
#define SQL_ORPHANED "refused = 0 AND NOT " SQL_DELIVERABLE_HERE("results")

/* Selects the population (?4: adoptable ones too); the same WHERE clause
 * deletes it afterwards. */
#define EVIDENCE_WHERE " WHERE (refused = 1 OR (NOT " SQL_DELIVERABLE_HERE("results") \
	" AND (?4 OR NOT " SQL_ADOPTABLE "))) AND chosen_at <= ?1"

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

/* Bind EVIDENCE_WHERE's ?1 and ?4 and the chunk's rowid range ?2..?3. */
static void
bind_chunk(sqlite3_stmt *q, int64_t cutoff, bool adoptable, int64_t first, int64_t last)
{
	db_bind_i64(q, 1, cutoff);
	db_bind_i64(q, 2, first);
	db_bind_i64(q, 3, last);
	db_bind_i64(q, 4, adoptable);
}

/* The run records of the results a chunk exports (rowids first+1..last). */
static int
record_exported(struct state *st, const char *path, int64_t cutoff, bool adoptable, int64_t first,
    int64_t last, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "INSERT OR REPLACE INTO run_records(run_id, txn_id, "
	    "incarnation, session_id, known, outcome, exit_code, started_at, chosen_at, message, "
	    "stdout_dropped, stderr_dropped, evidence, recorded_at) SELECT run_id, (SELECT a.txn_id "
	    "FROM accepts a WHERE a.run_id = results.run_id), incarnation, session_id, 'finished', "
	    "outcome, exit_code, started_at, chosen_at, message, stdout_dropped, stderr_dropped, "
	    "CASE WHEN refused THEN 'refused (' || IFNULL(refused_cause, '') || "
	    "'), evidence exported to ' ELSE 'not delivered, evidence exported to ' END || ?5, ?6 "
	    "FROM results" EVIDENCE_WHERE " AND rowid > ?2 AND rowid <= ?3", e);

	if (!q)
		return -1;
	bind_chunk(q, cutoff, adoptable, first, last);
	db_bind_text(q, 5, path);
	db_bind_i64(q, 6, now_ms());
	return db_exec_stmt(&st->db, q, e);
}

/* One chunk, in the caller's transaction: write the next rows (by rowid,
 * after *last) to f and make them durable, then delete exactly those rows.
 * *n = rows in the chunk; *last = the rowid of its last row. */
static int
export_chunk(struct state *st, FILE *f, const char *path, int64_t cutoff, bool adoptable,
    int64_t *last, int64_t *n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id, incarnation, session_id, outcome, "
	    "exit_code, message, chosen_at, attempts, refused, refused_cause, last_diag, body, rowid "
	    "FROM results" EVIDENCE_WHERE " AND rowid > ?2 ORDER BY rowid LIMIT ?3", e);
	int64_t first = *last;
	char rows[48];
	int rc;

	if (!q)
		return -1;
	db_bind_i64(q, 1, cutoff);
	db_bind_i64(q, 2, first);
	db_bind_i64(q, 3, EVIDENCE_CHUNK_ROWS);
	db_bind_i64(q, 4, adoptable);
	*n = 0;
	while ((rc = db_step(&st->db, q, e)) == 1) {
		if (json_emit(f, row_json(q)) < 0) {
			rc = ek_fail(e, EK_IOERR, "writing the export: %s", strerror(errno));
			break;
		}
		*last = sqlite3_column_int64(q, 12);
		(*n)++;
	}
	db_done(&st->db, q);
	if (rc < 0 || *n == 0)
		return rc < 0 ? -1 : 0;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		return ek_fail(e, EK_IOERR, "writing the export: %s", strerror(errno));
	/* The rows are in the synced file: only now may they go, each leaving
	 * its run's record (schema step 12) in the same transaction. */
	if (record_exported(st, path, cutoff, adoptable, first, *last, e) < 0 ||
	    !(q = db_prep(&st->db, "DELETE FROM results" EVIDENCE_WHERE " AND rowid > ?2 AND rowid <= ?3", e)))
		return -1;
	bind_chunk(q, cutoff, adoptable, first, *last);
	if (db_exec_stmt(&st->db, q, e) < 0)
		return -1;
	if (sqlite3_changes(st->db.h) != *n)
		return ek_fail(e, EK_SOFTWARE, "export wrote %s but %d match now; nothing deleted",
		    cli_plural(rows, sizeof rows, *n, "row"), sqlite3_changes(st->db.h));
	return 0;
}

/* A chunked job failed after n rows were done for good: say so in e. */
static int
failed_after(struct ek_err *e, int64_t n, const char *done)
{
	char msg[sizeof e->msg];

	if (n > 0 && snprintf(msg, sizeof msg, "%s (%lld %s before that)", e->msg, (long long)n,
	    done) > 0)
		memcpy(e->msg, msg, sizeof msg);
	return -1;
}

/* Make the new file's name durable too, before any row depends on it. */
static int
sync_parent(const char *path, struct ek_err *e)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, rc;

	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path) >=
	    (int)sizeof dir)
		return ek_fail(e, EK_CANTCREAT, "'%s': path too long", path);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return ek_fail(e, EK_IOERR, "'%s': %s", dir, strerror(errno));
	rc = fsync(fd);
	close(fd);
	return rc < 0 ? ek_fail(e, EK_IOERR, "'%s': fsync: %s", dir, strerror(errno)) : 0;
}

/* How many orphaned results chosen by cutoff adoption could still deliver. */
static int
count_adoptable(struct state *st, int64_t cutoff, int64_t *kept, struct ek_err *e)
{
	return db_int64_at(&st->db, "SELECT count(*) FROM results WHERE " SQL_ORPHANED
	    " AND " SQL_ADOPTABLE " AND chosen_at <= ?1", cutoff, kept, e);
}

int
evidence_plan(struct state *st, bool adoptable, int (*fn)(json_t *item, void *), void *arg,
    struct evidence_count *c, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id, session_id, refused, chosen_at "
	    "FROM results" EVIDENCE_WHERE " ORDER BY rowid", e);
	int64_t cutoff = now_ms();
	int rc;

	memset(c, 0, sizeof *c);
	if (!q)
		return -1;
	db_bind_i64(q, 1, cutoff);
	db_bind_i64(q, 4, adoptable);
	while ((rc = db_step(&st->db, q, e)) == 1) {
		c->rows++;
		if (fn && fn(json_pack("{s:s, s:s, s:s, s:b, s:I}", "event", "would_export", "run_id",
		    sqlite3_column_text(q, 0), "session_id", sqlite3_column_text(q, 1), "refused",
		    sqlite3_column_int(q, 2), "chosen_at", (json_int_t)sqlite3_column_int64(q, 3)), arg) != 0) {
			rc = -1;   /* fn said why in its arg */
			break;
		}
	}
	db_done(&st->db, q);
	if (rc < 0 || (!adoptable && count_adoptable(st, cutoff, &c->kept_adoptable, e) < 0))
		return -1;
	return 0;
}

int
evidence_export(struct state *st, const char *path, bool adoptable, struct evidence_count *c,
    struct ek_err *e)
{
	int64_t cutoff = now_ms(), last = 0, k = 1, *n = &c->rows;
	int fd, rc = 0;
	FILE *f;

	memset(c, 0, sizeof *c);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 || !(f = fdopen(fd, "w"))) {
		ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (sync_parent(path, e) < 0) {
		fclose(f);
		return -1;
	}
	/* A transaction per chunk: its rows cannot change between export and
	 * delete, and no other writer waits long for the lock. */
	while (rc == 0 && k > 0) {
		db_yield(&st->db);   /* after a chunk, a waiting writer first */
		if ((rc = db_begin_write(&st->db, e)) < 0)
			break;
		if ((rc = export_chunk(st, f, path, cutoff, adoptable, &last, &k, e)) < 0 || k == 0) {
			db_rollback(&st->db);
			break;
		}
		if ((rc = db_commit(&st->db, e)) == 0) {
			*n += k;
			crash_point("export-chunk");
		}
	}
	if (fclose(f) != 0 && rc == 0)
		rc = ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	if (rc == 0 && !adoptable)
		rc = count_adoptable(st, cutoff, &c->kept_adoptable, e);
	return rc < 0 ? failed_after(e, *n, "results were exported and deleted") : 0;
}

int
receipts_plan(struct state *st, int64_t age_ms, int (*fn)(json_t *item, void *), void *arg,
    int64_t *n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT run_id, acked_at FROM receipts "
	    "WHERE acked_at < ?1 ORDER BY rowid", e);
	int rc;

	*n = 0;
	if (!q)
		return -1;
	db_bind_i64(q, 1, now_ms() - age_ms);
	while ((rc = db_step(&st->db, q, e)) == 1) {
		(*n)++;
		if (fn && fn(json_pack("{s:s, s:s, s:I}", "event", "would_prune", "run_id",
		    sqlite3_column_text(q, 0), "acked_at", (json_int_t)sqlite3_column_int64(q, 1)), arg) != 0) {
			rc = -1;
			break;
		}
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* The receipts of the next prune chunk, oldest first (?1 cutoff, ?2 rows). */
#define PRUNE_CHUNK "SELECT rowid FROM receipts WHERE acked_at < ?1 ORDER BY rowid LIMIT ?2"

/* The run records of the receipts the next prune chunk removes, with what
 * the story keeps of each spec (schema step 17): the same rows as its
 * DELETE, in the same transaction (?3: now). */
#define RECORD_PRUNED "INSERT OR REPLACE INTO run_records(run_id, txn_id, " \
	"incarnation, session_id, known, outcome, exit_code, started_at, chosen_at, acked_at, " \
	"message, stdout_dropped, stderr_dropped, evidence, recorded_at, program, args, " \
	"env_names, cwd, timeout_ms) SELECT c.run_id, a.txn_id, c.incarnation, c.session_id, " \
	"'finished', c.outcome, c.exit_code, c.started_at, c.chosen_at, c.acked_at, c.message, " \
	"c.stdout_dropped, c.stderr_dropped, 'delivered and acknowledged; its receipt pruned', ?3, " \
	"json_extract(a.content, '$.program'), json(IFNULL(json_extract(a.content, '$.args'), " \
	"'[]')), CASE json_type(a.content, '$.env') WHEN 'object' THEN (SELECT " \
	"json_group_array(key) FROM json_each(a.content, '$.env')) END, " \
	"json_extract(a.content, '$.cwd'), json_extract(a.content, '$.timeout_ms') " \
	"FROM receipts c JOIN accepts a ON a.run_id = c.run_id " \
	"WHERE c.rowid IN (" PRUNE_CHUNK ")"

/* Then the specs of those runs are dropped, each kept by its digest. */
#define SPEC_DROPPED "UPDATE accepts SET content_sha256 = sha256_hex(content), " \
	"content = '' WHERE content <> '' AND run_id IN (SELECT run_id FROM receipts " \
	"WHERE rowid IN (" PRUNE_CHUNK "))"

/* One statement over the next prune chunk: ?1 the cutoff, ?2 the chunk's
 * rows, ?3 (where it has one) now.  0, or -1 (e filled). */
static int
chunk_exec(struct state *st, const char *sql, int64_t cutoff, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, sql, e);

	if (!q)
		return -1;
	db_bind_i64(q, 1, cutoff);
	db_bind_i64(q, 2, PRUNE_CHUNK_ROWS);
	if (sqlite3_bind_parameter_count(q) >= 3)
		db_bind_i64(q, 3, now_ms());
	return db_exec_stmt(&st->db, q, e);
}

int
receipts_prune(struct state *st, int64_t age_ms, int64_t *n, struct ek_err *e)
{
	int64_t cutoff = now_ms() - age_ms;
	sqlite3_stmt *q;
	int k;

	*n = 0;
	do {
		db_yield(&st->db);   /* after a chunk, a waiting writer first */
		if (db_begin_write(&st->db, e) < 0)
			return failed_after(e, *n, "receipts were pruned");
		if (chunk_exec(st, RECORD_PRUNED, cutoff, e) < 0 ||
		    chunk_exec(st, SPEC_DROPPED, cutoff, e) < 0 ||
		    !(q = db_prep(&st->db, "DELETE FROM receipts WHERE rowid IN (" PRUNE_CHUNK ")", e))) {
			db_rollback(&st->db);
			return failed_after(e, *n, "receipts were pruned");
		}
		db_bind_i64(q, 1, cutoff);
		db_bind_i64(q, 2, PRUNE_CHUNK_ROWS);
		if ((k = db_commit_stmt(&st->db, q, e)) < 0)
			return failed_after(e, *n, "receipts were pruned");
		*n += k;
		if (k > 0)
			crash_point("prune-chunk");
	} while (k == PRUNE_CHUNK_ROWS);
	return 0;
}
