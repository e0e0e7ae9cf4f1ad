/* story — see story.h. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "story.h"

/* The first of the rows that holds key (not null), or NULL. */
static json_t *
first_of(json_t *show, const char *const *rows, const char *key)
{
	json_t *v;

	for (; *rows; rows++)
		if ((v = json_object_get(json_object_get(show, *rows), key)) && !json_is_null(v))
			return v;
	return NULL;
}

static json_t *
or_null(json_t *v)
{
	return v ? json_incref(v) : json_null();
}

/* out/RUN.SUFFIX as a path when that file is there, else null. */
static json_t *
output_path(const struct state *st, const char *run_id, const char *suffix)
{
	char name[300], path[PATH_MAX];
	struct stat sb;

	snprintf(name, sizeof name, "%s.%s", run_id, suffix);
	if (st->out_fd < 0 || fstatat(st->out_fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode))
		return json_null();
	snprintf(name, sizeof name, "out/%s.%s", run_id, suffix);
	return state_path(st, name, path, sizeof path) < 0 ? json_null() : json_string(path);
}

static json_t *
duration(json_t *from, json_t *to)
{
	if (!json_is_integer(from) || !json_is_integer(to))
		return json_null();
	return json_integer(json_integer_value(to) - json_integer_value(from));
}

int
story_add(const struct state *st, json_t *show, const char *spec)
{
	static const char *const what[] = { "run", "result", NULL };
	static const char *const start[] = { "run", "result", "receipt", NULL };
	static const char *const end[] = { "result", "receipt", NULL };
	static const char *const acc[] = { "accepted", NULL };
	static const char *const rcpt[] = { "receipt", NULL };
	const char *run_id = json_string_value(json_object_get(show, "run_id"));
	json_t *sp = spec ? json_loads(spec, 0, NULL) : NULL, *s;
	json_t *program = first_of(show, what, "program"), *args = first_of(show, what, "args");
	json_t *started = first_of(show, start, "started_at");
	json_t *finished = first_of(show, end, "chosen_at");

	if (!program)
		program = json_object_get(sp, "program");
	if (!args)
		args = json_object_get(sp, "args");
	s = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
	    "program", or_null(program), "args", or_null(args),
	    "accepted_at", or_null(first_of(show, acc, "accepted_at")),
	    "started_at", or_null(started), "finished_at", or_null(finished),
	    "duration_ms", duration(started, finished),
	    "outcome", or_null(first_of(show, end, "outcome")),
	    "exit_code", or_null(first_of(show, end, "exit_code")),
	    "attempts", or_null(first_of(show, end, "attempts")),
	    "record_id", or_null(first_of(show, rcpt, "record_id")),
	    "acked_at", or_null(first_of(show, rcpt, "acked_at")),
	    "stdout", output_path(st, run_id, "stdout"), "stderr", output_path(st, run_id, "stderr"));
	json_decref(sp);
	return s && json_object_set_new(show, "story", s) == 0 ? 0 : -1;
}
