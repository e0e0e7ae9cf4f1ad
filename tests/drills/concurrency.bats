#!/usr/bin/env bats
# Many tools at once on one state directory, right after (and while) a
# process is killed holding the write lock: every write takes the lock with
# BEGIN IMMEDIATE under a busy timeout, so nobody ever sees SQLITE_BUSY.
#
# CONC_WORKERS (default 8) invocations at a time, CONC_OPS (default 60)
# operations each.

load drill

export CONC_OPS=${CONC_OPS:-60}

# worker W: CONC_OPS operations of the real tools, in a fixed mix; every
# failure is logged as "W I OP STATUS: stderr".
worker() {
	local w=$1 i op rc
	gspec "c$w-0" >"$BATS_TEST_TMPDIR/in.$w"   # first accepted by a "duplicate" op
	for i in $(seq 1 "$CONC_OPS"); do
		rc=0
		case $((i % 6)) in
		0) op=accept
		   gspec "c$w-$i" >"$BATS_TEST_TMPDIR/in.$w"
		   exec-accept <"$BATS_TEST_TMPDIR/in.$w" >/dev/null 2>"$BATS_TEST_TMPDIR/err.$w" || rc=$? ;;
		1) op=report; exec-session report --json >/dev/null 2>"$BATS_TEST_TMPDIR/err.$w" || rc=$? ;;
		2) op=sweep; exec-run sweep >/dev/null 2>"$BATS_TEST_TMPDIR/err.$w" || rc=$? ;;
		3) op=heartbeat   # (bounded by the tests' wait, not 5 s: load only slows the dispatcher)
		   exec-session heartbeat --timeout-ms "$WAIT_MS" >/dev/null 2>"$BATS_TEST_TMPDIR/err.$w" || rc=$? ;;
		4) op=duplicate   # the same line again: a read and an idempotent write
		   exec-accept <"$BATS_TEST_TMPDIR/in.$w" >/dev/null 2>"$BATS_TEST_TMPDIR/err.$w" || rc=$? ;;
		5) op=reconcile; exec-reconcile >/dev/null 2>"$BATS_TEST_TMPDIR/err.$w" || rc=$? ;;
		esac
		if [ "$w" = 1 ] && [ $((i % 25)) = 0 ]; then   # a kill -9 inside a write, now and then
			op=killed-accept
			gspec "k$w-$i" >"$BATS_TEST_TMPDIR/kin"
			EXEC_CRASH_AT=accept-before-commit exec-accept <"$BATS_TEST_TMPDIR/kin" >/dev/null 2>&1 || rc=$?
			[ "$rc" = 137 ] && rc=0
		fi
		if [ "$rc" != 0 ] || grep -qi "busy\|locked" "$BATS_TEST_TMPDIR/err.$w"; then
			echo "$w $i $op $rc: $(head -c 300 "$BATS_TEST_TMPDIR/err.$w")" >>"$BATS_TEST_TMPDIR/failures"
		fi
	done
}

hammer() {
	local w pids=() n=${CONC_WORKERS:-8}
	# the loss first: a writer killed holding the write lock, with frames in the WAL
	gspec dead >"$BATS_TEST_TMPDIR/dead"
	rc=0
	EXEC_CRASH_AT=accept-before-commit exec-accept <"$BATS_TEST_TMPDIR/dead" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 137 ]
	# right after it: N writers and readers at once
	for w in $(seq 1 "$n"); do
		worker "$w" &
		pids+=($!)
	done
	for w in "${pids[@]}"; do wait "$w"; done
	if [ -f "$BATS_TEST_TMPDIR/failures" ]; then
		cat "$BATS_TEST_TMPDIR/failures" >&2
		return 1
	fi
	# every committed accept is there exactly once, the killed ones not at all
	[ "$(val "SELECT count(*) FROM accepts")" = $((n * ($CONC_OPS / 6 + 1))) ]
	[ "$(val "SELECT count(*) FROM accepts WHERE run_id LIKE 'k%' OR run_id = 'dead'")" = 0 ]
	[ "$(val 'PRAGMA integrity_check')" = ok ]
	echo "# $n invocations at a time x $CONC_OPS operations, after a kill -9 in a write: 0 SQLITE_BUSY" >&3
}

