/*
 * exec-inspect summary — the counts of every population, and what an
 * operator asks first beside them: which session is current, at which
 * dispatcher, when it last heartbeated (and how long ago), and whether an
 * exec-loop is running on this state directory.
 *
 * A loop is alive when its scratch directory, STATE/loop.PID.XXXXXX
 * (cmd/exec-loop makes it, removes it on exit, and the next loop removes
 * those of loops killed outright), names a process that lives and runs
 * exec-loop: a pid alone could be reused by any other program.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "exec-inspect.h"
#include "inspect.h"
#include "jsonout.h"
#include "session.h"
#include "summary.h"
#include "text.h"
#include "timefmt.h"

/* Does pid run exec-loop (its command line names the script)? */
static bool
runs_exec_loop(pid_t pid)
{
	char path[64], cmd[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, cmd, sizeof cmd - 1);
	close(fd);
	if (n <= 0)
		return false;
	cmd[n] = '\0';
	for (char *p = cmd; p < cmd + n; p += strlen(p) + 1) {   /* argv[0], the shell, or argv[1] */
		const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;

		if (strcmp(base, "exec-loop") == 0)
			return true;
		if (p != cmd)
			break;
	}
	return false;
}

/* The pid of a live exec-loop on the state directory dir, or 0. */
static pid_t
loop_pid(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *ent;
	pid_t found = 0;
	long pid;
	char *end;

	if (!d)
		return 0;
	while (!found && (ent = readdir(d))) {
		if (strncmp(ent->d_name, "loop.", 5) != 0)
			continue;
		pid = strtol(ent->d_name + 5, &end, 10);
		if (end != ent->d_name + 5 && *end == '.' && pid > 0 && runs_exec_loop((pid_t)pid))
			found = (pid_t)pid;
	}
	closedir(d);
	return found;
}

/* The current session and the loop, as the summary record's "session"
 * (null: none) and "loop" members of j. */
static int
add_liveness(json_t *j, const struct session *s, bool have, pid_t loop, int64_t now)
{
	json_t *sj = json_null();

	if (have)
		sj = json_pack("{s:s, s:s, s:s, s:o, s:o}", "session_id", s->b.session_id,
		    "incarnation", s->b.incarnation, "dispatcher", s->dispatcher,
		    "last_beat_at", s->last_beat_at ? json_integer(s->last_beat_at) : json_null(),
		    "beat_age_ms", s->last_beat_at ? json_integer(now - s->last_beat_at) : json_null());
	return json_object_set_new(j, "session", sj) < 0 ||
	    json_object_set_new(j, "loop", json_pack("{s:b, s:o}", "alive", loop > 0, "pid",
	    loop > 0 ? json_integer(loop) : json_null())) < 0 ? -1 : 0;
}

/* The same for a human, before the counts. */
static void
print_liveness(const struct session *s, bool have, pid_t loop, int64_t now)
{
	char safe[1024], when[64], age[32];

	if (have) {
		printf("session: %s (incarnation %s)\n", s->b.session_id, s->b.incarnation);
		printf("dispatcher: %s\n", text_safe(safe, sizeof safe, s->dispatcher));
		if (s->last_beat_at)
			printf("last heartbeat: %s, %s ago\n", timefmt_when(when, sizeof when, s->last_beat_at),
			    timefmt_elapsed(age, sizeof age, now - s->last_beat_at));
		else
			printf("last heartbeat: none yet\n");
	} else {
		printf("session: none current (exec-session open)\n");
	}
	if (loop > 0)
		printf("loop: running (exec-loop, pid %ld)\n", (long)loop);
	else
		printf("loop: not running\n");
}

int
cmd_summary(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct inspect_figures f;
	const struct summary *s = &f.s;
	struct session cur;
	char w[48], when[64], age[32];
	pid_t loop;
	json_t *j;
	int have;

	if (inspect_figures(st, &f, e) < 0 || (have = session_current(st, &cur, e)) < 0)
		return -1;
	loop = loop_pid(st->dir);
	if (o->json) {
		if (!(j = summary_json(s)) ||
		    json_object_set_new(j, "unreconciled_attempts", json_integer(f.s.attempts)) < 0 ||
		    json_object_set_new(j, "output", json_pack("{s:I, s:I}", "files",
		    (json_int_t)f.output_files, "bytes", (json_int_t)f.output_bytes)) < 0 ||
		    add_liveness(j, &cur, have > 0, loop, f.read_at_ms) < 0) {
			json_decref(j);
			return ek_fail(e, EK_OSERR, "out of memory");
		}
		json_emit(stdout, j);
		return 0;
	}
	print_liveness(&cur, have > 0, loop, f.read_at_ms);
	summary_print(stdout, s);
	printf("output: %s, ", cli_plural(w, sizeof w, f.output_files, "file"));
	printf("%s\n", cli_plural(w, sizeof w, f.output_bytes, "byte"));
	if (s->oldest_unreconciled_ms)
		printf("oldest unreconciled result: chosen %s, %s ago\n",
		    timefmt_when(when, sizeof when, s->oldest_unreconciled_ms),
		    timefmt_elapsed(age, sizeof age, f.read_at_ms - s->oldest_unreconciled_ms));
	return 0;
}
