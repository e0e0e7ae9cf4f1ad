/* state — see state.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "cli.h"
#include "state.h"

struct schema_step { const char *name; const char *sql; };
#include "schema_sql.h"
#define SCHEMA_STEPS ((int)(sizeof schema_steps / sizeof schema_steps[0]))

int
state_path(const struct state *st, const char *name, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s/%s", st->dir, name);

	return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Refuse anything but a directory of ours that nobody else can reach. */
static int
check_dir(const char *dir, struct ek_err *e)
{
	struct stat sb;

	if (stat(dir, &sb) < 0)
		return ek_fail(e, EK_NOINPUT, "state directory '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return ek_fail(e, EK_CANTCREAT, "state directory '%s': not a directory", dir);
	if (sb.st_uid != geteuid())
		return ek_fail(e, EK_NOSESSION, "state directory '%s': owned by uid %u, not by us (uid %u)",
		    dir, (unsigned)sb.st_uid, (unsigned)geteuid());
	if (sb.st_mode & 077)
		return ek_fail(e, EK_NOSESSION, "state directory '%s': mode %04o lets others in; "
		    "run 'chmod 700 %s'", dir, (unsigned)(sb.st_mode & 07777), dir);
	return 0;
}

static int
make_dir(const char *dir, struct ek_err *e)
{
	char tmp[PATH_MAX];
	char *p;

	if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
		return ek_fail(e, EK_USAGE, "state directory '%s': path too long", dir);
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ek_fail(e, EK_CANTCREAT, "cannot create state directory '%s': %s", dir, strerror(errno));
	return 0;
}

static int
check_db_file(const char *path, bool create, struct ek_err *e)
{
	struct stat sb;

	if (lstat(path, &sb) < 0) {
		if (errno == ENOENT && create)
			return 0;
		if (errno == ENOENT)
			return ek_fail(e, EK_NOINPUT, "'%s' does not exist: not a state directory "
			    "(create one with 'exec-session open')", path);
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	}
	if (!S_ISREG(sb.st_mode))
		return ek_fail(e, EK_DATAERR, "'%s': not a regular file", path);
	if (sb.st_mode & 077)
		return ek_fail(e, EK_NOSESSION, "'%s': mode %04o lets others in; run 'chmod 600 %s'",
		    path, (unsigned)(sb.st_mode & 07777), path);
	return 0;
}

static int
random_hex(char *out, size_t nbytes)
{
	unsigned char raw[32];
	size_t i;

	if (nbytes > sizeof raw || getrandom(raw, nbytes, 0) != (ssize_t)nbytes)
		return -1;
	for (i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", raw[i]);
	return 0;
}

static int
meta_put(struct db *db, const char *key, const char *value, struct ek_err *e)
{
	sqlite3_stmt *st = db_prep(db, "INSERT INTO meta(key, value) VALUES (?1, ?2)", e);

	if (!st)
		return -1;
	db_bind_text(st, 1, key);
	db_bind_text(st, 2, value);
	return db_exec_stmt(db, st, e);
}

/* Create the schema in one transaction: all of it or nothing. */
static int
create_schema(struct state *st, struct ek_err *e)
{
	char pragma[96];
	char when[32];
	int i;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	for (i = 0; i < SCHEMA_STEPS; i++)
		if (db_exec(&st->db, schema_steps[i].sql, e) < 0)
			goto fail;
	snprintf(pragma, sizeof pragma, "PRAGMA application_id=%d; PRAGMA user_version=%d;",
	    EK_APPLICATION_ID, SCHEMA_STEPS);
	if (random_hex(st->executor_id, 16) < 0) {
		ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
		goto fail;
	}
	snprintf(when, sizeof when, "%lld", (long long)now_ms());
	if (db_exec(&st->db, pragma, e) < 0 ||
	    meta_put(&st->db, "package_version", PACKAGE_VERSION, e) < 0 ||
	    meta_put(&st->db, "executor_id", st->executor_id, e) < 0 ||
	    meta_put(&st->db, "created_at", when, e) < 0)
		goto fail;
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
}

static int
pragma_int(struct db *db, const char *sql, int *out, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(db, sql, e);
	int rc;

	if (!q)
		return -1;
	rc = db_step(db, q, e);
	if (rc == 1)
		*out = sqlite3_column_int(q, 0);
	db_done(db, q);
	return rc < 0 ? -1 : 0;
}

/* The version gate: same application, same schema, same package version.
 * The version that wrote the state is named whenever meta still says it. */
static int
check_identity(struct state *st, int schema, struct ek_err *e)
{
	char version[64] = "";
	sqlite3_stmt *q;
	int rc = 0;

	q = db_prep(&st->db, "SELECT key, value FROM meta WHERE key IN ('package_version','executor_id')", e);
	if (!q && schema == SCHEMA_STEPS)
		return -1;
	while (q && (rc = db_step(&st->db, q, e)) == 1) {
		const char *k = (const char *)sqlite3_column_text(q, 0);
		if (strcmp(k, "package_version") == 0)
			db_col_text(q, 1, version, sizeof version);
		else
			db_col_text(q, 1, st->executor_id, sizeof st->executor_id);
	}
	db_done(&st->db, q);
	if (q && rc < 0 && schema == SCHEMA_STEPS)
		return -1;
	if ((version[0] || schema == SCHEMA_STEPS) && strcmp(version, PACKAGE_VERSION) != 0)
		return ek_fail(e, EK_VERSION, "%s: state was created by execkit %s, this is execkit %s; "
		    "drain it with execkit %s ('exec-reconcile --drain') or use a new state directory",
		    st->dbpath, version[0] ? version : "(unknown)", PACKAGE_VERSION,
		    version[0] ? version : "(unknown)");
	if (schema != SCHEMA_STEPS)
		return ek_fail(e, EK_VERSION, "%s: schema version %d, this is execkit %s with schema %d; "
		    "drain it with the execkit that wrote it", st->dbpath, schema, PACKAGE_VERSION, SCHEMA_STEPS);
	if (!st->executor_id[0])
		return ek_fail(e, EK_DATAERR, "%s: state has no executor id (damaged meta table)", st->dbpath);
	return 0;
}

/* Look before touching: a file that is not ours is refused unchanged. */
static int
open_db(struct state *st, bool create, struct ek_err *e)
{
	int app = 0, ver = 0, tables = 0;

	if (db_open_untouched(&st->db, st->dbpath, create, e) < 0)
		return -1;
	st->db.keep = true;   /* the tools are single-threaded: statements are reused */
	if (pragma_int(&st->db, "PRAGMA application_id", &app, e) < 0 ||
	    pragma_int(&st->db, "PRAGMA user_version", &ver, e) < 0 ||
	    pragma_int(&st->db, "SELECT count(*) FROM sqlite_schema", &tables, e) < 0)
		return -1;
	if (app == 0 && ver == 0 && tables == 0 && create)
		return db_configure(&st->db, e) < 0 ? -1 : create_schema(st, e);
	if (app != EK_APPLICATION_ID)
		return ek_fail(e, EK_DATAERR, "%s: not an execkit state database (application_id %#x); "
		    "nothing was changed", st->dbpath, (unsigned)app);
	if (check_identity(st, ver, e) < 0)
		return -1;
	return db_configure(&st->db, e);
}

int
state_open(struct state *st, const char *dir, int flags, struct ek_err *e)
{
	bool create = flags & STATE_CREATE;
	char out[PATH_MAX];

	memset(st, 0, sizeof *st);
	st->umask_orig = umask(077);
	if (snprintf(st->dir, sizeof st->dir, "%s", dir) >= (int)sizeof st->dir ||
	    state_path(st, "state.db", st->dbpath, sizeof st->dbpath) < 0)
		return ek_fail(e, EK_USAGE, "state directory '%s': path too long", dir);
	if (create && access(dir, F_OK) < 0 && make_dir(dir, e) < 0)
		return -1;
	if (check_dir(dir, e) < 0 || check_db_file(st->dbpath, create, e) < 0)
		return -1;
	if (open_db(st, create, e) < 0) {
		db_close(&st->db);
		return -1;
	}
	if (create && (state_path(st, "out", out, sizeof out) < 0 ||
	    (mkdir(out, 0700) < 0 && errno != EEXIST))) {
		state_close(st);
		return ek_fail(e, EK_CANTCREAT, "cannot create '%s/out': %s", dir, strerror(errno));
	}
	return 0;
}

void
state_close(struct state *st)
{
	db_close(&st->db);
}
