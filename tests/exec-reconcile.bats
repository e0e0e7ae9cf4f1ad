#!/usr/bin/env bats
# exec-reconcile: one bounded pass over the current session's deliverable
# results; undeliverable rows never crowd out deliverable ones.

load helpers
load inspect

# Make N retained results of the current session whose reports failed.
retain_many() {
	local n=$1 i specs=()
	for i in $(seq 1 "$n"); do specs+=("$(spec "d$i")"); done
	submit_and_accept "${specs[@]}"
	fault 5xx 100000
	exec-run start --wait --slots 256 --budget-ms 100 >/dev/null
	admin DELETE /admin/faults >/dev/null
}

# kept_one_attempt_more ATTEMPTS: all 5 results of retain_many are still
# retained, with exactly one attempt more than ATTEMPTS among them (the one
# sent), and no claim is left behind.
kept_one_attempt_more() {
	[ "$(sql "SELECT count(*) FROM results")" = 5 ]
	[ "$(sql "SELECT sum(attempts) FROM results")" = $(($1 + 1)) ]
	[ "$(sql "SELECT count(*) FROM results WHERE claim_owner IS NOT NULL")" = 0 ]
}

@test "a pass delivers at most 32, the next pass the rest, however many rows are undeliverable" {
	start_dispatcher
	open_session
	retain_many 40
	seed_undeliverable 20000
	[ "$(sql "SELECT count(*) FROM results WHERE refused=0 AND session_id='ses-old'")" = 10000 ]
	[ "$(sql "SELECT count(*) FROM results WHERE refused=1")" = 10000 ]
	[ "$(exec-session heartbeat)" = reconcile-due ]
	run exec-reconcile --json
	[ "$status" -eq 0 ]
	assert_line --partial '"event":"reconcile_pass","pass":1,"selected":32,"delivered":32'
	[ "$(sql "SELECT count(*) FROM receipts")" = 32 ]
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT count(*) FROM receipts")" = 40 ]
	run exec-reconcile --json
	assert_line --partial '"selected":0'
	[ "$(sql "SELECT count(*) FROM results")" = 20000 ]
	[ "$(exec-session heartbeat)" = current ]      # the 20000 left are nothing to deliver
	run sqlite3 "$EXEC_STATE_DIR/state.db" "EXPLAIN QUERY PLAN SELECT run_id FROM results INDEXED BY results_deliverable WHERE incarnation='a' AND session_id='b' AND refused=0 ORDER BY last_attempt_at, chosen_at LIMIT 32"
	assert_output --partial "USING INDEX results_deliverable"
	refute_output --partial "TEMP B-TREE"          # the index gives the order: no sort
}

@test "--max takes 1 to 32: a pass never carries more than 32 results" {
	start_dispatcher
	open_session
	local n
	for n in 33 256 0 -1 x; do
		run exec-reconcile --max "$n"
		[ "$status" -eq "$EK_USAGE" ]
		assert_output --partial "from 1 to 32"
	done
	run exec-reconcile --max 32
	assert_success
	run exec-reconcile --help
	assert_output --partial "1 to 32"
}

# The run ids a --json pass selected, sorted.
pass_ids() { sed -n 's/.*"event":"reconcile_result","run_id":"\([^"]*\)".*/\1/p' | sort; }

@test "results that keep failing rotate: the next pass takes the ones the last pass left out" {
	start_dispatcher
	open_session
	retain_many 40                                 # every one tried once already
	fault 5xx 100000
	exec-reconcile --json --budget-ms "$WAIT_MS" | pass_ids >"$BATS_TEST_TMPDIR/p1" || true
	[ "$(wc -l <"$BATS_TEST_TMPDIR/p1")" = 32 ]
	exec-reconcile --json --budget-ms "$WAIT_MS" | pass_ids >"$BATS_TEST_TMPDIR/p2" || true
	[ "$(wc -l <"$BATS_TEST_TMPDIR/p2")" = 32 ]
	# the 8 the first pass left out come first in the second, not the same 32 again
	run comm -13 "$BATS_TEST_TMPDIR/p1" "$BATS_TEST_TMPDIR/p2"
	[ "${#lines[@]}" = 8 ]
	# and a result never tried (its supervisor died right after retaining
	# it) goes ahead of all of them, though it was chosen last
	admin DELETE /admin/faults >/dev/null
	submit_and_accept "$(spec fresh)"
	EXEC_CRASH_AT=retained exec-run supervise fresh >/dev/null 2>&1 || true
	[ "$(sql "SELECT attempts FROM results WHERE run_id = 'fresh'")" = 0 ]
	run exec-reconcile --json --max 1
	assert_output --partial '"run_id":"fresh"'
}

