# Shared by tests/drills/*.bats: loss drills in the seed-001 shape.
#
#   baseline witness → inject ONE loss → declared action → a fresh process
#   observes (check-invariants + specific asserts).
#
# Every guest a drill runs appends its run id to $LEDGER first thing, so
# "no guest ran twice" is a line count.  Processes a drill starts are
# stopped by pid in drill_teardown, never by name.

load ../helpers
leak_scan_off   # the tools' own tests scan for leaks (helpers.bash)

DRILLS=$SRC/tests/drills

# The drills' dispatcher gives leases of an hour unless a test asks for
# less: on a loaded machine a long drill must not lose its session to a
# lapse — that loss is session.bats's own drill, not an accident elsewhere.
eval "helpers_start_dispatcher() $(declare -f start_dispatcher | tail -n +2)"
start_dispatcher() { helpers_start_dispatcher --lease-ms 3600000 "$@"; }
LEDGER=$BATS_TEST_TMPDIR/ledger
GO=$BATS_TEST_TMPDIR/go
PIDS_FILE=$BATS_TEST_TMPDIR/pids
export LEDGER GO DRILLS PIDS_FILE

# gspec ID [EXIT [GATED [SLEEP]]]: a ledger guest that exits with EXIT
# (default 0); GATED=1 makes it wait (bounded by $WAIT_S) for the file $GO
# before exiting; SLEEP (seconds, e.g. 0.1) makes it take that long.
gspec() {
	local script="echo \\\"\$EXEC_RUN_ID\\\" >> $LEDGER"
	[ "${3:-0}" = 1 ] && script="$script; $(guest_wait "$GO")"
	[ -n "${4:-}" ] && script="$script; sleep $4"
	printf '{"run_id":"%s","txn_id":"t-%s","program":"/bin/sh","args":["-c","%s; exit %d"]}' \
		"$1" "$1" "$script" "${2:-0}"
}

# submit SPEC...: put runs at the dispatcher (no acceptance).
submit() {
	local body
	body=$(printf '%s,' "$@")
	admin POST /admin/runs "{\"runs\":[${body%,}]}" >/dev/null
}

# How many times the ledger says ID ran.
ran() {
	if [ -f "$LEDGER" ]; then grep -cx -- "$1" "$LEDGER" || true; else echo 0; fi
}

# The invariant checker as a fresh process: check [CHECKER-OPTIONS...]
check() {
	local out rc=0
	out=$("$DRILLS/check-invariants" --ledger "$LEDGER" "$@" "$EXEC_STATE_DIR" "$DISP_URL" 2>&1) || rc=$?
	# shellcheck disable=SC2034  # bats-assert reads it
	output=$out   # for assert_output after a check
	if [ "$rc" -ne 0 ]; then
		printf '%s\n' "$out" >&2
		return 1
	fi
}

# A SQL value of the state, read by a fresh sqlite3.
# (The sqlite3 shell sets no busy timeout of its own: give it one.)
val() { sqlite3 -cmd ".timeout $WAIT_MS" -readonly "$EXEC_STATE_DIR/state.db" "$1"; }

# crash POINT CMD...: run CMD with EXEC_CRASH_AT=POINT; it must die of
# SIGKILL at that point (status 137).  Counts into $CRASHES.
CRASHES=0
crash() {
	local point=$1 rc=0
	shift
	EXEC_CRASH_AT=$point "$@" >/dev/null 2>&1 </dev/null || rc=$?
	if [ "$rc" -ne 137 ]; then
		echo "expected '$*' to be killed at '$point', it exited $rc" >&2
		return 1
	fi
	CRASHES=$((CRASHES + 1))
}

# remember PID: stopped in teardown.
remember() { echo "$1" >>"$PIDS_FILE"; }

# Stop, by pid, what this test started: remembered pids, the dispatcher, and
# the supervisors and guests the state database names.
drill_teardown() {
	local p
	if [ -f "$PIDS_FILE" ]; then
		while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$PIDS_FILE"
	fi
	kill_recorded
	stop_dispatcher
	return 0
}

teardown() { drill_teardown; }

# The crash tally of a file, read by its last test: note_crashes POINT SEEDS
note_crashes() {
	echo "$1 $2 $CRASHES" >>"$BATS_FILE_TMPDIR/crashes"
	echo "# crash point $1: $2 seeds, $CRASHES crashes, 0 violations" >&3
}

