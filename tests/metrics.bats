#!/usr/bin/env bats
# exec-inspect metrics: a Prometheus text snapshot of the state for
# node_exporter's textfile collector, with the same figures as
# `exec-inspect summary --json`, replaced atomically, read-only.

load helpers
load workload

setup() {
	command -v promtool >/dev/null || fail "promtool is not installed (Debian package prometheus; scripts/deps.sh installs it)"
}

# metric NAME[{LABELS}]: the value of one series in $M.
metric() {
	awk -v k="$1" '$1 == k { print $2; n++ } END { if (n != 1) exit 1 }' <<<"$M"
}

@test "a fresh session: every metric is there, zero, and promtool finds no problem" {
	start_dispatcher
	open_session
	run --separate-stderr exec-inspect metrics
	assert_success
	[ -z "$stderr" ]
	M=$output
	run promtool check metrics <<<"$M"
	assert_success
	assert_output ''
	for s in execkit_runs_queued execkit_runs_running 'execkit_runs_quarantined{state="queued"}' \
		'execkit_runs_quarantined{state="started"}' execkit_runs_unknown \
		'execkit_unreconciled_results{cause="deliverable"}' 'execkit_unreconciled_results{cause="earlier_session"}' \
		'execkit_unreconciled_results{cause="refused"}' execkit_unreconciled_attempts \
		execkit_oldest_unreconciled_age_seconds execkit_oldest_refused_age_seconds execkit_receipts \
		execkit_runs_accepted_total execkit_runs_started_total execkit_results_delivered_total \
		execkit_results_refused_total execkit_delivery_attempts_total execkit_reconcile_passes_total; do
		[ "$(metric "$s")" = 0 ] || fail "$s: '$(metric "$s")'"
	done
	for o in exited killed timeout cancelled exec_failed unknown; do
		[ "$(metric "execkit_runs_finished_total{outcome=\"$o\"}")" = 0 ] || fail "finished $o"
	done
	assert_equal "$(metric execkit_session_up)" 1
	assert_equal "$(metric "execkit_build_info{version=\"$(exec-inspect --version | sed 's/.*(execkit) //')\"}")" 1
	awk -v a="$(metric execkit_last_heartbeat_age_seconds)" -v hi="$WAIT_S" 'BEGIN { exit !(a >= 0 && a <= hi) }' ||
		fail "heartbeat age '$(metric execkit_last_heartbeat_age_seconds)'"
	# every family has its HELP and TYPE (a counter iff its name ends in
	# _total), and every name the execkit_ prefix
	for n in $(grep -v '^#' <<<"$M" | sed 's/[{ ].*//' | sort -u); do
		[[ $n == execkit_* ]] || fail "$n: no execkit_ prefix"
		grep -q "^# HELP $n " <<<"$M" || fail "$n: no HELP"
		if [[ $n == *_total ]]; then
			grep -qx "# TYPE $n counter" <<<"$M" || fail "$n: not a counter"
		else
			grep -qx "# TYPE $n gauge" <<<"$M" || fail "$n: not a gauge"
		fi
	done
}

@test "every metric equals its field of summary --json, over a real workload" {
	workload "$BATS_TEST_TMPDIR/out"
	local re='^\{"queued":([0-9]+),"running":([0-9]+),"quarantined":\{"total":([0-9]+),"queued":([0-9]+),"started":([0-9]+)\},"unknown":([0-9]+),"unreconciled":\{"total":([0-9]+),"deliverable":([0-9]+),"earlier_session":([0-9]+),"refused":([0-9]+)\},"receipts":([0-9]+),"oldest_unreconciled_ms":([0-9]+),"handed_back":\{"acknowledged":([0-9]+),"pending":([0-9]+)\},"unreconciled_attempts":([0-9]+),"output":\{"files":([0-9]+),"bytes":([0-9]+)\}\}$'
	local before after
	before=$(date +%s%3N)
	json=$(exec-inspect summary --json)
	M=$(exec-inspect metrics)
	after=$(date +%s%3N)
	[[ $json =~ $re ]] || fail "summary --json has another shape: $json"
	local -a v=("${BASH_REMATCH[@]}")
	run promtool check metrics <<<"$M"
	assert_success
	assert_output ''
	assert_equal "$(metric execkit_runs_queued)" "${v[1]}"
	assert_equal "$(metric execkit_runs_running)" "${v[2]}"
	assert_equal "$(metric 'execkit_runs_quarantined{state="queued"}')" "${v[4]}"
	assert_equal "$(metric 'execkit_runs_quarantined{state="started"}')" "${v[5]}"
	assert_equal "$(metric execkit_runs_unknown)" "${v[6]}"
	assert_equal "$(metric 'execkit_unreconciled_results{cause="deliverable"}')" "${v[8]}"
	assert_equal "$(metric 'execkit_unreconciled_results{cause="earlier_session"}')" "${v[9]}"
	assert_equal "$(metric 'execkit_unreconciled_results{cause="refused"}')" "${v[10]}"
	assert_equal "$(metric execkit_receipts)" "${v[11]}"
	assert_equal "$(metric 'execkit_runs_handed_back{state="acknowledged"}')" "${v[13]}"
	assert_equal "$(metric 'execkit_runs_handed_back{state="pending"}')" "${v[14]}"
	assert_equal "$(metric execkit_unreconciled_attempts)" "${v[15]}"
	assert_equal "$(metric execkit_output_files)" "${v[16]}"
	assert_equal "$(metric execkit_output_bytes)" "${v[17]}"
	[ "${v[16]}" -gt 0 ]   # the workload's runs left their captured output
	# The workload leaves one of each (workload.bash), so nothing above is a 0 = 0.
	assert_equal "${v[1]} ${v[2]} ${v[4]} ${v[6]} ${v[8]} ${v[9]} ${v[10]}" "1 1 1 1 1 1 1"
	[ "${v[11]}" -ge 4 ]
	# Attempts: the sum over every retained result, refused ones included.
	assert_equal "${v[15]}" "$( { exec-inspect list retained --json; exec-inspect list refused --json; } |
		grep -o '"attempts":[0-9]*' | cut -d: -f2 | awk '{ s += $1 } END { print s + 0 }')"
	[ "${v[15]}" -ge 3 ]
	# The ages are the snapshot's time minus the oldest chosen_at, refused
	# results apart (the workload's refused ref1 is the oldest of all).
	local unrefused refused
	unrefused=$(sql "SELECT min(chosen_at) FROM results WHERE refused = 0")
	refused=$(sql "SELECT min(chosen_at) FROM results WHERE refused <> 0")
	assert_equal "${v[12]}" "$(( refused < unrefused ? refused : unrefused ))"
	in_window "$(metric execkit_oldest_unreconciled_age_seconds)" "$unrefused" "$before" "$after"
	in_window "$(metric execkit_oldest_refused_age_seconds)" "$refused" "$before" "$after"
	# The counters agree with what the workload did.
	assert_equal "$(metric execkit_results_refused_total)" 1
	assert_equal "$(metric 'execkit_runs_finished_total{outcome="unknown"}')" 1
	assert_equal "$(metric execkit_results_delivered_total)" "$(sql "SELECT count(*) FROM receipts")"
	[ "$(metric execkit_runs_accepted_total)" -gt "$(metric execkit_runs_started_total)" ]
	[ "$(metric execkit_delivery_attempts_total)" -ge "$(( v[15] + $(metric execkit_results_delivered_total) ))" ]
	[ "$(metric execkit_reconcile_passes_total)" -ge 1 ]
}

