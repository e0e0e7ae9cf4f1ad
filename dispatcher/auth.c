/*
 * auth — who may use /admin/: the holder of the admin token.
 *
 * The token is a secret of 64 hex digits the dispatcher makes at its first
 * start, in a file of mode 0600 beside the store (STORE.admin-token, made
 * with O_EXCL|O_NOFOLLOW: never through a link someone planted), or one the
 * operator gives by file (--admin-token-file).  It is never taken from the
 * command line, where every local user reads it (/proc/PID/cmdline), and
 * never logged.  Only its SHA-256 stays in memory; a request's token is
 * hashed and the digests compared in constant time.
 *
 * Every /admin/ request sends it as "Authorization: Bearer TOKEN": none is
 * 401, another one 403, both before the request's body is read, a fault
 * taken or a handler run, so a refused request changes nothing.
 *
 * And enrollment (invariant 11): an executor id the dispatcher has never
 * seen is bound to its key only by a negotiation that presents an
 * enrollment token the operator issued (POST /admin/enrollments).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "protocol.h"
#include "random.h"
#include "sha256.h"

#include "util.h"
#include "store.h"
#include "http.h"
#include "auth.h"

enum { TOKEN_MIN = 32, TOKEN_MAX = 256, TOKEN_BYTES = SECRET_HEX / 2, ENROLL_USES_MAX = 1000000 };

/* The admin token's SHA-256, set once before the server starts. */
static char admin_sha[SHA256_HEX_LEN + 1];

bool
digest_eq(const char *got, const char *want)
{
	unsigned diff = 0;
	size_t i;

	if (strlen(got) != SHA256_HEX_LEN || strlen(want) != SHA256_HEX_LEN)
		return false;
	for (i = 0; i < SHA256_HEX_LEN; i++)
		diff |= (unsigned)(got[i] ^ want[i]);
	return diff == 0;
}

/* Is text (len bytes) a token: TOKEN_MIN..TOKEN_MAX printable bytes, no
 * space (it travels in a header)? */
