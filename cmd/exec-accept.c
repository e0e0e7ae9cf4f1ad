/*
 * exec-accept — accept runs under the current session's binding.
 *
 * Input is JSON Lines (one run spec per line) on stdin, or the session's
 * work feed with --from-dispatcher.  Every line gets an outcome (accepted,
 * duplicate, conflict, invalid), and a bad line never touches the others.
 * Identity is the run id: the same content returns the original receipt,
 * different content is a conflict.
 *
 * The input is taken in chunks of at most ACCEPT_CHUNK_RUNS lines: each is
 * read and checked first, with no lock held (a writer never waits on its
 * input while it holds the write lock), then written in one transaction
 * that re-checks the session, and its outcomes are printed only once that
 * transaction is durable.  A chunk ends early when the next line is not
 * there yet, so a slow feed is accepted as it comes.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "clock.h"
#include "crash.h"
#include "jsonout.h"
#include "opts.h"
#include "progress.h"
#include "protocol.h"
#include "runs.h"
#include "session.h"
#include "state.h"
#include "text.h"
#include "timefmt.h"

static const char PROG[] = "exec-accept";

struct opts {
	const char *state_dir, *session;
	int64_t max, timeout_ms, prefetch, wait_ms;
	int json, from_dispatcher;
};

static const struct opt options[] = {
	OPTS_FLAG("from-dispatcher", 0, from_dispatcher,
	    "pull the session's work feed and send receipts back"),
	OPTS_INT("max", max, 1, 1000, "N", "with --from-dispatcher: at most N runs (default 100)"),
	OPTS_INT("prefetch", prefetch, 1, 1000, "N",
	    "with --from-dispatcher: at most N runs queued here in\n"
	    "all, counting those already queued and due within a\n"
	    "minute (exec-loop: its slots)"),
	OPTS_INT("wait-ms", wait_ms, 0, FEED_WAIT_MAX, "N",
	    "with --from-dispatcher: when there is no work, wait up\n"
	    "to N ms (at most 30000) for some to be submitted; with\n"
	    "--prefetch P, first for at most P/2 to be left queued"),
	OPTS_STRING("session", 0, session, "SID", "refuse unless SID is the current session"),
	OPTS_INT("timeout-ms", timeout_ms, 1, CLIENT_TIMEOUT_MAX_MS, "N",
	    "bound each dispatcher request to N ms (default 5000)"),
	OPTS_STATE("one JSON outcome per input line (doc/json.md)"),
};

static const char USAGE_HEAD[] =
	"Usage: exec-accept [OPTION]... < RUNS.jsonl\n"
	"       exec-accept [OPTION]... --from-dispatcher\n"
	"Accept runs under the current session, idempotently by run id.\n"
	"\n"
	"Options:\n";

static const char USAGE_TAIL[] =
	"\n"
	"Exit status: 0 every line accepted or a duplicate; 64 usage; 65 some line\n"
	"invalid or a conflict (the others are accepted); 66 no state directory;\n"
	"69 dispatcher unavailable; 75 state busy, try again; 77 no current session\n"
	"or not SID; 78 state from another version, or unsafe permissions.\n";

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options),
};

/*
 * A chunk: lines read and checked before the write lock is taken, then
 * written in one transaction.  It is bounded by lines and by bytes, so no
 * other writer waits on a large batch for more than about a second
 * (100 000 runs are 100 transactions), and memory stays bounded.
 */
#define ACCEPT_CHUNK_RUNS 1000
#define ACCEPT_CHUNK_BYTES (4 << 20)

/* How often a wait for room in the queue (--prefetch with --wait-ms) looks
 * at it: a count in the state, no process and no request. */
#define ACCEPT_ROOM_POLL_MS 10

/* What --prefetch counts: runs due within this long (or overdue).  One
 * due later waits here whatever the slots do, so it takes no room from
 * work that could run now: 32 runs due in the year 3000 once filled the
 * queue, and nothing else ran.  A minute: far longer than a loop's tick
 * (a run due that soon is as good as queued for a slot), short enough
 * that what fills the queue is started within one. */
