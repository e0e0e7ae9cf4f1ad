/*
 * dispatcher — what the files of the reference dispatcher share.
 *
 * exec-dispatcher is a small HTTP server that speaks doc/protocol.md to
 * executors, keeps its own SQLite store, and lets tests steer it through
 * /admin/ endpoints and injected faults.  cmd/exec-dispatcher.c parses the
 * options into dsp.cfg, opens the store and starts the server; the rest is
 * here, one file per area, from the bottom layer up (HACKING.md draws the
 * layers; a file calls only into the layers below its own):
 *
 *   util.c         the run id's check, the log line
 *   store.c        the store: its schema (schema/dispatcher/), the
 *                  query helpers, one transaction per request (a read
 *                  or a write)
 *   faults.c       injected faults: the queue, and what each kind does
 *                  (served in a request's place by routes.c)
 *   gate.c         the gate's adaptive limit, from the latency it measures
 *   http.c         the helpers every handler answers with, a handler's
 *                  transaction, sending an answer, the gate's admission
 *                  and counters, listening
 *   auth.c         the admin token every /admin/ request shows; enrollment
 *   starts.c       the start counts and notices executors show
 *   asks.c         settlement's questions: the dispatcher's own inspections
 *                  about an ended session's runs, asked through its
 *                  executor's current session; the count of those waiting
 *   bell.c         the work bell a waiting feed waits on
 *   sessions.c     negotiation, heartbeat, close, adoption; the session
 *                  gate every session-bound request passes
 *   work.c         the work feed, acceptance receipts, hand-back, and
 *                  re-queueing a run as a new run of its transaction
 *   results.c      terminal results (group commit), the report log,
 *                  reports in flight
 *   inspections.c  a client's InspectRetainedRun, relayed; client tokens checked
 *   admin.c        /admin/: runs, summary, sessions, clients, faults
 *   settle.c       settlement of an ended session's runs: settled on the
 *                  answer (whose endpoint it composes), or abandoned by
 *                  the sweep (see below)
 *   routes.c       the top: the route table, a request's life through it
 *                  in libmicrohttpd, and the fault hook
 *
 * Shape: libmicrohttpd runs one thread per connection and calls
 * routes.c's on_request() for every request.  The request is looked up
 * once in the route table, whose row gives its handler, its kind (for the
 * counters and the gate) and its body's cap; the body is collected up to
 * that cap, the gate admits it, then the row's handler answers (or, while
 * faults are queued, a fault it took answers in its place).  Every
 * handler that touches the store does so between
 * tx_begin() (or tx_read()) and tx_end(): one SQLite connection, one
 * mutex, one transaction per request, so handlers see a consistent store.
 * A handler that writes takes the write lock, and lapsed leases are
 * expired first; one that only reads (admin reads, inspection reads)
 * takes no write lock and reads a lapsed lease as expired in the query
 * (SESSION_STATUS).  A heartbeat with nothing to write reads on a second
 * connection, under a mutex of its own (store_peek_begin(), sessions.c
 * beat_peek()), so it waits for no write, nor for a group commit's sync.
 *
 * The sweep: main wakes once a second (sigtimedwait) and calls
 * settle_sweep(), one write transaction under dsp.store.mu like a
 * request's: lapsed leases expire, runs nobody settled in time are
 * abandoned, and each current session is asked about its executor's ended
 * sessions' runs.  A heartbeat asks for its own session too, so the
 * answer that says how many inspections wait already counts them.
 *
 * A run's states, as the protocol shows them (RUN_STATE: runs.state, and
 * past it the final state settlements.state gives):
 *
 *   queued ─feed─► offered ─receipt─► accepted ─result─► finished
 *                     │  └─receipt: conflict/invalid─► rejected
 *                     └─────────┬──────────┘
 *                               ├─ hand-back ───────────► handed_back ┐ + a new run,
 *                               ├─ answer: never started ► requeued    ┘ queued
 *                               │  or absent
 *                               ├─ answer: started ──────► (accepted, settled)
 *                               └─ unsettled in time ────► abandoned
 *
 *   transition                     function         when
 *   queued → offered               feed()           a current session's feed
 *   offered → accepted/rejected    receipt_record() its session's receipt
 *   offered/accepted → finished    result_record()  the first result recorded
 *   → handed_back                  handback_one()   its own current session
 *   → requeued                     settle_answer()  its executor's later session
 *   → settled, stays accepted      settle_answer()  the same, answering started
 *   → abandoned                    settle_abandon() --abandon-after-ms after its
 *                                                   session's end, by the sweep
 *
 * handed_back, requeued and abandoned are final: a result for such a run
 * is refused (409 conflict), a receipt changes nothing, and the feed never
 * hands it out again.
 *
 * Threads: dsp.cfg is written only before the server starts.  dsp.store.mu
 * guards the connection and every statement on it (tx_begin() and
 * tx_read() take it; flight_persist() takes it for its own transaction;
 * store_open() runs before any other thread); dsp.store.peek_mu guards the
 * second connection, and is never held while dsp.store.mu is taken, nor
 * the other way round.  The fault queue, the in-flight counts, group
 * commit's queue and the gate's limit have their own mutexes, private to
 * faults.c, results.c and gate.c; none is held while dsp.store.mu is taken
 * (a group commit's leader leaves the queue's before it records the batch,
 * while the results it holds wait for it to mark them done).
 *
 * Invariants:
 *  1. A run's first accepted result is recorded once, with exactly one
 *     ledger charge; a duplicate or refused report changes neither.
 *  2. Every report to /v1/results is kept in `reports`, whatever its answer.
 *  3. Credentials, client tokens and executor keys are never logged and
 *     only their SHA-256 is stored.
 *  4. The server binds 127.0.0.1 only.
 *  5. An inspection's answer is recorded once, only from the session it
 *     names, and never with a field its outcome does not have.
 *  6. An inspection is asked only with an active client's token, names
 *     its session, and is read only with the token of the client that
 *     asked it: to any other client it does not exist (404).  The one
 *     exception, cli-settlement, is the dispatcher itself: no client reads
 *     its inspections.
 *  7. A run is re-queued only on an answer, never on a guess: its own
 *     session handing it back, or its executor's later session answering
 *     that it never started (FOUND, started false) or does not hold it
 *     (ABSENT).  Anything else asks again later or, in the end, abandons
 *     it; an abandoned run is never re-run.
 *  8. A run is re-queued as a new run (new id `rq-…`, same spec and
 *     transaction id), at most once, and never once a result is recorded
 *     for it; from then on every result for the original is refused, so
 *     a transaction is charged at most once along its chain of re-queues.
 *  9. A revoked session is never adopted.
 * 10. An executor_id is bound to the key of its first negotiation, for
 *     good: a negotiation naming it without that key is refused (403), and
 *     a session adopts only sessions negotiated with its own key.
 * 11. Only the holder of the admin token (auth.c) reaches a handler of
 *     /admin/; an executor_id is bound at all only by a negotiation that
 *     spends a use of an enrollment token issued there.
 */
