#!/usr/bin/env bats
# Loss of the dispatcher.  Its store (sessions, runs, results, reports,
# ledger) is durable: killed with SIGKILL and restarted on the same store,
# it keeps every session and record, and results retained meanwhile are
# recorded and charged once.  Lost for good (a new, empty store), the
# executor's session is over: results stay retained as evidence, nothing
# runs again.

load drill

@test "dispatcher killed mid-work with reports in flight, restarted on its store: every result recorded and charged once" {
	start_dispatcher
	open_session
	specs=()
	for i in 1 2 3 4 5; do specs+=("$(gspec "d$i" $((i % 3)) 1)"); done
	submit "${specs[@]}"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --slots 5 >/dev/null          # detached supervisors, gated guests
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 5 ]'
	# baseline witness
	[ "$(disp_count accepted)" = 5 ]
	[ "$(disp_count finished)" = 0 ]
	# the loss strikes with reports in flight: the dispatcher holds each 5 s
	fault delay 5 5000
	touch "$GO"
	wait_until '[ "$(val "SELECT count(*) FROM results WHERE attempts >= 1")" -ge 3 ]'
	fault 5xx 1000                                  # queued in memory: must not survive
	kill_dispatcher                                 # the loss
	exec-run wait --timeout-ms "$WAIT_MS"                # every supervisor ends on its own
	# witness after the loss: every result retained, none acknowledged
	[ "$(val "SELECT count(*) FROM results WHERE refused = 0")" = 5 ]
	[ "$(val "SELECT count(*) FROM receipts")" = 0 ]
	run val "SELECT DISTINCT last_diag FROM results WHERE attempts > 0"
	assert_output --partial "no answer"
	# declared action: the dispatcher comes back on its store; a drain delivers
	restart_dispatcher
	exec-session heartbeat >/dev/null               # the session survived the restart
	run exec-reconcile --drain
	assert_success                                  # no fault came back with the restart
	# a fresh process observes
	for i in 1 2 3 4 5; do
		[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'd$i'")" = 1 ]
		[ "$(disp_charges "d$i")" = 1 ]
		[ "$(ran "d$i")" = 1 ]
	done
	check --drained --dispatcher-store "$BATS_TEST_TMPDIR/disp.db"
}

@test "dispatcher killed and restarted under a running exec-loop: the loop rides it out, nothing twice" {
	start_dispatcher
	specs=()
	for i in $(seq 1 12); do specs+=("$(gspec "l$i" 0 0 0.05)"); done
	submit "${specs[@]}"
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 3 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	wait_until '[ "$(disp_count finished)" -ge 3 ]'   # baseline witness: work flows
	kill_dispatcher                                   # the loss
	wait_until 'grep -q "heartbeat failed" "$BATS_TEST_TMPDIR/loop.err"'
	kill -0 "$loop"                                   # the loop keeps running
	restart_dispatcher                                # declared action
	wait_until '[ "$(disp_count finished)" = 12 ]'
	kill -TERM "$loop"
	wait "$loop"
	for i in $(seq 1 12); do [ "$(ran "l$i")" = 1 ]; done
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":12' ]
	check --drained --dispatcher-store "$BATS_TEST_TMPDIR/disp.db"
}

@test "dispatcher outage under exec-loop: after it comes back, the first reconcile worker delivers every retained result" {
	start_dispatcher
	specs=()
	for i in $(seq 1 40); do specs+=("$(gspec "o$i" 0 1)"); done   # gated guests
	submit "${specs[@]}"
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 40 --reconcile-ms "$WAIT_MS" -v 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	# (40 supervisors, one after another: under the sanitizers on a loaded
	# machine that has taken more than the usual bound)
	WAIT_S=$((WAIT_S * 3)) WAIT_TRIES=$((WAIT_TRIES * 3)) \
		wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 40 ]'
	kill_dispatcher                                   # the outage
	touch "$GO"                                       # every guest ends during it
	wait_until '[ "$(val "SELECT count(*) FROM runs")" = 0 ]'
	# witness: all 40 retained, more than one pass (32) can take
	[ "$(val "SELECT count(*) FROM results WHERE refused = 0")" = 40 ]
	[ "$(val "SELECT count(*) FROM receipts")" = 0 ]
	run ! grep -q "reconcile:" "$BATS_TEST_TMPDIR/loop.err"
	restart_dispatcher                                # declared action
	wait_until '[ "$(val "SELECT count(*) FROM receipts")" = 40 ]'
	kill -TERM "$loop"
	wait "$loop"
	# one heartbeat, then one worker: its drain took them all, not 32
	run grep -m1 "reconcile:" "$BATS_TEST_TMPDIR/loop.err"
	assert_output --regexp '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{4} exec-loop: reconcile: 40 delivered, 0 refused, 0 waiting in 2 passes$'
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":40' ]
	check --drained --dispatcher-store "$BATS_TEST_TMPDIR/disp.db"
}