@test "--drain repeats passes until nothing deliverable is left" {
	start_dispatcher
	open_session
	retain_many 70
	run exec-reconcile --drain --json
	assert_success
	assert_line --partial '"pass":3,'
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	[ "$(sql "SELECT count(*) FROM receipts")" = 70 ]
}

@test "a pass leaves queued work alone and runs no guest" {
	start_dispatcher
	open_session
	retain_many 2
	submit_and_accept "$(spec q1 /bin/sh "[\"-c\",\"touch $BATS_TEST_TMPDIR/ran\"]")"
	before=$(sql "SELECT * FROM runs")
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT * FROM runs")" = "$before" ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "the session ending during a pass stops it at once" {
	start_dispatcher
	open_session
	retain_many 5
	admin POST "/admin/sessions/$(current_session)/revoke" >/dev/null
	reports() { admin GET /admin/summary | grep -o '"reports":[0-9]*' | cut -d: -f2; }
	before=$(reports)
	attempts=$(sql "SELECT sum(attempts) FROM results")
	run exec-reconcile --json
	[ "$status" -eq "$EK_NOSESSION" ]
	assert_line --partial '"delivered":0'
	[ "$(reports)" = $((before + 1)) ]    # only the first of 5 was tried
	# the batch counted an attempt for all 5; the 4 never sent are taken back
	kept_one_attempt_more "$attempts"
}

@test "a pass is bounded by its budget" {
	start_dispatcher
	open_session
	retain_many 5
	fault hang 100 3600000                     # an hour: only the budget can end the pass
	attempts=$(sql "SELECT sum(attempts) FROM results")
	start=$SECONDS
	run exec-reconcile --budget-ms 800
	[ "$status" -eq "$EK_TEMPFAIL" ]
	[ $((SECONDS - start)) -lt "$WAIT_S" ]
	# one attempt hung until the budget ended; the others were never sent
	kept_one_attempt_more "$attempts"
}

@test "under a dispatcher that keeps failing, a pass makes exactly 3 attempts per result, same bytes, and keeps them all" {
	start_dispatcher
	open_session
	retain_many 5
	local id before=()
	for id in d1 d2 d3 d4 d5; do before+=("$(sql "SELECT attempts FROM results WHERE run_id='$id'"):$(disp_reports "$id")"); done
	fault 5xx 100000
	run exec-reconcile --budget-ms "$WAIT_MS"   # the rounds, not the budget, end it
	[ "$status" -eq "$EK_TEMPFAIL" ]
	local i=0 a r
	for id in d1 d2 d3 d4 d5; do
		a=${before[i]%%:*} r=${before[i]##*:}
		[ "$(sql "SELECT attempts FROM results WHERE run_id='$id'")" = $((a + 3)) ]   # three rounds
		[ "$(disp_reports "$id")" = $((r + 3)) ]
		[ "$(disp_hashes "$id" | sort -u | wc -l)" = 1 ]                           # byte-identical
		i=$((i + 1))
	done
	[ "$(sql "SELECT count(*) FROM results WHERE refused = 0 AND last_diag LIKE 'transient: HTTP 503%'")" = 5 ]
	[ "$(sql "SELECT count(*) FROM results WHERE claim_owner IS NOT NULL")" = 0 ]
}

@test "no current session: exit 77, nothing sent" {
	start_dispatcher
	open_session
	retain_many 1
	exec-session close >/dev/null
	run exec-reconcile
	[ "$status" -eq "$EK_NOSESSION" ]
}

@test "--export-evidence writes refused and orphaned results durably, then removes exactly those" {
	start_dispatcher
	open_session
	retain_many 3
	seed_undeliverable 10
	spec u1 | exec-accept >/dev/null
	run exec-run start --wait                   # u1 is refused: unknown_run
	[ "$status" -eq "$EK_PROTOCOL" ]
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl"
	assert_success
	assert_output --regexp "^exported 11 results, removed [0-9]+ output files$"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/evidence.jsonl")" = 11 ]
	[ "$(stat -c %a "$BATS_TEST_TMPDIR/evidence.jsonl")" = 600 ]
	grep -q '"run_id":"u1".*"refused":true,"refused_cause":"unknown_run".*"body":"{' "$BATS_TEST_TMPDIR/evidence.jsonl"
	# The three deliverable results of the current session are not evidence.
	[ "$(sql "SELECT count(*) FROM results")" = 3 ]
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/evidence.jsonl"
	[ "$status" -eq "$EK_CANTCREAT" ]           # never overwrites an export
	[ "$(sql "SELECT count(*) FROM results")" = 3 ]
}

@test "--prune-receipts removes only receipts older than the window" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec p1)" "$(spec p2)"
	exec-run start --wait >/dev/null
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE receipts SET acked_at = acked_at - 40 * 86400000 WHERE run_id = 'p1'"
	run exec-reconcile --prune-receipts 30d
	assert_success
	assert_output --regexp "^pruned 1 receipt, removed [0-9]+ output files$"
	[ "$(sql "SELECT run_id FROM receipts")" = p2 ]
	run exec-reconcile --prune-receipts soon
	[ "$status" -eq "$EK_USAGE" ]
	run exec-reconcile --prune-receipts 1d --export-evidence x
	[ "$status" -eq "$EK_USAGE" ]
}