#define ACCEPT_SOON_MS 60000

struct item {
	long line;
	struct runspec rs;       /* checked, when error is NULL */
	const char *run_id;      /* a rejected line's run id, if known */
	char *error;             /* why the line is rejected (malloc'd), or NULL */
};

struct chunk {
	struct item item[ACCEPT_CHUNK_RUNS];
	int n, valid;
	size_t bytes;
};

/* Outcomes are buffered and printed only once their chunk has committed. */
struct batch {
	struct state *st;
	struct acceptor *acc;
	const struct opts *o;
	struct chunk *chunk;
	FILE *out;
	json_t *receipts;     /* for the dispatcher, with --from-dispatcher */
	long lines, accepted, duplicates, rejected;
};

static const char *const outcome_name[] = { "accepted", "duplicate", "conflict" };

static void
record(struct batch *b, long line, const char *run_id, const char *outcome,
    const char *receipt, const char *error)
{
	if (b->o->json) {
		json_t *j = json_pack("{s:I, s:s?, s:s, s:s?, s:s?}", "line", (json_int_t)line,
		    "run_id", run_id, "outcome", outcome, "receipt", receipt, "error", error);
		json_emit(b->out, j);
	} else if (error) {
		/* an invalid line's run id is the feed's text, escapes and all */
		char safe[512], id[RUN_ID_MAX + 1];

		fprintf(b->out, "%s line %ld%s%s: %s\n", outcome, line, run_id ? " " : "",
		    run_id ? text_safe(id, sizeof id, run_id) : "", text_safe(safe, sizeof safe, error));
	} else {   /* one a run in a batch: no printf */
		fputs(outcome, b->out);
		putc(' ', b->out);
		fputs(run_id, b->out);
		putc(' ', b->out);
		fputs(receipt, b->out);
		putc('\n', b->out);
	}
	if (b->receipts && run_id)
		json_array_append_new(b->receipts, json_pack("{s:s, s:s, s:s}", "run_id", run_id,
		    "receipt", receipt ? receipt : "", "outcome", outcome));
}

/* Accept one checked spec; 0, or -1 on a state error that aborts the chunk. */
static int
accept_spec(struct batch *b, long line, struct runspec *rs, struct ek_err *e)
{
	char receipt[128];
	enum accept_outcome out;

	if (acceptor_add(b->acc, rs, &out, receipt, sizeof receipt, e) < 0)
		return -1;
	if (out == ACCEPT_NEW)
		b->accepted++;
	else if (out == ACCEPT_DUPLICATE)
		b->duplicates++;
	else
		b->rejected++;
	record(b, line, rs->run_id, outcome_name[out], receipt,
	    out == ACCEPT_CONFLICT ? "a different run with this id was already accepted" : NULL);
	return 0;
}

/* Add a line to the chunk: a checked spec (taken over), or its rejection. */
static int
add_item(struct chunk *c, long line, struct runspec *rs, const char *run_id,
    const struct ek_err *why, size_t bytes, struct ek_err *e)
{
	struct item *it = &c->item[c->n];
	char msg[sizeof why->msg];

	*it = (struct item){ .line = line, .run_id = run_id };
	if (why) {
		/* The message may quote input cut mid-character: keep it valid
		 * UTF-8, or json_pack() refuses it and the line loses its outcome. */
		memcpy(msg, why->msg, sizeof msg);
		msg[sizeof msg - 1] = '\0';
		utf8_clip(msg, sizeof msg - 1);
		if (!(it->error = strdup(msg)))
			return ek_fail(e, EK_OSERR, "out of memory");
	} else {
		it->rs = *rs;
		c->valid++;
	}
	c->n++;
	c->bytes += bytes;
	return 0;
}

static void
chunk_clear(struct chunk *c)
{
	int i;

	for (i = 0; i < c->n; i++) {
		runspec_free(&c->item[i].rs);
		free(c->item[i].error);
	}
	c->n = c->valid = 0;
	c->bytes = 0;
}