#ifndef EK_DISPATCHER_H
#define EK_DISPATCHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>
#include <sqlite3.h>

#include "db.h"
#include "err.h"
#include "protocol.h"
#include "text.h"
#include "random.h"

/* "exec-dispatcher", defined beside main. */
extern const char PROG[];

enum { MAX_CONNECTIONS = 256 };          /* also bounds the in-flight table */

struct config {
	int64_t port, lease_ms, heartbeat_ms;
	int64_t max_inflight;            /* the gate's cap: 0 = none (see http.c) */
	bool gate_off;                   /* --gate off: no adaptive limit (gate.c) */
	int64_t max_rate;                /* the gate's requests a second: 0 = none */
	int64_t retry_after_s;           /* the least a gated request is told to wait */
	int64_t rate_wait_ms;            /* past --max-rate, wait this long for a turn */
	int64_t slot_wait_ms;            /* past the limit, wait this long for a place */
	int64_t settle_after_ms;         /* ask about an ended session's runs this long after */
	int64_t abandon_after_ms;        /* abandon them, unsettled, this long after */
	const char *port_file, *store, *incarnation;
	const char *admin_token_file;    /* NULL: STORE.admin-token, made at first start */
	bool quiet;
};

struct store {
	struct db db;                    /* keep stays off: see store.c */
	pthread_mutex_t mu;              /* guards db and every statement on it */
	struct db peek;                  /* a second one, for reads only (store_peek_begin()) */
	pthread_mutex_t peek_mu;         /* guards peek */
	char incarnation[40];
};