@test "single flight: a pass and two exec-reports never deliver one result at once" {
	start_dispatcher
	open_session
	retain_many 1
	fault delay 20 700
	exec-reconcile >/dev/null 2>&1 &
	a=$!
	exec-report d1 >/dev/null 2>&1 &
	b=$!
	exec-report d1 >/dev/null 2>&1 &
	c=$!
	wait "$a" "$b" "$c" || true
	[ "$(disp_field d1 max_in_flight)" = 1 ]
	[ "$(disp_charges d1)" = 1 ]
	[ "$(sql "SELECT count(*) FROM receipts")" = 1 ]
}

# nginx on loopback in front of the dispatcher: its 502 and 504 are transient.
# Its port is one the kernel just handed a throwaway exec-dispatcher (free_port).
start_proxy() {
	local port
	port=$(free_port)
	mkdir -p "$BATS_TEST_TMPDIR/nginx"
	cat >"$BATS_TEST_TMPDIR/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $BATS_TEST_TMPDIR/nginx/pid;
error_log $BATS_TEST_TMPDIR/nginx/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $BATS_TEST_TMPDIR/nginx/body;
	proxy_temp_path $BATS_TEST_TMPDIR/nginx/proxy;
	server {
		listen 127.0.0.1:$port;
		location / {
			proxy_pass $DISP_URL;
			proxy_connect_timeout 1s;
			proxy_read_timeout 300ms;
		}
	}
}
CONF
	nginx -c "$BATS_TEST_TMPDIR/nginx/nginx.conf" -e "$BATS_TEST_TMPDIR/nginx/error.log" 3>&- &
	PROXY_PID=$!
	PROXY_URL="http://127.0.0.1:$port"
	wait_until 'curl -s -o /dev/null --max-time 1 "$PROXY_URL/"'
}

@test "a real reverse proxy's 502 and 504 are transient, and delivery resumes" {
	command -v nginx >/dev/null || fail "nginx is not installed (scripts/deps.sh installs nginx-light)"
	start_dispatcher
	start_proxy
	exec-session open --dispatcher "$PROXY_URL" >/dev/null
	admin POST /admin/runs "$(spec px1)" >/dev/null
	exec-accept --from-dispatcher >/dev/null
	fault delay 3 3000                      # slower than the proxy's read timeout
	run exec-run start --wait --budget-ms 2500
	assert_output --partial "px1 exited 0: delivery failed (3 attempts)"
	run sql "SELECT last_diag FROM results WHERE run_id='px1'"
	assert_output --partial "HTTP 504"
	port=${DISP_URL##*:}
	stop_dispatcher                          # now the proxy answers 502
	run exec-report --budget-ms 1500 px1
	[ "$status" -eq "$EK_TEMPFAIL" ]
	run sql "SELECT last_diag, refused FROM results WHERE run_id='px1'"
	assert_output --partial "HTTP 502"
	assert_output --partial "|0"
	spawn_dispatcher "$port" --quiet
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT count(*) FROM receipts")" = 1 ]
	kill "$PROXY_PID"
}

