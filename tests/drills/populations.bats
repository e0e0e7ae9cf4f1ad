#!/usr/bin/env bats
# The populations that are not durable, lost on purpose: the shares cache
# and the limits files (reconstructible from capacities + membership),
# guest output (disposable once acknowledged), receipts (disposable after
# their window, by explicit prune) and refused / orphaned evidence
# (disposable by explicit export).  Each: witness → loss → declared action
# → a fresh process observes.

load drill

# Two gated guests running, both in the executor dimension at 1000 B/s.
two_running() {
	start_dispatcher
	open_session
	exec-shares capacity set executor 1000 >/dev/null
	submit "$(gspec p1 0 1)" "$(gspec p2 0 1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --slots 2 >/dev/null
	wait_until '[ "$(val "SELECT count(*) FROM runs WHERE state = '\''started'\''")" = 2 ]'
	wait_until '[ -s "$EXEC_STATE_DIR/out/p1.limits" ] && [ -s "$EXEC_STATE_DIR/out/p2.limits" ]'
}

bps() { sed -n 's/.*"executor_bps":\([0-9a-z]*\).*/\1/p' "$EXEC_STATE_DIR/out/$1.limits"; }

@test "shares cache lost: every share is recomputed from capacities and membership, the same" {
	two_running
	norm() { exec-shares list --json | sed 's/,"recomputed":[a-z]*//' | sort; }
	before=$(norm)
	[ "$(exec-shares show p1 --json | grep -o '"share_bps":[0-9]*')" = '"share_bps":500' ]   # witness
	sqlite3 -cmd '.timeout 5000' "$EXEC_STATE_DIR/state.db" "DELETE FROM share_cache"   # the loss
	# declared action: none — a read recomputes what it needs
	run exec-shares show p1 --json
	assert_success
	assert_output --partial '"share_bps":500'
	assert_output --partial '"recomputed":true'             # rebuilt, not remembered
	[ "$(norm)" = "$before" ]
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS"
	check
}

@test "limits files lost: the next publication writes them again, with the current shares" {
	two_running
	[ "$(bps p1)" = 500 ]                                 # witness
	rm -f "$EXEC_STATE_DIR/out/p1.limits" "$EXEC_STATE_DIR/out/p2.limits"   # the loss
	exec-shares capacity set executor 800 >/dev/null      # declared action: a publication
	wait_until '[ -s "$EXEC_STATE_DIR/out/p1.limits" ] && [ -s "$EXEC_STATE_DIR/out/p2.limits" ]'
	[ "$(bps p1)" = 400 ]
	[ "$(bps p2)" = 400 ]
	[ "$(stat -c %a "$EXEC_STATE_DIR/out/p1.limits")" = 600 ]
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS"
	check
}

@test "guest output lost after acknowledgement: nothing else notices; lost before, the result is unchanged" {
	start_dispatcher
	open_session
	# o2 writes to both streams (a capture file is made on its first
	# byte), then waits for $GO
	local o2
	o2="echo \\\"\$EXEC_RUN_ID\\\" >> $LEDGER; echo out; echo err >&2; $(guest_wait "$GO")"
	submit '{"run_id":"o1","txn_id":"t","program":"/bin/echo","args":["hello"]}' \
		"$(printf '{"run_id":"o2","txn_id":"t-o2","program":"/bin/sh","args":["-c","%s"]}' "$o2")"
	exec-accept --from-dispatcher >/dev/null
	exec-run supervise o1 >/dev/null
	[ "$(cat "$EXEC_STATE_DIR/out/o1.stdout")" = hello ]  # witness
	rm -f "$EXEC_STATE_DIR"/out/o1.*                      # the loss, after the ack
	exec-run start --slots 1 >/dev/null
	wait_until '[ -e "$EXEC_STATE_DIR/out/o2.stdout" ] && [ -e "$EXEC_STATE_DIR/out/o2.stderr" ]'
	rm -f "$EXEC_STATE_DIR"/out/o2.std*                   # the loss, while o2 runs
	touch "$GO"
	exec-run wait --timeout-ms "$WAIT_MS"
	exec-reconcile --drain >/dev/null
	[ "$(val "SELECT outcome || exit_code FROM receipts WHERE run_id = 'o2'")" = exited0 ]
	run exec-session report
	assert_success
	check --drained
}

@test "receipts pruned after their window: gone only by explicit prune, and a pruned run is still never run again" {
	start_dispatcher
	open_session
	submit "$(gspec r1)" "$(gspec r2)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --wait >/dev/null
	[ "$(val "SELECT count(*) FROM receipts")" = 2 ]        # witness
	run exec-reconcile --prune-receipts 30d                 # inside the window: kept
	[ "$(val "SELECT count(*) FROM receipts")" = 2 ]
	run exec-reconcile --prune-receipts 0s                  # the loss, declared
	assert_success
	[ "$(val "SELECT count(*) FROM receipts")" = 0 ]
	run exec-report r1                                      # absent now: ambiguous, and said so
	[ "$status" -eq "$EK_NOINPUT" ]
	# the run's identity outlives its receipt: the same line again is a duplicate
	run exec-accept <<<"$(gspec r1)"
	assert_success
	assert_output --partial "duplicate"
	exec-run start --wait >/dev/null
	[ "$(ran r1)" = 1 ]
}

@test "refused and orphaned evidence exported: written and synced first, then exactly those rows go" {
	start_dispatcher
	open_session
	gspec f1 | exec-accept >/dev/null                      # unknown to the dispatcher: refused
	submit "$(gspec f2)"
	exec-accept --from-dispatcher >/dev/null
	exec-run supervise f1 >/dev/null || true
	fault 5xx 3
	exec-run supervise --budget-ms 1000 f2 >/dev/null       # retained...
	open_session                                            # ...and orphaned by a new session
	[ "$(val "SELECT count(*) FROM results")" = 2 ]         # witness
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/kept.jsonl"
	assert_success                                          # f2 could still be adopted: kept back
	assert_line --partial "kept back 1 result that adoption could still deliver"
	[ "$(val "SELECT run_id FROM results")" = f2 ]
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl" --include-adoptable
	assert_success
	cat "$BATS_TEST_TMPDIR/kept.jsonl" >>"$BATS_TEST_TMPDIR/evidence.jsonl"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/evidence.jsonl")" = 2 ]
	grep -q '"run_id":"f1"' "$BATS_TEST_TMPDIR/evidence.jsonl"
	grep -q '"run_id":"f2"' "$BATS_TEST_TMPDIR/evidence.jsonl"
	[ "$(val "SELECT count(*) FROM results")" = 0 ]
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl"   # never overwritten
	[ "$status" -ne 0 ]
	[ "$(wc -l <"$BATS_TEST_TMPDIR/evidence.jsonl")" = 2 ]
}
