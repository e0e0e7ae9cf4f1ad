# Shared by every tests/*.bats file.  Each test gets its own state
# directory and its own dispatcher on a free loopback port.

BUILD=${EXECKIT_BUILDDIR:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
SRC=${EXECKIT_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
PATH="$BUILD:$SRC/cmd:$PATH"
export PATH

bats_require_minimum_version 1.5.0

load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load

# Exit codes come from libcommon/err.h (EK_NAME = EX_NAME), resolved through
# the system's sysexits.h: the tests never keep a copy of the numbers.
eval "$(sed -n 's/^[[:space:]]*\(EK_[A-Z]*\) = \(EX_[A-Z]*\),.*/\1 \2/p' "$SRC/libcommon/err.h" |
	while read -r ek ex; do
		printf '%s=%s\n' "$ek" "$(sed -n "s/^#define[[:space:]]*${ex}[[:space:]]*\([0-9]*\).*/\1/p" /usr/include/sysexits.h)"
	done)"

export EXEC_STATE_DIR="$BATS_TEST_TMPDIR/state"
unset EXEC_CRASH_AT

# start_dispatcher [ARGS...]: sets DISP_URL and DISP_PID.
# shellcheck disable=SC2120  # the .bats files pass ARGS
start_dispatcher() {
	local portfile="$BATS_TEST_TMPDIR/disp.port" _
	rm -f "$portfile"
	exec-dispatcher --port 0 --port-file "$portfile" --store "$BATS_TEST_TMPDIR/disp.db" \
		--quiet "$@" >"$BATS_TEST_TMPDIR/disp.log" 2>&1 3>&- &
	DISP_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$portfile" ] && break
		sleep 0.025
	done
	[ -s "$portfile" ] || { cat "$BATS_TEST_TMPDIR/disp.log" >&2; return 1; }
	DISP_URL="http://127.0.0.1:$(cat "$portfile")"
	export DISP_URL DISP_PID
}

stop_dispatcher() {
	if [ -n "${DISP_PID:-}" ]; then
		kill "$DISP_PID" 2>/dev/null || true
		wait "$DISP_PID" 2>/dev/null || true
		DISP_PID=
	fi
}

# Kill whatever this test left running (dispatcher, detached supervisors).
common_teardown() {
	stop_dispatcher
	pkill -KILL -f -- "$BATS_TEST_TMPDIR" 2>/dev/null || true
}

teardown() { common_teardown; }

# An admin call to the dispatcher: admin METHOD PATH [BODY]
admin() {
	curl -sS --max-time 10 -X "$1" "$DISP_URL$2" ${3:+-d "$3"}
}

open_session() {
	exec-session open --dispatcher "$DISP_URL" >/dev/null
}

current_session() {
	exec-session show --json | sed -n 's/.*"session_id":"\([^"]*\)".*"status":"current".*/\1/p'
}

# A read-only query against the real state database.
sql() {
	sqlite3 -readonly -cmd '.timeout 10000' "$EXEC_STATE_DIR/state.db" "$1"
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

# wait_for CMD...: retry CMD for up to 10 s (bounded).
wait_for() {
	local _
	for _ in $(seq 1 200); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
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

# A session with one run submitted and accepted: ready RUN [PROGRAM [ARGS [EXTRA]]]
ready() {
	start_dispatcher
	open_session
	submit_and_accept "$(spec "$@")"
}

# wait_until 'SHELL CONDITION': re-evaluate the condition for up to 10 s.
wait_until() {
	local _
	for _ in $(seq 1 200); do
		eval "$1" && return 0
		sleep 0.05
	done
	echo "timed out waiting until: $1" >&2
	return 1
}
