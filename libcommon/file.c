/*
 * file — see file.h.
 *
 * The one writer of whole files, in the state directory or outside it:
 * a temporary file (new bytes, or a second link to a file), fsync, rename,
 * fsync of the directory, in that order, so that the rename is durable
 * once it returns; put_in_place() is the one rename every replacement ends
 * in.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "random.h"

/* Write all of buf to fd; 0 or -1 (errno set). */
static int
write_all(int fd, const char *buf, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, buf, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A directory component that may be followed although it is a link: one
 * that root made in a directory only root can write (the system's own, such
 * as /var/run -> /run).  Anyone else's link, a guest's included, is not. */
static int
trusted_link(int parent, const char *name)
{
	struct stat ls, ps;

	return fstatat(parent, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ls.st_mode) &&
	    ls.st_uid == 0 && fstat(parent, &ps) == 0 && ps.st_uid == 0 && !(ps.st_mode & 022);
}

/* Open dir (for writing in it) component by component, following no link
 * but trusted_link ones: a descriptor, or -1 (errno set; ELOOP for a link). */
static int
open_dir_nofollow(const char *dir)
{
	char buf[PATH_MAX], *p, *next;
	int fd, sub;

	if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = open(buf[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	for (p = buf; p && *p; p = next) {
		if ((next = strchr(p, '/')))
			*next++ = '\0';
		if (!*p || strcmp(p, ".") == 0)
			continue;
		sub = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 && (errno == ELOOP || errno == ENOTDIR) && trusted_link(fd, p))
			sub = openat(fd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		if (sub < 0)
			return -1;
		fd = sub;
	}
	return fd;
}

/* A fresh random temporary name ".BASE.XXXXXXXXXXXXXXXX" into tmp. */
static int
temp_name(const char *base, char *tmp, size_t n)
{
	char hex[17];

	if (random_hex(hex, sizeof hex, "", 8) < 0)
		return -1;
	if (snprintf(tmp, n, ".%s.%s", base, hex) >= (int)n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Put the temporary file tmp of dirfd in place of base: rename it over
 * base and, durable, sync the directory.  The rename replaces whatever has
 * the name, a link included: it is never written through.  On failure tmp
 * is removed.  0, or -1 (errno set, e filled). */
static int
put_in_place(int dirfd, const char *dirpath, const char *tmp, const char *base, bool durable,
    struct ek_err *e)
{
	int err;

	if (renameat(dirfd, tmp, dirfd, base) < 0) {
		err = errno;
		unlinkat(dirfd, tmp, 0);
		errno = err;
		return ek_fail(e, EK_IOERR, "rename to '%s/%s': %s", dirpath, base, strerror(err));
	}
	if (durable && fsync(dirfd) < 0) {
		err = errno;
		ek_fail(e, EK_IOERR, "'%s': fsync: %s", dirpath, strerror(err));
		errno = err;
		return -1;
	}
	return 0;
}

int
file_replace_at(int dirfd, const char *dirpath, const char *tmp, const char *base,
    const void *data, size_t n, mode_t mode, bool durable, struct ek_err *e)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fd, err = 0;

	/* A temporary file a crashed writer left (or anything planted under its
	 * name) is removed, never written through. */
	if ((fd = openat(dirfd, tmp, flags, 0600)) < 0 && errno == EEXIST && unlinkat(dirfd, tmp, 0) == 0)
		fd = openat(dirfd, tmp, flags, 0600);
	if (fd < 0)
		return ek_fail(e, EK_CANTCREAT, "'%s/%s': %s", dirpath, tmp, strerror(errno));
	if (fchmod(fd, mode) < 0 || write_all(fd, data, n) < 0 || (durable && fsync(fd) < 0))
		err = errno ? errno : EIO;
	if (close(fd) < 0 && !err)
		err = errno;
	if (err) {
		unlinkat(dirfd, tmp, 0);
		return ek_fail(e, EK_IOERR, "'%s/%s': %s", dirpath, tmp, strerror(err));
	}
	return put_in_place(dirfd, dirpath, tmp, base, durable, e);
}

int
file_link_at(int from_fd, const char *name, int dirfd, const char *dirpath, const char *tmp,
    const char *base, bool durable, struct ek_err *e)
{
	int rc = linkat(from_fd, name, dirfd, tmp, 0), err;

	/* As above: a temporary name a crashed writer left is removed first. */
	if (rc < 0 && errno == EEXIST && unlinkat(dirfd, tmp, 0) == 0)
		rc = linkat(from_fd, name, dirfd, tmp, 0);
	if (rc < 0) {
		err = errno;
		ek_fail(e, EK_IOERR, "link '%s/%s': %s", dirpath, tmp, strerror(err));
		errno = err;
		return -1;
	}
	/* The file is synced already or not at all: a second name adds no
	 * data, only the directory entry put_in_place() makes durable. */
	return put_in_place(dirfd, dirpath, tmp, base, durable, e);
}

int
file_write_atomic(const char *path, const void *data, size_t n, mode_t mode, struct ek_err *e)
{
	char dir[PATH_MAX], tmp[NAME_MAX + 1];
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	int dfd, rc;

	if (!*base)
		return ek_fail(e, EK_USAGE, "'%s': names a directory, not a file", path);
	if (strlen(path) >= sizeof dir)
		return ek_fail(e, EK_USAGE, "'%s': path too long", path);
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else   /* "/x" lives in "/" */
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if ((dfd = open_dir_nofollow(dir)) < 0)
		return ek_fail(e, EK_CANTCREAT, "'%s': %s", dir, errno == ELOOP || errno == ENOTDIR ?
		    "a directory on the way is a symbolic link that is not root's (not followed), "
		    "or not a directory" : strerror(errno));
	if (temp_name(base, tmp, sizeof tmp) < 0) {
		close(dfd);
		return ek_fail(e, EK_CANTCREAT, "'%s/.%s.*': %s", dir, base, strerror(errno));
	}
	rc = file_replace_at(dfd, dir, tmp, base, data, n, mode, true, e);
	close(dfd);
	return rc;
}
