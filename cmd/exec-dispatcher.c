/*
 * exec-dispatcher — the reference dispatcher: a small HTTP server that
 * speaks doc/protocol.md to executors, keeps its own SQLite store, and lets
 * tests steer it through /admin/ endpoints and injected faults.
 *
 * This file is the options and main; the server is in dispatcher/, one
 * file per area with its header, and dispatcher/routes.h (the top) draws
 * its shape and states its invariants.  `exec-dispatcher submit` is a client of a running one
 * (cmd/dispatcher-submit.c): its options share the table below, so that
 * help, man page and completion read them in one place.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "dispatcher-submit.h"
#include "err.h"
#include "file.h"
#include "opts.h"
#include "protocol.h"
#include "text.h"

#include "dispatcher/util.h"
#include "dispatcher/store.h"
#include "dispatcher/auth.h"
#include "dispatcher/settle.h"
#include "dispatcher/routes.h"

const char PROG[] = "exec-dispatcher";     /* not static: dispatcher/ logs with it */

/* The server's one state; its cfg comes from the options (parse_args).
 * The store is store.c's (dsp_store). */
struct dispatcher dsp;

/* Write "port\n" to path atomically (file.h), mode 0644. */
static int
write_port_file(const char *path, unsigned port, struct ek_err *e)
{
	char line[16];
	int n = snprintf(line, sizeof line, "%u\n", port);

	return file_write_atomic(path, line, (size_t)n, 0644, e);
}

static const char USAGE_HEAD[] =
	"Usage: exec-dispatcher [OPTION]...\n"
	"       exec-dispatcher [OPTION]... submit [--id ID] -- PROGRAM [ARG]...\n"
	"       exec-dispatcher [OPTION]... backup COPY\n"
	"Serve the execkit dispatcher protocol (doc/protocol.md) on 127.0.0.1,\n"
	"with admin endpoints and fault injection for tests; or submit one run to\n"
	"a dispatcher that runs (POST /admin/runs) and print its run id; or copy\n"
	"the store, consistent while it serves, to COPY (a new file, mode 0600).\n"
	"\n";

static const char USAGE_TAIL[] =
	"\n"
	"Runs until SIGTERM or SIGINT.  Exit status: 0 stopped by a signal (submit:\n"
	"submitted, or submitted before with the same spec), 64 usage error,\n"
	"65 damaged store, or a backup copy beside a WAL not its own (submit: the\n"
	"run was refused as invalid, or its id was submitted before with another\n"
	"spec), 66 no --admin-token-file (submit: no admin token or port file;\n"
	"backup: no store), 69 submit: the dispatcher is unreachable or\n"
	"unavailable, 71 cannot listen, 73 cannot create the store, the admin token\n"
	"or the port file (backup: the copy), 74 write error, 76 submit: an\n"
	"unexpected answer, 78 a store or token file others may read (submit: or\n"
	"the token was refused).\n";

/* What the command line says, by the table below; parse_args() hands it
 * on to dsp.cfg (serving) and sub (submit; --env goes straight there). */
struct opts {
	const char *port_file, *store, *admin_token_file, *incarnation, *gate;
	const char *url, *run_id, *txn_id, *cwd;      /* submit's */
	int64_t due_at, timeout_ms;
	int64_t port, lease_ms, heartbeat_ms, heartbeat_nice, max_inflight, max_rate, retry_after_s,
	    rate_wait_ms, slot_wait_ms, settle_after_ms, abandon_after_ms;
	int quiet, json;
};

/* Which options go with serving only, and with submit only (struct opt's
 * mark): each refused with the other. */
enum { SERVE = 1, SUBMIT = 2 };

/* The longest a request may wait for its turn at --max-rate: far below any
 * client's timeout. */
#define RATE_WAIT_MAX_MS 10000
#define SLOT_WAIT_MAX_MS 60000

/* The longest wait --settle-after-ms and --abandon-after-ms take: ten years. */
#define AFTER_MS_MAX INT64_C(315360000000)