@test "8 concurrent invocations x $CONC_OPS operations, right after a kill -9 holding the write lock: no SQLITE_BUSY, no lost write" {
	start_dispatcher
	open_session
	in_child hammer
	check
}

# cancel_one RUN SID I: a cancel of RUN, its output and then its status
# ("status N") into $BATS_TEST_TMPDIR/cancel.RUN.I.
cancel_one() {
	local rc=0
	exec-run cancel "$1" --session "$2" >"$BATS_TEST_TMPDIR/cancel.$1.$3" 2>&1 || rc=$?
	echo "status $rc" >>"$BATS_TEST_TMPDIR/cancel.$1.$3"
}

# cancel_pair RUN SID [paused]: two cancels of RUN at once.  With
# "paused", the first stops once it has marked the run (EXEC_PAUSE_AT
# cancel-marked) and goes on only when the second has ended: the widest
# window, where the second chooses, delivers and is acknowledged between
# the first one's mark and its choice.  Without, they race as they come.
cancel_pair() {
	local p1 p2 paused=
	EXEC_PAUSE_AT=${3:+cancel-marked} cancel_one "$1" "$2" 1 &
	p1=$!
	[ -z "${3:-}" ] || wait_until "paused=\$(pgrep -P $p1 -x exec-run) && stopped \$paused"
	cancel_one "$1" "$2" 2 &
	p2=$!
	if [ -n "$paused" ]; then
		wait "$p2"
		kill -CONT "$paused"
	fi
	wait "$p1" "$p2"
}

# ended_once RUN: both cancels of RUN ended well: each chose the result or
# found it chosen (exit 0), or came when the execution row was gone (66).
ended_once() {
	local i
	for i in 1 2; do
		grep -qx "status 0" "$BATS_TEST_TMPDIR/cancel.$1.$i" && continue
		grep -qx "status $EK_NOINPUT" "$BATS_TEST_TMPDIR/cancel.$1.$i" &&
			grep -q "already ended" "$BATS_TEST_TMPDIR/cancel.$1.$i" && continue
		echo "$1: $(cat "$BATS_TEST_TMPDIR/cancel.$1.$i")"
		return 1
	done
}

@test "two cancels racing on each of 40 queued runs: one result each, never a refused second" {
	local i n=40 sid specs=()
	start_dispatcher
	open_session
	for i in $(seq 1 "$n"); do specs+=("$(gspec "x$i")"); done
	submit "${specs[@]}"
	exec-accept --from-dispatcher --max "$n" >/dev/null
	[ "$(val "SELECT count(*) FROM runs WHERE state = 'queued'")" = "$n" ]
	sid=$(current_session)
	# every other run with the widest window, the rest as they come
	for i in $(seq 1 "$n"); do
		if ((i % 2)); then cancel_pair "x$i" "$sid" paused; else cancel_pair "x$i" "$sid"; fi
	done
	for i in $(seq 1 "$n"); do
		ended_once "x$i"
		# one body reported (a second, refused as a conflict, would be another)
		[ "$(disp_hashes "x$i" | sort -u | wc -l)" = 1 ] || fail "x$i: $(disp_hashes "x$i" | sort -u | wc -l) result bodies"
		[ "$(disp_charges "x$i")" = 1 ]
	done
	[ "$(val "SELECT count(*) FROM results")" = 0 ]   # none left behind, none refused
	[ "$(val "SELECT count(*) FROM receipts WHERE outcome = 'cancelled'")" = "$n" ]
	[ ! -f "$LEDGER" ]   # no guest ran
	check
}