# in_child FUNC [ARGS...]: run a drill function in a child bash with set -e
# and every function of this file, but without bats' per-command DEBUG trap
# (which costs more than the drill itself in long seed loops).  A failing
# command ends the child; the ERR trap names it.
in_child() {
	local defs
	defs=$(declare -f)
	export DISP_URL DISP_PID EXEC_STATE_DIR BATS_TEST_TMPDIR BATS_FILE_TMPDIR SRC BUILD
	export "${!EK_@}"   # the exit codes (helpers.bash), for the child's checks
	bash -c "$defs"'
set -eE
trap '\''echo "drill failed at: $BASH_COMMAND (${FUNCNAME[0]:-top level}, line $LINENO)" >&2'\'' ERR
"$@"' in_child "$@"
}

# The dispatcher's loss and return, on the same port (the executor keeps
# the URL it negotiated with): kill_dispatcher, then restart_dispatcher
# [OPTION...] (exec-dispatcher's own, after the defaults: the same store,
# so the same incarnation, unless a --store follows).
kill_dispatcher() {
	kill -KILL "$DISP_PID"
	wait "$DISP_PID" 2>/dev/null || true
	DISP_PID=
}

restart_dispatcher() {
	local port=${DISP_URL##*:} _
	for _ in $(seq 1 100); do   # the port was just freed; bounded retries
		spawn_dispatcher "$port" --lease-ms 3600000 --quiet "$@" && return 0
		wait "$DISP_PID" 2>/dev/null || true
		sleep 0.05
	done
	echo "dispatcher did not come back on port $port" >&2
	return 1
}

# The dispatcher's count of runs in STATE (queued offered accepted rejected finished).
disp_count() { admin GET /admin/summary | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }

# --- I/O fault injection with libfiu (Debian: fiu-utils, libfiu0) ---------------
#
# fiu_start CMD...: run CMD in the background with libfiu's POSIX wrappers
# preloaded and remote control on (sets FIU_PID); faults are switched on
# later, at the moment a drill chooses, with fiu_enable.  Under
# AddressSanitizer the ASan runtime must come first in LD_PRELOAD, and
# libfiu's own small leak is suppressed (only libfiu's).
fiu_start() {
	local preload="/usr/lib/fiu/fiu_run_preload.so /usr/lib/fiu/fiu_posix_preload.so" asan
	asan=$(ldd "$(command -v "$1")" 2>/dev/null | awk '/libasan/ { print $3 }')
	[ -n "$asan" ] && preload="$asan $preload"
	echo "leak:fiu_run_preload" >"$BATS_TEST_TMPDIR/lsan.supp"
	# No isolation under libfiu: its control thread makes the process a
	# threaded one, which the sanitized build's probe of user namespaces
	# then meets (unshare: EINVAL); these drills are about the disk.
	EXEC_ISOLATION=none FIU_ENABLE='' FIU_CTRL_FIFO="$BATS_TEST_TMPDIR/fiu" LD_PRELOAD="$preload" \
		LSAN_OPTIONS="suppressions=$BATS_TEST_TMPDIR/lsan.supp" \
		"$@" >"$BATS_TEST_TMPDIR/fiu.out" 2>"$BATS_TEST_TMPDIR/fiu.err" &
	FIU_PID=$!
	remember "$FIU_PID"
	wait_until "[ -p '$BATS_TEST_TMPDIR/fiu-$FIU_PID.in' ] || ! kill -0 $FIU_PID 2>/dev/null"
	[ -p "$BATS_TEST_TMPDIR/fiu-$FIU_PID.in" ]
}

# fiu_enable POINT ERRNO: from now on, every call behind POINT in FIU_PID fails with ERRNO.
fiu_enable() {
	fiu-ctrl -f "$BATS_TEST_TMPDIR/fiu" -c "enable name=$1,failinfo=$2" "$FIU_PID"
}

# fiu_wait: the status of the process started by fiu_start.
# shellcheck disable=SC2034  # the io-faults tests read FIU_STATUS
fiu_wait() {
	FIU_STATUS=0
	wait "$FIU_PID" || FIU_STATUS=$?
}

# fiu_run ENABLE CMD...: run CMD in the foreground with ENABLE (libfiu's
# "enable name=...,failinfo=..." list) active from its first instruction.
fiu_run() {
	local enable=$1 preload="/usr/lib/fiu/fiu_run_preload.so /usr/lib/fiu/fiu_posix_preload.so" asan
	shift
	asan=$(ldd "$(command -v "$1")" 2>/dev/null | awk '/libasan/ { print $3 }')
	[ -n "$asan" ] && preload="$asan $preload"
	echo "leak:fiu_run_preload" >"$BATS_TEST_TMPDIR/lsan.supp"
	FIU_ENABLE=$enable FIU_CTRL_FIFO='' LD_PRELOAD="$preload" \
		LSAN_OPTIONS="suppressions=$BATS_TEST_TMPDIR/lsan.supp" "$@"
}
