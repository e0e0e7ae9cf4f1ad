/*
 * exec-run supervise RUN_ID — the supervisor of one run, in the
 * foreground (exec-run start forks one per due run): commit the start
 * marker, run the guest contained and isolated, choose its one terminal
 * result, retain it, deliver it, delete the execution row; with --chain,
 * take the next due run of the session and go on (lifecycle.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "cli.h"
#include "clock.h"
#include "crash.h"
#include "deliver.h"
#include "exec-run.h"
#include "guest.h"
#include "isolate.h"
#include "jsonout.h"
#include "outcome.h"
#include "output.h"
#include "proc.h"
#include "reserve.h"
#include "result.h"
#include "runs.h"
#include "session.h"
#include "shares.h"
#include "state.h"
#include "stopsig.h"
#include "supspawn.h"
#include "svlog.h"
#include "text.h"

static const char PROG[] = EXEC_RUN_PROG;

/* --- supervise ------------------------------------------------------------ */

/* Containment fell back or fell short: one line on stderr (a warning,
 * stamped in a detached supervisor's log), never a failure. */
static void
say_containment(const struct run *r, struct guest *g)
{
	if (g->warn.code)
		svlog_say(PROG, "run '%s': %s", r->run_id, g->warn.msg);
	ek_clear(&g->warn);
}

/* Spawn and supervise the guest of r until it ends and every process it
 * started is gone: only then may its result be chosen and reported.  A
 * guest that could not be started at all (its capture files, its
 * isolation) is not run: that is its result. */
static int
run_guest(struct state *st, const struct opts *o, const struct isolate *iso, const struct run *r,
    struct guest_end *end, int64_t dropped[2], struct ek_err *e)
{
	char names[2][RUN_ID_MAX + 16];
	struct guest g;
	struct guest_spec gs = { .program = r->program, .cwd = r->cwd, .args = r->args,
		.env = r->env, .run_id = r->run_id, .txn_id = r->txn_id, .st = st, .iso = iso,
		.writable = o->writable, .policy = r->policy,
		.out_name = names[0], .err_name = names[1], .umask = st->umask_orig,
		.max_output = (size_t)o->max_output, .quota = output_quota_for(st, o->output_quota) };
	int rc;

	snprintf(names[0], sizeof names[0], "out/%s.stdout", r->run_id);
	snprintf(names[1], sizeof names[1], "out/%s.stderr", r->run_id);
	if ((rc = guest_spawn(&gs, &g, e)) < 0) {
		memset(end, 0, sizeof *end);
		end->why = GUEST_NOT_RUN;
		snprintf(end->not_run, sizeof end->not_run, "%s", e->msg);
		ek_clear(e);
		return 0;
	}
	say_containment(r, &g);
	if (run_set_guest(st, r->run_id, g.pid, e) < 0) {
		stop_signal = SIGTERM;   /* cannot record it: end the guest, keep going */
	}
	crash_point("after-spawn");
	guest_wait(&g, r->timeout_ms ? mono_ms() + r->timeout_ms : 0, &stop_signal, o->grace_ms, end);
	dropped[0] = (int64_t)g.dropped[0];   /* cut at --max-output: told by show */
	dropped[1] = (int64_t)g.dropped[1];
	say_containment(r, &g);
	svlog_truncated(st, PROG, r->run_id, &g);
	guest_close(&g);
	if (rc > 0) {
		end->why = GUEST_EXEC_FAILED;
		end->exec_errno = rc;
	}
	return 0;
}

/* exec-run.h.  For a run that did not simply exit or get cancelled, the
 * message goes last ("why: cannot execute '/x': No such file or
 * directory"), so the loop's log tells what went wrong without a look at
 * the state. */
int
print_delivery(const struct opts *o, const char *run_id, const char *outcome, int code,
    const char *message, const struct deliver_report *d)
{
	char safe[sizeof d->detail], n[32];
	bool ok = strcmp(outcome, "exited") == 0 && code == 0;
	int prio = ok && d->status == DELIVERED ? LOG_INFO : LOG_WARNING;   /* a failure: always */

	if (!svlog_shows(prio))   /* a detached supervisor below the log level */
		return 0;
	if (o->json)
		return json_emit(stdout, json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:i, s:s}", "event",
		    "result", "run_id", run_id, "outcome", outcome, "exit_code", code, "message", message,
		    "delivery", deliver_status_name(d->status), "attempts", d->attempts, "detail", d->detail));
	printf("%s%s %s %d: %s (%s): %s", svlog_prefix(prio), run_id, outcome, code,
	    deliver_status_words(d->status), cli_plural(n, sizeof n, d->attempts, "attempt"),
	    text_safe(safe, sizeof safe, d->detail));
	if (strcmp(outcome, "exited") != 0 && strcmp(outcome, "cancelled") != 0)
		printf("; why: %s", text_safe(safe, sizeof safe, message));
	putchar('\n');
	return 0;
}