/* The server's state: one instance, defined beside main. */
struct dispatcher {
	struct config cfg;               /* set before the server starts, then read-only */
	atomic_bool stopping;            /* set once, when a stop signal arrives */
	struct store store;
};

extern struct dispatcher dsp;

/* ---- http.c: the gate and its counters ------------------------------- */

/* What a request is, for the counters: the classes an operator of a fleet
 * tells apart (the executors' heartbeats, feeds and reports, the rest). */
enum req_kind { RK_HEARTBEAT, RK_NEGOTIATE, RK_FEED, RK_RESULT, RK_ADMIN, RK_CLOSE, RK_OTHER, RK_KINDS };

struct http_stats {
	int64_t by_kind[RK_KINDS];       /* requests since start, by enum req_kind */
	int64_t in_flight, max_in_flight, requests, gated_429;
	int64_t gated_rate;              /* of gated_429, refused by --max-rate */
	int64_t retry_after_max;         /* the longest Retry-After the gate told */
	int64_t waiting;                 /* parked: long polls, paced requests (not in flight) */
	int64_t paced;                   /* requests that waited for their turn at --max-rate */
	int64_t paced_left;              /* of paced, whose client left before its turn */
	int64_t rate_queue_ms;           /* how long a request arriving now waits for its turn */
	int64_t slot_waited;             /* requests that waited past the limit for a place */
	int64_t slot_waited_in;          /* of slot_waited, those that got one (not refused) */
};

/* The request counters since start (GET /admin/stats). */
void http_stats_read(struct http_stats *out);

struct req;

/* Take a waiting request out of the in-flight counts (parked), or put it
 * back. */
void http_park(struct req *rq, bool parked);

/* ---- gate.c: the adaptive limit ------------------------------------- */

struct gate_stats {
	int64_t limit, lowest;           /* the limit now; the lowest since start */
	int64_t min_rtt_us, sample_rtt_us;   /* what it was adapted from */
	int64_t windows;                 /* sample windows closed since start */
};

/* A monotonic clock in microseconds, for latency samples. */
int64_t gate_now_us(void);
/* One admitted result took rtt_us, in_flight requests being counted by the
 * gate as it ended; may close a window and adapt the limit. */
void gate_sample(int64_t rtt_us, int64_t in_flight);
/* How many requests the gate lets in flight now. */
int64_t gate_limit(void);
/* Requests a second limit places in flight let through at the latency
 * last measured (limit / the last window's median): 0 before any measure. */
int64_t gate_rate(int64_t limit);
void gate_read(struct gate_stats *out);

/* ---- faults.c ------------------------------------------------------- */

enum fault_kind { F_NONE, F_DELAY, F_DROP_ACK, F_5XX, F_429, F_RESET, F_MALFORMED, F_HANG,
	F_4XX, F_LIE, F_KINDS };

#define FAULT_BODY_MAX 2048