@test "metrics writes nothing to the state" {
	start_dispatcher
	open_session
	spec r1 | exec-accept >/dev/null
	exec-run start --wait >/dev/null 2>&1 || true
	before=$(sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal 2>/dev/null)
	exec-inspect metrics >/dev/null
	exec-inspect metrics --output "$BATS_TEST_TMPDIR/m.prom"
	assert_equal "$(sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal 2>/dev/null)" "$before"
}

@test "--output replaces the file atomically: mode 0644, a new inode, no temporary left, never a part" {
	start_dispatcher
	open_session
	local dir=$BATS_TEST_TMPDIR/textfile f ino
	mkdir "$dir"
	f=$dir/execkit.prom
	(umask 077 && exec-inspect metrics --output "$f")
	assert_equal "$(stat -c %a "$f")" 644
	ino=$(stat -c %i "$f")
	exec-inspect metrics --output "$f"
	[ "$(stat -c %i "$f")" != "$ino" ] || fail "the file was rewritten in place, not replaced"
	# A reader racing 100 writers sees whole files only: the file's last
	# line is always the last metric.  (Read by the shell itself, every
	# few ms, rather than by two processes back to back: the writers, not
	# the reader, should have the machine.)
	for _ in $(seq 1 100); do exec-inspect metrics --output "$f"; done &
	local writer=$! reads=0 lines last
	while kill -0 "$writer" 2>/dev/null && [ "$reads" -lt 5000 ]; do
		mapfile -t lines <"$f"
		last=
		[ "${#lines[@]}" -eq 0 ] || last=${lines[-1]}
		[[ $last =~ ^execkit_reconcile_passes_total\ [0-9] ]] ||
			fail "a reader saw a partial file: its last line is '$last'"
		reads=$((reads + 1))
		sleep 0.005
	done
	[ "$reads" -gt 0 ] || fail "the reader never ran beside the writers"
	wait "$writer"
	run promtool check metrics <"$f"
	assert_success
	assert_equal "$(ls -A "$dir")" execkit.prom
}

