/*
 * random — the one generator of random identifiers and secrets: session
 * ids, credentials, executor ids and keys, client tokens.
 */
#ifndef EK_RANDOM_H
#define EK_RANDOM_H

#include <stddef.h>

/* out = prefix followed by nbytes (at most 32) random bytes from
 * getrandom(2) as lower-case hex, NUL-terminated.  0, or -1 (errno set:
 * EINVAL when it does not fit in outsz).  The raw bytes are wiped: the
 * result may be a secret. */
int random_hex(char *out, size_t outsz, const char *prefix, size_t nbytes);

#endif
