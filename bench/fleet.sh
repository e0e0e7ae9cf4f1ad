#!/bin/bash
# bench/fleet.sh [BUILD] — a fleet of executors recovers from a dispatcher
# outage without a storm, on one machine, and draws the picture.
#
# FLEET_N executors (each its own state directory and its own exec-loop)
# work against one exec-dispatcher on 127.0.0.1.  Phases, run twice (first
# without the gate, then with it):
#   steady    every executor gets /bin/true runs (POST /admin/runs) and runs
#             them; the dispatcher's request rate (GET /admin/stats once a
#             second) and a probe's heartbeat latency are the baseline
#   retain    /v1/results answers 503 (a fault), FLEET_RESULTS runs per
#             executor are submitted: the fleet runs them and retains them
#   outage    kill -9 the dispatcher (the fault goes with it), keep it down
#   recovery  restart it on the same store and port; measure until every
#             retained result is recorded (or a bound)
# Prints the figures of both runs (stdout; progress on stderr), writes the
# picture (gnuplot) and leaves its data in a scratch directory.  A
# benchmark: it asserts nothing; it exits non-zero only when something
# cannot be set up or a command under test fails.  See bench/README.md.
set -euo pipefail
export LC_ALL=C   # a '.' decimal point in $EPOCHREALTIME and awk

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

usage() {
	cat <<USAGE
Usage: bench/fleet.sh [BUILD]
A fleet of exec-loop executors against one exec-dispatcher: steady state,
results retained through a dispatcher outage, then recovery, with and
without the gate (--gate adaptive, and no cap unless given; --gate off).
BUILD: the build dir [\$BUILD, else $top/build].

Environment (defaults in brackets):
  FLEET_N            executors [100]
  FLEET_RESULTS      results each executor retains through the outage [30]
  FLEET_GATE         a cap for the gated run: its --max-inflight [0: none]
  FLEET_MAX_RATE     a cap for the gated run: its --max-rate [0: none]
  FLEET_RATE_WAIT_MS the gated run's --rate-wait-ms, with a --max-rate [0]
  FLEET_JITTER_MS    both runs' exec-loop --jitter-ms [0: the whole fleet at
                     once, the storm the gate is there for]
  FLEET_TICK         exec-loop --tick, seconds [FLEET_N / 20, at least 1: 5 for 100]
  FLEET_SLOTS        exec-loop --slots [4]
  FLEET_WORK         steady work: /bin/true runs a second, fleet-wide
                     [FLEET_N / (2 x tick), at least 1: a run every 2 ticks each]
  FLEET_STEADY_S     seconds of steady state measured [4 ticks, at least 5]
  FLEET_OUTAGE_S     seconds the dispatcher stays down [a tick, at least 3]
  FLEET_LEASE_MS     the fleet's session lease [12 ticks, at least 30000]
  FLEET_RETAIN_MAX   seconds the fleet may take to retain the results [300]
  FLEET_RECOVERY_MAX seconds the recovery may take [240]
  FLEET_PNG          the picture [$here/fleet.png]
  FLEET_DATA         scratch dir for the data (fleet-*.dat) [$here/fleet-data]
  FLEET_CGROUP=0     do not measure the bench's CPU in a cgroup v2 of its own
  FLEET_KEEP=1       keep the work directory (states, stores, logs)
  FLEET_PROBE_HZ     the probe's heartbeats a second, on one connection [50]
  FLEET_PROBE_NICE   the probe's nice, -20 to 19 [-10, the dispatcher's
                     --heartbeat-nice, where this bench may raise a
                     priority; else 0]
  FLEET_SPLIT=1      the dispatcher and the probe on CPU 0, the fleet on the
                     others (taskset): a dispatcher with a machine of its
                     own, whose heartbeats wait for no executor's CPU
USAGE
}
case ${1:-} in -h | --help) usage; exit 0 ;; esac
[ $# -le 1 ] || { usage >&2; exit 64; }

num() {   # NAME DEFAULT: a non-negative integer from the environment
	local v=${!1:-$2}
	case $v in '' | *[!0-9]*) echo "fleet: $1='$v' is not a number" >&2; exit 64 ;; esac
	echo "$((10#$v))"
}
N=$(num FLEET_N 100)
RESULTS=$(num FLEET_RESULTS 30)
R=$RESULTS
# The gated run's caps, none by default: the adaptive limit needs no rate
# set by hand.
GATE=$(num FLEET_GATE 0)
MAX_RATE=$(num FLEET_MAX_RATE 0)
RATE_WAIT=$(num FLEET_RATE_WAIT_MS 0)
# The tick sets the fleet's process rate (about 3 tools a tick per executor):
# 20 executor ticks a second fit 2 cores beside the dispatcher.
TICK=$(num FLEET_TICK $(((N + 19) / 20)))
SLOTS=$(num FLEET_SLOTS 4)
# The same in both runs, so that the runs differ by the gate alone; 0 by
# default: the fleet comes back at once and the gate meets the whole storm
# (exec-loop's own default, two ticks, spreads it before it reaches the
# gate, and the recovery then takes about as long as the jitter).
JITTER=$(num FLEET_JITTER_MS 0)
SPLIT=$(num FLEET_SPLIT 0)
PROBE_HZ=$(num FLEET_PROBE_HZ 50)
# The probe stands for an executor's heartbeat client, which has a machine
# of its own: here it shares two cores with the fleet, and at the fleet's
# nice its p99 would be its own wait for a CPU behind 100 loops, not the
# dispatcher's answer.  So it runs at the nice the dispatcher serves
# heartbeats at (exec-dispatcher --heartbeat-nice), where it may.
PROBE_NICE=${FLEET_PROBE_NICE:--10}
[[ $PROBE_NICE =~ ^-?[0-9]+$ ]] && [ "$PROBE_NICE" -ge -20 ] && [ "$PROBE_NICE" -le 19 ] ||
	{ echo "fleet: FLEET_PROBE_NICE='$PROBE_NICE' is not a nice from -20 to 19" >&2; exit 64; }
probe_nice=(nice -n "$((PROBE_NICE - $(nice)))")   # (nice -n is relative)
if [ "$("${probe_nice[@]}" nice 2>/dev/null)" != "$PROBE_NICE" ]; then
	[ -z "${FLEET_PROBE_NICE:-}" ] ||
		{ echo "fleet: FLEET_PROBE_NICE=$PROBE_NICE: this user may not raise a priority" >&2; exit 77; }
	PROBE_NICE=0   # (the default, where it may not: the fleet's nice)
	probe_nice=()