struct fault {
	int kind;                        /* enum fault_kind; F_NONE = no fault */
	int64_t count, delay_ms;
	char path[256];                  /* applies to paths with this prefix */
	int status;                      /* F_LIE: the status to answer */
	char body[FAULT_BODY_MAX];       /* F_LIE: the body to answer, verbatim */
	bool chunked;                    /* F_LIE: in chunks of a few bytes */
};

/* ---- http.c: a request -------------------------------------------- */

struct route;

struct req {
	struct MHD_Connection *conn;
	char method[16], path[512], arg[200];   /* arg: the path's (last) "*" segment */
	char parent[200];                        /* the "*" segment before arg, if any */
	const struct route *route;
	char allow[64];                          /* methods the path supports */
	char *body;
	size_t len, cap, limit;
	bool too_big, rollback;
	int denied;                              /* /admin/ without the admin token: 401/403 */
	enum req_kind kind;                      /* what it is, for the counters and the gate */
	bool gated;                              /* counted in the stats' in-flight */
	bool gateable;                           /* ... and against --max-inflight */
	int retry_after_s;                       /* > 0: answer with Retry-After */
	json_t *in, *out;
	struct fault fault;
	struct ek_err e;
	int64_t t0;
};

typedef int handler_fn(struct req *rq);

