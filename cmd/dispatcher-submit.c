/*
 * exec-dispatcher submit — hand one run to a running reference dispatcher
 * without writing its JSON by hand: POST /admin/runs with the admin token
 * (read from its 0600 file, never from the command line), then print the
 * run id.
 *
 * Submitting is idempotent by run id, as the dispatcher is: the same id
 * with the same spec is "already submitted" (exit 0); with another spec it
 * is a conflict (65).  What the dispatcher answers is untrusted text: it
 * reaches the terminal only through text_safe().
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "clock.h"
#include "dispatcher-submit.h"
#include "protocol.h"
#include "err.h"
#include "http.h"
#include "jsonout.h"
#include "random.h"
#include "runs.h"
#include "text.h"
#include "timefmt.h"

#include "dispatcher/auth.h"

int
submit_parse_duration(const char *s, int64_t *ms)
{
	size_t len = strlen(s);
	char num[32];

	if (len > 2 && len < sizeof num && strcmp(s + len - 2, "ms") == 0) {
		memcpy(num, s, len - 2);
		num[len - 2] = '\0';
		return cli_parse_i64(num, 0, INT64_MAX / 2, ms);
	}
	return timefmt_parse_age(s, ms);
}

int
submit_parse_due(const char *s, int64_t *ms)
{
	int64_t v;

	if (strcmp(s, "now") == 0)
		return *ms = 0, 0;
	if (s[0] == '@') {   /* as date(1) reads it: seconds since the epoch */
		if (cli_parse_i64(s + 1, 0, INT64_MAX / 1000, &v) < 0)
			return -1;
		return *ms = v * 1000, 0;
	}
	if (submit_parse_duration(s, &v) < 0 || v > INT64_MAX / 2)
		return -1;
	*ms = now_ms() + v;
	return 0;
}

/* The dispatcher's base URL into url (n bytes): --url, --port, or the
 * port its --port-file holds. */
static int
base_url(const struct submit_opts *o, char *url, size_t n, struct ek_err *e)
{
	char line[16] = "";
	int64_t port = o->port;
	ssize_t got;
	int fd;

	if (o->url) {
		snprintf(url, n, "%s", o->url);
		while (strlen(url) > 1 && url[strlen(url) - 1] == '/')
			url[strlen(url) - 1] = '\0';
		return 0;
	}
	if (o->port_file) {
		if ((fd = open(o->port_file, O_RDONLY | O_CLOEXEC)) < 0)
			return ek_fail(e, errno == ENOENT ? EK_NOINPUT : EK_IOERR, "--port-file '%s': %s"
			    " (is the dispatcher running?)", o->port_file, strerror(errno));
		got = read(fd, line, sizeof line - 1);
		close(fd);
		line[got > 0 ? got : 0] = '\0';
		line[strcspn(line, "\n")] = '\0';
		if (cli_parse_i64(line, 1, 65535, &port) < 0)
			return ek_fail(e, EK_DATAERR, "--port-file '%s': no port number in it", o->port_file);
	}
	snprintf(url, n, "http://127.0.0.1:%lld", (long long)port);
	return 0;
}

/* The run spec of o, with run_id (generated when --id was not given). */
static json_t *
spec_of(const struct submit_opts *o, const char *run_id)
{
	json_t *spec = json_pack("{s:s, s:s, s:s, s:[]}", "run_id", run_id, "txn_id",
	    o->txn_id ? o->txn_id : run_id, "program", o->argv[0], "args");
	json_t *env = o->nenv ? json_object() : NULL;
	char name[256];
	int i;

	if (!spec)
		return NULL;
	for (i = 1; o->argv[i]; i++)
		json_array_append_new(json_object_get(spec, "args"), json_string(o->argv[i]));
	for (i = 0; i < o->nenv; i++) {
		const char *eq = strchr(o->env[i], '=');

		snprintf(name, sizeof name, "%.*s", (int)(eq - o->env[i]), o->env[i]);
		json_object_set_new(env, name, json_string(eq + 1));
	}
	if (env)
		json_object_set_new(spec, "env", env);
	if (o->cwd)
		json_object_set_new(spec, "cwd", json_string(o->cwd));
	if (o->due_at)
		json_object_set_new(spec, "due_at", json_integer(o->due_at));
	if (o->timeout_ms)
		json_object_set_new(spec, "timeout_ms", json_integer(o->timeout_ms));
	return spec;
}

