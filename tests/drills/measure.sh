#!/bin/bash
# measure.sh — the recovery costs quoted in doc/recovery.md, measured here.
#
#   tests/drills/measure.sh [BUILDDIR] [N]      (default: build/, N = 1000)
#
# Starts a reference dispatcher on a free loopback port and works in a
# scratch directory; prints one Markdown table row per measurement.  Every
# loop is bounded; nothing outside the scratch directory is touched.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
n=${2:-1000}
PATH="$build:$top/cmd:$PATH"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/execkit-measure.XXXXXX")
export EXEC_STATE_DIR=$tmp/state
disp=
cleanup() {
	[ -n "$disp" ] && kill "$disp" 2>/dev/null && wait "$disp" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
row() { printf '| %s | %s | %s ms |\n' "$1" "$2" "$3"; }
q() { sqlite3 -cmd '.timeout 10000' "$EXEC_STATE_DIR/state.db" "$1"; }

start_disp() {
	rm -f "$tmp/port"
	exec-dispatcher --port "${1:-0}" --port-file "$tmp/port" --store "$tmp/disp.db" --quiet >>"$tmp/disp.log" 2>&1 &
	disp=$!
	for _ in $(seq 1 400); do [ -s "$tmp/port" ] && break; sleep 0.01; done
	[ -s "$tmp/port" ]
	url=http://127.0.0.1:$(cat "$tmp/port")
}

# admin METHOD PATH [BODY]: the admin token (made beside the store) on stdin.
admin() {
	curl -sS -H @- -X "$1" "$url$2" ${3:+-d "$3"} <<<"Authorization: Bearer $(cat "$tmp/disp.db.admin-token")"
}

start_disp
# the executor's first session is enrolled with a token the admin issues
admin POST /admin/enrollments | sed -n 's/.*"enroll_token":"\([0-9a-f]*\)".*/\1/p' >"$tmp/enroll"
exec-session open --dispatcher "$url" --enroll-token-file "$tmp/enroll" >/dev/null
echo "| what | size | time |"
echo "|---|---|---|"

# N runs submitted and accepted from the dispatcher.
specs=$(for i in $(seq 1 "$n"); do printf '{"run_id":"m%d","txn_id":"t","program":"/bin/true"},' "$i"; done)
admin POST /admin/runs "{\"runs\":[${specs%,}]}" >/dev/null
t=$(date +%s%N); exec-accept --from-dispatcher --max 1000 >/dev/null
row "accept from the dispatcher (one transaction, receipts sent)" "$n runs" "$(ms "$t")"

# N started runs whose supervisors are gone: the sweep makes them unknown.
q "UPDATE runs SET state = 'started', started_at = 1, sup_pid = 2147483, sup_start = 1"
t=$(date +%s%N); exec-run sweep >/dev/null
row "sweep: started runs with no supervisor become unknown" "$n runs" "$(ms "$t")"

# N retained results (written as result_choose writes them): drain them.
xspecs=${specs//'"run_id":"m'/'"run_id":"x'}
admin POST /admin/runs "{\"runs\":[${xspecs%,}]}" >/dev/null
exec-accept --from-dispatcher --max 1000 >/dev/null
q "INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, wait_status, message, chosen_at, body)
	SELECT run_id, incarnation, session_id, 'exited', 0, 0, 'exited with status 0', 1,
	CAST(json_object('run_id', run_id, 'incarnation', incarnation, 'session_id', session_id, 'outcome', 'exited',
		'exit_code', 0, 'wait_status', 0, 'message', 'exited with status 0', 'chosen_at', 1) AS BLOB)
	FROM accepts WHERE run_id LIKE 'x%'"
q "DELETE FROM runs WHERE run_id LIKE 'x%'"
t=$(date +%s%N); exec-reconcile --drain --budget-ms 600000 >/dev/null
row "drain: retained results delivered (32 per pass, one HTTP report each)" "$n results" "$(ms "$t")"
[ "$(q "SELECT count(*) FROM receipts")" = "$n" ]

t=$(date +%s%N); "$top/tests/drills/check-invariants" --drained "$EXEC_STATE_DIR" "$url" >/dev/null
row "check-invariants over state and dispatcher" "$((2 * n)) runs" "$(ms "$t")"

# Many quarantined rows: a new session is O(1); the startup report counts them.
t=$(date +%s%N); exec-session open --dispatcher "$url" >/dev/null
row "exec-session open + startup report with quarantined rows" "$n unknown, $n receipts" "$(ms "$t")"

size=$(stat -c %s "$EXEC_STATE_DIR/state.db")
t=$(date +%s%N); q 'PRAGMA integrity_check' >/dev/null
row "PRAGMA integrity_check" "$((size / 1024)) KiB" "$(ms "$t")"
t=$(date +%s%N); q ".backup '$tmp/backup.db'"
row "online backup (sqlite3 .backup) of the state" "$((size / 1024)) KiB" "$(ms "$t")"

# Receipts pruned (an explicit, operator-driven end).
t=$(date +%s%N); exec-reconcile --prune-receipts 0s >/dev/null
row "prune receipts older than the window" "$n receipts" "$(ms "$t")"

# A new state directory: the cold start of a replacement executor.
t=$(date +%s%N); EXEC_STATE_DIR=$tmp/cold exec-session open --dispatcher "$url" >/dev/null
row "cold start: create a state directory and open a session" "empty" "$(ms "$t")"

# Shares cache rebuilt from capacities and membership.
exec-shares capacity set executor 1000000 >/dev/null
q "INSERT INTO share_members(run_id, dimension, weight, joined_at)
	SELECT run_id, 'executor', 1000000, 0 FROM accepts WHERE run_id LIKE 'm%'"
exec-shares list >/dev/null
q "DELETE FROM share_cache"
t=$(date +%s%N); exec-shares list >/dev/null
row "shares cache lost: every share recomputed on read" "$n members" "$(ms "$t")"

# The dispatcher: killed and back on its store.
port=$(cat "$tmp/port")
kill -KILL "$disp"; wait "$disp" 2>/dev/null || true
t=$(date +%s%N); start_disp "$port"
admin GET /admin/summary >/dev/null
row "dispatcher restart on its store, first answer" "$((2 * n)) runs" "$(ms "$t")"
