/* crash — see crash.h. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"

void
crash_point(const char *name)
{
	const char *want = getenv("EXEC_CRASH_AT");

	if (want && strcmp(want, name) == 0)
		raise(SIGKILL);
	want = getenv("EXEC_PAUSE_AT");
	if (want && strcmp(want, name) == 0)
		raise(SIGSTOP);   /* a drill resumes it (SIGCONT) once it has looked */
}
