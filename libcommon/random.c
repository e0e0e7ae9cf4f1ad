/* random — see random.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "random.h"

int
random_hex(char *out, size_t outsz, const char *prefix, size_t nbytes)
{
	unsigned char raw[32];
	size_t got = 0, i, pl = strlen(prefix);
	ssize_t n;

	if (nbytes > sizeof raw || pl + 2 * nbytes + 1 > outsz) {
		errno = EINVAL;
		return -1;
	}
	while (got < nbytes)
		if ((n = getrandom(raw + got, nbytes - got, 0)) > 0)
			got += (size_t)n;
		else if (n < 0 && errno != EINTR)
			return -1;
	memcpy(out, prefix, pl);
	for (i = 0; i < nbytes; i++)
		snprintf(out + pl + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof raw);
	return 0;
}
