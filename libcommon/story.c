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

/* The names of the spec's environment, its values left out: they may
 * hold secrets, and the story is for anyone who may read the state. */
static json_t *
env_names(json_t *env)
{
	json_t *names, *v;
	const char *k;

	if (!json_is_object(env))
		return json_null();
	if (!(names = json_array()))
		return NULL;
	json_object_foreach(env, k, v)
		json_array_append_new(names, json_string(k));
	return names;
}

/* Set key in s to v (a new reference); -1 when out of memory. */
static int
put(json_t *s, const char *key, json_t *v)
{
	return v && json_object_set_new(s, key, v) == 0 ? 0 : -1;
}

/* A fact from the first of rows that holds it, else from the spec. */
static json_t *
fact_or_spec(json_t *show, const char *const *rows, json_t *spec, const char *key)
{
	json_t *v = first_of(show, rows, key);

	return or_null(v ? v : json_object_get(spec, key));
}

/* The environment's names: from the execution row, else the spec, else
 * the run record, which keeps the names alone (schema step 17). */
static json_t *
story_env(json_t *show, json_t *sp)
{
	json_t *env = json_object_get(json_object_get(show, "run"), "env");
	json_t *kept = json_object_get(json_object_get(show, "record"), "env_names");

	if (!json_is_object(env))
		env = json_object_get(sp, "env");
	if (!json_is_object(env) && json_is_array(kept))
		return json_incref(kept);
	return env_names(env);
}

/* What ran and how it was asked to run: program, args, env (names only),
 * cwd, timeout; from the execution row, else the result, else the spec,
 * else the record that replaced the spec of a run settled for good. */
static int
story_spec(json_t *s, json_t *show, json_t *sp)
{
	static const char *const what[] = { "run", "result", "record", NULL };
	static const char *const run[] = { "run", "record", NULL };

	return put(s, "program", fact_or_spec(show, what, sp, "program")) < 0 ||
	    put(s, "args", fact_or_spec(show, what, sp, "args")) < 0 ||
	    put(s, "env", story_env(show, sp)) < 0 ||
	    put(s, "cwd", fact_or_spec(show, run, sp, "cwd")) < 0 ||
	    put(s, "timeout_ms", fact_or_spec(show, run, sp, "timeout_ms")) < 0 ? -1 : 0;
}

/* When, how it ended and why, how its result travelled, and what is left
 * once housekeeping removed the rows (the run record, schema steps 12 and 15)
 * or a stop handed it back. */
static int
story_facts(const struct state *st, json_t *s, json_t *show)
{
	static const char *const acc[] = { "accepted", NULL };
	static const char *const start[] = { "run", "result", "receipt", "record", NULL };
	static const char *const end[] = { "result", "receipt", "record", NULL };
	static const char *const sent[] = { "result", "receipt", NULL };
	static const char *const acked[] = { "receipt", "record", NULL };
	static const char *const rcpt[] = { "receipt", NULL };
	const char *run_id = json_string_value(json_object_get(show, "run_id"));
	json_t *started = first_of(show, start, "started_at");
	json_t *finished = first_of(show, end, "chosen_at");
	json_t *rec = json_object_get(show, "record"), *hb = json_object_get(show, "handback");

	return put(s, "accepted_at", or_null(first_of(show, acc, "accepted_at"))) < 0 ||
	    put(s, "started_at", or_null(started)) < 0 ||
	    put(s, "finished_at", or_null(finished)) < 0 ||
	    put(s, "duration_ms", duration(started, finished)) < 0 ||
	    put(s, "outcome", or_null(first_of(show, end, "outcome"))) < 0 ||
	    put(s, "exit_code", or_null(first_of(show, end, "exit_code"))) < 0 ||
	    put(s, "message", or_null(first_of(show, end, "message"))) < 0 ||
	    put(s, "stdout_dropped", or_null(first_of(show, end, "stdout_dropped"))) < 0 ||
	    put(s, "stderr_dropped", or_null(first_of(show, end, "stderr_dropped"))) < 0 ||
	    put(s, "attempts", or_null(first_of(show, sent, "attempts"))) < 0 ||
	    put(s, "record_id", or_null(first_of(show, rcpt, "record_id"))) < 0 ||
	    put(s, "acked_at", or_null(first_of(show, acked, "acked_at"))) < 0 ||
	    put(s, "evidence", or_null(json_object_get(rec, "evidence"))) < 0 ||
	    put(s, "evidence_at", or_null(json_object_get(rec, "recorded_at"))) < 0 ||
	    put(s, "handed_back_at", or_null(json_object_get(hb, "acked_at"))) < 0 ||
	    put(s, "requeued_as", or_null(json_object_get(hb, "requeued_as"))) < 0 ||
	    put(s, "stdout", output_path(st, run_id, "stdout")) < 0 ||
	    put(s, "stderr", output_path(st, run_id, "stderr")) < 0 ||
	    put(s, "truncated", truncation(st, run_id)) < 0 ? -1 : 0;
}

