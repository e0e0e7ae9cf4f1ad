#!/bin/bash
# The quick start: install, build, start exec-dispatcher on loopback, submit
# a demo workload, run exec-loop until the dispatcher has recorded every
# result, print what the dispatcher recorded and what is kept locally, and
# stop everything.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh
scripts/build.sh build
PATH="$top/build:$top/cmd:$PATH"

work=$(mktemp -d /tmp/execkit-demo.XXXXXX)
export EXEC_STATE_DIR="$work/state"
loop_pid=
disp_pid=
cleanup() {
	[ -n "$loop_pid" ] && kill "$loop_pid" 2>/dev/null && wait "$loop_pid" 2>/dev/null
	[ -n "$disp_pid" ] && kill "$disp_pid" 2>/dev/null && wait "$disp_pid" 2>/dev/null
	true
}
trap cleanup EXIT

echo "== starting exec-dispatcher on 127.0.0.1 (store $work/dispatcher.db)"
exec-dispatcher --port 0 --port-file "$work/port" --store "$work/dispatcher.db" --quiet &
disp_pid=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")"
echo "   $url"
# /admin/ answers only the admin token, which the dispatcher made at its
# first start beside its store (mode 0600).  It goes in a header read from
# stdin (-H @-), never on a command line, which every local user can read.
admin() {   # admin METHOD PATH [BODY]
	curl -sS --max-time 5 -H @- -X "$1" "$url$2" ${3:+-d "$3"} \
		<<<"Authorization: Bearer $(cat "$work/dispatcher.db.admin-token")"
}
echo "   admin token: $work/dispatcher.db.admin-token"

echo "== enrolling this executor (an enrollment token for its first session)"
admin POST /admin/enrollments | sed -n 's/.*"enroll_token":"\([0-9a-f]*\)".*/\1/p' >"$work/enroll-token"
export EXEC_ENROLL_TOKEN_FILE="$work/enroll-token"

echo "== submitting the demo workload (exec-dispatcher submit: one run each)"
submit() {   # submit OPTION... -- PROGRAM ARG...: prints the run id
	exec-dispatcher submit --port-file "$work/port" --store "$work/dispatcher.db" "$@"
}
{
	submit --id hello --txn-id demo-1 -- /bin/echo "hello from execkit"
	submit --id fails --txn-id demo-2 -- /bin/sh -c 'echo failing >&2; exit 3'
	submit --id too-slow --txn-id demo-3 --timeout 500ms -- /bin/sleep 30
	submit --id cancel-me --txn-id demo-4 -- /bin/sleep 30
	submit --id missing --txn-id demo-5 -- /no/such/program
	for i in $(seq 1 10); do
		submit --id "batch-$i" --txn-id "demo-b$i" -- /bin/sh -c "echo item $i; sleep 0.$((i % 3))"
	done
} | tr '\n' ' '
echo

echo "== running exec-loop (4 slots)"
exec-loop --dispatcher "$url" --slots 4 --tick 0.2 2>"$work/loop.log" &
loop_pid=$!

finished() { admin GET /admin/summary | grep -o '"finished":[0-9]*' | cut -d: -f2; }
cancelled=
for _ in $(seq 1 600); do
	if [ -z "$cancelled" ] && exec-inspect list running --ids 2>/dev/null | grep -qx cancel-me; then
		sid=$(exec-session show | awk '$3 == "current" {print $1}')
		echo "== cancelling cancel-me"
		exec-run cancel cancel-me --session "$sid"
		cancelled=1
	fi
	[ "$(finished)" = 15 ] && break
	sleep 0.1
done

echo "== stopping exec-loop"
kill -TERM "$loop_pid"
wait "$loop_pid" || true
loop_pid=

echo "== what the dispatcher recorded (GET /admin/summary: each run charged once)"
admin GET /admin/summary
echo
echo "== what the executor kept: a receipt per acknowledged result (exec-inspect list receipts)"
exec-inspect list receipts
echo
echo "== every run in one view, and those that failed (exec-inspect list all [--failed])"
exec-inspect list all -o run_id,state,program,outcome,exit_code,duration
exec-inspect list all --failed --ids | tr '\n' ' '
echo
echo
echo "== the startup report, as a restarted executor would print it (exec-session report)"
exec-session report
echo
echo "== guest output of 'hello'"
cat "$EXEC_STATE_DIR/out/hello.stdout"
echo "demo state is in $work"
