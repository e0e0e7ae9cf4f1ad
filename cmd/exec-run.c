/*
 * exec-run — start due runs of the current session, supervise each guest,
 * choose its terminal result once, retain it, deliver it, then delete the
 * execution row; and cancel a run.
 *
 *   exec-run start      forks one supervisor per due run (up to --slots)
 *   exec-run supervise  is that supervisor, in the foreground
 *   exec-run cancel     a queued run: chooses "cancelled" and reports it; a
 *                       started one: asks its supervisor to end the guest
 *                       (the supervisor chooses); one whose supervisor is
 *                       gone: marks it unknown
 *   exec-run wait       waits until no supervisor of the state is left
 *   exec-run sweep      settles runs whose supervisor vanished (unknown)
 *   exec-run isolation  says how guests would be isolated (isolate.h)
 *
 * A supervisor's command line and its guest's environment never name the
 * state directory: a started supervisor finds it in its own environment,
 * and makes itself non-dumpable before it opens it, so that no guest can
 * read its memory, environment or descriptors (doc/security.md).
 * The start marker is committed before the guest is spawned: it marks
 * entry into dispatch, not proof that the guest started.  A started run is
 * never started again; if its supervisor vanishes without choosing a
 * result, the run becomes unknown (lifecycle.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "backup.h"
#include "chain.h"
#include "cli.h"
#include "client.h"
#include "clock.h"
#include "counters.h"
#include "crash.h"
#include "deliver.h"
#include "exec-run.h"
#include "guest.h"
#include "isolate.h"
#include "jsonout.h"
#include "opts.h"
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

static const char USAGE_HEAD[] =
	"Usage: exec-run [OPTION]... start [--slots N] [--wait] [--chain]\n"
	"       exec-run [OPTION]... supervise RUN_ID\n"
	"       exec-run [OPTION]... cancel RUN_ID... [--session SID]\n"
	"       exec-run [OPTION]... wait [--timeout-ms N]\n"
	"       exec-run [OPTION]... sweep\n"
	"       exec-run [OPTION]... isolation\n"
	"Run accepted work of the current session and report its results.\n"
	"\n"
	"Options:\n";

static const char USAGE_TAIL[] =
	"\n"
	"Exit status: 0 ok (supervise: the result was chosen, whatever the guest\n"
	"did); 64 usage; 65 corrupt state; 66 no such run; 69 dispatcher unavailable;\n"
	"75 run not startable now, busy, or wait timed out; 76 start --wait,\n"
	"supervise: the dispatcher refused a result (kept as evidence, never sent\n"
	"again); 77 no current session, or the run belongs to another session\n"
	"(quarantined); 78 state from another version, unsafe permissions, guests\n"
	"cannot be isolated as asked (doc/security.md), or the state is an older\n"
	"copy (open a new session).\n";


/* --- start ---------------------------------------------------------------- */

struct starter {
	const struct opts *o;
	struct state *st;
	char self[PATH_MAX];
	struct supspawn sup;   /* what every supervisor of this start is told */
	char guest_user[64];   /* the default guest user of a root executor */
	bool opened;           /* a detached one's stdin and log, once */
	int started;
	int refused;           /* --wait: supervisors whose result the dispatcher refused */
	pid_t kids[256];
	int nkids;
};

/* A detached supervisor outlives our stdout: /dev/null for its stdin, and
 * the log.  Opened for the first supervisor, not on every start. */
static void
open_detached(struct starter *s)
{
	if (s->opened || !s->sup.detached)
		return;
	s->opened = true;
	s->sup.in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	s->sup.log = svlog_open(s->st, (int)s->o->log_fd, PROG);
}

/* Wait for supervisor pid (--wait), counting it if it says the
 * dispatcher refused its result (exit EK_PROTOCOL, CMD_REFUSED). */
static void
reap(struct starter *s, pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return;
	s->refused += WIFEXITED(status) && WEXITSTATUS(status) == EK_PROTOCOL;
}

/* Spawn a supervisor (waited for with --wait; left to run otherwise, to be
 * reparented when we exit) and return once it has committed its start
 * marker or given up. */
