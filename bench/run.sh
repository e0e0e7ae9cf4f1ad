#!/bin/bash
# bench/run.sh [NAME...] — execkit's benchmarks, each printed beside a floor
# measured on this machine in this same run, as a ratio (median of
# BENCH_ROUNDS rounds).  NAME: accept-one accept-batch lookup loop-e2e
# drain pass completion retention isolation (default: all).  Benchmarks print figures; they assert nothing, but exit
# non-zero when a command under test fails.  See bench/README.md.
set -euo pipefail
export LC_ALL=C   # a '.' decimal point in $EPOCHREALTIME and awk

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${EXECKIT_BUILDDIR:-$top/build}
ALL=(accept-one accept-batch lookup loop-e2e drain pass completion retention isolation)

usage() {
	cat <<USAGE
Usage: bench/run.sh [NAME...]
Run execkit's benchmarks against floors measured in the same run.
NAME is one of: ${ALL[*]} (default: all of them).

Environment (defaults in brackets):
  EXECKIT_BUILDDIR     the build to measure [$top/build]
  BENCH_ROUNDS         rounds per benchmark; the median is printed [5]
  BENCH_ACCEPT_N       accept-one: invocations per round [200]
  BENCH_BATCH_N        accept-batch: runs in the one batch [100000]
  BENCH_BATCH_COMMITS  accept-batch: single-row commits of the floor [2000]
  BENCH_LOOKUP_ROWS    lookup: rows in the state [1000000]
  BENCH_LOOKUP_N       lookup: invocations per round [200]
  BENCH_STANDIN_N      lookup: invocations per round of the stand-in [5]
  BENCH_LOOP_N         loop-e2e: runs per round [200]
  BENCH_LOOP_TIMEOUT   loop-e2e: seconds a round may take at most [300]
  BENCH_PACED_N        loop-e2e: runs of /bin/sleep 0.1 per round [80]
  BENCH_DRAIN_N        drain: retained results drained per round [10000]
  BENCH_PASS_ROWS      pass: undeliverable rows in the big state [1000000]
  BENCH_PASS_MAX       pass: deliverable results, one pass's --max [32]
  BENCH_PASS_N         pass: passes per state per round (mean) [5]
  BENCH_COMPLETE_ROWS  completion: queued runs of the current session [100000]
  BENCH_COMPLETE_N     completion: completions per round (mean) [20]
  BENCH_RETAIN_N       retention: runs delivered, then pruned and compacted [10000]
  BENCH_ISOLATE_N      isolation: guests spawned per way and round [400]
  BENCH_KEEP=1         keep the temporary directory
USAGE
}

num() {   # NAME DEFAULT: a positive integer from the environment
	local v=${!1:-$2}
	case $v in '' | *[!0-9]* | 0) echo "bench: $1='$v' is not a positive integer" >&2; exit 64 ;; esac
	echo "$v"
}
ROUNDS=$(num BENCH_ROUNDS 5)
ACCEPT_N=$(num BENCH_ACCEPT_N 200)
BATCH_N=$(num BENCH_BATCH_N 100000)
BATCH_COMMITS=$(num BENCH_BATCH_COMMITS 2000)
LOOKUP_ROWS=$(num BENCH_LOOKUP_ROWS 1000000)
LOOKUP_N=$(num BENCH_LOOKUP_N 200)
STANDIN_N=$(num BENCH_STANDIN_N 5)
LOOP_N=$(num BENCH_LOOP_N 200)
LOOP_TIMEOUT=$(num BENCH_LOOP_TIMEOUT 300)
PACED_N=$(num BENCH_PACED_N 80)
DRAIN_N=$(num BENCH_DRAIN_N 10000)
PASS_ROWS=$(num BENCH_PASS_ROWS 1000000)
PASS_MAX=$(num BENCH_PASS_MAX 32)
PASS_N=$(num BENCH_PASS_N 5)
COMPLETE_ROWS=$(num BENCH_COMPLETE_ROWS 100000)
COMPLETE_N=$(num BENCH_COMPLETE_N 20)
RETAIN_N=$(num BENCH_RETAIN_N 10000)
ISOLATE_N=$(num BENCH_ISOLATE_N 400)
[ "$PASS_MAX" -le 256 ] || { echo "bench: BENCH_PASS_MAX='$PASS_MAX' is more than exec-reconcile's --max allows (256)" >&2; exit 64; }

names=()
for a in "$@"; do
	case $a in
	-h | --help) usage; exit 0 ;;
	accept-one | accept-batch | lookup | loop-e2e | drain | pass | completion | retention | isolation) names+=("$a") ;;
	*) echo "bench: unknown benchmark '$a' (one of: ${ALL[*]})" >&2; exit 64 ;;
	esac