/* The detail of the dispatcher's refusal, safe for a terminal, into buf. */
static const char *
answer_detail(const struct http_reply *r, char *buf, size_t n)
{
	json_t *o = r->body ? json_loads(r->body, 0, NULL) : NULL;
	const char *d = json_string_value(json_object_get(o, "detail"));

	text_safe(buf, n, d ? d : r->body && *r->body ? r->body : "no detail");
	json_decref(o);
	return buf;
}

/* What the answer to the POST means: 0 submitted, 1 already submitted (the
 * same spec), -1 with e filled. */
static int
verdict(const char *url, const char *run_id, const struct http_reply *r, struct ek_err *e)
{
	char why[512];
	json_t *o;
	int dup;

	if (r->status == 0)
		return ek_fail(e, EK_UNAVAILABLE, "%s: dispatcher unreachable: %s", url, r->transport);
	if (r->status == 401 || r->status == 403)
		return ek_fail(e, EK_UNSAFE, "%s: the admin token was refused (%ld): is it the token of"
		    " this dispatcher's store (--store, --admin-token-file)?", url, r->status);
	if (r->status == 409)
		return ek_fail(e, EK_DATAERR, "run '%s': already submitted with a different spec"
		    " (choose another --id)", run_id);
	if (r->status == 400)
		return ek_fail(e, EK_DATAERR, "run '%s': refused as invalid: %s", run_id,
		    answer_detail(r, why, sizeof why));
	if (r->status == 429 || r->status >= 500)
		return ek_fail(e, EK_UNAVAILABLE, "%s: dispatcher unavailable (%ld): %s", url, r->status,
		    answer_detail(r, why, sizeof why));
	o = r->status == 200 && r->body ? json_loads(r->body, 0, NULL) : NULL;
	if (!json_is_integer(json_object_get(o, "duplicates"))) {
		json_decref(o);
		return ek_fail(e, EK_PROTOCOL, "%s: unexpected answer %ld to POST " PROTO_ADMIN_RUNS, url,
		    r->status);
	}
	dup = json_integer_value(json_object_get(o, "duplicates")) > 0;
	json_decref(o);
	return dup;
}

/* The spec of o as the body to send, checked by the executor's own rules
 * first: a spec it would refuse at acceptance is refused here, where its
 * author reads why.  malloc'd, or NULL with e filled. */
static char *
checked_body(const struct submit_opts *o, const char *run_id, struct ek_err *e)
{
	json_t *spec = spec_of(o, run_id);
	struct runspec rs;
	char *body = NULL;

	if (!spec)
		ek_fail(e, EK_SOFTWARE, "out of memory");
	else if (runspec_from_json(spec, &rs, e) < 0)
		ek_wrap(e, EK_DATAERR, "run '%s': invalid", run_id);
	else if (runspec_free(&rs), !(body = json_dumps(spec, JSON_COMPACT)))
		ek_fail(e, EK_SOFTWARE, "out of memory");
	json_decref(spec);
	return body;
}

int
submit_run(const char *prog, const struct submit_opts *o)
{
	struct ek_err e = { 0 };
	struct http_reply r = { 0 };
	char base[1024], url[1100], token[300] = "", id[64];
	const char *run_id = o->run_id;
	char *body = NULL;
	int rc = -1;

	if (!run_id && random_hex(id, sizeof id, "run-", 8) < 0) {
		ek_fail(&e, EK_OSERR, "getrandom: %s", strerror(errno));
		return ek_report(prog, &e);
	}
	run_id = run_id ? run_id : id;
	if (!(body = checked_body(o, run_id, &e)) || base_url(o, base, sizeof base, &e) < 0 ||
	    auth_token_load(o->store, o->token_file, token, sizeof token, &e) < 0)
		goto out;
	snprintf(url, sizeof url, "%s" PROTO_ADMIN_RUNS, base);
	if (http_request("POST", url, token, body, strlen(body), CLIENT_TIMEOUT_MS, &r, &e) < 0 ||
	    (rc = verdict(base, run_id, &r, &e)) < 0)
		goto out;
	if (o->json)
		json_emit(stdout, json_pack("{s:s, s:s, s:s, s:b}", "run_id", run_id, "txn_id",
		    o->txn_id ? o->txn_id : run_id, "dispatcher", base, "duplicate", rc == 1));
	else
		printf("%s\n", run_id);
	if (rc == 1 && !o->json)
		fprintf(stderr, "%s: run '%s' was already submitted with this spec\n", prog, run_id);
out:
	explicit_bzero(token, sizeof token);
	http_reply_free(&r);
	free(body);
	return rc < 0 ? ek_report(prog, &e) : EK_OK;
}
