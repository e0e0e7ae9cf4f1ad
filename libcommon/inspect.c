/*
 * inspect — see inspect.h.
 *
 * Every question runs inside one read transaction (BEGIN ... ROLLBACK: a
 * read never commits), so what it sees — the current session and the rows
 * — is one consistent snapshot.  All SQL is constant; every value is bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "inspect.h"
#include "lockwait.h"
#include "proc.h"
#include "jsonout.h"
#include "output.h"
#include "inspect_int.h"
#include "protocol.h"
#include "text.h"

/* --- the guard ----------------------------------------------------------- */

static const enum inspect_mode modes[] = { INSPECT_VIEW, INSPECT_LOOKUP };

/* Columns a lookup must never read: the program and everything about how
 * it would run (in runs, and program and args in results), and the
 * accepted spec, which contains them. */
static const char *const run_private[] = { "program", "args", "env", "env_names", "cwd",
	"timeout_ms", "policy", NULL };

/* Columns stored as JSON text, shown as JSON values. */
static const char *const json_cols[] = { "args", "env", "env_names", "policy", NULL };

/* sqlite3 authorizer: called at prepare time for every column read. */
static int
authorize(void *arg, int action, const char *table, const char *column, const char *db, const char *trig)
{
	const enum inspect_mode *mode = arg;

	if (action != SQLITE_READ || !table || !column)
		return SQLITE_OK;
	if (strcmp(table, "sessions") == 0 && strcmp(column, "credential") == 0)
		return SQLITE_DENY;
	if (*mode != INSPECT_LOOKUP)
		return SQLITE_OK;
	if ((strcmp(table, "runs") == 0 || strcmp(table, "results") == 0 ||
	    strcmp(table, "run_records") == 0) && text_word_in(column, run_private))
		return SQLITE_DENY;   /* a result and a record keep them too (schema steps 10, 17) */
	if (strcmp(table, "accepts") == 0 && strcmp(column, "content") == 0)
		return SQLITE_DENY;
	return SQLITE_OK;
}

/* Milliseconds left until the monotonic deadline, at least 1. */
static int
left_ms(int64_t deadline)
{
	int64_t left = deadline - mono_ms();

	return left < 1 ? 1 : left > 86400000 ? 86400000 : (int)left;
}

