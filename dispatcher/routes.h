/*
 * routes — the dispatcher's top: the route table, a request's life
 * through it in libmicrohttpd, and the fault hook.  Its header draws the
 * whole.
 *
 * exec-dispatcher is a small HTTP server that speaks doc/protocol.md to
 * executors, keeps its own SQLite store, and lets tests steer it through
 * /admin/ endpoints and injected faults.  cmd/exec-dispatcher.c parses the
 * options into dsp.cfg, opens the store and starts the server; the rest is
 * in dispatcher/, one file per area, each with its header, in the layers
 * HACKING.md draws: a file includes the headers of the layers below its
 * own, and calls only into those.
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
#ifndef EK_DISPATCHER_ROUTES_H
#define EK_DISPATCHER_ROUTES_H

#include <microhttpd.h>

#include "err.h"

/* Serve the route table on 127.0.0.1:dsp.cfg.port (http_start()); NULL
 * with e filled. */
struct MHD_Daemon *routes_start(struct ek_err *e);

#endif
