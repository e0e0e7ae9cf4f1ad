/*
 * exec-dispatcher — the reference dispatcher: a small HTTP server that
 * speaks doc/protocol.md to executors, keeps its own SQLite store, and lets
 * tests steer it through /admin/ endpoints and injected faults.
 *
 * Shape: libmicrohttpd runs one thread per connection and calls
 * on_request() for every request.  The request body is collected (with a
 * cap), a queued fault may be taken, then a handler from the route table
 * answers.  Every handler that touches the store does so between
 * tx_begin() and tx_end(): one SQLite connection, one mutex, one write
 * transaction per request, so handlers see a consistent store and lapsed
 * leases are expired on every access.
 *
 * Invariants:
 *  1. A run's first accepted result is recorded once, with exactly one
 *     ledger charge; a duplicate or refused report changes neither.
 *  2. Every report to /v1/results is kept in `reports`, whatever its answer.
 *  3. Credentials are never logged and only their SHA-256 is stored.
 *  4. The server binds 127.0.0.1 only.
 *  5. An inspection's answer is recorded once, only from the session it
 *     names, and never with a field its outcome does not have.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "cli.h"
#include "db.h"
#include "err.h"

static const char PROG[] = "exec-dispatcher";

enum { MAX_CONNECTIONS = 256 };          /* also bounds the in-flight table */
enum { RESULT_MAX = 64 * 1024, V1_MAX = 4 * 1024 * 1024, ADMIN_MAX = 64 * 1024 * 1024 };
enum { MESSAGE_MAX = 4096, FEED_DEFAULT = 100, FEED_MAX = 1000 };

static struct config {
	int64_t port, lease_ms, heartbeat_ms;
	const char *port_file, *store, *incarnation;
	bool quiet;
} cfg = { 0, 30000, 2000, NULL, "./exec-dispatcher.db", NULL, false };

static atomic_bool stopping;

/* ------------------------------------------------------------------ */
/* SHA-256 (FIPS 180-4), one-shot, hex output                          */

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

/* Mix one 64-byte block into the hash state h. */
static void
sha256_block(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64], s[8], t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		    (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (; i < 64; i++)
		w[i] = w[i - 16] + w[i - 7] +
		    (ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3)) +
		    (ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10));
	memcpy(s, h, sizeof s);
	for (i = 0; i < 64; i++) {
		t1 = s[7] + (ROR(s[4], 6) ^ ROR(s[4], 11) ^ ROR(s[4], 25)) +
		    ((s[4] & s[5]) ^ (~s[4] & s[6])) + sha_k[i] + w[i];
		t2 = (ROR(s[0], 2) ^ ROR(s[0], 13) ^ ROR(s[0], 22)) +
		    ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
		memmove(s + 1, s, 7 * sizeof s[0]);
		s[4] += t1;
		s[0] = t1 + t2;
	}
	for (i = 0; i < 8; i++)
		h[i] += s[i];
}

/* Write the SHA-256 of data[0..len) as 64 lowercase hex digits + NUL. */
static void
sha256_hex(const void *data, size_t len, char out[65])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	const unsigned char *p = data;
	unsigned char tail[128] = { 0 };
	size_t rest = len % 64, tlen = rest < 56 ? 64 : 128, i;
	uint64_t bits = (uint64_t)len * 8;

	for (i = 0; i + 64 <= len; i += 64)
		sha256_block(h, p + i);
	memcpy(tail, p + i, rest);
	tail[rest] = 0x80;
	for (i = 0; i < 8; i++)
		tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (i = 0; i < tlen; i += 64)
		sha256_block(h, tail + i);
	for (i = 0; i < 8; i++)
		snprintf(out + 8 * i, 9, "%08" PRIx32, h[i]);
}

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

/* Fill out with prefix + 2*nbytes random hex digits; 0 or -1. */
static int
random_id(char *out, size_t outsz, const char *prefix, size_t nbytes)
{
	unsigned char b[32];
	size_t got = 0, i, pl = strlen(prefix);

	if (nbytes > sizeof b || pl + 2 * nbytes + 1 > outsz)
		return -1;
	while (got < nbytes) {
		ssize_t n = getrandom(b + got, nbytes - got, 0);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n > 0)
			got += (size_t)n;
	}
	memcpy(out, prefix, pl);
	for (i = 0; i < nbytes; i++)
		snprintf(out + pl + 2 * i, 3, "%02x", b[i]);
	return 0;
}

/* Is s exactly n hex digits (either case)? */
static bool
is_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!s[i] || !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	return s[n] == '\0';
}

/* Is s a run id: 1..128 bytes of [A-Za-z0-9._:-]? */
static bool
is_run_id(const char *s)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-");

	return n >= 1 && n <= 128 && s[n] == '\0';
}

/* Is s one of the NULL-terminated words? */
static bool
one_of(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return true;
	return false;
}

