/*
 * chain — the next run of a chaining supervisor (chain.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "clock.h"
#include "deliver.h"

static const char STOP_FILE[] = "out/chain.stop";

static bool
stop_asked(const struct state *st)
{
	struct stat sb;

	return st->out_fd >= 0 && fstatat(st->out_fd, STOP_FILE + 4, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

static int
copy_id(const char *run_id, void *arg)
{
	snprintf(arg, RUN_ID_MAX + 1, "%s", run_id);
	return 1;   /* the first is enough */
}

/* In the write transaction: load the oldest due run of b and mark it. */
static int
take(struct state *st, const struct binding *b, int slots, pid_t sup_pid, int64_t sup_start,
    struct run *next, struct ek_err *e)
{
	char id[RUN_ID_MAX + 1] = "";
	int rc;

	if (run_each_due(st, b, now_ms(), 1, copy_id, id, e) < 0)
		return -1;
	if (!id[0] || (rc = run_load(st, id, next, e)) == 0)
		return 0;
	if (rc < 0)
		return -1;
	if ((rc = run_mark_started_in(st, next, sup_pid, sup_start, slots, e)) <= 0)
		run_free(next);
	return rc;
}

int
chain_next(struct state *st, const struct binding *b, int slots, pid_t sup_pid,
    int64_t sup_start, struct run *next, struct ek_err *e)
{
	int rc;

	memset(next, 0, sizeof *next);
	if (stop_asked(st) || deliver_credential_refused())
		return 0;
	/* The start marker is on disk before the guest is spawned; its sync
	 * also covers the last run's lazy commits (its row delete). */
	if (db_durable(&st->db, true, e) < 0 || db_begin_write(&st->db, e) < 0)
		return -1;
	if ((rc = take(st, b, slots, sup_pid, sup_start, next, e)) <= 0) {
		db_rollback(&st->db);
		return rc;
	}
	if (db_commit(&st->db, e) < 0) {
		run_free(next);
		return -1;
	}
	return 1;
}

int
chain_stop(struct state *st, bool stop, struct ek_err *e)
{
	int fd;

	if (!stop) {
		if (state_unlink(st, STOP_FILE) < 0)
			return ek_fail(e, EK_IOERR, "removing %s/%s: %s", st->dir, STOP_FILE, strerror(errno));
		return 0;
	}
	if ((fd = state_open_file(st, STOP_FILE, O_WRONLY | O_CREAT, 0600, e)) < 0)
		return -1;
	close(fd);
	return 0;
}

int
chain_token(int64_t started_at)
{
	return (int)(started_at & 0x3fffffff) + 1;
}

void
chain_hold_cancels(bool hold)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

int
chain_refusal(struct state *st, const struct run *r, struct ek_err *e)
{
	struct session cur;
	int rc = session_current(st, &cur, e);

	if (rc < 0)
		return -1;
	if (rc == 0 || !binding_eq(&cur.b, &r->b))
		return ek_fail(e, EK_NOSESSION, "run '%s' belongs to session '%s', not the current "
		    "session: it stays quarantined", r->run_id, r->b.session_id[0] ? r->b.session_id : "(empty)");
	return ek_fail(e, EK_TEMPFAIL, "run '%s' is %s%s: not startable%s", r->run_id, r->state,
	    r->cancel_at ? " and cancelled" : "", r->cancel_at || strcmp(r->state, "queued") ? "" :
	    " now (another supervisor took it, or every slot is taken)");
}