int
inspect_guard(struct state *st, enum inspect_mode mode, int64_t deadline, struct ek_err *e)
{
	sqlite3 *h = st->db.h;

	/* The authorizer judges a statement when it is prepared: nothing
	 * prepared before it may be reused after it. */
	db_drop_kept(&st->db);
	if (db_exec(&st->db, "PRAGMA query_only=ON", e) < 0)
		return -1;
	sqlite3_db_config(h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_busy_timeout(h, left_ms(deadline));
	if (sqlite3_set_authorizer(h, authorize, (void *)&modes[mode]) != SQLITE_OK)
		return db_fail(&st->db, e, "authorizer");
	return 0;
}

/* flock state.db with op (LOCK_SH or LOCK_EX), waiting until the deadline. */
static int
flock_until(const struct state *st, int op, int64_t deadline, struct ek_err *e)
{
	int fd = state_open_file(st, "state.db", O_RDONLY, 0, e);

	if (fd < 0)
		return -1;
	if (lock_wait(fd, op, deadline) == 0)
		return fd;
	close(fd);
	return ek_fail(e, EK_TEMPFAIL, "%s", op == LOCK_SH ? "executor is shutting down; "
	    "try again once it runs again" : "lookups still in flight; gave up waiting for them");
}

int
inspect_hold(const struct state *st, int64_t deadline, struct ek_err *e)
{
	return flock_until(st, LOCK_SH, deadline, e);
}

int
inspect_quiesce(const struct state *st, int64_t deadline, struct ek_err *e)
{
	char id[64];
	int fd;

	/* The marker names its writer (pid:start time): one left by a closer
	 * that was interrupted or killed is stale once that process is gone.
	 * Written by rename, so that no kill leaves an empty marker, which
	 * would count as a live writer's. */
	proc_self_id(id, sizeof id);
	if (state_write_atomic_at(st->dir_fd, st->dir, INSPECT_SHUTDOWN_FILE, id, 0600, true, e) < 0)
		return -1;
	if ((fd = flock_until(st, LOCK_EX, deadline, e)) < 0)
		state_unlink(st, INSPECT_SHUTDOWN_FILE);
	return fd;
}

void
inspect_unquiesce(const struct state *st, int fd)
{
	state_unlink(st, INSPECT_SHUTDOWN_FILE);
	inspect_release(fd);
}

void
inspect_release(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* --- the lookup ------------------------------------------------------------ */

/* Copy text column col into buf (n bytes); EK_DATAERR if it does not fit. */
static int
take_text(sqlite3_stmt *q, int col, char *buf, size_t n, const char *what,
    const char *run_id, struct ek_err *e)
{
	const unsigned char *t = sqlite3_column_text(q, col);
	size_t len = (size_t)sqlite3_column_bytes(q, col);

	if (len >= n)
		return ek_fail(e, EK_DATAERR, "run '%s': stored %s of %zu bytes exceeds the %zu-byte bound",
		    run_id, what, len, n - 1);
	memcpy(buf, t ? (const char *)t : "", len);
	buf[len] = '\0';
	return 0;
}

/* Columns 0, 1 and 2 of every reader below: the transaction id, then the
 * binding (incarnation, session id). */
static int
take_ids(sqlite3_stmt *q, struct inspect_found *f, struct ek_err *e)
{
	return take_text(q, 0, f->txn_id, sizeof f->txn_id, "transaction id", f->run_id, e) < 0 ||
	    take_text(q, 1, f->b.incarnation, sizeof f->b.incarnation, "incarnation", f->run_id, e) < 0 ||
	    take_text(q, 2, f->b.session_id, sizeof f->b.session_id, "session id", f->run_id, e) < 0 ? -1 : 0;
}

/* The execution row: 1 found, 0 none, -1 error. */
static int
read_run_row(struct state *st, struct inspect_found *f, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT txn_id, incarnation, session_id, state, "
	    "start_marker, due_at FROM runs WHERE run_id = ?1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, f->run_id);
	rc = db_step(&st->db, q, e);
	if (rc == 1 && (take_ids(q, f, e) < 0 ||
	    take_text(q, 4, f->start_marker, sizeof f->start_marker, "start marker", f->run_id, e) < 0))
		rc = -1;
	if (rc == 1) {
		db_col_text(q, 3, f->state, sizeof f->state);
		f->has_marker = sqlite3_column_type(q, 4) != SQLITE_NULL;
		f->started = f->has_marker || strcmp(f->state, "queued") != 0;
		f->has_due = true;
		f->due_at = sqlite3_column_int64(q, 5);
	}
	db_done(&st->db, q);
	return rc;
}

/* A retained result whose execution row is gone: 1 found, 0 none, -1.
 * Its start facts were copied onto it when it was chosen (schema step 5);
 * a result chosen before that step says "started" only when its outcome
 * proves a guest ran, and unknown (-1) otherwise. */
static int
read_result_row(struct state *st, struct inspect_found *f, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT a.txn_id, x.incarnation, x.session_id, "
	    "CASE WHEN x.started_at IS NOT NULL OR x.start_marker IS NOT NULL THEN 1 "
	    "WHEN x.due_at IS NOT NULL THEN 0 "
	    "WHEN x.outcome <> 'cancelled' OR x.wait_status IS NOT NULL THEN 1 ELSE -1 END, "
	    "x.start_marker, x.due_at "
	    "FROM results x LEFT JOIN accepts a ON a.run_id = x.run_id WHERE x.run_id = ?1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, f->run_id);
	rc = db_step(&st->db, q, e);
	if (rc == 1 && sqlite3_column_type(q, 0) == SQLITE_NULL)
		rc = ek_fail(e, EK_DATAERR, "run '%s': retained result without its accepted run "
		    "(damaged state)", f->run_id);
	if (rc == 1 && (take_ids(q, f, e) < 0 ||
	    take_text(q, 4, f->start_marker, sizeof f->start_marker, "start marker", f->run_id, e) < 0))
		rc = -1;
	if (rc == 1) {
		snprintf(f->state, sizeof f->state, "retained");
		f->started = sqlite3_column_int(q, 3);
		f->has_marker = sqlite3_column_type(q, 4) != SQLITE_NULL;
		f->has_due = sqlite3_column_type(q, 5) != SQLITE_NULL;
		f->due_at = sqlite3_column_int64(q, 5);
	}
	db_done(&st->db, q);
	return rc;
}

/* A run whose execution row and result are gone: what else the state
 * knows of it, most telling first (schema step 12): its receipt
 * (acknowledged), its hand-back (never started here), its run record
 * (finished, where the evidence went), or its acceptance alone (unknown:
 * nothing says whether it ran, so nothing may read it as "never ran").
 * 1 found, 0 no record of any kind (ABSENT), -1 error. */
static int
read_record_row(struct state *st, struct inspect_found *f, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT txn, inc, sid, started, state, evidence FROM ("
	    "SELECT 1 AS pri, (SELECT txn_id FROM accepts a WHERE a.run_id = x.run_id) AS txn, "
	    " x.incarnation AS inc, x.session_id AS sid, "
	    " CASE WHEN x.started_at IS NOT NULL OR x.outcome <> 'cancelled' THEN 1 ELSE -1 END "
	    " AS started, 'acknowledged' AS state, NULL AS evidence FROM receipts x WHERE x.run_id = ?1 "
	    "UNION ALL SELECT 2, (SELECT txn_id FROM accepts a WHERE a.run_id = h.run_id), "
	    " h.incarnation, h.session_id, 0, 'handed_back', CASE WHEN h.requeued_as IS NOT NULL "
	    " THEN 're-queued as ' || h.requeued_as END FROM handbacks h WHERE h.run_id = ?1 "
	    "UNION ALL SELECT 3, r.txn_id, r.incarnation, r.session_id, CASE WHEN r.known = 'unknown' "
	    " THEN -1 WHEN r.started_at IS NOT NULL OR r.outcome <> 'cancelled' THEN 1 ELSE 0 END, "
	    " r.known, r.evidence FROM run_records r WHERE r.run_id = ?1 "
	    "UNION ALL SELECT 4, a.txn_id, a.incarnation, a.session_id, -1, 'unknown', "
	    " 'only its acceptance is recorded' FROM accepts a WHERE a.run_id = ?1"
	    ") ORDER BY pri LIMIT 1", e);
	int rc;

	if (!q)
		return -1;
	db_bind_text(q, 1, f->run_id);
	rc = db_step(&st->db, q, e);
	if (rc == 1 && (take_ids(q, f, e) < 0))
		rc = -1;
	if (rc == 1) {
		f->started = sqlite3_column_int(q, 3);
		db_col_text(q, 4, f->state, sizeof f->state);
		db_col_text(q, 5, f->evidence, sizeof f->evidence);
	}
	db_done(&st->db, q);
	return rc;
}

/* opened_at of the newest session, 0 if there was none. */
static int
newest_session(struct state *st, int64_t *at, struct ek_err *e)
{
	sqlite3_stmt *q = db_prep(&st->db, "SELECT IFNULL(max(opened_at), 0) FROM sessions", e);
	int rc;

	if (!q)
		return -1;
	rc = db_step(&st->db, q, e);
	if (rc == 1)
		*at = sqlite3_column_int64(q, 0);
	db_done(&st->db, q);
	return rc < 0 ? -1 : 0;
}

/* Everything the lookup reads, in the caller's read transaction. */
static int
lookup_snapshot(struct state *st, const char *sid, struct inspect_found *f,
    int64_t *newest, struct ek_err *e)
{
	struct session cur;
	int rc;

	if (newest_session(st, newest, e) < 0 || (rc = session_current(st, &cur, e)) < 0)
		return -1;
	if (rc == 0)
		return ek_fail(e, EK_NOSESSION, "no current session: a lookup must name the session "
		    "it holds (open one with 'exec-session open')");
	if (strcmp(sid, cur.b.session_id) != 0)
		return ek_fail(e, EK_NOSESSION, "session '%.72s' is not the current session", sid);
	if ((rc = read_run_row(st, f, e)) == 0 && (rc = read_result_row(st, f, e)) == 0)
		rc = read_record_row(st, f, e);
	if (rc <= 0)
		return rc;
	f->answer = binding_eq(&f->b, &cur.b) ? INSPECT_FILTERED : INSPECT_FOUND;
	return 0;
}

/* Does the shutdown marker's writer still run?  A marker without a writer's
 * id (an older execkit's) counts as written by a live one. */
static bool
marker_writer_alive(const struct state *st)
{
	char id[64] = "";
	ssize_t n;
	int fd = state_open_file(st, INSPECT_SHUTDOWN_FILE, O_RDONLY, 0, NULL);

	if (fd < 0)
		return true;
	n = read(fd, id, sizeof id - 1);
	close(fd);
	if (n <= 0)
		return true;
	id[n] = '\0';
	return proc_id_alive(id);
}

/* 0 unless the executor is shutting down (inspect.h): then EK_TEMPFAIL. */
static int
check_shutdown(const struct state *st, int64_t newest, struct ek_err *e)
{
	char path[PATH_MAX];
	struct stat sb;
	int64_t mtime;

	if (state_path(st, INSPECT_SHUTDOWN_FILE, path, sizeof path) < 0)
		return 0;
	if (fstatat(st->dir_fd, INSPECT_SHUTDOWN_FILE, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : ek_fail(e, EK_IOERR, "'%s': %s", path, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return ek_fail(e, EK_IOERR, "'%s': %s", path, S_ISLNK(sb.st_mode) ?
		    "it is a symbolic link (not followed)" : "not a regular file");
	mtime = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
	if (mtime < newest || !marker_writer_alive(st))
		return 0;   /* left from before the newest session, or by a dead closer: stale */
	return ek_fail(e, EK_TEMPFAIL, "executor is shutting down ('%s' exists); try again "
	    "once it runs again", path);
}

int
inspect_lookup(struct state *st, const char *sid, const char *run_id,
    struct inspect_found *f, struct ek_err *e)
{
	struct ek_err read_err = { 0 };
	int64_t newest = -1;
	int rc;

	memset(f, 0, sizeof *f);
	if (!run_id_valid(run_id))
		return ek_fail(e, EK_DATAERR, "malformed run id: a run id is 1 to %d bytes of "
		    "[A-Za-z0-9._:-]", RUN_ID_MAX);
	snprintf(f->run_id, sizeof f->run_id, "%s", run_id);
	if (db_begin_read(&st->db, e) < 0)
		return -1;
	rc = lookup_snapshot(st, sid, f, &newest, &read_err);
	db_rollback(&st->db);
	/* After the read: a shutdown that began meanwhile withholds the answer. */
	if (newest >= 0 && check_shutdown(st, newest, e) < 0)
		return -1;
	if (rc < 0) {
		*e = read_err;
		return -1;
	}
	if (f->answer != INSPECT_FOUND) {   /* FILTERED and ABSENT say nothing more */
		enum inspect_answer a = f->answer;

		memset(f, 0, sizeof *f);
		f->answer = a;
		snprintf(f->run_id, sizeof f->run_id, "%s", run_id);
	}
	return 0;
}

static const char *const answer_name[] = {
	[INSPECT_ABSENT] = "ABSENT", [INSPECT_FILTERED] = "FILTERED", [INSPECT_FOUND] = "FOUND",
};

json_t *
inspect_found_json(const struct inspect_found *f, const char *key)
{
	json_t *o = json_pack("{s:s, s:s}", key, answer_name[f->answer], "run_id", f->run_id);

	if (!o || f->answer != INSPECT_FOUND)
		return o;
	if (json_object_update_new(o, json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s}",
	    "incarnation", f->b.incarnation, "session_id", f->b.session_id, "txn_id", f->txn_id,
	    "started", f->started < 0 ? json_null() : json_boolean(f->started),
	    "start_marker", f->has_marker ? json_string(f->start_marker) : json_null(),
	    "due_at", f->has_due ? json_integer(f->due_at) : json_null(),
	    "state", f->state)) < 0 ||
	    (f->evidence[0] && json_object_set_new(o, "evidence", json_string(f->evidence)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* --- rows as JSON ---------------------------------------------------------- */

static json_t *
text_value(const char *name, const char *t, size_t n)
{
	json_t *v;
	char *copy;

	if (text_word_in(name, json_cols) && (v = json_loadb(t, n, JSON_DECODE_ANY, NULL)))
		return v;
	if ((v = json_stringn(t, n)))
		return v;
	if (!(copy = strndup(t, n)))
		return NULL;
	utf8_clip(copy, n);   /* hand-edited rows may hold invalid UTF-8 */
	v = json_string(copy);
	free(copy);
	return v;
}

static json_t *
col_value(sqlite3_stmt *q, int i)
{
	const char *name = sqlite3_column_name(q, i);

	switch (sqlite3_column_type(q, i)) {
	case SQLITE_NULL:
		return json_null();
	case SQLITE_INTEGER:
		if (strcmp(name, "refused") == 0)
			return json_boolean(sqlite3_column_int64(q, i) != 0);
		return json_integer(sqlite3_column_int64(q, i));
	case SQLITE_FLOAT:
		return json_real(sqlite3_column_double(q, i));
	default:
		return text_value(name, (const char *)sqlite3_column_text(q, i),
		    (size_t)sqlite3_column_bytes(q, i));
	}
}

/* inspect_int.h */
json_t *
inspect_row_json(sqlite3_stmt *q)
{
	json_t *o = json_object();
	int i, n = sqlite3_column_count(q);

	for (i = 0; o && i < n; i++)
		if (json_object_set_new(o, sqlite3_column_name(q, i), col_value(q, i)) < 0) {
			json_decref(o);
			return NULL;
		}
	return o;
}

/* --- lists ------------------------------------------------------------------- */

#define CUR "WITH cur AS (SELECT incarnation, session_id FROM sessions WHERE status = 'current') "
#define MINE(t) "EXISTS (SELECT 1 FROM cur WHERE cur.incarnation = " t ".incarnation " \
	"AND cur.session_id = " t ".session_id)"
#define RESULT_COLS "SELECT run_id, incarnation, session_id, outcome, exit_code, chosen_at, attempts"

const char *const inspect_list_kinds[] = { "quarantined", "unknown", "retained", "refused",
	"orphaned", "queued", "running", "receipts", "all", NULL };

const char *const inspect_outcomes[] = PROTO_OUTCOMES;

/* The column --since looks at, of each kind, in the order of
 * inspect_list_kinds: the one the list is ordered by. */
static const char *const list_time[] = { "due_at", "unknown_at", "chosen_at", "chosen_at",
	"chosen_at", "due_at", "started_at", "acked_at", "accepted_at" };

/* Every accepted run, whichever population holds it now, in one row: its
 * state, in the order the rows are asked (an execution row says most), and
 * what the rows left know.  The program comes from the accepted spec when
 * no row keeps it (a receipt, a run record).  elapsed_ms: how long a
 * running run has run so far (as ps's ELAPSED), at :now; duration_ms: how
 * long a finished one ran, start to its chosen result. */
#define ALL_SQL CUR "SELECT a.run_id AS run_id, CASE " \
	"WHEN r.state = 'started' THEN 'running' WHEN r.state = 'unknown' THEN 'unknown' " \
	"WHEN r.state = 'queued' AND h.acked_at IS NOT NULL THEN 'handed_back' " \
	"WHEN r.state = 'queued' AND " MINE("r") " THEN 'queued' " \
	"WHEN r.state = 'queued' THEN 'quarantined' " \
	"WHEN s.refused = 1 THEN 'refused' WHEN s.run_id IS NOT NULL THEN 'retained' " \
	"WHEN c.run_id IS NOT NULL THEN 'acknowledged' " \
	"WHEN h.acked_at IS NOT NULL THEN 'handed_back' " \
	"WHEN d.known IS NOT NULL THEN d.known ELSE 'accepted' END AS state, " \
	"COALESCE(r.program, s.program, d.program, json_extract(a.content, '$.program')) AS program, " \
	"COALESCE(s.outcome, c.outcome, d.outcome) AS outcome, " \
	"COALESCE(s.exit_code, c.exit_code, d.exit_code) AS exit_code, " \
	"a.accepted_at AS accepted_at, " \
	"COALESCE(r.started_at, s.started_at, c.started_at, d.started_at) AS started_at, " \
	"CASE WHEN r.state = 'started' THEN MAX(:now - r.started_at, 0) END AS elapsed_ms, " \
	"COALESCE(s.chosen_at, c.chosen_at, d.chosen_at) - " \
	"COALESCE(s.started_at, c.started_at, d.started_at) AS duration_ms, " \
	"a.session_id AS session_id " \
	"FROM accepts a LEFT JOIN runs r ON r.run_id = a.run_id " \
	"LEFT JOIN results s ON s.run_id = a.run_id LEFT JOIN receipts c ON c.run_id = a.run_id " \
	"LEFT JOIN run_records d ON d.run_id = a.run_id LEFT JOIN handbacks h ON h.run_id = a.run_id"

/* The query of each kind, in the order of inspect_list_kinds, and the
 * order of its rows, oldest first and newest first (list_order). */
static const char *const list_sql[] = {
	CUR "SELECT run_id, state, incarnation, session_id, due_at, started_at, txn_id FROM runs "
	    "WHERE NOT " MINE("runs"),
	"SELECT run_id, incarnation, session_id, started_at, unknown_at, unknown_why FROM runs "
	    "WHERE state = 'unknown'",
	RESULT_COLS ", last_diag FROM results WHERE refused = 0",
	RESULT_COLS ", refused_cause, last_diag FROM results WHERE refused = 1",
	RESULT_COLS ", last_diag FROM results WHERE refused = 0 AND NOT "
	    SQL_DELIVERABLE_HERE("results"),
	CUR "SELECT run_id, incarnation, session_id, due_at, txn_id FROM runs "
	    "WHERE state = 'queued' AND " MINE("runs"),
	CUR "SELECT run_id, incarnation, session_id, started_at, start_marker, sup_pid, guest_pid "
	    "FROM runs WHERE state = 'started' AND " MINE("runs"),
	"SELECT run_id, incarnation, session_id, outcome, exit_code, acked_at, record_id, attempts "
	    "FROM receipts",
	ALL_SQL,
};

static const char *const list_order[][2] = {
	{ " ORDER BY rowid", " ORDER BY rowid DESC" },
	{ " ORDER BY unknown_at, rowid", " ORDER BY unknown_at DESC, rowid DESC" },
	{ " ORDER BY chosen_at, rowid", " ORDER BY chosen_at DESC, rowid DESC" },
	{ " ORDER BY chosen_at, rowid", " ORDER BY chosen_at DESC, rowid DESC" },
	{ " ORDER BY chosen_at, rowid", " ORDER BY chosen_at DESC, rowid DESC" },
	{ " ORDER BY due_at, rowid", " ORDER BY due_at DESC, rowid DESC" },
	{ " ORDER BY started_at, rowid", " ORDER BY started_at DESC, rowid DESC" },
	{ " ORDER BY acked_at, rowid", " ORDER BY acked_at DESC, rowid DESC" },
	{ " ORDER BY a.accepted_at, a.rowid", " ORDER BY a.accepted_at DESC, a.rowid DESC" },
};

bool
inspect_list_has_outcome(const char *kind)
{
	return text_word_in(kind, (const char *const[]){ "retained", "refused", "orphaned", "receipts", "all",
	    NULL });
}

/* Did the run of row fail: its guest did not exit 0 (killed, timeout,
 * exec_failed, a non-zero exit), or its outcome is unknown?  A cancelled
 * run did what it was told. */
static bool
row_failed(json_t *row)
{
	const char *outcome = json_string_value(json_object_get(row, "outcome"));
	const char *state = json_string_value(json_object_get(row, "state"));

	if (state && strcmp(state, "unknown") == 0)
		return true;
	if (!outcome || strcmp(outcome, "cancelled") == 0)
		return false;
	return strcmp(outcome, "exited") != 0 || json_integer_value(json_object_get(row, "exit_code")) != 0;
}

/* Does row pass the filter?  time is the kind's --since column. */
static bool
row_passes(json_t *row, const struct inspect_filter *f, const char *time)
{
	const char *v;

	if (!f)
		return true;
	if (f->session && (!(v = json_string_value(json_object_get(row, "session_id"))) ||
	    strcmp(v, f->session) != 0))
		return false;
	if (f->outcome && (!(v = json_string_value(json_object_get(row, "outcome"))) ||
	    strcmp(v, f->outcome) != 0))
		return false;
	if (f->failed && !row_failed(row))
		return false;
	return f->since_ms < 0 ||
	    json_integer_value(json_object_get(row, time)) >= now_ms() - f->since_ms;
}

static int
list_rows(struct state *st, sqlite3_stmt *q, const struct inspect_filter *f, const char *time,
    int (*fn)(json_t *, void *), void *arg, struct ek_err *e)
{
	int64_t left = f && f->limit > 0 ? f->limit : -1;
	json_t *row;
	int rc = 0;

	while (left != 0 && (rc = db_step(&st->db, q, e)) == 1) {
		if (!(row = inspect_row_json(q)))
			return ek_fail(e, EK_OSERR, "out of memory");
		if (!row_passes(row, f, time)) {
			json_decref(row);
			continue;
		}
		rc = fn(row, arg);
		json_decref(row);
		if (rc != 0)
			return 0;
		if (left > 0)
			left--;
	}
	return left == 0 ? 0 : rc;
}

/* The index of kind in inspect_list_kinds; EK_USAGE if it is none. */
static int
kind_index(const char *kind, struct ek_err *e)
{
	int i = text_word_index(kind, inspect_list_kinds);

	return i >= 0 ? i : ek_fail(e, EK_USAGE, "unknown list '%.40s'", kind);
}

int
inspect_list_columns(struct state *st, const char *kind, json_t **names, struct ek_err *e)
{
	sqlite3_stmt *q;
	int i = kind_index(kind, e), c;

	*names = NULL;
	if (i < 0 || !(q = db_prep(&st->db, list_sql[i], e)))
		return -1;
	*names = json_array();
	for (c = 0; *names && c < sqlite3_column_count(q); c++)
		if (json_array_append_new(*names, json_string(sqlite3_column_name(q, c))) < 0) {
			json_decref(*names);
			*names = NULL;
		}
	db_done(&st->db, q);
	return *names ? 0 : ek_fail(e, EK_OSERR, "out of memory");
}

int
inspect_list(struct state *st, const char *kind, const struct inspect_filter *f,
    int (*fn)(json_t *, void *), void *arg, struct ek_err *e)
{
	sqlite3_stmt *q;
	char sql[4096];
	int i, rc;

	if ((i = kind_index(kind, e)) < 0 || db_begin_read(&st->db, e) < 0)
		return -1;
	snprintf(sql, sizeof sql, "%s%s", list_sql[i], list_order[i][f && f->newest_first]);
	if (!(q = db_prep(&st->db, sql, e))) {
		db_rollback(&st->db);
		return -1;
	}
	if (sqlite3_bind_parameter_index(q, ":now"))   /* the lists that tell an age */
		sqlite3_bind_int64(q, sqlite3_bind_parameter_index(q, ":now"), now_ms());
	rc = list_rows(st, q, f, list_time[i], fn, arg, e);
	db_done(&st->db, q);
	db_rollback(&st->db);
	return rc < 0 ? -1 : 0;
}

/* --- figures (metrics.c writes them out) ------------------------------------ */

int
inspect_figures(struct state *st, struct inspect_figures *f, struct ek_err *e)
{
	struct output_usage u;
	int rc;

	memset(f, 0, sizeof *f);
	if (db_begin_read(&st->db, e) < 0)
		return -1;
	f->read_at_ms = now_ms();
	rc = summary_read(st, &f->s, e);
	if (rc == 0)
		rc = counters_read(st, &f->c, e);
	db_rollback(&st->db);
	if (rc == 0 && (rc = output_usage(st, &u, e)) == 0) {
		f->output_files = u.files;
		f->output_bytes = u.bytes;
	}
	return rc;
}
