/*
 * protocol — the constants the executor and the dispatcher share: the
 * sizes of the ids and secrets that travel, the endpoints' paths and the
 * header words.  doc/protocol.md is their prose ("Identities", "Endpoints");
 * both sides include this header and never write one of these numbers or
 * strings themselves.
 *
 * tests/docs.bats ties the three together: every endpoint of
 * doc/protocol.md's endpoint table is a row of the dispatcher's route table
 * (dispatcher/http.c) and the other way round, a real dispatcher answers
 * each of them, and every path below is part of a route; tests/lint.bats
 * refuses an endpoint's path written in C anywhere else.
 */
#ifndef EK_PROTOCOL_H
#define EK_PROTOCOL_H

/* The sizes of what travels (doc/protocol.md, "Identities"). */
#define RUN_ID_MAX 128   /* a run id: 1..128 bytes of [A-Za-z0-9._:-] */
#define TXN_ID_MAX 256   /* a transaction id: 1..256 bytes of UTF-8, no NUL */
#define PROTO_STR_(x) #x
#define PROTO_STR(x) PROTO_STR_(x)
/* The shape of a run id, as messages state it. */
#define RUN_ID_SHAPE "1.." PROTO_STR(RUN_ID_MAX) " bytes of [A-Za-z0-9._:-]"
enum {
	EXECUTOR_ID_HEX = 32,        /* an executor id: 32 hex digits */
	EXECUTOR_KEY_HEX = 64,       /* the executor's key: 64 hex digits, a secret */
	SECRET_HEX = 64,             /* a credential, a client token, the admin token */
	ISSUED_ID_HEX = 16,          /* the hex digits after an issued id's prefix (inc-, ses-, ...) */
	ADOPTED_ID_MAX = 64,         /* the session id an adoption names, in run ids' alphabet */
	RESULT_BODY_MAX = 64 * 1024  /* the most a POST /v1/results body may hold */
};

/* A result's outcomes, as POST /v1/results carries them, to initialize a
 * NULL-terminated list: const char *const x[] = PROTO_OUTCOMES. */
#define PROTO_OUTCOMES { "exited", "killed", "timeout", "cancelled", "exec_failed", NULL }

/* The endpoints' paths (doc/protocol.md, "Endpoints").  A session's own
 * endpoints are PROTO_SESSIONS "/" SID followed by one of the PROTO_S_*. */
#define PROTO_SESSIONS "/v1/sessions"
#define PROTO_RESULTS "/v1/results"
#define PROTO_INSPECTIONS "/v1/inspections"
#define PROTO_ADMIN "/admin/"            /* every operator endpoint is below it */
#define PROTO_ADMIN_RUNS PROTO_ADMIN "runs"   /* submit (exec-dispatcher submit) */
#define PROTO_S_HEARTBEAT "/heartbeat"
#define PROTO_S_WORK "/work"
#define PROTO_S_RECEIPTS "/receipts"
#define PROTO_S_ADOPTIONS "/adoptions"
#define PROTO_S_HANDBACK "/handback"
#define PROTO_S_INSPECTIONS "/inspections"

/* The credential's scheme: "Authorization: Bearer SECRET". */
#define PROTO_BEARER "Bearer "

#endif
