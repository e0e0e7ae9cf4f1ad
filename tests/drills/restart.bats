#!/usr/bin/env bats
# Restarts lose no work.  exec-loop runs a backlog and is stopped at random
# moments — TERM, alone or after a HUP (which is not a stop: a status
# line), clean: the runs accepted and never started are handed back; kill -9 (the dispatcher settles them through
# InspectRetainedRun once the executor has a new session) — and started
# again each time, adopting what the earlier sessions retained.  Declared
# outcome: every submitted transaction runs exactly once (a side-effect line
# per execution, and the dispatcher's ledger), and once the restarts have
# settled the dispatcher holds nothing accepted by an ended session.
#
# RESTART_SEED picks the moments (default 1); RESTART_STOPS the number of
# stops (default 9: three of each kind); RESTART_RUNS the backlog (default 30).

load drill

# tspec ID: a guest that appends its transaction id to the ledger (a
# re-queued run has a new run id and the same transaction id).
tspec() {
	printf '{"run_id":"%s","txn_id":"t-%s","program":"/bin/sh","args":["-c","echo \\"$EXEC_TXN_ID\\" >> %s; sleep 0.0%s"]}' \
		"$1" "$1" "$LEDGER" "$((RANDOM % 10))"
}

# How often transaction t-ID ran.
ran_txn() { if [ -f "$LEDGER" ]; then grep -cx -- "t-$1" "$LEDGER" || true; else echo 0; fi; }

# (HUP at its default: a shell cannot trap what it was started ignoring,
# as under a suite run with nohup)
start_loop() {
	env --default-signal=HUP exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 2 --jitter-ms 0 \
		2>>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	LOOP=$!
	remember "$LOOP"
}

# exited PID: PID has ended (a zombie waiting for us counts).
exited() {
	local st
	st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 0
	[ -z "$st" ] || [ "$st" = Z ]
}

# The dispatcher's runs in STATE, from its admin list.
disp_in() { admin GET /admin/runs | grep -o "\"state\":\"$1\"" | wc -l; }

@test "exec-loop stopped at random moments (TERM, HUP then TERM, kill -9) and restarted: every transaction runs exactly once" {
	RANDOM=${RESTART_SEED:-1}
	local n=${RESTART_RUNS:-30} stops=${RESTART_STOPS:-9} i s sig specs=()
	# Asked about at once, not 30 s after their session's end: the last
	# loop would otherwise idle those 30 s before the killed sessions'
	# runs are settled (adoption at open still comes first: the question
	# goes through the new session, which the open makes).
	start_dispatcher --settle-after-ms 0
	for i in $(seq 1 "$n"); do specs+=("$(tspec "w$i")"); done
	submit "${specs[@]}"
	for ((i = 1; i <= stops; i++)); do
		case $((i % 3)) in 1) sig=TERM ;; 2) sig="HUP TERM" ;; 0) sig=KILL ;; esac
		start_loop
		wait_until '[ -s "$EXEC_STATE_DIR/state.db" ] && [ -n "$(current_session 2>/dev/null)" ] || exited '"$LOOP"
		sleep "$(printf '0.%03d' $((RANDOM % 400)))"        # a random moment of its life
		for s in $sig; do kill -s "$s" "$LOOP"; done
		wait_until "exited $LOOP" || fail "stop $i ($sig) did not end the loop"
		wait "$LOOP" || true
	done
	# declared action: a last loop, left to run until the backlog is done
	start_loop
	wait_until '[ "$(admin GET /admin/summary | grep -o "\"ledger_total\":[0-9]*" | cut -d: -f2)" = "'"$n"'" ]' ||
		fail "ledger: $(admin GET /admin/summary)"
	wait_until '[ "$(disp_in accepted)" = 0 ] && [ "$(disp_in offered)" = 0 ]' ||
		fail "still held by a session: $(admin GET /admin/runs)"
	kill -TERM "$LOOP"
	wait "$LOOP"
	# a fresh observer: each transaction ran once, and was charged once
	for i in $(seq 1 "$n"); do
		[ "$(ran_txn "w$i")" = 1 ] || fail "t-w$i ran $(ran_txn "w$i") times"
	done
	[ "$(wc -l <"$LEDGER")" = "$n" ]
	run grep -E "unexpected EOF|trap:" "$BATS_TEST_TMPDIR/loop.err"
	[ "$status" -ne 0 ] || fail "$output"
}

# A second executor, with its own state directory.
other_loop() {
	EXEC_STATE_DIR=$BATS_TEST_TMPDIR/state-b exec-loop --dispatcher "$DISP_URL" --tick 0.05 \
		--slots 4 --jitter-ms 0 2>>"$BATS_TEST_TMPDIR/loop-b.err" 3>&- &
	LOOP_B=$!
	remember "$LOOP_B"
}

# gated ID: a guest that appends its transaction id, then waits for $GO.
gated() {
	printf '{"run_id":"%s","txn_id":"t-%s","program":"/bin/sh","args":["-c","echo \\"$EXEC_TXN_ID\\" >> %s; %s"]}' \
		"$1" "$1" "$LEDGER" "$(guest_wait "$GO")"
}

@test "two executors, one stopped for good: its never-started work finishes on the other, its unfinished work is abandoned explicitly, nothing runs twice" {
	start_dispatcher --settle-after-ms 0 --abandon-after-ms 3000
	local i
	# executor A starts two long runs, and queues what its prefetch allows
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 2 --prefetch 2 --jitter-ms 0 --drain-ms 100 \
		2>>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	LOOP=$!
	remember "$LOOP"
	submit "$(gated g1)" "$(gated g2)"
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 2 ]'
	local specs=()
	for i in 1 2 3 4 5 6; do specs+=("$(tspec "q$i")"); done
	submit "${specs[@]}"
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''queued'\''")" = 2 ]'
	# A stops for good: a clean stop (its queue handed back), then its
	# machine is gone with its running guests
	kill -TERM "$LOOP"
	wait "$LOOP" || true
	[ "$(val "SELECT count(*) FROM handbacks WHERE acked_at IS NOT NULL")" = 2 ]
	kill_recorded
	# B takes everything that never started on A, and runs it once
	other_loop
	wait_until '[ "$(disp_in finished)" = 6 ]' || fail "$(admin GET /admin/runs)"
	# A's two unfinished runs: nobody can say how they ended, so they are
	# abandoned visibly, never re-run
	wait_until '[ "$(disp_in abandoned)" = 2 ]' || fail "$(admin GET /admin/summary)"
	kill -TERM "$LOOP_B"
	wait "$LOOP_B"
	for i in 1 2 3 4 5 6; do
		[ "$(ran_txn "q$i")" = 1 ] || fail "t-q$i ran $(ran_txn "q$i") times"
	done
	[ "$(ran_txn g1) $(ran_txn g2)" = "1 1" ]          # started once, on A, never again
	[ "$(disp_in accepted) $(disp_in offered)" = "0 0" ]
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":6' ]
}
