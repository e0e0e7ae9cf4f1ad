/*
 * crash — named crash points at the commit points of a run's life, for the
 * loss drills.  crash_point(NAME) kills the process with SIGKILL when the
 * environment variable EXEC_CRASH_AT equals NAME, and stops it with
 * SIGSTOP when EXEC_PAUSE_AT does (a drill looks at the state a live
 * process left at that point, then resumes it); otherwise it does
 * nothing.  The names are listed in lifecycle.h and doc/recovery.md.
 */
#ifndef EK_CRASH_H
#define EK_CRASH_H

void crash_point(const char *name);

#endif