static int
start_one(const char *run_id, void *arg)
{
	struct starter *s = arg;
	char started[RUN_ID_MAX + 1];
	int ready[2];
	pid_t pid;

	fflush(stdout);
	open_detached(s);
	if (pipe2(ready, O_CLOEXEC) < 0)
		return -1;
	pid = supspawn_start(&s->sup, run_id, ready[1]);
	close(ready[1]);
	if (pid < 0) {
		close(ready[0]);
		return -1;
	}
	if (s->o->wait && s->nkids < (int)(sizeof s->kids / sizeof s->kids[0]))
		s->kids[s->nkids++] = pid;
	else if (s->o->wait)
		reap(s, pid);
	if (!supspawn_await(ready[0], run_id, started, sizeof started))
		return 0;
	s->started++;
	if (!s->o->wait && s->o->json)
		json_emit(stdout, json_pack("{s:s, s:s}", "event", "started", "run_id", started));
	else if (!s->o->wait)
		printf("started %s\n", started);
	return 0;
}

/* start: what the supervisors are told to use, decided once here (an
 * explicit userns is probed by each supervisor alone). */
static int
start_isolation(const struct opts *o, struct state *st, struct starter *s, struct ek_err *e)
{
	struct isolate iso;

	s->sup.isolation = isolate_mode_name(o->isolation);
	if (o->isolation == ISOLATE_USERNS)
		return 0;
	if (isolate_resolve(o->isolation, o->guest_user, o->require_isolation, st->dir, &iso, e) < 0)
		return -1;
	say_isolation(&iso, NULL);
	s->sup.isolation = isolate_mode_name(iso.mode);
	if (iso.default_user) {
		snprintf(s->guest_user, sizeof s->guest_user, "%s", iso.user);
		s->sup.guest_user = s->guest_user;
	}
	return 0;
}

/* What every supervisor of this start is told, and inherits: our options,
 * and EXEC_STATE_DIR. */
static int
starter_prepare(struct starter *s, struct ek_err *e)
{
	const struct opts *o = s->o;

	s->sup = (struct supspawn){ .path = s->self, .prog = PROG, .budget_ms = o->budget_ms,
		.grace_ms = o->grace_ms, .max_output = o->max_output, .quota = o->output_quota,
		.slots = o->slots,
		.isolation = s->sup.isolation, .guest_user = s->sup.guest_user ? s->sup.guest_user :
		o->guest_user,
		.require_isolation = o->require_isolation, .chain = o->chain,
		/* lines on --log-fd join a log for people, --json or not */
		.json = o->json && o->log_fd < 0,
		.detached = !o->wait, .in = -1, .log = -1, .ended_fifo = o->ended_fifo };
	if (setenv("EXEC_STATE_DIR", s->st->dir, 1) < 0)
		return ek_fail(e, EK_OSERR, "setenv: %s", strerror(errno));
	return world_to_env(o->writable, e);   /* the operator's writable paths */
}

/* --wait: what --slots left queued (not due yet included), so that 4 runs
 * started out of 100 are not read as all of the work done. */
static void
say_left_queued(struct state *st, const struct opts *o, const struct session *cur, int64_t started)
{
	struct ek_err e = { 0 };
	int64_t left;
	char a[32], b[32];

	if (!o->json && o->wait && run_count_queued(st, &cur->b, &left, &e) == 0)
		printf("started %s; %s left queued (--slots %lld)\n", cli_plural(a, sizeof a, started, "run"),
		    cli_plural(b, sizeof b, left, "run"), (long long)o->slots);
}

