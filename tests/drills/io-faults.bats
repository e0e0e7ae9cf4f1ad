#!/usr/bin/env bats
# Loss of the disk under the state: full, or failing writes and syncs.
# Declared outcome: a clear error (exit 74, the cause named); a commit is
# all or nothing; nothing is reported to the dispatcher that is not on disk;
# once the disk works again, so does the executor — the run whose result
# could not be retained is unknown, never run again.

load drill

teardown() {
	drill_teardown
	if [ -f "$BATS_TEST_TMPDIR/mounts" ]; then
		while read -r m; do umount -l "$m" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/mounts"
	fi
}

# The run g1 started by a supervisor under libfiu, its guest waiting at $GO.
gated_under_fiu() {
	start_dispatcher
	open_session
	submit "$(gspec g1 0 1)"
	exec-accept --from-dispatcher >/dev/null
	fiu_start exec-run supervise g1
	wait_until '[ "$(val "SELECT guest_pid > 0 FROM runs WHERE run_id = '\''g1'\''")" = 1 ]'
}

# After a failed retain: nothing sent, then the declared action.
after_failed_retain() {
	local diag=$1
	[ "$FIU_STATUS" -eq "$EK_IOERR" ] || { cat "$BATS_TEST_TMPDIR/fiu.err"; false; }
	grep -q "exec-run: .*state.db: .*$diag" "$BATS_TEST_TMPDIR/fiu.err"
	[ "$(ran g1)" = 1 ]
	[ "$(disp_reports g1)" = 0 ]                       # nothing reported
	# declared action (the disk works again): sweep, deliver what is on disk
	exec-run sweep >/dev/null
	exec-reconcile --drain >/dev/null
	case $(val "SELECT count(*) FROM receipts WHERE run_id = 'g1'") in
	1) [ "$(disp_charges g1)" = 1 ] ;;                 # the commit had reached the file after all
	*) [ "$(val "SELECT state FROM runs WHERE run_id = 'g1'")" = unknown ]
	   [ "$(disp_charges g1)" = 0 ] ;;
	esac
	# and it works again: a new run runs once and is delivered
	submit "$(gspec g2)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --wait >/dev/null
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'g2'")" = 1 ]
	exec-run start --wait >/dev/null
	[ "$(ran g1)" = 1 ]
	check --drained
}

@test "disk full during retain (a 1 MiB tmpfs): clear error, nothing reported, works once space is freed" {
	[ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root; the ENOSPC drill below covers this without it"
	fs=$BATS_TEST_TMPDIR/fs
	mkdir -p "$fs"
	mount -t tmpfs -o size=1m,mode=0700 tmpfs "$fs" || skip "cannot mount a tmpfs here"
	echo "$fs" >>"$BATS_TEST_TMPDIR/mounts"
	EXEC_STATE_DIR=$fs/state
	start_dispatcher
	open_session
	# the guest fills the disk that holds the state, then exits 0
	submit "{\"run_id\":\"full\",\"txn_id\":\"t\",\"program\":\"/bin/sh\",\"args\":[\"-c\",\"echo full >> $LEDGER; dd if=/dev/zero of=$fs/filler bs=4096 2>/dev/null; exit 0\"]}"
	exec-accept --from-dispatcher >/dev/null
	run exec-run supervise full
	[ "$status" -eq "$EK_IOERR" ]
	assert_output --partial "database or disk is full"
	[ "$(ran full)" = 1 ]
	[ "$(val "SELECT count(*) FROM results")" = 0 ]     # nothing half-written
	[ "$(disp_reports full)" = 0 ]                      # nothing reported that is not on disk
	run exec-run sweep                                  # still full: it says so, changes nothing
	[ "$status" -eq "$EK_IOERR" ] || [ "$status" -eq 0 ]
	# declared action: free the space
	rm -f "$fs/filler"
	exec-run sweep >/dev/null
	[ "$(val "SELECT state FROM runs WHERE run_id = 'full'")" = unknown ]
	submit "$(gspec after)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --wait >/dev/null
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'after'")" = 1 ]
	[ "$(ran full)" = 1 ]
	check --drained
}

@test "no space (ENOSPC from write, libfiu) during retain: clear error, nothing reported, unknown, never re-run" {
	gated_under_fiu
	fiu_enable posix/io/rw/pwrite 28
	touch "$GO"
	fiu_wait
	after_failed_retain "database or disk is full"
	[ "$(val "SELECT state FROM runs WHERE run_id = 'g1'")" = unknown ]
}

