/*
 * floor_lookup — the lookup floor: the least a process can do to answer
 * InspectRetainedRun from execkit's state, with nothing else: open the
 * state database, run the lookup's join for one run id with a bound
 * parameter, print the row.  No session gate, no shutdown lock, no
 * authorizer, no schema version check.  Linked like floor_insert
 * (statically against libsqlite3 when libsqlite3.a is there), as the
 * tools are.
 *
 *   floor_lookup DB RUN-ID
 *
 * Exit status: 0 (found or not), 1 on any SQLite error, 64 usage.
 */
#include <stdio.h>

#include <sqlite3.h>

int
main(int argc, char **argv)
{
	static const char sql[] =
	    "SELECT a.run_id, a.incarnation, a.session_id, a.txn_id, r.state, "
	    "r.started_at, r.start_marker, r.due_at "
	    "FROM accepts a LEFT JOIN runs r ON r.run_id = a.run_id WHERE a.run_id = ?1";
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int rc, i;

	if (argc != 3) {
		fprintf(stderr, "usage: floor_lookup DB RUN-ID\n");
		return 64;
	}
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "floor_lookup: %s: %s\n", argv[1], sqlite3_errmsg(db));
		return 1;
	}
	sqlite3_bind_text(st, 1, argv[2], -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (i = 0; i < sqlite3_column_count(st); i++) {
			const unsigned char *v = sqlite3_column_text(st, i);

			printf("%s%s", i ? " " : "", v ? (const char *)v : "-");
		}
		putchar('\n');
	}
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "floor_lookup: %s: %s\n", argv[1], sqlite3_errmsg(db));
		return 1;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return 0;
}
