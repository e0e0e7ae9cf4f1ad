/*
 * settle — settlement of an ended session's runs: settled on the answer
 * to the dispatcher's own inspection (whose endpoint it composes), or
 * abandoned by the sweep.
 *
 * The sweep: main wakes once a second (sigtimedwait) and calls
 * settle_sweep(), one write transaction of the store's (store_begin()),
 * as a request's is: lapsed leases expire, runs nobody settled in time are
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
 */
#ifndef EK_DISPATCHER_SETTLE_H
#define EK_DISPATCHER_SETTLE_H

#include "http.h"

/* The sweep, once a second from main: abandon what nobody settled in
 * time, ask through every current session.  Takes the store (store_begin()). */
void settle_sweep(void);

/* The answer to an inspection: recorded (inspections.c), then settled on. */
handler_fn h_inspection_answer;

#endif
