/* wire — see wire.h. */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "protocol.h"
#include "wire.h"

#define LINE_MAX_CHUNK 1024                              /* a chunk-size line */
#define RAW_MAX (2 * (size_t)HTTP_REPLY_MAX + WIRE_HEAD_MAX)  /* framing included */
#define CONNECT_MAX_MS 2000                              /* as libcurl was told */

/* ---- the answer --------------------------------------------------------- */

struct head {
	long status;
	size_t size;                 /* the head's bytes, blank line included */
	bool chunked, has_length, close;
	uint64_t length;
	int64_t retry_after_ms;
};

/* The end of the line at b (its CR), or NULL when no CRLF within n. */
static const char *
line_end(const char *b, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (b[i] == '\n' && b[i - 1] == '\r')
			return b + i - 1;
	return NULL;
}

/* Whether line[0, n) is the field name: then its value, trimmed. */
static bool
field(const char *line, size_t n, const char *name, const char **v, size_t *vn)
{
	size_t k = strlen(name);
	const char *end = line + n;

	if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0)
		return false;
	for (*v = line + k + 1; *v < end && (**v == ' ' || **v == '\t'); (*v)++)
		;
	while (end > *v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*vn = (size_t)(end - *v);
	return true;
}

static bool
value_is(const char *v, size_t n, const char *word)
{
	return n == strlen(word) && strncasecmp(v, word, n) == 0;
}

static const char *
content_length(const char *v, size_t n, struct head *h)
{
	uint64_t x = 0;

	if (n == 0 || n > 18 || strspn(v, "0123456789") < n)
		return "a Content-Length that is not a number";
	for (size_t i = 0; i < n; i++)
		x = x * 10 + (uint64_t)(v[i] - '0');
	if (h->has_length && x != h->length)
		return "two different Content-Lengths";
	h->has_length = true;
	h->length = x;
	return NULL;
}

/* One header field line[0, n); NULL or why it is refused. */
static const char *
header_field(const char *line, size_t n, struct head *h)
{
	const char *v, *colon = memchr(line, ':', n);
	size_t vn;

	if (line[0] == ' ' || line[0] == '\t')
		return "a folded header field";
	if (!colon || colon == line || memchr(line, ' ', (size_t)(colon - line)))
		return "a header line that is not a field";
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)line[i] < ' ' && line[i] != '\t') || line[i] == 0x7f)
			return "a control byte in a header field";
	if (field(line, n, "content-length", &v, &vn))
		return content_length(v, vn, h);
	if (field(line, n, "transfer-encoding", &v, &vn)) {
		if (!value_is(v, vn, "chunked"))
			return "a transfer coding other than chunked";
		h->chunked = true;
	} else if (field(line, n, "connection", &v, &vn)) {
		for (size_t i = 0; i + 5 <= vn; i++)
			if (strncasecmp(v + i, "close", 5) == 0)
				h->close = true;
	} else if (field(line, n, "retry-after", &v, &vn)) {
		h->retry_after_ms = http_retry_after_ms(v, vn);
	}
	return NULL;
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The head at b: 1 parsed into h, 0 incomplete, -1 refused (*why). */
static int
parse_head(const char *b, size_t n, bool eof, struct head *h, const char **why)
{
	const char *end = NULL, *p, *eol;

	for (size_t i = 3; i < n && i < WIRE_HEAD_MAX; i++)
		if (b[i] == '\n' && b[i - 1] == '\r' && b[i - 2] == '\n' && b[i - 3] == '\r') {
			end = b + i + 1;
			break;
		}
	if (!end) {
		*why = n >= WIRE_HEAD_MAX ? "a head over 64 KiB" : "the connection closed before the answer ended";
		return n >= WIRE_HEAD_MAX || eof ? -1 : 0;
	}
	memset(h, 0, sizeof *h);
	h->retry_after_ms = -1;
	h->size = (size_t)(end - b);
	eol = line_end(b, h->size);
	if (eol - b < 12 || memcmp(b, "HTTP/1.", 7) != 0 || (b[7] != '0' && b[7] != '1') || b[8] != ' ' ||
	    !is_digit(b[9]) || !is_digit(b[10]) || !is_digit(b[11]) || (eol - b > 12 && b[12] != ' ')) {
		*why = "no HTTP/1 status line";
		return -1;
	}
	h->status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
	h->close = b[7] == '0';
	for (p = eol + 2; p < end - 2; p = eol + 2) {
		eol = line_end(p, (size_t)(end - p));
		if ((*why = header_field(p, (size_t)(eol - p), h)))
			return -1;
	}
	if (h->status < 100 || h->status > 599 || h->status == 101) {
		*why = h->status == 101 ? "an upgrade nobody asked for" : "a status outside 100-599";
		return -1;
	}
	return 1;
}