@test "a 429 with Retry-After ends the pass at once; nothing of the session is sent before that time; heartbeats go on" {
	start_dispatcher
	open_session
	retain_many 5
	local before reports
	before=$(sql "SELECT sum(attempts) FROM results")
	reports=$(admin GET /admin/summary | grep -o '"reports":[0-9]*')
	fault 429 10 3600000                          # Retry-After: an hour
	run exec-reconcile --budget-ms "$WAIT_MS"
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --partial "Retry-After"
	# exactly one attempt was made: the pass stopped, the others were not counted
	[ "$(sql "SELECT sum(attempts) FROM results")" = $((before + 1)) ]
	[ "$(sql "SELECT retry_after_at > strftime('%s','now') * 1000 + 3500000 FROM sessions WHERE status = 'current'")" = 1 ]
	admin DELETE /admin/faults >/dev/null
	reports=$(admin GET /admin/summary | grep -o '"reports":[0-9]*')
	# no pass, no exec-report sends anything before the time
	run exec-reconcile --drain --budget-ms "$WAIT_MS"
	[ "$status" -eq "$EK_TEMPFAIL" ]
	assert_output --partial "asked to wait"
	run exec-report d1
	[ "$status" -eq "$EK_TEMPFAIL" ]
	[ "$(admin GET /admin/summary | grep -o '"reports":[0-9]*')" = "$reports" ]
	[ "$(sql "SELECT sum(attempts) FROM results")" = $((before + 1)) ]
	run exec-session heartbeat                     # never held back; it tells the hold
	assert_success
	assert_output --regexp '^reconcile-due hold-ms=[0-9]+$'
	[ "${output#*=}" -gt 3500000 ]
	run exec-session heartbeat --json
	[[ $output =~ \"hold_ms\":([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 3500000 ] || fail "$output"
}

@test "--drain waits out a Retry-After that ends within its budget, then goes on at once" {
	start_dispatcher
	open_session
	retain_many 5
	fault 5xx 1 1000                                 # a 503 with Retry-After: 1 s
	run exec-reconcile --drain --budget-ms "$WAIT_MS"
	assert_success
	assert_output --partial "5 delivered, 0 refused, 0 waiting in 2 passes"
	local i
	for i in 1 2 3 4 5; do [ "$(disp_charges "d$i")" = 1 ]; done
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	run exec-session heartbeat
	assert_output current                            # the hold is over: no word of it
}

@test "after a short Retry-After every result is delivered once" {
	start_dispatcher
	open_session
	retain_many 5
	fault 5xx 1 1000                                 # a 503 with Retry-After: 1 s
	run exec-reconcile --budget-ms "$WAIT_MS"
	[ "$status" -eq "$EK_TEMPFAIL" ]
	wait_until 'exec-reconcile --drain --budget-ms "$WAIT_MS" >/dev/null 2>&1'
	local i
	for i in 1 2 3 4 5; do [ "$(disp_charges "d$i")" = 1 ]; done
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
}

@test "a run's output goes with its receipt (prune) and with its evidence (export), never before" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec o1 /bin/sh '["-c","echo hello; echo e >&2"]')"
	exec-run start --wait >/dev/null
	[ "$(cat "$EXEC_STATE_DIR/out/o1.stdout")" = hello ]
	run exec-reconcile --prune-receipts 1h            # the receipt is young: kept, and so is the output
	assert_output "pruned 0 receipts, removed 0 output files"
	[ -e "$EXEC_STATE_DIR/out/o1.stdout" ]
	run exec-inspect summary --json
	assert_output --regexp '"output":\{"files":2,"bytes":8\}'
	run exec-reconcile --prune-receipts 0s
	assert_output "pruned 1 receipt, removed 2 output files"
	[ ! -e "$EXEC_STATE_DIR/out/o1.stdout" ]
	[ ! -e "$EXEC_STATE_DIR/out/o1.stderr" ]
	# a refused result keeps its output as evidence until it is exported
	submit_and_accept "$(spec o2 /bin/sh '["-c","echo kept; echo e >&2"]')"
	fault 4xx 1
	exec-run start --wait >/dev/null 2>&1 || true
	[ "$(sql "SELECT refused FROM results WHERE run_id = 'o2'")" = 1 ]
	run exec-reconcile --prune-receipts 0s
	[ -e "$EXEC_STATE_DIR/out/o2.stdout" ]
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/ev.jsonl"
	assert_output "exported 1 result, removed 2 output files"
	[ ! -e "$EXEC_STATE_DIR/out/o2.stdout" ]
}

@test "--output-cap removes acknowledged runs' output oldest first, never a retained run's; --prune-receipts needs a unit" {
	start_dispatcher
	open_session
	local i
	for i in 1 2 3; do
		submit_and_accept "$(spec "c$i" /bin/sh '["-c","head -c 1000 /dev/zero; echo >&2"]')"
		exec-run start --wait >/dev/null
	done
	submit_and_accept "$(spec kept /bin/sh '["-c","head -c 1000 /dev/zero; echo >&2"]')"
	fault 5xx 100
	exec-run start --wait --budget-ms 100 >/dev/null 2>&1 || true   # retained, not acknowledged
	admin DELETE /admin/faults >/dev/null
	run exec-reconcile --output-cap 2500 --json
	assert_output '{"event":"collected","output_files":4}'   # c1, c2: stdout and stderr each
	[ ! -e "$EXEC_STATE_DIR/out/c1.stdout" ]
	[ ! -e "$EXEC_STATE_DIR/out/c2.stdout" ]
	[ -e "$EXEC_STATE_DIR/out/c3.stdout" ]
	[ -e "$EXEC_STATE_DIR/out/kept.stdout" ]
	run exec-reconcile --output-cap 1
	assert_output "removed 2 output files"                     # c3; kept is retained: never
	[ -e "$EXEC_STATE_DIR/out/kept.stdout" ]
	run exec-reconcile --prune-receipts 30
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "with its unit"
	run exec-reconcile --output-cap 5 --prune-receipts 1d
	[ "$status" -eq "$EK_USAGE" ]
}