static int
cmd_start(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct starter s = { .o = o, .st = st };
	struct ek_err no_room = { 0 };
	struct session cur;
	int unknown, finished, live, i;
	int64_t before = 0, after = 0;

	/* A state restored from an older copy may still believe in a session the
	 * dispatcher has ended: confirm it before starting anything. */
	if (session_require(st, NULL, &cur, e) < 0 || state_refuse_backup(st, e) < 0 ||
	    (!o->confirmed && session_confirm(st, &cur, CLIENT_TIMEOUT_MS, e) < 0) ||
	    run_sweep(st, &unknown, &finished, e) < 0 ||
	    run_count_live(st, &cur.b, &live, e) < 0 || start_isolation(o, st, &s, e) < 0)
		return -1;
	if (o->chain && chain_stop(st, false, e) < 0)
		return -1;
	if (reserve_ensure(st, &no_room) < 0)   /* made again once there is room */
		ek_clear(&no_room);
	if (proc_self_exe(s.self, sizeof s.self) < 0)
		return ek_fail(e, EK_OSERR, "readlink /proc/self/exe: %s", strerror(errno));
	if (starter_prepare(&s, e) < 0)
		return -1;
	/* With --chain the supervisors start the runs after their first: the
	 * state's count of starts says how many ran while we waited. */
	if (o->wait && o->chain && counters_started(st, &before, e) < 0)
		return -1;
	if (live < o->slots &&
	    run_each_due(st, &cur.b, now_ms(), (int)(o->slots - live), start_one, &s, e) < 0)
		return -1;
	for (i = 0; i < s.nkids; i++)
		reap(&s, s.kids[i]);
	if (o->wait && o->chain && counters_started(st, &after, e) < 0)
		return -1;
	say_left_queued(st, o, &cur, after - before > s.started ? after - before : s.started);
	if (o->json && !o->wait)
		json_emit(stdout, json_pack("{s:s, s:i, s:i, s:i}", "event", "start", "started", s.started,
		    "running_before", live, "unknown_found", unknown));
	/* A refused result is final (kept as evidence, never sent again): the
	 * exit status says so, as exec-report's does, not only its line. */
	if (s.refused)
		fprintf(stderr, "%s: %s refused by the dispatcher (kept as evidence: exec-inspect list"
		    " refused)\n", PROG, s.refused == 1 ? "a result was" : "results were");
	return s.refused ? CMD_REFUSED : 0;
}

/* --- wait and sweep ------------------------------------------------------------ */

static int
cmd_wait(struct state *st, const struct opts *o, struct ek_err *e)
{
	int64_t until = mono_ms() + o->timeout_ms;
	struct timespec tick = { 0, 50 * 1000000L };
	int live;

	/* Every supervisor of the state, whichever session it runs for: one
	 * whose session ended meanwhile (revoked while its guest ran, say) is
	 * still running, and so is its delivery. */
	if (chain_stop(st, true, e) < 0)
		return -1;
	for (;;) {
		if (run_count_live(st, NULL, &live, e) < 0)
			return -1;
		if (live == 0)
			return 0;
		if (mono_ms() >= until)
			return ek_fail(e, EK_TEMPFAIL, "%d run%s still running after %lld ms", live,
			    live == 1 ? "" : "s", (long long)o->timeout_ms);
		nanosleep(&tick, NULL);
	}
}

static int
cmd_sweep(struct state *st, const struct opts *o, struct ek_err *e)
{
	int unknown, finished;

	if (run_sweep(st, &unknown, &finished, e) < 0)
		return -1;
	if (o->json)
		return json_emit(stdout, json_pack("{s:s, s:i, s:i}", "event", "sweep", "unknown", unknown,
		    "finished", finished));
	printf("%d run%s became unknown, %d finished run%s tidied\n", unknown, unknown == 1 ? "" : "s",
	    finished, finished == 1 ? "" : "s");
	return 0;
}

/* --- isolation ------------------------------------------------------------------ */

/* Needs no state (st is NULL): exec-loop asks before its first session
 * creates one. */
static int
cmd_isolation(struct state *st, const struct opts *o, struct ek_err *e)
{
	struct isolate iso;
	char line[1024];
	int i;

	if (isolate_resolve(o->isolation, o->guest_user, o->require_isolation,
	    cli_state_dir(o->state_dir), &iso, e) < 0)
		return -1;
	isolate_describe(&iso, line, sizeof line);
	printf("%s%s", line, o->writable->no_network ? "; no network (loopback only)" : "");
	for (i = 0; i < o->writable->n; i++)   /* the operator's own paths */
		printf("%s%s", i ? ", " : "; also writable: ", o->writable->path[i]);
	printf("\n");
	return 0;
}

/* --- commands, options and main ----------------------------------------------- */

/* What a command needs: one RUN_ID operand; one or more; no state (it
 * runs with st NULL); to be undumpable (a supervisor's guest must not read
 * its memory). */
enum { NEEDS_ID = 1, NEEDS_IDS = 2, NO_STATE = 4, UNDUMPABLE = 8 };