/* Walk the chunked body at b, copying the data to out when not NULL:
 * 1 complete (*size bytes of data, *used bytes read), 0 incomplete, -1. */
static int
walk_chunks(const char *b, size_t n, bool eof, char *out, size_t *size, size_t *used,
    const char **why)
{
	size_t p = 0, total = 0, len, digits;
	const char *eol;

	for (;;) {
		if (!(eol = line_end(b + p, n - p))) {
			*why = n - p > LINE_MAX_CHUNK ? "a chunk-size line over 1 KiB" :
			    "the connection closed in the middle of the answer";
			return n - p > LINE_MAX_CHUNK || eof ? -1 : 0;
		}
		len = 0;
		for (digits = 0; p + digits < n && b[p + digits] &&
		    isxdigit((unsigned char)b[p + digits]); digits++) {
			if (digits == 15) {
				*why = "a chunk size over 15 hex digits";
				return -1;
			}
			len = len * 16 + (size_t)(is_digit(b[p + digits]) ? b[p + digits] - '0' :
			    (b[p + digits] | 0x20) - 'a' + 10);
		}
		if (digits == 0 || (b + p + digits != eol && b[p + digits] != ';' && b[p + digits] != ' ')) {
			*why = "a chunk-size line that is not a size";
			return -1;
		}
		p = (size_t)(eol - b) + 2;
		if (len == 0)
			break;
		if (len > HTTP_REPLY_MAX - total) {
			*why = "an answer over 4 MiB";
			return -1;
		}
		if (n - p < len + 2) {
			*why = "the connection closed in the middle of the answer";
			return eof ? -1 : 0;
		}
		if (b[p + len] != '\r' || b[p + len + 1] != '\n') {
			*why = "a chunk not followed by CRLF";
			return -1;
		}
		if (out)
			memcpy(out + total, b + p, len);
		total += len;
		p += len + 2;
	}
	/* trailer fields, ignored, up to the blank line */
	while ((eol = line_end(b + p, n - p)) && eol != b + p)
		p = (size_t)(eol - b) + 2;
	if (!eol) {
		*why = n - p > WIRE_HEAD_MAX ? "a trailer over 64 KiB" :
		    "the connection closed in the middle of the answer";
		return n - p > WIRE_HEAD_MAX || eof ? -1 : 0;
	}
	*size = total;
	*used = p + 2;
	return 1;
}

/* Where the body is and how long: 1, 0 incomplete, -1. */
static int
frame_body(const char *b, size_t n, bool eof, bool no_body, struct head *h, size_t *size,
    size_t *used, const char **why)
{
	if (no_body || h->status == 204 || h->status == 304) {
		*size = *used = 0;
		return 1;
	}
	if (h->chunked) {
		h->close |= h->has_length;   /* framing a peer got wrong: do not reuse */
		return walk_chunks(b, n, eof, NULL, size, used, why);
	}
	if (h->has_length) {
		*why = h->length > HTTP_REPLY_MAX ? "an answer over 4 MiB" :
		    "the connection closed in the middle of the answer";
		if (h->length > HTTP_REPLY_MAX)
			return -1;
		if (n < h->length)
			return eof ? -1 : 0;
		*size = *used = (size_t)h->length;
		return 1;
	}
	h->close = true;   /* the body ends where the connection does */
	*why = "an answer over 4 MiB";
	if (n > HTTP_REPLY_MAX)
		return -1;
	*size = *used = n;
	return eof ? 1 : 0;
}

int
wire_parse(const char *buf, size_t len, bool eof, bool no_body, struct http_reply *r,
    bool *keep, const char **why)
{
	struct head h;
	size_t size, used;
	int rc;

	/* interim answers (100 Continue and the like) come before the one */
	while ((rc = parse_head(buf, len, eof, &h, why)) == 1 && h.status < 200) {
		buf += h.size;
		len -= h.size;
	}
	if (rc != 1)
		return rc;
	buf += h.size;
	len -= h.size;
	if ((rc = frame_body(buf, len, eof, no_body, &h, &size, &used, why)) != 1)
		return rc;
	if (!(r->body = malloc(size + 1))) {
		*why = "out of memory";
		return -1;
	}
	if (h.chunked && !no_body && h.status != 204 && h.status != 304)
		walk_chunks(buf, len, eof, r->body, &size, &used, why);
	else
		memcpy(r->body, buf, size);
	r->body[size] = '\0';
	r->len = size;
	r->status = h.status;
	r->retry_after_ms = h.retry_after_ms;
	*keep = !h.close && used == len;   /* nothing unasked-for may follow */
	return 1;
}