# snapshot: the state's bytes, every row of it, and the names under out/.
snapshot() {
	sql .dump
	sha256sum "$EXEC_STATE_DIR"/state.db*
	ls -A "$EXEC_STATE_DIR/out"
}

@test "--dry-run says what a prune would remove, one JSON line per receipt, and changes nothing" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec p1 /bin/echo '["a"]')" "$(spec p2)" "$(spec p3)"
	exec-run start --wait >/dev/null
	sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE receipts SET acked_at = acked_at - 40 * 86400000 WHERE run_id <> 'p3'"
	local before
	before=$(snapshot)
	run --separate-stderr exec-reconcile --prune-receipts 30d --dry-run --json
	assert_success
	# one line each, in the order they were acknowledged (either may be first)
	assert_line --regexp '^\{"event":"would_prune","run_id":"p1","acked_at":[0-9]+\}$'
	assert_line --regexp '^\{"event":"would_prune","run_id":"p2","acked_at":[0-9]+\}$'
	assert_line --index 2 '{"event":"pruned","dry_run":true,"rows":2}'
	[ "${#lines[@]}" = 3 ]
	run exec-reconcile --prune-receipts 30d --dry-run
	assert_success
	assert_output "would prune 2 receipts (dry run: nothing changed)"
	assert_equal "$(snapshot)" "$before"
	# the real prune removes exactly what the dry run named
	run exec-reconcile --prune-receipts 30d --json
	assert_output --regexp '^\{"event":"pruned","dry_run":false,"rows":2,"output_files":[0-9]+\}$'
	[ "$(sql "SELECT run_id FROM receipts")" = p3 ]
	# usage: --dry-run needs a prune or an export; the age needs its unit
	run exec-reconcile --dry-run
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--dry-run goes with --prune-receipts, --prune-records or --export-evidence"
	run exec-reconcile --prune-receipts 30 --dry-run
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "'30' is not an age with its unit, like 30d"
	[ "$(sql "SELECT run_id FROM receipts")" = p3 ]
}

# settled_state: p1, p2 delivered and their receipts pruned (records with
# the dispatcher's acknowledgement); u1 refused and exported (a record
# without one); n1 a record of an unknown run; every record two days old.
settled_state() {
	start_dispatcher
	open_session
	submit_and_accept "$(spec p1)" "$(spec p2)"
	spec u1 | exec-accept >/dev/null                     # never submitted: refused
	exec-run start --wait >/dev/null 2>&1 || true
	exec-reconcile --prune-receipts 0s >/dev/null
	exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/ev.jsonl" >/dev/null
	sql_write "INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
		VALUES ('n1', 't-n1', 'inc-x', 'ses-x', '{}', 'r', 0);
		INSERT INTO run_records(run_id, txn_id, incarnation, session_id, known, evidence, recorded_at)
		SELECT 'n1', 't-n1', 'inc-x', 'ses-x', 'unknown', 'its supervisor vanished', max(recorded_at)
		FROM run_records;
		UPDATE run_records SET recorded_at = recorded_at - 2 * 86400000"
	[ "$(sql "SELECT group_concat(run_id || ':' || IFNULL(acked_at > 0, 'no'), ' ') FROM
		(SELECT * FROM run_records ORDER BY run_id)")" = "n1:no p1:1 p2:1 u1:no" ]
}