/* The commands, as git's commands[]. */
static const struct cli_command commands[] = {
	{ .name = "start", .run = cmd_start },
	{ .name = "supervise", .run = cmd_supervise, .needs = NEEDS_ID | UNDUMPABLE, .args = "RUN_ID" },
	{ .name = "cancel", .run = cmd_cancel, .needs = NEEDS_IDS, .args = "RUN_ID..." },
	{ .name = "wait", .run = cmd_wait },
	{ .name = "sweep", .run = cmd_sweep },
	{ .name = "isolation", .run = cmd_isolation, .needs = NO_STATE },
};

/* --guest-writable PATH: an existing path, no ':' (EXEC_GUEST_WRITABLE
 * passes the list on to the supervisors). */
static int
writable_opt(void *v, const char *path)
{
	struct opts *o = v;
	struct ek_err e = { 0 };
	int rc = strchr(path, ':') ? -1 : world_add(o->writable, path, &e);

	if (rc == 0 || (rc > 0 && o->writable->n > WORLD_OPERATOR_MAX))
		return cli_usage_error(PROG, "--guest-writable %.200s: %s", path, rc ? "too many paths" :
		    "no such file or directory");
	if (rc < 0)
		return cli_usage_error(PROG, "--guest-writable %.200s: %s", path, e.code ? e.msg :
		    "':' cannot be in a path");
	return 0;
}

/* --allow-hook PATH: added to EXEC_ALLOW_HOOKS, which the supervisors
 * inherit and the hooks' publishers read (hooks.c). */
static int
allow_hook(void *o, const char *path)
{
	struct ek_err e = { 0 };

	(void)o;
	return shares_allow_hook(path, &e) < 0 ? cli_usage_error(PROG, "--allow-hook %.200s: %s", path,
	    e.msg) : 0;
}

/* EXEC_ISOLATION (the default --isolation), EXEC_GUEST_WRITABLE and
 * EXEC_GUEST_NETWORK. */
static int
env_defaults(struct opts *o)
{
	static struct world operator_world;   /* one a process: nothing to free */
	const char *mode = getenv("EXEC_ISOLATION");
	struct ek_err e = { 0 };

	if (mode && *mode && isolate_parse_mode(mode, &o->isolation) < 0)
		return cli_usage_error(PROG, "EXEC_ISOLATION: '%.200s' is not one of auto, userns, user, "
		    "none", mode);
	o->writable = &operator_world;
	world_init(o->writable);
	if (world_from_env(o->writable, &e) < 0)
		return cli_usage_error(PROG, "%s", e.msg);
	return 0;
}

static const char *const network_modes[] = { "host", "none", NULL };

