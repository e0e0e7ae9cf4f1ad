/*
 * sha256 — SHA-256 (FIPS 180-4), one-shot, as lowercase hex.  The
 * reference dispatcher keeps credentials and result bodies by their hash.
 */
#ifndef EK_SHA256_H
#define EK_SHA256_H

#include <stddef.h>

/* Characters of a hex digest, without its NUL. */
#define SHA256_HEX_LEN 64

/* Write the SHA-256 of data[0..len) as 64 lowercase hex digits + NUL. */
void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1]);

#endif
