/*
 * lifecycle — the life of a run and of its result, in one place.
 *
 *   accept                 start marker              guest ends / cancel / timeout
 *  ───────► [queued] ─────────────────────► [started] ───────────────┐
 *              │   run_mark_started()          │                     │ result_choose()
 *              │                               │ supervisor gone,    ▼
 *              │ cancel before start           │ no result     (results row: retained)
 *              │ result_choose()               ▼                     │
 *              └─────────────────────► result  [unknown]             │ run_delete()
 *                                              (kept forever,        ▼
 *                                               never re-run)   execution row gone,
 *                                                               result outlives it
 *
 *   retained ──deliver: acknowledged──► receipt (results row deleted)
 *      │   result_ack_in()
 *      ├──deliver: refused─────────────► refused (kept as evidence, never retried)
 *      │   result_note_in(cause)
 *      ├──deliver: session over────────► retained, undeliverable by this session
 *      └──deliver: transient───────────► retained, attempts+1, last_diag set
 *
 * Transitions and the function that performs each:
 *
 *   from        to          function               commit point name
 *   (none)      queued      acceptor_add()          accept-before-commit / accept-after-commit
 *                                                   (exec-accept: once per chunk of runs)
 *   queued      queued      (exec-run supervise)    before-marker (the run loaded, not marked:
 *                                                   it stays queued for a later start)
 *   queued      started     run_mark_started()      start-marker (shares joined in the same commit)
 *   queued      started     chain_next()            start-marker (a chaining supervisor's next run:
 *                                                   chosen, slot-bounded and marked in one commit)
 *   started     started     run_set_guest()         after-spawn
 *   started     result      result_choose()         result-chosen / retained (born claimed by
 *                                                   its chooser, who delivers it next; the
 *                                                   run leaves its share dimensions in the
 *                                                   same commit)
 *   queued      result      result_choose()         (cancel before start; claimed likewise;
 *                                                   of two cancels, the one that chooses second
 *                                                   finds the row or its receipt and loses)
 *   started     unknown     run_sweep()             (supervisor gone, no result)
 *   result      —           claim_all()             claimed / attempt-counted (the first
 *                                                   round's count in the claim's commit)
 *   result      —           count_round()           attempt-counted (a later round's)
 *   result      —           send_one()              request-sent
 *   result      receipt     settle_round()          acked-before-release / after-release
 *   result      refused     settle_round()          refusal-before-evidence
 *   run row     deleted     settle_round()          acked-before-release / refusal-before-
 *                                                   evidence (settled for good: in its commit)
 *   run row     deleted     run_delete()            after-report (where the settle did not)
 *   refused/orphaned  gone  evidence_export()       export-chunk (after each chunk: its rows
 *                                                   are in the synced file, then deleted)
 *   receipt     gone        receipts_prune()        prune-chunk (after each chunk)
 *   settled run forgotten   records_prune()         records-chunk (after each chunk: its
 *                                                   records, specs and rows all gone)
 *   session     current     session_begin()         session-negotiated (before: the dispatcher's
 *                                                   session, not yet stored here)
 *   binding     adopted     session_adopt()         adopted-there (before: adopted at the
 *                                                   dispatcher, not yet here)
 *   capacity    changed     shares_set_capacity()   shares-changed (after the commit, before
 *                                                   the limits files are rewritten)
 *   queued      handed back handback_mark()         handback-marked (marked: never starts here;
 *                                                   the dispatcher not asked yet)
 *   handed back acknowledged handback_settle()      handback-acked (before: the dispatcher
 *                                                   re-queued it, not yet recorded here)
 *   queued/started  marked  run_cancel()            cancel-marked
 *   started     unknown     run_cancel()            cancel-marked (supervisor gone)
 *
 * The delivery functions are in deliver.c; each of their transactions
 * covers a whole batch of results.
 *
 * Synced commits of the supervisor path (exec-run supervise): only two
 * are durable, synced before the supervisor goes on — start-marker (before
 * the spawn) and retained (before the first send).  The rest (after-spawn,
 * claimed, attempt-counted, after-release, after-report's
 * row delete) are lazy, run_commits(): atomic and kept through a kill -9 at
 * any point, so every crash point holds as drilled; the next durable commit
 * syncs them (a chain's next start marker, else the close).  A power loss
 * keeps a prefix of the commits, and every prefix is one of those points'
 * states (doc/recovery.md, "Which commits are synced").
 *
 * Invariants (the database enforces those marked *):
 *   1.* A binding, once written, never changes (triggers).
 *   2.* A run has at most one result: results.run_id is the primary key,
 *       and result_choose() writes none while the run has a receipt (its
 *       result acknowledged and released), in the same transaction.
 *   3.* An unknown run is never deleted and never leaves unknown.
 *   4.* A started run never goes back to queued.
 *   5.  A result is committed (synchronous=FULL) before its first attempt.
 *   6.  Every attempt sends results.body unchanged.
 *   7.  Only the session that accepted a run may start it or report it.
 *   8.  Lock contention only delays the commit of a chosen result: the
 *       supervisor (exec-run finish()) waits for the write lock as long as
 *       it takes (db_wait), so a held lock never makes a run unknown.  No
 *       writer holds the lock while it waits on input, and long writers
 *       commit in chunks.
 */
#ifndef EK_LIFECYCLE_H
#define EK_LIFECYCLE_H
#endif
