#!/usr/bin/env bats
# exec-inspect metrics: a Prometheus text snapshot of the state for
# node_exporter's textfile collector, with the same figures as
# `exec-inspect summary --json`, replaced atomically, read-only.

load helpers
load workload

setup() {
	command -v promtool >/dev/null || fail "promtool is not installed (Debian package prometheus; scripts/deps.sh installs it)"
}

# metric NAME[{LABELS}]: the value of one series in $M, whose executor
# label (every series has it: the state's executor id) is put in for it.
metric() {
	local id k
	id=$(sql "SELECT value FROM meta WHERE key = 'executor_id'")
	if [[ $1 == *"{"* ]]; then k=${1/\{/\{executor=\"$id\",}; else k="$1{executor=\"$id\"}"; fi
	awk -v k="$k" '$1 == k { print $2; n++ } END { if (n != 1) exit 1 }' <<<"$M"
}

# near_now TIMESTAMP: a Unix time (s) at most $WAIT_S before now.
near_now() {
	awk -v t="$1" -v now="$(date +%s)" -v w="$WAIT_S" 'BEGIN { exit !(t > now - w - 1 && t <= now + 1) }' ||
		fail "timestamp '$1' is not within $WAIT_S s of now"
}

# same_ms SECONDS MS: a metric's Unix seconds equal a stored time in ms.
same_ms() {
	awk -v s="$1" -v ms="$2" 'BEGIN { d = s * 1000 - ms; exit !(d > -1 && d < 1) }' ||
		fail "timestamp $1 s is not $2 ms"
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
		execkit_oldest_unreconciled_timestamp_seconds execkit_oldest_refused_timestamp_seconds execkit_receipts \
		execkit_runs_accepted_total execkit_runs_started_total execkit_results_delivered_total \
		execkit_results_refused_total execkit_delivery_attempts_total execkit_reconcile_passes_total; do
		[ "$(metric "$s")" = 0 ] || fail "$s: '$(metric "$s")'"
	done
	for o in exited killed timeout cancelled exec_failed unknown; do
		[ "$(metric "execkit_runs_finished_total{outcome=\"$o\"}")" = 0 ] || fail "finished $o"
	done
	assert_equal "$(metric execkit_session_up)" 1
	assert_equal "$(metric "execkit_build_info{version=\"$(exec-inspect --version | sed 's/.*(execkit) //')\"}")" 1
	near_now "$(metric execkit_last_heartbeat_timestamp_seconds)"
	near_now "$(metric execkit_metrics_timestamp_seconds)"
	assert_equal "$(metric 'execkit_run_duration_seconds_bucket{le="+Inf"}')" 0
	assert_equal "$(metric execkit_run_duration_seconds_count)" 0
	# every family has its HELP and TYPE (a counter iff its name ends in
	# _total, a histogram's series its _bucket, _sum and _count), every
	# name the execkit_ prefix, and every series the executor label
	for n in $(grep -v '^#' <<<"$M" | sed 's/[{ ].*//' | sort -u); do
		[[ $n == execkit_* ]] || fail "$n: no execkit_ prefix"
		if grep -qx "# TYPE ${n%_*} histogram" <<<"$M"; then
			[[ $n =~ _(bucket|sum|count)$ ]] || fail "$n: not a histogram's series"
			n=${n%_*}
		fi
		grep -q "^# HELP $n " <<<"$M" || fail "$n: no HELP"
		if [[ $n == *_total ]]; then
			grep -qx "# TYPE $n counter" <<<"$M" || fail "$n: not a counter"
		else
			grep -qxE "# TYPE $n (gauge|histogram)" <<<"$M" || fail "$n: not a gauge"
		fi
	done
	run grep -v '^#' <<<"$M"
	refute_output --regexp '^[a-z_]+( |\{[^e]|\{e[^x])'    # a series without the executor label first
}

@test "every metric equals its field of summary --json, over a real workload" {
	workload "$BATS_TEST_TMPDIR/out"
	local re='^\{"queued":([0-9]+),"running":([0-9]+),"quarantined":\{"total":([0-9]+),"queued":([0-9]+),"started":([0-9]+)\},"unknown":([0-9]+),"unreconciled":\{"total":([0-9]+),"deliverable":([0-9]+),"earlier_session":([0-9]+),"refused":([0-9]+)\},"receipts":([0-9]+),"oldest_unreconciled_ms":([0-9]+),"handed_back":\{"acknowledged":([0-9]+),"pending":([0-9]+)\},"unreconciled_attempts":([0-9]+),"output":\{"files":([0-9]+),"bytes":([0-9]+)\},"session":.*,"loop":\{.*\}\}$'
	json=$(exec-inspect summary --json)
	M=$(exec-inspect metrics)
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
	# The oldest chosen_at, refused results apart (the workload's refused
	# ref1 is the oldest of all), as Unix seconds.
	local unrefused refused
	unrefused=$(sql "SELECT min(chosen_at) FROM results WHERE refused = 0")
	refused=$(sql "SELECT min(chosen_at) FROM results WHERE refused <> 0")
	assert_equal "${v[12]}" "$(( refused < unrefused ? refused : unrefused ))"
	same_ms "$(metric execkit_oldest_unreconciled_timestamp_seconds)" "$unrefused"
	same_ms "$(metric execkit_oldest_refused_timestamp_seconds)" "$refused"
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
		[[ $last =~ ^execkit_run_duration_seconds_count\{.*\}\ [0-9] ]] ||
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

@test "refused evidence has its own timestamp: the unreconciled one clears once the deliverable ones are delivered" {
	start_dispatcher
	open_session
	spec r1 | exec-accept >/dev/null                # refused: unknown to the dispatcher
	exec-run start --wait >/dev/null 2>&1 || true
	fault 5xx 100
	submit_and_accept "$(spec w1)"
	exec-run start --wait --budget-ms 200 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	metrics_now
	same_ms "$(metric execkit_oldest_unreconciled_timestamp_seconds)" "$(sql "SELECT chosen_at FROM results WHERE run_id = 'w1'")"
	same_ms "$(metric execkit_oldest_refused_timestamp_seconds)" "$(sql "SELECT chosen_at FROM results WHERE run_id = 'r1'")"
	exec-reconcile >/dev/null                       # w1 delivered; r1 stays as evidence
	metrics_now
	assert_equal "$(metric execkit_oldest_unreconciled_timestamp_seconds)" 0
	same_ms "$(metric execkit_oldest_refused_timestamp_seconds)" "$(sql "SELECT chosen_at FROM results WHERE run_id = 'r1'")"
	assert_equal "$(metric 'execkit_unreconciled_results{cause="refused"}')" 1
}

@test "session up and the heartbeat's time follow exec-session; the snapshot's time moves, the heartbeat's does not" {
	start_dispatcher
	open_session
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE sessions SET opened_at = opened_at - 600000,
		last_beat_at = last_beat_at - 600000 WHERE status = 'current'"
	metrics_now
	same_ms "$(metric execkit_last_heartbeat_timestamp_seconds)" \
		"$(sql "SELECT max(IFNULL(last_beat_at, 0), opened_at) FROM sessions WHERE status = 'current'")"
	# a stalled writer: the heartbeat's time stays where it was, so
	# time() - it grows (an age written by a stalled writer would freeze)
	[ "$(exec-session heartbeat)" = current ]
	metrics_now
	near_now "$(metric execkit_last_heartbeat_timestamp_seconds)"
	assert_equal "$(metric execkit_session_up)" 1
	exec-session close >/dev/null
	metrics_now
	assert_equal "$(metric execkit_session_up)" 0
	run promtool check metrics <<<"$M"
	assert_success
}

@test "the run-duration histogram counts every run that started, in its buckets, and keeps them when rows are released" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec d1)" "$(spec d2 /bin/sh '["-c","exit 3"]')" "$(spec d3 /nonexistent/program)" \
		"$(spec d4)"
	exec-run cancel d4 --session "$(current_session)" >/dev/null   # never started: no duration
	exec-run start --wait >/dev/null 2>&1 || true
	metrics_now
	local durations le expect b sum
	durations=$(sql "SELECT chosen_at - started_at FROM receipts WHERE started_at IS NOT NULL
		UNION ALL SELECT chosen_at - started_at FROM results WHERE started_at IS NOT NULL")
	[ "$(wc -l <<<"$durations")" = 3 ]
	assert_equal "$(metric execkit_run_duration_seconds_count)" 3
	for le in 0.1 0.5 1 5 30 60 300 1800 3600 +Inf; do
		expect=$(awk -v le="$le" '{ if (le == "+Inf" || $1 <= le * 1000) n++ } END { print n + 0 }' <<<"$durations")
		b=$(metric "execkit_run_duration_seconds_bucket{le=\"$le\"}")
		assert_equal "$le: $b" "$le: $expect"
	done
	sum=$(awk '{ s += $1 } END { print s / 1000 }' <<<"$durations")
	awk -v a="$(metric execkit_run_duration_seconds_sum)" -v b="$sum" 'BEGIN { exit !(a - b < 0.001 && b - a < 0.001) }' ||
		fail "sum $(metric execkit_run_duration_seconds_sum), not $sum"
	exec-reconcile --prune-receipts 0s >/dev/null
	local before=$M
	metrics_now
	assert_equal "$(grep run_duration <<<"$M")" "$(grep run_duration <<<"$before")"
}

# The rules' descriptions, as YAML folds them.
rule_text() {
	sed -n "/alert: $1/,/^\$/p" "$SRC/contrib/execkit.rules.yml" | sed -n '/description:/,$p' | sed 1d |
		sed 's/^ *//' | grep . | paste -sd' '
}

@test "the alert rules pass promtool check rules, and fire and clear on these metrics" {
	run promtool check rules "$SRC/contrib/execkit.rules.yml"
	assert_success
	assert_output --partial "SUCCESS: 4 rules found"
	# Timestamps are Unix seconds; in a rule test time() is the evaluation
	# time from 0, so a timestamp of 0..600 is "since the test began".
	cat >"$BATS_TEST_TMPDIR/t.yml" <<-YML
	rule_files: ["$SRC/contrib/execkit.rules.yml"]
	evaluation_interval: 1m
	tests:
	  - interval: 1m
	    input_series:
	      - series: 'execkit_oldest_unreconciled_timestamp_seconds{executor="x1",instance="e1"}'
	        values: '0 10x12 0 0'
	      - series: 'execkit_session_up{executor="x1",instance="e1"}'
	        values: '1 1 1 0 0 0 0 1x8'
	      - series: 'execkit_last_heartbeat_timestamp_seconds{executor="x1",instance="e1"}'
	        values: '0+60x15'
	      - series: 'execkit_metrics_timestamp_seconds{executor="x1",instance="e1"}'
	        values: '0 60 120x13'
	      - series: 'execkit_runs_unknown{executor="x1",instance="e1"}'
	        values: '0 0 1 1 1 0x10'
	    alert_rule_test:
	      - { eval_time: 10m, alertname: ExecKitResultsUnreconciled, exp_alerts: [] }
	      - eval_time: 12m
	        alertname: ExecKitResultsUnreconciled
	        exp_alerts:
	          - exp_labels: { severity: warning, executor: x1, instance: e1 }
	            exp_annotations:
	              summary: "execkit x1 on e1: a result has waited 11m 50s for delivery"
	              description: "$(rule_text ExecKitResultsUnreconciled)"
	      - { eval_time: 15m, alertname: ExecKitResultsUnreconciled, exp_alerts: [] }
	      - eval_time: 6m
	        alertname: ExecKitSessionDown
	        exp_alerts:
	          - exp_labels: { severity: critical, executor: x1, instance: e1 }
	            exp_annotations:
	              summary: "execkit x1 on e1: no current session, or its heartbeat is stale"
	              description: "$(rule_text ExecKitSessionDown)"
	      - { eval_time: 8m, alertname: ExecKitSessionDown, exp_alerts: [] }
	      - eval_time: 10m
	        alertname: ExecKitMetricsStale
	        exp_alerts:
	          - exp_labels: { severity: warning, executor: x1, instance: e1 }
	            exp_annotations:
	              summary: "execkit x1 on e1: its metrics were last written 8m 0s ago"
	              description: "$(rule_text ExecKitMetricsStale)"
	      - { eval_time: 4m, alertname: ExecKitMetricsStale, exp_alerts: [] }
	      - eval_time: 4m
	        alertname: ExecKitRunsUnknown
	        exp_alerts:
	          - exp_labels: { severity: warning, executor: x1, instance: e1 }
	            exp_annotations:
	              summary: "execkit x1 on e1: 1 runs have an unknown outcome"
	              description: "$(rule_text ExecKitRunsUnknown)"
	      - { eval_time: 6m, alertname: ExecKitRunsUnknown, exp_alerts: [] }
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
	used=$(jq -r '.. | objects | (.expr?, .definition?) // empty' "$d" | grep -o 'execkit_[a-z_]*' |
		sed -E 's/(_seconds)_(bucket|sum|count)$/\1/' | sort -u)
	for n in $used; do
		grep -q "^# TYPE $n " <<<"$M" || fail "the dashboard uses $n, which exec-inspect metrics does not write"
	done
	for n in $(grep '^# TYPE ' <<<"$M" | cut -d' ' -f3); do
		grep -qx "$n" <<<"$used" || fail "$n is on no panel"
	done
}
