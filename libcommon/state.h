/*
 * state — the state directory: one directory per executor, mode 0700,
 * holding state.db (mode 0600) and out/ (bounded guest output).
 *
 * state_open() is the gate every tool passes: it refuses a directory that
 * others may read or write, a file that is not an execkit database, a
 * damaged database (reported, never repaired by deleting rows) and state
 * written by another package version (EK_VERSION, naming both versions).
 *
 * No file in the state directory is opened through a symbolic link (SPEC
 * 3, doc/security.md): the directory and its out/ are opened once, without
 * following a link, and every file in them is opened relative to those
 * descriptors with O_NOFOLLOW.  A new file is created with O_EXCL; an
 * existing one is used only when it is a regular file of ours with a single
 * link when it is written to, so neither a planted symbolic link nor a
 * hard link to state.db can turn a write into a write to another file.  A file that is replaced
 * whole is written to a new temporary file and renamed over the old name:
 * a rename replaces a planted link, it never writes through it.
 */
#ifndef EK_STATE_H
#define EK_STATE_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "db.h"
#include "err.h"

#define EK_APPLICATION_ID 0x45584b54   /* "EXKT" */

enum { STATE_CREATE = 1 };

struct state {
	char dir[PATH_MAX];
	char dbpath[PATH_MAX];
	struct db db;
	char executor_id[40];
	mode_t umask_orig;   /* the caller's umask, restored for guests */
	int dir_fd;          /* the state directory, opened without following a link */
	int out_fd;          /* its out/, or -1 if it has none */
};

/* Open (and with STATE_CREATE, create) the state directory dir. */
int state_open(struct state *st, const char *dir, int flags, struct ek_err *e);

/* state_open(), its reads waiting at most busy_ms for a process that holds
 * the database exclusively (EK_TEMPFAIL after that), where state_open()
 * waits DB_BUSY_TIMEOUT_MS. */
int state_open_within(struct state *st, const char *dir, int flags, int64_t busy_ms, struct ek_err *e);
void state_close(struct state *st);

/* path = dir/name; -1 if it does not fit.  For messages and for what a
 * child process is told: open files with state_open_file(). */
int state_path(const struct state *st, const char *name, char *buf, size_t n);

/* Open NAME ("FILE" in the state directory, or "out/FILE") with flags as
 * for open(2), never through a symbolic link; close-on-exec.  O_CREAT with
 * O_EXCL makes a new file; otherwise an existing file must be a regular
 * file of ours, opened for writing only if it has one link (so never
 * through a hard link to another file), and O_TRUNC truncates it only once
 * that is checked.  The descriptor, or -1 (e names the file and the cause:
 * EK_CANTCREAT with O_CREAT, else EK_IOERR). */
int state_open_file(const struct state *st, const char *name, int flags, mode_t mode,
    struct ek_err *e);

/* NAME is free: a new file could be made there now (nothing, not even a
 * link, has that name).  0, or -1 with e filled as state_open_file(NAME,
 * O_CREAT | O_EXCL) would fill it.  A check without a create: a file
 * made later, only when it is needed, still fails the same way early. */
int state_check_free(const struct state *st, const char *name, struct ek_err *e);

/* Open directory NAME ("out/DIR") for openat(), never through a link:
 * the descriptor, or -1 (errno set; e filled unless errno is ENOENT). */
int state_open_dir(const struct state *st, const char *name, struct ek_err *e);

/* Remove NAME (as for state_open_file) itself, never what a link names:
 * 0 (also when it did not exist), or -1 (errno set). */
int state_unlink(const struct state *st, const char *name);

/* Replace file BASE in directory DIRFD (DIRPATH names it in messages) with
 * BODY and a newline, atomically, through file_replace_at() (file.h) with
 * the temporary file BASE.tmp: durable syncs the file and the directory.
 * A file that need not outlive a power loss (a limits file: reconstructible,
 * and its guest does not outlive one either) is not durable; a kill -9 of
 * the writer leaves it whole either way.  0, or -1 (e filled). */
int state_write_atomic_at(int dirfd, const char *dirpath, const char *base, const char *body,
    mode_t mode, bool durable, struct ek_err *e);

/* Replace BASE in directory TO_FD (TO_PATH names it in messages) with a
 * second link to file BASE of directory FROM_FD, atomically, through
 * file_link_at() (file.h) with the temporary link BASE.tmp; not durable,
 * as the limits files it serves are not.  The same file under two names
 * costs one inode, not two (on ext4 without a journal, a new inode is
 * what a new file costs most).  The caller keeps FROM_FD's BASE from
 * being replaced meanwhile.  0, or -1 (errno set, e filled; errno ENOENT:
 * TO_FD was removed, which a caller may take for success). */
int state_link_atomic_at(int from_fd, int to_fd, const char *to_path, const char *base,
    struct ek_err *e);

/* The executor's key (schema step 9): 64 hex digits and a NUL into out
 * (n > EXECUTOR_KEY_HEX, protocol.h).  A credential: what reads it sends it to the
 * dispatcher at negotiation and wipes it; nothing prints it.  0, or -1
 * (EK_DATAERR if the state has none). */
int state_executor_key(struct state *st, char *out, size_t n, struct ek_err *e);

/* Remove the state directory dir that this process made and that nothing
 * used yet (a first `exec-session open` whose dispatcher could not be
 * reached): its database files, out/ (which must be empty) and dir itself.
 * 0; -1 when something else is in it (then it is left as it is). */
int state_unmake(const char *dir);

#endif
