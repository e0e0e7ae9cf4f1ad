/*
 * exec-dispatcher — the reference dispatcher: a small HTTP server that
 * speaks doc/protocol.md to executors, keeps its own SQLite store, and lets
 * tests steer it through /admin/ endpoints and injected faults.
 *
 * This file is the options and main; the server is in dispatcher/, one
 * file per area, and dispatcher/dispatcher.h draws its shape and states
 * its invariants.  `exec-dispatcher submit` is a client of a running one
 * (cmd/dispatcher-submit.c): its options share the table below, so that
 * help, man page and completion read them in one place.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
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
#include "dispatcher/dispatcher.h"

const char PROG[] = "exec-dispatcher";     /* not static: dispatcher/ logs with it */

/* The server's one state, with the options' defaults. */
struct dispatcher dsp = {
	.cfg = { .lease_ms = 30000, .heartbeat_ms = 2000, .retry_after_s = 1,
		.settle_after_ms = 30000, .abandon_after_ms = 86400000,
		.store = "./exec-dispatcher.db" },
	.store = { .mu = PTHREAD_MUTEX_INITIALIZER, .peek_mu = PTHREAD_MUTEX_INITIALIZER },
};

/* Write "port\n" to path atomically (file.h), mode 0644. */
static int
write_port_file(const char *path, unsigned port, struct ek_err *e)
{
	char line[16];
	int n = snprintf(line, sizeof line, "%u\n", port);

	return file_write_atomic(path, line, (size_t)n, 0644, e);
}

static const char USAGE[] =
	"Usage: exec-dispatcher [OPTION]...\n"
	"       exec-dispatcher [OPTION]... submit [--id ID] -- PROGRAM [ARG]...\n"
	"       exec-dispatcher [OPTION]... backup COPY\n"
	"Serve the execkit dispatcher protocol (doc/protocol.md) on 127.0.0.1,\n"
	"with admin endpoints and fault injection for tests; or submit one run to\n"
	"a dispatcher that runs (POST /admin/runs) and print its run id; or copy\n"
	"the store, consistent while it serves, to COPY (a new file, mode 0600).\n"
	"\n"
	"      --port N          listen on port N (default 0: pick a free port);\n"
	"                        submit: the dispatcher on 127.0.0.1:N\n"
	"      --port-file FILE  write the chosen port to FILE, atomically; submit:\n"
	"                        the dispatcher on the port FILE holds\n"
	"      --store FILE      the dispatcher's SQLite store\n"
	"                        (default ./exec-dispatcher.db)\n"
	"      --admin-token-file FILE\n"
	"                        the token /admin/ requests must show (mode 0600);\n"
	"                        default STORE.admin-token, made at the first start\n"
	"                        (submit sends it, and never makes it)\n"
	"      --lease-ms N      session lease in milliseconds (default 30000)\n"
	"      --heartbeat-ms N  heartbeat interval told to executors (default 2000)\n"
	"      --incarnation ID  incarnation of a new store (inc- + 16 hex digits)\n"
	"      --gate MODE       adaptive (the default): admit requests by a limit\n"
	"                        adapted from the latency of results; off: no limit\n"
	"      --max-inflight N  a cap on that limit: past N requests in flight, answer\n"
	"                        429 with Retry-After (heartbeats and negotiations never;\n"
	"                        default 0: no cap)\n"
	"      --max-rate N      past N such requests a second (a burst of N/10), answer\n"
	"                        429 with Retry-After (default 0: no rate bound)\n"
	"      --rate-wait-ms N  a request past --max-rate whose turn comes within N ms\n"
	"                        waits for it instead of a 429 (default 0: none waits)\n"
	"      --retry-after S   the least Retry-After of a gated request, in seconds\n"
	"                        (default 1); a random spread over the gate's backlog\n"
	"                        is added\n"
	"      --settle-after-ms N\n"
	"                        N ms after a session ended, ask its executor's current\n"
	"                        session about the runs it left (default 30000)\n"
	"      --abandon-after-ms N\n"
	"                        N ms after a session ended, abandon the runs it left\n"
	"                        that no answer settled (default 86400000, a day)\n"
	"  -q, --quiet           no startup line and no request log on stderr\n"
	"      --url URL         submit: the dispatcher's base URL (instead of --port\n"
	"                        or --port-file)\n"
	"      --id ID           submit: the run id (default: run- and 16 random hex\n"
	"                        digits); the same id and spec again is no new run\n"
	"      --txn-id ID       submit: its transaction id (default: the run id)\n"
	"      --due WHEN        submit: start no earlier than WHEN: now (default), a\n"
	"                        delay (90s, 5m, 2h, 1d) or @SECONDS since the epoch\n"
	"      --timeout DURATION  submit: end the guest after DURATION (500ms, 30s, 5m)\n"
	"      --env VAR=VALUE   submit: set VAR in the guest's environment (repeatable)\n"
	"      --cwd DIR         submit: the guest's working directory (absolute)\n"
	"      --json            submit: a JSON record instead of the run id alone\n"
	"  -h, --help            show this help and exit\n"
	"  -V, --version         show the version and exit\n"
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

