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

/* A supervisor to spawn.  argv names ready, the write end of the ready
 * pipe, which it inherits (every other descriptor of ours is closed on
 * its exec); in and log, when not -1, become its standard input, and its
 * standard output and error (a detached supervisor's). */
struct supspawn {
	const char *path;
	char *const *argv;
	int ready, in, log;
};

/* Spawn it in a session of its own: its pid, or -1 (errno).  An exec that
 * fails is said on standard error, after prog; it then starts nothing. */
pid_t supspawn_start(const struct supspawn *s, const char *prog);

/* Wait (at most 10 s) on the read end of the ready pipe, and close it:
 * true if the supervisor started a run, copied into id (run_id, or the
 * one it started instead). */
bool supspawn_await(int fd, const char *run_id, char *id, size_t n);

#endif
