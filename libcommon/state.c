/* state — see state.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "clock.h"
#include "file.h"
#include "random.h"
#include "protocol.h"
#include "state.h"
#include "text.h"

struct schema_step { const char *name; const char *sql; };
#include "schema_sql.h"
#define SCHEMA_STEPS ((int)(sizeof schema_steps / sizeof schema_steps[0]))

int
state_path(const struct state *st, const char *name, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s/%s", st->dir, name);

	return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Refuse anything but a directory of ours that nobody else can reach, and
 * keep it open: every file in it is opened relative to this descriptor. */
static int
check_dir(struct state *st, const char *dir, struct ek_err *e)
{
	struct stat sb;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && errno == ELOOP)
		return ek_fail(e, EK_UNSAFE, "state directory '%s': it is a symbolic link (not "
		    "followed): name the directory itself", dir);
	if (fd < 0 && errno == ENOTDIR)
		return ek_fail(e, EK_CANTCREAT, "state directory '%s': not a directory", dir);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		ek_fail(e, EK_NOINPUT, "state directory '%s': %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	st->dir_fd = fd;
	if (sb.st_uid != geteuid())
		return ek_fail(e, EK_UNSAFE, "state directory '%s': owned by uid %u, not by us (uid %u)",
		    dir, (unsigned)sb.st_uid, (unsigned)geteuid());
	if (sb.st_mode & 077)
		return ek_fail(e, EK_UNSAFE, "state directory '%s': mode %04o lets others in; "
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

/* state.db must be a regular file of mode 0600 (a symbolic link is
 * refused, not followed), and so must its -wal and -shm where they exist. */
static int
check_db_file(const struct state *st, bool create, struct ek_err *e)
{
	static const char *const side[] = { "state.db-wal", "state.db-shm" };
	char path[PATH_MAX];
	struct stat sb;
	size_t i;

	if (fstatat(st->dir_fd, "state.db", &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT && create)
			return 0;
		if (errno == ENOENT)
			return ek_fail(e, EK_NOINPUT, "'%s' does not exist: not a state directory "
			    "(create one with 'exec-session open')", st->dbpath);
		return ek_fail(e, EK_IOERR, "'%s': %s", st->dbpath, strerror(errno));
	}
	if (S_ISLNK(sb.st_mode))
		return ek_fail(e, EK_DATAERR, "'%s': it is a symbolic link (not followed)", st->dbpath);
	if (!S_ISREG(sb.st_mode))
		return ek_fail(e, EK_DATAERR, "'%s': not a regular file", st->dbpath);
	if (sb.st_mode & 077)
		return ek_fail(e, EK_UNSAFE, "'%s': mode %04o lets others in; run 'chmod 600 %s'",
		    st->dbpath, (unsigned)(sb.st_mode & 07777), st->dbpath);
	for (i = 0; i < sizeof side / sizeof side[0]; i++)
		if (fstatat(st->dir_fd, side[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(sb.st_mode) &&
		    state_path(st, side[i], path, sizeof path) == 0)
			return ek_fail(e, EK_DATAERR, "'%s': %s", path, S_ISLNK(sb.st_mode) ?
			    "it is a symbolic link (not followed)" : "not a regular file");
	return 0;
}

/* A backup copy restored beside the live state's WAL (db_wal_foreign()):
 * refused, both left as they are. */
static int
check_wal_belongs(const struct state *st, struct ek_err *e)
{
	if (!db_wal_foreign(st->dir_fd, "state.db"))
		return 0;
	return ek_fail(e, EK_DATAERR, "'%s' is a copy in rollback-journal mode (a backup) with a "
	    "state.db-wal beside it, which belongs to another database: replayed over the copy it "
	    "would make a hybrid of both; nothing was opened.  To restore the copy, move "
	    "state.db-wal and state.db-shm away (doc/recovery.md, \"Backup and restore\")", st->dbpath);
}

/* Open out/ (making it with STATE_CREATE): a directory of ours, never a
 * link.  A state without out/ opens; what needs it fails then. */
static int
open_out(struct state *st, bool create, struct ek_err *e)
{
	char path[PATH_MAX];
	struct stat sb;

	if (state_path(st, "out", path, sizeof path) < 0)
		return ek_fail(e, EK_USAGE, "state directory '%s': path too long", st->dir);
	if (create && mkdirat(st->dir_fd, "out", 0700) < 0 && errno != EEXIST)
		return ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", path, strerror(errno));
	st->out_fd = openat(st->dir_fd, "out", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (st->out_fd < 0 && errno == ENOENT && !create)
		return 0;
	if (st->out_fd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return ek_fail(e, EK_DATAERR, "'%s': %s", path, errno == ELOOP ?
		    "it is a symbolic link (not followed)" : "not a directory");
	if (st->out_fd < 0 || fstat(st->out_fd, &sb) < 0)
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	if (sb.st_uid != geteuid())
		return ek_fail(e, EK_UNSAFE, "'%s': owned by uid %u, not by us (uid %u)", path,
		    (unsigned)sb.st_uid, (unsigned)geteuid());
	return 0;
}

/* --- files in the state directory ------------------------------------------------- */

/* The directory descriptor NAME lives in, and its base name; -1 (errno). */
static int
locate(const struct state *st, const char *name, const char **base)
{
	int fd = st->dir_fd;

	if (strncmp(name, "out/", 4) == 0) {
		fd = st->out_fd;
		name += 4;
	}
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		errno = EINVAL;
		return -1;
	}
	if (fd < 0) {
		errno = ENOENT;
		return -1;
	}
	*base = name;
	return fd;
}

int
state_open_file(const struct state *st, const char *name, int flags, mode_t mode,
    struct ek_err *e)
{
	bool fresh = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
	int code = flags & O_CREAT ? EK_CANTCREAT : EK_IOERR;
	const char *verb = flags & O_CREAT ? "create" : "open";
	char path[PATH_MAX];
	const char *base = NULL, *why = NULL;
	struct stat sb;
	int dirfd = locate(st, name, &base), fd;

	if (state_path(st, name, path, sizeof path) < 0)
		return ek_fail(e, EK_SOFTWARE, "state directory path too long");
	if (dirfd < 0)
		return ek_fail(e, code, "cannot %s '%s': %s", verb, path, strerror(errno));
	fd = openat(dirfd, base, (fresh ? flags : flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		why = strerror(errno);
		if ((errno == ELOOP || errno == EEXIST) && fstatat(dirfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(sb.st_mode))
			why = "it is a symbolic link (not followed)";
		return ek_fail(e, code, "cannot %s '%s': %s", verb, path, why);
	}
	if (fresh)
		return fd;
	if (fstat(fd, &sb) < 0)
		why = strerror(errno);
	else if (!S_ISREG(sb.st_mode))
		why = "not a regular file";
	else if (sb.st_uid != geteuid())
		why = "not ours";
	else if (sb.st_nlink != 1 && (flags & O_ACCMODE) != O_RDONLY)
		why = "it has more than one link (a hard link to another file?)";
	else if ((flags & O_TRUNC) && ftruncate(fd, 0) < 0)
		why = strerror(errno);
	if (!why)
		return fd;
	close(fd);
	return ek_fail(e, code, "cannot %s '%s': %s", verb, path, why);
}

int
state_check_free(const struct state *st, const char *name, struct ek_err *e)
{
	char path[PATH_MAX];
	const char *base = NULL, *why;
	struct stat sb;
	int dirfd = locate(st, name, &base);

	if (dirfd < 0)
		why = strerror(errno);
	else if (fstatat(dirfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		why = S_ISLNK(sb.st_mode) ? "it is a symbolic link (not followed)" : strerror(EEXIST);
	else if (errno == ENOENT)
		return 0;
	else
		why = strerror(errno);
	if (state_path(st, name, path, sizeof path) < 0)
		return ek_fail(e, EK_SOFTWARE, "state directory path too long");
	return ek_fail(e, EK_CANTCREAT, "cannot create '%s': %s", path, why);
}

int
state_open_dir(const struct state *st, const char *name, struct ek_err *e)
{
	char path[PATH_MAX];
	const char *base = NULL;
	int dirfd = locate(st, name, &base), fd, err;

	fd = dirfd < 0 ? -1 : openat(dirfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 || errno == ENOENT)
		return fd;
	err = errno;
	if (state_path(st, name, path, sizeof path) < 0)
		snprintf(path, sizeof path, "%s", name);
	ek_fail(e, EK_IOERR, "cannot open '%s': %s", path, err == ELOOP ?
	    "it is a symbolic link (not followed)" : strerror(err));
	errno = err;
	return -1;
}

int
state_unlink(const struct state *st, const char *name)
{
	const char *base = NULL;
	int dirfd = locate(st, name, &base);

	if (dirfd < 0)
		return errno == ENOENT ? 0 : -1;
	return unlinkat(dirfd, base, 0) < 0 && errno != ENOENT ? -1 : 0;
}

int
state_write_atomic_at(int dirfd, const char *dirpath, const char *base, const char *body,
    mode_t mode, bool durable, struct ek_err *e)
{
	size_t len = strlen(body);
	char tmp[NAME_MAX + 1], *text;
	int rc;

	if (snprintf(tmp, sizeof tmp, "%s.tmp", base) >= (int)sizeof tmp)
		return ek_fail(e, EK_SOFTWARE, "'%s/%s': name too long", dirpath, base);
	if (!(text = malloc(len + 1)))
		return ek_fail(e, EK_OSERR, "out of memory");
	memcpy(text, body, len);
	text[len] = '\n';
	rc = file_replace_at(dirfd, dirpath, tmp, base, text, len + 1, mode, durable, e);
	free(text);
	return rc;
}

int
state_link_atomic_at(int from_fd, int to_fd, const char *to_path, const char *base,
    struct ek_err *e)
{
	char tmp[NAME_MAX + 1];

	if (snprintf(tmp, sizeof tmp, "%s.tmp", base) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return ek_fail(e, EK_SOFTWARE, "'%s/%s': name too long", to_path, base);
	}
	return file_link_at(from_fd, base, to_fd, to_path, tmp, base, false, e);
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

/* Create the schema in one transaction: all of it or nothing.  0 made,
 * 1 another process made it first (nothing done here), -1 failed. */
static int
create_schema(struct state *st, struct ek_err *e)
{
	char pragma[96];
	char when[32];
	char key[EXECUTOR_KEY_HEX + 1];
	int64_t tables = 0;
	int i, rc;

	if (db_begin_write(&st->db, e) < 0)
		return -1;
	/* looked at before the write lock: two first opens (a loop killed
	 * while its own went on, and the next loop's) both found it empty */
	if (db_int64(&st->db, "SELECT count(*) FROM sqlite_schema", &tables, e) < 0)
		goto fail;
	if (tables > 0) {
		db_rollback(&st->db);
		return 1;
	}
	for (i = 0; i < SCHEMA_STEPS; i++)
		if (db_exec(&st->db, schema_steps[i].sql, e) < 0)
			goto fail;
	snprintf(pragma, sizeof pragma, "PRAGMA application_id=%d; PRAGMA user_version=%d;",
	    EK_APPLICATION_ID, SCHEMA_STEPS);
	if (random_hex(st->executor_id, sizeof st->executor_id, "", EXECUTOR_ID_HEX / 2) < 0 ||
	    random_hex(key, sizeof key, "", EXECUTOR_KEY_HEX / 2) < 0) {
		ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
		goto fail;
	}
	snprintf(when, sizeof when, "%lld", (long long)now_ms());
	rc = db_exec(&st->db, pragma, e) < 0 ||
	    meta_put(&st->db, "package_version", PACKAGE_VERSION, e) < 0 ||
	    meta_put(&st->db, "executor_id", st->executor_id, e) < 0 ||
	    meta_put(&st->db, "executor_key", key, e) < 0 ||
	    meta_put(&st->db, "created_at", when, e) < 0 ? -1 : 0;
	explicit_bzero(key, sizeof key);
	if (rc < 0)
		goto fail;
	return db_commit(&st->db, e);
fail:
	db_rollback(&st->db);
	return -1;
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

int
state_executor_key(struct state *st, char *out, size_t n, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT value FROM meta WHERE key = 'executor_key'", e);
	int rc;

	out[0] = '\0';
	if (!q)
		return -1;
	if ((rc = db_step(&st->db, q, e)) == 1)
		db_col_text(q, 0, out, n);
	db_done(&st->db, q);
	if (rc < 0)
		return -1;
	if (!text_is_hex(out, EXECUTOR_KEY_HEX)) {
		explicit_bzero(out, n);
		return ek_fail(e, EK_DATAERR, "%s: state has no executor key (damaged meta table); "
		    "the dispatcher accepts this executor only with the key it was bound to",
		    st->dbpath);
	}
	return 0;
}

/* The tools write the state from many processes at once: they queue for
 * the write lock in the kernel (db_queue_writers()). */
static int
configure(struct state *st, struct ek_err *e)
{
	if (db_configure(&st->db, e) < 0)
		return -1;
	db_queue_writers(&st->db, st->dir_fd, "state.db-writers");
	return 0;
}

/* Look before touching: a file that is not ours is refused unchanged. */
static int
open_db(struct state *st, bool create, int64_t busy_ms, struct ek_err *e)
{
	int64_t app = 0, ver = 0, tables = 0;
	bool configured = false;
	int rc;

	if (db_open_untouched(&st->db, st->dbpath, create, e) < 0)
		return -1;
	db_busy_ms(&st->db, busy_ms);
	st->db.keep = true;   /* the tools are single-threaded: statements are reused */
	if (db_int64(&st->db, "PRAGMA application_id", &app, e) < 0 ||
	    db_int64(&st->db, "PRAGMA user_version", &ver, e) < 0 ||
	    db_int64(&st->db, "SELECT count(*) FROM sqlite_schema", &tables, e) < 0)
		return st->db.busy ? ek_fail(e, EK_TEMPFAIL, "%s: held by another process; gave up "
		    "waiting for it after %lld ms", st->dbpath, (long long)st->db.busy_ms) : -1;
	/* Incremental auto-vacuum (exec-session compact, retention.h) can be
	 * chosen only before the first table, and before WAL mode writes the
	 * first page. */
	if (app == 0 && ver == 0 && tables == 0 && create) {
		if (db_exec(&st->db, "PRAGMA auto_vacuum=INCREMENTAL", e) < 0 || configure(st, e) < 0 ||
		    (rc = create_schema(st, e)) < 0)
			return -1;
		/* made here (0), or by another process meanwhile (1): that one is
		 * checked as any other state is */
		if (rc == 0 || db_int64(&st->db, "PRAGMA application_id", &app, e) < 0 ||
		    db_int64(&st->db, "PRAGMA user_version", &ver, e) < 0)
			return rc == 0 ? 0 : -1;
		configured = true;
	}
	if (app != EK_APPLICATION_ID)
		return ek_fail(e, EK_DATAERR, "%s: not an execkit state database (application_id %#x); "
		    "nothing was changed", st->dbpath, (unsigned)app);
	if (check_identity(st, (int)ver, e) < 0)
		return -1;
	return configured ? 0 : configure(st, e);
}

int
state_open(struct state *st, const char *dir, int flags, struct ek_err *e)
{
	return state_open_within(st, dir, flags, DB_BUSY_TIMEOUT_MS, e);
}

int
state_open_within(struct state *st, const char *dir, int flags, int64_t busy_ms, struct ek_err *e)
{
	bool create = flags & STATE_CREATE;

	memset(st, 0, sizeof *st);
	st->dir_fd = st->out_fd = -1;
	st->umask_orig = umask(077);
	if (snprintf(st->dir, sizeof st->dir, "%s", dir) >= (int)sizeof st->dir ||
	    state_path(st, "state.db", st->dbpath, sizeof st->dbpath) < 0)
		return ek_fail(e, EK_USAGE, "state directory '%s': path too long", dir);
	if (create && access(dir, F_OK) < 0 && make_dir(dir, e) < 0)
		return -1;
	if (check_dir(st, dir, e) < 0 || check_db_file(st, create, e) < 0 ||
	    check_wal_belongs(st, e) < 0 || open_out(st, create, e) < 0)
		goto fail;
	if (open_db(st, create, busy_ms, e) < 0)
		goto fail;
	return 0;
fail:
	state_close(st);
	return -1;
}

void
state_close(struct state *st)
{
	db_close(&st->db);
	if (st->out_fd >= 0)
		close(st->out_fd);
	if (st->dir_fd >= 0)
		close(st->dir_fd);
	st->out_fd = st->dir_fd = -1;
}

int
state_unmake(const char *dir)
{
	static const char *const files[] = { "state.db", "state.db-wal", "state.db-shm",
		"state.db-writers", "reserve" };
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	size_t i;
	int rc;

	if (fd < 0)
		return -1;
	for (i = 0; i < sizeof files / sizeof files[0]; i++)
		unlinkat(fd, files[i], 0);
	unlinkat(fd, "out", AT_REMOVEDIR);
	close(fd);
	rc = rmdir(dir);
	return rc;
}
