/*
 * file — whole files outside the state directory (the metrics text, the
 * dispatcher's port file), replaced so that a reader never sees a part.
 * Files inside the state directory go through state.h
 * (state_write_atomic_at, state_link_atomic_at), which use the same
 * file_replace_at() and file_link_at(): one rename, one guarantee.
 */
#ifndef EK_FILE_H
#define EK_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Replace path with the n bytes of data atomically: write a temporary file
 * beside it (".NAME.XXXXXX": node_exporter's textfile collector reads only
 * *.prom), give it mode (exactly, whatever the umask), fsync it, rename it
 * over path, fsync the directory.  Readers see the old file or the new
 * one, never a part; once this returns 0 the new one survives a crash.
 * 0, or -1 (e filled): EK_USAGE when path names a directory or is too
 * long, EK_CANTCREAT when the temporary file cannot be created, EK_IOERR
 * when a write, the rename or the directory's fsync fails (a temporary
 * file is never left behind).  No link is followed on the way (a guest
 * that can write in a directory above path cannot redirect the write) but
 * root's own in directories only root can write (/var/run -> /run);
 * a link at path itself is replaced, never written through. */
int file_write_atomic(const char *path, const void *data, size_t n, mode_t mode, struct ek_err *e);

/* The one replacement of a whole file, which every atomic write goes
 * through (file_write_atomic, state_write_atomic_at; file_link_at for a
 * second name): write the n bytes of
 * data to the new temporary file tmp in directory dirfd (O_EXCL, never
 * through a link; one a crashed writer left under that name is removed
 * first), give it mode, rename it over base.  durable: the file is synced
 * before the rename and the directory after it, so the new content
 * survives a power loss once this returns 0; without it, a kill -9 still
 * leaves the old file or the new one whole.  dirpath names dirfd in
 * messages.  0, or -1 (e filled; the temporary file is removed). */
int file_replace_at(int dirfd, const char *dirpath, const char *tmp, const char *base,
    const void *data, size_t n, mode_t mode, bool durable, struct ek_err *e);

/* file_replace_at() with a second link to file name of directory from_fd
 * in place of new bytes (one inode under two names; its mode is the
 * file's): link it as tmp in dirfd (one left there is removed first),
 * rename that over base, sync the directory when durable.  The caller
 * keeps from_fd's name from being replaced meanwhile.  0, or -1 (errno
 * set, e filled; the temporary link is removed). */
int file_link_at(int from_fd, const char *name, int dirfd, const char *dirpath, const char *tmp,
    const char *base, bool durable, struct ek_err *e);

#endif