static const struct opt options[] = {
	OPTS_INT("slots", slots, 1, 256, "N",
	    "run at most N guests at once (default 4)"),
	OPTS_FLAG("wait", 0, wait,
	    "start: stay until the started supervisors end"),
	OPTS_FLAG("chain", 0, chain,
	    "start: each supervisor, its run reported, takes the\n"
	    "next due run itself, within --slots, until none is\n"
	    "due or 'exec-run wait' is asked (exec-loop)"),
	OPTS_INT("log-fd", log_fd, 0, INT32_MAX, "N",
	    "start: the detached supervisors write their lines (each\n"
	    "begins with the time, or under journald with its\n"
	    "priority) to descriptor N instead of\n"
	    "out/supervisors.log (exec-loop: its activity log)"),
	OPTS_STRING("ended-fifo", 0, ended_fifo, "FIFO",
	    "start: each supervisor writes a line to FIFO (a path\n"
	    "in the state directory, or absolute) as it ends,\n"
	    "its slot free (exec-loop: when to start more), and\n"
	    "o or f for each run (exited 0 or not: its count)"),
	OPTS_INT("budget-ms", budget_ms, 1, DELIVER_BUDGET_MAX_MS, "N",
	    "cleanup budget for reporting a result (default 5000)"),
	OPTS_INT("grace-ms", grace_ms, 0, 3600000, "N",
	    "SIGTERM to SIGKILL delay when ending a guest\n"
	    "(default 2000)"),
	OPTS_INT("max-output", max_output, 0, 1LL << 30, "N",
	    "keep at most N bytes of each of stdout and stderr\n"
	    "(default 1048576); show tells what was dropped"),
	{ .name = "output-quota", .kind = OPTK_INT, .meta = "N",
	  .off = offsetof(struct opts, output_quota), .min = 0, .max = INT64_MAX / 2,
	  .word = "auto", .word_value = OUTPUT_QUOTA_AUTO, .help =
	    "keep all captured output under N bytes, past it\n"
	    "truncated and flagged (out/RUN.truncated); auto\n"
	    "(default): a quarter of the state's filesystem, at\n"
	    "most 1 GiB; 0: no quota" },
	OPTS_STRING("session", 0, session, "SID",
	    "cancel: only if SID is the current session (default:\n"
	    "the current session, whichever it is)"),
	OPTS_INT("timeout-ms", timeout_ms, 0, 86400000, "N",
	    "wait: give up after N ms (default 60000)"),
	OPTS_FLAG("confirmed", 0, confirmed,
	    "start: the caller has just heartbeated the session, so\n"
	    "start does not ask the dispatcher again (exec-loop)"),
	OPTS_INT("ready-fd", ready_fd, 3, 1024, "N",
	    "supervise: write one byte to fd N once the start marker\n"
	    "is committed (exec-run start uses it)"),
	OPTS_FLAG("log-stamps", 0, log_stamps,
	    "supervise: begin each line with the time (under\n"
	    "journald: its priority), write those up to\n"
	    "$EXEC_LOG_LEVEL (exec-run start tells a detached\n"
	    "supervisor so)"),
	OPTS_ENUM("isolation", isolation_word, isolate_modes, "MODE",
	    "keep guests out of the state directory by MODE: auto\n"
	    "(default, or $EXEC_ISOLATION: user with --guest-user\n"
	    "or as root, else userns if available, else none),\n"
	    "userns, user or none"),
	OPTS_STRING("guest-user", 0, guest_user, "USER",
	    "run guests as USER (needs root, or CAP_SETUID,\n"
	    "CAP_SETGID and CAP_KILL; as root the default is\n"
	    "execkit-guest, else nobody)"),
	OPTS_CALL("guest-writable", 0, writable_opt, "PATH",
	    "let guests write to PATH too (repeatable; also\n"
	    "$EXEC_GUEST_WRITABLE, paths separated by ':')"),
	OPTS_ENUM("guest-network", network, network_modes, "MODE",
	    "host (default, or $EXEC_GUEST_NETWORK), or none:\n"
	    "every guest in a network namespace, loopback only"),
	OPTS_CALL("allow-hook", 0, allow_hook, "PATH",
	    "run the notify hook PATH when a run's policy names it\n"
	    "(repeatable; also $EXEC_ALLOW_HOOKS): no other runs"),
	OPTS_FLAG("require-isolation", 0, require_isolation,
	    "refuse to run guests that would not be isolated"),
	OPTS_STATE("JSON Lines output (doc/json.md)"),
};

/* supervise's own options are those start passes its supervisors
 * (supspawn.c). */
static const struct opts_only only[] = {
	{ "wait confirmed log-fd", "start" },
	{ "chain ended-fifo", "start supervise" },
	{ "ready-fd log-stamps", "supervise" },
	{ "session", "cancel" },
	{ "timeout-ms", "wait" },
};

static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options), .cmds = OPTS_TABLE(commands), .only = OPTS_TABLE(only),
};

/* The RUN_ID operands: exactly one (supervise), one or more (cancel), or
 * none; each a valid run id. */
static int
check_ids(int argc, char **argv, struct opts *o)
{
	int i;

	if ((o->cmd->needs & NEEDS_ID) && optind + 1 != argc)
		return cli_usage_error(PROG, "%s needs exactly one RUN_ID", o->cmd->name);
	if ((o->cmd->needs & NEEDS_IDS) && optind == argc)
		return cli_usage_error(PROG, "%s needs a RUN_ID (or several)", o->cmd->name);
	if (!(o->cmd->needs & (NEEDS_ID | NEEDS_IDS)) && optind != argc)
		return cli_usage_error(PROG, "unexpected operand '%s'", argv[optind]);
	o->ids = argv + optind;
	o->nids = argc - optind;
	o->run_id = o->nids ? o->ids[0] : NULL;
	for (i = 0; i < o->nids; i++)
		if (!run_id_valid(o->ids[i]))
			return cli_usage_error(PROG, "'%.200s' is not a valid run id", o->ids[i]);
	return 0;
}

