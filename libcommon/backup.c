/* backup — see backup.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "backup.h"
#include "clock.h"
#include "db.h"
#include "notice.h"

/* Pages copied per step: the source's lock is released between steps, so
 * a writer (a supervisor's commit) waits at most one step. */
enum { BACKUP_STEP_PAGES = 256, BACKUP_BUSY_TRIES = 200 };

/* Copy src into the open dst, a step at a time; SQLITE_DONE or an error. */
static int
copy_pages(sqlite3 *dst, sqlite3 *src)
{
	sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
	int rc, busy = 0;

	if (!b)
		return sqlite3_errcode(dst);
	while ((rc = sqlite3_backup_step(b, BACKUP_STEP_PAGES)) == SQLITE_OK ||
	    ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && busy++ < BACKUP_BUSY_TRIES))
		if (rc != SQLITE_OK)
			sqlite3_sleep(25);
	sqlite3_backup_finish(b);
	return rc;
}

/* Mark the copy as a state's backup (notice.h). */
static int
mark_copy(sqlite3 *dst)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(dst, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", -1,
	    &q, NULL);
	char at[32];

	snprintf(at, sizeof at, "%lld", (long long)now_ms());
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(q, 1, NOTICE_BACKUP_KEY, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, at, -1, SQLITE_STATIC);
		rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(dst);
	}
	sqlite3_finalize(q);
	return rc;
}

int
db_backup_to(sqlite3 *src, const char *path, int (*mark)(sqlite3 *dst), struct ek_err *e)
{
	sqlite3 *dst = NULL;
	int fd, rc;

	/* made here, 0600 and new, so SQLite opens a file nobody else could */
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", path, strerror(errno));
	close(fd);
	rc = sqlite3_open_v2(path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL);
	if (rc == SQLITE_OK)
		rc = copy_pages(dst, src);
	if (rc == SQLITE_DONE)
		rc = mark ? mark(dst) : SQLITE_OK;
	/* one self-contained file, in rollback-journal mode: a WAL found
	 * beside it later is another database's (db_wal_foreign()) */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		ek_fail(e, rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? EK_TEMPFAIL : EK_IOERR,
		    "backup to '%s': %s", path, dst ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
	if (sqlite3_close(dst) != SQLITE_OK && rc == SQLITE_OK)
		rc = ek_fail(e, EK_IOERR, "backup to '%s': closing it failed", path);
	if (rc != SQLITE_OK) {
		unlink(path);
		return -1;
	}
	/* the copy's bytes on disk before it is called made */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fsync(fd) < 0) {
		rc = errno;
		if (fd >= 0)
			close(fd);
		return ek_fail(e, EK_IOERR, "backup to '%s': fsync: %s", path, strerror(rc));
	}
	close(fd);
	return 0;
}

int
state_backup(struct state *st, const char *path, struct ek_err *e)
{
	return db_backup_to(st->db.h, path, mark_copy, e);
}

int
state_refuse_backup(struct state *st, struct ek_err *e)
{
	int64_t starts;
	bool backup;

	if (notice_count(st, &starts, &backup, e) < 0)
		return -1;
	if (backup)
		return ek_fail(e, EK_VERSION, "'%s' is a restored backup copy: runs it holds may have "
		    "run since it was taken, so none is started from it; open a new session first "
		    "('exec-session open': doc/recovery.md, \"Backup and restore\")", st->dbpath);
	return 0;
}