@test "--output into a missing directory fails with 73 and leaves no file" {
	start_dispatcher
	open_session
	run --separate-stderr exec-inspect metrics --output "$BATS_TEST_TMPDIR/no/such/dir/m.prom"
	[ "$status" -eq "$EK_CANTCREAT" ]
	[ -z "$output" ]
	[[ $stderr == "exec-inspect: "* ]]
	[ ! -e "$BATS_TEST_TMPDIR/no" ]
}

@test "usage: --output goes with metrics only, metrics has no --json" {
	run exec-inspect summary --output "$BATS_TEST_TMPDIR/x"
	[ "$status" -eq "$EK_USAGE" ]
	run exec-inspect metrics --json
	[ "$status" -eq "$EK_USAGE" ]
	run exec-inspect metrics extra
	[ "$status" -eq "$EK_USAGE" ]
}

# metrics_now: the current metrics in $M.
metrics_now() { M=$(exec-inspect metrics); }

# in_window AGE CHOSEN BEFORE AFTER: AGE (s) is a snapshot taken between
# BEFORE and AFTER (ms) minus CHOSEN (ms), to the second.
in_window() {
	awk -v a="$1" -v lo="$(( ($3 - $2) / 1000 - 1 ))" -v hi="$(( ($4 - $2) / 1000 + 1 ))" \
		'BEGIN { exit !(a > 0 && a >= lo && a <= hi) }' ||
		fail "age $1 not within [$(( ($3 - $2) / 1000 )), $(( ($4 - $2) / 1000 ))]"
}

