# Shared by every tests/*.bats file.  Each test gets its own state
# directory and its own dispatcher on a free loopback port.

BUILD=${EXECKIT_BUILDDIR:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
SRC=${EXECKIT_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
PATH="$BUILD:$SRC/cmd:$PATH"
export PATH

bats_require_minimum_version 1.5.0

# make_var NAME: a variable of the build's Makefile, expanded (a directory,
# or what configure chose, such as STATIC_INSPECT).
make_var() {
	(
		unset MAKEFLAGS MFLAGS MAKELEVEL
		make -s -C "$BUILD" --no-print-directory -f - <<<"include Makefile
v: ; @echo \$($1)" v
	)
}

# bats-support and bats-assert, their files sourced here: their load.bash
# forks a dirname for each file, some thirty processes for every test.
for bats_lib in /usr/lib/bats/bats-support/src/{output,error,lang}.bash /usr/lib/bats/bats-assert/src/*.bash; do
	# shellcheck disable=SC1090
	source "$bats_lib"
done
unset bats_lib

# sleep as a builtin (Debian's bash-builtins): the waits below poll every
# 50 ms, and a sleep program for each poll is a fork of a bats shell and an
# exec, milliseconds on these machines.  Without the package, the program.
enable -f /usr/lib/bash/sleep sleep 2>/dev/null || true

# Exit codes come from libcommon/err.h (EK_NAME = EX_NAME), resolved through
# the system's sysexits.h: the tests never keep a copy of the numbers.  Once
# a run, into a file its tests source.
ek_codes=${BATS_RUN_TMPDIR:-$BATS_TEST_TMPDIR}/ek-codes.sh
if [ ! -s "$ek_codes" ]; then
	ek_tmp=$ek_codes.$BASHPID
	sed -n 's/^[[:space:]]*\(EK_[A-Z]*\) = \(EX_[A-Z]*\),.*/\1 \2/p' "$SRC/libcommon/err.h" |
		while read -r ek ex; do
			printf '%s=%s\n' "$ek" "$(sed -n "s/^#define[[:space:]]*${ex}[[:space:]]*\([0-9]*\).*/\1/p" /usr/include/sysexits.h)"
		done >"$ek_tmp" && mv "$ek_tmp" "$ek_codes"
fi
# shellcheck disable=SC1090
source "$ek_codes"

export EXEC_STATE_DIR="$BATS_TEST_TMPDIR/state"
# Guests write their ledgers and markers into the test's directory, which
# their private /tmp and /dev/shm would hide (libcommon/world.h): every
# test lets them write there.  As root, the tests choose userns isolation
# explicitly: root's default runs guests as nobody, who cannot read the
# test's files (tests/guest-world.bats tests that default).
export EXEC_GUEST_WRITABLE=$BATS_TEST_TMPDIR
[ "$EUID" != 0 ] || export EXEC_ISOLATION=userns
unset EXEC_CRASH_AT

# Tests wait on events, never on a fixed time.  Every wait is still bounded,
# by a bound generous enough that a loaded machine (or the sanitizers) only
# makes a passing test slower: WAIT_S seconds, and WAIT_TRIES polls.  The
# same bound caps requests and busy waits that have nothing to time out on.
WAIT_S=${EXECKIT_WAIT_S:-120}
WAIT_TRIES=$((WAIT_S * 40))
WAIT_MS=$((WAIT_S * 1000))
export WAIT_S WAIT_TRIES WAIT_MS

# LeakSanitizer (the sanitized pass: ASAN_OPTIONS detect_leaks=1) scans a
# process's memory at its exit: about half of a sanitized tool's CPU.  A
# leak is found on the first pass through a path, and each tool's paths
# (its options, inputs and errors) are its own file's tests, which keep the
# scan.  The files that compose the tools and repeat those paths many times
# (the loop's and the drills') call leak_scan_off; the dispatcher a test
# starts is scanned everywhere: it runs with ASAN_OPTIONS_SCANNED, the
# options the run was given.
export ASAN_OPTIONS_SCANNED=${ASAN_OPTIONS_SCANNED-${ASAN_OPTIONS-}}
leak_scan_off() { local o=${ASAN_OPTIONS-}; export ASAN_OPTIONS=${o//detect_leaks=1/detect_leaks=0}; }

# The build under test was configured with --enable-sanitizers.
sanitized_build() { grep -q -- --enable-sanitizers "$BUILD/config.status" 2>/dev/null; }

# start_dispatcher [ARGS...]: sets DISP_URL and DISP_PID.  Leases last an
# hour unless ARGS say otherwise: a lapse is a test's subject, never an
# accident of a slow machine.
# shellcheck disable=SC2120  # the .bats files pass ARGS
start_dispatcher() {
	start_dispatcher_in "$BATS_TEST_TMPDIR" --quiet --lease-ms 3600000 "$@"
}

# start_dispatcher_in DIR [OPTION...]: a dispatcher with its store, port
# file and log in DIR and only OPTIONs (the dispatcher's own defaults),
# executors enrolled; sets DISP_URL and DISP_PID.  Its log on stderr if it
# died first.
start_dispatcher_in() {
	local dir=$1
	shift
	DISP_DIR=$dir spawn_dispatcher 0 "$@" || { cat "$dir/disp.log" >&2; return 1; }
	DISP_URL="http://127.0.0.1:$(cat "$dir/disp.port")"
	export DISP_URL
	enroll_executors
}

# stop_dispatcher_ok: SIGTERM the dispatcher and require exit status 0.
stop_dispatcher_ok() {
	[[ -n ${DISP_PID-} ]] || return 0
	kill -TERM "$DISP_PID" 2>/dev/null || true
	wait "$DISP_PID"
	local rc=$?
	DISP_PID=
	return "$rc"
}

# dead_port: a loopback port nothing listens on, below the kernel's
# ephemeral range, so no server started with port 0 (another test's
# dispatcher) can take it while the test counts on it staying unreachable
# (free_port's port can be handed out again at any moment).
dead_port() {
	local p low
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range
	for ((p = 1; p < 1024 && p < low; p++)); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# free_port: a loopback port the kernel just handed a throwaway dispatcher
# (in free/ of the test's directory), for a server the test starts there.
# Call it as $(free_port): the test's own DISP_PID stays as it was.
free_port() {
	local dir=$BATS_TEST_TMPDIR/free
	mkdir -p "$dir"
	DISP_DIR=$dir spawn_dispatcher 0 --quiet || return 1
	kill "$DISP_PID"
	wait "$DISP_PID" || true
	cat "$dir/disp.port"
}

# enroll_executors: an enrollment token for the test's executors (each new
# executor id's first session spends a use), in a 0600 file that
# exec-session open reads through EXEC_ENROLL_TOKEN_FILE.
enroll_executors() {
	local answer
	answer=$(admin POST /admin/enrollments '{"uses":10000}') || return 1
	[[ $answer =~ \"enroll_token\":\"([0-9a-f]+)\" ]] || { echo "enrollment: $answer" >&2; return 1; }
	(umask 077 && printf '%s\n' "${BASH_REMATCH[1]}" >"$BATS_TEST_TMPDIR/enroll-token")
	export EXEC_ENROLL_TOKEN_FILE=$BATS_TEST_TMPDIR/enroll-token
}

# spawn_dispatcher PORT [OPTION...]: an exec-dispatcher on 127.0.0.1:PORT
# (0: one of its choosing, written to disp.port) over the test's store
# (in DISP_DIR if set, else the test's directory), its log appended to
# disp.log there, scanned for leaks as the run asked
# (ASAN_OPTIONS_SCANNED); sets DISP_PID.  0 once it listens, 1 if it died
# first.  Every start of a test's dispatcher goes through here.
spawn_dispatcher() {   # (DISP_WRAP: a command, e.g. setpriv, to start it under)
	local dir=${DISP_DIR:-$BATS_TEST_TMPDIR}
	local portfile="$dir/disp.port" port=$1
	shift
	rm -f "$portfile"
	ASAN_OPTIONS=$ASAN_OPTIONS_SCANNED "${DISP_WRAP[@]}" exec-dispatcher --port "$port" --port-file "$portfile" \
		--store "$dir/disp.db" "$@" >>"$dir/disp.log" 2>&1 3>&- &
	DISP_PID=$!
	export DISP_PID
	# the admin token the dispatcher made beside its store (admin_auth)
	export EXEC_ADMIN_TOKEN_FILE=$dir/disp.db.admin-token
	wait_until '[ -s "$portfile" ] || ! kill -0 "$DISP_PID" 2>/dev/null'
	[ -s "$portfile" ]
}

stop_dispatcher() {
	if [ -n "${DISP_PID:-}" ]; then
		kill "$DISP_PID" 2>/dev/null || true
		wait "$DISP_PID" 2>/dev/null || true
		DISP_PID=
	fi
}

# kill_recorded: SIGKILL the supervisors and the guests' process groups the
# state records, each only while its pid still names the process that was
# started (its recorded start time), never by name.
kill_recorded() {
	local pid start group
	[ -f "$EXEC_STATE_DIR/state.db" ] || return 0
	sqlite3 -readonly "$EXEC_STATE_DIR/state.db" \
		"SELECT sup_pid, sup_start, '' FROM runs WHERE sup_pid > 0
		 UNION ALL SELECT guest_pid, guest_start, '-' FROM runs WHERE guest_pid > 0 AND guest_start > 0" \
		2>/dev/null | while IFS='|' read -r pid start group; do
			# never this test itself (a drill may record its own pid as a supervisor)
			case $pid in "$$" | "$BASHPID" | "$PPID") continue ;; esac
			[ "$(cut -d' ' -f22 "/proc/$pid/stat" 2>/dev/null)" = "$start" ] &&
				kill -KILL -- "$group$pid" 2>/dev/null
			true
		done
}

# kill_loops: SIGKILL each exec-loop still running on the test's state,
# found by its scratch directory (STATE/loop.PID.XXXXXX) and only while
# that pid runs exec-loop: a failed test leaves its loop behind, and its
# command line names no file of the test.
kill_loops() {
	local d pid
	for d in "$EXEC_STATE_DIR"/loop.*.*; do
		[ -d "$d" ] || continue
		pid=${d##*/loop.}
		pid=${pid%%.*}
		[[ $pid =~ ^[0-9]+$ ]] || continue
		grep -qa exec-loop "/proc/$pid/cmdline" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	done
	return 0
}

# Kill whatever this test left running: the dispatcher, what names the
# test's directory on its command line, its loops and what the state
# records.
common_teardown() {
	stop_dispatcher
	# the directory whole: test/3 is a prefix of test/39 (bats -j)
	pkill -KILL -f -- "$BATS_TEST_TMPDIR(/| |\$)" 2>/dev/null || true
	kill_loops
	kill_recorded
}

teardown() { common_teardown; }

# The tests' HTTP client: tests/httpc (make check builds it), curl's
# command line at a tenth of curl's start; curl where it is not built.
HTTPC=$BUILD/tests/httpc
[ -x "$HTTPC" ] || HTTPC=curl
export HTTPC

# admin_auth VAR: the admin API's header line, with the token read from the
# 0600 file the dispatcher made beside the test's store ($BATS_TEST_TMPDIR/
# disp.db.admin-token), into VAR.  Clients send it with -H @- on stdin:
# never on a command line, which every local user can read.
admin_auth() {
	local _tok
	slurp _tok "${EXEC_ADMIN_TOKEN_FILE:-$BATS_TEST_TMPDIR/disp.db.admin-token}"
	printf -v "$1" 'Authorization: Bearer %s' "$_tok"
}

# enroll_token VAR: the test's enrollment token (enroll_executors) into VAR,
# for a test that negotiates by hand.
enroll_token() { slurp "$1" "$BATS_TEST_TMPDIR/enroll-token"; }

# An admin call to the dispatcher: admin METHOD PATH [BODY]
admin() {
	local auth
	admin_auth auth
	"$HTTPC" -sS --max-time "$WAIT_S" -H @- -X "$1" "$DISP_URL$2" ${3:+-d "$3"} <<<"$auth"
}

# (each request bounded by the tests' wait: on a loaded machine a sanitized
# dispatcher has taken longer than the default 5 s to answer)
open_session() {
	exec-session open --dispatcher "$DISP_URL" --timeout-ms "$WAIT_MS" >/dev/null
}

current_session() {
	exec-session show --json | sed -n 's/.*"session_id":"\([^"]*\)".*"status":"current".*/\1/p'
}

# A read-only query against the real state database.
sql() {
	sqlite3 -readonly -cmd ".timeout $WAIT_MS" "$EXEC_STATE_DIR/state.db" "$1"
}

# seed_undeliverable N: N results, straight into the state, that this
# session can never deliver: the odd ones bound to an old session
# (orphaned), the even ones refused (kept as evidence).  Run ids x1..xN.
seed_undeliverable() {
	sqlite3 "$EXEC_STATE_DIR/state.db" <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
SELECT 'x' || i, 't', CASE WHEN i % 2 THEN 'inc-old' ELSE (SELECT incarnation FROM sessions WHERE status='current') END,
       CASE WHEN i % 2 THEN 'ses-old' ELSE (SELECT session_id FROM sessions WHERE status='current') END, '{}', 'r', 0 FROM n;
INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body, refused, refused_cause)
SELECT run_id, incarnation, session_id, 'exited', 0, 'm', 0, x'7b7d', session_id <> 'ses-old', 'unknown_run' FROM accepts WHERE run_id LIKE 'x%';
SQL
}

# spec ID [PROGRAM [ARGS-JSON [EXTRA-JSON-FIELDS]]]: one run spec line.
spec() {
	printf '{"run_id":"%s","txn_id":"t-%s","program":"%s","args":%s%s}\n' \
		"$1" "$1" "${2:-/bin/true}" "${3:-[]}" "${4:+,$4}"
}

# submit_and_accept SPEC...: submit runs to the dispatcher and pull them.
submit_and_accept() {
	local body
	body=$(printf '%s,' "$@")
	admin POST /admin/runs "{\"runs\":[${body%,}]}" >/dev/null
	exec-accept --from-dispatcher >/dev/null
}

# slurp VAR FILE: FILE's content, less its trailing newlines, into VAR, as
# VAR=$(cat FILE) would, without a process; empty if FILE cannot be read.
slurp() {
	local _slurp=
	{ IFS= read -r -d '' _slurp <"$2" || :; } 2>/dev/null
	while [[ $_slurp == *$'\n' ]]; do _slurp=${_slurp%$'\n'}; done
	printf -v "$1" '%s' "$_slurp"
}

# wait_for CMD...: retry CMD until it succeeds, for at most $WAIT_S seconds.
wait_for() {
	local deadline=$((SECONDS + WAIT_S)) n=0
	while :; do
		"$@" && return 0
		((SECONDS < deadline && n++ < WAIT_TRIES)) || return 1
		sleep 0.05
	done
}

# guest_wait FILE: shell text for a guest that waits until FILE exists,
# bounded like the tests' own waits.  A poll is a sleep process: at 0.1 s
# a waiting guest costs a few percent of a core, where at 0.025 s (as
# before) it cost a tenth, and drills keep several waiting at once.
guest_wait() {
	printf 'i=0; while [ ! -e %s ] && [ $i -lt %d ]; do sleep 0.1; i=$((i+1)); done' \
		"$1" $((WAIT_S * 10))
}

# A field of the dispatcher's record of a run: disp_field RUN FIELD
disp_field() {
	admin GET "/admin/runs/$1" | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" | head -1
}

# How many reports / ledger charges the dispatcher holds for a run.
disp_reports() { admin GET "/admin/runs/$1" | grep -o '"seq":' | wc -l; }
disp_charges() { admin GET "/admin/runs/$1" | grep -o '"charge":' | wc -l; }
# The body hashes of every report of a run, one per line.
disp_hashes() { admin GET "/admin/runs/$1" | grep -o '"body_sha256":"[0-9a-f]*"' | cut -d'"' -f4; }

# fault KIND COUNT [DELAY_MS [PATH]]: queue a dispatcher fault.
fault() {
	admin POST /admin/faults "{\"kind\":\"$1\",\"count\":$2,\"delay_ms\":${3:-0},\"path\":\"${4:-/v1/results}\"}" >/dev/null
}


# landlocked: guests are isolated here, their writes held by Landlock
# (exec-run isolation says so); else 1, and WHY says why not.
# shellcheck disable=SC2034 # WHY is the caller's
landlocked() {
	local said
	said=$(exec-run isolation 2>&1)
	WHY=$said
	[ "${said%%:*}" != none ] || return 1
	WHY="no Landlock: $said"
	[[ "$said" == *"write only to"* ]]
}
# A session with one run submitted and accepted: ready RUN [PROGRAM [ARGS [EXTRA]]]
ready() {
	start_dispatcher
	open_session
	submit_and_accept "$(spec "$@")"
}

# stopped PID: the process is stopped (EXEC_PAUSE_AT reached).
stopped() { grep -q '^State:[[:space:]]*T' "/proc/$1/status" 2>/dev/null; }

# wait_until 'SHELL CONDITION': re-evaluate the condition until it holds,
# for at most $WAIT_S seconds.
wait_until() {
	local deadline=$((SECONDS + WAIT_S)) n=0
	while :; do
		eval "$1" && return 0
		((SECONDS < deadline && n++ < WAIT_TRIES)) || break
		sleep 0.05
	done
	echo "timed out after ${WAIT_S} s waiting until: $1" >&2
	return 1
}

# Bats traces every command a test runs, to name the failing line: a DEBUG
# trap that copies the call stack each time, some 150 us a command, paid on
# every command of a helper's loop (a wait's polls, a request's parsing):
# 12% of exec-dispatcher.bats's CPU.  Here only the commands of a test's
# own body, setup and teardown are traced, so a failure inside a helper is
# named at the test's line that called it, as bats does for its own
# libraries.  EXECKIT_FULL_TRACE=1 traces everything again.
# (bats' trap is read back through a file: a command substitution would
# fork the test's shell at every test's start)
lean_trace_file=${BATS_RUN_TMPDIR:-$BATS_TEST_TMPDIR}/debug-trap.$BASHPID
if [ -z "${EXECKIT_FULL_TRACE:-}" ] && [ -z "${lean_trace:-}" ] &&
	declare -f bats_debug_trap >"$lean_trace_file" 2>/dev/null && slurp lean_trace "$lean_trace_file" &&
	[[ $lean_trace == $'bats_debug_trap () \n{ \n'*$'\n}' ]]; then
	lean_trace=${lean_trace#*$'\n{ \n'}
	eval 'bats_debug_trap() {
		case ${FUNCNAME[1]-} in
		"$BATS_TEST_NAME" | setup | teardown | setup_file | teardown_file) ;;
		*) return 0 ;;
		esac
		'"${lean_trace%\}}"'
	}'
fi