/* Print "exec-dispatcher: ..." on stderr unless --quiet. */
__attribute__((format(printf, 1, 2)))
static void
say(const char *fmt, ...)
{
	va_list ap;
	char line[1200];

	if (cfg.quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", PROG, line);
}

/* libmicrohttpd's own messages, routed through say(). */
__attribute__((format(printf, 2, 0)))
static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[1024];
	size_t n;

	vsnprintf(line, sizeof line, fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	say("mhd: %s", line);
}

/* ------------------------------------------------------------------ */
/* the store                                                           */

static struct {
	struct db db;
	pthread_mutex_t mu;
	char incarnation[40];
} store = { .mu = PTHREAD_MUTEX_INITIALIZER };

static const char SCHEMA_SQL[] =
    /* key/value facts about this store: 'incarnation' */
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    /* one row per negotiation; cred_sha256 = SHA-256 of the credential */
    "CREATE TABLE IF NOT EXISTS sessions("
    " session_id TEXT PRIMARY KEY, incarnation TEXT NOT NULL,"
    " executor_id TEXT NOT NULL, cred_sha256 TEXT NOT NULL,"
    " status TEXT NOT NULL CHECK(status IN"
    "  ('current','revoked','expired','replaced','closed')),"
    " lease_expires_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL);"
    /* submitted work; submit_seq is the feed order; spec is canonical JSON */
    "CREATE TABLE IF NOT EXISTS runs("
    " run_id TEXT PRIMARY KEY, submit_seq INTEGER NOT NULL UNIQUE,"
    " spec TEXT NOT NULL, cost INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL CHECK(state IN"
    "  ('queued','offered','accepted','rejected','finished')),"
    " owner_session TEXT, receipt TEXT,"
    " max_in_flight INTEGER NOT NULL DEFAULT 0, submitted_ms INTEGER NOT NULL);"
    /* the one recorded result per run (invariant 1) */
    "CREATE TABLE IF NOT EXISTS results("
    " record_id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " run_id TEXT NOT NULL UNIQUE REFERENCES runs(run_id),"
    " session_id TEXT NOT NULL, body TEXT NOT NULL, body_sha256 TEXT NOT NULL,"
    " recorded_at INTEGER NOT NULL);"
    /* every report received (invariant 2); status 0 = closed, no answer */
    "CREATE TABLE IF NOT EXISTS reports("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, session_id TEXT,"
    " body_sha256 TEXT, status INTEGER NOT NULL, error TEXT, fault TEXT,"
    " at INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS reports_run ON reports(run_id);"
    /* clients' InspectRetainedRun lookups, relayed to the executor that
     * holds session_id; answer (its JSON) is recorded once */
    "CREATE TABLE IF NOT EXISTS inspections("
    " inspection_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, run_id TEXT NOT NULL,"
    " status TEXT NOT NULL CHECK(status IN ('pending','answered')), answer TEXT,"
    " created_ms INTEGER NOT NULL, answered_ms INTEGER);"
    "CREATE INDEX IF NOT EXISTS inspections_session ON inspections(session_id, status);"
    /* at most one charge per run */
    "CREATE TABLE IF NOT EXISTS ledger("
    " run_id TEXT NOT NULL UNIQUE, charge INTEGER NOT NULL, at INTEGER NOT NULL);"
    /* an ended session whose runs a later session of its executor may report */
    "CREATE TABLE IF NOT EXISTS adoptions("
    " session_id TEXT PRIMARY KEY REFERENCES sessions(session_id),"
    " by_session TEXT NOT NULL REFERENCES sessions(session_id), adopted_ms INTEGER NOT NULL);";

/* Prepare sql on the store and bind args by types ('s' text, 'i' int64). */
static sqlite3_stmt *
sql_vprep(struct ek_err *e, const char *sql, const char *types, va_list ap)
{
	sqlite3_stmt *st = db_prep(&store.db, sql, e);
	int i;

	for (i = 0; st && types[i]; i++) {
		if (types[i] == 's')
			db_bind_text(st, i + 1, va_arg(ap, const char *));
		else
			db_bind_i64(st, i + 1, va_arg(ap, int64_t));
	}
	return st;
}

/* As sql_vprep; the caller steps and finalizes. NULL with e filled. */
static sqlite3_stmt *
sql_prep(struct ek_err *e, const char *sql, const char *types, ...)
{
	va_list ap;
	sqlite3_stmt *st;

	va_start(ap, types);
	st = sql_vprep(e, sql, types, ap);
	va_end(ap);
	return st;
}

/* Run one statement that returns no row; 0 or -1 with e filled. */
static int
sql_exec(struct ek_err *e, const char *sql, const char *types, ...)
{
	va_list ap;
	sqlite3_stmt *st;

	va_start(ap, types);
	st = sql_vprep(e, sql, types, ap);
	va_end(ap);
	return st ? db_exec_stmt(&store.db, st, e) : -1;
}

/* Column text, or NULL for SQL NULL. */
static const char *
col(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* Column as a JSON string, or JSON null. */
static json_t *
col_json(sqlite3_stmt *st, int i)
{
	const char *s = col(st, i);

	return s ? json_string(s) : json_null();
}

/* Read or create the store's incarnation inside the open transaction. */
static int
store_incarnation(const char *want, struct ek_err *e)
{
	sqlite3_stmt *st = sql_prep(e, "SELECT value FROM meta WHERE key='incarnation'", "");
	int r;

	if (!st)
		return -1;
	r = db_step(&store.db, st, e);
	if (r == 1)
		db_col_text(st, 0, store.incarnation, sizeof store.incarnation);
	sqlite3_finalize(st);
	if (r != 0)
		return r < 0 ? -1 : 0;
	if (want)
		snprintf(store.incarnation, sizeof store.incarnation, "%s", want);
	else if (random_id(store.incarnation, sizeof store.incarnation, "inc-", 8) < 0)
		return ek_fail(e, EK_OSERR, "getrandom: %s", strerror(errno));
	return sql_exec(e, "INSERT INTO meta(key, value) VALUES('incarnation', ?)", "s",
	    store.incarnation);
}

/* Open (creating if needed) the store at path and load its incarnation. */
static int
store_open(const char *path, const char *want_inc, struct ek_err *e)
{
	if (db_open(&store.db, path, true, e) < 0)
		return -1;
	if (db_begin_write(&store.db, e) < 0)
		goto fail;
	if (db_exec(&store.db, SCHEMA_SQL, e) < 0 || store_incarnation(want_inc, e) < 0) {
		db_rollback(&store.db);
		goto fail;
	}
	if (db_commit(&store.db, e) < 0)
		goto fail;
	if (want_inc && strcmp(want_inc, store.incarnation) != 0)
		say("%s: keeping the stored incarnation '%s'", path, store.incarnation);
	return 0;
fail:
	db_close(&store.db);
	return -1;
}

/* ------------------------------------------------------------------ */
/* faults                                                              */

enum fault_kind { F_NONE, F_DELAY, F_DROP_ACK, F_5XX, F_429, F_RESET, F_MALFORMED, F_HANG,
	F_4XX };
static const char *const fault_names[] = { "none", "delay", "drop_ack", "5xx", "429",
	"reset", "malformed", "hang", "4xx", NULL };

struct fault {
	int kind;
	int64_t count, delay_ms;
	char path[256];
};

static struct {
	pthread_mutex_t mu;
	struct fault q[64];
	size_t n;
} faults = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Take one use of the first queued fault whose path prefixes path. */
static struct fault
fault_take(const char *path)
{
	struct fault f = { .kind = F_NONE };
	size_t i;

	if (strcmp(path, "/admin/faults") == 0)
		return f;            /* faults can always be cleared */
	pthread_mutex_lock(&faults.mu);
	for (i = 0; i < faults.n; i++) {
		if (strncmp(path, faults.q[i].path, strlen(faults.q[i].path)) != 0)
			continue;
		f = faults.q[i];
		if (--faults.q[i].count == 0) {
			memmove(faults.q + i, faults.q + i + 1, (faults.n - i - 1) * sizeof faults.q[0]);
			faults.n--;
		}
		break;
	}
	pthread_mutex_unlock(&faults.mu);
	return f;
}

/* Has the client closed its end of the connection? */
static bool
peer_gone(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	char c;

	return ci && recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Sleep up to ms in short slices; stop early on shutdown or, if conn is
 * given, when the client has gone. */
static void
nap(int64_t ms, struct MHD_Connection *conn)
{
	int64_t end = mono_ms() + ms;
	struct timespec slice = { 0, 20 * 1000 * 1000 };

	while (mono_ms() < end && !atomic_load(&stopping)) {
		if (conn && peer_gone(conn))
			return;
		nanosleep(&slice, NULL);
	}
}

/* ------------------------------------------------------------------ */
/* reports in flight, per run                                          */

static struct {
	pthread_mutex_t mu;
	struct { char run_id[129]; int cur; } v[MAX_CONNECTIONS];
} flights = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Count one more report of run_id in flight; return the new count. */
static int
flight_enter(const char *run_id)
{
	int i, free_slot = -1, n = 0;

	pthread_mutex_lock(&flights.mu);
	for (i = 0; i < MAX_CONNECTIONS; i++) {
		if (flights.v[i].cur && strcmp(flights.v[i].run_id, run_id) == 0) {
			n = ++flights.v[i].cur;
			break;
		}
		if (!flights.v[i].cur && free_slot < 0)
			free_slot = i;
	}
	if (!n && free_slot >= 0) {
		snprintf(flights.v[free_slot].run_id, sizeof flights.v[0].run_id, "%s", run_id);
		n = flights.v[free_slot].cur = 1;
	}
	pthread_mutex_unlock(&flights.mu);
	return n;
}

/* Count one report of run_id no longer in flight. */
static void
flight_leave(const char *run_id)
{
	int i;

	pthread_mutex_lock(&flights.mu);
	for (i = 0; i < MAX_CONNECTIONS; i++)
		if (flights.v[i].cur && strcmp(flights.v[i].run_id, run_id) == 0) {
			flights.v[i].cur--;
			break;
		}
	pthread_mutex_unlock(&flights.mu);
}

/* Raise the stored max_in_flight of run_id to at least n. */
static void
flight_persist(const char *run_id, int n)
{
	struct ek_err e = { 0 };

	pthread_mutex_lock(&store.mu);
	if (db_begin_write(&store.db, &e) == 0 &&
	    sql_exec(&e, "UPDATE runs SET max_in_flight=? WHERE run_id=? AND max_in_flight<?",
	    "isi", (int64_t)n, run_id, (int64_t)n) == 0)
		db_commit(&store.db, &e);
	else
		db_rollback(&store.db);
	pthread_mutex_unlock(&store.mu);
	if (e.msg[0])
		say("%s: max_in_flight: %s", run_id, e.msg);
}

/* ------------------------------------------------------------------ */
/* requests                                                            */

struct req {
	struct MHD_Connection *conn;
	char method[16], path[512], arg[200];   /* arg: the path's "*" segment */
	const struct route *route;
	char allow[64];                          /* methods the path supports */
	char *body;
	size_t len, cap, limit;
	bool too_big, is_result, rollback;
	json_t *in, *out;
	struct fault fault;
	struct ek_err e;
	int64_t t0;
};

typedef int handler_fn(struct req *rq);

/* Set rq->out to an error body; return status. */
__attribute__((format(printf, 4, 5)))
static int
fail(struct req *rq, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	char detail[512];

	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	json_decref(rq->out);
	rq->out = json_pack("{s:s, s:s}", "error", code, "detail", detail);
	return status;
}

/* Answer 410 session_over for a session in state status. */
static int
fail_over(struct req *rq, const char *status)
{
	fail(rq, 410, "session_over", "the session is %s", status);
	json_object_set_new(rq->out, "status", json_string(status));
	return 410;
}

/* Answer 500 for the store error in rq->e; the transaction will roll back. */
static int
internal(struct req *rq)
{
	say("%s %s: %s", rq->method, rq->path, rq->e.msg);
	rq->rollback = true;
	return fail(rq, 500, "internal", "%s", rq->e.msg);
}

/* Set rq->out to obj (NULL → 500); return status. */
static int
answer(struct req *rq, int status, json_t *obj)
{
	json_decref(rq->out);
	rq->out = obj;
	if (!obj)
		return fail(rq, 500, "internal", "out of memory");
	return status;
}

/* The request body as JSON (parsed once); NULL with a 400 answer set. */
static json_t *
body_json(struct req *rq)
{
	json_error_t je;

	if (rq->in)
		return rq->in;
	if (rq->too_big) {
		fail(rq, 400, "invalid", "body larger than %zu bytes", rq->limit);
		return NULL;
	}
	rq->in = json_loadb(rq->body ? rq->body : "", rq->len, JSON_REJECT_DUPLICATES, &je);
	if (!rq->in)
		fail(rq, 400, "invalid", "body is not JSON: %s", je.text);
	return rq->in;
}

/* Lock the store, begin a write and expire lapsed leases; -1 with 500 set. */
static int
tx_begin(struct req *rq)
{
	pthread_mutex_lock(&store.mu);
	if (db_begin_write(&store.db, &rq->e) == 0 &&
	    sql_exec(&rq->e, "UPDATE sessions SET status='expired'"
	    " WHERE status='current' AND lease_expires_ms<?", "i", now_ms()) == 0)
		return 0;
	db_rollback(&store.db);
	pthread_mutex_unlock(&store.mu);
	internal(rq);
	return -1;
}

/* Commit (or roll back after an internal error) and unlock; final status. */
static int
tx_end(struct req *rq, int status)
{
	if (rq->rollback || status >= 500)
		db_rollback(&store.db);
	else if (db_commit(&store.db, &rq->e) < 0)
		status = -1;
	pthread_mutex_unlock(&store.mu);
	return status < 0 ? internal(rq) : status;
}

/* ------------------------------------------------------------------ */
/* sessions                                                            */

struct sess {
	char incarnation[40], executor_id[40], cred_sha256[65], status[16];
};

/* Load session sid: 1 found, 0 unknown, -1 store error (rq->e). */
static int
sess_load(struct req *rq, const char *sid, struct sess *s)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT incarnation, executor_id, cred_sha256, status"
	    " FROM sessions WHERE session_id=?", "s", sid);
	int r;

	if (!st)
		return -1;
	r = db_step(&store.db, st, &rq->e);
	if (r == 1) {
		db_col_text(st, 0, s->incarnation, sizeof s->incarnation);
		db_col_text(st, 1, s->executor_id, sizeof s->executor_id);
		db_col_text(st, 2, s->cred_sha256, sizeof s->cred_sha256);
		db_col_text(st, 3, s->status, sizeof s->status);
	}
	sqlite3_finalize(st);
	return r;
}

/* Does the Bearer credential hash to want (compared in constant time)? */
static bool
cred_ok(struct req *rq, const char *want)
{
	const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	char got[65];
	unsigned diff = 0;
	size_t i;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0 || strlen(want) != 64)
		return false;
	for (h += 7; *h == ' '; h++)
		;
	sha256_hex(h, strlen(h), got);
	for (i = 0; i < 64; i++)
		diff |= (unsigned)(got[i] ^ want[i]);
	return diff == 0;
}

/* Admit a request for session sid (and incarnation inc, if given): 0 if
 * current and the credential matches, else the error status (answer set).
 * unknown_401: an unknown session is 401 (results) rather than 404. */