static bool
chunk_full(const struct chunk *c)
{
	return c->n == ACCEPT_CHUNK_RUNS || c->bytes >= ACCEPT_CHUNK_BYTES;
}

/* One transaction per batch (a chunk of the input), the session re-checked
 * inside it, crash points on both sides of the commit; write_chunk() holds
 * the outcomes back until it is durable. */
static int
run_batch(struct batch *b, const struct session *s, struct ek_err *e)
{
	struct chunk *c = b->chunk;
	struct session cur;
	int i, rc = 0;

	if (db_begin_write(&b->st->db, e) < 0)
		return -1;
	/* Checked inside the transaction: no session can be opened meanwhile. */
	if (session_require(b->st, b->o->session, &cur, e) < 0 || !binding_eq(&cur.b, &s->b) ||
	    !(b->acc = acceptor_new(b->st, &cur.b, e))) {
		if (!e->code)
			ek_fail(e, EK_NOSESSION, "the current session changed while accepting");
		db_rollback(&b->st->db);
		return -1;
	}
	for (i = 0; rc == 0 && i < c->n; i++)
		if (c->item[i].error)
			record(b, c->item[i].line, c->item[i].run_id, "invalid", NULL, c->item[i].error);
		else
			rc = accept_spec(b, c->item[i].line, &c->item[i].rs, e);
	if (rc == 0)
		rc = acceptor_count(b->acc, e);
	acceptor_free(b->acc);
	b->acc = NULL;
	if (rc < 0) {
		db_rollback(&b->st->db);
		return -1;
	}
	crash_point("accept-before-commit");
	if (db_commit(&b->st->db, e) < 0)
		return -1;
	crash_point("accept-after-commit");
	return 0;
}

/* Write the chunk and empty it; its outcomes go out once it is durable. */
static int
write_chunk(struct batch *b, const struct session *s, struct ek_err *e)
{
	struct chunk *c = b->chunk;
	char *buf = NULL;
	size_t len = 0;
	int i, rc = 0;

	if (!(b->out = open_memstream(&buf, &len)))
		return ek_fail(e, EK_OSERR, "out of memory");
	if (c->valid > 0) {
		db_yield(&b->st->db);   /* after a chunk of ours, a waiting writer first */
		rc = run_batch(b, s, e);
	} else {   /* nothing to write: no lock to take */
		for (i = 0; i < c->n; i++)
			record(b, c->item[i].line, c->item[i].run_id, "invalid", NULL, c->item[i].error);
	}
	b->rejected += c->n - c->valid;
	fclose(b->out);
	b->out = NULL;
	if (rc == 0) {
		fwrite(buf, 1, len, stdout);
		fflush(stdout);
	}
	free(buf);
	chunk_clear(c);
	return rc;
}

/* Standard input through our own buffer, so that we can tell when the next
 * line is not there yet (input_waits()). */
struct input {
	char buf[65536];
	size_t pos, len;
	bool eof;
	int err;         /* errno of a failed read */
	int64_t read;    /* bytes read so far */
	int64_t size;    /* of standard input when it is a regular file, else -1 */
};

/* Refill the buffer once it is used up: false at the end of the input or
 * on a read error (in->err). */
static bool
input_fill(struct input *in)
{
	ssize_t n;

	if (in->pos < in->len)
		return true;
	if (in->eof || in->err)
		return false;
	while ((n = read(STDIN_FILENO, in->buf, sizeof in->buf)) < 0 && errno == EINTR)
		;
	if (n <= 0) {
		if (n < 0)
			in->err = errno;
		else
			in->eof = true;
		return false;
	}
	in->read += n;
	in->pos = 0;
	in->len = (size_t)n;
	return true;
}

/* Would reading the next line wait for whoever writes our input? */
static bool
input_waits(const struct input *in)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

	return in->pos == in->len && !in->eof && !in->err && poll(&p, 1, 0) == 0;
}

/* Read one line of at most SPEC_LINE_MAX bytes; longer lines are consumed
 * and reported as too long.  Returns length, -1 at EOF; *toolong set. */
