/* story — see story.h. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "jsonout.h"
#include "output.h"
#include "story.h"
#include "table.h"
#include "text.h"
#include "timefmt.h"

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

/* What out/RUN.truncated says (output.h: the run's output was cut), its
 * first line, or null. */
static json_t *
truncation(const struct state *st, const char *run_id)
{
	char name[300], text[512];
	ssize_t n;
	int fd;

	snprintf(name, sizeof name, "%s.%s", run_id, OUTPUT_TRUNCATED);
	if (st->out_fd < 0 || (fd = openat(st->out_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return json_null();
	n = read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 0)
		return json_null();
	text[n] = '\0';
	text[strcspn(text, "\n")] = '\0';
	utf8_clip(text, strlen(text));
	return json_string(text);
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
	s = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
	    "program", or_null(program), "args", or_null(args),
	    "accepted_at", or_null(first_of(show, acc, "accepted_at")),
	    "started_at", or_null(started), "finished_at", or_null(finished),
	    "duration_ms", duration(started, finished),
	    "outcome", or_null(first_of(show, end, "outcome")),
	    "exit_code", or_null(first_of(show, end, "exit_code")),
	    "attempts", or_null(first_of(show, end, "attempts")),
	    "record_id", or_null(first_of(show, rcpt, "record_id")),
	    "acked_at", or_null(first_of(show, rcpt, "acked_at")),
	    "stdout", output_path(st, run_id, "stdout"), "stderr", output_path(st, run_id, "stderr"),
	    "truncated", truncation(st, run_id));
	json_decref(sp);
	return s && json_object_set_new(show, "story", s) == 0 ? 0 : -1;
}

/* --- printing --------------------------------------------------------------- */

/* One stored row as an indented, headless table; "TITLE: none" without it. */
static int
print_section(FILE *f, const char *title, json_t *v)
{
	struct table *t;
	char label[80];
	const char *k;
	json_t *x;
	int rc = 0;

	if (!json_is_object(v)) {
		fprintf(f, "%s: none\n", title);
		return 0;
	}
	fprintf(f, "%s:\n", title);
	if (!(t = table_new()) || table_column(t, "key") < 0 || table_column(t, "value") < 0)
		rc = -1;
	json_object_foreach(v, k, x) {
		if (strcmp(k, "body") == 0)
			continue;   /* the exact bytes sent, for --json: the fields above say it */
		snprintf(label, sizeof label, "  %s:", k);
		if (rc == 0 && (table_row(t) < 0 || table_cell(t, label) < 0 || table_cell_json(t, k, x) < 0))
			rc = -1;
	}
	if (rc == 0)
		table_print(t, f, false);
	table_free(t);
	return rc;
}

/* An id as it is, or '' when empty (rows from before bindings existed). */
static void
quoted_id(json_t *v, char *buf, size_t n)
{
	const char *s = json_string_value(v);

	snprintf(buf, n, "%s", s && *s ? s : "''");
}

/* "incarnation=I session_id=S (session current)", or for another
 * session "(session STATUS; not current: quarantined)": the current
 * session's status says "current" already, once is enough. */
static void
binding_text(json_t *b, char *buf, size_t n)
{
	const char *status = json_string_value(json_object_get(b, "session_status"));
	char inc[256], sid[256];

	if (!json_is_object(b)) {
		snprintf(buf, n, "none stored");
		return;
	}
	quoted_id(json_object_get(b, "incarnation"), inc, sizeof inc);
	quoted_id(json_object_get(b, "session_id"), sid, sizeof sid);
	if (json_is_true(json_object_get(b, "current")))
		snprintf(buf, n, "incarnation=%s session_id=%s (session current)", inc, sid);
	else
		snprintf(buf, n, "incarnation=%s session_id=%s (session %s; not current: quarantined)",
		    inc, sid, status ? status : "never negotiated here");
}

/* "exited 0", or "-" before a result is chosen. */
static void
outcome_text(json_t *story, char *buf, size_t n)
{
	const char *out = json_string_value(json_object_get(story, "outcome"));

	if (!out)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%s %" JSON_INTEGER_FORMAT, out,
		    json_integer_value(json_object_get(story, "exit_code")));
}