fi
WORK=$(num FLEET_WORK $((N / (2 * TICK) > 1 ? N / (2 * TICK) : 1)))
STEADY_S=$(num FLEET_STEADY_S $((4 * TICK > 5 ? 4 * TICK : 5)))
OUTAGE_S=$(num FLEET_OUTAGE_S $((TICK > 3 ? TICK : 3)))
RETAIN_MAX=$(num FLEET_RETAIN_MAX 300)
RECOVERY_MAX=$(num FLEET_RECOVERY_MAX 240)
# The lease: 12 ticks, at least the dispatcher's 30 s, as an operator sizes
# it to the heartbeat; a loaded machine can starve a beat or two of CPU.
LEASE_MS=$(num FLEET_LEASE_MS $((12 * TICK * 1000 > 30000 ? 12 * TICK * 1000 : 30000)))
for v in N RESULTS TICK SLOTS STEADY_S PROBE_HZ; do
	[ "${!v}" -gt 0 ] || { echo "fleet: FLEET_$v must be positive" >&2; exit 64; }
done
# shellcheck disable=SC2034 # the picture is drawn by bench/fleet-plot.sh
PNG=${FLEET_PNG:-$here/fleet.png}
DATA=${FLEET_DATA:-$here/fleet-data}
B=${1:-${BUILD:-$top/build}}
B=$(cd "$B" 2>/dev/null && pwd) || { echo "fleet: no build dir '${1:-${BUILD:-$top/build}}'" >&2; exit 66; }

die() { echo "fleet: $*" >&2; exit 1; }
say() { echo "fleet: $*" >&2; }

# FLEET_SPLIT=1: the commands the dispatcher's side and the fleet's run under.
disp_cpu=()
fleet_cpu=()
if [ "$SPLIT" = 1 ]; then
	ncpu=$(nproc)
	[ "$ncpu" -ge 2 ] || { echo "fleet: FLEET_SPLIT=1 needs 2 CPUs, this machine has $ncpu" >&2; exit 69; }
	disp_cpu=(taskset -c 0)
	fleet_cpu=(taskset -c "1-$((ncpu - 1))")
fi
for t in curl sqlite3 awk; do
	command -v "$t" >/dev/null 2>&1 || die "missing: $t (Debian: apt-get install curl sqlite3 mawk)"
done
for t in exec-dispatcher exec-session exec-accept exec-run exec-reconcile; do
	[ -x "$B/$t" ] || die "$B/$t not found: build first (scripts/build.sh) or pass the build dir"
done
loop=$B/exec-loop
[ -x "$loop" ] || loop=$top/cmd/exec-loop

# (read whole, not piped into grep -q: under pipefail, a writer cut off by
# grep's early exit would fail the test)
loop_help=$("$loop" --help 2>/dev/null) || loop_help=
if [[ $loop_help == *--jitter-ms* ]]; then
	jitter_note="--jitter-ms $JITTER (both runs)"
else
	jitter_note="none: this exec-loop has no --jitter-ms yet (runs without it)"
	say "note: $loop --help lists no --jitter-ms: both runs go without first-pass jitter"
	JITTER=
fi
disp_help=$("$B/exec-dispatcher" --help 2>/dev/null) || disp_help=
[[ $disp_help == *--gate* ]] ||
	die "this exec-dispatcher has no --gate (the adaptive limit): build a newer one"