@test "--prune-records forgets only runs settled for good: unknown, refused and undelivered records are kept, and counted" {
	settled_state
	run exec-reconcile --prune-records 3d                 # younger than the age: nothing goes
	assert_success
	assert_output "0 records dropped, 0 kept: not settled for good; 0 ended sessions dropped; removed 0 output files"
	run exec-reconcile --prune-records 1d
	assert_success
	assert_output --regexp "^2 records dropped, 2 kept: not settled for good; 0 ended sessions dropped; removed [0-9]+ output files$"
	[ "$(sql "SELECT group_concat(run_id, ' ') FROM (SELECT run_id FROM run_records ORDER BY run_id)")" = "n1 u1" ]
	# the spec goes with the record: the run is forgotten, and a lookup says so
	[ "$(sql "SELECT count(*) FROM accepts WHERE run_id IN ('p1', 'p2')")" = 0 ]
	run exec-inspect lookup p1 --session "$(current_session)"
	assert_success
	assert_output --partial ABSENT
	run exec-inspect show p1
	[ "$status" -eq "$EK_NOINPUT" ]
	assert_output --partial "forgotten once the dispatcher settled it for good"
	run exec-inspect lookup u1 --session "$(current_session)"
	assert_output --partial FILTERED                      # kept, under this session
	run exec-inspect lookup n1 --session "$(current_session)"
	assert_output --partial FOUND
	# and again: what is kept stays kept
	run exec-reconcile --prune-records 0s --json
	assert_output --regexp '^\{"event":"records_pruned","dry_run":false,"records":0,"handbacks":0,"sessions":0,"kept":2,"output_files":[0-9]+\}$'
	[ "$(sql "SELECT count(*) FROM run_records")" = 2 ]
	# the database itself refuses to drop a record not settled for good
	run sql_write "DELETE FROM run_records WHERE run_id = 'n1'"
	assert_failure
	assert_output --partial "a run record is kept until the dispatcher settled the run for good"
	run sql_write "DELETE FROM run_records WHERE run_id = 'u1'"
	assert_failure
}

@test "receipts go on being numbered past every run ever accepted once the newest is forgotten" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec p1)"
	exec-run start --wait >/dev/null
	local first
	first=$(sql "SELECT receipt FROM accepts WHERE run_id = 'p1'")
	exec-reconcile --prune-receipts 0s >/dev/null
	sql_write "UPDATE run_records SET recorded_at = recorded_at - 1000"
	run exec-reconcile --prune-records 0s
	assert_output --regexp "^1 record dropped,"
	[ "$(sql "SELECT count(*) FROM accepts")" = 0 ]
	submit_and_accept "$(spec p2)"
	[ "$(sql "SELECT receipt FROM accepts WHERE run_id = 'p2'")" = "${first%:*}:2" ]
}

@test "--prune-records --dry-run names what would go, one JSON line each, and changes nothing" {
	settled_state
	local before
	before=$(snapshot)
	run --separate-stderr exec-reconcile --prune-records 1d --dry-run --json
	assert_success
	assert_line '{"event":"would_drop","what":"record","run_id":"p1"}'
	assert_line '{"event":"would_drop","what":"record","run_id":"p2"}'
	assert_line --index 2 '{"event":"records_pruned","dry_run":true,"records":2,"handbacks":0,"sessions":0,"kept":2}'
	[ "${#lines[@]}" = 3 ]
	run exec-reconcile --prune-records 1d --dry-run
	assert_success
	assert_output "2 records would be dropped, 2 kept: not settled for good; 0 ended sessions would be dropped (dry run: nothing changed)"
	assert_equal "$(snapshot)" "$before"
	run exec-reconcile --prune-records 1d --prune-receipts 1d
	[ "$status" -eq "$EK_USAGE" ]
	run exec-reconcile --prune-records 30
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--prune-records: '30' is not an age with its unit"
}

@test "--prune-records forgets a hand-back the dispatcher re-queued, with its run, and then its ended session; an unacknowledged one stays" {
	start_dispatcher
	open_session
	local first
	first=$(current_session)
	submit_and_accept "$(spec hb1 /bin/true '[]' '"due_at":32503680000000')"
	exec-session close >/dev/null
	[[ "$(sql "SELECT requeued_as FROM handbacks WHERE run_id = 'hb1'")" =~ ^rq- ]]
	open_session
	# hb2: marked, never acknowledged (the dispatcher's answer was lost)
	sql_write "INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
		SELECT 'hb2', 't-hb2', incarnation, session_id, '{}', 'r', 0 FROM sessions WHERE session_id = '$first';
		INSERT INTO handbacks(run_id, incarnation, session_id, asked_at)
		SELECT 'hb2', incarnation, session_id, 0 FROM sessions WHERE session_id = '$first';"
	sql_write "UPDATE sessions SET ended_at = ended_at - 2 * 86400000 WHERE session_id = '$first'"
	run exec-reconcile --prune-records 1d                 # the hand-back is young
	assert_output --regexp "^0 records dropped, 1 kept: not settled for good; 0 ended sessions dropped"
	run exec-reconcile --prune-records 0s                 # acknowledged before now: it goes
	assert_success
	assert_output --regexp "^1 record dropped, 1 kept: not settled for good; 0 ended sessions dropped"
	[ "$(sql "SELECT count(*) FROM runs WHERE run_id = 'hb1'")" = 0 ]
	[ "$(sql "SELECT count(*) FROM accepts WHERE run_id = 'hb1'")" = 0 ]
	[ "$(sql "SELECT run_id FROM handbacks")" = hb2 ]
	run sql_write "DELETE FROM handbacks WHERE run_id = 'hb2'"
	assert_failure
	assert_output --partial "a handback is kept until the dispatcher re-queued its run"
	# the first session still has hb2: kept; without it, it goes
	[ "$(sql "SELECT count(*) FROM sessions WHERE session_id = '$first'")" = 1 ]
	sql_write "DROP TRIGGER handbacks_kept; DELETE FROM handbacks WHERE run_id = 'hb2';
		DELETE FROM accepts WHERE run_id = 'hb2'"
	run exec-reconcile --prune-records 1d
	assert_output --regexp "^0 records dropped, 0 kept: not settled for good; 1 ended session dropped;"
	[ "$(sql "SELECT count(*) FROM sessions WHERE session_id = '$first'")" = 0 ]
	[ "$(sql "SELECT count(*) FROM sessions WHERE status = 'current'")" = 1 ]
	exec-session heartbeat >/dev/null
}