static int
sess_gate(struct req *rq, const char *sid, const char *inc, bool unknown_401)
{
	struct sess s;
	int r = sess_load(rq, sid, &s);

	if (r < 0)
		return internal(rq);
	if (r == 0 && !unknown_401)
		return fail(rq, 404, "unknown_session", "no session '%s'", sid);
	if (r == 0 || !cred_ok(rq, s.cred_sha256))
		return fail(rq, 401, "unauthorized", "credential does not match the session");
	if (inc && strcmp(inc, s.incarnation) != 0)
		return fail(rq, 401, "unauthorized", "incarnation does not match the session");
	if (strcmp(s.status, "current") != 0)
		return fail_over(rq, s.status);
	return 0;
}

/* POST /v1/sessions: negotiate a new session, replacing earlier ones. */
static int
h_negotiate(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *xid = in ? json_string_value(json_object_get(in, "executor_id")) : NULL;
	char sid[24], cred[72], cred_sha[65];
	int64_t now = now_ms();
	int status;

	if (!in)
		return 400;
	if (!xid || !is_hex(xid, 32))
		return fail(rq, 400, "invalid", "executor_id must be 32 hex digits");
	if (random_id(sid, sizeof sid, "ses-", 8) < 0 || random_id(cred, sizeof cred, "", 32) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	sha256_hex(cred, strlen(cred), cred_sha);
	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "UPDATE sessions SET status='replaced'"
	    " WHERE executor_id=? AND status='current'", "s", xid) < 0 ||
	    sql_exec(&rq->e, "INSERT INTO sessions(session_id, incarnation, executor_id,"
	    " cred_sha256, status, lease_expires_ms, created_ms) VALUES(?,?,?,?,'current',?,?)",
	    "ssssii", sid, store.incarnation, xid, cred_sha, now + cfg.lease_ms, now) < 0)
		status = internal(rq);
	else
		status = answer(rq, 201, json_pack("{s:s, s:s, s:s, s:I, s:I}",
		    "incarnation", store.incarnation, "session_id", sid, "credential", cred,
		    "lease_ms", (json_int_t)cfg.lease_ms, "heartbeat_ms", (json_int_t)cfg.heartbeat_ms));
	return tx_end(rq, status);
}

/* How many inspections wait for session sid's answer; -1 on error. */
static int64_t
inspections_pending(struct req *rq, const char *sid)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT COUNT(*) FROM inspections"
	    " WHERE session_id=? AND status='pending'", "s", sid);
	int64_t n = st && db_step(&store.db, st, &rq->e) == 1 ? sqlite3_column_int64(st, 0) : -1;

	sqlite3_finalize(st);
	return n;
}

/* POST /v1/sessions/{sid}/heartbeat: extend the lease; say how many
 * inspections wait for this session, so the executor relays them. */
static int
h_heartbeat(struct req *rq)
{
	int64_t pending;
	int status;

	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false))) {
		if (sql_exec(&rq->e, "UPDATE sessions SET lease_expires_ms=? WHERE session_id=?",
		    "is", now_ms() + cfg.lease_ms, rq->arg) < 0 ||
		    (pending = inspections_pending(rq, rq->arg)) < 0)
			status = internal(rq);
		else
			status = answer(rq, 200, json_pack("{s:s, s:I, s:I}", "status", "current",
			    "lease_ms", (json_int_t)cfg.lease_ms, "inspections_pending", (json_int_t)pending));
	}
	return tx_end(rq, status);
}

/* DELETE /v1/sessions/{sid}: close the session. */
static int
h_close(struct req *rq)
{
	int status;

	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false))) {
		if (sql_exec(&rq->e, "UPDATE sessions SET status='closed' WHERE session_id=?",
		    "s", rq->arg) < 0)
			status = internal(rq);
		else
			status = answer(rq, 200, json_pack("{s:s}", "status", "closed"));
	}
	return tx_end(rq, status);
}

/* Can by (current, gated) adopt old?  0, or the error status (answer set). */
static int
adoption_check(struct req *rq, const char *old, const char *by)
{
	struct sess o, b;
	int r = sess_load(rq, old, &o);

	if (r < 0 || sess_load(rq, by, &b) < 0)
		return internal(rq);
	if (r == 0)
		return fail(rq, 404, "unknown_session", "no session '%s'", old);
	if (strcmp(o.executor_id, b.executor_id) != 0)
		return fail(rq, 409, "foreign_session", "session '%s' belongs to another executor", old);
	if (strcmp(o.status, "current") == 0)
		return fail(rq, 409, "live_session", "session '%s' is current: nothing to adopt", old);
	return 0;
}

/* POST /v1/sessions/{sid}/adoptions {"session_id": old}: let sid report
 * the runs of old, an ended session of the same executor.  The latest
 * adopter wins: an earlier adopter is over, since an executor has one
 * current session at most. */
static int
h_adopt(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *old = in ? json_string_value(json_object_get(in, "session_id")) : NULL;
	int status;

	if (!in)
		return 400;
	if (!old || !is_run_id(old) || strlen(old) > 64)   /* same alphabet as run ids */
		return fail(rq, 400, "invalid", "session_id must name a session");
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false)) &&
	    !(status = adoption_check(rq, old, rq->arg))) {
		if (sql_exec(&rq->e, "INSERT INTO adoptions(session_id, by_session, adopted_ms)"
		    " VALUES(?,?,?) ON CONFLICT(session_id) DO UPDATE SET by_session=excluded.by_session,"
		    " adopted_ms=excluded.adopted_ms", "ssi", old, rq->arg, now_ms()) < 0)
			status = internal(rq);
		else
			status = answer(rq, 200, json_pack("{s:s, s:s, s:s}", "status", "adopted",
			    "session_id", old, "by", rq->arg));
	}
	return tx_end(rq, status);
}

/* ------------------------------------------------------------------ */
/* the work feed and receipts                                          */

/* Append to runs the specs selected by st (column 0 = spec); -1 on error. */
static int
append_specs(struct req *rq, sqlite3_stmt *st, json_t *runs, json_t *ids)
{
	int r;

	while ((r = db_step(&store.db, st, &rq->e)) == 1) {
		json_t *spec = json_loads(col(st, 0), 0, NULL);
		if (spec)
			json_array_append_new(runs, spec);
		if (ids)
			json_array_append_new(ids, json_string(col(st, 1)));
	}
	sqlite3_finalize(st);
	return r;
}

/* Hand session sid up to max runs: its unreceipted ones, then new ones. */
static int
feed(struct req *rq, int64_t max)
{
	json_t *runs = json_array(), *ids = json_array(), *v;
	sqlite3_stmt *st;
	size_t i;
	int r = -1;

	st = sql_prep(&rq->e, "SELECT spec FROM runs WHERE state='offered' AND owner_session=?"
	    " ORDER BY submit_seq LIMIT ?", "si", rq->arg, max);
	if (st && append_specs(rq, st, runs, NULL) == 0) {
		st = sql_prep(&rq->e, "SELECT spec, run_id FROM runs WHERE state='queued'"
		    " ORDER BY submit_seq LIMIT ?", "i", max - (int64_t)json_array_size(runs));
		r = st ? append_specs(rq, st, runs, ids) : -1;
	}
	json_array_foreach(ids, i, v)
		if (r == 0 && sql_exec(&rq->e, "UPDATE runs SET state='offered', owner_session=?"
		    " WHERE run_id=?", "ss", rq->arg, json_string_value(v)) < 0)
			r = -1;
	json_decref(ids);
	if (r < 0) {
		json_decref(runs);
		return internal(rq);
	}
	return answer(rq, 200, json_pack("{s:o}", "runs", runs));
}

/* GET /v1/sessions/{sid}/work?max=N: the work feed. */
static int
h_work(struct req *rq)
{
	const char *m = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "max");
	int64_t max = FEED_DEFAULT;
	int status;

	if (m && cli_parse_i64(m, 0, INT32_MAX, &max) < 0)
		return fail(rq, 400, "invalid", "max must be a number from 0 to %d", FEED_MAX);
	if (max > FEED_MAX)
		max = FEED_MAX;
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false)))
		status = feed(rq, max);
	return tx_end(rq, status);
}

/* Check a receipts body; NULL if valid, else why not. */
static const char *
receipts_check(json_t *list)
{
	static const char *const outcomes[] = { "accepted", "duplicate", "conflict", "invalid", NULL };
	json_t *r;
	size_t i;

	if (!json_is_array(list))
		return "receipts must be an array";
	json_array_foreach(list, i, r) {
		const char *o = json_string_value(json_object_get(r, "outcome"));
		if (!json_is_string(json_object_get(r, "run_id")) ||
		    !json_is_string(json_object_get(r, "receipt")))
			return "each receipt needs string run_id and receipt";
		if (!o || !one_of(o, outcomes))
			return "outcome must be accepted, duplicate, conflict or invalid";
	}
	return NULL;
}

/* Record one receipt of session sid; add 1 to *n if it named a run the
 * session owns (or an unowned one, which it then owns). */
static int
receipt_record(struct req *rq, json_t *r, int64_t *n)
{
	const char *o = json_string_value(json_object_get(r, "outcome"));
	const char *state = strcmp(o, "conflict") == 0 || strcmp(o, "invalid") == 0 ?
	    "rejected" : "accepted";

	if (sql_exec(&rq->e, "UPDATE runs SET receipt=?, owner_session=?,"
	    " state=CASE state WHEN 'finished' THEN 'finished' ELSE ? END"
	    " WHERE run_id=? AND (owner_session=? OR owner_session IS NULL)", "sssss",
	    json_string_value(json_object_get(r, "receipt")), rq->arg, state,
	    json_string_value(json_object_get(r, "run_id")), rq->arg) < 0)
		return -1;
	*n += sqlite3_changes(store.db.h);
	return 0;
}

/* POST /v1/sessions/{sid}/receipts: acceptance receipts. */
static int
h_receipts(struct req *rq)
{
	json_t *in = body_json(rq), *list = in ? json_object_get(in, "receipts") : NULL, *r;
	const char *why;
	int64_t n = 0;
	size_t i;
	int status;

	if (!in)
		return 400;
	if ((why = receipts_check(list)))
		return fail(rq, 400, "invalid", "%s", why);
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, rq->arg, NULL, false))) {
		json_array_foreach(list, i, r)
			if (!status && receipt_record(rq, r, &n) < 0)
				status = internal(rq);
		if (!status)
			status = answer(rq, 200, json_pack("{s:I}", "recorded", (json_int_t)n));
	}
	return tx_end(rq, status);
}

