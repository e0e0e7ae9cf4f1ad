#!/usr/bin/env bats
# Loss of the disk under the state: full, or failing writes and syncs.
# Declared outcome: a clear error (exit 74, the cause named); a commit is
# all or nothing; nothing is reported to the dispatcher that is not on disk;
# once the disk works again, so does the executor — the run whose result
# could not be retained (an I/O error, not a full disk) is unknown, never
# run again.  A full disk only delays a chosen result: the supervisor gives
# the state's reserve back and tries again until there is room.

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

# full_fs SIZE: a tmpfs of SIZE for the state (root only: skip otherwise).
full_fs() {
	[ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root; the ENOSPC drill below covers this without it"
	fs=$BATS_TEST_TMPDIR/fs
	mkdir -p "$fs"
	mount -t tmpfs -o "size=$1,mode=0700" tmpfs "$fs" || skip "cannot mount a tmpfs here"
	echo "$fs" >>"$BATS_TEST_TMPDIR/mounts"
	EXEC_STATE_DIR=$fs/state
}

# The guest that fills the disk under the state, then exits 0 (gated: it
# waits for $GO first when GATED=1).
filler_spec() {
	local script="echo $1 >> $LEDGER"
	[ "${2:-0}" = 1 ] && script="$script; $(guest_wait "$GO")"
	script="$script; dd if=/dev/zero of=$fs/filler-$1 bs=4096 2>/dev/null; exit 0"
	printf '{"run_id":"%s","txn_id":"t-%s","program":"/bin/sh","args":["-c","%s"]}' "$1" "$1" "$script"
}

@test "disk full when a guest ends, no reserve left: the result waits for space, never unknown; once freed, delivered once" {
	full_fs 2m
	start_dispatcher
	open_session
	submit "$(filler_spec full 1)"
	exec-accept --from-dispatcher >/dev/null
	rm -f "$EXEC_STATE_DIR/reserve"                    # the worst case: no reserve to give back
	exec-run supervise full >"$BATS_TEST_TMPDIR/sup.out" 2>"$BATS_TEST_TMPDIR/sup.err" 3>&- &
	local sup=$!
	remember "$sup"
	# the guest's pid is recorded before it fills the disk (else that
	# commit could be the one that finds it full: another drill)
	# shellcheck disable=SC2034 # set and read by the conditions below
	local guest
	wait_until 'guest=$(val "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id = '\''full'\''"); [ "$guest" -gt 0 ]'
	touch "$GO"
	# witness: the guest ran and ended; its result cannot be committed yet
	wait_until '[ "$(ran full)" = 1 ] && [ -e "$fs/filler-full" ]'
	wait_until '[ ! -e "/proc/$guest" ] || [ "$(cut -d" " -f3 "/proc/$guest/stat")" = Z ]'
	wait_until 'grep -q "waits for disk space" "$BATS_TEST_TMPDIR/sup.err"'
	kill -0 "$sup"                                      # still trying, not given up
	[ "$(val "SELECT count(*) FROM results")" = 0 ]      # nothing half-written
	[ "$(val "SELECT state FROM runs WHERE run_id = 'full'")" = started ]   # never unknown
	[ "$(disp_reports full)" = 0 ]                      # nothing reported that is not on disk
	# declared action: free the space
	rm -f "$fs"/filler-*
	wait "$sup"
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'full'")" = 1 ]
	[ "$(disp_charges full)" = 1 ]
	[ "$(ran full)" = 1 ]
	[ "$(val "SELECT count(*) FROM runs WHERE state = 'unknown'")" = 0 ]
	check --drained
}

@test "disk full when a guest ends, the reserve in place: it is given back and the result is delivered at once" {
	full_fs 12m
	start_dispatcher
	open_session
	submit "$(filler_spec fr 1)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start >/dev/null                          # makes the reserve, starts the gated guest
	[ -f "$EXEC_STATE_DIR/reserve" ]
	touch "$GO"                                         # the guest fills the disk, then exits
	wait_until '[ "$(val "SELECT count(*) FROM receipts WHERE run_id = '\''fr'\''")" = 1 ]'
	[ -e "$fs/filler-fr" ]                              # still full: nobody freed anything
	[ ! -e "$EXEC_STATE_DIR/reserve" ]                  # the reserve paid for the commit
	grep -q "released the state's reserve" "$EXEC_STATE_DIR/out/supervisors.log"
	[ "$(disp_charges fr)" = 1 ]
	[ "$(ran fr)" = 1 ]
	# once there is room, the next start makes it again
	rm -f "$fs"/filler-*
	exec-run start >/dev/null
	[ -f "$EXEC_STATE_DIR/reserve" ]
	check --drained
}