enum { OPT_PORT = OPT_FIRST_TOOL, OPT_PORT_FILE, OPT_STORE, OPT_LEASE_MS, OPT_HEARTBEAT_MS,
	OPT_INCARNATION, OPT_MAX_INFLIGHT, OPT_MAX_RATE, OPT_RETRY_AFTER, OPT_SETTLE_AFTER_MS,
	OPT_ABANDON_AFTER_MS, OPT_RATE_WAIT_MS, OPT_ADMIN_TOKEN_FILE, OPT_GATE,
	/* submit's own */
	OPT_URL, OPT_ID, OPT_TXN_ID, OPT_DUE, OPT_TIMEOUT, OPT_ENV, OPT_CWD };

/* The longest a request may wait for its turn at --max-rate: far below any
 * client's timeout. */
#define RATE_WAIT_MAX_MS 10000

/* The longest wait --settle-after-ms and --abandon-after-ms take: ten years. */
#define AFTER_MS_MAX INT64_C(315360000000)

static const struct option options[] = {
	CLI_COMMON_OPTIONS,
	{ "port", required_argument, NULL, OPT_PORT },
	{ "port-file", required_argument, NULL, OPT_PORT_FILE },
	{ "store", required_argument, NULL, OPT_STORE },
	{ "admin-token-file", required_argument, NULL, OPT_ADMIN_TOKEN_FILE },
	{ "lease-ms", required_argument, NULL, OPT_LEASE_MS },
	{ "heartbeat-ms", required_argument, NULL, OPT_HEARTBEAT_MS },
	{ "incarnation", required_argument, NULL, OPT_INCARNATION },
	{ "gate", required_argument, NULL, OPT_GATE },
	{ "max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT },
	{ "max-rate", required_argument, NULL, OPT_MAX_RATE },
	{ "retry-after", required_argument, NULL, OPT_RETRY_AFTER },
	{ "rate-wait-ms", required_argument, NULL, OPT_RATE_WAIT_MS },
	{ "settle-after-ms", required_argument, NULL, OPT_SETTLE_AFTER_MS },
	{ "abandon-after-ms", required_argument, NULL, OPT_ABANDON_AFTER_MS },
	{ "quiet", no_argument, NULL, 'q' },
	{ "url", required_argument, NULL, OPT_URL },
	{ "id", required_argument, NULL, OPT_ID },
	{ "txn-id", required_argument, NULL, OPT_TXN_ID },
	{ "due", required_argument, NULL, OPT_DUE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

/* The commands besides serving, as git's commands[]; gen-completion.sh
 * reads their names. */
static const struct command {
	const char *name;
} commands[] = {
	{ "submit" },
	{ "backup" },
};

/* What submit was asked (dispatcher-submit.h). */
static struct submit_opts sub;

/* The first option seen that goes only with serving, and only with
 * submit: each refused with the other. */
static const char *serve_only, *submit_only;

/* One of submit's own options into sub: 0, or the exit code. */
static int
submit_opt(int c, const char *arg)
{
	const char *eq = strchr(arg, '=');

	switch (c) {
	case OPT_URL:
		if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0)
			return cli_usage_error(PROG, "--url: '%.200s' is not an http:// or https:// URL", arg);
		sub.url = arg;
		return 0;
	case OPT_ID:
		if (!is_run_id(arg))
			return cli_usage_error(PROG, "--id: '%.200s' is not a run id (1 to 128 bytes of"
			    " [A-Za-z0-9._:-])", arg);
		sub.run_id = arg;
		return 0;
	case OPT_TXN_ID:
		if (!*arg || strlen(arg) > 256)
			return cli_usage_error(PROG, "--txn-id: a transaction id is 1 to 256 bytes");
		sub.txn_id = arg;
		return 0;
	case OPT_DUE:
		if (submit_parse_due(arg, &sub.due_at) < 0)
			return cli_usage_error(PROG, "--due: '%.200s' is not now, a delay (90s, 5m, 2h, 1d)"
			    " or @SECONDS", arg);
		return 0;
	case OPT_TIMEOUT:
		if (submit_parse_duration(arg, &sub.timeout_ms) < 0 || sub.timeout_ms == 0)
			return cli_usage_error(PROG, "--timeout: '%.200s' is not a duration (500ms, 30s,"
			    " 5m, 2h, 1d)", arg);
		return 0;
	case OPT_ENV:
		if (!eq || eq == arg || eq - arg > 255)
			return cli_usage_error(PROG, "--env: '%.200s' is not VAR=VALUE", arg);
		if (sub.nenv == SUBMIT_ENV_MAX)
			return cli_usage_error(PROG, "--env: more than %d variables", SUBMIT_ENV_MAX);
		sub.env[sub.nenv++] = arg;
		return 0;
	case OPT_CWD:
		if (arg[0] != '/')
			return cli_usage_error(PROG, "--cwd: '%.200s' is not an absolute path", arg);
		sub.cwd = arg;
		return 0;
	default:   /* OPT_JSON */
		sub.json = 1;
		return 0;
	}
}

/* One option of the server into cfg: 0, or the exit code. */
static int
serve_opt(int c, char **argv)
{
	switch (c) {
	case 'q': dsp.cfg.quiet = true; break;
	case OPT_INCARNATION: dsp.cfg.incarnation = optarg; break;
	case OPT_LEASE_MS:
	case OPT_HEARTBEAT_MS:
		if (cli_parse_i64(optarg, 1, INT32_MAX, c == OPT_LEASE_MS ?
		    &dsp.cfg.lease_ms : &dsp.cfg.heartbeat_ms) < 0)
			return cli_usage_error(PROG, "%s: '%s' is not a positive number of milliseconds",
			    argv[optind - 1], optarg);
		break;
	case OPT_GATE:
		if (strcmp(optarg, "adaptive") != 0 && strcmp(optarg, "off") != 0)
			return cli_usage_error(PROG, "--gate: '%s' is not adaptive or off", optarg);
		dsp.cfg.gate_off = strcmp(optarg, "off") == 0;
		break;
	case OPT_MAX_INFLIGHT:
	case OPT_MAX_RATE:
		if (cli_parse_i64(optarg, 0, 1000000, c == OPT_MAX_RATE ? &dsp.cfg.max_rate :
		    &dsp.cfg.max_inflight) < 0)
			return cli_usage_error(PROG, "%s: '%s' is not a number from 0 to 1000000",
			    c == OPT_MAX_RATE ? "--max-rate" : "--max-inflight", optarg);
		break;
	case OPT_RETRY_AFTER:
		if (cli_parse_i64(optarg, 1, 3600, &dsp.cfg.retry_after_s) < 0)
			return cli_usage_error(PROG, "--retry-after: '%s' is not a number of seconds "
			    "from 1 to 3600", optarg);
		break;
	case OPT_RATE_WAIT_MS:
		if (cli_parse_i64(optarg, 0, RATE_WAIT_MAX_MS, &dsp.cfg.rate_wait_ms) < 0)
			return cli_usage_error(PROG, "--rate-wait-ms: '%s' is not a number of "
			    "milliseconds from 0 to %d", optarg, RATE_WAIT_MAX_MS);
		break;
	case OPT_SETTLE_AFTER_MS:
	case OPT_ABANDON_AFTER_MS:
		if (cli_parse_i64(optarg, c == OPT_SETTLE_AFTER_MS ? 0 : 1, AFTER_MS_MAX,
		    c == OPT_SETTLE_AFTER_MS ? &dsp.cfg.settle_after_ms :
		    &dsp.cfg.abandon_after_ms) < 0)
			return cli_usage_error(PROG, "%s: '%s' is not a number of milliseconds from %d"
			    " to %" PRId64, argv[optind - 1], optarg, c == OPT_SETTLE_AFTER_MS ? 0 : 1,
			    AFTER_MS_MAX);
		break;
	}
	return 0;
}

/* The options up to the first operand (or "--"), as getopt_long's '+'
 * leaves them, so that a PROGRAM's own options are never taken for ours:
 * -1 to go on, else the exit code. */
static int
parse_opts(int argc, char **argv)
{
	int c, rc, li = -1;

	while ((c = getopt_long(argc, argv, "+hqV", options, &li)) != -1) {
		switch (c) {
		case OPT_PORT_FILE: dsp.cfg.port_file = sub.port_file = optarg; break;
		case OPT_STORE: dsp.cfg.store = sub.store = optarg; break;
		case OPT_ADMIN_TOKEN_FILE: dsp.cfg.admin_token_file = sub.token_file = optarg; break;
		case OPT_PORT:
			if (cli_parse_i64(optarg, 0, 65535, &dsp.cfg.port) < 0)
				return cli_usage_error(PROG, "--port: '%s' is not a port number", optarg);
			sub.port = dsp.cfg.port;
			break;
		case OPT_URL: case OPT_ID: case OPT_TXN_ID: case OPT_DUE: case OPT_TIMEOUT:
		case OPT_ENV: case OPT_CWD: case OPT_JSON:
			submit_only = submit_only ? submit_only : options[li].name;
			if ((rc = submit_opt(c, optarg ? optarg : "")) != 0)
				return rc;
			break;
		case 'q': case OPT_INCARNATION: case OPT_LEASE_MS: case OPT_HEARTBEAT_MS: case OPT_GATE:
		case OPT_MAX_INFLIGHT: case OPT_MAX_RATE: case OPT_RETRY_AFTER: case OPT_RATE_WAIT_MS:
		case OPT_SETTLE_AFTER_MS: case OPT_ABANDON_AFTER_MS:
			serve_only = serve_only ? serve_only : c == 'q' ? "quiet" : options[li].name;
			if ((rc = serve_opt(c, argv)) != 0)
				return rc;
			break;
		default:   /* --help, --version, or an option rejected */
			rc = cli_common_opt(c, PROG, USAGE, argv, NULL, NULL);
			return rc == CLI_DONE ? EK_OK : rc;
		}
	}
	return -1;
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
	const struct command *c;
	int rc;

	opterr = 0;
	if ((rc = parse_opts(argc, argv)) >= 0)
		return rc;
	if (optind < argc) {
		if (!(c = cli_find_command(argv[optind], CLI_TABLE(commands))))
			return cli_unknown_command(PROG, argv[optind], CLI_TABLE(commands));
		optind++;
		if ((rc = parse_opts(argc, argv)) >= 0)
			return rc;
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