@test "dispatcher store lost (restarted empty): the session is over, results stay as evidence, nothing re-runs" {
	start_dispatcher
	open_session
	submit "$(gspec e1)" "$(gspec e2)" "$(gspec e3 0 1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run supervise e1 >/dev/null                 # e1 acknowledged
	fault 5xx 3
	exec-run supervise --budget-ms 1000 e2 >/dev/null   # e2 retained
	kill_dispatcher
	mv "$BATS_TEST_TMPDIR/disp.db" "$BATS_TEST_TMPDIR/disp.lost.db"
	rm -f "$BATS_TEST_TMPDIR/disp.db-wal" "$BATS_TEST_TMPDIR/disp.db-shm"
	restart_dispatcher                               # a new incarnation, no sessions
	enroll_executors                                 # nor enrollments: the operator enrolls again
	# a report meets the loss first: refused (401), delivery stops, and
	# how the session ended is left to the heartbeat, which asks about it
	run exec-reconcile
	[ "$status" -ne 0 ]
	[ "$(val "SELECT count(*) FROM sessions WHERE status = 'current'")" = 1 ]
	run exec-session heartbeat
	[ "$status" -eq "$EK_NOSESSION" ]                # over, not "nonsense" (76) forever
	assert_output --partial "over unknown"
	assert_output --partial "the dispatcher does not know it any more"
	[ "$(val "SELECT count(*) FROM sessions WHERE status = 'current'")" = 0 ]
	[ "$(val "SELECT count(*) FROM results WHERE run_id = 'e2' AND refused = 0")" = 1 ]   # kept
	[ "$(val "SELECT state FROM runs WHERE run_id = 'e3'")" = queued ]
	exec-session open --dispatcher "$DISP_URL" >/dev/null   # a session with the new dispatcher
	exec-run start --wait >/dev/null
	[ "$(ran e3)" = 0 ]                              # quarantined, never run
	[ "$(ran e1)" = 1 ]
	[ "$(ran e2)" = 1 ]
	run exec-report e2
	[ "$status" -eq "$EK_NOSESSION" ]                # never sent under the new session
	check   # the receipt of e1 names the lost incarnation: noted, not checkable
	assert_output --partial "note incarnation"
}

