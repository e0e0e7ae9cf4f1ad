/* text — see text.h. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

/* The length of the valid UTF-8 character at p (1 to 4), with its code
 * point in *cp; 0 if p does not start one (a stray or overlong byte). */
static size_t
utf8_char(const unsigned char *p, uint32_t *cp)
{
	size_t n, i;
	uint32_t min;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if ((p[0] & 0xe0) == 0xc0) { n = 2; *cp = p[0] & 0x1f; min = 0x80; }
	else if ((p[0] & 0xf0) == 0xe0) { n = 3; *cp = p[0] & 0x0f; min = 0x800; }
	else if ((p[0] & 0xf8) == 0xf0) { n = 4; *cp = p[0] & 0x07; min = 0x10000; }
	else return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;   /* also stops at the NUL */
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return n;
}

/* Does cp reorder or redirect what a terminal shows?  The bidirectional
 * embeddings and overrides (U+202A to U+202E), isolates (U+2066 to
 * U+2069) and marks (U+200E, U+200F, U+061C) make text read otherwise
 * than it is stored ("Trojan Source"); the line and paragraph separators
 * (U+2028, U+2029) break a line where no newline is. */
static bool
reorders(uint32_t cp)
{
	return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
	    cp == 0x200e || cp == 0x200f || cp == 0x061c || cp == 0x2028 || cp == 0x2029;
}

char *
text_safe(char *dst, size_t n, const char *src)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t o = 0, len;
	uint32_t cp;

	if (n == 0)
		return dst;
	while (*p) {
		len = utf8_char(p, &cp);
		if (len == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || reorders(cp)) {
			if (o + 1 >= n)
				break;
			dst[o++] = '?';
			p += len ? len : 1;
			continue;
		}
		if (o + len >= n)
			break;
		while (len--)
			dst[o++] = (char)*p++;
	}
	dst[o] = '\0';
	return dst;
}

bool
text_is_id(const char *s, size_t min, size_t max)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-");

	return s[n] == '\0' && n >= min && n <= max;
}

bool
text_is_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

bool
text_is_xdigits(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdefABCDEF") == n;
}

int
text_word_index(const char *s, const char *const *words)
{
	int i;

	for (i = 0; words[i]; i++)
		if (strcmp(s, words[i]) == 0)
			return i;
	return -1;
}

bool
text_word_in(const char *s, const char *const *words)
{
	return text_word_index(s, words) >= 0;
}

char *
text_join(char *buf, size_t n, const char *const *words)
{
	size_t len = 0;
	int i;

	if (n)
		buf[0] = '\0';
	for (i = 0; words[i] && len < n; i++) {
		snprintf(buf + len, n - len, "%s%s", i == 0 ? "" : words[i + 1] ? ", " : " or ", words[i]);
		len += strlen(buf + len);
	}
	return buf;
}
