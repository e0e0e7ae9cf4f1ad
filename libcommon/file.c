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

int
file_write_atomic(const char *path, const void *data, size_t n, mode_t mode, struct ek_err *e)
{
	char dir[PATH_MAX], tmp[PATH_MAX];
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	int fd, dfd, saved;

	if (!*base)
		return ek_fail(e, EK_USAGE, "'%s': names a directory, not a file", path);
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else   /* "/x" lives in "/" */
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (strlen(path) >= sizeof dir - 16 ||
	    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, base) >= (int)sizeof tmp)
		return ek_fail(e, EK_USAGE, "'%s': path too long", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		return ek_fail(e, EK_CANTCREAT, "'%s': %s", tmp, strerror(errno));
	if (fchmod(fd, mode) < 0 || write_all(fd, data, n) < 0 || fsync(fd) < 0) {
		saved = errno;
		close(fd);
		unlink(tmp);
		return ek_fail(e, EK_IOERR, "'%s': %s", tmp, strerror(saved));
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		saved = errno;
		unlink(tmp);
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(saved));
	}
	/* The rename itself is durable once the directory is. */
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(dfd) < 0) {
		saved = errno;
		if (dfd >= 0)
			close(dfd);
		return ek_fail(e, EK_IOERR, "'%s': %s", dir, strerror(saved));
	}
	close(dfd);
	return 0;
}