/* The commands besides serving, as git's commands[]. */
static const struct cli_command commands[] = {
	{ .name = "submit" },
	{ .name = "backup", .args = "COPY" },
};

/* What submit was asked (dispatcher-submit.h). */
static struct submit_opts sub;

/* The first option seen that goes only with serving, and only with
 * submit: each refused with the other. */
static const char *serve_only, *submit_only;

/* What --txn-id, --timeout and --cwd take. */
static bool
txn_id_ok(const char *s)
{
	return *s && strlen(s) <= 256;
}

static int
guest_timeout(const char *s, int64_t *ms)
{
	return submit_parse_duration(s, ms) < 0 || *ms == 0 ? -1 : 0;
}

static bool
is_absolute(const char *s)
{
	return s[0] == '/';
}

/* --env VAR=VALUE, repeatable: into sub (o is the table's, unused). */
static int
env_opt(void *o, const char *arg)
{
	const char *eq = strchr(arg, '=');

	(void)o;
	if (!eq || eq == arg || eq - arg > 255)
		return cli_usage_error(PROG, "--env: '%.200s' is not VAR=VALUE", arg);
	if (sub.nenv == SUBMIT_ENV_MAX)
		return cli_usage_error(PROG, "--env: more than %d variables", SUBMIT_ENV_MAX);
	sub.env[sub.nenv++] = arg;
	return 0;
}

static const char *const gate_modes[] = { "adaptive", "off", NULL };

/* A number only serving takes (exec-dispatcher without a command). */
#define SERVE_INT(NAME, FIELD, MIN, MAX, META, HELP) { .name = NAME, .kind = OPTK_INT, \
	.meta = META, .off = offsetof(struct opts, FIELD), .min = MIN, .max = MAX, .mark = SERVE, \
	.help = HELP }

