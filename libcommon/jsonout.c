/* jsonout — see jsonout.h. */
#include "jsonout.h"

int
json_emit(FILE *f, json_t *obj)
{
	int rc;

	if (!obj)
		return -1;
	rc = json_dumpf(obj, f, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (rc == 0 && fputc('\n', f) == EOF)
		rc = -1;
	return rc;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t
utf8_seq(const unsigned char *p)
{
	size_t n, i;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0) { n = 2; cp = p[0] & 0x1f; }
	else if ((p[0] & 0xf0) == 0xe0) { n = 3; cp = p[0] & 0x0f; }
	else if ((p[0] & 0xf8) == 0xf0) { n = 4; cp = p[0] & 0x07; }
	else return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

size_t
utf8_clip(char *s, size_t max)
{
	unsigned char *p = (unsigned char *)s;
	size_t i = 0, n;

	while (p[i]) {
		n = utf8_seq(p + i);
		if (n == 0) {
			p[i] = '?';
			n = 1;
		}
		if (i + n > max)
			break;
		i += n;
	}
	p[i] = '\0';
	return i;
}
