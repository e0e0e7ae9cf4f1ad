/*
 * util — the dispatcher's small helpers: the checks on ids
 * that several endpoints make, and the log line on stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dispatcher.h"
#include "text.h"

bool
is_run_id(const char *s)
{
	return text_is_id(s, 1, RUN_ID_MAX);
}

bool
is_admin_path(const char *path)
{
	return strncmp(path, PROTO_ADMIN, strlen(PROTO_ADMIN)) == 0;
}

const char *
session_own(const char *path)
{
	size_t n = strlen(PROTO_SESSIONS);

	return strncmp(path, PROTO_SESSIONS, n) == 0 && path[n] == '/' ? path + n : NULL;
}

void
say(const char *fmt, ...)
{
	va_list ap;
	char line[1200], safe[sizeof line];

	if (dsp.cfg.quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* Paths and details come from any client that can connect (text.h). */
	fprintf(stderr, "%s: %s\n", PROG, text_safe(safe, sizeof safe, line));
}