/* ------------------------------------------------------------------ */
/* results                                                             */

struct result {
	const char *run_id, *incarnation, *session_id;
};

/* Check a result body; NULL if valid, else why not (r filled as far as
 * the strings go, for the report log). */
static const char *
result_check(json_t *in, struct result *r)
{
	static const char *const fields[] = { "run_id", "incarnation", "session_id", "outcome",
		"exit_code", "wait_status", "message", "chosen_at", NULL };
	static const char *const outcomes[] = { "exited", "killed", "timeout", "cancelled",
		"exec_failed", NULL };
	const char *k, *o;
	json_t *v, *ws, *msg;

	if (!json_is_object(in))
		return "result is not a JSON object";
	r->run_id = json_string_value(json_object_get(in, "run_id"));
	r->incarnation = json_string_value(json_object_get(in, "incarnation"));
	r->session_id = json_string_value(json_object_get(in, "session_id"));
	json_object_foreach(in, k, v)
		if (!one_of(k, fields))
			return "unknown field in result";
	if (!r->run_id || !is_run_id(r->run_id) || !r->incarnation || !r->session_id)
		return "run_id, incarnation and session_id must be strings (run_id of [A-Za-z0-9._:-])";
	if (!(o = json_string_value(json_object_get(in, "outcome"))) || !one_of(o, outcomes))
		return "outcome must be exited, killed, timeout, cancelled or exec_failed";
	v = json_object_get(in, "exit_code");
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 255)
		return "exit_code must be an integer from 0 to 255";
	ws = json_object_get(in, "wait_status");
	if (!ws || !(json_is_integer(ws) || json_is_null(ws)))
		return "wait_status must be an integer or null";
	msg = json_object_get(in, "message");
	if (!json_is_string(msg) || json_string_length(msg) > MESSAGE_MAX)
		return "message must be a string of at most 4096 bytes";
	if (!json_is_integer(json_object_get(in, "chosen_at")))
		return "chosen_at must be an integer";
	return NULL;
}

/* Keep one report row: its run, session, body hash, answer and fault. */
static int
report_insert(struct req *rq, const struct result *r, const char *sha, int status)
{
	return sql_exec(&rq->e, "INSERT INTO reports(run_id, session_id, body_sha256, status,"
	    " error, fault, at) VALUES(?,?,?,?,?,?,?)", "sssissi", r->run_id, r->session_id, sha,
	    (int64_t)status, json_string_value(json_object_get(rq->out, "error")),
	    rq->fault.kind ? fault_names[rq->fault.kind] : NULL, now_ms());
}

/* The session that adopted sid into *by: 1, 0 none, -1 store error. */
static int
adopter_of(struct req *rq, const char *sid, char *by, size_t n)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT by_session FROM adoptions WHERE session_id=?",
	    "s", sid);
	int r;

	if (!st)
		return -1;
	if ((r = db_step(&store.db, st, &rq->e)) == 1)
		db_col_text(st, 0, by, n);
	sqlite3_finalize(st);
	return r;
}

/* Admit a report of r: the credential must be that of r's own session,
 * current, or, once r's session was adopted, that of its adopter, current
 * (the body keeps naming the session that accepted the run). */
static int
report_gate(struct req *rq, const struct result *r)
{
	char by[64];
	struct sess s;
	int adopted = adopter_of(rq, r->session_id, by, sizeof by), known;

	if (adopted < 0)
		return internal(rq);
	if (!adopted)
		return sess_gate(rq, r->session_id, r->incarnation, true);
	if ((known = sess_load(rq, r->session_id, &s)) < 0)
		return internal(rq);
	if (!known || strcmp(s.incarnation, r->incarnation) != 0)
		return fail(rq, 401, "unauthorized", "incarnation does not match the session");
	return sess_gate(rq, by, NULL, true);
}

/* Record r unless a protocol check refuses it; the HTTP status. */
static int
result_record(struct req *rq, const struct result *r, const char *sha)
{
	sqlite3_stmt *st;
	char owner[64] = "", rsha[65] = "";
	int64_t record_id = 0;
	int found, status;

	if ((status = report_gate(rq, r)))
		return status;
	if (!(st = sql_prep(&rq->e, "SELECT r.owner_session, s.record_id, s.body_sha256 FROM runs r"
	    " LEFT JOIN results s ON s.run_id=r.run_id WHERE r.run_id=?", "s", r->run_id)) ||
	    (found = db_step(&store.db, st, &rq->e)) < 0) {
		sqlite3_finalize(st);
		return internal(rq);
	}
	if (found) {
		db_col_text(st, 0, owner, sizeof owner);
		record_id = sqlite3_column_int64(st, 1);
		db_col_text(st, 2, rsha, sizeof rsha);
	}
	sqlite3_finalize(st);
	if (!found)
		return fail(rq, 404, "unknown_run", "no run '%s'", r->run_id);
	if (owner[0] && strcmp(owner, r->session_id) != 0)
		return fail(rq, 409, "wrong_session", "run '%s' is owned by another session", r->run_id);
	if (record_id)
		return strcmp(rsha, sha) == 0 ? answer(rq, 200, json_pack("{s:s, s:I}",
		    "status", "duplicate", "record_id", (json_int_t)record_id)) :
		    fail(rq, 409, "conflict", "a different result is recorded for run '%s'", r->run_id);
	if (sql_exec(&rq->e, "INSERT INTO results(run_id, session_id, body, body_sha256,"
	    " recorded_at) VALUES(?,?,?,?,?)", "ssssi", r->run_id, r->session_id, rq->body, sha,
	    now_ms()) < 0)
		return internal(rq);
	record_id = sqlite3_last_insert_rowid(store.db.h);
	if (sql_exec(&rq->e, "INSERT INTO ledger(run_id, charge, at)"
	    " SELECT run_id, 1 + cost, ? FROM runs WHERE run_id=?", "is", now_ms(), r->run_id) < 0 ||
	    sql_exec(&rq->e, "UPDATE runs SET state='finished', owner_session=? WHERE run_id=?",
	    "ss", r->session_id, r->run_id) < 0)
		return internal(rq);
	return answer(rq, 200, json_pack("{s:s, s:I}", "status", "recorded",
	    "record_id", (json_int_t)record_id));
}

/* POST /v1/results: one terminal result, checked in the protocol's order. */
static int
h_result(struct req *rq)
{
	struct result r = { NULL, NULL, NULL };
	const char *why = NULL;
	char sha[65];
	json_t *in = body_json(rq);
	int status;

	sha256_hex(rq->body ? rq->body : "", rq->len, sha);
	if (in)
		why = result_check(in, &r);
	if (tx_begin(rq) < 0)
		return 500;
	if (!in)
		status = 400;
	else if (why)
		status = fail(rq, 400, "invalid", "%s", why);
	else
		status = result_record(rq, &r, sha);
	if (status < 500 && report_insert(rq, &r, rq->too_big ? NULL : sha, status) < 0)
		status = internal(rq);
	return tx_end(rq, status);
}

/* Keep a report row for a /v1/results request a fault kept from handling. */
static void
report_fault(struct req *rq, int status)
{
	json_t *in = rq->in;
	struct result r = { json_string_value(json_object_get(in, "run_id")), NULL,
		json_string_value(json_object_get(in, "session_id")) };
	char sha[65];

	if (!rq->is_result)
		return;
	sha256_hex(rq->body ? rq->body : "", rq->len, sha);
	if (tx_begin(rq) < 0)
		return;
	if (report_insert(rq, &r, rq->too_big ? NULL : sha, status) < 0)
		rq->rollback = true;
	tx_end(rq, 0);            /* the fault's own status must not roll back */
}

/* ------------------------------------------------------------------ */
/* admin: runs                                                         */

/* Check one field of a RUNSPEC; NULL if valid, else why not. */
static const char *
spec_field(const char *k, json_t *v)
{
	const char *key;
	json_t *x;
	size_t i;

	if (!strcmp(k, "run_id"))
		return json_is_string(v) && is_run_id(json_string_value(v)) ? NULL :
		    "run_id must be 1..128 bytes of [A-Za-z0-9._:-]";
	if (!strcmp(k, "txn_id"))
		return json_is_string(v) && json_string_length(v) >= 1 && json_string_length(v) <= 256 ?
		    NULL : "txn_id must be a string of 1..256 bytes";
	if (!strcmp(k, "program"))
		return json_is_string(v) && json_string_length(v) ? NULL : "program must be a non-empty string";
	if (!strcmp(k, "cwd"))
		return json_is_string(v) ? NULL : "cwd must be a string";
	if (!strcmp(k, "due_at"))
		return json_is_integer(v) && json_integer_value(v) >= 0 ? NULL : "due_at must be an integer";
	if (!strcmp(k, "timeout_ms"))
		return json_is_integer(v) && json_integer_value(v) > 0 ? NULL : "timeout_ms must be a positive integer";
	if (!strcmp(k, "args")) {
		if (!json_is_array(v))
			return "args must be an array of strings";
		json_array_foreach(v, i, x)
			if (!json_is_string(x))
				return "args must be an array of strings";
		return NULL;
	}
	if (!strcmp(k, "env")) {
		if (!json_is_object(v))
			return "env must be an object of strings";
		json_object_foreach(v, key, x)
			if (!json_is_string(x))
				return "env must be an object of strings";
		return NULL;
	}
	if (!strcmp(k, "policy")) {
		x = json_object_get(v, "cost");
		if (!json_is_object(v) || (x && (!json_is_integer(x) || json_integer_value(x) < 0)))
			return "policy must be an object; policy.cost a non-negative integer";
		return NULL;
	}
	return "unknown field in run spec";
}

/* Check a RUNSPEC (adding "args":[] when absent); NULL if valid, else why. */
static const char *
spec_check(json_t *spec)
{
	const char *k, *why;
	json_t *v;

	if (!json_is_object(spec))
		return "a run spec must be an object";
	json_object_foreach(spec, k, v)
		if ((why = spec_field(k, v)))
			return why;
	if (!json_object_get(spec, "run_id") || !json_object_get(spec, "txn_id") ||
	    !json_object_get(spec, "program"))
		return "run_id, txn_id and program are required";
	if (!json_object_get(spec, "args"))
		json_object_set_new(spec, "args", json_array());
	return NULL;
}