# adoptable_state: d1, d2 retained under a session replaced by a new one
# (adoptable), and seed_undeliverable 4: x2, x4 refused, x1, x3 of a session this state
# never had (not adoptable).
adoptable_state() {
	start_dispatcher
	open_session
	OLD=$(current_session)
	retain_many 2
	open_session
	seed_undeliverable 4
}

@test "--export-evidence keeps back what adoption could still deliver, and says so; --include-adoptable exports it" {
	adoptable_state
	local f=$BATS_TEST_TMPDIR/ev.jsonl before
	before=$(snapshot)
	run --separate-stderr exec-reconcile --export-evidence "$f" --dry-run --json
	assert_success
	[ "${#lines[@]}" = 5 ]
	assert_line --index 0 --regexp '^\{"event":"would_export","run_id":"x1","session_id":"ses-old","refused":false,"chosen_at":0\}$'
	assert_line --index 1 --regexp '^\{"event":"would_export","run_id":"x2","session_id":"ses-[^"]*","refused":true,"chosen_at":0\}$'
	assert_line --index 4 '{"event":"exported","dry_run":true,"rows":4,"kept_adoptable":2}'
	run exec-reconcile --export-evidence "$f" --dry-run
	assert_success
	assert_line --index 0 "would export 4 results (dry run: nothing changed)"
	assert_line --index 1 --partial "would keep back 2 results that adoption could still deliver"
	assert_equal "$(snapshot)" "$before"
	[ ! -e "$f" ]
	# the export: the four, not d1 and d2
	run exec-reconcile --export-evidence "$f"
	assert_success
	assert_line --index 0 --regexp "^exported 4 results, removed [0-9]+ output files$"
	assert_line --index 1 "kept back 2 results that adoption could still deliver (their sessions ended unrevoked: exec-session adopt SESSION_ID; --include-adoptable exports them)"
	[ "$(grep -c . "$f")" = 4 ]
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM results ORDER BY run_id)")" = d1,d2 ]
	run exec-reconcile --export-evidence "$f" --dry-run
	[ "$status" -eq "$EK_CANTCREAT" ]            # as the export itself: never overwrites
	# still adoptable: exec-session adopt delivers them
	run exec-session adopt "$OLD"
	assert_success
	run exec-reconcile
	assert_success
	[ "$(sql "SELECT count(*) FROM receipts WHERE run_id IN ('d1', 'd2')")" = 2 ]
}

@test "--include-adoptable exports adoptable results too; a revoked session's results are never adoptable" {
	adoptable_state
	sqlite3 "$EXEC_STATE_DIR/state.db" "INSERT INTO accepts(run_id, txn_id, incarnation, session_id, content, receipt, accepted_at)
		SELECT 'v1', 't', incarnation, session_id, '{}', 'r', 0 FROM sessions WHERE session_id = '$OLD';
		INSERT INTO sessions(incarnation, session_id, dispatcher, credential, status, opened_at, lease_ms, heartbeat_ms)
		SELECT incarnation, 'ses-revoked', dispatcher, 'c', 'revoked', 0, 1, 1 FROM sessions WHERE session_id = '$OLD';
		INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body)
		SELECT 'v1', incarnation, 'ses-revoked', 'exited', 0, 'm', 0, x'7b7d' FROM sessions WHERE session_id = '$OLD'"
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/one.jsonl" --json
	assert_success
	assert_output --regexp '^\{"event":"exported","dry_run":false,"rows":5,"kept_adoptable":2,"output_files":[0-9]+\}$'
	grep -q '"run_id":"v1"' "$BATS_TEST_TMPDIR/one.jsonl"
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/two.jsonl" --include-adoptable --dry-run --json
	assert_line --index 2 '{"event":"exported","dry_run":true,"rows":2,"kept_adoptable":0}'
	run exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/two.jsonl" --include-adoptable
	assert_success
	assert_output --regexp "^exported 2 results, removed [0-9]+ output files$"
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	run exec-reconcile --include-adoptable
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--include-adoptable goes with --export-evidence"
}

