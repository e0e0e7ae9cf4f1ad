/* output — see output.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "guest.h"
#include "output.h"
#include "runs.h"

static const char *const suffixes[] = { ".stdout", ".stderr", ".notify", "." OUTPUT_TRUNCATED, NULL };

/* The run id of an output file's name, or 0 if it is not one. */
static int
run_of(const char *name, char *run_id, size_t n)
{
	size_t len = strlen(name), sl;
	int i;

	for (i = 0; suffixes[i]; i++) {
		sl = strlen(suffixes[i]);
		if (len > sl && len - sl < n && strcmp(name + len - sl, suffixes[i]) == 0) {
			memcpy(run_id, name, len - sl);
			run_id[len - sl] = '\0';
			return run_id_valid(run_id);
		}
	}
	return 0;
}

/* Open out/ as a directory fd (never through a link). */
static int
out_dir(const struct state *st, struct ek_err *e)
{
	char path[4096];
	int fd;

	if (state_path(st, "out", path, sizeof path) < 0)
		return ek_fail(e, EK_SOFTWARE, "state directory path too long");
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	return fd;
}

int
output_usage(const struct state *st, struct output_usage *u, struct ek_err *e)
{
	char run_id[RUN_ID_MAX + 1];
	struct dirent *d;
	struct stat sb;
	int fd = out_dir(st, e);
	DIR *dir;

	u->bytes = u->files = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (!(dir = fdopendir(fd))) {
		close(fd);
		return ek_fail(e, EK_IOERR, "out/: %s", strerror(errno));
	}
	while ((d = readdir(dir)))
		if (run_of(d->d_name, run_id, sizeof run_id) &&
		    fstatat(dirfd(dir), d->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
			u->bytes += sb.st_size;
			u->files++;
		}
	closedir(dir);
	return 0;
}

/* How the state refers to run_id: 2 live (a row or a retained result),
 * 1 acknowledged only (a receipt; *acked its time), 0 nothing. */
static int
referred(struct state *st, const char *run_id, int64_t *acked, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = ?1) "
	    "OR EXISTS (SELECT 1 FROM results WHERE run_id = ?1), "
	    "(SELECT acked_at FROM receipts WHERE run_id = ?1)", e);
	int rc, how = 0;

	if (!q)
		return -1;
	db_bind_text(q, 1, run_id);
	if ((rc = db_step(&st->db, q, e)) == 1) {
		how = sqlite3_column_int(q, 0) ? 2 : sqlite3_column_type(q, 1) != SQLITE_NULL ? 1 : 0;
		*acked = sqlite3_column_int64(q, 1);
	}
	db_done(&st->db, q);
	return rc < 0 ? -1 : how;
}

struct victim {
	char name[NAME_MAX + 1];
	int64_t acked, size;
};

static int
by_acked(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	return x->acked < y->acked ? -1 : x->acked > y->acked;
}

/* Scan out/: orphans go at once; acknowledged ones are listed in *v. */
static int
scan(struct state *st, DIR *dir, struct victim **v, size_t *nv, int64_t *total,
    int64_t *removed, struct ek_err *e)
{
	char run_id[RUN_ID_MAX + 1];
	size_t cap = 0;
	struct dirent *d;
	struct stat sb;
	int64_t acked;
	int how;

	while ((d = readdir(dir))) {
		if (!run_of(d->d_name, run_id, sizeof run_id) ||
		    fstatat(dirfd(dir), d->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode))
			continue;
		if ((how = referred(st, run_id, &acked, e)) < 0)
			return -1;
		if (how == 0 && unlinkat(dirfd(dir), d->d_name, 0) == 0) {
			(*removed)++;
			continue;
		}
		*total += sb.st_size;
		if (how != 1)
			continue;
		if (*nv == cap) {
			struct victim *nw = realloc(*v, (cap = cap ? cap * 2 : 64) * sizeof **v);
			if (!nw)
				return ek_fail(e, EK_OSERR, "out of memory");
			*v = nw;
		}
		snprintf((*v)[*nv].name, sizeof (*v)[*nv].name, "%s", d->d_name);
		(*v)[*nv].acked = acked;
		(*v)[(*nv)++].size = sb.st_size;
	}
	return 0;
}