int
story_add(const struct state *st, json_t *show, const char *spec)
{
	json_t *sp = spec ? json_loads(spec, 0, NULL) : NULL, *s = json_object();
	int rc = s && story_spec(s, show, sp) == 0 && story_facts(st, s, show) == 0 ? 0 : -1;

	json_decref(sp);
	if (rc == 0)
		return json_object_set_new(show, "story", s) == 0 ? 0 : -1;
	json_decref(s);
	return -1;
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
 * session "(session STATUS; not current)", with what that means for the
 * run when it still waits: quarantined, or handed back.  The current
 * session's status says "current" already, once is enough. */
static void
binding_text(json_t *o, char *buf, size_t n)
{
	json_t *b = json_object_get(o, "binding");
	const char *status = json_string_value(json_object_get(b, "session_status"));
	const char *verdict = json_string_value(json_object_get(o, "verdict"));
	const char *held = "";
	char inc[256], sid[256];

	if (!json_is_object(b)) {
		snprintf(buf, n, "none stored");
		return;
	}
	quoted_id(json_object_get(b, "incarnation"), inc, sizeof inc);
	quoted_id(json_object_get(b, "session_id"), sid, sizeof sid);
	if (verdict && strcmp(verdict, "handed_back") == 0)
		held = ": handed back";
	else if (verdict && (strcmp(verdict, "queued") == 0 || strcmp(verdict, "started") == 0))
		held = ": quarantined";
	if (json_is_true(json_object_get(b, "current")))
		snprintf(buf, n, "incarnation=%s session_id=%s (session current)", inc, sid);
	else
		snprintf(buf, n, "incarnation=%s session_id=%s (session %s; not current%s)",
		    inc, sid, status ? status : "never negotiated here", held);
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

/* "2 attempts, dispatcher record 7, acknowledged T", or what is missing;
 * once the receipt is pruned, "acknowledged T" alone (the run record). */
static void
delivery_text(json_t *o, json_t *story, char *buf, size_t n)
{
	json_t *res = json_object_get(o, "result");
	json_t *att = json_object_get(story, "attempts"), *acked = json_object_get(story, "acked_at");
	const char *cause = json_string_value(json_object_get(res, "refused_cause"));
	char at[64], word[32];
	size_t used;

	if (!json_is_integer(att)) {
		if (json_is_integer(acked))
			snprintf(buf, n, "acknowledged %s", timefmt_when(at, sizeof at,
			    json_integer_value(acked)));
		else
			snprintf(buf, n, "%s", json_is_object(json_object_get(o, "record")) ?
			    "never acknowledged" : "-");
		return;
	}
	snprintf(buf, n, "%s", cli_plural(word, sizeof word, json_integer_value(att), "attempt"));
	used = strlen(buf);
	if (json_is_integer(json_object_get(story, "record_id")))
		snprintf(buf + used, n - used, ", dispatcher record %" JSON_INTEGER_FORMAT
		    ", acknowledged %s", json_integer_value(json_object_get(story, "record_id")),
		    timefmt_when(at, sizeof at, json_integer_value(acked)));
	else if (json_is_true(json_object_get(res, "refused")))
		snprintf(buf + used, n - used, ", refused (%s)", cause ? cause : "no cause recorded");
	else
		snprintf(buf + used, n - used, ", not acknowledged yet");
}

/* "names A, B (values not shown)", or "-" when the spec set none. */
static void
env_text(json_t *story, char *buf, size_t n)
{
	json_t *names = json_object_get(story, "env"), *v;
	size_t i, used;

	if (!json_is_array(names) || json_array_size(names) == 0) {
		snprintf(buf, n, "-");
		return;
	}
	used = (size_t)snprintf(buf, n, "%s", "");
	json_array_foreach(names, i, v)
		if (used < n)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? " " : "",
			    json_string_value(v));
	if (used < n)
		snprintf(buf + used, n - used, " (values not shown)");
}

/* Whether the captured output was cut at the capture bound. */
static void
output_text(json_t *story, char *buf, size_t n)
{
	json_t *out = json_object_get(story, "stdout_dropped");
	json_t *err = json_object_get(story, "stderr_dropped");
	json_int_t o = json_integer_value(out), r = json_integer_value(err);
	char bytes[48];

	if (!json_is_integer(out) || !json_is_integer(err))
		snprintf(buf, n, "-");
	else if (o == 0 && r == 0)
		snprintf(buf, n, "kept whole");
	else
		snprintf(buf, n, "TRUNCATED at --max-output: %s of stdout and %" JSON_INTEGER_FORMAT
		    " of stderr dropped", cli_plural(bytes, sizeof bytes, o, "byte"), r);
}

/* "EVIDENCE at T" from the run record, or "" without one. */
static void
evidence_text(json_t *story, char *buf, size_t n)
{
	const char *ev = json_string_value(json_object_get(story, "evidence"));
	char at[64];

	if (!ev)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%s at %s", ev, timefmt_when(at, sizeof at,
		    json_integer_value(json_object_get(story, "evidence_at"))));
}