static long
read_line(struct input *in, char *buf, int *toolong)
{
	long n = 0;
	bool any = false;
	const char *p, *nl;
	size_t take, room;

	*toolong = 0;
	while (input_fill(in)) {
		any = true;
		p = in->buf + in->pos;
		nl = memchr(p, '\n', in->len - in->pos);
		take = nl ? (size_t)(nl - p) : in->len - in->pos;
		room = (size_t)(SPEC_LINE_MAX - n);
		if (take > room)
			*toolong = 1;
		memcpy(buf + n, p, take < room ? take : room);
		n += (long)(take < room ? take : room);
		in->pos += take + (nl != NULL);
		if (nl)
			break;
	}
	buf[n] = '\0';
	return any ? n : -1;
}

/* Fill the chunk from stdin until it is full, the input ends, or the next
 * line is not there yet (then what came is accepted now, not when more
 * comes).  No lock is held while we read. */
static int
read_chunk(struct batch *b, struct input *in, char *buf, struct ek_err *e)
{
	struct chunk *c = b->chunk;
	struct runspec rs;
	struct ek_err le;
	int toolong, rc = 0;
	long n;

	while (rc == 0 && !chunk_full(c) && !(c->n > 0 && input_waits(in)) &&
	    (n = read_line(in, buf, &toolong)) >= 0) {
		b->lines++;
		if (toolong) {
			ek_fail(&le, EK_DATAERR, "line is over the %d-byte limit", SPEC_LINE_MAX);
			rc = add_item(c, b->lines, NULL, NULL, &le, 0, e);
		} else if (strspn(buf, " \t\r") < (size_t)n) {   /* skip blank lines */
			if (runspec_parse(buf, (size_t)n, &rs, &le) < 0)
				rc = add_item(c, b->lines, NULL, NULL, &le, 0, e);
			else if ((rc = add_item(c, b->lines, &rs, NULL, NULL, (size_t)n, e)) < 0)
				runspec_free(&rs);
		}
	}
	if (rc == 0 && in->err)
		return ek_fail(e, EK_IOERR, "reading standard input: %s", strerror(in->err));
	return rc;
}

/* The size of standard input if it is a regular file (then the progress
 * line has an ETA), else -1. */