@test "no space (ENOSPC from write, libfiu) during retain: the result waits, never unknown; delivered once the disk takes writes" {
	gated_under_fiu
	fiu_enable posix/io/rw/pwrite 28
	touch "$GO"
	wait_until 'grep -q "waits for disk space" "$BATS_TEST_TMPDIR/fiu.err"'
	kill -0 "$FIU_PID"                                  # still trying
	[ "$(disp_reports g1)" = 0 ]
	[ "$(val "SELECT state FROM runs WHERE run_id = 'g1'")" = started ]
	fiu-ctrl -f "$BATS_TEST_TMPDIR/fiu" -c "disable name=posix/io/rw/pwrite" "$FIU_PID"
	fiu_wait
	[ "$FIU_STATUS" -eq 0 ] || { cat "$BATS_TEST_TMPDIR/fiu.err"; false; }
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'g1'")" = 1 ]
	[ "$(disp_charges g1)" = 1 ]
	[ "$(ran g1)" = 1 ]
	check --drained
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

# out_bytes: the bytes of captured output under the state (out/RUN.*).
out_bytes() {
	local f n=0
	for f in "$EXEC_STATE_DIR"/out/*.stdout "$EXEC_STATE_DIR"/out/*.stderr; do
		[ -f "$f" ] && n=$((n + $(stat -c %s "$f")))
	done
	echo "$n"
}

@test "output on a 16 MiB state filesystem: the default quota (a quarter) truncates and flags it; heartbeat and accept go on" {
	full_fs 16m
	start_dispatcher
	open_session
	local specs=() i
	for i in 1 2 3 4; do
		specs+=("{\"run_id\":\"o$i\",\"txn_id\":\"t-o$i\",\"program\":\"/bin/sh\",\"args\":[\"-c\",\"echo o$i >> $LEDGER; head -c 3000000 /dev/zero\"]}")
	done
	submit "${specs[@]}"
	exec-accept --from-dispatcher >/dev/null
	# 4 runs of 3 MB each, 8 MiB allowed a stream: 12 MB would fill the
	# disk the results go to; the quota (4 MiB) stops the output first
	exec-run start --wait --max-output 8388608 >/dev/null
	[ "$(out_bytes)" -le $((4 * 1024 * 1024 + 4 * 256 * 1024)) ] || fail "out/ holds $(out_bytes) bytes"
	run cat "$EXEC_STATE_DIR"/out/*.truncated
	assert_output --partial "past the executor's output quota (4194304 bytes)"
	# every result retained and delivered; the executor goes on
	for i in 1 2 3 4; do
		[ "$(ran "o$i")" = 1 ]
		[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'o$i'")" = 1 ]
	done
	exec-session heartbeat >/dev/null
	submit "$(gspec after)"
	exec-accept --from-dispatcher >/dev/null
	exec-run start --wait >/dev/null
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'after'")" = 1 ]
	# the collector's default keeps half of the quota: an eighth of the disk
	exec-reconcile --output-cap auto >/dev/null
	[ "$(out_bytes)" -le $((2 * 1024 * 1024)) ] || fail "out/ holds $(out_bytes) bytes after collection"
	check --drained
}

@test "a stop while the result waits for disk space: the supervisor gives its run's output back, retains and delivers the result, and ends" {
	full_fs 4m
	start_dispatcher
	open_session
	# the guest's own output fills the disk (no quota, no per-stream cap to speak of)
	submit "{\"run_id\":\"fill\",\"txn_id\":\"t-fill\",\"program\":\"/bin/sh\",\"args\":[\"-c\",\"echo fill >> $LEDGER; $(guest_wait "$GO"); head -c 8000000 /dev/zero; exit 0\"]}"
	exec-accept --from-dispatcher >/dev/null
	rm -f "$EXEC_STATE_DIR/reserve"                    # no reserve to give back
	exec-run supervise --max-output 16777216 --output-quota 0 fill \
		>"$BATS_TEST_TMPDIR/sup.out" 2>"$BATS_TEST_TMPDIR/sup.err" 3>&- &
	local sup=$!
	remember "$sup"
	wait_until '[ "$(val "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id = '\''fill'\''")" -gt 0 ]'
	touch "$GO"
	wait_until 'grep -q "waits for disk space" "$BATS_TEST_TMPDIR/sup.err"'
	[ "$(val "SELECT count(*) FROM results")" = 0 ]
	# the stop: honoured while it waits
	kill -TERM "$sup"
	wait_until '! kill -0 "$sup" 2>/dev/null'
	status=0
	wait "$sup" || status=$?
	[ "$status" -eq 0 ] || fail "supervisor exited $status: $(cat "$BATS_TEST_TMPDIR/sup.err")"
	grep -q "asked to stop while the disk is full: gave its captured output" "$BATS_TEST_TMPDIR/sup.err"
	[ ! -e "$EXEC_STATE_DIR/out/fill.stdout" ]
	# the result is retained (and here delivered): never unknown, never run again
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'fill'") + $(val "SELECT count(*) FROM results WHERE run_id = 'fill'")" != "0 + 0" ]
	[ "$(val "SELECT count(*) FROM runs WHERE state = 'unknown'")" = 0 ]
	exec-run sweep >/dev/null
	exec-reconcile --drain >/dev/null || true
	[ "$(val "SELECT count(*) FROM receipts WHERE run_id = 'fill'")" = 1 ]
	[ "$(disp_charges fill)" = 1 ]
	[ "$(ran fill)" = 1 ]
	check --drained
}