@test "dispatcher store lost under a running exec-loop: the loop opens a new session and goes on; nothing runs twice, new work runs" {
	start_dispatcher
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 2 --prefetch 4 --jitter-ms 0 \
		2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	submit "$(gspec a1)" "$(gspec a2)"
	wait_until '[ "$(disp_count finished)" = 2 ]'         # acknowledged before the loss
	fault 5xx 100000
	submit "$(gspec r1)"                                   # its reports fail: retained at the loss
	wait_until '[ "$(val "SELECT count(*) FROM results WHERE run_id = '\''r1'\'' AND attempts >= 1")" = 1 ]'
	submit "$(gspec g1 0 1)" "$(gspec g2 0 1)"             # gated: in flight at the loss
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 2 ]'
	submit "$(gspec q1)" "$(gspec q2)"                     # accepted here, no slot free
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''queued'\''")" = 2 ]'
	old=$(current_session)
	# baseline witness
	[ "$(disp_count accepted)" = 5 ]
	# the loss: the dispatcher comes back on the same port with a new, empty
	# store, which the operator enrolls the executor in again.  The loop is
	# held meanwhile: a loop that finds the new store before the enrollment
	# stops (exit 77, not enrolled) and is restarted by its unit
	# (Restart=on-failure), which is not what this drill is about.
	kill -STOP "$loop"
	kill_dispatcher
	mv "$BATS_TEST_TMPDIR/disp.db" "$BATS_TEST_TMPDIR/disp.lost.db"
	rm -f "$BATS_TEST_TMPDIR/disp.db-wal" "$BATS_TEST_TMPDIR/disp.db-shm"
	restart_dispatcher
	enroll_executors       # an empty store knows no enrollment: the operator enrolls again
	kill -CONT "$loop"
	touch "$GO"            # the runs in flight end now: their reports meet the loss (401)
	# the loop is told its session is over (not 76 forever) and opens a new
	# one: the new store binds the executor's key on first use
	wait_until '[ -n "$(current_session)" ] && [ "$(current_session)" != "$old" ]'
	grep -q "no longer knows this session" "$BATS_TEST_TMPDIR/loop.err"
	[ "$(sql "SELECT status FROM sessions WHERE session_id = '$old'")" = revoked ]
	kill -0 "$loop"
	# new work, submitted after the restart, runs
	submit "$(gspec n1)" "$(gspec n2)" "$(gspec n3)"
	wait_until '[ "$(disp_count finished)" = 3 ]'
	exec-run wait --timeout-ms "$WAIT_MS"                 # every supervisor ended
	kill -TERM "$loop"
	wait "$loop"
	# a fresh process observes: every guest at most once; the runs in
	# flight and the one retained ran once and keep their results as
	# evidence (the dispatcher
	# that handed them out is gone, and nothing of it can be adopted); the
	# runs queued at the loss never ran and stay quarantined, visible
	for r in a1 a2 r1 g1 g2 n1 n2 n3; do [ "$(ran "$r")" = 1 ]; done
	[ "$(val "SELECT count(*) FROM results WHERE run_id IN ('r1', 'g1', 'g2') AND session_id = '$old'")" = 3 ]
	[ "$(val "SELECT count(*) FROM runs WHERE state = 'started'")" = 0 ]   # nothing stranded running
	# the queued ones: a start in the second before the loss was noticed
	# may have run one (once, its result kept as evidence); the others
	# never run, quarantined
	for r in q1 q2; do
		case $(ran "$r") in
		0) exec-inspect list quarantined --ids | grep -qx "$r" || fail "$r neither ran nor is quarantined" ;;
		1) [ "$(val "SELECT count(*) FROM results WHERE run_id = '$r' AND session_id = '$old'")" = 1 ] ;;
		*) fail "$r ran $(ran "$r") times" ;;
		esac
	done
	[ "$(disp_count queued)" = 0 ]                        # nothing stranded at the dispatcher
	[ "$(disp_count offered)" = 0 ]
	[ "$(disp_count accepted)" = 0 ]
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":3' ]
	check --dispatcher-store "$BATS_TEST_TMPDIR/disp.db"
}

@test "dispatcher store lost, restarted with the same incarnation: open --adopt cannot adopt the forgotten session, and the new one stays current" {
	start_dispatcher
	open_session
	inc=$(exec-session show --json | sed -n 's/.*"incarnation":"\([^"]*\)".*/\1/p')
	submit "$(gspec s1)"
	exec-accept --from-dispatcher >/dev/null
	fault 5xx 3
	exec-run supervise --budget-ms 1000 s1 >/dev/null   # s1 retained
	old=$(current_session)
	kill_dispatcher
	rm -f "$BATS_TEST_TMPDIR/disp.db" "$BATS_TEST_TMPDIR/disp.db-wal" "$BATS_TEST_TMPDIR/disp.db-shm"
	restart_dispatcher --incarnation "$inc"          # empty, under the old name
	enroll_executors
	run exec-session heartbeat
	[ "$status" -eq "$EK_NOSESSION" ]
	assert_line "over unknown"
	# the adoption's 404 unknown_session is about the old session, not ours
	run exec-session open --dispatcher "$DISP_URL" --adopt
	assert_success
	assert_output --partial "session '$old' not adopted"
	new=$(current_session)
	[ -n "$new" ]
	[ "$new" != "$old" ]
	exec-session heartbeat >/dev/null
	[ "$(ran s1)" = 1 ]
	[ "$(val "SELECT count(*) FROM results WHERE run_id = 's1' AND refused = 0")" = 1 ]
}
