/* err — see err.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "text.h"

int
ek_fail(struct ek_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}

int
ek_wrap(struct ek_err *e, int code, const char *fmt, ...)
{
	char earlier[sizeof e->msg];
	va_list ap;
	size_t n;

	if (!e)
		return -1;
	memcpy(earlier, e->msg, sizeof earlier);
	earlier[sizeof earlier - 1] = '\0';
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	if (earlier[0] && n < sizeof e->msg - 1)
		snprintf(e->msg + n, sizeof e->msg - n, ": %s", earlier);
	return -1;
}

void
ek_clear(struct ek_err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}

int
ek_report(const char *prog, const struct ek_err *e)
{
	int code = e->code ? e->code : EK_SOFTWARE;
	char safe[sizeof e->msg];

	/* A message may quote a dispatcher's or a guest's words (text.h). */
	fprintf(stderr, "%s: %s\n", prog, e->msg[0] ? text_safe(safe, sizeof safe, e->msg) :
	    "internal error");
	return code;
}