static const struct opt options[] = {
	{ .name = "port", .kind = OPTK_INT, .meta = "N", .off = offsetof(struct opts, port),
	  .min = 0, .max = 65535,
	  .help = "listen on port N (default 0: pick a free port);\n"
	    "submit: the dispatcher on 127.0.0.1:N" },
	{ .name = "port-file", .kind = OPTK_STRING, .meta = "FILE",
	  .off = offsetof(struct opts, port_file),
	  .help = "write the chosen port to FILE, atomically; submit:\n"
	    "the dispatcher on the port FILE holds" },
	{ .name = "store", .kind = OPTK_STRING, .meta = "FILE",
	  .off = offsetof(struct opts, store),
	  .help = "the dispatcher's SQLite store\n"
	    "(default ./exec-dispatcher.db)" },
	{ .name = "admin-token-file", .kind = OPTK_STRING, .meta = "FILE",
	  .off = offsetof(struct opts, admin_token_file),
	  .help = "\n"
	    "the token /admin/ requests must show (mode 0600);\n"
	    "default STORE.admin-token, made at the first start\n"
	    "(submit sends it, and never makes it)" },
	SERVE_INT("lease-ms", lease_ms, 1, INT32_MAX, "N",
	    "session lease in milliseconds (default 30000)"),
	SERVE_INT("heartbeat-ms", heartbeat_ms, 1, INT32_MAX, "N",
	    "heartbeat interval told to executors (default 2000)"),
	SERVE_INT("heartbeat-nice", heartbeat_nice, -20, 19, "N",
	    "the nice of a thread serving a heartbeat (default\n"
	    "-10), where the dispatcher may raise a priority (root,\n"
	    "CAP_SYS_NICE, RLIMIT_NICE); N at or above its own\n"
	    "nice raises none"),
	{ .name = "incarnation", .kind = OPTK_STRING, .meta = "ID", .mark = SERVE,
	  .off = offsetof(struct opts, incarnation),
	  .help = "incarnation of a new store (inc- + 16 hex digits)" },
	{ .name = "gate", .kind = OPTK_ENUM, .meta = "MODE", .mark = SERVE,
	  .off = offsetof(struct opts, gate), .words = gate_modes,
	  .help = "adaptive (the default): admit requests by a limit\n"
	    "adapted from the latency of results; off: no limit" },
	SERVE_INT("max-inflight", max_inflight, 0, 1000000, "N",
	    "a cap on that limit: past N requests in flight, wait\n"
	    "(--slot-wait-ms), then answer 429 with Retry-After\n"
	    "(heartbeats and negotiations never; default 0: no cap)"),
	SERVE_INT("max-rate", max_rate, 0, 1000000, "N",
	    "past N such requests a second (a burst of N/10), answer\n"
	    "429 with Retry-After (default 0: no rate bound)"),
	SERVE_INT("rate-wait-ms", rate_wait_ms, 0, RATE_WAIT_MAX_MS, "N",
	    "a request past --max-rate whose turn comes within N ms\n"
	    "waits for it instead of a 429 (default 0: none waits)"),
	SERVE_INT("slot-wait-ms", slot_wait_ms, 0, SLOT_WAIT_MAX_MS, "N",
	    "a request past the limit waits up to N ms for a place\n"
	    "in flight before a 429 (default 250; 0: none waits)"),
	SERVE_INT("retry-after", retry_after_s, 1, 3600, "S",
	    "the least Retry-After of a gated request, in seconds\n"
	    "(default 1); a random spread over the gate's backlog\n"
	    "is added"),
	SERVE_INT("settle-after-ms", settle_after_ms, 0, AFTER_MS_MAX, "N",
	    "\n"
	    "N ms after a session ended, ask its executor's current\n"
	    "session about the runs it left (default 30000)"),
	SERVE_INT("abandon-after-ms", abandon_after_ms, 1, AFTER_MS_MAX, "N",
	    "\n"
	    "N ms after a session ended, abandon the runs it left\n"
	    "that no answer settled (default 86400000, a day)"),
	{ .name = "quiet", .kind = OPTK_FLAG, .mark = SERVE,
	  .letter = 'q', .off = offsetof(struct opts, quiet),
	  .help = "no startup line and no request log on stderr" },
	{ .name = "url", .kind = OPTK_STRING, .meta = "URL", .mark = SUBMIT,
	  .off = offsetof(struct opts, url), .valid = cli_is_url, .want = "an http:// or https:// URL",
	  .help = "submit: the dispatcher's base URL (instead of --port\n"
	    "or --port-file)" },
	{ .name = "id", .kind = OPTK_STRING, .meta = "ID", .mark = SUBMIT,
	  .off = offsetof(struct opts, run_id), .valid = is_run_id,
	  .want = "a run id (1 to 128 bytes of [A-Za-z0-9._:-])",
	  .help = "submit: the run id (default: run- and 16 random hex\n"
	    "digits); the same id and spec again is no new run" },
	{ .name = "txn-id", .kind = OPTK_STRING, .meta = "ID", .mark = SUBMIT,
	  .off = offsetof(struct opts, txn_id), .valid = txn_id_ok,
	  .want = "a transaction id (1 to 256 bytes)",
	  .help = "submit: its transaction id (default: the run id)" },
	{ .name = "due", .kind = OPTK_PARSED, .meta = "WHEN", .mark = SUBMIT,
	  .off = offsetof(struct opts, due_at), .parse = submit_parse_due,
	  .want = "now, a delay (90s, 5m, 2h, 1d) or @SECONDS",
	  .help = "submit: start no earlier than WHEN: now (default), a\n"
	    "delay (90s, 5m, 2h, 1d) or @SECONDS since the epoch" },
	{ .name = "timeout", .kind = OPTK_PARSED, .meta = "DURATION", .mark = SUBMIT,
	  .off = offsetof(struct opts, timeout_ms), .parse = guest_timeout,
	  .want = "a duration (500ms, 30s, 5m, 2h, 1d)",
	  .help = "submit: end the guest after DURATION (500ms, 30s, 5m)" },
	{ .name = "env", .kind = OPTK_CALL, .meta = "VAR=VALUE", .call = env_opt, .mark = SUBMIT,
	  .help = "submit: set VAR in the guest's environment (repeatable)" },
	{ .name = "cwd", .kind = OPTK_STRING, .meta = "DIR", .mark = SUBMIT,
	  .off = offsetof(struct opts, cwd), .valid = is_absolute, .want = "an absolute path",
	  .help = "submit: the guest's working directory (absolute)" },
	{ .name = "json", .kind = OPTK_FLAG, .off = offsetof(struct opts, json), .mark = SUBMIT,
	  .help = "submit: a JSON record instead of the run id alone" },
	OPTS_COMMON,
};