# The fleet's own CPU: this script moves itself into a cgroup v2 of its own
# (a child of its current one) when it can, so that everything it starts —
# the dispatcher, the loops, their tools, the supervisors and the guests
# that leave the loops' process tree — counts in its cpu.stat.  Without one
# (no cgroup2 mount, no permission) only the whole machine's CPU is shown.
cg=
cg_home=
cgroup_enter() {
	local line root mnt own=
	[ "${FLEET_CGROUP:-1}" = 1 ] || return 0
	while IFS= read -r line; do
		[[ $line == *" - cgroup2 "* ]] || continue
		read -r _ _ _ root mnt _ <<<"$line"
		break
	done </proc/self/mountinfo
	while IFS= read -r line; do [[ $line == 0::* ]] && own=${line#0::}; done </proc/self/cgroup
	[ "${root:-}" = / ] && [ -n "$own" ] || return 0
	cg_home=${mnt%/}${own%/}
	cg=$cg_home/execkit-fleet.$$
	if ! mkdir "$cg" 2>/dev/null || ! echo "$BASHPID" 2>/dev/null >"$cg/cgroup.procs" || ! [ -r "$cg/cpu.stat" ]; then
		rmdir "$cg" 2>/dev/null || true
		cg=
	fi
}
cgroup_leave() {
	[ -n "$cg" ] || return 0
	echo "$BASHPID" >"$cg_home/cgroup.procs" 2>/dev/null || true
	find "$cg" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true   # guests' cgroups left behind
	rmdir "$cg" 2>/dev/null || say "note: cannot remove $cg"
	cg=
}
cg_usec() {   # the cgroup's CPU so far, in microseconds ("-" without one)
	local k v u=-
	if [ -n "$cg" ]; then
		while read -r k v; do [ "$k" = usage_usec ] && u=$v; done <"$cg/cpu.stat"
	fi
	echo "$u"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/execkit-fleet.XXXXXX")
mkdir -p "$DATA"
loop_pids=()
bg_pids=()     # probe, sampler
disp_pid=
cleanup() {
	local p i alive
	: >"$work/stop"
	for p in "${loop_pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -TERM "$p" 2>/dev/null || true; done
	for ((i = 0; i < 300; i++)); do   # each loop drains and closes: at most 30 s in all
		alive=
		for p in "${loop_pids[@]}"; do kill -0 "$p" 2>/dev/null && { alive=1; break; }; done
		[ -n "$alive" ] || break
		nap 0.1
	done
	for p in "${loop_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	loop_pids=()
	for p in "${bg_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	bg_pids=()
	if [ -n "$disp_pid" ]; then
		kill -TERM "$disp_pid" 2>/dev/null || true
		wait "$disp_pid" 2>/dev/null || true
		disp_pid=
	fi
	rm -f "$work/stop"
}
finish() {
	cleanup
	cgroup_leave
	if [ "${FLEET_KEEP:-}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

# A sleep that starts no process: a read that times out on a silent fifo.
mkfifo "$work/idle"
exec {idle_fd}<>"$work/idle"
nap() { read -r -t "$1" -u "$idle_fd" _ || true; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }   # FORMAT EXPR
count_of() { local r=${1//"$2"/}; echo $(((${#1} - ${#r}) / ${#2})); }   # STRING PATTERN: occurrences
field() {   # JSON NAME: the first integer field NAME of compact JSON, or empty
	[[ $1 =~ \"$2\":([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
}
# get PATH: a GET to the dispatcher; an overloaded one may take long, and
# gets three tries of 30 s.
get() {
	local try
	for try in 1 2 3; do
		curl -s --fail --max-time 30 -H @"$admin_auth" "$url$1" && return 0
		nap 1
	done
	echo "fleet: GET $1 failed 3 times" >&2
	return 1
}
# post PATH BODY: a POST to the dispatcher, with the admin token to /admin/.
post() {
	local auth=()
	[[ $1 != /admin/* ]] || auth=(-H @"$admin_auth")
	curl -sS --fail --max-time 30 "${auth[@]}" -X POST -H 'Content-Type: application/json' --data-binary "$2" "$url$1"
}

# --- the dispatcher -------------------------------------------------------------
start_dispatcher() {   # DIR PORT [OPTION...]: on 127.0.0.1; sets url, port, disp_pid
	local d=$1 p=$2 i try
	for ((try = 0; try < 20; try++)); do
		rm -f "$d/port"
		"${disp_cpu[@]}" "$B/exec-dispatcher" --port "$p" --port-file "$d/port" --store "$d/dispatcher.db" --quiet "${@:3}" \
			2>>"$d/dispatcher.log" &
		disp_pid=$!
		for ((i = 0; i < 200; i++)); do
			[ -s "$d/port" ] && break
			kill -0 "$disp_pid" 2>/dev/null || break
			nap 0.02
		done
		[ -s "$d/port" ] && break
		wait "$disp_pid" 2>/dev/null || true   # the port not free yet: try again
		disp_pid=
		nap 0.25
	done
	[ -s "$d/port" ] || die "exec-dispatcher did not start (see $d/dispatcher.log)"
	port=$(<"$d/port")
	url="http://127.0.0.1:$port"
	admin_enroll "$d"
}

# admin_enroll DIR: the admin token the dispatcher made beside its store, as
# a header line in a 0600 file ($admin_auth, for curl -H @FILE: never on a
# command line); then an enrollment token for the executors (exec-session
# open reads it through EXEC_ENROLL_TOKEN_FILE).
admin_enroll() {
	local token resp
	IFS= read -r token <"$1/dispatcher.db.admin-token" || die "no admin token in $1"
	admin_auth=$1/admin.auth
	(umask 077 && printf 'Authorization: Bearer %s\n' "$token" >"$admin_auth")
	resp=$(post /admin/enrollments '{"uses":1000000}') || die "POST /admin/enrollments failed"
	[[ $resp =~ \"enroll_token\":\"([0-9a-f]+)\" ]] || die "POST /admin/enrollments: $resp"
	(umask 077 && printf '%s\n' "${BASH_REMATCH[1]}" >"$1/enroll-token")
	export EXEC_ENROLL_TOKEN_FILE=$1/enroll-token
}

submit() {   # PREFIX FROM TO: POST /admin/runs with runs PREFIX-FROM..PREFIX-TO of /bin/true, 1000 a request
	local from to f=$work/submit.$BASHPID.json   # BASHPID: the sampler submits too
	for ((from = $2; from <= $3; from += 1000)); do
		to=$((from + 999 < $3 ? from + 999 : $3))
		awk -v p="$1" -v a="$from" -v b="$to" 'BEGIN { printf "{\"runs\":["
			for (i = a; i <= b; i++)
				printf "%s{\"run_id\":\"%s-%d\",\"txn_id\":\"%s-t%d\",\"program\":\"/bin/true\"}", (i > a ? "," : ""), p, i, p, i
			print "]}" }' >"$f"
		post /admin/runs "@$f" >/dev/null || return 1
	done
}

summary_runs() {   # into open (queued + offered + accepted), feed (queued + offered) and results
	local s
	s=$(get /admin/summary) || return 1
	feed=$(($(field "$s" queued) + $(field "$s" offered)))
	open=$((feed + $(field "$s" accepted)))
	results=$(field "$s" results)
}

# --- the probe and the sampler (background, bounded, stopped by $work/stop) ----
# probe DIR SID: FLEET_PROBE_HZ heartbeats a second of the probe's own
# session, on one kept-alive connection (curl --rate, chunks of 2 s); one
# line each: start time, HTTP status (000: no answer), time_total in
# seconds.  The start times are the rate's (or the end of the heartbeat
# before, when it took longer).  Enough of them for a p99 that is not the
# slowest: 6 s of recovery at 5 a second was 30 heartbeats.
probe() {
	local d=$1 sid=$2 i t0 n=$((2 * PROBE_HZ))
	for ((i = 0; i < 3600; i++)); do
		[ -e "$work/stop" ] && break
		t0=$EPOCHREALTIME
		"${disp_cpu[@]}" "${probe_nice[@]}" curl -s --rate "$PROBE_HZ/s" --max-time 5 -X POST -H "@$d/probe.hdr" \
			-w '\n%{http_code} %{time_total}\n' "$url/v1/sessions/$sid/heartbeat?n=[1-$n]" \
			>"$d/probe.chunk" 2>/dev/null || true
		awk -v t0="$t0" -v hz="$PROBE_HZ" '/^[0-9][0-9][0-9] [0-9.]+$/ {
			s = t0 + k / hz; k++; if (s < at) s = at
			printf "%.6f %s %s\n", s, $1, ($1 == "000" ? 5 : $2); at = s + $2
		}' "$d/probe.chunk" >>"$d/probe"
	done
}

# sampler DIR: once a second, the steady work when DIR/feed exists (WORK
# runs), then GET /admin/stats and /admin/summary.  One line each:
#   time up|down requests in_flight gated_429 results ledger_total own cpu_busy cpu_all cg_usec
#   heartbeats feeds reports gate_limit commit_batches commit_results
# own: the sampler's requests counted in this line's window (its previous
# summary, this submission, this stats); cpu: /proc/stat jiffies (the
# whole machine); cg_usec: this bench's cgroup (- without one).
sampler() {
	local d=$1 i t t0 s m c r l own k=0 n sent=0 u ni sy id io irq si st
	for ((i = 0; i < 3600; i++)); do
		[ -e "$work/stop" ] && break
		t0=$EPOCHREALTIME
		own=1   # the previous line's summary
		if [ -e "$d/feed" ]; then
			k=$((k + 1))
			n=$((k * WORK - sent))
			if [ "$n" -gt 0 ] && submit steady $((sent + 1)) $((sent + n)) 2>/dev/null; then
				sent=$((sent + n))
				own=$((own + 1))
			fi
		fi
		# A dispatcher under a storm can be slow to answer even this: the
		# time is taken when the counters came back.
		if s=$(curl -s --fail --max-time 10 -H @"$admin_auth" "$url/admin/stats"); then
			t=$EPOCHREALTIME
			read -r _ u ni sy id io irq si st _ </proc/stat
			c=$(cg_usec)
			m=$(curl -s --fail --max-time 10 -H @"$admin_auth" "$url/admin/summary") || m=
			r=$(field "$m" results) || r=-
			l=$(field "$m" ledger_total) || l=-
			echo "$t up $(field "$s" requests) $(field "$s" in_flight) $(field "$s" gated_429) $r $l $((own + 1))" \
				"$((u + ni + sy + irq + si + st)) $((u + ni + sy + id + io + irq + si + st)) $c" \
				"$(field "$s" heartbeat || echo -) $(field "$s" feed || echo -) $(field "$s" result || echo -)" \
				"$(field "$s" gate_limit || echo -) $(field "$s" commit_batches || echo -)" \
				"$(field "$s" commit_results || echo -)" >>"$d/samples"
		else
			t=$EPOCHREALTIME
			read -r _ u ni sy id io irq si st _ </proc/stat
			c=$(cg_usec)
			echo "$t down - - - - - 0 $((u + ni + sy + irq + si + st)) $((u + ni + sy + id + io + irq + si + st)) $c" >>"$d/samples"
		fi
		t=$(calc '%.3f' "1 - ($EPOCHREALTIME - $t0)")
		[[ $t == -* ]] || nap "$t"
	done
}

last_sample() {   # into s_up s_results (the sampler's last line)
	local l=
	[ -s "$1/samples" ] && l=$(tail -n 1 "$1/samples")
	read -r _ s_up _ _ _ s_results _ <<<"${l:-0 down - - - -}"
}

mark() { echo "$2 $EPOCHREALTIME" >>"$1/phases"; }   # DIR NAME: a phase starts now

# retained DIR: over the executors' states, into tot the retained results
# not refused (rmin, rmax: the least and most of one state), refused_n the
# refused ones, and pending the runs not finished (queued, started).
retained() {
	local i a b c try out
	tot=0
	refused_n=0
	pending=0
	rmin=
	rmax=0
	for ((i = 1; i <= N; i++)); do
		for ((try = 0; try < 20; try++)); do   # a busy state answers a moment later
			out=$(sqlite3 -readonly -batch -init /dev/null -cmd '.timeout 5000' -separator ' ' "$1/x$i/state.db" \
				"SELECT IFNULL(SUM(refused = 0), 0), IFNULL(SUM(refused <> 0), 0), (SELECT count(*) FROM runs) FROM results" \
				2>>"$work/sqlite.log") && break
			out="0 0 1"
			nap 0.25
		done
		read -r a b c <<<"$out"
		tot=$((tot + a))
		refused_n=$((refused_n + b))
		pending=$((pending + c))
		if [ -z "$rmin" ] || [ "$a" -lt "$rmin" ]; then rmin=$a; fi
		[ "$rmax" -ge "$a" ] || rmax=$a
	done
}

stop_bg() {   # the probe and the sampler
	local p
	for p in "${bg_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	bg_pids=()
}

handout() {   # STATE-DIR: exec-accept R runs from the feed into it (its own session)
	local k try
	for ((k = 0; k < R; k += 1000)); do
		for ((try = 0; try < 10; try++)); do   # 75: state busy, try again
			"${fleet_cpu[@]}" "$B/exec-accept" --state-dir "$1" --from-dispatcher --max $((R - k < 1000 ? R - k : 1000)) \
				>/dev/null 2>>"$1.accept.log" && break
			nap 0.1
		done
	done
}

# first_delivery DIR: from the dispatcher's store, the time from the
# restart to each executor's first result recorded after it (s): its
# p50, p90 and most, as KEY=VALUE words.
first_delivery() {
	local ms
	ms=$(awk '$1 == "restart" { printf "%.0f", $2 * 1000 }' "$1/phases")
	sqlite3 -readonly -batch -init /dev/null -cmd '.timeout 5000' "$1/dispatcher.db" \
		"SELECT MIN(r.at) - $ms FROM reports r JOIN sessions s ON s.session_id = r.session_id
		 WHERE r.at >= $ms AND r.status = 200 GROUP BY s.executor_id" 2>>"$work/sqlite.log" |
		sort -n | awk 'function at(p,   k) { k = int(p * NR + 0.999999); return a[k < 1 ? 1 : k] / 1000 }
		{ a[NR] = $1 } END {
			if (!NR) { print "first_n=0 first_p50=- first_p90=- first_max=-"; exit }
			printf "first_n=%d first_p50=%.1f first_p90=%.1f first_max=%.1f", NR, at(0.5), at(0.9), a[NR] / 1000 }'
}

# delivery_failures DIR: the deliveries that failed after the restart, by
# the executors' logs (exec-loop's "failed RUN (N attempts): WHY" lines);
# the timeouts among them (no answer in time: a request that waited in a
# queue past the client's budget), as KEY=VALUE words; the reasons,
# counted (digits as N), into DIR/failures.
delivery_failures() {
	local since
	since=$(<"$1/restart_stamp")
	cat "$1"/x*.log 2>/dev/null | awk -v since="$since" '
		substr($0, 1, length(since)) >= since && / failed [^ ]+ \([0-9]+ attempts?\): / {
			sub(/^.* failed [^ ]+ \([0-9]+ attempts?\): /, ""); gsub(/[0-9]+/, "N"); print }' |
		sort | uniq -c | sort -rn >"$1/failures"
	awk '{ n += $1 } /[Tt]imeout|timed out/ { t += $1 } END { printf "failed=%d timeouts=%d", n, t }' "$1/failures"
}

loops_alive() {   # into dead: loops that have ended
	local p
	dead=0
	for p in "${loop_pids[@]}"; do kill -0 "$p" 2>/dev/null || dead=$((dead + 1)); done
}

# --- one run: steady, retain, outage, recovery ------------------------------------
fleet_run() {   # MODE (gate | nogate)
	local mode=$1 d=$work/$1 i t sid cred resp total want base
	local -a gate_opts loop_opts
	mkdir -p "$d"
	loop_opts=()
	if [ "$mode" = gate ]; then
		# The dispatcher's defaults: the adaptive limit, no cap unless given.
		gate_opts=(--gate adaptive --max-inflight "$GATE" --max-rate "$MAX_RATE" --retry-after 1)
		[ "$RATE_WAIT" -eq 0 ] || gate_opts+=(--rate-wait-ms "$RATE_WAIT")
		[ -z "$JITTER" ] || loop_opts=(--jitter-ms "$JITTER")
	else
		gate_opts=(--gate off)
		[ -z "$JITTER" ] || loop_opts=(--jitter-ms "$JITTER")
	fi
	start_dispatcher "$d" 0 --lease-ms "$LEASE_MS" "${gate_opts[@]}"
	say "$mode: dispatcher at $url (${gate_opts[*]}); starting $N executors over ${TICK}s"

	# The probe's own session; its credential only in a 0600 header file.
	local xid xkey etok
	xid=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	xkey=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
	IFS= read -r etok <"$EXEC_ENROLL_TOKEN_FILE"
	(umask 077 && printf '{"executor_id":"%s","executor_key":"%s","enroll_token":"%s"}' "$xid" "$xkey" "$etok" \
		>"$d/probe.json")
	resp=$(post /v1/sessions "@$d/probe.json") ||
		die "probe: POST /v1/sessions failed"
	[[ $resp =~ \"session_id\":\"([^\"]+)\" ]] && sid=${BASH_REMATCH[1]}
	[[ $resp =~ \"credential\":\"([0-9a-f]+)\" ]] && cred=${BASH_REMATCH[1]}
	[ -n "${sid:-}" ] && [ -n "${cred:-}" ] || die "probe: POST /v1/sessions answered no session"
	resp=
	(umask 077 && printf 'Authorization: Bearer %s\n' "$cred" >"$d/probe.hdr")
	cred=
	: >"$d/probe"
	: >"$d/samples"
	probe "$d" "$sid" &
	bg_pids+=("$!")
	sampler "$d" &
	bg_pids+=("$!")
	mark "$d" start

	# The fleet, started over one tick so that the loops' ticks spread.
	for ((i = 1; i <= N; i++)); do
		mkdir -m 700 "$d/x$i"
		PATH="$B:$PATH" "${fleet_cpu[@]}" "$loop" --dispatcher "$url" --state-dir "$d/x$i" --tick "$TICK" --slots "$SLOTS" \
			"${loop_opts[@]}" 2>"$d/x$i.log" &
		loop_pids+=("$!")
		nap "$(calc '%.3f' "$TICK / $N")"
	done
	for ((i = 0; i < 300; i++)); do
		t=$(get /admin/sessions) || die "GET /admin/sessions failed"
		[ "$(count_of "$t" '"status":"current"')" -ge $((N + 1)) ] && break
		loops_alive
		[ "$dead" -eq 0 ] || die "$dead executors ended at start (see $d/x*.log, e.g. $(head -c 300 "$d/x1.log"))"
		nap 0.2
	done
	[ "$(count_of "$t" '"status":"current"')" -ge $((N + 1)) ] || die "not every executor opened a session in 60 s"

	# Steady: work for one tick of warm-up, then STEADY_S seconds measured.
	say "$mode: steady: $WORK runs/s for $((TICK + STEADY_S)) s"
	: >"$d/feed"
	nap "$TICK"
	mark "$d" steady
	nap "$STEADY_S"
	mark "$d" steady_end
	rm -f "$d/feed"
	for ((i = 0; i < 300; i++)); do   # every steady run finished and its result recorded
		summary_runs || die "GET /admin/summary failed"
		[ "$open" -eq 0 ] && break
		nap 0.2
	done
	[ "$open" -eq 0 ] || die "$open steady runs not finished 60 s after the steady phase"
	base=$results

	# Retain: /v1/results answers 503 with Retry-After 1 s, so each executor
	# keeps its results and waits a second before it tries again.  The feed
	# hands runs to whoever asks first (a busy loop asks again at once), so
	# the loops are paused (SIGSTOP) while each executor's R runs are
	# submitted and accepted into its state by exec-accept (--from-dispatcher,
	# its own session); resumed, each loop runs its own.
	mark "$d" retain
	post /admin/faults '{"kind":"5xx","count":1000000,"delay_ms":1000,"path":"/v1/results"}' >/dev/null ||
		die "POST /admin/faults failed"
	total=$((N * R))
	say "$mode: retain: $total runs ($R per executor) while /v1/results answers 503"
	t=$SECONDS
	for i in "${loop_pids[@]}"; do kill -STOP "$i" 2>/dev/null || true; done
	nap 0.3   # the tools the loops had started end
	submit retain 1 "$total" || die "POST /admin/runs failed"
	local -a hp=()
	for ((i = 1; i <= N; i++)); do   # four at a time
		handout "$d/x$i" &
		hp+=("$!")
		if [ "${#hp[@]}" -ge 4 ] || [ "$i" -eq "$N" ]; then
			wait "${hp[@]}" || true
			hp=()
		fi
	done
	for i in "${loop_pids[@]}"; do kill -CONT "$i" 2>/dev/null || true; done
	while :; do
		summary_runs || die "GET /admin/summary failed"
		if [ "$feed" -eq 0 ]; then
			retained "$d"
			[ "$pending" -eq 0 ] && break
		fi
		[ $((SECONDS - t)) -lt "$RETAIN_MAX" ] || break
		nap 1
	done
	retained "$d"
	loops_alive
	say "$mode: retained $tot results in $((SECONDS - t)) s (per executor $rmin..$rmax; $pending runs not run yet; $dead loops ended)"
	want=$((base + tot + pending))
	echo "retain_s=$((SECONDS - t)) retained=$tot rmin=$rmin rmax=$rmax not_run=$pending" >"$d/retain"

	# Outage: kill -9, down for OUTAGE_S seconds.
	say "$mode: outage: kill -9 the dispatcher, down ${OUTAGE_S}s"
	mark "$d" kill
	kill -KILL "$disp_pid"
	wait "$disp_pid" 2>/dev/null || true
	disp_pid=
	nap "$OUTAGE_S"

	# Recovery: the same store and port; until every result is recorded.
	start_dispatcher "$d" "$port" --lease-ms "$LEASE_MS" "${gate_opts[@]}"
	mark "$d" restart
	printf '%(%Y-%m-%dT%H:%M:%S%z)T' -1 >"$d/restart_stamp"   # as exec-loop's log lines begin
	say "$mode: recovery: waiting for $want results (at most ${RECOVERY_MAX}s)"
	t=$SECONDS
	s_results=0
	while [ $((SECONDS - t)) -lt "$RECOVERY_MAX" ]; do
		nap 0.5
		last_sample "$d"
		[ "$s_up" = up ] && [[ $s_results =~ ^[0-9]+$ ]] && [ "$s_results" -ge "$want" ] && break
	done
	mark "$d" end
	nap 1.1   # one more window after the end, for the picture
	stop_bg   # the queries below are not the fleet's

	# What is left and what went wrong.
	local sum sessions ledger expired dup sample bad=0 rid st
	sum=$(get /admin/summary) || die "GET /admin/summary failed"
	results=$(field "$sum" results)
	ledger=$(field "$sum" ledger_total)
	sessions=$(get /admin/sessions) || die "GET /admin/sessions failed"
	expired=$(count_of "$sessions" '"status":"expired"')
	dup=$((ledger - results))
	st=$(get /admin/stats) || die "GET /admin/stats failed"
	# Each run charged once: the ledger of a sample of runs, one charge each.
	for ((i = 1; i <= 20; i++)); do
		rid=retain-$(((i * 7919) % total + 1))
		sample=$(get "/admin/runs/$rid") || { bad=$((bad + 1)); continue; }
		[ "$(count_of "$sample" '"charge":')" -eq 1 ] || bad=$((bad + 1))
	done
	retained "$d"
	loops_alive
	echo "want=$want results=$results ledger=$ledger dup=$dup expired=$expired undelivered=$tot" \
		"refused=$refused_n ledger_sample_bad=$bad dead=$dead gated_rate=$(field "$st" gated_rate)" \
		"retry_after_max=$(field "$st" retry_after_max) paced=$(field "$st" paced)" \
		"batch_max=$(field "$st" commit_batch_max) batches=$(field "$st" commit_batches)" \
		"batched=$(field "$st" commit_results) limit_lowest=$(field "$st" gate_limit_lowest)" \
		"$(first_delivery "$d")" "$(delivery_failures "$d")" >"$d/end"
	say "$mode: recorded $results of $want; ledger $ledger; expired $expired; undelivered $tot; loops ended $dead"

	say "$mode: stopping the fleet"
	cleanup
	analyse "$d" "$mode"
}

# --- figures ------------------------------------------------------------------------
# analyse DIR MODE: DIR/fig (figures, KEY=VALUE) and the picture's data,
# DATA/fleet-MODE.dat (x, fleet requests/s, in flight, 429s/s, results
# recorded/s) and DATA/fleet-probe-MODE.dat (x, heartbeat ms).  x: seconds
# from the restart; the steady window is moved to end GAP seconds before
# the kill (the retain phase between them is left out).
# Fleet requests/s: the dispatcher's own count, less the bench's requests
# in the window (the sampler's, and the probe's heartbeats that reached it).
# In flight: sampled once a second, less the sampler's own request.
# The recovery ends at the first sample that counts every result.
GAP=6
analyse() {
	local d=$1 mode=$2
	awk -v gap="$GAP" -v dat="$DATA/fleet-$mode.dat" -v pdat="$DATA/fleet-probe-$mode.dat" \
		-v want="$(sed -n 's/.*want=\([0-9]*\).*/\1/p' "$d/end")" -v cores="$(nproc)" '
	function pct(a, n, p,   i, j, t, k) {   # nearest rank, after an insertion sort into s_
		for (i = 1; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && s_[j] > t; j--) s_[j + 1] = s_[j]; s_[j + 1] = t }
		k = int(p * n + 0.999999); if (k < 1) k = 1; if (k > n) k = n
		return n ? s_[k] : 0
	}
	function xof(t) {   # the x of time t in the picture, or "" outside it
		if (t >= ph["steady"] && t <= ph["steady_end"]) return t + shift
		if (t >= ph["kill"]) return t - ph["restart"]
		return ""
	}
	FILENAME ~ /phases$/ { ph[$1] = $2; next }
	FILENAME ~ /probe$/ { np++; pt[np] = $1; pc[np] = $2; pl[np] = $3; next }
	{ ns++; st[ns] = $1; su[ns] = $2; sr[ns] = $3; sf[ns] = $4; sg[ns] = $5; sres[ns] = $6; so[ns] = $8
	  sb[ns] = $9; sa[ns] = $10; scg[ns] = $11; skh[ns] = $12; skf[ns] = $13; skr[ns] = $14
	  sl[ns] = $15; scb[ns] = $16; scr[ns] = $17 }
	END {
		shift = ph["kill"] - ph["restart"] - gap - ph["steady_end"]
		# the end of the recovery: the first sample after the restart with every result
		rend = ""
		for (i = 1; i <= ns; i++)
			if (st[i] > ph["restart"] && su[i] == "up" && sres[i] != "-" && sres[i] >= want) { rend = st[i]; break }
		recovered = rend != ""
		if (!recovered) rend = ph["end"]
		j = 1; lu = 0; lr = 0   # the last sample that answered; the last with a results count
		for (i = 1; i <= ns; i++) {
			t = st[i]
			rate = ""; fl = ""; rr = ""; g = ""; bs = "NaN"
			# The first window after the restart runs from the restart to the
			# first sample at least 0.9 s after it: a rate over a shorter
			# window is not the rate of a 1-s window (a burst of 30 requests in the
			# first 0.3 s read as 114 a second).
			if (su[i] == "up" && lu && st[lu] < ph["restart"] && t > ph["restart"] && t - ph["restart"] < 0.9) continue
			if (su[i] == "up") {
				# the probe heartbeats that reached the dispatcher in this window
				pw = 0
				while (j <= np && pt[j] <= t) { if (lu && pt[j] > st[lu] && pc[j] != "000") pw++; j++ }
				if (lu && sr[i] >= sr[lu] && !(st[lu] < ph["restart"] && t > ph["restart"])) {
					dt = t - st[lu]; dr = sr[i] - sr[lu]; dg = sg[i] - sg[lu]
					dkh = skh[i] - skh[lu]; dkf = skf[i] - skf[lu]; dkr = skr[i] - skr[lu]
					dcb = scb[i] - scb[lu]; dcr = scr[i] - scr[lu]
				} else if (lu) {   # the first window after the restart: the counters start at 0
					dt = t - ph["restart"]; dr = sr[i]; dg = sg[i]; dkh = skh[i]; dkf = skf[i]; dkr = skr[i]
					dcb = scb[i]; dcr = scr[i]
				} else dt = 0
				if (scb[i] != "-" && scb[i] != "" && dcb > 0) bs = dcr / dcb   # results a commit, this window
				if (dt > 0.2) {
					rate = (dr - so[i] - pw) / dt; if (rate < 0) rate = 0
					g = dg / dt
				}
				if (sres[i] != "-") {
					if (lr && t > st[lr]) rr = (sres[i] - sres[lr]) / (t - st[lr])
					lr = i
				}
				fl = sf[i] - 1; if (fl < 0) fl = 0
				lu = i
			}
			if (t > ph["steady"] && t <= ph["steady_end"] && rate != "") {
				n1++; s_rate += rate; s_fl += fl; if (fl > s_flmax) s_flmax = fl
				da = sa[i] - sa[i - 1]; if (da > 0) { nc++; cpu += (sb[i] - sb[i - 1]) / da }
				if (scg[i] != "-" && scg[i - 1] != "-") { ncg++; cg += (scg[i] - scg[i - 1]) / 1e6 / (t - st[i - 1]) }
			}
			if (t > ph["restart"] && t <= rend + 0.001 && rate != "") {
				if (rate > peak) {
					peak = rate; peak_at = t - ph["restart"]
					# what the peak is made of (less the probe heartbeats)
					pk = skh[i] == "-" ? "-" : sprintf("%.0f/%.0f/%.0f", (dkh - pw) / dt, dkf / dt, dkr / dt)
				}
				if (fl > r_flmax) r_flmax = fl; if (rr != "" && rr > r_resmax) r_resmax = rr
				if (sl[i] != "-" && sl[i] != "") {
					if (r_lmin == "" || sl[i] + 0 < r_lmin) r_lmin = sl[i] + 0
					if (sl[i] + 0 > r_lmax) r_lmax = sl[i] + 0
				}
				if (bs != "NaN" && bs > r_bsmax) r_bsmax = bs
			}
			if (t > ph["restart"] && t <= rend + 0.001 && scg[i] != "-" && scg[i - 1] != "-") {
				ncr++; cgr += (scg[i] - scg[i - 1]) / 1e6 / (t - st[i - 1])
			}
			x = xof(t)
			if (x != "") {
				if (t >= ph["kill"] && !brk) { print "" > dat; brk = 1 }
				if (su[i] == "down") print x, "NaN", "NaN", "NaN", "NaN", "NaN", "NaN" > dat
				else if (rate != "") printf "%.2f %.1f %d %.1f %s %s %s\n", x, rate, fl, g, (rr == "" ? "NaN" : sprintf("%.1f", rr)),
					(sl[i] == "-" || sl[i] == "" ? "NaN" : sl[i]), (bs == "NaN" ? bs : sprintf("%.1f", bs)) > dat
			}
		}
		for (i = 1; i <= np; i++) {
			t = pt[i]; ms = pl[i] * 1000
			if (t > ph["steady"] && t <= ph["steady_end"] && pc[i] == 200) hs[++nhs] = ms
			if (t > ph["restart"] && t <= rend) { hr[++nhr] = ms; if (pc[i] != 200) hfail++ }
			x = xof(t)
			if (x != "") {
				if (t >= ph["kill"] && !pbrk) { print "" > pdat; pbrk = 1 }
				printf "%.2f %s\n", x, (pc[i] == 200 ? sprintf("%.2f", ms) : "NaN") > pdat
			}
		}
		# the best sustained 5-s window of results recorded, in the recovery
		# (a recovery shorter than that: its whole length, first sample to last)
		for (i = 1; i <= ns; i++) {
			if (st[i] <= ph["restart"] || st[i] > rend + 0.001 || su[i] != "up" || sres[i] == "-") continue
			if (!w_first) w_first = i
			w_last = i
			for (k = i - 1; k >= 1 && st[k] > ph["restart"] && su[k] == "up" && sres[k] != "-"; k--)
				if (st[i] - st[k] >= 5) { w5 = (sres[i] - sres[k]) / (st[i] - st[k]); if (w5 > r_res5) r_res5 = w5; break }
		}
		if (r_res5 == 0 && w_first && st[w_last] > st[w_first])
			r_res5 = (sres[w_last] - sres[w_first]) / (st[w_last] - st[w_first])
		steady = n1 ? s_rate / n1 : 0
		printf "steady_rate=%.1f\n", steady
		printf "steady_inflight=%.2f\nsteady_inflight_max=%d\n", (n1 ? s_fl / n1 : 0), s_flmax
		printf "steady_cpu=%.0f\n", (nc ? 100 * cpu / nc : 0)
		printf "steady_cg=%s\n", (ncg ? sprintf("%.0f", 100 * cg / ncg / cores) : "-")
		printf "rec_cg=%s\n", (ncr ? sprintf("%.0f", 100 * cgr / ncr / cores) : "-")
		printf "hb_steady_p50=%.1f\nhb_steady_p99=%.1f\n", pct(hs, nhs, 0.5), pct(hs, nhs, 0.99)
		printf "hb_rec_p50=%.1f\nhb_rec_p99=%.1f\n", pct(hr, nhr, 0.5), pct(hr, nhr, 0.99)
		printf "hb_rec_n=%d\nhb_rec_failed=%d\n", nhr, hfail
		printf "peak=%.1f\npeak_at=%.1f\nP=%.2f\npeak_kinds=%s\n", peak, peak_at, (steady > 0 ? peak / steady : 0), pk
		printf "rec_inflight_max=%d\nrec_results_peak=%.0f\nrec_results_5s=%.0f\n", r_flmax, r_resmax, r_res5
		printf "rec_limit=%s\nrec_batch_max=%s\n", (r_lmin == "" ? "-" : r_lmin ".." r_lmax), (r_bsmax == "" ? "-" : sprintf("%.1f", r_bsmax))
		printf "recovered=%d\nrecovery_s=%.1f\n", recovered, rend - ph["restart"]
		printf "x_kill=%.2f\nx_steady=%.2f\nx_done=%.2f\n", ph["kill"] - ph["restart"], ph["steady"] + shift, rend - ph["restart"]
		printf "gated=%d\n", sg[ns]
	}' "$d/phases" "$d/probe" "$d/samples" >"$d/fig"
	tr ' ' '\n' <"$d/end" >>"$d/fig"
	tr ' ' '\n' <"$d/retain" >>"$d/fig"
	awk -F= -v n="$N" '{ f[$1] = $2 } END {
		printf "rmean=%.1f\n", f["retained"] / n
		printf "rec_rate=%.0f\n", (f["recovery_s"] > 0 ? f["retained"] / f["recovery_s"] : 0)
		printf "batch_mean=%s/%.1f\n", f["batch_max"], (f["batches"] > 0 ? f["batched"] / f["batches"] : 0) }' \
		"$d/fig" >>"$d/fig.more"
	cat "$d/fig.more" >>"$d/fig"
}

fig() { awk -F= -v k="$2" '$1 == k { print $2 }' "$work/$1/fig"; }   # MODE KEY

# --- the dispatcher's sustainable result rate: one client posting results ----------
floor_rate=
floor_bin=
floor_m=$((N * R < 1000 ? N * R : 1000))
floor_build() {
	local d=$work/floor
	mkdir -p "$d"
	read -ra cu_cflags <<<"$(pkg-config --cflags libcurl 2>/dev/null)"
	read -ra cu_libs <<<"$(pkg-config --libs libcurl 2>/dev/null || echo -lcurl)"
	if cc -O2 -Wall -Wextra "${cu_cflags[@]}" -o "$d/floor_drain" "$here/floor_drain.c" "${cu_libs[@]}" 2>"$d/cc.log"; then
		floor_bin=$d/floor_drain
	else
		say "note: cannot build floor_drain (cc, libcurl dev; see $d/cc.log): no measured result rate"
	fi
}
floor_round() {   # R: one round into $work/floor/rates (a fresh dispatcher, floor_m results)
	local d=$work/floor/$1 out
	[ -n "$floor_bin" ] || return 0
	mkdir -p "$d"
	start_dispatcher "$d" 0 --lease-ms 3600000
	submit drain 1 "$floor_m" || die "POST /admin/runs failed"
	out=$("$floor_bin" "$url" "$floor_m" 1764500000000) || die "floor_drain failed"
	echo "${out##* }" >>"$work/floor/rates"
	kill -TERM "$disp_pid"
	wait "$disp_pid" 2>/dev/null || true
	disp_pid=
	rm -rf "$d"
}

# --- main ------------------------------------------------------------------------
t_all=$SECONDS
cgroup_enter
read -r load _ </proc/loadavg
say "build $B, exec-loop $loop; $N executors, $R results each; tick ${TICK}s, slots $SLOTS;" \
	"gate $GATE; jitter: $jitter_note; probe at nice $PROBE_NICE; CPUs: ${disp_cpu[*]:+the dispatcher and the probe on 0, the fleet on the rest}${disp_cpu[*]:-shared}; load average now $load"
# The dispatcher's result rate, one client: three rounds, before, between
# and after the two runs, so that a machine whose load drifts hits both.
floor_build
floor_round 1
for mode in nogate gate; do
	s=$SECONDS
	fleet_run "$mode"
	echo "took=$((SECONDS - s))" >>"$work/$mode/fig"
	floor_round "$mode"
done
[ -z "$floor_bin" ] || floor_rate=$(sort -g "$work/floor/rates" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')

# --- the table ----------------------------------------------------------------------
total=$(fig gate retained)
read -r load_end _ </proc/loadavg
declare -A z
{
	echo "fleet bench: $N executors (exec-loop --tick $TICK --slots $SLOTS), $R results each; steady work $WORK /bin/true runs/s"
	echo "gate: --gate adaptive, caps --max-inflight $GATE --max-rate $MAX_RATE --rate-wait-ms $RATE_WAIT (0: none) --retry-after 1 (plus a spread); no gate: --gate off; jitter: $jitter_note; probe: $PROBE_HZ heartbeats/s at nice $PROBE_NICE; load average at start $load, at end $load_end"
	if [ -n "$floor_rate" ]; then
		echo "dispatcher result rate, one client (floor_drain, $floor_m results; before, between, after the runs):" \
			"$(tr '\n' ' ' <"$work/floor/rates")-> median $floor_rate results/s"
	fi
	printf '%-46s | %12s | %12s\n' "" "no gate" "gate"
	row() { printf '%-46s | %12s | %12s\n' "$1" "$(fig nogate "$2")$3" "$(fig gate "$2")$3"; }
	row "steady: fleet requests/s (mean of 1-s windows)" steady_rate ""
	row "steady: in flight (mean of samples)" steady_inflight ""
	row "steady: CPU of the bench (cgroup), of $(nproc) cores" steady_cg " %"
	row "steady: CPU busy, whole machine" steady_cpu " %"
	row "steady: heartbeat p50" hb_steady_p50 " ms"
	row "steady: heartbeat p99" hb_steady_p99 " ms"
	row "retain: results retained" retained ""
	row "retain: per executor, least" rmin ""
	row "retain: per executor, mean" rmean ""
	row "retain: per executor, most" rmax ""
	row "retain: seconds to retain them" retain_s " s"
	row "recovery: time to record every result" recovery_s " s"
	row "recovery: peak requests/s (1-s window)" peak ""
	row "recovery: peak / steady (P)" P ""
	row "recovery: at the peak, heartbeats/feeds/reports" peak_kinds " /s"
	row "recovery: in flight, most sampled" rec_inflight_max ""
	row "recovery: CPU of the bench (cgroup)" rec_cg " %"
	row "recovery: results recorded/s, best window" rec_results_peak ""
	row "recovery: results recorded/s, best 5-s window" rec_results_5s ""
	row "recovery: results recorded/s, whole recovery" rec_rate ""
	row "recovery: gate limit, lowest..highest sampled" rec_limit ""
	row "recovery: gate limit, lowest since start" limit_lowest ""
	row "recovery: results a commit, most in a 1-s window" rec_batch_max ""
	row "run: results a commit, most / mean" batch_mean ""
	row "recovery: executors' first delivery, p50" first_p50 " s"
	row "recovery: executors' first delivery, p90" first_p90 " s"
	row "recovery: executors' first delivery, last" first_max " s"
	row "recovery: failed deliveries (executors' logs)" failed ""
	row "recovery: of which timeouts (no answer in time)" timeouts ""
	row "recovery: 429 answered (gated_429)" gated ""
	row "recovery: of which past --max-rate" gated_rate ""
	row "recovery: longest Retry-After told" retry_after_max " s"
	row "recovery: waited for a turn (paced)" paced ""
	row "recovery: heartbeat p50" hb_rec_p50 " ms"
	row "recovery: heartbeat p99" hb_rec_p99 " ms"
	row "recovery: probe heartbeats failed" hb_rec_failed ""
	row "sessions expired" expired ""
	row "duplicate charges (ledger_total - results)" dup ""
	row "ledger sample (20 runs) not charged once" ledger_sample_bad ""
	row "undelivered (retained in executor states)" undelivered ""
	row "refused (in executor states)" refused ""
	row "executors that ended early" dead ""
	row "seconds the run took" took " s"
	for m in nogate gate; do
		echo "failed deliveries in the recovery, $m, by reason (count, then the executor's words; digits as N):"
		sed 's/^/    /' "$work/$m/failures" | head -n 8
		[ -s "$work/$m/failures" ] || echo "    none"
	done
	# The goals of issue 44, each run against them.
	goal() { printf '%-46s | %16s | %16s\n' "$1" "$2" "$3"; }
	verdict() { if awk "BEGIN { exit !($1) }"; then echo "$2 met"; else echo "$2 missed"; fi; }
	echo
	goal "goal" "no gate" "gate"
	goal "gated recovery <= 1.5 x ungated (s)" "-" \
		"$(verdict "$(fig gate recovered) && $(fig gate recovery_s) <= 1.5 * $(fig nogate recovery_s)" \
			"$(fig gate recovery_s)/$(calc '%.1f' "1.5 * $(fig nogate recovery_s)")")"
	goal "recovery rate >= 0.5 x ungated best 5-s (/s)" "-" \
		"$(verdict "$(fig gate rec_rate) >= 0.5 * $(fig nogate rec_results_5s)" \
			"$(fig gate rec_rate)/$(calc '%.0f' "0.5 * $(fig nogate rec_results_5s)")")"
	goal "peak/steady P (no goal now)" "$(fig nogate P)" "$(fig gate P)"
	goal "heartbeat p99, recovery <= 2 x steady (ms)" \
		"$(verdict "$(fig nogate hb_rec_p99) <= 2 * $(fig nogate hb_steady_p99)" "$(fig nogate hb_rec_p99)/$(calc '%.0f' "2 * $(fig nogate hb_steady_p99)")")" \
		"$(verdict "$(fig gate hb_rec_p99) <= 2 * $(fig gate hb_steady_p99)" "$(fig gate hb_rec_p99)/$(calc '%.0f' "2 * $(fig gate hb_steady_p99)")")"
	for m in nogate gate; do
		z[$m]=$(verdict "$(fig $m expired) + $(fig $m dup) + $(fig $m undelivered) == 0" \
			"$(fig $m expired)/$(fig $m dup)/$(fig $m undelivered)")
	done
	goal "0 expired / 0 duplicates / 0 undelivered" "${z[nogate]}" "${z[gate]}"
	[ -z "$floor_rate" ] || echo "(the dispatcher's result rate for one client, measured above: $floor_rate results/s;" \
		"the ungated run's best 5-s window recorded $(fig nogate rec_results_5s) results/s)"
} | tee "$DATA/fleet-table.txt"

# --- the picture (bench/fleet-plot.sh) ------------------------------------------------
# shellcheck source=bench/fleet-plot.sh
. "$(dirname "$0")/fleet-plot.sh"
fleet_plot
say "done in $((SECONDS - t_all)) s"

line() {   # MODE PREFIX
	local s
	s=$(fig "$1" recovery_s)
	[ "$(fig "$1" recovered)" = 1 ] || s=">$s"
	echo "$2: $N executors, $(fig "$1" retained) results, recovered in $s s, peak/steady $(fig "$1" P)," \
		"duplicates $(fig "$1" dup), expired sessions $(fig "$1" expired), undelivered $(fig "$1" undelivered)"
}
line nogate "fleet (no gate)"
line gate fleet
