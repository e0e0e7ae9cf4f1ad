/*
 * exec-dispatcher — the reference dispatcher: a small HTTP server that
 * speaks doc/protocol.md to executors, keeps its own SQLite store, and lets
 * tests steer it through /admin/ endpoints and injected faults.
 *
 * This file is the options and main; the server is in dispatcher/, one
 * file per area, and dispatcher/dispatcher.h draws its shape and states
 * its invariants.
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
#include "err.h"
#include "file.h"
#include "dispatcher/dispatcher.h"

const char PROG[] = "exec-dispatcher";     /* not static: dispatcher/ logs with it */

/* The server's one state, with the options' defaults. */
struct dispatcher dsp = {
	.cfg = { .lease_ms = 30000, .heartbeat_ms = 2000, .retry_after_s = 1,
		.settle_after_ms = 30000, .abandon_after_ms = 86400000,
		.store = "./exec-dispatcher.db" },
	.store = { .mu = PTHREAD_MUTEX_INITIALIZER },
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
	"Serve the execkit dispatcher protocol (doc/protocol.md) on 127.0.0.1,\n"
	"with admin endpoints and fault injection for tests.\n"
	"\n"
	"      --port N          listen on port N (default 0: pick a free port)\n"
	"      --port-file FILE  write the chosen port to FILE, atomically\n"
	"      --store FILE      the dispatcher's SQLite store\n"
	"                        (default ./exec-dispatcher.db)\n"
	"      --admin-token-file FILE\n"
	"                        the token /admin/ requests must show (mode 0600);\n"
	"                        default STORE.admin-token, made at the first start\n"
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
	"  -h, --help            show this help and exit\n"
	"  -V, --version         show the version and exit\n"
	"\n"
	"Runs until SIGTERM or SIGINT.  Exit status: 0 stopped by a signal,\n"
	"64 usage error, 65 damaged store, 66 no --admin-token-file, 71 cannot\n"
	"listen, 73 cannot create the store, the admin token or the port file,\n"
	"74 write error, 78 a store or token file others may read.\n";

enum { OPT_PORT = OPT_FIRST_TOOL, OPT_PORT_FILE, OPT_STORE, OPT_LEASE_MS, OPT_HEARTBEAT_MS,
	OPT_INCARNATION, OPT_MAX_INFLIGHT, OPT_MAX_RATE, OPT_RETRY_AFTER, OPT_SETTLE_AFTER_MS,
	OPT_ABANDON_AFTER_MS, OPT_RATE_WAIT_MS, OPT_ADMIN_TOKEN_FILE, OPT_GATE };

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
	{ NULL, 0, NULL, 0 },
};

/* Parse argv into cfg: -1 to go on, else the exit code. */
static int
parse_args(int argc, char **argv)
{
	int c, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hqV", options, NULL)) != -1) {
		switch (c) {
		case 'q': dsp.cfg.quiet = true; break;
		case OPT_PORT_FILE: dsp.cfg.port_file = optarg; break;
		case OPT_STORE: dsp.cfg.store = optarg; break;
		case OPT_ADMIN_TOKEN_FILE: dsp.cfg.admin_token_file = optarg; break;
		case OPT_INCARNATION: dsp.cfg.incarnation = optarg; break;
		case OPT_PORT:
			if (cli_parse_i64(optarg, 0, 65535, &dsp.cfg.port) < 0)
				return cli_usage_error(PROG, "--port: '%s' is not a port number", optarg);
			break;
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
		default:   /* --help, --version, or an option rejected */
			rc = cli_common_opt(c, PROG, USAGE, argv, NULL, NULL);
			return rc == CLI_DONE ? EK_OK : rc;
		}
	}
	if (optind < argc)
		return cli_usage_error(PROG, "unexpected operand '%s'", argv[optind]);
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
	int rc, sig;

	if ((rc = parse_args(argc, argv)) >= 0)
		return cli_finish(PROG, rc);
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
	if (!(d = http_start(&e)))
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