/* Remember the first option of serving's and of submit's. */
static int
seen(void *o, const struct opt *r)
{
	(void)o;
	if (r->mark == SERVE && !serve_only)
		serve_only = r->name;
	if (r->mark == SUBMIT && !submit_only)
		submit_only = r->name;
	return 0;
}

/* in_order: a PROGRAM's own options are never taken for ours. */
static const struct opts_spec spec = {
	.prog = PROG, .usage_head = USAGE_HEAD, .usage_tail = USAGE_TAIL,
	.opts = OPTS_TABLE(options), .cmds = OPTS_TABLE(commands), .help_column = 24,
	.in_order = true, .seen = seen,
};

/* The options up to the first operand (or "--"): -1 to go on, else the
 * exit code (0 once --help or --version has printed). */
static int
parse_opts(int argc, char **argv, struct opts *o)
{
	int rc = opts_parse(&spec, argc, argv, o);

	return rc == CLI_DONE ? EK_OK : rc ? rc : -1;
}

/* The options into the server's configuration and submit's. */
static void
apply(const struct opts *o)
{
	struct config *c = &dsp.cfg;

	c->port = sub.port = o->port;
	c->port_file = sub.port_file = o->port_file;
	c->store = o->store;
	c->admin_token_file = sub.token_file = o->admin_token_file;
	c->incarnation = o->incarnation;
	c->lease_ms = o->lease_ms;
	c->heartbeat_ms = o->heartbeat_ms;
	c->heartbeat_nice = o->heartbeat_nice;
	c->gate_off = strcmp(o->gate, "off") == 0;
	c->max_inflight = o->max_inflight;
	c->max_rate = o->max_rate;
	c->retry_after_s = o->retry_after_s;
	c->rate_wait_ms = o->rate_wait_ms;
	c->slot_wait_ms = o->slot_wait_ms;
	c->settle_after_ms = o->settle_after_ms;
	c->abandon_after_ms = o->abandon_after_ms;
	c->quiet = o->quiet;
	sub.url = o->url;
	sub.run_id = o->run_id;
	sub.txn_id = o->txn_id;
	sub.cwd = o->cwd;
	sub.due_at = o->due_at;
	sub.timeout_ms = o->timeout_ms;
	sub.json = o->json;
}

/* submit's operands and what it needs: -1 to go on, else the exit code. */
static int
check_submit(int argc, char **argv)
{
	if (serve_only)
		return cli_usage_error(PROG, "--%s does not go with submit", serve_only);
	if (optind == argc || !argv[optind][0])
		return cli_usage_error(PROG, "submit needs a PROGRAM (after --)");
	if (!sub.url && !sub.port_file && sub.port == 0)
		return cli_usage_error(PROG, "submit needs the dispatcher: --url URL, --port N or"
		    " --port-file FILE");
	if (!!sub.url + !!sub.port_file + (sub.port != 0) > 1)
		return cli_usage_error(PROG, "give one of --url, --port and --port-file");
	sub.argv = argv + optind;
	sub.store = dsp.cfg.store;
	return -1;
}

/* backup's operand: -1 to go on, else the exit code. */
static int
check_backup(int argc, char **argv, const char **copy)
{
	if (serve_only || submit_only)
		return cli_usage_error(PROG, "--%s does not go with backup", serve_only ? serve_only :
		    submit_only);
	if (optind + 1 != argc || !argv[optind][0])
		return cli_usage_error(PROG, "backup needs one COPY: the file to make");
	*copy = argv[optind];
	return -1;
}

