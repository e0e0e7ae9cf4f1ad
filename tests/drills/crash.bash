# The kill -9 drills: one loss (SIGKILL at a named commit point, see
# libcommon/lifecycle.h and doc/recovery.md) per crashing process, many
# seeds per point.  A seed picks how many runs there are, which of them
# are killed, their exit codes, the process that dies (the supervisor,
# exec-report or exec-reconcile) and a transient dispatcher fault before
# the crash.  Each seed ends with the declared action and check-invariants.
#
# DRILL_SEEDS (default 10) seeds per point; the state and the dispatcher
# are kept across the seeds of one point, so every seed is also checked
# against the leftovers of the earlier ones.

load drill

SEEDS=${DRILL_SEEDS:-10}
export SEEDS

setup() {
	start_dispatcher
	open_session
	CRASHES=0
}

# setup_crash POINT CMD...: a kill used to prepare a seed, not counted.
setup_crash() {
	local point=$1 rc=0
	shift
	EXEC_CRASH_AT=$point "$@" >/dev/null 2>&1 </dev/null || rc=$?
	[ "$rc" -eq 137 ] || { echo "setup: '$*' at '$point' exited $rc" >&2; return 1; }
}

# new_runs PREFIX N: N ledger guests with random exit codes, submitted and
# accepted from the dispatcher; their ids in IDS.
new_runs() {
	local i code specs=()
	IDS=()
	for i in $(seq 1 "$2"); do
		IDS+=("$1-$i")
		code=$((RANDOM % 3))   # drawn here: $RANDOM in a $(...) is not the seed's
		specs+=("$(gspec "$1-$i" "$code")")
	done
	submit "${specs[@]}"
	exec-accept --from-dispatcher >/dev/null
}

# pick_victims K: the first K of IDS after a seeded shuffle, into VICTIMS;
# the rest into OTHERS.
pick_victims() {
	local shuffled i keyed=
	for i in "${IDS[@]}"; do keyed+="$RANDOM $i"$'\n'; done
	mapfile -t shuffled < <(printf '%s' "$keyed" | sort -n | cut -d' ' -f2)
	VICTIMS=("${shuffled[@]:0:$1}")
	OTHERS=("${shuffled[@]:$1}")
}

# Make the results of VICTIMS retained with no attempt (a setup kill).
retain_victims() {
	local id
	for id in "${VICTIMS[@]}"; do
		setup_crash retained exec-run supervise "$id"
	done
	exec-run sweep >/dev/null
}