done
[ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")

die() { echo "bench: $*" >&2; exit 1; }

# --- what we need ---------------------------------------------------------
missing=()
for t in cc pkg-config sqlite3 curl strace /usr/bin/time awk; do
	command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench: missing: ${missing[*]}" >&2
	echo "bench: on Debian: apt-get install gcc pkg-config libsqlite3-dev libcurl4-openssl-dev sqlite3 curl strace time" >&2
	exit 69
fi
# The peers a row compares with: a row whose peer is not installed is
# skipped, and said so (Debian: task-spooler, parallel).
have() { command -v "$1" >/dev/null 2>&1; }
skip() { echo "bench: $1 is not installed: skipping the row \"$2\"" >&2; row "$2" "-" "(not installed)" "-" "-"; }
for t in exec-accept exec-session exec-dispatcher exec-inspect exec-run exec-reconcile; do
	[ -x "$B/$t" ] || die "$B/$t not found: build first (scripts/build.sh) or set EXECKIT_BUILDDIR"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/execkit-bench.XXXXXX")
bin=$work/bin
mkdir -p "$bin"
disp_pids=()
loop_pid=
tsp_sock=
cleanup() {
	local p
	if [ -n "$loop_pid" ]; then kill -KILL "$loop_pid" 2>/dev/null || true; fi
	if [ -n "$tsp_sock" ]; then TS_SOCKET=$tsp_sock tsp -K >/dev/null 2>&1 || true; fi
	for p in "${disp_pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -z "$cpu_cg" ] || rmdir "$cpu_cg" 2>/dev/null || true
	if [ "${BENCH_KEEP:-}" = 1 ]; then
		echo "bench: kept $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# CPU per run: a round's processes run in a cgroup v2 of the bench's own,
# whose cpu.stat counts them all (usage_usec), however they are spawned
# and reparented.  None where no cgroup can be made: the rows say so.
cpu_cg=
# own_cgroup: our cgroup v2 directory (the cgroup2 mount + our cgroup), or
# nothing where there is none.
own_cgroup() {
	local mnt own
	mnt=$(awk '{ for (i = 7; $i != "-"; i++); if ($(i + 1) == "cgroup2") { print $5; exit } }' /proc/self/mountinfo)
	own=$(sed -n 's/^0:://p' /proc/self/cgroup)
	[ -z "$mnt" ] || [ -z "$own" ] || echo "$mnt${own%/}"
}
cpu_cg_setup() {
	local own
	own=$(own_cgroup)
	[ -n "$own" ] || return 0
	cpu_cg=$own/execkit-bench.$$
	mkdir "$cpu_cg" 2>/dev/null && [ -r "$cpu_cg/cpu.stat" ] || cpu_cg=
}
cpu_usec() { [ -n "$cpu_cg" ] && awk '$1 == "usage_usec" { print $2 }' "$cpu_cg/cpu.stat"; }
# in_cpu_cg CMD...: join the cgroup and become CMD.  It execs: call it in
# a subshell of its own, "(in_cpu_cg ...)" or "in_cpu_cg ... &".
in_cpu_cg() {
	[ -z "$cpu_cg" ] || echo "$BASHPID" >"$cpu_cg/cgroup.procs" || exit 1
	exec "$@"
}

# A sleep that starts no process: a read that times out on a silent fifo.
mkfifo "$work/idle"
exec {idle_fd}<>"$work/idle"
nap() { read -r -t "$1" -u "$idle_fd" _ || true; }
cpu_cg_setup

# --- the floor programs and the timer ---------------------------------------
cflags=(-O2 -g -Wall -Wextra)
read -ra sq_cflags <<<"$(pkg-config --cflags sqlite3)"
read -ra sq_libs <<<"$(pkg-config --libs sqlite3)"
read -ra cu_cflags <<<"$(pkg-config --cflags libcurl)"
read -ra cu_libs <<<"$(pkg-config --libs libcurl)"
cc "${cflags[@]}" -o "$bin/spawnloop" "$here/spawnloop.c"
cc "${cflags[@]}" -o "$bin/isolate_cost" "$here/isolate_cost.c"
# The SQLite floors link libsqlite3 as the tools do: statically when
# libsqlite3.a is installed (configure's --enable-static-deps).
floor_link=dynamic
[ -e "$(cc -print-file-name=libsqlite3.a)" ] && floor_link=static
floor_sq() {   # NAME: bench/NAME.c into $bin/NAME
	local -a link=("${sq_libs[@]}")
	[ "$floor_link" = dynamic ] || link=("-Wl,-Bstatic" "${sq_libs[@]}" "-Wl,-Bdynamic" -lm)
	cc "${cflags[@]}" "${sq_cflags[@]}" -o "$bin/$1" "$here/$1.c" "${link[@]}" || die "building $1 failed"
}
floor_sq floor_insert
# floor_lookup is linked as exec-inspect is: wholly statically when
# configure could (--enable-static-inspect), with its stand-in for dlopen().
lookup_link=$floor_link
if readelf -lW "$B/exec-inspect" 2>/dev/null | grep -q 'Program Headers' &&
	! readelf -lW "$B/exec-inspect" | grep -q INTERP; then
	lookup_link="wholly static"
	cc "${cflags[@]}" -Wno-unused-parameter "${sq_cflags[@]}" -static -Wl,--wrap=dlopen,--wrap=dlsym,--wrap=dlclose,--wrap=dlerror \
		-o "$bin/floor_lookup" "$here/floor_lookup.c" "$here/../libcommon/nodl.c" "${sq_libs[@]}" -lm ||
		die "building floor_lookup failed"
else
	floor_sq floor_lookup
fi
cc "${cflags[@]}" "${cu_cflags[@]}" -o "$bin/floor_post" "$here/floor_post.c" "${cu_libs[@]}"
cc "${cflags[@]}" "${cu_cflags[@]}" -o "$bin/floor_drain" "$here/floor_drain.c" "${cu_libs[@]}"

# --- helpers ------------------------------------------------------------------
results=$work/results.tsv
: >"$results"
# bulk_begin SUFFIX OPENED_MS: the start of a bulk load written straight
# with the sqlite3 shell: fast settings, BEGIN, and an earlier session
# inc-SUFFIX/ses-SUFFIX, replaced, for the generated rows to belong to.
bulk_begin() {
	cat <<SQL
PRAGMA synchronous=OFF; PRAGMA cache_size=-262144; PRAGMA temp_store=MEMORY;
BEGIN;
INSERT INTO sessions(incarnation, session_id, dispatcher, credential, status, opened_at, ended_at, lease_ms, heartbeat_ms)
	VALUES ('inc-$1', 'ses-$1', 'http://127.0.0.1:9', '-', 'replaced', $2, $(($2 + 1000)), 30000, 2000);
SQL
}

row() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$results"; }   # name ours floor ratio target

median() { sort -g "$1" | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }   # FORMAT EXPR
ms() { calc '%.2f ms' "$1 / 1000"; }             # microseconds -> "x.xx ms"
ratio() { calc '%.2fx' "$1 / $2"; }

# spawn_us SPAWNLOOP-ARGS...: microseconds per invocation (spawnloop.c).
spawn_us() {
	local out
	out=$("$bin/spawnloop" "$@") || die "a command under test failed: ${*}"
	echo "${out##* }"
}

start_dispatcher() {   # DIR [OPTION...]: starts one on 127.0.0.1; sets url and port
	local d=$1 i
	"$B/exec-dispatcher" --port 0 --port-file "$d/port" --store "$d/dispatcher.db" --quiet "${@:2}" &
	disp_pids+=("$!")
	for i in $(seq 1 200); do
		[ -s "$d/port" ] && break
		nap 0.05
	done
	[ -s "$d/port" ] || die "exec-dispatcher did not start"
	port=$(<"$d/port")
	url="http://127.0.0.1:$port"
	admin_enroll "$d"
}

# admin_enroll DIR: the admin token the dispatcher made beside its store
# into $admin_token and, as a header line, into $admin_auth (a 0600 file,
# for curl -H @FILE: never on a command line); then an enrollment token for
# the executors the bench opens sessions for (exec-session open and the
# floor clients read it through EXEC_ENROLL_TOKEN_FILE).
admin_enroll() {
	local resp
	IFS= read -r admin_token <"$1/dispatcher.db.admin-token" || die "no admin token in $1"
	admin_auth=$1/admin.auth
	(umask 077 && printf 'Authorization: Bearer %s\n' "$admin_token" >"$admin_auth")
	resp=$(curl -sS --fail --max-time 30 -H @"$admin_auth" -X POST -d '{"uses":1000000}' \
		"$url/admin/enrollments") || die "POST /admin/enrollments failed"
	[[ $resp =~ \"enroll_token\":\"([0-9a-f]+)\" ]] || die "POST /admin/enrollments: $resp"
	(umask 077 && printf '%s\n' "${BASH_REMATCH[1]}" >"$1/enroll-token")
	export EXEC_ENROLL_TOKEN_FILE=$1/enroll-token
}

stop_dispatcher() {   # the one start_dispatcher started last
	local p=${disp_pids[-1]}
	kill -TERM "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
	unset 'disp_pids[-1]'
}

open_session() {   # STATE-DIR
	"$B/exec-session" --state-dir "$1" open --dispatcher "$url" >"$1.open.log" ||
		die "exec-session open failed ($1.open.log)"
}

# tcp_exchange REQUEST: one HTTP/1.1 exchange with the dispatcher over
# bash's own /dev/tcp (no process started), the answer into $resp.
tcp_exchange() {
	resp=
	exec {fd}<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s' "$1" >&"$fd"
	read -r -d '' -t 30 -u "$fd" resp || true
	exec {fd}<&-
}

# dispatcher_count PATH KEY: the number GET PATH answers for KEY, into
# $counted, with no process started beside the one measured.
dispatcher_count() {
	local resp
	counted=
	tcp_exchange "GET $1 HTTP/1.1"$'\r\nHost: 127.0.0.1\r\nAuthorization: Bearer '"$admin_token"$'\r\nConnection: close\r\n\r\n' ||
		return 1
	[[ $resp =~ \"$2\":([0-9]+) ]] && counted=${BASH_REMATCH[1]}
	[ -n "$counted" ]
}

# The dispatcher's count of finished runs, into $finished.
poll_finished() { dispatcher_count /admin/summary finished && finished=$counted; }

# The dispatcher's count of result requests received, into $reported.
# /admin/stats reads counters kept in memory, where /admin/summary takes
# the store's lock and counts every run it holds: polled every 20 ms, the
# summary alone slowed floor_post down 8% (bench/README.md, loop-e2e), so
# a round that waits on its results watches this instead and reads the
# summary only to confirm the end.
poll_reported() { dispatcher_count /admin/stats result && reported=$counted; }

# post_runs BODY: POST /admin/runs with no process started, so that the
# latency measured from it is the loop's (curl's own start is 20 ms and
# more on a slow machine); 0 on a 2xx answer.
post_runs() {
	local resp req
	printf -v req 'POST /admin/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
		"$admin_token" "${#1}" "$1"
	tcp_exchange "$req" || return 1
	[[ $resp =~ ^HTTP/1\.[01]\ 2[0-9][0-9] ]]
}

submit_runs() {   # PREFIX N: POST /admin/runs with N trivial runs
	local i body=
	for ((i = 1; i <= $2; i++)); do
		body+="${body:+,}{\"run_id\":\"$1-$i\",\"txn_id\":\"$1-t$i\",\"program\":\"/bin/true\"}"
	done
	curl -sS --fail --max-time 30 -H @"$admin_auth" -X POST "$url/admin/runs" -H 'Content-Type: application/json' \
		-d "{\"runs\":[$body]}" >/dev/null || die "POST /admin/runs failed"
}

syncs() {   # STRACE-SUMMARY-FILE: fsync + fdatasync calls
	awk '$NF == "fdatasync" || $NF == "fsync" { s += $4 } END { print s + 0 }' "$1"
}

# --- 1. accept-one ------------------------------------------------------------
bench_accept_one() {
	local d=$work/accept-one r off line f
	mkdir -p "$d/tsp"
	start_dispatcher "$d"
	open_session "$d/state"
	line='{"run_id":"one-%N","txn_id":"t-%N","program":"/bin/true"}'
	tsp_sock=$d/tsp.sock
	local -a tsp=(env "TS_SOCKET=$tsp_sock" "TMPDIR=$d/tsp" tsp -n true)
	# Warm-up (also starts the tsp server), then interleaved rounds.
	spawn_us -i "$line" -o 0 1 -- "$B/exec-accept" --state-dir "$d/state" >/dev/null
	spawn_us -i "$line" -o 0 1 -- "$bin/floor_insert" "$d/floor.db" >/dev/null
	if have tsp; then spawn_us 1 -- "${tsp[@]}" >/dev/null; fi
	for ((r = 1; r <= ROUNDS; r++)); do
		off=$((r * 1000000))
		spawn_us -i "$line" -o "$off" "$ACCEPT_N" -- "$B/exec-accept" --state-dir "$d/state" >>"$d/ours"
		spawn_us -i "$line" "$ACCEPT_N" -- /bin/true >>"$d/true"
		if have tsp; then spawn_us "$ACCEPT_N" -- "${tsp[@]}" >>"$d/tsp.us"; else echo 1 >>"$d/tsp.us"; fi
		spawn_us -i "$line" -o "$off" "$ACCEPT_N" -- "$bin/floor_insert" "$d/floor.db" >>"$d/floor"
	done
	TS_SOCKET=$tsp_sock tsp -K >/dev/null 2>&1 || true
	tsp_sock=
	for f in ours true tsp.us floor; do median "$d/$f" >"$d/$f.med"; done
	row "accept-one vs /bin/true" "$(ms "$(<"$d/ours.med")")" "$(ms "$(<"$d/true.med")")" \
		"$(ratio "$(<"$d/ours.med")" "$(<"$d/true.med")")" "<= 4x"
	if have tsp; then
		row "accept-one vs tsp enqueue" "$(ms "$(<"$d/ours.med")")" "$(ms "$(<"$d/tsp.us.med")")" \
			"$(ratio "$(<"$d/ours.med")" "$(<"$d/tsp.us.med")")" "<= 1.0x"
	else
		skip tsp "accept-one vs tsp enqueue"
	fi
	row "accept-one vs floor_insert ($floor_link)" "$(ms "$(<"$d/ours.med")")" "$(ms "$(<"$d/floor.med")")" \
		"$(ratio "$(<"$d/ours.med")" "$(<"$d/floor.med")")" "-"
	# Syncs of one invocation each, on states already warm.
	printf '{"run_id":"one-strace","txn_id":"t","program":"/bin/true"}\n' |
		strace -f -c -e trace=fdatasync,fsync -o "$d/strace.ours" "$B/exec-accept" --state-dir "$d/state" >/dev/null ||
		die "exec-accept under strace failed"
	echo one-strace | strace -f -c -e trace=fdatasync,fsync -o "$d/strace.floor" "$bin/floor_insert" "$d/floor.db" ||
		die "floor_insert under strace failed"
	local so sf
	so=$(syncs "$d/strace.ours")
	sf=$(syncs "$d/strace.floor")
	row "accept-one fsync+fdatasync per call" "$so" "$sf" "$(if [ "$sf" -gt 0 ]; then ratio "$so" "$sf"; else echo -; fi)" "-"
}

# --- 2. accept-batch ------------------------------------------------------------
bench_accept_batch() {
	local d=$work/accept-batch r us
	mkdir -p "$d"
	start_dispatcher "$d"
	for ((r = 1; r <= ROUNDS; r++)); do
		awk -v n="$BATCH_N" -v r="$r" 'BEGIN { for (i = 1; i <= n; i++)
			printf "{\"run_id\":\"b%d-%d\",\"txn_id\":\"t-%d\",\"program\":\"/bin/true\",\"args\":[\"x\"]}\n", r, i, i }' >"$d/batch.jsonl"
		open_session "$d/state-$r"
		us=$(spawn_us -f "$d/batch.jsonl" 1 -- "$B/exec-accept" --state-dir "$d/state-$r")
		calc '%.0f\n' "$BATCH_N / ($us / 1e6)" >>"$d/ours"
		us=$(spawn_us 1 -- "$bin/floor_insert" "$d/commits-$r.db" "$BATCH_COMMITS")
		calc '%.0f\n' "$BATCH_COMMITS / ($us / 1e6)" >>"$d/commits"
		us=$(spawn_us 1 -- "$bin/floor_insert" "$d/onetxn-$r.db" 1 "$BATCH_N")
		calc '%.0f\n' "$BATCH_N / ($us / 1e6)" >>"$d/onetxn"
		rm -rf "$d/state-$r" "$d/commits-$r.db"* "$d/onetxn-$r.db"*
	done
	local o c t
	o=$(median "$d/ours")
	c=$(median "$d/commits")
	t=$(median "$d/onetxn")
	row "accept-batch ($BATCH_N in 1 txn) vs 1 commit/run" "$o runs/s" "$c runs/s" "$(ratio "$o" "$c")" ">= 20x"
	row "accept-batch vs sqlite insert, 1 txn" "$o runs/s" "$t runs/s" "$(ratio "$o" "$t")" ">= 0.3x"
}

# --- 3. lookup --------------------------------------------------------------------
bench_lookup() {
	local d=$work/lookup r eid sid rid q label n f
	mkdir -p "$d"
	start_dispatcher "$d"
	open_session "$d/state"
	eid=$(sqlite3 -batch -init /dev/null "$d/state/state.db" "SELECT value FROM meta WHERE key='executor_id'")
	sid=$(sqlite3 -batch -init /dev/null "$d/state/state.db" "SELECT session_id FROM sessions WHERE status='current'")
	if [ -z "$eid" ] || [ -z "$sid" ]; then die "cannot read the executor id and session of $d/state"; fi
	# The rows belong to an earlier (replaced) binding: quarantined, so a
	# lookup by the current session finds them.  Half queued, half started.
	sqlite3 -batch -init /dev/null -bail "$d/state/state.db" >/dev/null <<SQL || die "generating $LOOKUP_ROWS rows failed"
$(bulk_begin 00000000000be7c4 1764500000000)
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $LOOKUP_ROWS)
INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
SELECT printf('run-%07d', i), printf('txn-%07d', i), 'inc-00000000000be7c4', 'ses-00000000000be7c4',
	printf('{"args":[],"program":"/bin/true","run_id":"run-%07d","txn_id":"txn-%07d"}', i, i),
	printf('%s:%d', '$eid', i), 1764500000000 + i FROM c;
INSERT INTO runs(run_id, txn_id, incarnation, session_id, program, args, due_at, state, started_at, start_marker)
SELECT run_id, txn_id, incarnation, session_id, '/bin/true', '[]', accepted_at,
	CASE WHEN rowid % 2 THEN 'queued' ELSE 'started' END,
	CASE WHEN rowid % 2 THEN NULL ELSE accepted_at + 5 END,
	CASE WHEN rowid % 2 THEN NULL ELSE 'm-' || rowid END
FROM accepts WHERE session_id = 'ses-00000000000be7c4';
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
SQL
	rid=$(printf 'run-%07d' $(((LOOKUP_ROWS + 1) / 2)))
	q="SELECT a.run_id, a.incarnation, a.session_id, a.txn_id, r.state, r.started_at, r.start_marker, r.due_at"
	q+=" FROM accepts a LEFT JOIN runs r ON r.run_id = a.run_id WHERE a.run_id = '$rid'"
	local -a ours
	if "$B/exec-inspect" --help 2>&1 | grep -q lookup; then
		ours=("$B/exec-inspect" --state-dir "$d/state" lookup "$rid" --session "$sid")
		label=lookup
		n=$LOOKUP_N
	else
		ours=("$B/exec-session" --state-dir "$d/state" report)
		label="lookup (stand-in)"
		n=$STANDIN_N
	fi
	local -a floor=(sqlite3 -batch -init /dev/null "$d/state/state.db" "$q")
	local -a least=("$bin/floor_lookup" "$d/state/state.db" "$rid")
	spawn_us 1 -- "${ours[@]}" >/dev/null
	spawn_us 1 -- "${floor[@]}" >/dev/null
	spawn_us 1 -- "${least[@]}" >/dev/null || die "floor_lookup failed"
	for ((r = 1; r <= ROUNDS; r++)); do
		spawn_us "$n" -- "${ours[@]}" >>"$d/ours"
		spawn_us "$LOOKUP_N" -- /bin/true >>"$d/true"
		spawn_us "$LOOKUP_N" -- "${least[@]}" >>"$d/least"
		spawn_us "$LOOKUP_N" -- "${floor[@]}" >>"$d/sqlite"
	done
	for f in ours true least sqlite; do median "$d/$f" >"$d/$f.med"; done
	row "$label, $LOOKUP_ROWS rows, vs /bin/true" "$(ms "$(<"$d/ours.med")")" "$(ms "$(<"$d/true.med")")" \
		"$(ratio "$(<"$d/ours.med")" "$(<"$d/true.med")")" "<= 2.5x"
	row "$label vs floor_lookup ($lookup_link): open, the one query, print" "$(ms "$(<"$d/ours.med")")" \
		"$(ms "$(<"$d/least.med")")" "$(ratio "$(<"$d/ours.med")" "$(<"$d/least.med")")" "-"
	row "floor_lookup ($lookup_link) vs /bin/true" "$(ms "$(<"$d/least.med")")" "$(ms "$(<"$d/true.med")")" \
		"$(ratio "$(<"$d/least.med")" "$(<"$d/true.med")")" "-"
	row "$label vs sqlite3 shell query" "$(ms "$(<"$d/ours.med")")" "$(ms "$(<"$d/sqlite.med")")" \
		"$(ratio "$(<"$d/ours.med")" "$(<"$d/sqlite.med")")" "-"
	/usr/bin/time -f %M -o "$d/rss.ours" "${ours[@]}" >/dev/null || die "${ours[*]} failed"
	/usr/bin/time -f %M -o "$d/rss.sqlite" "${floor[@]}" >/dev/null || die "sqlite3 failed"
	local ro rs
	ro=$(tail -n 1 "$d/rss.ours")
	rs=$(tail -n 1 "$d/rss.sqlite")
	row "$label peak RSS vs sqlite3 shell" "$ro KiB" "$rs KiB" "$(ratio "$ro" "$rs")" "<= 4096 KiB"
	# The operator's summary over the same rows, against the sqlite3 shell
	# counting them by binding and state (the least the summary must read).
	local -a sum=("$B/exec-inspect" --state-dir "$d/state" summary)
	local -a count=(sqlite3 -batch -init /dev/null "$d/state/state.db"
		"SELECT incarnation, session_id, state, count(*) FROM runs GROUP BY 1, 2, 3;
		 SELECT incarnation, session_id, refused, count(*) FROM results GROUP BY 1, 2, 3")
	for ((r = 1; r <= ROUNDS; r++)); do
		spawn_us 2 -- "${sum[@]}" >>"$d/sum"
		spawn_us 2 -- "${count[@]}" >>"$d/count"
	done
	row "summary, $LOOKUP_ROWS rows, vs sqlite3 counting them" "$(ms "$(median "$d/sum")")" \
		"$(ms "$(median "$d/count")")" "$(ratio "$(median "$d/sum")" "$(median "$d/count")")" "-"
}

# --- 4. loop-e2e --------------------------------------------------------------------
# rate FILE T0 T1: LOOP_N runs in T1 - T0 seconds, as runs/s, appended to FILE.
rate() { calc '%.1f\n' "$LOOP_N / ($3 - $2)" >>"$1"; }

# One round of exec-loop (from its start, session open included, until the
# dispatcher has recorded all N runs, submitted by the caller) into OUT.
loop_round() {   # ROUND N OUT [EXEC-LOOP OPTION...]
	local r=$1 n=$2 out=$3 i t0 t1 tf='' sent cpu0
	poll_reported || die "GET /admin/stats failed"
	sent=$reported
	cpu0=$(cpu_usec)
	t0=$EPOCHREALTIME
	PATH="$B:$PATH" EXEC_STATE_DIR="$d/state-$r-${out##*/}" in_cpu_cg "$top/cmd/exec-loop" --dispatcher "$url" \
		--slots 4 "${@:4}" 2>"$d/loop-$r.log" &
	loop_pid=$!
	# the first result and the last as the dispatcher receives them (a
	# retried result counts twice: the summary has the last word)
	for ((i = 0; i < LOOP_TIMEOUT * 50; i++)); do
		poll_reported || die "GET /admin/stats failed"
		[ -n "$tf" ] || [ "$reported" -le "$sent" ] || tf=$EPOCHREALTIME
		if [ "$reported" -ge $((sent + n)) ]; then
			poll_finished || die "GET /admin/summary failed"
			[ "$finished" -ge $((base + n)) ] && break
		fi
		kill -0 "$loop_pid" 2>/dev/null || die "exec-loop ended early (see $d/loop-$r.log)"
		nap 0.02
	done
	t1=$EPOCHREALTIME
	[ "$finished" -ge $((base + n)) ] || die "exec-loop did not finish $n runs in ${LOOP_TIMEOUT}s"
	stop_loop "$d/loop-$r.log"
	[ -z "$cpu_cg" ] || echo $((($(cpu_usec) - cpu0) / n)) >>"$out.cpu"
	calc '%.1f\n' "$n / ($t1 - $t0)" >>"$out"
	# The start's share (session open, isolation probe, the first accept):
	# the time to the first result, and the rate of the rest after it.
	calc '%.0f\n' "($tf - $t0) * 1000" >>"$out.first"
	calc '%.1f\n' "($n - 1) / ($t1 - $tf)" >>"$out.after"
}

# The watch a round of the loop is under (loop_round polls /admin/stats
# every 20 ms), kept on the floor while it runs: both pay for it alike
# (some 3% of floor_post's rate; bench/README.md, loop-e2e).  Ends when
# killed, or with the dispatcher.
observe() {
	while poll_reported; do nap 0.02; done
}

# LOOP_N runs of /bin/true submitted, then a round of the loop on them.
trivial_round() {   # ROUND OUT [EXEC-LOOP OPTION...]
	poll_finished || die "GET /admin/summary failed"
	base=$finished
	submit_runs "${2##*/}$1" "$LOOP_N"
	loop_round "$1" "$LOOP_N" "$2" --tick 0.05 "${@:3}"
}

# Runs that outlast a round of the loop (/bin/sleep 0.1, PACED_N of them)
# at its default tick: 4 slots can finish at most 40 a second.
paced_round() {   # ROUND
	local r=$1 i body=
	poll_finished || die "GET /admin/summary failed"
	base=$finished
	for ((i = 1; i <= PACED_N; i++)); do
		body+="${body:+,}{\"run_id\":\"paced$r-$i\",\"txn_id\":\"paced$r-t$i\",\"program\":\"/bin/sleep\",\"args\":[\"0.1\"]}"
	done
	curl -sS --fail --max-time 30 -H @"$admin_auth" -X POST "$url/admin/runs" -H 'Content-Type: application/json' \
		-d "{\"runs\":[$body]}" >/dev/null || die "POST /admin/runs failed"
	loop_round "$r" "$PACED_N" "$d/paced"
}

stop_loop() {   # LOG: TERM exec-loop, wait for its drain (at most 10 s), check its status
	local i rc=0
	kill -TERM "$loop_pid"
	for ((i = 0; i < 600; i++)); do
		kill -0 "$loop_pid" 2>/dev/null || break
		nap 0.05
	done
	kill -KILL "$loop_pid" 2>/dev/null || true
	wait "$loop_pid" || rc=$?
	loop_pid=
	[ "$rc" -eq 0 ] || die "exec-loop exited $rc (see $1)"
}

# create_us DIR: microseconds to create one empty file in DIR (500 of them,
# by the shell, no process each), the median of 3; the files are removed.
# A run creates five (its capture files, its view, two limits files): on
# ext4 without a journal, a create skips every inode freed in the last
# minutes in its group, so a directory where files come and go pays more
# for each (bench/README.md, loop-e2e).
create_us() {
	local dir=$1/creates i k t0
	for ((k = 0; k < 3; k++)); do
		mkdir -p "$dir" || return 1
		t0=$EPOCHREALTIME
		for ((i = 0; i < 500; i++)); do : >"$dir/f$i"; done
		calc '%.1f\n' "($EPOCHREALTIME - $t0) * 1000000 / 500" >>"$1/creates.us"
		rm -rf "$dir"
	done
	median "$1/creates.us"
	rm -f "$1/creates.us"
}

# The peers, on the same N x /bin/true with 4 at once, nothing durable.
peer_xargs() { seq "$LOOP_N" | xargs -P4 -n1 /bin/true; }
peer_parallel() { seq "$LOOP_N" | parallel --will-cite -j4 -N0 /bin/true; }
peer_tsp() {   # a private server with 4 slots; enqueue from bash, wait for all
	local i
	export TS_SOCKET=$tsp_sock TMPDIR=$d/tsp.tmp
	tsp -C
	for ((i = 0; i < LOOP_N; i++)); do tsp -n /bin/true >/dev/null; done
	tsp -w >/dev/null 2>&1 || true   # the last job; then until none is left
	for ((i = 0; i < 1000; i++)); do
		tsp -l | grep -qE ' (running|queued) ' || break
		nap 0.01
	done
	unset TS_SOCKET TMPDIR
}

peer_round() {   # NAME COMMAND TOOL
	local t0
	if ! have "$3"; then return 0; fi
	t0=$EPOCHREALTIME
	"$2" || die "$1 failed"
	rate "$d/$1" "$t0" "$EPOCHREALTIME"
}

# Syncs of the supervisor path per run: N runs started at once by one
# exec-run start, every supervisor followed by strace -f; the fdatasync and
# fsync calls on the state database and its WAL, and on any file.  Of
# those, the durable commits: a WAL sync that comes straight after a frame
# written to the WAL (SQLite syncs a synchronous=FULL commit as soon as
# its last frame is written).  Any other sync of the state is a
# checkpoint's (the WAL before it is copied back, then the database), or
# the header of a WAL begun anew after one (its first commit syncs it
# apart); those and the starter's own commits are counted apart.
loop_syncs() {
	local n=20 s=$d/strace
	mkdir -p "$s"
	open_session "$s/state"
	submit_runs strace "$n"
	EXEC_STATE_DIR=$s/state "$B/exec-accept" --from-dispatcher --prefetch "$n" >/dev/null ||
		die "exec-accept for the strace runs failed"
	EXEC_STATE_DIR=$s/state strace -f -y -e trace=execve,fdatasync,fsync,pwrite64,fcntl,openat,mkdirat,mkdir -o "$s/trace" \
		"$B/exec-run" start --confirmed --chain --slots 4 --wait >/dev/null || die "exec-run start under strace failed"
	read -r db_syncs all_syncs commits ckpt_syncs starter_syncs txns files < <(awk -v n="$n" '
		$2 ~ /^execve\(/ { if (!starter) starter = $1; next }
		$2 ~ /sync\(/ { all++ }
		$2 ~ /sync\([0-9]+<[^>]*\/state\.db(-wal)?>/ {
			db++
			if ($1 == starter) own++
			else if ($2 ~ /-wal>/ && wrote[$1]) commits++
			else ckpt++
			wrote[$1] = 0
		}
		# a commit frame written since the process last synced (not a
		# new WAL header: 32 bytes at offset 0)
		$2 ~ /^pwrite64\([0-9]+<[^>]*\/state\.db-wal>/ && $0 !~ /, 32, 0( <unfinished|\))/ { wrote[$1] = 1 }
		# a write transaction takes the WAL write lock (byte 120 of the -shm)
		$1 != starter && $0 ~ /fcntl\([0-9]+<[^>]*\/state\.db-shm>, F_SETLKW?, \{l_type=F_WRLCK, l_whence=SEEK_SET, l_start=120,/ { txns++ }
		# a file or directory made in the state, but the database own files
		$1 != starter && $0 ~ /^[0-9]+ +(openat\(.*O_CREAT|mkdirat?\()/ && $0 ~ /\/state[\/>"]/ &&
			$0 !~ /state\.db(-wal|-shm|-writers)?[>"]/ && $0 !~ /limits\.lock/ && $0 !~ /= -1 / { files++ }
		END { printf "%.2f %.2f %.2f %.2f %.2f %.2f %.2f\n", db / n, all / n, commits / n, ckpt / n, own / n, txns / n, files / n }' "$s/trace")
}

# Latency of an idle loop: one run submitted (program /bin/sleep 0.3, so
# its row is still there to read), from the submit to its start marker
# (runs.started_at), median of BENCH_ROUNDS runs.
loop_latency() {
	local s=$d/latency r i t0 at db
	mkdir -p "$s"
	db=$s/state/state.db
	PATH="$B:$PATH" EXEC_STATE_DIR="$s/state" "$top/cmd/exec-loop" --dispatcher "$url" \
		--slots 4 2>"$s/loop.log" &
	loop_pid=$!
	for ((r = 1; r <= ROUNDS; r++)); do
		nap 0.5   # idle
		poll_finished || die "GET /admin/summary failed"
		base=$finished
		t0=${EPOCHREALTIME/./}
		post_runs "{\"runs\":[{\"run_id\":\"lat-$r\",\"txn_id\":\"lat-t$r\",\"program\":\"/bin/sleep\",\"args\":[\"0.3\"]}]}" ||
			die "POST /admin/runs failed"
		at=
		for ((i = 0; i < 1000; i++)); do
			[ -e "$db" ] && at=$(sq "$db" "SELECT started_at FROM runs WHERE run_id = 'lat-$r' AND started_at IS NOT NULL" 2>/dev/null) || true
			[ -z "$at" ] || break
			nap 0.01
		done
		[ -n "$at" ] || die "run lat-$r did not start in 10 s (see $s/loop.log)"
		echo $((at - 10#$t0 / 1000)) >>"$d/latency.ms"
		for ((i = 0; i < 500; i++)); do
			poll_finished || die "GET /admin/summary failed"
			[ "$finished" -gt "$base" ] && break
			nap 0.02
		done
	done
	stop_loop "$s/loop.log"
}

bench_loop_e2e() {
	local d=$work/loop-e2e r base o f t p watcher cpu0 co cf
	mkdir -p "$d/tsp.tmp"
	start_dispatcher "$d"
	tsp_sock=$d/tsp.sock
	for ((r = 1; r <= ROUNDS; r++)); do
		trivial_round "$r" "$d/ours"
		# The same without the guests' namespaces and Landlock: their share.
		trivial_round "$r" "$d/bare" --isolation none
		paced_round "$r"
		# Floor: the same N runs, spawned and reported by floor_post.c,
		# watched as a round of the loop is (observe).
		submit_runs "floor$r" "$LOOP_N"
		observe &
		watcher=$!
		cpu0=$(cpu_usec)
		t0=$EPOCHREALTIME
		(in_cpu_cg "$bin/floor_post" "$url" "$LOOP_N") || die "floor_post failed"
		rate "$d/floor" "$t0" "$EPOCHREALTIME"
		[ -z "$cpu_cg" ] || echo $((($(cpu_usec) - cpu0) / LOOP_N)) >>"$d/floor.cpu"
		kill "$watcher"
		wait "$watcher" 2>/dev/null || true
		peer_round xargs peer_xargs xargs
		peer_round tsp peer_tsp tsp
		peer_round parallel peer_parallel parallel
	done
	if have tsp; then TS_SOCKET=$tsp_sock tsp -K >/dev/null 2>&1 || true; fi
	tsp_sock=
	o=$(median "$d/ours")
	f=$(median "$d/floor")
	row "loop-e2e, $LOOP_N x /bin/true, 4 slots: exec-loop vs floor_post" "$o runs/s" "$f runs/s" "$(ratio "$o" "$f")" ">= 0.8x"
	if [ -n "$cpu_cg" ]; then
		co=$(median "$d/ours.cpu")
		cf=$(median "$d/floor.cpu")
		row "loop-e2e: CPU per run, exec-loop and all it starts vs floor_post and its guests" "$co us" "$cf us" "$(ratio "$co" "$cf")" "-"
		co=$(median "$d/bare.cpu")
		row "loop-e2e: the same, --isolation none" "$co us" "$cf us" "$(ratio "$co" "$cf")" "-"
	else
		row "loop-e2e: CPU per run (no cgroup v2 of our own here)" "-" "-" "-" "-"
	fi
	t=$(median "$d/ours.after")
	row "loop-e2e: the same after its first result ($(median "$d/ours.first") ms from its start)" "$t runs/s" \
		"$f runs/s" "$(ratio "$t" "$f")" "-"
	t=$(median "$d/bare")
	row "loop-e2e: the same, --isolation none (no namespaces or Landlock; the cgroup stays)" "$t runs/s" \
		"$f runs/s" "$(ratio "$t" "$f")" "-"
	t=$(median "$d/paced")
	row "loop-e2e: $PACED_N x /bin/sleep 0.1, default --tick 1, vs 4 slots' 40 runs/s" "$t runs/s" "40.0 runs/s" "$(ratio "$t" 40)" "-"
	if have tsp; then
		t=$(median "$d/tsp")
		row "loop-e2e: exec-loop vs tsp -S 4" "$o runs/s" "$t runs/s" "$(ratio "$o" "$t")" ">= 1.0x"
	else
		skip tsp "loop-e2e: exec-loop vs tsp -S 4"
	fi
	for p in "xargs:xargs -P4" "tsp:tsp -S 4 (enqueue from bash)" "parallel:GNU parallel -j4"; do
		if have "${p%%:*}"; then
			t=$(median "$d/${p%%:*}")
			row "loop-e2e peer: ${p#*:} vs floor_post" "$t runs/s" "$f runs/s" "$(ratio "$t" "$f")" "-"
		else
			skip "${p%%:*}" "loop-e2e peer: ${p#*:} vs floor_post"
		fi
	done
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then
		t=$(mktemp -d /dev/shm/execkit-bench.XXXXXX)
		o=$(create_us "$d")
		f=$(create_us "$t")
		rm -rf "$t"
		row "loop-e2e: one file created in the states' directory vs tmpfs (/dev/shm)" "$o us" "$f us" "$(ratio "$o" "$f")" "-"
	fi
	loop_syncs
	row "loop-e2e: supervisor fsync+fdatasync per run, state db+WAL (all files)" "$db_syncs ($all_syncs)" "0" "-" "-"
	row "loop-e2e: of those, supervisors' durable commits per run" "$commits" "0" "-" "<= 3"
	row "loop-e2e: of those, checkpoints' and new WAL headers' syncs; the starter's, per run" "$ckpt_syncs; $starter_syncs" "0" "-" "-"
	row "loop-e2e: supervisors' write transactions per run (durable or not)" "$txns" "0" "-" "-"
	row "loop-e2e: files and directories a run makes in the state (no output, no capacity)" "$files" "0" "-" "0"
	loop_latency
	row "loop-e2e: idle loop (default --tick 1), submit -> start marker" "$(median "$d/latency.ms") ms" "-" "-" "<= 50 ms"
}

# --- 5. drain ------------------------------------------------------------------------
sq() { sqlite3 -batch -init /dev/null -bail "$@"; }   # DB [SQL]: the sqlite3 shell, quiet

T0=1764500000000   # chosen_at of retained result PREFIX-i is T0 + i (floor_drain.c does the same)

submit_chunked() {   # PREFIX N: POST /admin/runs with runs PREFIX-1..PREFIX-N, 1000 a request
	local from to
	for ((from = 1; from <= $2; from += 1000)); do
		to=$((from + 999 < $2 ? from + 999 : $2))
		awk -v p="$1" -v a="$from" -v b="$to" 'BEGIN { printf "{\"runs\":["
			for (i = a; i <= b; i++)
				printf "%s{\"run_id\":\"%s-%d\",\"txn_id\":\"%s-t%d\",\"program\":\"/bin/true\"}", (i > a ? "," : ""), p, i, p, i
			print "]}" }' >"$work/submit.json"
		curl -sS --fail --max-time 60 -H @"$admin_auth" -X POST "$url/admin/runs" -H 'Content-Type: application/json' \
			--data-binary "@$work/submit.json" >/dev/null || die "POST /admin/runs failed"
	done
}

accept_all() {   # STATE-DIR N: exec-accept --from-dispatcher until N runs are accepted
	local i n=0
	for ((i = 0; i < $2 / 1000 + 5; i++)); do
		"$B/exec-accept" --state-dir "$1" --from-dispatcher --max 1000 >/dev/null ||
			die "exec-accept --from-dispatcher failed ($1)"
		n=$(sq "$1/state.db" "SELECT count(*) FROM accepts")
		[ "$n" -lt "$2" ] || return 0
	done
	die "only $n of $2 runs accepted in $1"
}

# retain STATE-DIR PREFIX: for every accepted run PREFIX-i of the current
# session, the retained result exec-run would have stored for a run that
# exited 0 (chosen_at T0 + i, body byte for byte as result.c builds it),
# without running a guest; the runs rows and any receipts of them go.
retain() {
	local lo="$2-" hi="$2."   # '.' follows '-': the range is the prefix, through the primary key
	sq "$1/state.db" >/dev/null <<SQL || die "retaining results in $1 failed"
BEGIN;
DELETE FROM receipts WHERE run_id > '$lo' AND run_id < '$hi';
DELETE FROM runs WHERE run_id > '$lo' AND run_id < '$hi';
INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, wait_status, message, chosen_at, body)
SELECT a.run_id, a.incarnation, a.session_id, 'exited', 0, 0, 'exited with status 0', a.c,
	CAST(printf('{"run_id":"%s","incarnation":"%s","session_id":"%s","outcome":"exited","exit_code":0,"wait_status":0,"message":"exited with status 0","chosen_at":%d}',
		a.run_id, a.incarnation, a.session_id, a.c) AS BLOB)
FROM (SELECT run_id, incarnation, session_id, $T0 + CAST(substr(run_id, ${#lo} + 1) AS INTEGER) AS c
	FROM accepts WHERE run_id > '$lo' AND run_id < '$hi') a
JOIN sessions s ON s.incarnation = a.incarnation AND s.session_id = a.session_id AND s.status = 'current';
COMMIT;
SQL
}

deliverable() {   # STATE-DIR PREFIX: retained results PREFIX-* not refused
	sq "$1/state.db" "SELECT count(*) FROM results WHERE run_id > '$2-' AND run_id < '$2.' AND refused = 0"
}

drain_setup() {   # DIR N: a dispatcher, and a state in DIR/state retaining N results for it
	mkdir -p "$1"
	start_dispatcher "$1" --lease-ms 3600000
	open_session "$1/state"
	submit_chunked drain "$2"
	accept_all "$1/state" "$2"
	retain "$1/state" drain
	[ "$(deliverable "$1/state" drain)" -eq "$2" ] || die "$1/state does not retain $2 results"
}

drain_check() {   # DIR N: nothing left to deliver, and the dispatcher recorded N results
	local left sum
	left=$(deliverable "$1/state" drain)
	[ "$left" -eq 0 ] || die "exec-reconcile --drain left $left results in $1/state"
	sum=$(curl -sS --fail --max-time 10 -H @"$admin_auth" "$url/admin/summary") || die "GET /admin/summary failed"
	[[ $sum =~ \"results\":([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -eq "$2" ] ||
		die "the dispatcher did not record $2 results: $sum"
}

bench_drain() {
	local d=$work/drain r us out n
	mkdir -p "$d"
	local -a drain=("$B/exec-reconcile" --drain --budget-ms 600000 --state-dir)
	for ((r = 1; r <= ROUNDS; r++)); do
		# Ours: exec-reconcile --drain, from its start, of N retained results.
		drain_setup "$d/ours-$r" "$DRAIN_N"
		us=$(spawn_us 1 -- "${drain[@]}" "$d/ours-$r/state")
		drain_check "$d/ours-$r" "$DRAIN_N"
		calc '%.1f\n' "$DRAIN_N / ($us / 1e6)" >>"$d/ours"
		stop_dispatcher
		# Floor: the same bodies (but for the binding) to a fresh dispatcher.
		mkdir -p "$d/floor-$r"
		start_dispatcher "$d/floor-$r" --lease-ms 3600000
		submit_chunked drain "$DRAIN_N"
		out=$("$bin/floor_drain" "$url" "$DRAIN_N" "$T0") || die "floor_drain failed"
		echo "${out##* }" >>"$d/floor"
		stop_dispatcher
		rm -rf "$d/ours-$r" "$d/floor-$r"
	done
	local o f
	o=$(median "$d/ours")
	f=$(median "$d/floor")
	row "drain, $DRAIN_N results, vs libcurl keep-alive" "$o results/s" "$f results/s" "$(ratio "$o" "$f")" ">= 0.8x"
	# Where the time goes: syncs on our side per result (floor_drain makes
	# none), over a drain of up to 1000 results under strace.
	n=$((DRAIN_N < 1000 ? DRAIN_N : 1000))
	drain_setup "$d/strace" "$n"
	strace -f -w -c -e trace=fdatasync,fsync,sendto,write -o "$d/strace.ours" "${drain[@]}" "$d/strace/state" >/dev/null ||
		die "exec-reconcile --drain under strace failed"
	drain_check "$d/strace" "$n"
	stop_dispatcher
	row "drain: client fsync+fdatasync per result" "$(calc '%.2f' "$(syncs "$d/strace.ours") / $n")" "0" "-" "-"
}

# --- 6. pass --------------------------------------------------------------------------
bench_pass() {
	local d=$work/pass r i s us inc sid left
	mkdir -p "$d"
	start_dispatcher "$d" --lease-ms 3600000
	for s in big none; do
		open_session "$d/$s"
		submit_chunked "pass-$s" "$PASS_MAX"
		accept_all "$d/$s" "$PASS_MAX"
	done
	inc=$(sq "$d/big/state.db" "SELECT incarnation FROM sessions WHERE status='current'")
	sid=$(sq "$d/big/state.db" "SELECT session_id FROM sessions WHERE status='current'")
	if [ -z "$inc" ] || [ -z "$sid" ]; then die "cannot read the session of $d/big"; fi
	# Undeliverable, and older than every deliverable result (so a selection
	# that did not skip them would meet them first): odd rows refused under
	# the current binding, even rows bound to an earlier, replaced session.
	sq "$d/big/state.db" >/dev/null <<SQL || die "generating $PASS_ROWS rows failed"
$(bulk_begin 00000000000be7c5 1764400000000)
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $PASS_ROWS)
INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
SELECT printf('old-%07d', i), printf('txn-%07d', i),
	CASE WHEN i % 2 THEN '$inc' ELSE 'inc-00000000000be7c5' END,
	CASE WHEN i % 2 THEN '$sid' ELSE 'ses-00000000000be7c5' END,
	printf('{"args":[],"program":"/bin/true","run_id":"old-%07d","txn_id":"txn-%07d"}', i, i),
	printf('old:%d', i), 1764400000000 + i FROM c;
INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, wait_status, message, chosen_at, body,
	attempts, last_attempt_at, refused, refused_cause, last_diag)
SELECT run_id, incarnation, session_id, 'exited', 0, 0, 'exited with status 0', accepted_at + 5,
	CAST(printf('{"run_id":"%s","incarnation":"%s","session_id":"%s","outcome":"exited","exit_code":0,"wait_status":0,"message":"exited with status 0","chosen_at":%d}',
		run_id, incarnation, session_id, accepted_at + 5) AS BLOB),
	CASE WHEN session_id = '$sid' THEN 1 ELSE 0 END, CASE WHEN session_id = '$sid' THEN accepted_at + 10 END,
	session_id = '$sid', CASE WHEN session_id = '$sid' THEN 'unknown_run' END,
	CASE WHEN session_id = '$sid' THEN 'HTTP 404: refused: {"error":"unknown_run"}' END
FROM accepts WHERE run_id > 'old-' AND run_id < 'old.';
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
SQL
	# A warm-up pass each: the dispatcher records these results now, so
	# every measured pass gets "duplicate" answers alike (a full round trip,
	# a report row on the dispatcher, and the receipt on ours).
	local -a pass=("$B/exec-reconcile" --max "$PASS_MAX" --state-dir)
	for s in big none; do
		retain "$d/$s" "pass-$s"
		spawn_us 1 -- "${pass[@]}" "$d/$s" >/dev/null
	done
	for ((r = 1; r <= ROUNDS; r++)); do
		: >"$d/big.r" && : >"$d/none.r"
		for ((i = 1; i <= PASS_N; i++)); do
			for s in big none; do
				retain "$d/$s" "pass-$s"
				[ "$(deliverable "$d/$s" "pass-$s")" -eq "$PASS_MAX" ] || die "$d/$s does not retain $PASS_MAX results"
				spawn_us 1 -- "${pass[@]}" "$d/$s" >>"$d/$s.r"
				left=$(deliverable "$d/$s" "pass-$s")
				[ "$left" -eq 0 ] || die "the pass left $left of $PASS_MAX results in $d/$s"
			done
		done
		for s in big none; do awk '{ s += $1 } END { print s / NR }' "$d/$s.r" >>"$d/$s.us"; done
	done
	local b n
	b=$(median "$d/big.us")
	n=$(median "$d/none.us")
	row "pass (--max $PASS_MAX), $PASS_ROWS undeliverable vs none" "$(ms "$b")" "$(ms "$n")" "$(ratio "$b" "$n")" "<= 1.2x"
	# The loop heartbeats every second and asks how many results wait: that
	# count must not grow with the undeliverable rows either.
	for ((r = 1; r <= ROUNDS; r++)); do
		for s in big none; do
			spawn_us "$PASS_N" -- "$B/exec-session" --state-dir "$d/$s" heartbeat >>"$d/$s.hb"
		done
	done
	b=$(median "$d/big.hb")
	n=$(median "$d/none.hb")
	row "heartbeat, $PASS_ROWS undeliverable vs none" "$(ms "$b")" "$(ms "$n")" "$(ratio "$b" "$n")" "-"
	stop_dispatcher
}

# --- 7. completion ------------------------------------------------------------------
# complete_us STATE-DIR WORD...: the mean microseconds of COMPLETE_N <TAB>s on
# the last WORD, in one bash with bash-completion and the built completion
# loaded (as an interactive shell has them), with EXEC_STATE_DIR=STATE-DIR.
complete_us() {
	EXEC_STATE_DIR=$1 PATH="$B:$PATH" bash --norc --noprofile -c '
		. /usr/share/bash-completion/bash_completion || exit 90
		. "$1" || exit 91
		n=$2
		shift 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_execkit "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"   # warm
		t0=$EPOCHREALTIME
		for ((i = 0; i < n; i++)); do
			_execkit "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		done
		t1=$EPOCHREALTIME
		echo "${#COMPREPLY[@]} $(((${t1/./} - ${t0/./}) / n))"' - "$B/completions/execkit.bash" "$COMPLETE_N" "${@:2}"
}

# The same completions in a state of COMPLETE_ROWS queued runs of the
# current session and in one of a single run: the words must not cost more
# because the state is big (the issue: 3.6 s with 100 000 queued runs).
bench_completion() {
	local d=$work/completion s r inc sid eid out w
	[ -r /usr/share/bash-completion/bash_completion ] || die "bash-completion is not installed"
	[ -r "$B/completions/execkit.bash" ] || die "$B/completions/execkit.bash not found: build first"
	mkdir -p "$d"
	start_dispatcher "$d"
	for s in big small; do
		open_session "$d/$s"
		read -r inc sid < <(sqlite3 -batch -init /dev/null -separator ' ' "$d/$s/state.db" \
			"SELECT incarnation, session_id FROM sessions WHERE status = 'current'")
		eid=$(sqlite3 -batch -init /dev/null "$d/$s/state.db" "SELECT value FROM meta WHERE key='executor_id'")
		[ -n "$sid" ] && [ -n "$eid" ] || die "cannot read the session of $d/$s"
		sqlite3 -batch -init /dev/null -bail "$d/$s/state.db" >/dev/null <<SQL || die "generating the runs of $d/$s failed"
PRAGMA synchronous=OFF; BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $([ $s = big ] && echo "$COMPLETE_ROWS" || echo 1))
INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
SELECT printf('run-%07d', i), printf('txn-%07d', i), '$inc', '$sid',
	printf('{"args":[],"program":"/bin/true","run_id":"run-%07d","txn_id":"txn-%07d"}', i, i),
	printf('%s:%d', '$eid', i), 1764500000000 + i FROM c;
INSERT INTO runs(run_id, txn_id, incarnation, session_id, program, args, due_at, state)
SELECT run_id, txn_id, incarnation, session_id, '/bin/true', '[]', 9999999999999, 'queued' FROM accepts;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
SQL
	done
	for w in "show:exec-inspect show ''" "show-prefix:exec-inspect show run-00001" "cancel:exec-run cancel ''"; do
		for ((r = 1; r <= ROUNDS; r++)); do
			for s in big small; do
				# shellcheck disable=SC2086  # the words, '' for an empty one
				eval "out=\$(complete_us \"$d/$s\" ${w#*:})" || die "completing ${w#*:} failed"
				echo "${out#* }" >>"$d/${w%%:*}.$s"
			done
		done
		row "complete '${w#*:}', $COMPLETE_ROWS queued vs 1" "$(ms "$(median "$d/${w%%:*}.big")")" \
			"$(ms "$(median "$d/${w%%:*}.small")")" \
			"$(ratio "$(median "$d/${w%%:*}.big")" "$(median "$d/${w%%:*}.small")")" "< 200 ms"
	done
	stop_dispatcher
}

# --- 8. retention ---------------------------------------------------------------------
db_bytes() { local n=0 f; for f in "$1/state.db" "$1/state.db-wal"; do [ -e "$f" ] && n=$((n + $(stat -c %s "$f"))); done; echo "$n"; }

# floor_copy STATE FILE TABLE...: the same rows alone, in plain tables of a
# new file (no index, no trigger, no other table): what they weigh as data.
floor_copy() {
	local s=$1 f=$2 t sql="ATTACH '$1/state.db' AS s;"
	shift 2
	rm -f "$f"
	for t in "$@"; do sql+="CREATE TABLE $t AS SELECT * FROM s.$t;"; done
	sq "$f" "$sql" || die "copying $* of $s failed"
	stat -c %s "$f"
}

per_run() { calc '%.0f B' "$1 / $RETAIN_N"; }

# State bytes per run: N runs delivered (receipts held), then each step of
# a retention pass, each followed by exec-session compact (so the file
# shows what is held, not pages waiting for reuse).  One round: sizes do
# not vary from round to round.
bench_retention() {
	local d=$work/retention s full ffull rec frec left empty
	local -a compact=("$B/exec-session" compact --state-dir)
	drain_setup "$d" "$RETAIN_N"
	s=$d/state
	"$B/exec-reconcile" --drain --budget-ms 600000 --state-dir "$s" >/dev/null || die "draining $s failed"
	drain_check "$d" "$RETAIN_N"
	"${compact[@]}" "$s" >/dev/null || die "exec-session compact failed"
	full=$(db_bytes "$s")
	ffull=$(floor_copy "$s" "$d/floor-full.db" accepts receipts)
	"$B/exec-reconcile" --prune-receipts 0s --state-dir "$s" >/dev/null || die "--prune-receipts failed"
	"${compact[@]}" "$s" >/dev/null || die "exec-session compact failed"
	rec=$(db_bytes "$s")
	frec=$(floor_copy "$s" "$d/floor-rec.db" accepts run_records)
	"$B/exec-reconcile" --prune-records 0s --state-dir "$s" >/dev/null || die "--prune-records failed"
	"${compact[@]}" "$s" >/dev/null || die "exec-session compact failed"
	left=$(db_bytes "$s")
	open_session "$d/empty"   # floor: a new state, one session, no run, compacted alike
	"${compact[@]}" "$d/empty" >/dev/null || die "exec-session compact failed"
	empty=$(db_bytes "$d/empty")
	stop_dispatcher
	row "retention: state per run, $RETAIN_N runs delivered, receipts held, vs their rows alone" \
		"$(per_run "$full")" "$(per_run "$ffull")" "$(ratio "$full" "$ffull")" "-"
	row "retention: after --prune-receipts + compact (records and specs), vs those rows alone" \
		"$(per_run "$rec")" "$(per_run "$frec")" "$(ratio "$rec" "$frec")" "-"
	row "retention: after --prune-records + compact, state.db vs a new state" \
		"$(calc '%.0f KiB' "$left / 1024")" "$(calc '%.0f KiB' "$empty / 1024")" "$(ratio "$left" "$empty")" "<= 1.1x"
}

# --- 9. isolation ------------------------------------------------------------------
# What isolating a guest costs, in CPU per guest (isolate_cost.c), against
# spawning it bare, and what a spawner per slot would save: the ways
# alternate within each round.
bench_isolation() {
	local d=$work/isolation r way cg why='' cpu
	local -A label=(
		[fresh]="isolation: namespaces and a cgroup made per guest (before)"
		[kept]="isolation: namespaces per guest, the chain's cgroup (exec-run)"
		[spawner]="isolation: a spawner's user ns, a mount ns per guest"
		[shared]="isolation: a spawner's namespaces, mounts renewed per guest"
	)
	mkdir -p "$d"
	cg=$(own_cgroup)
	if [ -z "$cg" ] || [ ! -w "$cg" ]; then
		why="no writable cgroup v2 directory of ours"
	elif ! "$bin/isolate_cost" fresh 1 "$cg" >/dev/null 2>"$d/err"; then
		why="isolate_cost cannot isolate here: $(head -n 1 "$d/err")"
	fi
	if [ -n "$why" ]; then
		echo "bench: $why: skipping the isolation rows" >&2
		for way in fresh kept spawner shared; do row "${label[$way]}" - "($why)" - -; done
		return 0
	fi
	for ((r = 1; r <= ROUNDS; r++)); do
		for way in bare fresh kept spawner shared; do
			read -r _ cpu < <("$bin/isolate_cost" "$way" "$ISOLATE_N" "$cg") || die "isolate_cost $way failed"
			[ -n "$cpu" ] || die "isolate_cost $way failed"
			echo "$cpu" >>"$d/$way"
		done
	done
	for way in bare fresh kept spawner shared; do median "$d/$way" >"$d/$way.med"; done
	for way in fresh kept spawner shared; do
		row "${label[$way]}: CPU a guest vs bare" "$(ms "$(<"$d/$way.med")")" "$(ms "$(<"$d/bare.med")")" \
			"$(ratio "$(<"$d/$way.med")" "$(<"$d/bare.med")")" "-"
	done
}

echo "execkit benchmarks: build $B, $ROUNDS rounds (median), work dir $work" >&2
for name in "${names[@]}"; do
	echo "bench: $name ..." >&2
	s=$SECONDS
	"bench_${name//-/_}"
	echo "bench: $name done in $((SECONDS - s)) s" >&2
done

awk -F '\t' '
	{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } }
	END {
		split("benchmark|ours|floor|ratio|target", h, "|")
		for (i = 1; i <= 5; i++) if (length(h[i]) > w[i]) w[i] = length(h[i])
		line = ""
		for (i = 1; i <= 5; i++) printf(i < 5 ? "%-" w[i] "s | " : "%s\n", h[i])
		for (i = 1; i <= 5; i++) { s = ""; for (j = 0; j < w[i]; j++) s = s "-"; printf("%s%s", s, i < 5 ? "-|-" : "\n") }
		for (r = 1; r <= NR; r++)
			for (i = 1; i <= 5; i++) printf(i < 5 ? "%-" w[i] "s | " : "%s\n", c[r, i])
	}' "$results"