@test "a pass sends nothing when less of its budget is left than an acknowledgement took" {
	start_dispatcher
	open_session
	retain_many 3
	local sent attempts
	sent=$(admin GET /admin/stats | sed -n 's/.*"result":\([0-9]*\).*/\1/p')
	attempts=$(sql "SELECT run_id || ':' || attempts FROM results")
	fault delay 100 1800                     # every acknowledgement takes 1.8 s or more
	run exec-reconcile --budget-ms 3000
	[ "$status" -eq "$EK_TEMPFAIL" ]
	# the first is delivered; after it at most 1.2 s is left, shorter than it
	# took: the others are not sent (sent, they would only time out)
	[[ $output == *"1 delivered, 0 refused, 2 waiting"* ]] || fail "$output"
	[[ $output == *"less of the budget was left than an acknowledgement took"* ]] || fail "$output"
	[[ $output != *"no answer in time"* ]] || fail "$output"
	[ "$(admin GET /admin/stats | sed -n 's/.*"result":\([0-9]*\).*/\1/p')" = $((sent + 1)) ]
	# the two left are not charged an attempt
	local row
	[ "$(sql "SELECT count(*) FROM results")" = 2 ]
	for row in $(sql "SELECT run_id || ':' || attempts FROM results"); do
		[[ $'\n'$attempts$'\n' == *$'\n'$row$'\n'* ]] || fail "$row: was $attempts"
	done
}

@test "a supervisor's result is its own from the moment it is chosen: no pass takes it, no heartbeat calls it due" {
	ready own
	EXEC_PAUSE_AT=retained exec-run supervise own >"$BATS_TEST_TMPDIR/sup.out" 2>&1 3>&- &
	local sup=$!
	wait_until "stopped $sup"                      # chose and committed, not yet delivering
	[ "$(sql "SELECT attempts, claim_owner IS NOT NULL FROM results WHERE run_id = 'own'")" = "0|1" ]
	run exec-session heartbeat
	assert_output current
	run exec-reconcile
	assert_output --partial "another deliverer holds the claim"
	[ "$(disp_reports own)" = 0 ]
	kill -CONT "$sup"
	wait "$sup" || fail "the supervisor failed: $(cat "$BATS_TEST_TMPDIR/sup.out")"
	[ "$(disp_charges own)" = 1 ]
	[ "$(sql "SELECT attempts FROM receipts WHERE run_id = 'own'")" = 1 ]
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
}

@test "a supervisor that may not send its result now lets go of its claim, and the heartbeat calls it due" {
	ready held
	EXEC_PAUSE_AT=retained exec-run supervise held >/dev/null 2>&1 3>&- &
	local sup=$!
	wait_until "stopped $sup"
	# the dispatcher asked for a pause an hour long (as a Retry-After would)
	sqlite3 -cmd ".timeout $WAIT_MS" "$EXEC_STATE_DIR/state.db" \
		"UPDATE sessions SET retry_after_at = strftime('%s','now') * 1000 + 3600000 WHERE status = 'current'"
	kill -CONT "$sup"
	wait "$sup" || true                            # not delivered: exit 75
	[ "$(sql "SELECT attempts, claim_owner IS NULL FROM results WHERE run_id = 'held'")" = "0|1" ]
	run exec-session heartbeat
	assert_output --regexp '^reconcile-due hold-ms=[0-9]+$'
	[ "$(disp_reports held)" = 0 ]
}

@test "the result of a supervisor killed after choosing is due at once for a pass, and delivered once" {
	ready gone
	EXEC_CRASH_AT=retained exec-run supervise gone >/dev/null 2>&1 3>&- || true
	# its claim has seconds to run, but its owner is gone
	[ "$(sql "SELECT attempts, claim_owner IS NOT NULL, claim_until > strftime('%s','now') * 1000 + 1000 FROM results WHERE run_id = 'gone'")" = "0|1|1" ]
	run exec-session heartbeat
	assert_output reconcile-due
	run exec-reconcile
	assert_success
	[ "$(disp_charges gone)" = 1 ]
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
}