/* Store one checked spec: 0 new, 1 identical duplicate, 2 conflict, -1 error. */
static int
spec_store(struct req *rq, json_t *spec, int64_t cost)
{
	const char *run_id = json_string_value(json_object_get(spec, "run_id"));
	char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	sqlite3_stmt *st = text ? sql_prep(&rq->e, "SELECT spec FROM runs WHERE run_id=?", "s", run_id) : NULL;
	int r = st ? db_step(&store.db, st, &rq->e) : -1;

	if (r == 1)
		r = strcmp(col(st, 0), text) == 0 ? 1 : 2;
	sqlite3_finalize(st);
	if (r == 0 && sql_exec(&rq->e, "INSERT INTO runs(run_id, submit_seq, spec, cost, state,"
	    " submitted_ms) VALUES(?, (SELECT COALESCE(MAX(submit_seq), 0) + 1 FROM runs), ?, ?,"
	    " 'queued', ?)", "ssii", run_id, text, cost, now_ms()) < 0)
		r = -1;
	free(text);
	return r;
}

/* Store every spec of list in one transaction; the HTTP status. */
static int
submit_all(struct req *rq, json_t *list)
{
	json_t *spec, *cost;
	int64_t n = 0, dups = 0;
	size_t i;
	int r = 0;

	if (tx_begin(rq) < 0)
		return 500;
	json_array_foreach(list, i, spec) {
		cost = json_object_get(json_object_get(spec, "policy"), "cost");
		if ((r = spec_store(rq, spec, cost ? json_integer_value(cost) : 0)) < 0)
			return tx_end(rq, internal(rq));
		if (r == 2) {
			rq->rollback = true;
			return tx_end(rq, fail(rq, 409, "conflict", "run '%s' was submitted with a"
			    " different spec", json_string_value(json_object_get(spec, "run_id"))));
		}
		n += r == 0;
		dups += r == 1;
	}
	return tx_end(rq, answer(rq, 200, json_pack("{s:I, s:I}", "submitted", (json_int_t)n,
	    "duplicates", (json_int_t)dups)));
}

/* POST /admin/runs: submit one RUNSPEC or {"runs":[...]}, all or nothing. */
static int
h_submit(struct req *rq)
{
	json_t *in = body_json(rq), *list, *spec;
	const char *why;
	size_t i;
	int status = 0;

	if (!in)
		return 400;
	list = json_object_get(in, "runs");
	if (list && json_object_size(in) == 1 && json_is_array(list))
		json_incref(list);
	else
		list = json_pack("[O]", in);
	json_array_foreach(list, i, spec)
		if (!status && (why = spec_check(spec)))
			status = fail(rq, 400, "invalid", "run %zu: %s", i, why);
	if (!status)
		status = submit_all(rq, list);
	json_decref(list);
	return status;
}

/* Select rows with sql (bound to arg unless NULL) into obj[key] as a list
 * of objects named by names (integers stay integers); 0 or -1. */
static int
rows_into(struct req *rq, json_t *obj, const char *key, const char *sql, const char *arg,
    const char *const *names)
{
	json_t *list = json_array(), *row;
	sqlite3_stmt *st = arg ? sql_prep(&rq->e, sql, "s", arg) : sql_prep(&rq->e, sql, "");
	int r = -1, i;

	while (st && (r = db_step(&store.db, st, &rq->e)) == 1) {
		row = json_object();
		for (i = 0; names[i]; i++)
			json_object_set_new(row, names[i],
			    sqlite3_column_type(st, i) == SQLITE_INTEGER ?
			    json_integer(sqlite3_column_int64(st, i)) : col_json(st, i));
		json_array_append_new(list, row);
	}
	sqlite3_finalize(st);
	json_object_set_new(obj, key, list);
	return r;
}

/* GET /admin/runs: every run in submit order. */
static int
h_list_runs(struct req *rq)
{
	static const char *const names[] = { "run_id", "state", "owner_session", "record_id", NULL };
	json_t *out = json_object();

	if (tx_begin(rq) < 0) {
		json_decref(out);
		return 500;
	}
	if (rows_into(rq, out, "runs", "SELECT r.run_id, r.state, r.owner_session, s.record_id"
	    " FROM runs r LEFT JOIN results s ON s.run_id=r.run_id ORDER BY r.submit_seq",
	    NULL, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* Build the record of run rq->arg: 1 found, 0 unknown, -1 error. */
static int
run_record(struct req *rq, json_t **out)
{
	static const char *const report_cols[] = { "seq", "session_id", "body_sha256", "status",
		"error", "fault", NULL };
	static const char *const ledger_cols[] = { "charge", "at", NULL };
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT r.state, r.owner_session, r.receipt, r.spec,"
	    " s.body, s.record_id, r.max_in_flight FROM runs r LEFT JOIN results s"
	    " ON s.run_id=r.run_id WHERE r.run_id=?", "s", rq->arg);
	int r = st ? db_step(&store.db, st, &rq->e) : -1;

	if (r == 1)
		*out = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:I}", "run_id", rq->arg,
		    "state", col_json(st, 0), "owner_session", col_json(st, 1),
		    "receipt", col_json(st, 2), "spec", json_loads(col(st, 3), 0, NULL),
		    "result", col(st, 4) ? json_loads(col(st, 4), 0, NULL) : json_null(),
		    "record_id", col(st, 5) ? json_integer(sqlite3_column_int64(st, 5)) : json_null(),
		    "max_in_flight", (json_int_t)sqlite3_column_int64(st, 6));
	sqlite3_finalize(st);
	if (r == 1 && (rows_into(rq, *out, "reports", "SELECT seq, session_id, body_sha256, status,"
	    " error, fault FROM reports WHERE run_id=? ORDER BY seq", rq->arg, report_cols) < 0 ||
	    rows_into(rq, *out, "ledger", "SELECT charge, at FROM ledger WHERE run_id=?",
	    rq->arg, ledger_cols) < 0))
		r = -1;
	return r;
}

/* GET /admin/runs/{id}: one run's record, reports and ledger. */
static int
h_show_run(struct req *rq)
{
	json_t *run = NULL;
	int r;

	if (tx_begin(rq) < 0)
		return 500;
	r = run_record(rq, &run);
	if (r < 0) {
		json_decref(run);
		return tx_end(rq, internal(rq));
	}
	if (r == 0)
		return tx_end(rq, fail(rq, 404, "unknown_run", "no run '%s'", rq->arg));
	return tx_end(rq, answer(rq, 200, run));
}

/* Run sql returning one integer; -1 on error. */
static int64_t
count(struct req *rq, const char *sql)
{
	sqlite3_stmt *st = sql_prep(&rq->e, sql, "");
	int64_t n = st && db_step(&store.db, st, &rq->e) == 1 ? sqlite3_column_int64(st, 0) : -1;

	sqlite3_finalize(st);
	return n;
}

/* GET /admin/summary: counts for a quick look. */
static int
h_summary(struct req *rq)
{
	json_t *states = json_pack("{s:i, s:i, s:i, s:i, s:i}", "queued", 0, "offered", 0,
	    "accepted", 0, "rejected", 0, "finished", 0);
	sqlite3_stmt *st;
	int64_t results, ledger, reports;
	int r = -1;

	if (tx_begin(rq) < 0) {
		json_decref(states);
		return 500;
	}
	st = sql_prep(&rq->e, "SELECT state, COUNT(*) FROM runs GROUP BY state", "");
	while (st && (r = db_step(&store.db, st, &rq->e)) == 1)
		json_object_set_new(states, col(st, 0), json_integer(sqlite3_column_int64(st, 1)));
	sqlite3_finalize(st);
	results = count(rq, "SELECT COUNT(*) FROM results");
	ledger = count(rq, "SELECT COALESCE(SUM(charge), 0) FROM ledger");
	reports = count(rq, "SELECT COUNT(*) FROM reports");
	if (r < 0 || results < 0 || ledger < 0 || reports < 0) {
		json_decref(states);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, json_pack("{s:s, s:o, s:I, s:I, s:I}",
	    "incarnation", store.incarnation, "runs", states, "results", (json_int_t)results,
	    "ledger_total", (json_int_t)ledger, "reports", (json_int_t)reports)));
}

/* ------------------------------------------------------------------ */
/* inspections: a client's InspectRetainedRun, relayed                 */
/*
 * The dispatcher never calls the executor, so a client's lookup waits in
 * `inspections` until the executor holding the named session pulls it
 * (its heartbeat says how many wait), answers it locally and posts the
 * answer, which is recorded once.  The run id is stored as the client
 * sent it: judging it is the executor's business, so a malformed id comes
 * back as an ERROR answer, never as ABSENT.
 */

enum { INSPECT_RUN_MAX = 4096, INSPECT_PENDING_MAX = 1024,
	INSPECT_WAIT_MAX = 30000, INSPECT_POLL_MS = 50, INSPECT_ANSWER_MAX = 16384 };

/* Check a client's inspection request; NULL if valid, else why not. */
static const char *
inspection_check(json_t *in)
{
	static const char *const fields[] = { "run_id", "session_id", "executor_id", NULL };
	json_t *run = json_object_get(in, "run_id"), *sid = json_object_get(in, "session_id");
	json_t *xid = json_object_get(in, "executor_id"), *v;
	const char *k;

	if (!json_is_object(in))
		return "body must be a JSON object";
	json_object_foreach(in, k, v)
		if (!one_of(k, fields))
			return "unknown field in inspection";
	if (!json_is_string(run) || json_string_length(run) > INSPECT_RUN_MAX)
		return "run_id must be a string of at most 4096 bytes";
	if (!sid == !xid)
		return "name exactly one of session_id and executor_id";
	if (sid && (!json_is_string(sid) || json_string_length(sid) > 128))
		return "session_id must be a string of at most 128 bytes";
	if (xid && (!json_is_string(xid) || !is_hex(json_string_value(xid), 32)))
		return "executor_id must be 32 hex digits";
	return NULL;
}

