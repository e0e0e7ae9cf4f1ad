#!/bin/bash
# bench/loop-log.sh [N [PROGRAM [EXEC-LOOP OPTION...]]] — how much exec-loop
# logs: N runs (default 10000) of PROGRAM (default /bin/true) submitted to
# a reference dispatcher of its own, one exec-loop (--slots 4 --tick 0.05
# and the options given, e.g. -v) on them until the dispatcher has every
# result, then stopped.  Prints the log's lines, the most in one second and
# in the busiest 30 s (journald's rate-limit interval in exec-loop.service),
# and the runs a second.  Run it with /bin/false for the default level's
# worst case: every run a failure, a line each (exec-loop(1), LOG).
set -euo pipefail
export LC_ALL=C   # a '.' decimal point in $EPOCHREALTIME and awk

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${EXECKIT_BUILDDIR:-$top/build}
n=${1:-10000}
prog=${2:-/bin/true}
shift $(($# < 2 ? $# : 2))
case $n in '' | *[!0-9]* | 0) echo "loop-log: N='$n' is not a positive integer" >&2; exit 64 ;; esac

die() { echo "loop-log: $*" >&2; exit 1; }
d=$(mktemp -d "${TMPDIR:-/tmp}/loop-log.XXXXXX")
disp_pid=''
loop_pid=''
cleanup() {
	[ -z "$loop_pid" ] || kill -TERM "$loop_pid" 2>/dev/null || true
	[ -z "$disp_pid" ] || kill "$disp_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$d"
}
trap cleanup EXIT

"$B/exec-dispatcher" --port 0 --port-file "$d/port" --store "$d/dispatcher.db" --quiet &
disp_pid=$!
for _ in $(seq 1 200); do [ -s "$d/port" ] && break; sleep 0.05; done
[ -s "$d/port" ] || die "the dispatcher did not start"
url="http://127.0.0.1:$(<"$d/port")"
# the admin token, as a header in a 0600 file (never on a command line)
IFS= read -r token <"$d/dispatcher.db.admin-token"
(umask 077 && printf 'Authorization: Bearer %s\n' "$token" >"$d/admin.auth")
admin() {   # METHOD PATH [BODY]
	local data=()
	[ $# -lt 3 ] || data=(-d "$3")
	curl -sS --fail --max-time 60 -H @"$d/admin.auth" -H 'Content-Type: application/json' \
		-X "$1" "${data[@]}" "$url$2"
}
resp=$(admin POST /admin/enrollments '{"uses":10}')
[[ $resp =~ \"enroll_token\":\"([0-9a-f]+)\" ]] || die "POST /admin/enrollments: $resp"
(umask 077 && printf '%s\n' "${BASH_REMATCH[1]}" >"$d/enroll-token")
export EXEC_ENROLL_TOKEN_FILE=$d/enroll-token

for ((c = 0; c < n; c += 1000)); do
	body=
	for ((i = c + 1; i <= c + 1000 && i <= n; i++)); do
		body+="${body:+,}{\"run_id\":\"log-$i\",\"txn_id\":\"log-t$i\",\"program\":\"$prog\"}"
	done
	admin POST /admin/runs "{\"runs\":[$body]}" >/dev/null || die "POST /admin/runs failed"
done

finished() {
	local s
	s=$(admin GET /admin/summary) || die "GET /admin/summary failed"
	[[ $s =~ \"finished\":([0-9]+) ]] || die "GET /admin/summary: $s"
	done_n=${BASH_REMATCH[1]}
}
t0=$EPOCHREALTIME
PATH="$B:$PATH" EXEC_STATE_DIR="$d/state" "$top/cmd/exec-loop" --dispatcher "$url" \
	--slots 4 --tick 0.05 "$@" 2>"$d/loop.log" &
loop_pid=$!
done_n=0
while [ "$done_n" -lt "$n" ]; do
	kill -0 "$loop_pid" 2>/dev/null || die "exec-loop ended early: $(tail -n 3 "$d/loop.log")"
	sleep 0.5
	finished
done
t1=$EPOCHREALTIME
kill -TERM "$loop_pid"
wait "$loop_pid" || die "exec-loop exited $?"
loop_pid=

# Lines a second, by the time each line begins with (the supervisors'
# lines too: 2026-12-05T14:30:05+0000), then the busiest second and the
# busiest 30 s.
awk -v n="$n" -v prog="$prog" -v opts="$*" -v secs="$(awk "BEGIN { print $t1 - $t0 }")" '
	{
		split(substr($0, 9, 11), a, /[T:]/)   # day, hour, minute, second
		per[((a[1] * 24 + a[2]) * 60 + a[3]) * 60 + a[4]]++
		lines++
	}
	END {
		for (s in per) {
			if (per[s] > peak) peak = per[s]
			w = 0
			for (k = s; k < s + 30; k++) w += per[k]
			if (w > win) win = w
		}
		printf "%d x %s %s: %d lines, at most %d in one second and %d in 30 s; %.1f s, %.0f runs/s\n",
			n, prog, opts, lines, peak, win, secs, n / secs
	}' "$d/loop.log"
