/*
 * httpc — the tests' HTTP client: the subset of curl's command line the
 * test helpers use, over the tools' own http_request() (http.h: plain
 * http:// goes over wire.c's socket).  curl loads some thirty shared
 * libraries and initialises TLS at every start (20-35 ms of CPU here);
 * the suite makes thousands of admin calls, and spent about a sixth of
 * its time in curl.  An option outside the subset is an error, never
 * ignored: a test that needs more uses curl.  The headers it can send
 * are the tools' own: Authorization: Bearer, and Content-Type:
 * application/json (always, with a body).
 *
 *   httpc [-s] [-S] [--noproxy H] [-m|--max-time S] [-X METHOD]
 *         [-H 'Name: value' | -H @FILE]... [-d|--data-binary DATA|@FILE]
 *         [-o FILE] [-w FORMAT] [--config FILE] URL...
 *
 * -w knows %{http_code} and \n.  --config reads `url = "…"` lines.  Each
 * URL is one request (on the connection the last one kept, as the tools
 * do); the body goes to stdout (or -o, one URL only), then the -w text.
 * Exit status as curl's: 0, 2 usage, 7 no connection, 26 unreadable
 * file, 28 timed out, 52 no answer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "http.h"

enum { E_USAGE = 2, E_CONNECT = 7, E_READ = 26, E_TIMEOUT = 28, E_NO_ANSWER = 52 };

struct buf {
	char *p;
	size_t n, cap;
};

static struct {
	const char *method, *out, *fmt;
	char *bearer;
	struct buf data;
	int has_data;
	double max_time;
	char *urls[4096];
	int nurls;
} opt = { .max_time = 300 };

__attribute__((format(printf, 2, 3), noreturn)) static void
die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "httpc: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(code);
}

static void
put(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		if (!(b->p = realloc(b->p, b->cap)))
			die(1, "%s", "out of memory");
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void
put_file(struct buf *b, const char *path)
{
	char chunk[65536];
	size_t n;
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;

	if (!f)
		die(E_READ, "cannot read '%s'", path);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		put(b, chunk, n);
	if (f != stdin)
		fclose(f);
}

/* A header line, or with @FILE each line of the file: only the two the
 * tools send. */
static void
add_header(const char *h)
{
	static const char auth[] = "Authorization: Bearer ";
	struct buf f = { 0 };
	char *line, *save = NULL;

	if (h[0] != '@') {
		if (!strncmp(h, auth, sizeof auth - 1))
			opt.bearer = strdup(h + sizeof auth - 1);
		else if (strcmp(h, "Content-Type: application/json"))
			die(E_USAGE, "unsupported header '%s' (use curl)", h);
		return;
	}
	put_file(&f, h + 1);
	for (line = f.p ? strtok_r(f.p, "\r\n", &save) : NULL; line; line = strtok_r(NULL, "\r\n", &save))
		add_header(line);
	free(f.p);
}

/* -d strips newlines from a file, as curl does; --data-binary keeps them. */
static void
add_data(const char *d, int binary)
{
	struct buf f = { 0 };
	size_t i;

	opt.has_data = 1;
	if (d[0] != '@') {
		put(&opt.data, d, strlen(d));
		return;
	}
	put_file(&f, d + 1);
	for (i = 0; i < f.n; i++)
		if (binary || (f.p[i] != '\n' && f.p[i] != '\r'))
			put(&opt.data, f.p + i, 1);
	free(f.p);
}

static void
add_url(const char *u)
{
	if (opt.nurls == (int)(sizeof opt.urls / sizeof opt.urls[0]))
		die(E_USAGE, "%s", "too many URLs");
	opt.urls[opt.nurls++] = strdup(u);
}

static void
read_config(const char *path)
{
	struct buf f = { 0 };
	char *line, *save = NULL, *q, *e;

	put_file(&f, path);
	for (line = f.p ? strtok_r(f.p, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "url = \"", 7) || !(q = line + 7) || !(e = strchr(q, '"')))
			die(E_USAGE, "--config: only url = \"…\" lines, not '%s'", line);
		*e = '\0';
		add_url(q);
	}
	free(f.p);
}

static void
parse_args(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = 1;

		if (!strcmp(a, "-s") || !strcmp(a, "-S") || !strcmp(a, "-sS"))
			takes = 0;
		else if (a[0] != '-')
			takes = 0, add_url(a);
		else if (!v)
			die(E_USAGE, "%s needs a value", a);
		else if (!strcmp(a, "--noproxy"))
			;   /* never a proxy */
		else if (!strcmp(a, "-m") || !strcmp(a, "--max-time"))
			opt.max_time = atof(v);
		else if (!strcmp(a, "-X"))
			opt.method = v;
		else if (!strcmp(a, "-H"))
			add_header(v);
		else if (!strcmp(a, "-d") || !strcmp(a, "--data-binary"))
			add_data(v, strcmp(a, "-d") != 0);
		else if (!strcmp(a, "-o"))
			opt.out = v;
		else if (!strcmp(a, "-w"))
			opt.fmt = v;
		else if (!strcmp(a, "--config"))
			read_config(v);
		else
			die(E_USAGE, "unsupported option '%s' (use curl)", a);
		i += takes;
	}
	if (opt.nurls == 0)
		die(E_USAGE, "%s", "no URL");
	if (opt.out && opt.nurls > 1)
		die(E_USAGE, "%s", "-o with more than one URL");
	if (!opt.method)
		opt.method = opt.has_data ? "POST" : "GET";
}

/* curl's exit status for a request that got no answer. */
static int
no_answer(const struct http_reply *r)
{
	if (r->timed_out)
		return E_TIMEOUT;
	return strncmp(r->transport, "cannot connect", 14) && strncmp(r->transport, "cannot resolve", 14) ?
	    E_NO_ANSWER : E_CONNECT;
}

static void
print_fmt(int code)
{
	const char *f;

	for (f = opt.fmt; f && *f; f++) {
		if (!strncmp(f, "%{http_code}", 12)) {
			printf("%03d", code);
			f += 11;
		} else if (f[0] == '\\' && f[1] == 'n') {
			putchar('\n');
			f++;
		} else {
			putchar(*f);
		}
	}
}

int
main(int argc, char **argv)
{
	struct ek_err e = { 0 };
	int64_t deadline;
	int i;

	parse_args(argc, argv);
	deadline = mono_ms() + (int64_t)(opt.max_time * 1000);
	for (i = 0; i < opt.nurls; i++) {
		struct http_reply r;
		FILE *out = stdout;

		if (http_request(opt.method, opt.urls[i], opt.bearer, opt.has_data ? (opt.data.p ? opt.data.p : "") : NULL,
		    opt.data.n, deadline - mono_ms(), &r, &e) < 0)
			die(1, "%s", e.msg);
		if (r.status == 0)
			die(no_answer(&r), "%s: %s", opt.urls[i], r.transport);
		if (opt.out && !(out = fopen(opt.out, "wb")))
			die(E_READ, "cannot write '%s'", opt.out);
		fwrite(r.body, 1, r.len, out);
		if (out != stdout)
			fclose(out);
		print_fmt((int)r.status);
		http_reply_free(&r);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
