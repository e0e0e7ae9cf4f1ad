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
		execkit_oldest_unreconciled_age_seconds execkit_receipts; do
		[ "$(metric "$s")" = 0 ] || fail "$s: '$(metric "$s")'"
	done
	# every family has its HELP and TYPE, and every name the execkit_ prefix
	for n in $(grep -v '^#' <<<"$M" | sed 's/[{ ].*//' | sort -u); do
		[[ $n == execkit_* ]] || fail "$n: no execkit_ prefix"
		grep -q "^# HELP $n " <<<"$M" || fail "$n: no HELP"
		grep -qx "# TYPE $n gauge" <<<"$M" || fail "$n: no TYPE"
	done
}

@test "every metric equals its field of summary --json, over a real workload" {
	workload "$BATS_TEST_TMPDIR/out"
	local re='^\{"queued":([0-9]+),"running":([0-9]+),"quarantined":\{"total":([0-9]+),"queued":([0-9]+),"started":([0-9]+)\},"unknown":([0-9]+),"unreconciled":\{"total":([0-9]+),"deliverable":([0-9]+),"earlier_session":([0-9]+),"refused":([0-9]+)\},"receipts":([0-9]+),"oldest_unreconciled_ms":([0-9]+),"handed_back":\{"acknowledged":([0-9]+),"pending":([0-9]+)\},"unreconciled_attempts":([0-9]+),"output":\{"files":([0-9]+),"bytes":([0-9]+)\}\}$'
	local before after now
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
	# The age is the snapshot's time minus the oldest chosen_at.
	awk -v a="$(metric execkit_oldest_unreconciled_age_seconds)" -v lo="$(( (before - v[12]) / 1000 - 1 ))" \
		-v hi="$(( (after - v[12]) / 1000 + 1 ))" 'BEGIN { exit !(a > 0 && a >= lo && a <= hi) }' ||
		fail "age $(metric execkit_oldest_unreconciled_age_seconds) not within [$(( (before - v[12]) / 1000 )), $(( (after - v[12]) / 1000 ))]"
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
	local dir=$BATS_TEST_TMPDIR/textfile f i ino
	mkdir "$dir"
	f=$dir/execkit.prom
	(umask 077 && exec-inspect metrics --output "$f")
	assert_equal "$(stat -c %a "$f")" 644
	ino=$(stat -c %i "$f")
	exec-inspect metrics --output "$f"
	[ "$(stat -c %i "$f")" != "$ino" ] || fail "the file was rewritten in place, not replaced"
	# A reader racing 100 writers sees whole files only.
	for i in $(seq 1 100); do exec-inspect metrics --output "$f"; done &
	local writer=$! reads=0
	while kill -0 "$writer" 2>/dev/null && [ "$reads" -lt 5000 ]; do
		tail -n 1 "$f" | grep -q '^execkit_output_bytes [0-9]' ||
			fail "a reader saw a partial file"
		reads=$((reads + 1))
	done
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