/* A line of the story: label, then story field key as table_cell_json()
 * shows it (date-times for *_at, elapsed for *_ms, "-" for null). */
static int
fact(struct table *t, const char *label, json_t *story, const char *key)
{
	return table_row(t) < 0 || table_cell(t, label) < 0 ||
	    table_cell_json(t, key, json_object_get(story, key)) < 0 ? -1 : 0;
}

/* The story's lines: what ran and how, when, how it ended and why, how
 * it travelled, where its evidence went. */
static int
story_rows(struct table *t, json_t *o)
{
	json_t *s = json_object_get(o, "story");
	char binding[1024], outcome[256], delivery[512], env[1024], output[256], evidence[1024];
	char hb[512];

	binding_text(o, binding, sizeof binding);
	outcome_text(s, outcome, sizeof outcome);
	delivery_text(o, s, delivery, sizeof delivery);
	env_text(s, env, sizeof env);
	output_text(s, output, sizeof output);
	evidence_text(s, evidence, sizeof evidence);
	snprintf(hb, sizeof hb, "%s", json_string_value(json_object_get(o, "detail")));
	return fact(t, "program:", s, "program") < 0 || fact(t, "args:", s, "args") < 0 ||
	    table_pair(t, "env:", env) < 0 || fact(t, "cwd:", s, "cwd") < 0 ||
	    fact(t, "timeout:", s, "timeout_ms") < 0 ||
	    table_pair(t, "binding:", binding) < 0 ||
	    fact(t, "accepted:", s, "accepted_at") < 0 || fact(t, "started:", s, "started_at") < 0 ||
	    fact(t, "finished:", s, "finished_at") < 0 || fact(t, "duration:", s, "duration_ms") < 0 ||
	    table_pair(t, "outcome:", outcome) < 0 || fact(t, "message:", s, "message") < 0 ||
	    table_pair(t, "output:", output) < 0 || table_pair(t, "delivery:", delivery) < 0 ||
	    table_pair(t, "evidence:", evidence) < 0 ||
	    (json_is_object(json_object_get(o, "handback")) && table_pair(t, "hand-back:", hb) < 0) ||
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
	    print_section(f, "receipt", json_object_get(o, "receipt")) < 0 ||
	    print_section(f, "run record", json_object_get(o, "record")) < 0 ||
	    print_section(f, "hand-back", json_object_get(o, "handback")) < 0 ? -1 : 0;
}