static int64_t
input_size(void)
{
	struct stat sb;

	return fstat(STDIN_FILENO, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
}

static void
show_progress(const struct batch *b, const struct input *in, struct progress *pg)
{
	int64_t used = in->read - (int64_t)(in->len - in->pos);
	char extra[96], dup[48];

	snprintf(extra, sizeof extra, "%s, %ld rejected",
	    cli_plural(dup, sizeof dup, b->duplicates, "duplicate"), b->rejected);
	progress_show(pg, b->accepted, "accepted", in->size > 0 ? (double)used / (double)in->size : -1,
	    extra, false);
}

static int
accept_stdin(struct batch *b, const struct session *s, struct ek_err *e)
{
	char *buf = malloc(SPEC_LINE_MAX + 1);
	struct input *in = calloc(1, sizeof *in);
	int rc = 0;

	struct progress pg;

	if (!buf || !in)
		rc = ek_fail(e, EK_OSERR, "out of memory");
	progress_begin(&pg, PROG);
	if (in)
		in->size = input_size();
	while (rc == 0 && !in->eof) {
		if ((rc = read_chunk(b, in, buf, e)) == 0 && b->chunk->n > 0)
			rc = write_chunk(b, s, e);
		if (rc == 0)
			show_progress(b, in, &pg);
	}
	progress_end(&pg);
	chunk_clear(b->chunk);
	free(in);
	free(buf);
	return rc;
}

static int
accept_feed(struct batch *b, const struct session *s, json_t *runs, struct ek_err *e)
{
	struct chunk *c = b->chunk;
	struct runspec rs;
	struct ek_err le;
	size_t i;
	json_t *v;
	int rc = 0;

	json_array_foreach(runs, i, v) {
		b->lines++;
		if (runspec_from_json(v, &rs, &le) < 0)
			rc = add_item(c, b->lines, NULL, json_string_value(json_object_get(v, "run_id")),
			    &le, 0, e);
		else if ((rc = add_item(c, b->lines, &rs, NULL, NULL, 0, e)) < 0)
			runspec_free(&rs);
		if (rc == 0 && chunk_full(c))
			rc = write_chunk(b, s, e);
		if (rc < 0)
			break;
	}
	if (rc == 0 && c->n > 0)
		rc = write_chunk(b, s, e);
	chunk_clear(c);
	return rc;
}

/* Runs queued here that take room under --prefetch: those due soon. */
static int
queued_soon(struct state *st, const struct session *s, int64_t *n, struct ek_err *e)
{
	return run_count_due_by(st, &s->b, now_ms() + ACCEPT_SOON_MS, n, e);
}

/* How many runs to ask the feed for: --max, less what --prefetch says is
 * already queued here and due soon (the free slots start the queue soon;
 * what waits beyond them would only be stranded by a stop).  0: ask for
 * nothing. */
static int
feed_max(struct state *st, const struct session *s, const struct opts *o, int64_t *max,
    struct ek_err *e)
{
	int64_t queued = 0;

	*max = o->max;
	if (o->prefetch && queued_soon(st, s, &queued, e) < 0)
		return -1;
	if (o->prefetch && o->prefetch - queued < *max)
		*max = o->prefetch - queued;
	return 0;
}

/* With --wait-ms, an empty answer that came early (a dispatcher that does
 * not wait, or nothing asked for) is waited out here: a caller that loops
 * on us never spins. */
static void
wait_out(const struct opts *o, int64_t since, const json_t *feed)
{
	if (json_array_size(json_object_get(feed, "runs")) == 0)
		sleep_ms(since + o->wait_ms - mono_ms());
}

/* With --prefetch and --wait-ms, a queue without room is waited on first:
 * looked at every ACCEPT_ROOM_POLL_MS until at most half of --prefetch is
 * queued (the slots started the rest) or the wait ends: a loop whose
 * queue is full never sleeps a whole wait while the queue drains. */
static int
wait_for_room(struct state *st, const struct session *s, const struct opts *o, int64_t since,
    struct ek_err *e)
{
	int64_t queued;

	if (!o->prefetch)
		return 0;
	for (;;) {
		if (queued_soon(st, s, &queued, e) < 0)
			return -1;
		if (queued <= o->prefetch / 2 || mono_ms() >= since + o->wait_ms)
			return 0;
		sleep_ms(ACCEPT_ROOM_POLL_MS);
	}
}

static int
pull_feed(struct state *st, const struct session *s, const struct opts *o, json_t **feed, struct ek_err *e)
{
	char path[256], cred[256];
	int64_t max, left, since = mono_ms();
	int rc;

	if (wait_for_room(st, s, o, since, e) < 0 || feed_max(st, s, o, &max, e) < 0)
		return -1;
	if (max <= 0) {
		*feed = json_pack("{s:[]}", "runs");   /* enough queued here already */
		if (!*feed)
			return ek_fail(e, EK_OSERR, "out of memory");
		wait_out(o, since, *feed);
		return 0;
	}
	if (session_credential(st, &s->b, cred, sizeof cred, e) < 0)
		return -1;
	left = since + o->wait_ms - mono_ms();   /* what the room left of the wait */
	if (left < 0)
		left = 0;
	snprintf(path, sizeof path, PROTO_SESSIONS "/%s" PROTO_S_WORK "?max=%lld&wait_ms=%lld", s->b.session_id,
	    (long long)max, (long long)left);
	rc = client_call(s->dispatcher, "GET", path, cred, NULL, o->timeout_ms + left, feed,
	    NULL, e);
	memset(cred, 0, sizeof cred);
	if (rc == 0 && !json_is_array(json_object_get(*feed, "runs"))) {
		json_decref(*feed);
		return ek_fail(e, EK_PROTOCOL, "work feed answer has no 'runs' array");
	}
	if (rc == 0)
		wait_out(o, since, *feed);
	return rc;
}

/* Tell the dispatcher what became of each run it handed us.  A lost
 * receipt is harmless: the feed hands the run out again and acceptance is
 * idempotent. */
static int
send_receipts(struct state *st, const struct session *s, const struct opts *o, json_t *receipts, struct ek_err *e)
{
	char path[256], cred[256];
	json_t *body, *ans = NULL;
	int rc;

	if (json_array_size(receipts) == 0)
		return 0;
	if (session_credential(st, &s->b, cred, sizeof cred, e) < 0)
		return -1;
	snprintf(path, sizeof path, PROTO_SESSIONS "/%s" PROTO_S_RECEIPTS, s->b.session_id);
	body = json_pack("{s:O}", "receipts", receipts);
	rc = client_call(s->dispatcher, "POST", path, cred, body, o->timeout_ms, &ans, NULL, e);
	memset(cred, 0, sizeof cred);
	json_decref(body);
	json_decref(ans);
	return rc;
}

/* Runs from stdin need a session whose lease still holds: under one that
 * lapsed (maybe ended at the dispatcher) they could only ever be
 * quarantined.  1 (e filled) when it lapsed. */
static int
lease_lapsed(const struct session *s, struct ek_err *e)
{
	int64_t beat = s->last_beat_at > s->opened_at ? s->last_beat_at : s->opened_at;
	int64_t age = now_ms() - beat;

	if (age < s->lease_ms)
		return 0;
	ek_fail(e, EK_TEMPFAIL, "the lease of session '%s' (%lld ms) ran out %lld ms ago: "
	    "heartbeat first ('exec-session heartbeat'); nothing was accepted",
	    s->b.session_id, (long long)s->lease_ms, (long long)(age - s->lease_ms));
	return 1;
}

static int
accept_all(struct state *st, const struct opts *o, struct batch *b, struct ek_err *e)
{
	struct session s;
	json_t *feed = NULL;
	int rc;

	if (session_require(st, o->session, &s, e) < 0 || (!o->from_dispatcher && lease_lapsed(&s, e)))
		return -1;
	if (o->from_dispatcher && pull_feed(st, &s, o, &feed, e) < 0)
		return -1;
	if (!(b->chunk = calloc(1, sizeof *b->chunk))) {
		json_decref(feed);
		return ek_fail(e, EK_OSERR, "out of memory");
	}
	b->receipts = feed ? json_array() : NULL;
	rc = feed ? accept_feed(b, &s, json_object_get(feed, "runs"), e) : accept_stdin(b, &s, e);
	if (rc == 0 && feed)
		rc = send_receipts(st, &s, o, b->receipts, e);
	json_decref(b->receipts);
	json_decref(feed);
	free(b->chunk);
	return rc;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	o->max = 100;
	o->timeout_ms = CLIENT_TIMEOUT_MS;
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	if (optind != argc)
		return cli_usage_error(PROG, "unexpected operand '%s' (runs are read from standard input)", argv[optind]);
	if (o->prefetch && !o->from_dispatcher)
		return cli_usage_error(PROG, "--prefetch goes with --from-dispatcher");
	if (o->wait_ms && !o->from_dispatcher)
		return cli_usage_error(PROG, "--wait-ms goes with --from-dispatcher");
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct batch b = { 0 };
	struct state st;
	struct ek_err e = { 0 };
	char dup[48];
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	if (state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	b.st = &st;
	b.o = &o;
	rc = accept_all(&st, &o, &b, &e);
	state_close(&st);
	if (rc < 0)
		return cli_finish(PROG, ek_report(PROG, &e));
	if (isatty(STDERR_FILENO) && b.lines > 1000)
		fprintf(stderr, "%s: %ld accepted, %s, %ld rejected\n", PROG, b.accepted,
		    cli_plural(dup, sizeof dup, b.duplicates, "duplicate"), b.rejected);
	return cli_finish(PROG, b.rejected ? EK_DATAERR : EK_OK);
}
