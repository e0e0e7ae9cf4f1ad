/*
 * util — the dispatcher's small helpers: the check on run ids that
 * several endpoints make, and the log line on stderr.
 */
#include <stdarg.h>
#include <stdio.h>

#include "protocol.h"
#include "text.h"

#include "util.h"

bool
is_run_id(const char *s)
{
	return text_is_id(s, 1, RUN_ID_MAX);
}

static void
vsay(const char *fmt, va_list ap)
{
	char line[1200], safe[sizeof line];

	vsnprintf(line, sizeof line, fmt, ap);
	/* Paths and details come from any client that can connect (text.h). */
	fprintf(stderr, "%s: %s\n", PROG, text_safe(safe, sizeof safe, line));
}

void
say(const char *fmt, ...)
{
	va_list ap;

	if (dsp.cfg.quiet)
		return;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

void
warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}