state_of() { val "SELECT CASE WHEN EXISTS (SELECT 1 FROM receipts WHERE run_id='$1') THEN 'acknowledged'
	WHEN EXISTS (SELECT 1 FROM results WHERE run_id='$1' AND refused) THEN 'refused'
	WHEN EXISTS (SELECT 1 FROM results WHERE run_id='$1') THEN 'retained'
	ELSE IFNULL((SELECT state FROM runs WHERE run_id='$1'), 'absent') END"; }

# assert_acked ID: receipted here and ran once.  (That the receipt names the
# dispatcher's record and that it is charged exactly once is the checker's
# 'unacked' and 'charged' rules, run after every seed.)
assert_acked() {
	[ "$(state_of "$1")" = acknowledged ] || { echo "$1 is $(state_of "$1"), not acknowledged" >&2; return 1; }
	[ "$(ran "$1")" = 1 ]
}

# The declared action after a kill: settle what the dead process left
# (sweep), run the rest (start sweeps too), deliver what is retained.
declared_action() {
	local rc=0
	exec-run start --wait --slots 4 >/dev/null || rc=$?
	# 76: a result the dispatcher refused (the refusal point's runs; each
	# run's state is checked after)
	[ "$rc" -eq 0 ] || [ "$rc" -eq "$EK_PROTOCOL" ] || { echo "start --wait exited $rc" >&2; return 1; }
	exec-run sweep >/dev/null
	exec-reconcile --drain >/dev/null
}

finish_seed() {
	check --drained
}

# --- the points -----------------------------------------------------------------

seed_accept() {   # accept-before-commit / accept-after-commit
	local point=$1 s=$2 i n code specs=() before stdin=0 id receipts
	n=$((1 + RANDOM % 3))
	IDS=()
	for i in $(seq 1 "$n"); do
		IDS+=("ac$s-$i")
		code=$((RANDOM % 3))
		specs+=("$(gspec "ac$s-$i" "$code")")
	done
	[ $((RANDOM % 4)) -eq 0 ] && stdin=1
	printf '%s\n' "${specs[@]}" >"$BATS_TEST_TMPDIR/lines"
	before=$(val "SELECT count(*) FROM accepts")
	# baseline witness + the loss
	if [ "$stdin" = 1 ]; then
		crash "$point" sh -c 'exec exec-accept <"$1"' sh "$BATS_TEST_TMPDIR/lines"
	else
		submit "${specs[@]}"
		crash "$point" exec-accept --from-dispatcher
		for id in "${IDS[@]}"; do [ "$(disp_field "$id" state)" = '"offered"' ]; done
	fi
	if [ "$point" = accept-before-commit ]; then
		[ "$(val "SELECT count(*) FROM accepts")" = "$before" ]   # all or nothing: nothing
	else
		[ "$(val "SELECT count(*) FROM accepts")" = $((before + n)) ]   # all
		receipts=$(val "SELECT group_concat(receipt) FROM accepts WHERE run_id LIKE 'ac$s-%'")
	fi
	# declared action: accept again — the same lines, or the same session's feed
	if [ "$stdin" = 1 ]; then
		exec-accept <"$BATS_TEST_TMPDIR/lines" >/dev/null
	else
		exec-accept --from-dispatcher >/dev/null
		for id in "${IDS[@]}"; do [ "$(disp_field "$id" state)" = '"accepted"' ]; done
	fi
	[ "$(val "SELECT count(*) FROM accepts")" = $((before + n)) ]
	if [ "$point" = accept-after-commit ]; then   # the original receipts come back
		[ "$(val "SELECT group_concat(receipt) FROM accepts WHERE run_id LIKE 'ac$s-%'")" = "$receipts" ]
	fi
	declared_action
	for id in "${IDS[@]}"; do
		if [ "$stdin" = 1 ]; then   # the dispatcher never had these runs
			[ "$(val "SELECT refused_cause FROM results WHERE run_id='$id'")" = unknown_run ]
			[ "$(ran "$id")" = 1 ]
		else
			assert_acked "$id"
		fi
	done
}

seed_before_marker() {   # killed before its marker: the run stays queued, then runs once
	local point=$1 s=$2 id
	new_runs "bm$s" $((1 + RANDOM % 4))
	pick_victims $((1 + RANDOM % ${#IDS[@]}))
	for id in "${VICTIMS[@]}"; do
		crash "$point" exec-run supervise "$id"
		# witness: still queued, not started, nothing ran
		[ "$(val "SELECT state || ':' || (started_at IS NULL) FROM runs WHERE run_id='$id'")" = queued:1 ]
		[ "$(ran "$id")" = 0 ]
	done
	declared_action
	for id in "${IDS[@]}"; do assert_acked "$id"; done
}

seed_before_retain() {   # start-marker / after-spawn / result-chosen
	local point=$1 s=$2 id
	new_runs "br$s" $((1 + RANDOM % 4))
	pick_victims $((1 + RANDOM % ${#IDS[@]}))
	for id in "${VICTIMS[@]}"; do
		crash "$point" exec-run supervise "$id"
		# witness: marked started, no result, the supervisor gone
		[ "$(val "SELECT state FROM runs WHERE run_id='$id'")" = started ]
		[ "$(val "SELECT count(*) FROM results WHERE run_id='$id'")" = 0 ]
		case $point in
		start-marker) [ "$(val "SELECT guest_pid IS NULL FROM runs WHERE run_id='$id'")" = 1 ] ;;
		*) [ "$(val "SELECT guest_pid > 0 FROM runs WHERE run_id='$id'")" = 1 ] ;;
		esac
	done
	declared_action
	for id in "${VICTIMS[@]}"; do
		[ "$(state_of "$id")" = unknown ]
		[ "$(disp_reports "$id")" = 0 ]
		if [ "$point" = start-marker ]; then
			[ "$(ran "$id")" = 0 ]
		else   # the orphaned guest finishes on its own, once
			wait_until "[ \"\$(ran $id)\" = 1 ]"
		fi
	done
	for id in "${OTHERS[@]}"; do assert_acked "$id"; done
	# a second start never runs an unknown run again
	exec-run start --wait >/dev/null
	for id in "${VICTIMS[@]}"; do
		[ "$(state_of "$id")" = unknown ]
		[ "$(ran "$id")" -le 1 ]
	done
}

seed_retained() {
	local point=$1 s=$2 id
	new_runs "rt$s" $((1 + RANDOM % 4))
	pick_victims $((1 + RANDOM % ${#IDS[@]}))
	for id in "${VICTIMS[@]}"; do
		crash retained exec-run supervise "$id"
		[ "$(val "SELECT attempts FROM results WHERE run_id='$id'")" = 0 ]   # on disk, never sent
		[ "$(disp_reports "$id")" = 0 ]
	done
	if [ $((RANDOM % 2)) -eq 0 ]; then   # declared action by id, or by a pass
		exec-run sweep >/dev/null
		for id in "${VICTIMS[@]}"; do exec-report "$id" >/dev/null; done
	fi
	declared_action
	for id in "${IDS[@]}"; do assert_acked "$id"; done
	for id in "${VICTIMS[@]}"; do
		[ "$(val "SELECT attempts FROM receipts WHERE run_id='$id'")" = 1 ]
	done
}

# Delivery points: the dying process is the supervisor (its own report),
# exec-report or exec-reconcile.
seed_deliver() {
	local point=$1 s=$2 id how
	how=$((RANDOM % 3))
	[ "$point" = after-report ] && how=0
	if [ "$point" = refusal-before-evidence ]; then
		refusal_runs "$s"
	else
		new_runs "dl$s" $((1 + RANDOM % 4))
	fi
	if [ "$how" = 2 ]; then pick_victims 1; else pick_victims $((1 + RANDOM % ${#IDS[@]})); fi
	# a transient answer before the crash, sometimes (the deliverers' budget is
	# the tests' wait bound: on a loaded machine the retry comes late, not never)
	case $((RANDOM % 4)) in
	0) fault 5xx 1 ;;
	1) if [ "$point" = acked-before-release ] || [ "$point" = after-release ]; then
		fault drop_ack 1   # recorded there, the answer lost: the next attempt is a duplicate
	   fi ;;
	esac
	case $how in
	0) for id in "${VICTIMS[@]}"; do crash "$point" exec-run supervise --budget-ms "$WAIT_MS" "$id"; done ;;
	1) admin DELETE /admin/faults >/dev/null
	   retain_victims
	   [ $((RANDOM % 2)) -eq 0 ] && fault 5xx 1
	   for id in "${VICTIMS[@]}"; do crash "$point" exec-report --budget-ms "$WAIT_MS" "$id"; done ;;
	2) admin DELETE /admin/faults >/dev/null
	   retain_victims
	   crash "$point" exec-reconcile --budget-ms "$WAIT_MS" ;;
	esac
	admin DELETE /admin/faults >/dev/null
	for id in "${VICTIMS[@]}"; do witness_deliver "$point" "$id" "$how"; done
	declared_action
	for id in "${VICTIMS[@]}" "${OTHERS[@]}"; do
		case $id in
		rf*) [ "$(state_of "$id")" = refused ]
		     [ "$(val "SELECT refused_cause FROM results WHERE run_id='$id'")" = "$(cat "$BATS_TEST_TMPDIR/cause")" ]
		     [ "$(disp_charges "$id")" = 0 ]
		     [ "$(ran "$id")" = 1 ] ;;
		*) assert_acked "$id" ;;
		esac
	done
}

# Runs whose reports the dispatcher refuses: unknown to it (accepted from
# stdin), or owned by another executor's session (wrong_session).
refusal_runs() {
	local i n code specs=() other=$BATS_TEST_TMPDIR/other
	IDS=()
	n=$((1 + RANDOM % 4))
	for i in $(seq 1 "$n"); do
		IDS+=("rf$1-$i")
		code=$((RANDOM % 3))
		specs+=("$(gspec "rf$1-$i" "$code")")
	done
	if [ $((RANDOM % 3)) -eq 0 ]; then
		[ -d "$other" ] || exec-session --state-dir "$other" open --dispatcher "$DISP_URL" >/dev/null
		submit "${specs[@]}"
		exec-accept --state-dir "$other" --from-dispatcher >/dev/null   # now owned by the other session
		echo wrong_session >"$BATS_TEST_TMPDIR/cause"
	else
		echo unknown_run >"$BATS_TEST_TMPDIR/cause"
	fi
	printf '%s\n' "${specs[@]}" | exec-accept >/dev/null
}

# What the state must show right after the kill, before any action.
witness_deliver() {
	local point=$1 id=$2 how=$3 owner
	case $point in
	claimed)
		owner=$(val "SELECT claim_owner FROM results WHERE run_id='$id'")
		[ -n "$owner" ]
		if kill -0 "${owner%%:*}" 2>/dev/null; then [ "$(cut -d' ' -f22 "/proc/${owner%%:*}/stat")" != "${owner#*:}" ]; fi
		[ "$(disp_reports "$id")" = 0 ] ;;
	attempt-counted)
		[ "$(val "SELECT attempts FROM results WHERE run_id='$id'")" = 1 ]
		[ "$(disp_reports "$id")" = 0 ] ;;   # counted, never sent
	request-sent)
		[ "$(state_of "$id")" = retained ]
		[ "$(disp_reports "$id")" -ge 1 ] ;;
	acked-before-release)
		[ "$(state_of "$id")" = retained ]   # the ack transaction rolled back
		[ "$(disp_charges "$id")" = 1 ] ;;
	after-release)
		[ "$(state_of "$id")" = acknowledged ]
		[ "$(val "SELECT count(*) FROM results WHERE run_id='$id'")" = 0 ] ;;
	refusal-before-evidence)
		[ "$(state_of "$id")" = retained ]   # not yet marked refused
		[ "$(val "SELECT attempts >= 1 FROM results WHERE run_id='$id'")" = 1 ] ;;
	after-report)
		[ "$(val "SELECT count(*) FROM runs WHERE run_id='$id'")" = 0 ] ;;
	esac
}

