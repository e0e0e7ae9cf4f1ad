/*
 * supspawn — how exec-run start spawns a supervisor and hears whether it
 * started a run.  The supervisor is spawned sharing our memory until it
 * execs (contain_spawn, as a guest is), and answers on a ready pipe: '1'
 * when it committed the start marker of the run it was given, '2' and a
 * run id when it found that run taken by a chaining supervisor and
 * started the oldest due run instead, nothing when it started none.
 */
#ifndef EK_SUPSPAWN_H
#define EK_SUPSPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The supervisors a start spawns: the program (ourselves) and what each
 * is told on its command line (exec-run supervise's options; the state
 * directory is not among them: a guest reads its parent's, so the
 * supervisor finds it in EXEC_STATE_DIR).  in and log, when not -1,
 * become a detached supervisor's standard input, and its standard output
 * and error. */
struct supspawn {
	const char *path, *prog;
	long long budget_ms, grace_ms, max_output, quota, slots;   /* quota: -1 auto */
	const char *isolation, *guest_user;
	bool require_isolation, json, chain, detached;
	int in, log;
	const char *ended_fifo;   /* passed on: written to as the supervisor ends */
};

/* Spawn a supervisor of run_id in a session of its own, with ready, the
 * write end of the ready pipe, as the descriptor it answers on (every
 * other descriptor of ours is closed on its exec): its pid, or -1
 * (errno).  An exec that fails is said on standard error; it then starts
 * nothing. */
pid_t supspawn_start(const struct supspawn *s, const char *run_id, int ready);

/* Wait (at most 10 s) on the read end of the ready pipe, and close it:
 * true if the supervisor started a run, copied into id (run_id, or the
 * one it started instead). */
bool supspawn_await(int fd, const char *run_id, char *id, size_t n);

/* Whether path names a fifo (not through a link). */
bool supspawn_is_fifo(const char *path);

/* A supervisor ending: one line to the fifo at path (exec-run start
 * --ended-fifo), so that whoever reads it knows a slot is free.  Never
 * waits, and writes nothing to anything but a fifo with a reader. */
void supspawn_ended(const char *path);

/* A supervisor's run has ended: "o" (exited 0) or "f" (any other outcome)
 * on a line of its own to the same fifo, so that its reader can count the
 * runs without a log line each (exec-loop's summary).  As supspawn_ended. */
void supspawn_ran(const char *path, bool ok);

#endif
