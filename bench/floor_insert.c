/*
 * floor_insert — the durable-insert floor: the least a process can do to
 * make one accepted row durable in SQLite the way execkit must (WAL,
 * synchronous=FULL, the WAL file kept between processes but capped), with
 * nothing else: no JSON, no checks, no schema versioning.  Linked
 * statically against libsqlite3 when libsqlite3.a is there, so dynamic
 * loading costs it less than it costs the tools.
 *
 *   floor_insert DB                  one row (content: the first line of
 *                                    stdin), one commit
 *   floor_insert DB COMMITS [ROWS]   COMMITS transactions of ROWS rows each
 *                                    (default 1), in this one process; run
 *                                    ids repeat, so use a fresh DB each call
 *
 * The table is created on first use.  Exit status: 0, 1 on any SQLite
 * error, 64 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

static sqlite3 *db;

static int
die(const char *what)
{
	fprintf(stderr, "floor_insert: %s: %s\n", what, sqlite3_errmsg(db));
	return 1;
}

static sqlite3_stmt *
prep_insert(void)
{
	static const char sql[] = "INSERT INTO t(run_id, content, at) VALUES (?1, ?2, ?3)";
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK)
		return st;
	if (sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, "
	    "run_id TEXT NOT NULL UNIQUE, content TEXT NOT NULL, at INTEGER NOT NULL)",
	    NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	return st;
}

static int
insert(sqlite3_stmt *st, const char *run_id, const char *content)
{
	sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, content, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, 1764500000000LL);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -1;
	sqlite3_reset(st);
	return 0;
}

int
main(int argc, char **argv)
{
	long commits = 1, rows = 1, c, r;
	char line[4096], id[64], content[256];
	sqlite3_stmt *st;
	int one = argc == 2, persist = 1;

	if (argc < 2 || argc > 4)
		return fputs("usage: floor_insert DB [COMMITS [ROWS]]\n", stderr), 64;
	if (argc > 2)
		commits = strtol(argv[2], NULL, 10);
	if (argc > 3)
		rows = strtol(argv[3], NULL, 10);
	if (commits < 1 || rows < 1)
		return fputs("floor_insert: COMMITS and ROWS must be positive\n", stderr), 64;
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
		return die("open");
	sqlite3_busy_timeout(db, 5000);
	/* As the tools do (libcommon/db.c): keep the WAL file between processes
	 * rather than delete and re-create it on every call, and cap it: a kept
	 * WAL is otherwise never truncated, and each new process appends to it
	 * and reads all of it back (5 MB after 1000 calls, and slower each). */
	sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
	if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	    " PRAGMA journal_size_limit=1048576;", NULL, NULL, NULL) != SQLITE_OK)
		return die("pragma");
	if (!(st = prep_insert()))
		return die("prepare");
	if (one) {
		/* Unique per invocation: the caller puts a fresh run id in the line. */
		if (!fgets(line, sizeof line, stdin))
			return fputs("floor_insert: no input line\n", stderr), 1;
		line[strcspn(line, "\n")] = '\0';
		if (insert(st, line, line) < 0)
			return die("insert");
	} else {
		/* Ids are unique within one database: give each call a fresh one. */
		for (c = 0; c < commits; c++) {
			if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
				return die("begin");
			for (r = 0; r < rows; r++) {
				snprintf(id, sizeof id, "f-%ld-%ld", c, r);
				snprintf(content, sizeof content, "{\"args\":[],\"program\":\"/bin/true\","
				    "\"run_id\":\"%s\",\"txn_id\":\"t-%ld\"}", id, c * rows + r);
				if (insert(st, id, content) < 0)
					return die("insert");
			}
			if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
				return die("commit");
		}
	}
	sqlite3_finalize(st);
	if (sqlite3_close(db) != SQLITE_OK)
		return die("close");
	return 0;
}