int
output_collect(struct state *st, int64_t cap, int64_t *removed, struct ek_err *e)
{
	struct victim *v = NULL;
	size_t nv = 0, i;
	int64_t total = 0;
	int fd = out_dir(st, e), rc;
	DIR *dir;

	*removed = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (!(dir = fdopendir(fd))) {
		close(fd);
		return ek_fail(e, EK_IOERR, "out/: %s", strerror(errno));
	}
	rc = scan(st, dir, &v, &nv, &total, removed, e);
	if (rc == 0 && cap > 0 && total > cap) {
		qsort(v, nv, sizeof *v, by_acked);
		for (i = 0; i < nv && total > cap; i++)
			if (unlinkat(dirfd(dir), v[i].name, 0) == 0) {
				total -= v[i].size;
				(*removed)++;
			}
	}
	free(v);
	closedir(dir);
	return rc;
}

int64_t
output_quota_default(const struct state *st)
{
	struct statvfs vfs;
	int64_t size;

	if (fstatvfs(st->dir_fd, &vfs) < 0 || vfs.f_blocks == 0)
		return 0;
	size = (int64_t)vfs.f_blocks * (int64_t)vfs.f_frsize;
	return size / OUTPUT_QUOTA_FS_SHARE < OUTPUT_QUOTA_MAX ? size / OUTPUT_QUOTA_FS_SHARE :
	    OUTPUT_QUOTA_MAX;
}

enum { QUOTA_GRANT_MIN = 64 * 1024 };   /* the least measured out/ is paid for */

size_t
output_quota_take(struct output_quota *q, size_t want)
{
	struct output_usage u;
	struct ek_err e = { 0 };
	int64_t left;

	if (!q || q->quota <= 0 || want == 0)
		return want;
	if (q->granted < (int64_t)want) {
		/* what is left, granted a sixteenth at a time (but not less
		 * than QUOTA_GRANT_MIN): few measures far from the quota, a
		 * small overshoot near it.  out/ unreadable: nothing more */
		left = output_usage(q->st, &u, &e) < 0 ? 0 : q->quota - u.bytes;
		q->granted = left <= 0 ? 0 : left / 16 > QUOTA_GRANT_MIN ? left / 16 :
		    left < QUOTA_GRANT_MIN ? left : QUOTA_GRANT_MIN;
	}
	if (q->granted < (int64_t)want) {
		want = (size_t)q->granted;
		q->reached = true;
	}
	q->granted -= (int64_t)want;
	return want;
}

struct output_quota *
output_quota_for(const struct state *st, int64_t quota)
{
	static struct output_quota q;

	if (!q.st)
		q = (struct output_quota){ st, quota == OUTPUT_QUOTA_AUTO ? output_quota_default(st) :
			quota, 0, false };
	q.reached = false;
	return &q;
}

int
output_flag_truncated(const struct state *st, const char *run_id, const struct guest *g,
    char *msg, size_t n, struct ek_err *e)
{
	const struct output_quota *q = g->quota;
	const size_t *kept = g->kept, *dropped = g->dropped, max_output = g->max_output;
	static const char *const stream[2] = { "stdout", "stderr" };
	char name[RUN_ID_MAX + 32], why[96];
	size_t used = 0, len;
	ssize_t w;
	int fd, i;

	for (i = 0; i < 2; i++) {
		if (dropped[i] == 0 || used >= n)
			continue;
		if (kept[i] >= max_output)
			snprintf(why, sizeof why, "past --max-output (%zu bytes)", max_output);
		else if (q && q->reached)
			snprintf(why, sizeof why, "past the executor's output quota (%lld bytes)",
			    (long long)q->quota);
		else
			snprintf(why, sizeof why, "not written (no room on the disk, or no capture file)");
		used += (size_t)snprintf(msg + used, n - used, "%s%s: %zu byte%s kept, %zu dropped, %s",
		    used ? "; " : "", stream[i], kept[i], kept[i] == 1 ? "" : "s", dropped[i], why);
	}
	if (used == 0)
		return 0;
	len = strlen(msg);
	snprintf(name, sizeof name, "out/%s.%s", run_id, OUTPUT_TRUNCATED);
	if ((fd = state_open_file(st, name, O_WRONLY | O_CREAT | O_EXCL, 0600, e)) < 0)
		return -1;
	w = write(fd, msg, len);
	if (w == (ssize_t)len && write(fd, "\n", 1) != 1)
		w = -1;
	close(fd);
	if (w != (ssize_t)len)
		return ek_fail(e, EK_IOERR, "%s: %s", name, w < 0 ? strerror(errno) : "short write");
	return 1;
}