/* The session a request names (session_id, or executor_id's newest one)
 * into sid, which must be current: 0, or the error status (answer set). */
static int
inspection_session(struct req *rq, json_t *in, char *sid, size_t n)
{
	const char *want = json_string_value(json_object_get(in, "session_id"));
	const char *xid = json_string_value(json_object_get(in, "executor_id"));
	sqlite3_stmt *st = want ? sql_prep(&rq->e, "SELECT session_id, status FROM sessions"
	    " WHERE session_id=?", "s", want) : sql_prep(&rq->e, "SELECT session_id, status"
	    " FROM sessions WHERE executor_id=? ORDER BY status='current' DESC, created_ms DESC,"
	    " rowid DESC LIMIT 1", "s", xid);
	char status[16] = "";
	int r = st ? db_step(&store.db, st, &rq->e) : -1;

	if (r == 1) {
		db_col_text(st, 0, sid, n);
		db_col_text(st, 1, status, sizeof status);
	}
	sqlite3_finalize(st);
	if (r < 0)
		return internal(rq);
	if (r == 0 && want)
		return fail(rq, 404, "unknown_session", "no session '%s'", want);
	if (r == 0)
		return fail(rq, 404, "unknown_session", "no session of executor '%s'", xid);
	return strcmp(status, "current") == 0 ? 0 : fail_over(rq, status);
}

/* POST /v1/inspections: a client asks, through the executor holding a
 * current session, what that executor stores about a run. */
static int
h_inspection_new(struct req *rq)
{
	json_t *in = body_json(rq);
	const char *why;
	char id[32], sid[72];
	int64_t pending;
	int status;

	if (!in)
		return 400;
	if ((why = inspection_check(in)))
		return fail(rq, 400, "invalid", "%s", why);
	if (random_id(id, sizeof id, "insp-", 8) < 0)
		return fail(rq, 500, "internal", "getrandom: %s", strerror(errno));
	if (tx_begin(rq) < 0)
		return 500;
	if ((status = inspection_session(rq, in, sid, sizeof sid)))
		return tx_end(rq, status);
	if ((pending = inspections_pending(rq, sid)) < 0)
		return tx_end(rq, internal(rq));
	if (pending >= INSPECT_PENDING_MAX)   /* the executor answers 32 a heartbeat */
		return tx_end(rq, fail(rq, 429, "overloaded", "%d inspections already wait for "
		    "session '%s'", INSPECT_PENDING_MAX, sid));
	if (sql_exec(&rq->e, "INSERT INTO inspections(inspection_id, session_id, run_id, status,"
	    " created_ms) VALUES(?,?,?,'pending',?)", "sssi", id, sid,
	    json_string_value(json_object_get(in, "run_id")), now_ms()) < 0)
		return tx_end(rq, internal(rq));
	return tx_end(rq, answer(rq, 202, json_pack("{s:s, s:s, s:s}", "inspection_id", id,
	    "status", "pending", "session_id", sid)));
}

/* Set rq->out to inspection rq->arg as it stands: 200 (*done once it is
 * answered, or can no longer be), 404, or 500.  A pending inspection whose
 * session is over is "unanswered": the session gate refuses every answer
 * from it now, so waiting longer cannot help the client. */
static int
inspection_read(struct req *rq, bool *done)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT i.run_id, i.session_id, CASE WHEN"
	    " i.status='pending' AND IFNULL(s.status, '')<>'current' THEN 'unanswered'"
	    " ELSE i.status END, i.answer, i.answered_ms, s.status FROM inspections i"
	    " LEFT JOIN sessions s ON s.session_id=i.session_id WHERE i.inspection_id=?",
	    "s", rq->arg);
	int r = st ? db_step(&store.db, st, &rq->e) : -1;
	json_t *o = NULL;

	if (r == 1) {
		*done = strcmp(col(st, 2), "pending") != 0;
		o = json_pack("{s:s, s:s, s:s, s:s, s:o}", "inspection_id", rq->arg,
		    "run_id", col(st, 0), "session_id", col(st, 1), "status", col(st, 2),
		    "session_status", col_json(st, 5));
		if (o && strcmp(col(st, 2), "answered") == 0) {
			json_t *a = col(st, 3) ? json_loads(col(st, 3), 0, NULL) : NULL;
			json_object_set_new(o, "answer", a ? a : json_null());
			json_object_set_new(o, "answered_ms", json_integer(sqlite3_column_int64(st, 4)));
		}
	}
	sqlite3_finalize(st);
	if (r < 0)
		return internal(rq);
	if (r == 0)
		return fail(rq, 404, "unknown_inspection", "no inspection '%s'", rq->arg);
	return answer(rq, 200, o);
}

/* GET /v1/inspections/{id}?wait_ms=N: the inspection, once answered or
 * after N ms (at most 30000), whichever is first.  The wait bounds only
 * this request: the inspection stays, and a later request reads it. */
static int
h_inspection_get(struct req *rq)
{
	const char *w = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "wait_ms");
	int64_t wait = 0, end, left;
	bool done = false;
	int status;

	if (w && cli_parse_i64(w, 0, INSPECT_WAIT_MAX, &wait) < 0)
		return fail(rq, 400, "invalid", "wait_ms must be a number from 0 to %d", INSPECT_WAIT_MAX);
	if (wait > 0)   /* the idle timeout must not end a long poll */
		MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT,
		    (unsigned int)(wait / 1000 + 15));
	end = mono_ms() + wait;
	for (;;) {
		if (tx_begin(rq) < 0)
			return 500;
		status = tx_end(rq, inspection_read(rq, &done));
		left = end - mono_ms();
		if (status != 200 || done || left <= 0 || atomic_load(&stopping) || peer_gone(rq->conn))
			return status;
		nap(left < INSPECT_POLL_MS ? left : INSPECT_POLL_MS, rq->conn);
	}
}

/* GET /v1/sessions/{sid}/inspections: the session's pending inspections,
 * oldest first, at most 32 (one relay's worth). */