/* Parse argv into cfg, or into sub for submit (*cmd "submit"), or the
 * copy's name for backup (*cmd "backup"): -1 to go on, else the exit
 * code. */
static int
parse_args(int argc, char **argv, const char **cmd, const char **copy)
{
	struct opts o = { .store = "./exec-dispatcher.db", .gate = "adaptive", .lease_ms = 30000,
		.heartbeat_ms = 2000, .heartbeat_nice = -10, .retry_after_s = 1, .slot_wait_ms = 250,
		.settle_after_ms = 30000, .abandon_after_ms = 86400000 };
	const struct cli_command *c = NULL;
	int rc;

	if ((rc = parse_opts(argc, argv, &o)) >= 0)
		return rc;
	if (optind < argc) {
		if ((rc = opts_command(&spec, argc, argv, &c)) != 0)
			return rc;
		if ((rc = parse_opts(argc, argv, &o)) >= 0)
			return rc;
	}
	apply(&o);
	if (c) {
		*cmd = c->name;
		return strcmp(c->name, "backup") == 0 ? check_backup(argc, argv, copy) :
		    check_submit(argc, argv);
	}
	if (submit_only)
		return cli_usage_error(PROG, "--%s goes with submit", submit_only);
	if (dsp.cfg.incarnation && !(strncmp(dsp.cfg.incarnation, "inc-", 4) == 0 &&
	    text_is_xdigits(dsp.cfg.incarnation + 4, ISSUED_ID_HEX)))
		return cli_usage_error(PROG, "--incarnation: '%s' is not inc- + 16 hex digits",
		    dsp.cfg.incarnation);
	return -1;
}

int
main(int argc, char **argv)
{
	struct ek_err e = { 0 };
	struct MHD_Daemon *d = NULL;
	const struct timespec tick = { 1, 0 };   /* how often the settlement sweeps */
	sigset_t sigs;
	unsigned port;
	const char *cmd = NULL, *copy = NULL;
	int rc, sig;

	if ((rc = parse_args(argc, argv, &cmd, &copy)) >= 0)
		return cli_finish(PROG, rc);
	if (cmd && strcmp(cmd, "submit") == 0)
		return cli_finish(PROG, submit_run(PROG, &sub));
	if (cmd) {   /* backup */
		umask(077);
		if (store_backup(dsp.cfg.store, copy, &e) < 0)
			return ek_report(PROG, &e);
		printf("%s: a copy of the store '%s', consistent, mode 0600 (it holds the runs' "
		    "specs and the executors' keys)\n", copy, dsp.cfg.store);
		return cli_finish(PROG, EK_OK);
	}
	/* Block the stop signals in every thread; main waits for them below. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	umask(077);   /* the store, its -wal and -shm, the token: owner-only from birth */
	if (store_open(dsp.cfg.store, dsp.cfg.incarnation, &e) < 0)
		return ek_report(PROG, &e);
	if (auth_init(dsp.cfg.store, dsp.cfg.admin_token_file, &e) < 0)
		goto fail;
	if (!(d = routes_start(&e)))
		goto fail;
	port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
	if (dsp.cfg.port_file && write_port_file(dsp.cfg.port_file, port, &e) < 0)
		goto fail;
	say("listening on 127.0.0.1:%u", port);
	/* Wait for a stop signal; meanwhile, sweep once a second. */
	while ((sig = sigtimedwait(&sigs, NULL, &tick)) != SIGTERM && sig != SIGINT)
		if (sig < 0 && errno == EAGAIN)
			settle_sweep();
	say("stopping on %s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	atomic_store(&dsp.stopping, true);
	MHD_stop_daemon(d);
	store_close();
	return cli_finish(PROG, EK_OK);
fail:
	if (d)
		MHD_stop_daemon(d);
	store_close();
	return ek_report(PROG, &e);
}
