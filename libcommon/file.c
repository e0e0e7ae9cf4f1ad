/*
 * file — see file.h.
 *
 * The one writer of whole files outside the state directory: temporary
 * file, fsync, rename, fsync of the directory, in that order, so that the
 * rename is durable once it returns.
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

/* Create a fresh temporary file ".BASE.XXXXXX" in dfd; its fd, name in tmp. */
static int
create_temp(int dfd, const char *base, char *tmp, size_t n)
{
	char hex[17];
	int fd, tries;

	for (tries = 0; tries < 8; tries++) {
		if (random_hex(hex, sizeof hex, "", 8) < 0)
			return -1;
		if (snprintf(tmp, n, ".%s.%s", base, hex) >= (int)n) {
			errno = ENAMETOOLONG;
			return -1;
		}
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

int
file_write_atomic(const char *path, const void *data, size_t n, mode_t mode, struct ek_err *e)
{
	char dir[PATH_MAX], tmp[NAME_MAX + 1];
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	int fd, dfd, saved;

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
	if ((fd = create_temp(dfd, base, tmp, sizeof tmp)) < 0) {
		saved = errno;
		close(dfd);
		return ek_fail(e, EK_CANTCREAT, "'%s/.%s.*': %s", dir, base, strerror(saved));
	}
	if (fchmod(fd, mode) < 0 || write_all(fd, data, n) < 0 || fsync(fd) < 0) {
		saved = errno;
		close(fd);
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return ek_fail(e, EK_IOERR, "'%s/%s': %s", dir, tmp, strerror(saved));
	}
	/* The rename replaces whatever has the name, a link included: it is
	 * never written through.  It is durable once the directory is. */
	if (close(fd) < 0 || renameat(dfd, tmp, dfd, base) < 0 || fsync(dfd) < 0) {
		saved = errno;
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(saved));
	}
	close(dfd);
	return 0;
}