/* The --ended-fifo path: a relative one is in the state directory, so a
 * supervisor's command line (world-readable) never names the state. */
const char *
ended_path(const struct opts *o)
{
	static char path[PATH_MAX];

	if (o->ended_fifo[0] == '/' ||
	    snprintf(path, sizeof path, "%s/%s", cli_state_dir(o->state_dir), o->ended_fifo) >= (int)sizeof path)
		return o->ended_fifo;
	return path;
}

/* --guest-network and --isolation over EXEC_GUEST_NETWORK and
 * EXEC_ISOLATION, which are defaults (an --isolation given also stands
 * against --guest-user's). */
static void
over_env(struct opts *o)
{
	if (o->network)
		o->writable->no_network = strcmp(o->network, "none") == 0;
	if (o->isolation_word && isolate_parse_mode(o->isolation_word, &o->isolation) == 0)
		o->isolation_given = true;
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
	int rc;

	*o = (struct opts){ .ready_fd = -1, .log_fd = -1, .slots = 4, .budget_ms = DELIVER_BUDGET_MS,
		.grace_ms = 2000, .max_output = 1 << 20, .output_quota = OUTPUT_QUOTA_AUTO,
		.timeout_ms = 60000 };
	if ((rc = env_defaults(o)) != 0)
		return rc;
	if ((rc = opts_parse(&spec, argc, argv, o)) != 0)
		return rc;
	over_env(o);
	if ((rc = opts_command(&spec, argc, argv, &o->cmd)) != 0)
		return rc;
	if ((rc = check_ids(argc, argv, o)) != 0)
		return rc;
	if (o->log_fd >= 0 && o->wait)
		return cli_usage_error(PROG, "--log-fd goes with start, without --wait");
	if (o->ended_fifo && o->cmd->run == cmd_start && !supspawn_is_fifo(ended_path(o)))
		return cli_usage_error(PROG, "--ended-fifo %.200s: not a fifo", o->ended_fifo);
	if (o->log_fd >= 0 && fcntl((int)o->log_fd, F_GETFD) < 0)
		return cli_usage_error(PROG, "--log-fd %lld: not an open descriptor", (long long)o->log_fd);
	if (o->guest_user && !o->isolation_given)
		o->isolation = ISOLATE_AUTO;   /* EXEC_ISOLATION is a default: --guest-user says more */
	if (o->isolation == ISOLATE_USER && !o->guest_user)
		return cli_usage_error(PROG, "--isolation user needs --guest-user USER");
	if (o->guest_user && (o->isolation == ISOLATE_USERNS || o->isolation == ISOLATE_NONE))
		return cli_usage_error(PROG, "--guest-user goes with --isolation user (or auto), not %s",
		    isolate_mode_name(o->isolation));
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct state st;
	struct ek_err e = { 0 };
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == CLI_DONE ? cli_finish(PROG, EK_OK) : rc;
	if (o.cmd->needs & NO_STATE)
		return cli_finish(PROG, o.cmd->run(NULL, &o, &e) < 0 ? ek_report(PROG, &e) : EK_OK);
	/* A supervisor's guest must not read its memory, environment or
	 * descriptors (/proc/PID/mem, environ, fd): before the state is opened. */
	if ((o.cmd->needs & UNDUMPABLE) && prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L) < 0) {
		ek_fail(&e, EK_OSERR, "prctl PR_SET_DUMPABLE: %s", strerror(errno));
		return ek_report(PROG, &e);
	}
	proc_keep_heap();
	if (state_open(&st, cli_state_dir(o.state_dir), 0, &e) < 0)
		return ek_report(PROG, &e);
	rc = o.cmd->run(&st, &o, &e);
	state_close(&st);
	if (o.ended_fifo && o.cmd->run == cmd_supervise)
		supspawn_ended(ended_path(&o));
	if (rc < 0)
		fputs(svlog_prefix(LOG_ERR), stderr);   /* a detached supervisor's line is stamped too */
	return cli_finish(PROG, rc < 0 ? ek_report(PROG, &e) : rc == CMD_REFUSED ? EK_PROTOCOL : EK_OK);
}
