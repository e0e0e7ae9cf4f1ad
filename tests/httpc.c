/*
 * httpc — the tests' HTTP client: the subset of curl's command line the
 * test helpers use, over a plain socket.  curl loads some thirty shared
 * libraries and initialises TLS at every start (20-35 ms of CPU here);
 * the suite makes thousands of admin calls, and spent about a sixth of
 * its time in curl.  An option outside the subset is an error, never
 * ignored: a test that needs more uses curl.
 *
 *   httpc [-s] [-S] [--noproxy H] [-m|--max-time S] [-X METHOD]
 *         [-H 'Name: value' | -H @FILE]... [-d|--data-binary DATA|@FILE]
 *         [-o FILE] [-w FORMAT] [--config FILE] URL...
 *
 * -w knows %{http_code} and \n.  --config reads `url = "…"` lines.  Each
 * URL is one request on its own connection; the body goes to stdout (or
 * -o, one URL only), then the -w text.  Exit status as curl's: 0, 2
 * usage, 3 bad URL, 7 no connection, 26 unreadable file, 28 timed out,
 * 52 no answer at all, 56 a broken answer.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { E_USAGE = 2, E_URL = 3, E_CONNECT = 7, E_READ = 26, E_TIMEOUT = 28, E_EMPTY = 52, E_RECV = 56 };

struct buf {
	char *p;
	size_t n, cap;
};

static struct {
	const char *method, *out, *fmt;
	struct buf headers, data;
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

static double
now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A header line, or with @FILE each line of the file. */
static void
add_header(const char *h)
{
	struct buf f = { 0 };
	char *line, *save = NULL;

	if (h[0] != '@') {
		put(&opt.headers, h, strlen(h));
		put(&opt.headers, "\r\n", 2);
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

/* Connect to http://HOST:PORT of url; *path gets the rest. */
static int
connect_url(const char *url, char *host, size_t hostsz, const char **path, double deadline)
{
	const char *h = url + 7, *slash, *colon;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	struct pollfd p;
	int fd, err = 0;
	socklen_t len = sizeof err;
	char port[8] = "80";

	if (strncmp(url, "http://", 7))
		die(E_URL, "only http:// URLs: '%s'", url);
	slash = strchr(h, '/');
	*path = slash ? slash : "/";
	colon = memchr(h, ':', slash ? (size_t)(slash - h) : strlen(h));
	if ((size_t)((colon ? colon : slash ? slash : h + strlen(h)) - h) >= hostsz)
		die(E_URL, "host too long: '%s'", url);
	snprintf(host, hostsz, "%.*s", (int)((colon ? colon : slash ? slash : h + strlen(h)) - h), h);
	if (colon)
		snprintf(port, sizeof port, "%.*s", (int)((slash ? slash : h + strlen(h)) - colon - 1), colon + 1);
	if (getaddrinfo(host, port, &hints, &ai))
		die(E_CONNECT, "cannot resolve '%s'", host);
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS))
		die(E_CONNECT, "cannot connect to %s", url);
	freeaddrinfo(ai);
	p = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&p, 1, (int)((deadline - now_s()) * 1000)) == 0)
		die(E_TIMEOUT, "timed out connecting to %s", url);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		die(E_CONNECT, "cannot connect to %s", url);
	return fd;
}

/* Wait for fd to be ready for events, or die at the deadline. */
static void
await(int fd, short events, double deadline, const char *url)
{
	struct pollfd p = { .fd = fd, .events = events };
	double left = deadline - now_s();

	if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) == 0)
		die(E_TIMEOUT, "timed out: %s", url);
}

/* One request; the whole answer (head and body) into ans. */
static void
exchange(const char *url, struct buf *ans, double deadline)
{
	struct buf req = { 0 };
	char host[256], line[512], chunk[65536];
	const char *path;
	int fd = connect_url(url, host, sizeof host, &path, deadline);
	size_t off = 0;
	ssize_t n;

	snprintf(line, sizeof line, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n",
	    opt.method, path, host);
	put(&req, line, strlen(line));
	if (opt.headers.n)
		put(&req, opt.headers.p, opt.headers.n);
	if (opt.has_data) {
		snprintf(line, sizeof line, "Content-Length: %zu\r\n", opt.data.n);
		put(&req, line, strlen(line));
	}
	put(&req, "\r\n", 2);
	if (opt.has_data && opt.data.n)
		put(&req, opt.data.p, opt.data.n);
	while (off < req.n) {
		await(fd, POLLOUT, deadline, url);
		if ((n = send(fd, req.p + off, req.n - off, MSG_NOSIGNAL)) < 0 && errno != EAGAIN)
			die(E_RECV, "send failed: %s", url);
		off += n > 0 ? (size_t)n : 0;
	}
	free(req.p);
	for (;;) {
		await(fd, POLLIN, deadline, url);
		if ((n = recv(fd, chunk, sizeof chunk, 0)) == 0)
			break;
		if (n < 0 && errno != EAGAIN)
			die(E_RECV, "receive failed: %s", url);
		if (n > 0)
			put(ans, chunk, (size_t)n);
	}
	close(fd);
}

/* Decode a chunked body in place; its length. */
static size_t
unchunk(char *b, size_t n)
{
	char *r = b, *w = b, *end = b + n;
	unsigned long len;

	while (r < end && (len = strtoul(r, NULL, 16)) > 0) {
		if (!(r = memmem(r, (size_t)(end - r), "\r\n", 2)) || (size_t)(end - r - 2) < len)
			die(E_RECV, "%s", "a broken chunked body");
		memmove(w, r + 2, len);
		w += len;
		r += 2 + len + 2;
	}
	return (size_t)(w - b);
}

/* Write the body of ans to out; the status code. */
static int
answer(struct buf *ans, FILE *out, const char *url)
{
	char *head_end = ans->p ? strstr(ans->p, "\r\n\r\n") : NULL, *body;
	size_t n;
	int code;

	if (ans->n == 0)
		die(E_EMPTY, "empty reply: %s", url);
	if (!head_end || sscanf(ans->p, "HTTP/1.%*d %d", &code) != 1)
		die(E_RECV, "not an HTTP answer: %s", url);
	*head_end = '\0';
	body = head_end + 4;
	n = ans->n - (size_t)(body - ans->p);
	if (strcasestr(ans->p, "\r\nTransfer-Encoding: chunked"))
		n = unchunk(body, n);
	fwrite(body, 1, n, out);
	return code;
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
	double deadline;
	int i, code;

	parse_args(argc, argv);
	deadline = now_s() + opt.max_time;
	for (i = 0; i < opt.nurls; i++) {
		struct buf ans = { 0 };
		FILE *out = stdout;

		exchange(opt.urls[i], &ans, deadline);
		if (opt.out && !(out = fopen(opt.out, "wb")))
			die(E_READ, "cannot write '%s'", opt.out);
		code = answer(&ans, out, opt.urls[i]);
		if (out != stdout)
			fclose(out);
		print_fmt(code);
		free(ans.p);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