static int
h_inspection_list(struct req *rq)
{
	static const char *const names[] = { "inspection_id", "run_id", "session_id", NULL };
	json_t *out;
	int status;

	if (tx_begin(rq) < 0)
		return 500;
	if ((status = sess_gate(rq, rq->arg, NULL, false)))
		return tx_end(rq, status);
	out = json_object();
	if (rows_into(rq, out, "inspections", "SELECT inspection_id, run_id, session_id"
	    " FROM inspections WHERE session_id=? AND status='pending'"
	    " ORDER BY created_ms, rowid LIMIT 32", rq->arg, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* Check the members of an answer for its outcome; NULL if valid. */
static const char *
answer_fields_check(json_t *a, const char *outcome)
{
	static const char *const found[] = { "outcome", "run_id", "incarnation", "session_id",
		"txn_id", "state", "started", "start_marker", "due_at", NULL };
	static const char *const error[] = { "outcome", "reason", "exit_code", NULL };
	static const char *const other[] = { "outcome", "run_id", NULL };
	const char *const *allowed = strcmp(outcome, "FOUND") == 0 ? found :
	    strcmp(outcome, "ERROR") == 0 ? error : other;
	const char *k;
	json_t *v;
	size_t i;

	/* an answer never carries more, so the program or its arguments
	 * cannot reach the store or a client by this route */
	json_object_foreach(a, k, v)
		if (!one_of(k, allowed))
			return "a field the answer's outcome does not have";
	for (i = 0; allowed[i]; i++)
		if (!json_object_get(a, allowed[i]))
			return "a field of the answer's outcome is missing";
	if (allowed == error)
		return json_is_string(json_object_get(a, "reason")) &&
		    json_is_integer(json_object_get(a, "exit_code")) ? NULL :
		    "reason must be a string, exit_code an integer";
	return NULL;
}

/* Check an executor's answer to an inspection of run_id; NULL if valid. */
static const char *
answer_check(json_t *a, const char *run_id)
{
	static const char *const outcomes[] = { "FOUND", "FILTERED", "ABSENT", "ERROR", NULL };
	const char *o = json_string_value(json_object_get(a, "outcome")), *why;
	const char *r = json_string_value(json_object_get(a, "run_id"));

	if (!json_is_object(a) || !o || !one_of(o, outcomes))
		return "outcome must be FOUND, FILTERED, ABSENT or ERROR";
	if ((why = answer_fields_check(a, o)))
		return why;
	if (strcmp(o, "ERROR") != 0 && (!r || strcmp(r, run_id) != 0))
		return "run_id is not the inspected run's";
	return NULL;
}

/* Load inspection id of session sid: 1 with run_id (malloc'd) and
 * *answered, 0 unknown or another session's, -1 store error. */
static int
inspection_load(struct req *rq, const char *id, const char *sid, char **run_id, bool *answered)
{
	sqlite3_stmt *st = sql_prep(&rq->e, "SELECT run_id, status FROM inspections"
	    " WHERE inspection_id=? AND session_id=?", "ss", id, sid);
	int r = st ? db_step(&store.db, st, &rq->e) : -1;

	if (r == 1) {
		*answered = strcmp(col(st, 1), "answered") == 0;
		if (!(*run_id = strdup(col(st, 0))))
			r = ek_fail(&rq->e, EK_OSERR, "out of memory");
	}
	sqlite3_finalize(st);
	return r;
}

/* Record the answer in rq->in for inspection rq->arg of session sid. */
static int
inspection_record(struct req *rq, const char *sid)
{
	char *run_id = NULL, *text = NULL;
	const char *why;
	bool answered = false;
	int r = inspection_load(rq, rq->arg, sid, &run_id, &answered), status;

	if (r < 0)
		status = internal(rq);
	else if (r == 0)   /* another session's inspection is none of this one's business */
		status = fail(rq, 404, "unknown_inspection", "no inspection '%s' for session '%s'",
		    rq->arg, sid);
	else if (answered)
		status = fail(rq, 409, "conflict", "inspection '%s' is already answered", rq->arg);
	else if ((why = answer_check(rq->in, run_id)))
		status = fail(rq, 400, "invalid", "%s", why);
	else if (!(text = json_dumps(rq->in, JSON_COMPACT)) ||
	    sql_exec(&rq->e, "UPDATE inspections SET status='answered', answer=?, answered_ms=?"
	    " WHERE inspection_id=? AND status='pending'", "sis", text, now_ms(), rq->arg) < 0)
		status = text ? internal(rq) : fail(rq, 500, "internal", "out of memory");
	else
		status = answer(rq, 200, json_pack("{s:s, s:s}", "status", "recorded",
		    "inspection_id", rq->arg));
	free(text);
	free(run_id);
	return status;
}

/* POST /v1/sessions/{sid}/inspections/{id}: the executor's answer,
 * recorded once; a second answer is a conflict. */
static int
h_inspection_answer(struct req *rq)
{
	const char *p = rq->path + strlen("/v1/sessions/");
	char sid[200];
	int status;

	/* the route matched, so p starts with a non-empty sid segment */
	snprintf(sid, sizeof sid, "%.*s", (int)strcspn(p, "/"), p);
	if (!body_json(rq))
		return 400;
	if (rq->len > INSPECT_ANSWER_MAX)
		return fail(rq, 400, "invalid", "answer larger than %d bytes", INSPECT_ANSWER_MAX);
	if (tx_begin(rq) < 0)
		return 500;
	if (!(status = sess_gate(rq, sid, NULL, false)))
		status = inspection_record(rq, sid);
	return tx_end(rq, status);
}

/* ------------------------------------------------------------------ */
/* admin: sessions and faults                                          */

/* Force session rq->arg into status. */
static int
admin_session(struct req *rq, const char *status)
{
	int64_t now = now_ms();

	if (tx_begin(rq) < 0)
		return 500;
	if (sql_exec(&rq->e, "UPDATE sessions SET status=?, lease_expires_ms=CASE WHEN ?='expired'"
	    " THEN MIN(lease_expires_ms, ?) ELSE lease_expires_ms END WHERE session_id=?",
	    "ssis", status, status, now, rq->arg) < 0)
		return tx_end(rq, internal(rq));
	if (sqlite3_changes(store.db.h) == 0)
		return tx_end(rq, fail(rq, 404, "unknown_session", "no session '%s'", rq->arg));
	return tx_end(rq, answer(rq, 200, json_pack("{s:s}", "status", status)));
}

/* POST /admin/sessions/{sid}/revoke, /expire, /replace. */
static int h_revoke(struct req *rq) { return admin_session(rq, "revoked"); }
static int h_expire(struct req *rq) { return admin_session(rq, "expired"); }
static int h_replace(struct req *rq) { return admin_session(rq, "replaced"); }

/* GET /admin/sessions: every session, oldest first. */
static int
h_list_sessions(struct req *rq)
{
	static const char *const names[] = { "session_id", "executor_id", "status",
		"incarnation", "adopted_by", NULL };
	json_t *out = json_object();

	if (tx_begin(rq) < 0) {
		json_decref(out);
		return 500;
	}
	if (rows_into(rq, out, "sessions", "SELECT s.session_id, executor_id, status, incarnation,"
	    " a.by_session FROM sessions s LEFT JOIN adoptions a ON a.session_id = s.session_id"
	    " ORDER BY created_ms, s.rowid", NULL, names) < 0) {
		json_decref(out);
		return tx_end(rq, internal(rq));
	}
	return tx_end(rq, answer(rq, 200, out));
}

/* Parse a fault request into f; NULL if valid, else why not. */
static const char *
fault_parse(json_t *in, struct fault *f)
{
	json_t *c = json_object_get(in, "count"), *d = json_object_get(in, "delay_ms");
	json_t *p = json_object_get(in, "path");
	const char *kind = json_string_value(json_object_get(in, "kind"));

	if (!json_is_object(in) || !kind || !one_of(kind, fault_names + 1))
		return "kind must be delay, drop_ack, 5xx, 429, reset, malformed, hang or 4xx";
	for (f->kind = 1; strcmp(fault_names[f->kind], kind) != 0; f->kind++)
		;
	if (c && (!json_is_integer(c) || json_integer_value(c) < 1))
		return "count must be a positive integer";
	if (d && (!json_is_integer(d) || json_integer_value(d) < 0))
		return "delay_ms must be a non-negative integer";
	if (p && (!json_is_string(p) || json_string_value(p)[0] != '/' ||
	    json_string_length(p) >= sizeof f->path))
		return "path must be a string starting with '/'";
	f->count = c ? json_integer_value(c) : 1;
	f->delay_ms = d ? json_integer_value(d) : f->kind == F_HANG ? 60000 : 0;
	snprintf(f->path, sizeof f->path, "%s", p ? json_string_value(p) : "/v1/results");
	return NULL;
}

/* POST /admin/faults: queue a fault for the next matching requests. */
static int
h_add_fault(struct req *rq)
{
	json_t *in = body_json(rq);
	struct fault f;
	const char *why;
	bool full;

	if (!in)
		return 400;
	if ((why = fault_parse(in, &f)))
		return fail(rq, 400, "invalid", "%s", why);
	pthread_mutex_lock(&faults.mu);
	full = faults.n == sizeof faults.q / sizeof faults.q[0];
	if (!full)
		faults.q[faults.n++] = f;
	pthread_mutex_unlock(&faults.mu);
	if (full)
		return fail(rq, 400, "invalid", "too many queued faults");
	return answer(rq, 200, json_pack("{s:s, s:s, s:I, s:I, s:s}", "status", "queued",
	    "kind", fault_names[f.kind], "count", (json_int_t)f.count,
	    "delay_ms", (json_int_t)f.delay_ms, "path", f.path));
}

/* DELETE /admin/faults: forget every queued fault. */
static int
h_clear_faults(struct req *rq)
{
	size_t n;

	pthread_mutex_lock(&faults.mu);
	n = faults.n;
	faults.n = 0;
	pthread_mutex_unlock(&faults.mu);
	return answer(rq, 200, json_pack("{s:I}", "cleared", (json_int_t)n));
}

/* ------------------------------------------------------------------ */
/* routing and the libmicrohttpd glue                                  */

static const struct route {
	const char *method, *pattern;   /* "*" matches one path segment */
	handler_fn *fn;
} routes[] = {
	{ "POST", "/v1/sessions", h_negotiate },
	{ "POST", "/v1/sessions/*/heartbeat", h_heartbeat },
	{ "DELETE", "/v1/sessions/*", h_close },
	{ "GET", "/v1/sessions/*/work", h_work },
	{ "POST", "/v1/sessions/*/receipts", h_receipts },
	{ "POST", "/v1/sessions/*/adoptions", h_adopt },
	{ "POST", "/v1/results", h_result },
	{ "POST", "/v1/inspections", h_inspection_new },
	{ "GET", "/v1/inspections/*", h_inspection_get },
	{ "GET", "/v1/sessions/*/inspections", h_inspection_list },
	{ "POST", "/v1/sessions/*/inspections/*", h_inspection_answer },
	{ "POST", "/admin/runs", h_submit },
	{ "GET", "/admin/runs", h_list_runs },
	{ "GET", "/admin/runs/*", h_show_run },
	{ "GET", "/admin/summary", h_summary },
	{ "POST", "/admin/sessions/*/revoke", h_revoke },
	{ "POST", "/admin/sessions/*/expire", h_expire },
	{ "POST", "/admin/sessions/*/replace", h_replace },
	{ "GET", "/admin/sessions", h_list_sessions },
	{ "POST", "/admin/faults", h_add_fault },
	{ "DELETE", "/admin/faults", h_clear_faults },
};

/* Does path match pat ("*" = one non-empty segment, copied to arg)? */
static bool
route_match(const char *pat, const char *path, char *arg, size_t argsz)
{
	size_t n;

	while (*pat && *path) {
		if (*pat == '*') {
			n = strcspn(path, "/");
			if (n == 0 || n >= argsz)
				return false;
			memcpy(arg, path, n);
			arg[n] = '\0';
			path += n;
			pat++;
		} else if (*pat++ != *path++)
			return false;
	}
	return !*pat && !*path;
}

/* Pick rq->route for the method and path; collect rq->allow for a 405. */
static void
route_find(struct req *rq)
{
	size_t i, n = sizeof routes / sizeof routes[0];

	for (i = 0; i < n && !rq->route; i++) {
		if (!route_match(routes[i].pattern, rq->path, rq->arg, sizeof rq->arg))
			continue;
		if (strcmp(routes[i].method, rq->method) == 0)
			rq->route = &routes[i];
		else if (!strstr(rq->allow, routes[i].method))
			snprintf(rq->allow + strlen(rq->allow), sizeof rq->allow - strlen(rq->allow),
			    "%s%s", rq->allow[0] ? ", " : "", routes[i].method);
	}
}

/* One log line per request (never a header, so never the credential). */
static void
log_request(struct req *rq, int status)
{
	char code[16] = "-";

	if (status > 0)
		snprintf(code, sizeof code, "%d", status);
	say("%s %s %s %" PRId64 "ms%s%s", rq->method, rq->path, code, mono_ms() - rq->t0,
	    rq->fault.kind ? " fault=" : "", rq->fault.kind ? fault_names[rq->fault.kind] : "");
}

/* Send text (len bytes) with status as application/json and log it. */
static enum MHD_Result
send_text(struct req *rq, int status, char *text, size_t len)
{
	struct MHD_Response *resp = text ?
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE) : NULL;
	enum MHD_Result r;

	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (status == 405)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rq->allow);
	r = MHD_queue_response(rq->conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	log_request(rq, status);
	return r;
}

/* Send rq->out with status. */
static enum MHD_Result
respond(struct req *rq, int status)
{
	char *text = json_dumps(rq->out ? rq->out : json_object(), JSON_COMPACT);

	return send_text(rq, status, text, text ? strlen(text) : 0);
}

/* Run the request's handler (or answer 404/405); the HTTP status. */
static int
dispatch(struct req *rq)
{
	if (rq->route)
		return rq->route->fn(rq);
	if (rq->allow[0])
		return fail(rq, 405, "method_not_allowed", "%s does not allow %s", rq->path, rq->method);
	return fail(rq, 404, "not_found", "no such endpoint '%s'", rq->path);
}

/* Apply rq's fault around dispatch(); MHD_NO closes without an answer. */
static enum MHD_Result
serve(struct req *rq)
{
	int status;
	char *junk;

	switch (rq->fault.kind) {
	case F_RESET:
	case F_HANG:
		if (rq->fault.kind == F_HANG)
			nap(rq->fault.delay_ms, rq->conn);
		report_fault(rq, 0);
		log_request(rq, 0);
		return MHD_NO;
	case F_5XX:
		status = fail(rq, 503, "unavailable", "injected fault");
		report_fault(rq, status);
		return respond(rq, status);
	case F_429:
		status = fail(rq, 429, "overloaded", "injected fault");
		report_fault(rq, status);
		return respond(rq, status);
	case F_4XX:
		status = fail(rq, 400, "invalid", "injected fault");
		report_fault(rq, status);
		return respond(rq, status);
	case F_DELAY:
		nap(rq->fault.delay_ms, NULL);
		break;
	}
	status = dispatch(rq);
	if (rq->fault.kind == F_DROP_ACK) {
		log_request(rq, 0);
		return MHD_NO;
	}
	if (rq->fault.kind == F_MALFORMED && (junk = strdup("{\"status\":\"recorded\",<html>")))
		return send_text(rq, 200, junk, strlen(junk));
	return respond(rq, status);
}

/* A new request: copy method and path, route it, take a fault. */
static struct req *
req_new(struct MHD_Connection *conn, const char *url, const char *method)
{
	struct req *rq = calloc(1, sizeof *rq);

	if (!rq)
		return NULL;
	rq->conn = conn;
	rq->t0 = mono_ms();
	snprintf(rq->method, sizeof rq->method, "%s", method);
	if (strlen(url) < sizeof rq->path) {
		snprintf(rq->path, sizeof rq->path, "%s", url);
		route_find(rq);
	} else
		snprintf(rq->path, sizeof rq->path, "%.*s", 64, url);
	rq->is_result = strcmp(rq->path, "/v1/results") == 0;
	rq->limit = rq->is_result ? RESULT_MAX : strncmp(rq->path, "/admin/", 7) == 0 ?
	    ADMIN_MAX : V1_MAX;
	rq->fault = fault_take(rq->path);
	return rq;
}

/* Append upload data to the body, up to rq->limit; beyond it, discard. */
static void
req_append(struct req *rq, const char *data, size_t n)
{
	size_t want = rq->len + n + 1;
	char *p;

	if (rq->too_big || want > rq->limit + 1) {
		rq->too_big = true;
		return;
	}
	if (want > rq->cap) {
		size_t cap = rq->cap ? rq->cap : 4096;
		while (cap < want)
			cap *= 2;
		if (!(p = realloc(rq->body, cap))) {
			rq->too_big = true;
			return;
		}
		rq->body = p;
		rq->cap = cap;
	}
	memcpy(rq->body + rq->len, data, n);
	rq->len += n;
	rq->body[rq->len] = '\0';
}

/* The body is complete: count the report in flight, then serve it. */
static enum MHD_Result
req_finish(struct req *rq)
{
	const char *id = rq->is_result && body_json(rq) ?
	    json_string_value(json_object_get(rq->in, "run_id")) : NULL;
	char run_id[129] = "";
	enum MHD_Result r;
	int n;

	if (id && is_run_id(id)) {
		snprintf(run_id, sizeof run_id, "%s", id);
		if ((n = flight_enter(run_id)) > 0)
			flight_persist(run_id, n);
	}
	json_decref(rq->out);       /* a 400 from body_json() is answered by the handler */
	rq->out = NULL;
	r = serve(rq);
	if (run_id[0])
		flight_leave(run_id);
	return r;
}

/* libmicrohttpd's access handler: called once per request, then per
 * chunk of upload, then once more when the upload is complete. */
static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *data, size_t *size, void **ctx)
{
	struct req *rq = *ctx;

	if (!rq) {
		*ctx = req_new(conn, url, method);
		return *ctx ? MHD_YES : MHD_NO;
	}
	if (*size) {
		req_append(rq, data, *size);
		*size = 0;
		return MHD_YES;
	}
	return req_finish(rq);
}

/* Free a request's state when libmicrohttpd is done with it. */
static void
on_completed(void *cls, struct MHD_Connection *conn, void **ctx,
    enum MHD_RequestTerminationCode toe)
{
	struct req *rq = *ctx;

	if (!rq)
		return;
	json_decref(rq->in);
	json_decref(rq->out);
	free(rq->body);
	free(rq);
	*ctx = NULL;
}

/* ------------------------------------------------------------------ */
/* main                                                                */

/* Write "port\n" to path atomically (temporary file, then rename). */
static int
write_port_file(const char *path, unsigned port, struct ek_err *e)
{
	char tmp[4096], line[16];
	int fd, n = snprintf(line, sizeof line, "%u\n", port);

	if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
		return ek_fail(e, EK_CANTCREAT, "%s: path too long", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return ek_fail(e, EK_CANTCREAT, "%s: %s", tmp, strerror(errno));
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0 || close(fd) < 0) {
		ek_fail(e, EK_IOERR, "%s: %s", tmp, strerror(errno));
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		ek_fail(e, EK_CANTCREAT, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Start listening on 127.0.0.1:cfg.port; NULL with e filled. */
static struct MHD_Daemon *
start_daemon(struct ek_err *e)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct MHD_Daemon *d;

	sa.sin_port = htons((uint16_t)cfg.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_ERROR_LOG, (uint16_t)cfg.port, NULL, NULL, on_request, NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)15,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	    MHD_OPTION_END);
	if (!d)
		ek_fail(e, EK_OSERR, "cannot listen on 127.0.0.1:%" PRId64, cfg.port);
	return d;
}

/* Print the help text on stdout. */
static void
usage(void)
{
	printf("Usage: %s [OPTION]...\n"
	    "Serve the execkit dispatcher protocol (doc/protocol.md) on 127.0.0.1,\n"
	    "with admin endpoints and fault injection for tests.\n\n"
	    "      --port N          listen on port N (default 0: pick a free port)\n"
	    "      --port-file FILE  write the chosen port to FILE, atomically\n"
	    "      --store FILE      the dispatcher's SQLite store (default ./exec-dispatcher.db)\n"
	    "      --lease-ms N      session lease in milliseconds (default 30000)\n"
	    "      --heartbeat-ms N  heartbeat interval told to executors (default 2000)\n"
	    "      --incarnation ID  incarnation of a new store (inc- + 16 hex digits)\n"
	    "  -q, --quiet           no startup line and no request log on stderr\n"
	    "  -h, --help            show this help and exit\n"
	    "      --version         show the version and exit\n\n"
	    "Runs until SIGTERM or SIGINT.  Exit status: 0 stopped by a signal,\n"
	    "64 usage error, 65 damaged store, 71 cannot listen, 73 cannot create\n"
	    "the store or the port file, 74 write error.\n", PROG);
}

enum { OPT_PORT = OPT_FIRST_TOOL, OPT_PORT_FILE, OPT_STORE, OPT_LEASE_MS, OPT_HEARTBEAT_MS,
	OPT_INCARNATION };

static const struct option options[] = {
	CLI_COMMON_OPTIONS,
	{ "port", required_argument, NULL, OPT_PORT },
	{ "port-file", required_argument, NULL, OPT_PORT_FILE },
	{ "store", required_argument, NULL, OPT_STORE },
	{ "lease-ms", required_argument, NULL, OPT_LEASE_MS },
	{ "heartbeat-ms", required_argument, NULL, OPT_HEARTBEAT_MS },
	{ "incarnation", required_argument, NULL, OPT_INCARNATION },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

/* Parse argv into cfg: -1 to go on, else the exit code. */
static int
parse_args(int argc, char **argv)
{
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hq", options, NULL)) != -1) {
		switch (c) {
		case OPT_HELP: usage(); return EK_OK;
		case OPT_VERSION: cli_version(PROG); return EK_OK;
		case 'q': cfg.quiet = true; break;
		case OPT_PORT_FILE: cfg.port_file = optarg; break;
		case OPT_STORE: cfg.store = optarg; break;
		case OPT_INCARNATION: cfg.incarnation = optarg; break;
		case OPT_PORT:
			if (cli_parse_i64(optarg, 0, 65535, &cfg.port) < 0)
				return cli_usage_error(PROG, "--port: '%s' is not a port number", optarg);
			break;
		case OPT_LEASE_MS:
		case OPT_HEARTBEAT_MS:
			if (cli_parse_i64(optarg, 1, INT32_MAX, c == OPT_LEASE_MS ? &cfg.lease_ms :
			    &cfg.heartbeat_ms) < 0)
				return cli_usage_error(PROG, "%s: '%s' is not a positive number of milliseconds",
				    argv[optind - 1], optarg);
			break;
		default: return cli_bad_option(PROG, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(PROG, "unexpected operand '%s'", argv[optind]);
	if (cfg.incarnation && !(strncmp(cfg.incarnation, "inc-", 4) == 0 &&
	    is_hex(cfg.incarnation + 4, 16)))
		return cli_usage_error(PROG, "--incarnation: '%s' is not inc- + 16 hex digits",
		    cfg.incarnation);
	return -1;
}

int
main(int argc, char **argv)
{
	struct ek_err e = { 0 };
	struct MHD_Daemon *d = NULL;
	sigset_t sigs;
	unsigned port;
	int rc, sig;

	if ((rc = parse_args(argc, argv)) >= 0)
		return cli_finish(PROG, rc);
	/* Block the stop signals in every thread; main waits for them below. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (store_open(cfg.store, cfg.incarnation, &e) < 0)
		return ek_report(PROG, &e);
	if (!(d = start_daemon(&e)))
		goto fail;
	port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
	if (cfg.port_file && write_port_file(cfg.port_file, port, &e) < 0)
		goto fail;
	say("listening on 127.0.0.1:%u", port);
	while (sigwait(&sigs, &sig) != 0)
		;
	say("stopping on %s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	atomic_store(&stopping, true);
	MHD_stop_daemon(d);
	db_close(&store.db);
	return cli_finish(PROG, EK_OK);
fail:
	if (d)
		MHD_stop_daemon(d);
	db_close(&store.db);
	return ek_report(PROG, &e);
}