/* "2 attempts, dispatcher record 7, acknowledged T", or what is missing. */
static void
delivery_text(json_t *o, json_t *story, char *buf, size_t n)
{
	json_t *res = json_object_get(o, "result");
	json_t *att = json_object_get(story, "attempts");
	const char *cause = json_string_value(json_object_get(res, "refused_cause"));
	char at[64], word[32];
	size_t used;

	if (!json_is_integer(att)) {
		snprintf(buf, n, "-");
		return;
	}
	snprintf(buf, n, "%s", cli_plural(word, sizeof word, json_integer_value(att), "attempt"));
	used = strlen(buf);
	if (json_is_integer(json_object_get(story, "record_id")))
		snprintf(buf + used, n - used, ", dispatcher record %" JSON_INTEGER_FORMAT
		    ", acknowledged %s", json_integer_value(json_object_get(story, "record_id")),
		    timefmt_when(at, sizeof at, json_integer_value(json_object_get(story, "acked_at"))));
	else if (json_is_true(json_object_get(res, "refused")))
		snprintf(buf + used, n - used, ", refused (%s)", cause ? cause : "no cause recorded");
	else
		snprintf(buf + used, n - used, ", not acknowledged yet");
}

/* A line of the story: label, then story field key as table_cell_json()
 * shows it (date-times for *_at, elapsed for *_ms, "-" for null). */
static int
fact(struct table *t, const char *label, json_t *story, const char *key)
{
	return table_row(t) < 0 || table_cell(t, label) < 0 ||
	    table_cell_json(t, key, json_object_get(story, key)) < 0 ? -1 : 0;
}

/* The story's lines: what ran, when, how it ended, how it travelled. */
static int
story_rows(struct table *t, json_t *o)
{
	json_t *s = json_object_get(o, "story");
	char binding[1024], outcome[256], delivery[512];

	binding_text(json_object_get(o, "binding"), binding, sizeof binding);
	outcome_text(s, outcome, sizeof outcome);
	delivery_text(o, s, delivery, sizeof delivery);
	return fact(t, "program:", s, "program") < 0 || fact(t, "args:", s, "args") < 0 ||
	    table_pair(t, "binding:", binding) < 0 ||
	    fact(t, "accepted:", s, "accepted_at") < 0 || fact(t, "started:", s, "started_at") < 0 ||
	    fact(t, "finished:", s, "finished_at") < 0 || fact(t, "duration:", s, "duration_ms") < 0 ||
	    table_pair(t, "outcome:", outcome) < 0 || table_pair(t, "delivery:", delivery) < 0 ||
	    fact(t, "stdout:", s, "stdout") < 0 || fact(t, "stderr:", s, "stderr") < 0 ||
	    (json_is_string(json_object_get(s, "truncated")) &&
	    fact(t, "truncated:", s, "truncated") < 0) ? -1 : 0;
}

int
story_print(FILE *f, json_t *o)
{
	struct table *t = table_new();
	char safe[512];
	int rc = !t || table_column(t, "field") < 0 || table_column(t, "value") < 0 ? -1 : 0;

	fprintf(f, "run %s: %s\n", json_string_value(json_object_get(o, "run_id")),
	    text_safe(safe, sizeof safe, json_string_value(json_object_get(o, "detail"))));
	if (rc == 0 && (rc = story_rows(t, o)) == 0)
		table_print(t, f, false);
	table_free(t);
	fputc('\n', f);
	return rc < 0 || print_section(f, "accepted", json_object_get(o, "accepted")) < 0 ||
	    print_section(f, "execution row", json_object_get(o, "run")) < 0 ||
	    print_section(f, "retained result", json_object_get(o, "result")) < 0 ||
	    print_section(f, "receipt", json_object_get(o, "receipt")) < 0 ? -1 : 0;
}