/* Set rq->out to an error body; return status. */
int fail(struct req *rq, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Answer 410 session_over for a session in state status. */
int fail_over(struct req *rq, const char *status);
/* Answer 500 for the store error in rq->e; the transaction will roll back. */
int internal(struct req *rq);
/* A handler's transaction on the store (store_begin() and the like), each
 * failure answered 500: tx_begin() locks, begins a write and expires
 * lapsed leases; tx_read() begins a read; each 0, or -1 with 500 set.
 * tx_end() commits (or rolls back after an internal error, or ends a
 * read), unlocks, and returns the final status. */
int tx_begin(struct req *rq);
int tx_read(struct req *rq);
int tx_end(struct req *rq, int status);
/* Set rq->out to obj (NULL → 500); return status. */
int answer(struct req *rq, int status, json_t *obj);
/* The request body as JSON (parsed once); NULL with a 400 answer set. */
json_t *body_json(struct req *rq);
/* The token of the request's "Authorization: Bearer" header, or NULL. */
const char *req_bearer(struct req *rq);

/* Send rq->out with status. */
enum MHD_Result respond(struct req *rq, int status);
/* Send text (len bytes, freed here) with status as application/json. */
enum MHD_Result send_text(struct req *rq, int status, char *text, size_t len);
/* One log line per request (never a header, so never the credential). */
void log_request(struct req *rq, int status);

/* Has the client closed its end of the connection? */
bool peer_gone(struct MHD_Connection *conn);
/* Sleep up to ms in short slices; stop early on shutdown or, if conn is
 * given, when the client has gone. */
void nap(int64_t ms, struct MHD_Connection *conn);

/* The gate (see http.c), for a request's life (routes.c): rq arrives and
 * is counted; is it past the gate (answer 429 with rq->retry_after_s), or
 * must it wait *turn_ms for its turn first?  gate_wait_turn() waits,
 * false if its client left meanwhile; rq leaves the counts, once; a result
 * served took rtt_us (a sample of the adaptive limit, gate.c). */
void gate_enter(struct req *rq);
bool gate_closed(struct req *rq, int64_t *turn_ms);
bool gate_wait_turn(struct req *rq, int64_t turn_ms);
void gate_leave(struct req *rq);
void gate_served(int64_t rtt_us);

/* Start listening on 127.0.0.1:dsp.cfg.port with libmicrohttpd calling
 * on_request and on_completed (routes.c's); NULL with e filled. */
struct MHD_Daemon *http_start(MHD_AccessHandlerCallback on_request,
    MHD_RequestCompletedCallback on_completed, struct ek_err *e);

/* ---- store.c -------------------------------------------------------- */

/* A run's state as the protocol shows it, for a query that names the run
 * r: past runs.state, the final state its settlement gave it. */
#define RUN_STATE "COALESCE((SELECT f.state FROM settlements f WHERE f.run_id = r.run_id), " \
	"(SELECT 'unknown' FROM run_unknowns u WHERE u.run_id = r.run_id), r.state)"

/* A session's status as a reader sees it, for a query naming sessions as
 * p ("s." or ""): a current session whose lease lapsed is expired,
 * written or not yet (a read transaction does not write the expiry; the
 * next write does). */
#define SESSION_STATUS(p) "CASE WHEN " p "status='current' AND " p "lease_expires_ms<dsp_now_ms()" \
	" THEN 'expired' ELSE " p "status END"

/* Open (creating if needed) the store at path, bring its schema up to
 * date and load its incarnation (want_inc for a new store). */
int store_open(const char *path, const char *want_inc, struct ek_err *e);
/* exec-dispatcher backup: a consistent copy of the store at path into to
 * (a new 0600 file, rollback-journal mode: backup.h), while a dispatcher
 * may be serving from it.  0, or -1 (e filled). */
int store_backup(const char *path, const char *to, struct ek_err *e);
void store_close(void);

/* Prepare sql (a string literal) on the store and bind args by types
 * ('s' text, 'i' int64); the caller steps it and hands it back with
 * db_done().  NULL with e filled.  Only under dsp.store.mu. */
sqlite3_stmt *sql_prep(struct ek_err *e, const char *sql, const char *types, ...);
/* Run one statement that returns no row; 0 or -1 with e filled. */
int sql_exec(struct ek_err *e, const char *sql, const char *types, ...);
/* Column text, or NULL for SQL NULL. */
const char *col(sqlite3_stmt *st, int i);
/* Column as a JSON string, or JSON null. */
json_t *col_json(sqlite3_stmt *st, int i);
/* Select rows with sql (bound to arg unless NULL) into obj[key] as a list
 * of objects named by names (integers stay integers); 0 or -1. */
int rows_into(struct ek_err *e, json_t *obj, const char *key, const char *sql, const char *arg,
    const char *const *names);

/* Lock the store, begin a write and expire lapsed leases: 0, or -1 (e
 * filled, the store unlocked again).  The store answers no request: a
 * handler's failure is told by tx_begin() (http.c), which calls this. */
int store_begin(struct ek_err *e);
/* store_begin() if nothing holds the store now; 1 if something does (a
 * write, a group commit's sync), without waiting for it. */
int store_begin_now(struct ek_err *e);
/* Lock the store and begin a write that expires no lease, for one that
 * reads no session (flight_persist()): now as store_begin_now(), else
 * waiting as store_begin().  0, 1 (now: the store is held), or -1 (e
 * filled, unlocked).  Ended by store_end(). */
int store_begin_plain(bool now, struct ek_err *e);
/* Lock the store and begin a read: one snapshot, no write lock, no
 * expiry written (queries read lapsed leases through SESSION_STATUS).
 * 0, or -1 (e filled, unlocked).  Ended by store_end() as a write is. */
int store_begin_read(struct ek_err *e);
/* End what store_begin*() began and unlock: a write is committed when
 * commit is set, else rolled back; a read is ended.  0, or -1 (e filled)
 * when the commit failed. */
int store_end(bool commit, struct ek_err *e);
/* Lock the second connection (dsp.store.peek, not dsp.store.mu) and
 * begin a read on it: a snapshot of what is committed, taken while a
 * write (a group commit's sync included) holds dsp.store.mu.  For a
 * handler's own statements on dsp.store.peek (db_prep(), not sql_prep(),
 * which is dsp.store.db's); ended by store_peek_end().  0, or -1 (e
 * filled, unlocked). */
int store_peek_begin(struct ek_err *e);
void store_peek_end(void);

/* ---- faults.c ------------------------------------------------------- */

/* The kind's name, as the admin API and the report log spell it. */
const char *fault_name(int kind);
/* Is any fault queued?  Without one a request takes none, and never
 * reaches the fault hook (routes.c). */
bool fault_any(void);
/* Take one use of the first queued fault whose path prefixes path. */
struct fault fault_take(const char *path);
/* Take one use of the first fault queued at point (its path, exactly):
 * a point inside the dispatcher that no request's path names. */
struct fault fault_take_at(const char *point);
/* Parse a fault request into f; NULL if valid, else why not. */
const char *fault_parse(json_t *in, struct fault *f);
/* Queue f; -1 if the queue is full. */
int fault_queue(const struct fault *f);
/* Forget every queued fault; how many there were. */
size_t fault_clear(void);

/* ---- sessions.c ----------------------------------------------------- */

struct sess {
	char incarnation[40], executor_id[40], cred_sha256[65], status[16];
};

/* Load session sid: 1 found, 0 unknown, -1 store error (rq->e). */
int sess_load(struct req *rq, const char *sid, struct sess *s);
/* Admit a request for session sid (and incarnation inc, if given): 0 if
 * current and the credential matches, else the error status (answer set).
 * unknown_401: an unknown session is 401 (results) rather than 404. */
int sess_gate(struct req *rq, const char *sid, const char *inc, bool unknown_401);

handler_fn h_negotiate, h_heartbeat, h_close, h_adopt;

/* ---- asks.c --------------------------------------------------------- */

/* At most this many inspections wait for one session's answer. */
enum { INSPECT_PENDING_MAX = 1024 };

/* How many inspections wait for session sid's answer (the clients' and
 * the dispatcher's own); -1 on error. */
int64_t inspections_pending(struct ek_err *e, const char *sid);

/* Ask, through current session sid, about the unsettled runs of its
 * executor's ended sessions (past --settle-after-ms), as far as the
 * pending caps allow; 0 or -1 with e filled. */
int settle_ask(struct ek_err *e, const char *sid);

/* ---- settle.c (above the handlers) ---------------------------------- */

/* The sweep, once a second from main: abandon what nobody settled in
 * time, ask through every current session.  Takes dsp.store.mu. */
void settle_sweep(void);

/* The answer to an inspection: recorded (inspections.c), then settled on. */
handler_fn h_inspection_answer;

/* ---- starts.c ------------------------------------------------------- */

/* starts_shown(): the count shown is below the highest one seen. */
#define STARTS_OLDER 1

/* Has run_id started, by what the dispatcher holds: a start notice, or
 * any report attempt (refused or not)?  1, 0, or -1 with e filled. */
int run_known_started(struct ek_err *e, const char *run_id);
/* The start count ("starts") in body in, shown by executor xid: 0 (kept
 * as its highest if it is), STARTS_OLDER if below the highest it showed
 * before, or an error status (answer set).  *seen: that highest before. */
int starts_shown(struct req *rq, const char *xid, json_t *in, int64_t *seen);
/* The start notices ("started": run ids) in body in, sent through session
 * sid: each run some session of its executor took is known started from
 * now on.  0, or an error status (answer set). */
int starts_noticed(struct req *rq, const char *sid, json_t *in);
/* Executor xid negotiated session sid from a restored state (its count
 * shown below seen, or backup): every run its ended sessions still hold
 * unsettled stays with it, and those not known started are unknown.
 * 0, or an error status (answer set). */
int starts_restored(struct req *rq, const char *xid, const char *sid, int64_t shown, int64_t seen,
    bool backup);

/* ---- bell.c --------------------------------------------------------- */

/* Ring the work bell: runs became queued; a waiting feed looks again. */
void work_ring(void);
/* A session ended: every waiting feed looks again (its own gets its 410). */
void work_session_ended(void);
/* A feed waiting for work: how many sessions ended so far; register as a
 * waiter (in) before the first look, or leave; wait for a ring's token,
 * until ms pass, a session ends after the count ends, the dispatcher stops
 * or the peer hangs up (in slices, so that the last two are noticed): true
 * when this waiter took a token. */
unsigned bell_ends(void);
void bell_register(bool in);
bool bell_await(int64_t ms, unsigned ends, struct MHD_Connection *conn);

/* ---- work.c --------------------------------------------------------- */

/* Re-queue run_id (offered or accepted, no result, not settled) as a new
 * run of its transaction, queued; settle the original as state (handed_back
 * or requeued) and how, on inspection id insp if any.  0 with the new id in
 * as (at least 24 bytes), or -1 with e filled. */
int run_requeue(struct ek_err *e, const char *run_id, const char *state, const char *how,
    const char *insp, char *as);

handler_fn h_work, h_receipts, h_handback;

/* ---- results.c ------------------------------------------------------ */

/* Keep a report row for a /v1/results request a fault kept from handling. */
void report_fault(struct req *rq, int status);
/* Count one more report of run_id in flight; return the new count. */
int flight_enter(const char *run_id);
/* Count one report of run_id no longer in flight. */
void flight_leave(const char *run_id);
/* Raise the stored max_in_flight of run_id to at least n. */
void flight_persist(const char *run_id, int n);

handler_fn h_result;

/* Group commit, since start: the batches committed, the results they
 * held, and the most in one batch. */
void results_commits(int64_t *batches, int64_t *results, int64_t *largest);

/* ---- inspections.c -------------------------------------------------- */

/* POST /v1/sessions/{sid}/inspections/{id} (settle.c's h_inspection_answer()),
 * before its transaction: the session id into sid (n bytes), the body
 * parsed, its size checked; 0, or 400 (answer set). */
int inspection_answer_check(struct req *rq, char *sid, size_t n);
/* ... inside its transaction: session sid gated and the answer recorded
 * once (invariant 5); 200, or the error status (answer set). */
int inspection_answer_record(struct req *rq, const char *sid);

handler_fn h_inspection_new, h_inspection_get, h_inspection_list;

/* ---- admin.c -------------------------------------------------------- */

handler_fn h_submit, h_list_runs, h_show_run, h_summary, h_revoke, h_expire, h_replace,
	h_lease, h_stats, h_list_sessions, h_client_new, h_list_clients, h_client_revoke, h_add_fault,
	h_clear_faults;

/* ---- routes.c (the top) --------------------------------------------- */

/* Serve the route table on 127.0.0.1:dsp.cfg.port (http_start()); NULL
 * with e filled. */
struct MHD_Daemon *routes_start(struct ek_err *e);

/* ---- auth.c -------------------------------------------------------- */

/* Load the admin token from given, or from STORE.admin-token, making it
 * (0600) if absent; before the server starts.  0 or -1 with e filled. */
int auth_init(const char *store, const char *given, struct ek_err *e);
/* The admin token itself, from given or STORE.admin-token, for a client of
 * /admin/ (exec-dispatcher submit): never made, checked as auth_init()
 * checks it, into buf (size bytes; 258 hold any).  0 or -1. */
int auth_token_load(const char *store, const char *given, char *buf, size_t size,
    struct ek_err *e);
/* 0 if rq shows the admin token, else 401/403 with the answer set. */
int auth_admin(struct req *rq);
/* Inside the negotiation's transaction: spend one use of the enrollment
 * token (NULL: none sent) to enroll executor xid; 0, or 403/500 (answer
 * set). */
int enroll_take(struct req *rq, const char *xid, const char *token);
/* Are two SHA-256 hex digests equal?  In constant time. */
bool digest_eq(const char *got, const char *want);

handler_fn h_enroll_new;

/* ---- util.c --------------------------------------------------------- */

/* Is s a run id: 1..RUN_ID_MAX bytes of [A-Za-z0-9._:-]? */
bool is_run_id(const char *s);

/* Print "exec-dispatcher: ..." on stderr unless --quiet. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