/* Choose, retain, deliver, delete the execution row.  Lock contention
 * only delays the commit of the chosen result, however long it lasts: the
 * run never becomes unknown for it (SPEC 3, "a chosen result is never
 * lost").  A local failure to deliver leaves the result retained for
 * exec-reconcile; the execution row goes all the same. */
static int
finish(struct state *st, const struct opts *o, const struct run *r, const struct guest_end *end,
    const int64_t dropped[2], int *refused, struct ek_err *e)
{
	char msg[RESULT_MESSAGE_MAX + 1];
	const char *outcome;
	struct deliver_report d;
	struct ek_err undelivered = { 0 };
	struct db_wait w;
	struct result res;
	json_t *left = json_array();
	bool won;
	int code;

	outcome_describe(end, r->program, r->timeout_ms, &outcome, &code, msg, sizeof msg);
	/* The guest has ended: its run leaves its share dimensions in the
	 * result's commit (left NULL, out of memory: the row's delete leaves,
	 * by a trigger, and the others' files catch up later). */
	db_wait_begin(&st->db, &w);
	while (run_commits(st, RUN_DURABLE, e) < 0 || result_choose(st, r->run_id, &r->b, outcome, code,
	    end->why == GUEST_EXEC_FAILED || end->why == GUEST_NOT_RUN ? -1 : end->wait_status,
	    msg, end->why == GUEST_NOT_RUN ? NULL : dropped, o->budget_ms + DELIVER_CLAIM_SLACK_MS,
	    left, &won, e) < 0)
		if (!svlog_wait_again(st, &w, PROG, r->run_id, "result", e)) {
			json_decref(left);
			return -1;
		}
	/* Counted by the loop, logged or not: told before the delivery, so
	 * that a result the dispatcher has is already counted. */
	if (o->ended_fifo)
		supspawn_ran(ended_path(o), strcmp(outcome, "exited") == 0 && code == 0);
	/* The rest need not be synced before the next durable commit: the
	 * next run's start marker in a chain, else the close (lifecycle.h). */
	if (run_commits(st, RUN_LAZY, e) < 0)
		ek_clear(e);
	if (left && shares_left(st, r->run_id, left, 0, NULL, e) < 0)
		ek_report(PROG, e);   /* not fatal: the others' files catch up at their next publish */
	json_decref(left);
	if (deliver_result(st, r->run_id, DELIVER_MAX_ATTEMPTS, mono_ms() + o->budget_ms, &d, e) < 0)
		undelivered = *e;
	db_wait_begin(&st->db, &w);
	while (run_delete(st, r->run_id, e) < 0)
		if (!svlog_wait_again(st, &w, PROG, r->run_id, "deleting the execution row", e))
			return -1;
	crash_point("after-report");
	if (undelivered.code) {
		*e = undelivered;
		return -1;
	}
	*refused += d.status == DELIVER_REFUSED;
	if (!won && result_load(st, r->run_id, &res, e) == 1) {
		print_delivery(o, r->run_id, res.outcome, res.exit_code, res.message, &d);   /* the other chooser's */
		result_free(&res);
		return 0;
	}
	return print_delivery(o, r->run_id, outcome, code, msg, &d);
}

/* Guests fall back to no isolation: say so once, on stderr (a warning). */
void
say_isolation(const struct isolate *iso, const char *run_id)
{
	char line[1024];

	if (!iso->fallback)
		return;
	isolate_describe(iso, line, sizeof line);
	if (run_id)
		svlog_say(PROG, "run '%s': %s", run_id, line);
	else
		svlog_say(PROG, "%s", line);
}

/* The life of run r, its start marker committed: its limits, its guest,
 * its one result (*refused counts it if the dispatcher refused it). */