/* ---- the url ------------------------------------------------------------ */

struct target {
	char host[256];          /* as getaddrinfo() takes it: no brackets */
	char port[6];
	char authority[270];     /* host[:port] as written: the Host field */
	const char *path;
};

static bool
parse_url(const char *url, struct target *t)
{
	const char *h = url + 7, *rest, *p;
	size_t hl;

	if (strncasecmp(url, "http://", 7) != 0)
		return false;
	for (p = url; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '#' || *p == '@' || *p == '\\')
			return false;
	if (*h == '[') {
		hl = strspn(h + 1, "0123456789abcdefABCDEF:.");
		if (h[1 + hl] != ']')
			return false;
		rest = h + hl + 2;
		h++;
	} else {
		hl = strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
		rest = h + hl;
	}
	if (hl == 0 || hl >= sizeof t->host)
		return false;
	memcpy(t->host, h, hl);
	t->host[hl] = '\0';
	snprintf(t->port, sizeof t->port, "80");
	if (*rest == ':') {
		size_t pl = strspn(rest + 1, "0123456789");
		long port = pl >= 1 && pl <= 5 ? strtol(rest + 1, NULL, 10) : 0;

		if (port < 1 || port > 65535)
			return false;
		snprintf(t->port, sizeof t->port, "%ld", port);
		rest += 1 + pl;
	}
	if (*rest && *rest != '/')
		return false;
	if ((size_t)(rest - (url + 7)) >= sizeof t->authority)
		return false;
	snprintf(t->authority, sizeof t->authority, "%.*s", (int)(rest - (url + 7)), url + 7);
	t->path = *rest ? rest : "/";
	return true;
}

static bool
loopback(const char *host)
{
	return strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
	    strncmp(host, "127.", 4) == 0;
}

static bool
set(const char *name)
{
	const char *v = getenv(name);

	return v && *v;
}

/* Whether a request to t goes straight to it (else through libcurl's proxy). */
static bool
direct(const struct target *t)
{
	return loopback(t->host) || !(set("http_proxy") || set("all_proxy") || set("ALL_PROXY"));
}

/* ---- the socket --------------------------------------------------------- */

static struct {
	int fd;
	pid_t pid;               /* a forked child must not talk on its parent's */
	char peer[270];          /* the authority the connection goes to */
} conn = { -1, 0, "" };

static void
hang_up(void)
{
	if (conn.fd >= 0)
		close(conn.fd);
	conn.fd = -1;
}

static bool
kept_for(const struct target *t)
{
	return conn.fd >= 0 && conn.pid == getpid() && strcmp(conn.peer, t->authority) == 0;
}

/* No answer: why, for the transport message.  Returns -1. */
static int __attribute__((format(printf, 3, 4)))
say(struct http_reply *r, int timed_out, const char *fmt, ...)
{
	va_list ap;

	r->timed_out = timed_out;
	va_start(ap, fmt);
	vsnprintf(r->transport, sizeof r->transport, fmt, ap);
	va_end(ap);
	return -1;
}

/* Wait for events on fd until the deadline: 1 ready, 0 timed out. */
static int
wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t left;
	int rc;

	do {
		if ((left = deadline - mono_ms()) <= 0)
			return 0;
		rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
	} while (rc == 0 || (rc < 0 && errno == EINTR));
	return rc > 0;
}

static int
dial_one(const struct addrinfo *a, int64_t deadline)
{
	int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
	int err = 0, one = 1;
	socklen_t el = sizeof err;

	if (fd < 0)
		return -1;
	if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
		if (errno != EINPROGRESS)
			err = errno;
		else if (!wait_fd(fd, POLLOUT, deadline))
			err = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
	}
	if (err) {
		close(fd);
		errno = err;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static int
dial(const struct target *t, int64_t deadline, struct http_reply *r)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV }, *ai, *a;
	int64_t until = mono_ms() + CONNECT_MAX_MS;
	int rc = getaddrinfo(t->host, t->port, &hints, &ai), fd = -1, err = 0;

	r->unreached = 1;   /* until a connection is made */
	if (rc)
		return say(r, 0, "cannot resolve %s: %s", t->host, gai_strerror(rc));
	for (a = ai; a && fd < 0; a = a->ai_next)
		if ((fd = dial_one(a, until < deadline ? until : deadline)) < 0)
			err = errno;
	freeaddrinfo(ai);
	if (fd < 0) {
		/* a connect that timed out may have reached the peer */
		r->unreached = err != ETIMEDOUT;
		return say(r, err == ETIMEDOUT, "cannot connect to %s port %s: %s", t->host, t->port,
		    strerror(err));
	}
	r->unreached = 0;
	return fd;
}