# crash_drill POINT: every seed of one point, then the tally.
crash_drill() {
	local point=$1 s fn
	# shellcheck disable=SC2034  # counted by crash() in drill.bash
	CRASHES=0
	case $point in
	accept-*) fn=seed_accept ;;
	before-marker) fn=seed_before_marker ;;
	start-marker|after-spawn|result-chosen) fn=seed_before_retain ;;
	retained) fn=seed_retained ;;
	*) fn=seed_deliver ;;
	esac
	local salt
	salt=$(printf '%s' "$point" | cksum | cut -d' ' -f1)
	for s in $(seq 1 "$SEEDS"); do
		RANDOM=$(((s * 7919 + salt) % 1000003))
		echo "seed $s of $point" >&2   # shown if the test fails
		exec-session heartbeat >/dev/null   # as the loop would, once a round
		# No '||' here: a failing assert inside must end the test (set -e).
		"$fn" "$point" "$s"
		finish_seed
	done
	note_crashes "$point" "$SEEDS"
}

# The last test of a file: assert_tally POINTS.  Each of the file's POINTS
# seeded points ran, and every seed of each killed at least one process
# (a seed picks one victim or more): at least POINTS x SEEDS crashes, with
# no violation.
assert_tally() {
	local points=$1 total
	[ -f "$BATS_FILE_TMPDIR/crashes" ] || { echo "no crash tally: did the drills run?" >&2; return 1; }
	total=$(awk '{ n += $3 } END { print n + 0 }' "$BATS_FILE_TMPDIR/crashes")
	echo "# $(wc -l <"$BATS_FILE_TMPDIR/crashes") crash points, $total crashes, 0 violations" >&3
	[ "$(wc -l <"$BATS_FILE_TMPDIR/crashes")" -eq "$points" ] || { echo "$points points wanted" >&2; return 1; }
	[ "$total" -ge $((points * SEEDS)) ] || { echo "$total crashes, fewer than $points x $SEEDS seeds" >&2; return 1; }
}
