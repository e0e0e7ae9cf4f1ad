/*
 * dispatcher-submit — internal to cmd/exec-dispatcher.c and
 * cmd/dispatcher-submit.c: what `exec-dispatcher submit` was asked, and
 * the command itself.
 */
#ifndef EK_DISPATCHER_SUBMIT_H
#define EK_DISPATCHER_SUBMIT_H

#include <stdint.h>

/* At most this many --env options: far more than a person types. */
#define SUBMIT_ENV_MAX 256

struct submit_opts {
	const char *url;          /* --url, else built from --port or --port-file */
	const char *port_file;
	int64_t port;             /* 0: not given */
	const char *store, *token_file;
	const char *run_id, *txn_id, *cwd;
	int64_t due_at;           /* epoch ms; 0: at acceptance */
	int64_t timeout_ms;       /* 0: none */
	const char *env[SUBMIT_ENV_MAX];   /* NAME=VALUE, checked */
	int nenv;
	char **argv;              /* PROGRAM ARG..., NULL-terminated */
	int json;
};

/* Parse --due WHEN: "now", a delay ("90s", "5m", "2h", "1d") or "@EPOCH"
 * (seconds), into *ms (epoch ms; 0 for now).  0 or -1. */
int submit_parse_due(const char *s, int64_t *ms);

/* Parse --timeout DURATION: "500ms", "30s", "5m", "2h", "1d".  0 or -1. */
int submit_parse_duration(const char *s, int64_t *ms);

/* POST the run to the dispatcher's /admin/runs and say its id: the exit
 * code (EK_OK when submitted, or already submitted with the same spec). */
int submit_run(const char *prog, const struct submit_opts *o);

#endif