@test "I/O error on write (libfiu) during retain: clear error, no partial commit, nothing reported" {
	gated_under_fiu
	fiu_enable posix/io/rw/pwrite 5
	touch "$GO"
	fiu_wait
	[ "$(val "SELECT count(*) FROM results")" = 0 ]      # no partial commit
	after_failed_retain "disk I/O error"
	[ "$(val "SELECT state FROM runs WHERE run_id = 'g1'")" = unknown ]
}

@test "I/O error on fsync (libfiu) during retain: clear error, nothing reported by the failing process; the outcome is all or nothing" {
	gated_under_fiu
	fiu_enable posix/io/sync/fdatasync 5
	fiu_enable posix/io/sync/fsync 5
	touch "$GO"
	fiu_wait
	# The frames may have reached the file before the sync failed: a fresh
	# reader finds the whole result or none of it (an unknown commit).
	n=$(val "SELECT count(*) FROM results WHERE run_id = 'g1'")
	[ "$n" = 0 ] || [ "$(val "SELECT outcome || exit_code || attempts FROM results WHERE run_id = 'g1'")" = exited00 ]
	after_failed_retain "disk I/O error"
}

@test "I/O errors on write and on fsync during a batch accept: all of the batch or none; the retry is idempotent" {
	start_dispatcher
	open_session
	for i in 1 2 3 4 5; do gspec "b$i"; echo; done >"$BATS_TEST_TMPDIR/batch"
	run fiu_run "enable name=posix/io/rw/pwrite,failinfo=5" exec-accept <"$BATS_TEST_TMPDIR/batch"
	[ "$status" -eq "$EK_IOERR" ]
	assert_output --partial "disk I/O error"
	[ "$(val "SELECT count(*) FROM accepts") $(val "SELECT count(*) FROM runs")" = "0 0" ]   # none
	run fiu_run "enable name=posix/io/sync/fdatasync,failinfo=5" exec-accept <"$BATS_TEST_TMPDIR/batch"
	[ "$status" -eq "$EK_IOERR" ]
	assert_output --partial "disk I/O error"
	# the frames may have reached the file before the sync failed: all or none
	counts=$(val "SELECT count(*) FROM accepts") 
	[ "$counts $(val "SELECT count(*) FROM runs")" = "0 0" ] || [ "$counts $(val "SELECT count(*) FROM runs")" = "5 5" ]
	receipts=$(val "SELECT group_concat(receipt) FROM accepts")
	# declared action: the caller saw an error, so it submits again (the disk works again)
	run exec-accept <"$BATS_TEST_TMPDIR/batch"
	assert_success
	[ "$(val "SELECT count(*) FROM accepts") $(val "SELECT count(*) FROM runs")" = "5 5" ]
	[ "$counts" = 0 ] || [ "$(val "SELECT group_concat(receipt) FROM accepts")" = "$receipts" ]
	[ "$(val 'PRAGMA integrity_check')" = ok ]
}

@test "I/O error while committing an acknowledgement: receipt and release together or not at all; the resend is charged once" {
	start_dispatcher
	open_session
	submit "$(gspec k1)"
	exec-accept --from-dispatcher >/dev/null
	EXEC_CRASH_AT=retained exec-run supervise k1 >/dev/null 2>&1 || true
	exec-run sweep >/dev/null
	fault delay 1 1500                       # the report is held at the dispatcher...
	fiu_start exec-report --budget-ms 5000 k1
	wait_until '[ "$(val "SELECT attempts FROM results WHERE run_id = '\''k1'\''")" = 1 ]'
	fiu_enable posix/io/rw/pwrite 5           # ...while the disk starts failing
	fiu_wait
	[ "$FIU_STATUS" -ne 0 ]
	grep -q "disk I/O error" "$BATS_TEST_TMPDIR/fiu.err"
	[ "$(disp_charges k1)" = 1 ]              # the dispatcher recorded it
	# all or nothing: still retained and no receipt (the ack rolled back)
	[ "$(val "SELECT count(*) FROM results WHERE run_id = 'k1'") $(val "SELECT count(*) FROM receipts WHERE run_id = 'k1'")" = "1 0" ]
	exec-reconcile --drain >/dev/null         # declared action: the resend is a duplicate
	[ "$(val "SELECT count(*) FROM results WHERE run_id = 'k1'") $(val "SELECT count(*) FROM receipts WHERE run_id = 'k1'")" = "0 1" ]
	[ "$(disp_charges k1)" = 1 ]
	check --drained
}