@test "the counters count each run once, by outcome, and never go down when rows are released" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec a1)" "$(spec a2 /bin/sh '["-c","exit 3"]')" "$(spec a3 /nonexistent/program)" \
		"$(spec a4 /bin/true '[]' '"due_at":9999999999999')"
	exec-run start --wait >/dev/null 2>&1 || true
	metrics_now
	assert_equal "$(metric execkit_runs_accepted_total)" 4
	assert_equal "$(metric execkit_runs_started_total)" 3
	assert_equal "$(metric 'execkit_runs_finished_total{outcome="exited"}')" \
		"$(sql "SELECT count(*) FROM receipts WHERE outcome = 'exited'")"
	assert_equal "$(( $(metric 'execkit_runs_finished_total{outcome="exited"}') + \
		$(metric 'execkit_runs_finished_total{outcome="exec_failed"}') ))" 3
	assert_equal "$(metric execkit_results_delivered_total)" 3
	assert_equal "$(metric execkit_delivery_attempts_total)" 3
	# A result the dispatcher refuses; one that waits, then goes in a pass.
	spec r1 | exec-accept >/dev/null                # unknown to the dispatcher
	exec-run start --wait >/dev/null 2>&1 || true
	fault 5xx 100
	submit_and_accept "$(spec w1)"
	exec-run start --wait --budget-ms 200 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	run exec-reconcile
	assert_success
	metrics_now
	local before
	before=$(grep '_total' <<<"$M" | grep -v '^#')
	assert_equal "$(metric execkit_results_refused_total)" 1
	assert_equal "$(metric execkit_results_delivered_total)" 4
	assert_equal "$(metric execkit_reconcile_passes_total)" 1
	# (at least: an attempt taken back because its budget ended before the
	# send still counts, as begun)
	[ "$(metric execkit_delivery_attempts_total)" -ge \
		"$(( 3 + $(sql "SELECT attempts FROM results WHERE run_id = 'r1'") + $(sql "SELECT attempts FROM receipts WHERE run_id = 'w1'") ))" ]
	# Release every row they counted: not one counter moves.
	exec-reconcile --prune-receipts 0s >/dev/null
	exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/ev.jsonl" >/dev/null
	assert_equal "$(sql "SELECT count(*) FROM receipts") $(sql "SELECT count(*) FROM results")" "0 0"
	metrics_now
	assert_equal "$(grep '_total' <<<"$M" | grep -v '^#')" "$before"
	assert_equal "$(metric execkit_receipts)" 0
	# and nothing makes one go down
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE counters SET value = 0 WHERE name = 'accepted'"
	assert_failure
	assert_output --partial "a counter never goes down"
}

@test "refused evidence has its own age: the unreconciled age clears once the deliverable ones are delivered" {
	start_dispatcher
	open_session
	spec r1 | exec-accept >/dev/null                # refused: unknown to the dispatcher
	exec-run start --wait >/dev/null 2>&1 || true
	fault 5xx 100
	submit_and_accept "$(spec w1)"
	exec-run start --wait --budget-ms 200 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	# both are a second old at least (an event: the clock passing it)
	wait_until '[ "$(sql "SELECT CAST(strftime('"'"'%s'"'"', '"'"'now'"'"') AS INTEGER) * 1000 - max(chosen_at) >= 1000 FROM results")" = 1 ]'
	metrics_now
	awk -v a="$(metric execkit_oldest_unreconciled_age_seconds)" 'BEGIN { exit !(a >= 1) }' || fail "no age for w1"
	awk -v a="$(metric execkit_oldest_refused_age_seconds)" 'BEGIN { exit !(a >= 1) }' || fail "no age for r1"
	exec-reconcile >/dev/null                       # w1 delivered; r1 stays as evidence
	metrics_now
	assert_equal "$(metric execkit_oldest_unreconciled_age_seconds)" 0
	awk -v a="$(metric execkit_oldest_refused_age_seconds)" 'BEGIN { exit !(a >= 1) }' || fail "r1's age is gone"
	assert_equal "$(metric 'execkit_unreconciled_results{cause="refused"}')" 1
}