static bool
token_shaped(const char *text, size_t len)
{
	size_t i;

	if (len < TOKEN_MIN || len > TOKEN_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (text[i] <= ' ' || text[i] > '~')
			return false;
	return true;
}

/* Read the token from fd (path for messages) into buf (TOKEN_MAX + 2
 * bytes): owner-only, one line.  Its length, or -1. */
static int
token_read(int fd, const char *path, char *buf, struct ek_err *e)
{
	struct stat sb;
	ssize_t n;

	if (fstat(fd, &sb) < 0)
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return ek_fail(e, EK_DATAERR, "'%s': not a regular file", path);
	if (sb.st_uid != geteuid() || (sb.st_mode & 077))
		return ek_fail(e, EK_UNSAFE, "'%s': the admin token's file must be this user's, mode"
		    " 0600 (it is mode %04o): run 'chmod 600 %s'", path,
		    (unsigned)(sb.st_mode & 07777), path);
	n = read(fd, buf, TOKEN_MAX + 1);
	if (n < 0)
		return ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	if (!token_shaped(buf, (size_t)n)) {
		explicit_bzero(buf, TOKEN_MAX + 2);
		return ek_fail(e, EK_DATAERR, "'%s': the admin token must be one line of %d to %d"
		    " printable bytes without spaces", path, TOKEN_MIN, TOKEN_MAX);
	}
	return (int)n;
}

/* Open the token's file path, never through a link; the descriptor, or -1
 * with errno set. */
static int
token_open(const char *path)
{
	return open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
}

/* Why the token's file path (errno err) cannot be opened. */
static int
token_open_error(const char *path, int err, struct ek_err *e)
{
	return ek_fail(e, err == ENOENT ? EK_NOINPUT : EK_IOERR, "cannot read the admin token"
	    " '%s': %s", path, err == ELOOP ? "it is a symbolic link (not followed)" :
	    strerror(err));
}

/* The token's path: given, else STORE.admin-token, into path (n bytes). */
static int
token_path(const char *store, const char *given, char *path, size_t n, struct ek_err *e)
{
	if (snprintf(path, n, "%s%s", given ? given : store, given ? "" : ".admin-token") >= (int)n)
		return ek_fail(e, EK_USAGE, "'%s': path too long", given ? given : store);
	return 0;
}

/* Make a new token in path (which does not exist): 0600, never through a
 * link, durable before the server answers with it. */
static int
token_create(const char *path, struct ek_err *e)
{
	char token[2 * TOKEN_BYTES + 2];
	int fd, err = 0;

	if (random_hex(token, sizeof token, "", TOKEN_BYTES) < 0)
		return ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		err = errno;
	else {
		size_t len = strlen(token);

		token[len] = '\n';
		if (fchmod(fd, 0600) < 0 || write(fd, token, len + 1) != (ssize_t)(len + 1) ||
		    fsync(fd) < 0)
			err = errno ? errno : EIO;
		close(fd);
		sha256_hex(token, len, admin_sha);
		if (err)
			unlink(path);
	}
	explicit_bzero(token, sizeof token);
	if (err)
		return ek_fail(e, EK_CANTCREAT, "cannot create the admin token '%s': %s", path,
		    err == EEXIST ? "it appeared meanwhile, or is a symbolic link (not followed)" :
		    strerror(err));
	say("made the admin token: %s", path);
	return 0;
}

int
auth_init(const char *store, const char *given, struct ek_err *e)
{
	char path[4096], buf[TOKEN_MAX + 2];
	int fd, n;

	if (token_path(store, given, path, sizeof path, e) < 0)
		return -1;
	fd = token_open(path);
	if (fd < 0 && errno == ENOENT && !given)
		return token_create(path, e);
	if (fd < 0)
		return token_open_error(path, errno, e);
	n = token_read(fd, path, buf, e);
	close(fd);
	if (n < 0)
		return -1;
	sha256_hex(buf, (size_t)n, admin_sha);
	explicit_bzero(buf, sizeof buf);
	return 0;
}

int
auth_token_load(const char *store, const char *given, char *buf, size_t size, struct ek_err *e)
{
	char path[4096], tok[TOKEN_MAX + 2];
	int fd, n;

	if (token_path(store, given, path, sizeof path, e) < 0)
		return -1;
	if ((fd = token_open(path)) < 0)
		return token_open_error(path, errno, e);
	n = token_read(fd, path, tok, e);
	close(fd);
	if (n >= 0 && (size_t)n >= size)
		n = ek_fail(e, EK_SOFTWARE, "'%s': no room for the admin token", path);
	if (n >= 0)
		memcpy(buf, tok, (size_t)n + 1);
	explicit_bzero(tok, sizeof tok);
	return n < 0 ? -1 : 0;
}

int
auth_admin(struct req *rq)
{
	const char *token = req_bearer(rq);
	char got[SHA256_HEX_LEN + 1];

	if (!token)
		return fail(rq, 401, "unauthorized", "the admin API needs the admin token"
		    " (Authorization: Bearer; see --admin-token-file)");
	sha256_hex(token, strlen(token), got);
	if (!admin_sha[0] || !digest_eq(got, admin_sha))
		return fail(rq, 403, "forbidden", "not the admin token");
	return 0;
}

/* POST /admin/enrollments [{"uses":N}]: issue an enrollment token that
 * enrolls up to N new executor ids (default 1).  The token is in this
 * answer only: the store keeps its SHA-256 (invariant 3). */
int
h_enroll_new(struct req *rq)
{
	bool body = rq->len > 0 || rq->too_big;
	json_t *in = body ? body_json(rq) : NULL, *uses = in ? json_object_get(in, "uses") : NULL;
	char id[24], token[2 * TOKEN_BYTES + 1], sha[SHA256_HEX_LEN + 1];
	int64_t n = 1;
	int status;

	if (body && !in)
		return 400;
	if (in && (!json_is_object(in) || json_object_size(in) != (uses ? 1 : 0) ||
	    (uses && (!json_is_integer(uses) || json_integer_value(uses) < 1 ||
	    json_integer_value(uses) > ENROLL_USES_MAX))))
		return fail(rq, 400, "invalid", "the body must be empty or {\"uses\": an integer"
		    " from 1 to %d}", ENROLL_USES_MAX);
	if (uses)
		n = json_integer_value(uses);
	if (random_hex(id, sizeof id, "enr-", 8) < 0 ||
	    random_hex(token, sizeof token, "", TOKEN_BYTES) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	sha256_hex(token, strlen(token), sha);
	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "INSERT INTO enrollments(enrollment_id, token_sha256, uses_left,"
	    " created_ms) VALUES(?,?,?,?)", "ssii", id, sha, n, now_ms()) < 0)
		status = internal(rq);
	else
		status = answer(rq, 201, json_pack("{s:s, s:s, s:I}", "enrollment_id", id,
		    "enroll_token", token, "uses", (json_int_t)n));
	explicit_bzero(token, sizeof token);
	return tx_end(rq, status);
}

int
enroll_take(struct req *rq, const char *xid, const char *token)
{
	char sha[SHA256_HEX_LEN + 1];

	if (!token)
		return fail(rq, 403, "not_enrolled", "executor '%s' is not enrolled: its first"
		    " session needs an enrollment token (exec-session open --enroll-token-file)", xid);
	sha256_hex(token, strlen(token), sha);
	/* the lookup is by digest: a guess learns nothing from timing but
	 * whether its digest is stored, which is the answer anyway */
	if (sql_exec(&rq->e, "UPDATE enrollments SET uses_left=uses_left-1 WHERE token_sha256=?"
	    " AND uses_left>0", "s", sha) < 0)
		return internal(rq);
	if (sqlite3_changes(dsp_store.db.h) == 0)
		return fail(rq, 403, "not_enrolled", "executor '%s' is not enrolled: the enrollment"
		    " token is unknown or used up", xid);
	return 0;
}