static int
send_all(int fd, const char *p, size_t n, int64_t deadline)
{
	ssize_t k;

	while (n > 0) {
		if ((k = send(fd, p, n, MSG_NOSIGNAL)) > 0) {
			p += k;
			n -= (size_t)k;
		} else if (k < 0 && errno == EINTR) {
			continue;
		} else if (k < 0 && errno == EAGAIN) {
			if (!wait_fd(fd, POLLOUT, deadline)) {
				errno = ETIMEDOUT;
				return -1;
			}
		} else {
			return -1;
		}
	}
	return 0;
}

/* Read the answer into r: 1 answered, 0 failed before any byte of it, -1
 * failed after some. */
static int
receive(int fd, int64_t deadline, bool no_body, struct http_reply *r, bool *keep)
{
	char *raw = NULL, *nb;
	size_t n = 0, cap = 0;
	const char *why = NULL;
	bool eof = false;
	ssize_t k;
	int rc = 0;

	while (rc == 0) {
		if (n == cap) {
			size_t want = cap ? cap * 2 : 16384;

			if (cap >= RAW_MAX || !(nb = realloc(raw, want < RAW_MAX ? want : RAW_MAX))) {
				rc = say(r, 0, "an answer over 4 MiB");
				break;
			}
			raw = nb;
			cap = want < RAW_MAX ? want : RAW_MAX;
		}
		if ((k = recv(fd, raw + n, cap - n, 0)) > 0) {
			n += (size_t)k;
		} else if (k == 0) {
			eof = true;
		} else if (errno == EINTR) {
			continue;
		} else if (errno != EAGAIN) {
			say(r, 0, "%s%s", n ? "connection lost in the middle of the answer: " : "", strerror(errno));
			rc = n ? -1 : 0;
			break;
		} else if (!wait_fd(fd, POLLIN, deadline)) {
			rc = say(r, 1, "no answer in time%s", n ? " (it stopped in the middle)" : "");
			break;
		} else {
			continue;
		}
		if (eof && n == 0) {
			say(r, 0, "the dispatcher closed the connection without an answer");
			break;
		}
		if ((rc = wire_parse(raw, n, eof, no_body, r, keep, &why)) < 0 || (rc == 0 && eof))
			rc = say(r, 0, "malformed answer: %s", why ? why : "it never ended");
	}
	free(raw);
	return rc;
}

/* The request head; NULL when out of memory.  It holds the credential. */
static char *
request_head(const char *method, const struct target *t, const char *bearer, const void *body,
    size_t len, size_t *n)
{
	char cl[96] = "", *head;
	int k;

	if (body)
		snprintf(cl, sizeof cl, "Content-Type: application/json\r\nContent-Length: %zu\r\n", len);
	k = asprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n%s%s%s%s\r\n",
	    method, t->path, t->authority, cl, bearer ? "Authorization: " PROTO_BEARER : "", bearer ? bearer : "",
	    bearer ? "\r\n" : "");
	if (k < 0)
		return NULL;
	*n = (size_t)k;
	return head;
}

bool
wire_request(const char *method, const char *url, const char *bearer,
    const void *body, size_t len, int64_t timeout_ms, struct http_reply *r)
{
	int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	bool reused, keep = false, no_body = strcmp(method, "HEAD") == 0;
	struct target t;
	size_t hn = 0;
	char *head;
	int rc = -1;

	if (!parse_url(url, &t) || !direct(&t))
		return false;
	if (bearer && strpbrk(bearer, "\r\n")) {
		say(r, 0, "a credential with a line break");   /* never a header of its own */
		return true;
	}
	if (!(head = request_head(method, &t, bearer, body, len, &hn))) {
		say(r, 0, "cannot build the request");
		return true;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		r->timed_out = 0;   /* what the first try said is not the second's */
		r->transport[0] = '\0';
		if (!(reused = kept_for(&t))) {
			hang_up();
			if ((conn.fd = dial(&t, deadline, r)) < 0)
				break;
			conn.pid = getpid();
			snprintf(conn.peer, sizeof conn.peer, "%s", t.authority);
		}
		if (send_all(conn.fd, head, hn, deadline) < 0 || (body && send_all(conn.fd, body, len, deadline) < 0)) {
			say(r, errno == ETIMEDOUT, "cannot send the request: %s", strerror(errno));
			rc = 0;   /* nothing was answered */
		} else {
			rc = receive(conn.fd, deadline, no_body, r, &keep);
		}
		if (rc != 1 || !keep)
			hang_up();
		/* a kept connection the dispatcher has since closed: once more */
		if (rc != 0 || !reused)
			break;
	}
	explicit_bzero(head, hn);
	free(head);
	return true;
}
