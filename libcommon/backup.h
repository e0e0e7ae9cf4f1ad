/*
 * backup — a consistent copy of the state database while the executor runs
 * (exec-session backup; doc/recovery.md, "Backup and restore").
 *
 * The copy is made with SQLite's online backup API into a new file of mode
 * 0600 (it holds the session credential and the executor key), as one
 * file with no WAL beside it, and is marked as a backup (NOTICE_BACKUP_KEY
 * in its meta, notice.h): the original never carries that mark, so a
 * restore of the copy, however it is copied back, is known for what it is.
 * Every tool then refuses to start runs from it until a new session is
 * negotiated, and that negotiation tells the dispatcher, which never takes
 * the copy's "never started" for proof.
 */
#ifndef EK_BACKUP_H
#define EK_BACKUP_H

#include <stdbool.h>
#include <sqlite3.h>

#include "err.h"
#include "state.h"

/* Copy st's database to path (which must not exist) and mark the copy.
 * 0, or -1 (e filled; a partial copy is removed). */
int state_backup(struct state *st, const char *path, struct ek_err *e);

/* The same for any database (the dispatcher's store: exec-dispatcher
 * backup): src copied into path, a new file of mode 0600, mark(dst) run
 * on the copy (NULL: none), the copy left in rollback-journal mode (so
 * that a WAL found beside it later is known as another's: db_wal_foreign())
 * and synced.  0, or -1 (e filled; a partial copy is removed). */
int db_backup_to(sqlite3 *src, const char *path, int (*mark)(sqlite3 *dst), struct ek_err *e);

/* Is st a restored backup that no session has re-based yet (notice.h)?
 * 0 no; -1 yes or a read failure (e filled, EK_VERSION for a backup). */
int state_refuse_backup(struct state *st, struct ek_err *e);

#endif
