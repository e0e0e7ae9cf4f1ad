/* reserve — see reserve.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reserve.h"

int
reserve_ensure(const struct state *st, struct ek_err *e)
{
	char path[PATH_MAX];
	struct stat sb;
	int fd, rc;

	if (state_path(st, RESERVE_FILE, path, sizeof path) < 0)
		return ek_fail(e, EK_SOFTWARE, "state directory path too long");
	if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= RESERVE_BYTES)
		return 0;
	unlink(path);   /* short, or not a plain file: make it anew */
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return ek_fail(e, EK_CANTCREAT, "'%s': %s", path, strerror(errno));
	/* allocated for real, so that deleting it frees blocks */
	if ((rc = posix_fallocate(fd, 0, RESERVE_BYTES)) != 0 || fsync(fd) < 0) {
		close(fd);
		unlink(path);
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(rc ? rc : errno));
	}
	close(fd);
	return 0;
}

bool
reserve_release(const struct state *st)
{
	char path[PATH_MAX];

	return state_path(st, RESERVE_FILE, path, sizeof path) == 0 && unlink(path) == 0;
}