static int
supervise_started(struct state *st, const struct opts *o, const struct isolate *iso, struct run *r,
    int *refused, struct ek_err *e)
{
	struct guest_end end;
	int64_t dropped[2] = { 0, 0 };
	int rc;

	crash_point("start-marker");
	/* Nothing before the chosen result need outlive a power loss, which
	 * takes the guest with it (lifecycle.h). */
	if (run_commits(st, RUN_LAZY, e) < 0)
		ek_clear(e);   /* stays durable: slower, as safe */
	/* The limits file, before the guest: a guest never runs without the
	 * limits it was started under (nor without the view of them it is
	 * given, isolate.h).  If it cannot be written, the guest is not run
	 * and that is the run's one result (seed 002: a failed startup fact
	 * is not bypassed). */
	if (isolate_view_create(st, iso, r->run_id, e) < 0 ||
	    shares_publish_joined(st, r->run_id, r->policy, 0, NULL, e) < 0) {
		memset(&end, 0, sizeof end);
		end.why = GUEST_NOT_RUN;
		snprintf(end.not_run, sizeof end.not_run, "its limits file could not be written: "
		    "%.900s", e->msg);
		ek_clear(e);
		rc = 0;
	} else {
		rc = run_guest(st, o, iso, r, &end, dropped, e);
	}
	if (rc == 0)
		rc = finish(st, o, r, &end, dropped, refused, e);
	isolate_view_remove(st, r->run_id);
	return rc;
}

/* A starter's supervisor whose run is gone or taken (a chaining one got
 * there first, rc 0 or a refusal for now) takes the oldest due run
 * instead, as a chain would: the slot it was started for is filled all the
 * same.  It tells its starter which run it started, if any ('1', or '2'
 * and the other run's id; nothing: not started), and lets go.  A refusal
 * for the session is still said.  rc as from the mark: 1 started (r), 0
 * not, -1 failed. */
static int
started_for_starter(struct state *st, const struct opts *o, int slots, int rc, struct run *r,
    struct ek_err *e)
{
	struct session cur;
	char word[RUN_ID_MAX + 2];
	int n;

	if (rc < 0 && e->code == EK_TEMPFAIL)
		rc = 0, ek_clear(e);
	if (rc == 0 && o->chain) {
		run_free(r);
		if ((rc = session_current(st, &cur, e)) > 0)
			rc = chain_next(st, &cur.b, slots, getpid(), proc_start_time(getpid()), r, e);
		n = snprintf(word, sizeof word, "2%s", r->run_id);
	} else {
		n = snprintf(word, sizeof word, "1");
	}
	/* If the starter is gone, the write fails and we supervise anyway. */
	if (rc > 0)
		(void)!write((int)o->ready_fd, word, (size_t)n);
	close((int)o->ready_fd);
	return rc;
}

int
cmd_supervise(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct binding b;
	struct isolate iso;
	struct run r = { 0 };
	int rc, refused = 0, slots = o->chain ? (int)o->slots : 0;

	stopsig_catch();
	signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill a supervisor */
	/* Its stdout and stderr are a log other supervisors write to as well:
	 * a line a write, so that lines arrive whole and when they happen. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (o->log_stamps)
		svlog_stamp_lines();
	/* First how its guest is kept out of the state directory: a supervisor
	 * that cannot isolate it as asked leaves the run queued. */
	if (isolate_resolve(o->isolation, o->guest_user, o->require_isolation, st->dir, &iso, e) < 0)
		return -1;
	say_isolation(&iso, o->run_id);
	shares_hooks_isolation(&iso);   /* the hooks it runs, as its guests */
	if ((rc = run_load(st, o->run_id, &r, e)) < 0)
		return -1;
	if (rc == 0 && o->ready_fd < 0)
		return ek_fail(e, EK_NOINPUT, "run '%s': no execution row", o->run_id);
	/* Its commits are in the WAL, synced: closing need not checkpoint. */
	sqlite3_db_config(st->db.h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	chain_hold_cancels(true);
	if (rc > 0) {
		crash_point("before-marker");
		rc = run_mark_started(st, &r, getpid(), proc_start_time(getpid()), slots, e);
		if (rc == 0)
			rc = chain_refusal(st, &r, e);
	}
	if (o->ready_fd >= 0 && (rc = started_for_starter(st, o, slots, rc, &r, e)) < 0)
		return -1;
	b = r.b;
	while (rc > 0) {
		stop_run_token = chain_token(r.started_at);
		chain_hold_cancels(false);
		rc = supervise_started(st, o, &iso, &r, &refused, e);
		run_free(&r);
		chain_hold_cancels(true);
		stop_run_token = 0;
		if (rc == 0 && o->chain && !stop_signal)
			rc = chain_next(st, &b, slots, getpid(), proc_start_time(getpid()), &r, e);
		if (rc > 0 && o->log_stamps && !o->json && svlog_shows(LOG_DEBUG))   /* the log's "started" line */
			printf("%sstarted %s (chained)\n", svlog_prefix(LOG_DEBUG), r.run_id);
	}
	run_free(&r);
	return rc == 0 && refused ? CMD_REFUSED : rc;
}