@test "session up and the heartbeat's age follow exec-session" {
	start_dispatcher
	open_session
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE sessions SET opened_at = opened_at - 600000,
		last_beat_at = last_beat_at - 600000 WHERE status = 'current'"
	metrics_now
	awk -v a="$(metric execkit_last_heartbeat_age_seconds)" 'BEGIN { exit !(a >= 600 && a < 1200) }' ||
		fail "age since the open: $(metric execkit_last_heartbeat_age_seconds)"
	[ "$(exec-session heartbeat)" = current ]
	metrics_now
	awk -v a="$(metric execkit_last_heartbeat_age_seconds)" -v hi="$WAIT_S" 'BEGIN { exit !(a >= 0 && a <= hi) }' ||
		fail "age after a beat: $(metric execkit_last_heartbeat_age_seconds)"
	assert_equal "$(metric execkit_session_up)" 1
	exec-session close >/dev/null
	metrics_now
	assert_equal "$(metric execkit_session_up)" 0
	run promtool check metrics <<<"$M"
	assert_success
}

# The rules' descriptions, as YAML folds them.
rule_text() {
	sed -n "/alert: $1/,/^\$/p" "$SRC/contrib/execkit.rules.yml" | sed -n '/description:/,$p' | sed 1d |
		sed 's/^ *//' | grep . | paste -sd' '
}
unreconciled_text() { rule_text ExecKitResultsUnreconciled; }
session_text() { rule_text ExecKitSessionDown; }

@test "the alert rules pass promtool check rules, and fire and clear on these metrics" {
	run promtool check rules "$SRC/contrib/execkit.rules.yml"
	assert_success
	assert_output --partial "SUCCESS: 2 rules found"
	cat >"$BATS_TEST_TMPDIR/t.yml" <<-YML
	rule_files: ["$SRC/contrib/execkit.rules.yml"]
	evaluation_interval: 1m
	tests:
	  - interval: 1m
	    input_series:
	      - series: 'execkit_oldest_unreconciled_age_seconds{instance="e1"}'
	        values: '0 1000 1060 1120 1180 1240 1300 1360 0 0'
	      - series: 'execkit_session_up{instance="e1"}'
	        values: '1 1 1 0 0 0 0 1 1 1'
	      - series: 'execkit_last_heartbeat_age_seconds{instance="e1"}'
	        values: '5 5 5 5 5 5 5 5 5 5'
	    alert_rule_test:
	      - eval_time: 7m
	        alertname: ExecKitResultsUnreconciled
	        exp_alerts:
	          - exp_labels: { severity: warning, instance: e1 }
	            exp_annotations:
	              summary: "execkit on e1: a result has waited 22m 40s for delivery"
	              description: "$(unreconciled_text)"
	      - { eval_time: 9m, alertname: ExecKitResultsUnreconciled, exp_alerts: [] }
	      - eval_time: 6m
	        alertname: ExecKitSessionDown
	        exp_alerts:
	          - exp_labels: { severity: critical, instance: e1 }
	            exp_annotations:
	              summary: "execkit on e1: no current session, or its heartbeat is stale"
	              description: "$(session_text)"
	      - { eval_time: 8m, alertname: ExecKitSessionDown, exp_alerts: [] }
	YML
	run promtool test rules "$BATS_TEST_TMPDIR/t.yml"
	assert_success
}

@test "the example dashboard is valid JSON and uses only metrics exec-inspect metrics writes, every one of them" {
	local d=$SRC/contrib/grafana-execkit.json used n
	jq -e '.panels | length > 0' "$d" >/dev/null || fail "$d: not a dashboard"
	start_dispatcher
	open_session
	metrics_now
	used=$(jq -r '.. | objects | (.expr?, .definition?) // empty' "$d" | grep -o 'execkit_[a-z_]*' | sort -u)
	for n in $used; do
		grep -q "^# TYPE $n " <<<"$M" || fail "the dashboard uses $n, which exec-inspect metrics does not write"
	done
	for n in $(grep '^# TYPE ' <<<"$M" | cut -d' ' -f3); do
		grep -qx "$n" <<<"$used" || fail "$n is on no panel"
	done
}
