#!/usr/bin/env bats
# The operator's views: tables sized to their content (exec-inspect list,
# show, exec-session show), times as date-times in the local zone or UTC,
# -o COLUMNS, a run's whole story, its captured output (logs, -f), list
# filters, and the current session id alone.

load helpers
load inspect

# A run id of 100 characters: $1 then x's.
long_id() {
	local id=$1
	while [ "${#id}" -lt 100 ]; do id+=x; done
	echo "$id"
}

# aligned: every line of $output below the header starts each column at
# the offset where its header name starts (a cell never starts with a
# blank and the column before it ends in one).
aligned() {
	awk 'NR == 1 {
		for (i = 2; i <= length($0); i++)
			if (substr($0, i - 1, 1) == " " && substr($0, i, 1) != " ")
				off[++n] = i
		next
	}
	{
		for (k = 1; k <= n; k++)
			if (substr($0, off[k] - 1, 1) != " " || substr($0, off[k], 1) == " ") {
				printf "line %d: column %d does not start at offset %d: %s\n", NR, k + 1, off[k], $0
				bad = 1
			}
	}
	END { exit bad }' <<<"$output"
}

# date-time of epoch ms $1 as the views print it: local unless $2 is -u
when() {
	if [ "${2:-}" = -u ]; then
		date -u -d "@$(($1 / 1000))" '+%Y-%m-%d %H:%M:%SZ'
	else
		date -d "@$(($1 / 1000))" '+%Y-%m-%d %H:%M:%S'
	fi
}

# Two refused results under 100-character ids, one exited and one
# exec_failed (never submitted to the dispatcher: it refuses them).
two_refused() {
	start_dispatcher
	open_session
	L1=$(long_id a)
	L2=$(long_id b)
	{ spec "$L1" /bin/echo '["hi"]'; spec "$L2" /nonexistent/prog; } | exec-accept >/dev/null
	exec-run start --wait >/dev/null 2>&1 || true
	[ "$(sql "SELECT count(*) FROM results WHERE refused = 1")" = 2 ]
}

@test "tables: 100-character run ids keep every column at the header's offsets" {
	two_refused
	run --separate-stderr exec-inspect list refused
	assert_success
	[ "${#lines[@]}" = 3 ]
	assert_line -n 0 --regexp '^RUN_ID +INCARNATION +SESSION_ID +OUTCOME +EXIT_CODE +CHOSEN_AT +ATTEMPTS +REFUSED_CAUSE +LAST_DIAG$'
	assert_line --regexp "^$L2 .* exec_failed "
	aligned || fail "not aligned: $output"
	# LAST_DIAG as stored (made safe for a terminal), never shell-quoted
	diag=$(sql "SELECT last_diag FROM results WHERE run_id = '$L1'")
	[[ "$diag" == *" "* ]]
	[[ "$(grep "^$L1 " <<<"$output")" == *"  $diag" ]] || fail "last_diag not printed as it is: $output"
	# every other list and the session table
	for k in retained receipts queued; do
		run --separate-stderr exec-inspect list "$k"
		assert_success
	done
	spec "$(long_id q)" | exec-accept >/dev/null
	run --separate-stderr exec-inspect list queued
	aligned || fail "list queued: $output"
	open_session
	run --separate-stderr exec-session show
	assert_success
	assert_line -n 0 --regexp '^SESSION_ID +INCARNATION +STATUS +OPENED +ENDED +LAST_BEAT +LEASE +DISPATCHER$'
	[ "${#lines[@]}" = 3 ]
	aligned || fail "exec-session show: $output"
	run --separate-stderr exec-inspect list quarantined
	aligned || fail "list quarantined: $output"
}

@test "times: local date-times, --utc in UTC, never epoch ms in human output" {
	two_refused
	chosen=$(sql "SELECT chosen_at FROM results WHERE run_id = '$L1'")
	opened=$(sql "SELECT opened_at FROM sessions WHERE status = 'current'")
	run --separate-stderr env TZ=JST-9 exec-inspect list refused
	assert_success
	assert_line -n 1 --partial "  $(TZ=JST-9 when "$chosen")  "
	run --separate-stderr env TZ=JST-9 exec-inspect list refused --utc
	assert_line -n 1 --partial "  $(when "$chosen" -u)  "
	[ "$(TZ=JST-9 when "$chosen")" != "$(when "$chosen" -u)" ]
	run --separate-stderr env TZ=JST-9 exec-session show --utc
	assert_line -n 1 --partial "  $(when "$opened" -u)  "
	run --separate-stderr env TZ=JST-9 exec-session show
	assert_line -n 1 --partial "  $(TZ=JST-9 when "$opened")  "
	local -a views=("exec-inspect list refused" "exec-inspect show $L1" "exec-inspect summary"
		"exec-session show")
	for v in "${views[@]}"; do
		read -ra cmd <<<"$v"
		run --separate-stderr "${cmd[@]}"
		assert_success
		# (a start marker's @ms is part of an identifier)
		refute_output --regexp '(^|[^0-9a-zA-Z@])[0-9]{13}([^0-9a-zA-Z]|$)'
		refute_output --regexp '[0-9] ms'
	done
	run --separate-stderr exec-inspect summary
	assert_line --regexp '^oldest unreconciled result: chosen [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}, ([0-9]+ms|[0-9]+s|[0-9]+m[0-9]{2}s) ago$'
	assert_line --regexp '^unreconciled results: 2 \(.*; [0-9]+ delivery attempts? so far\)$'
	# JSON keeps epoch ms
	run --separate-stderr exec-inspect list refused --json
	assert_output --partial "\"chosen_at\":$chosen,"
}

@test "-o COLUMNS: those columns in that order, any case; an unknown one is a usage error naming the valid ones" {
	two_refused
	run --separate-stderr exec-inspect list refused -o outcome,RUN_ID
	assert_success
	assert_line -n 0 --regexp '^OUTCOME +RUN_ID$'
	assert_line "exited       $L1"
	assert_line "exec_failed  $L2"
	run --separate-stderr exec-inspect list refused --columns run_id,nonsense
	[ "$status" -eq "$EK_USAGE" ]
	[ -z "$output" ]
	[[ "$stderr" == *"unknown column 'nonsense' (valid: RUN_ID, INCARNATION, SESSION_ID, OUTCOME,"* ]]
	run --separate-stderr exec-inspect list running -o nonsense   # no rows: still checked
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect list refused -o run_id --json
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-session show -o status,session_id
	assert_success
	assert_line -n 1 --regexp '^current +ses-[0-9a-f]+$'
	run --separate-stderr exec-session show -o lease,bogus
	[ "$status" -eq "$EK_USAGE" ]
	[[ "$stderr" == *"unknown column 'bogus' (valid: SESSION_ID, INCARNATION, STATUS, OPENED, ENDED, LAST_BEAT, LEASE, DISPATCHER)"* ]]
}

# Has process $1 a handler for SIGINT and SIGTERM (its SigCgt mask)?
catches_stop() {
	local mask
	mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null) && [ -n "$mask" ] &&
		(( (0x$mask & 0x4002) == 0x4002 ))
}

# The story's value for a label: story_value LABEL (from $output)
story_value() {
	sed -n "s/^$1: *//p" <<<"$output" | head -1
}

@test "show: a run's whole story, before and after its execution row is released, and after acknowledgement" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec st1 /bin/sh '["-c","echo out; echo err >&2"]')"
	run --separate-stderr exec-inspect show st1
	assert_success
	[ "$(story_value program)" = /bin/sh ]
	[ "$(story_value args)" = '["-c","echo out; echo err >&2"]' ]
	[[ "$(story_value binding)" == "incarnation=inc-"*"(session current)" ]]
	[[ "$(story_value accepted)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9:]{8}$ ]]
	[ "$(story_value started)" = - ]
	[ "$(story_value outcome)" = - ]
	# delivered against a failing dispatcher: the result is retained, the row released
	fault 5xx 100000
	exec-run start --wait >/dev/null 2>&1 || true
	[ "$(sql "SELECT count(*) FROM runs WHERE run_id = 'st1'")" = 0 ]
	[ "$(sql "SELECT program FROM results WHERE run_id = 'st1'")" = /bin/sh ]
	run --separate-stderr exec-inspect show st1
	assert_success
	[ "$(story_value program)" = /bin/sh ]
	[ "$(story_value args)" = '["-c","echo out; echo err >&2"]' ]
	[[ "$(story_value started)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9:]{8}$ ]]
	[[ "$(story_value finished)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9:]{8}$ ]]
	[[ "$(story_value duration)" =~ ^[0-9]+(ms|s)$ ]]
	[ "$(story_value outcome)" = "exited 0" ]
	[[ "$(story_value delivery)" =~ ^[0-9]+\ attempts?,\ not\ acknowledged\ yet$ ]]
	[ "$(story_value stdout)" = "$EXEC_STATE_DIR/out/st1.stdout" ]
	[ "$(story_value stderr)" = "$EXEC_STATE_DIR/out/st1.stderr" ]
	# acknowledged: the result goes too; the receipt and the accepted spec keep the story
	admin DELETE /admin/faults >/dev/null
	exec-reconcile >/dev/null
	[ "$(sql "SELECT count(*) FROM results WHERE run_id = 'st1'")" = 0 ]
	run --separate-stderr exec-inspect show st1
	assert_success
	[ "$(story_value program)" = /bin/sh ]
	[ "$(story_value outcome)" = "exited 0" ]
	[[ "$(story_value started)" =~ ^[0-9]{4}- ]]
	[[ "$(story_value duration)" =~ ^[0-9]+(ms|s)$ ]]
	[[ "$(story_value delivery)" =~ ^[0-9]+\ attempts?,\ dispatcher\ record\ [0-9]+,\ acknowledged\ [0-9]{4}- ]]
	run --separate-stderr exec-inspect show st1 --json
	assert_output --regexp '"story":\{"program":"/bin/sh","args":\["-c","echo out; echo err >&2"\],"env":null,"cwd":null,"timeout_ms":null,"accepted_at":[0-9]+,"started_at":[0-9]+,"finished_at":[0-9]+,"duration_ms":[0-9]+,"outcome":"exited","exit_code":0,"message":"exited with status 0","stdout_dropped":0,"stderr_dropped":0,"attempts":[0-9]+,"record_id":[0-9]+,"acked_at":[0-9]+,'
	# the lookup still never tells the program
	run exec-inspect lookup st1 --session "$(current_session)" --json
	refute_output --partial /bin/sh
}

@test "logs: a run's stdout and stderr; a run without output is 66" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec lg1 /bin/sh '["-c","echo out; printf \"e\u001b]0;x\u0007\\n\" >&2"]')"
	exec-run start --wait >/dev/null
	run --separate-stderr exec-inspect logs lg1
	assert_success
	assert_output out
	run --separate-stderr exec-inspect logs lg1 --stderr
	assert_success
	# not a terminal: the bytes pass as they are
	[ "$(exec-inspect logs lg1 --stderr | od -An -c | tr -s ' ')" = "$(od -An -c <"$EXEC_STATE_DIR/out/lg1.stderr" | tr -s ' ')" ]
	# on a terminal: made safe, the escape sequence never reaches it
	run script -qec "exec-inspect logs lg1 --stderr" /dev/null
	assert_success
	[[ "$output" == *"e?]0;x?"* ]] || fail "not made safe: $(od -c <<<"$output")"
	[[ "$output" != *$'\e'* ]]
	run --separate-stderr exec-inspect logs nope
	[ "$status" -eq "$EK_NOINPUT" ]
	[[ "$stderr" == *"run 'nope': no such run"* ]]
	run --separate-stderr exec-inspect logs nope -f
	[ "$status" -eq "$EK_NOINPUT" ]
	[[ "$stderr" == *"run 'nope': no such run"* ]]
	submit_and_accept "$(spec lg2 /bin/true)"
	exec-run start --wait >/dev/null
	run --separate-stderr exec-inspect logs lg2
	[ "$status" -eq "$EK_NOINPUT" ]
	[[ "$stderr" == *"run 'lg2': no captured stdout (out/lg2.stdout): it wrote none"* ]]
	run --separate-stderr exec-inspect logs lg1 --json
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect show lg1 --stderr
	[ "$status" -eq "$EK_USAGE" ]
}

@test "logs -f follows a running run and ends once it has finished" {
	local go=$BATS_TEST_TMPDIR/go out=$BATS_TEST_TMPDIR/follow.out
	ready fl1 /bin/sh "[\"-c\",\"echo one; $(guest_wait "$go"); echo two\"]"
	exec-inspect logs fl1 -f >"$out" 2>&1 3>&- &
	local follower=$!
	exec-run supervise fl1 >/dev/null 2>&1 3>&- &
	local sup=$!
	wait_until 'grep -qx one "$out"'
	kill -0 "$follower" || fail "the follow ended before the run: $(cat "$out")"
	touch "$go"
	wait "$sup" || true
	wait_until '! kill -0 "$follower" 2>/dev/null'
	wait "$follower" || fail "logs -f: status $?"
	[ "$(cat "$out")" = "$(printf 'one\ntwo')" ]
}

@test "logs -f: Ctrl-C (SIGINT) ends the follow cleanly, status 0" {
	ready fl2 /bin/sleep '["3600"]'
	exec-run supervise fl2 >/dev/null 2>&1 3>&- &
	# running, and silent: no capture file yet, so the follow waits for one
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'fl2'"'")" -gt 0 ]'
	exec-inspect logs fl2 -f >"$BATS_TEST_TMPDIR/f.out" 2>&1 3>&- &
	local follower=$!
	# the handler is in place (SigCgt has SIGINT and SIGTERM): no fixed wait
	wait_for catches_stop "$follower"
	kill -INT "$follower"   # its own handler: a background job's inherited SIG_IGN does not hold
	wait "$follower" || fail "status $? after INT: $(cat "$BATS_TEST_TMPDIR/f.out")"
	[ ! -s "$BATS_TEST_TMPDIR/f.out" ]
}

@test "list filters: --since, --outcome, --session; bad values are usage errors" {
	two_refused
	now=$(( $(date +%s) * 1000 ))
	sql_write "INSERT INTO accepts(run_id, txn_id, content, receipt, accepted_at) VALUES ('old', 't', '{}', 'r', 0);
		INSERT INTO results(run_id, incarnation, session_id, outcome, exit_code, message, chosen_at, body, refused)
		VALUES ('old', 'i-x', 's-x', 'timeout', 124, 'm', $((now - 7200000)), x'7b7d', 1);"
	run --separate-stderr exec-inspect list refused --ids
	[ "${lines[0]}" = old ]   # oldest first
	[ "$(sort <<<"$output" | paste -sd' ')" = "$L1 $L2 old" ]
	run --separate-stderr exec-inspect list refused --ids --since 1h
	[ "$(sort <<<"$output" | paste -sd' ')" = "$L1 $L2" ]
	run --separate-stderr exec-inspect list refused --ids --since 3h
	[ "$(sort <<<"$output" | paste -sd' ')" = "$L1 $L2 old" ]
	run --separate-stderr exec-inspect list refused --ids --outcome timeout
	assert_output old
	run --separate-stderr exec-inspect list refused --outcome exec_failed -o run_id
	assert_output "$(printf 'RUN_ID\n%s' "$L2")"
	run --separate-stderr exec-inspect list refused --ids --session s-x
	assert_output old
	run --separate-stderr exec-inspect list refused --json --session "$(current_session)"
	[ "${#lines[@]}" = 2 ]
	run --separate-stderr exec-inspect list refused --since 30
	[ "$status" -eq "$EK_USAGE" ]
	[[ "$stderr" == *"not an age with its unit"* ]]
	run --separate-stderr exec-inspect list refused --outcome failed
	[ "$status" -eq "$EK_USAGE" ]
	[[ "$stderr" == *"--outcome: 'failed' is not exited, killed, timeout, cancelled or exec_failed"* ]]
	run --separate-stderr exec-inspect list queued --outcome exited
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect summary --since 1h
	[ "$status" -eq "$EK_USAGE" ]
}

@test "exec-session show --current --ids prints the current session id alone; 77 when there is none" {
	start_dispatcher
	open_session
	open_session
	run --separate-stderr exec-session show --current --ids
	assert_success
	assert_output "$(current_session)"
	run --separate-stderr exec-session show --ids
	[ "${#lines[@]}" = 2 ]
	run --separate-stderr exec-session show --current
	[ "${#lines[@]}" = 2 ]
	assert_line -n 1 --regexp '^ses-[0-9a-f]+ +inc-[0-9a-f]+ +current '
	exec-session close >/dev/null
	run --separate-stderr exec-session show --current --ids
	[ "$status" -eq "$EK_NOSESSION" ]
	[ -z "$output" ]
	[[ "$stderr" == *"no current session"* ]]
	run --separate-stderr exec-session heartbeat --ids
	[ "$status" -eq "$EK_USAGE" ]
}

@test "plurals: 1 run, 1 attempt" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec p1 /bin/echo '["x"]')"
	run --separate-stderr exec-inspect summary
	assert_line "queued: 1 run of the current session"
	assert_line "running: 0 runs of the current session"
	exec-run start --wait >/dev/null
	run --separate-stderr exec-inspect show p1
	[[ "$(story_value delivery)" == "1 attempt, dispatcher record "* ]]
	# housekeeping of one: "1 receipt", "1 output file", never "1 receipts"
	submit_and_accept "$(spec p2 /bin/echo '["y"]')"
	exec-run start --wait >/dev/null
	sql_write "UPDATE receipts SET acked_at = acked_at - 2 * 86400000 WHERE run_id = 'p2'"
	run --separate-stderr exec-reconcile --prune-receipts 1d --dry-run
	assert_output "would prune 1 receipt (dry run: nothing changed)"
	run --separate-stderr exec-reconcile --prune-receipts 1d
	assert_output "pruned 1 receipt, removed 1 output file"
	# no message of the tools says "1 <plural>" with a bare count: each goes
	# through cli_plural (a count printed before a plural noun is a bug)
	run grep -nE '"[^"]*%(lld|ld|d|zu|" PRId64 ") (results|receipts|runs|files|rows|attempts|hooks|failures|duplicates|output files)\b' \
		"$SRC"/cmd/*.c "$SRC"/libcommon/*.c
	assert_failure
}

# A date-time as the views print it.
DT='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}'

@test "show after housekeeping: a pruned receipt's run tells it finished, how, when and where its evidence went" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec hk1 /bin/sh '["-c","exit 3"]')"
	exec-run start --wait >/dev/null 2>&1 || true
	[ "$(sql "SELECT count(*) FROM receipts WHERE run_id = 'hk1'")" = 1 ]
	sql_write "UPDATE receipts SET acked_at = acked_at - 2 * 86400000 WHERE run_id = 'hk1'"
	exec-reconcile --prune-receipts 1d >/dev/null
	[ "$(sql "SELECT count(*) FROM receipts")" = 0 ]
	run --separate-stderr exec-inspect show hk1
	assert_success
	assert_line -n 0 --regexp "^run hk1: finished \(exited 3\); delivered and acknowledged; its receipt pruned at $DT$"
	[ "$(story_value program)" = /bin/sh ]
	[ "$(story_value outcome)" = "exited 3" ]
	[ "$(story_value message)" = "exited with status 3" ]
	[[ "$(story_value started)" =~ ^$DT$ ]]
	[[ "$(story_value finished)" =~ ^$DT$ ]]
	[[ "$(story_value duration)" =~ ^[0-9]+(ms|s)$ ]]
	[[ "$(story_value delivery)" =~ ^acknowledged\ $DT$ ]]
	[[ "$(story_value evidence)" =~ ^delivered\ and\ acknowledged\;\ its\ receipt\ pruned\ at\ $DT$ ]]
	refute_output --partial "no execution row"
	run --separate-stderr exec-inspect show hk1 --json
	assert_output --regexp '"verdict":"finished",'
	assert_output --regexp '"outcome":"exited","exit_code":3,"message":"exited with status 3",'
	assert_output --regexp '"evidence":"delivered and acknowledged; its receipt pruned","evidence_at":[0-9]+,'
}

@test "show after --export-evidence: the refused run tells its outcome, why it failed, and the file its evidence went to" {
	start_dispatcher
	open_session
	spec ex1 /nonexistent/prog | exec-accept >/dev/null   # never submitted: refused
	run --separate-stderr exec-run start --wait
	# the run's line tells why, for the loop's log
	assert_line --regexp "^ex1 exec_failed 127: delivery refused .*; why: cannot execute '/nonexistent/prog': No such file or directory$"
	[ "$(sql "SELECT refused FROM results WHERE run_id = 'ex1'")" = 1 ]
	exec-reconcile --export-evidence "$BATS_TEST_TMPDIR/ev.jsonl" >/dev/null
	[ "$(sql "SELECT count(*) FROM results")" = 0 ]
	run --separate-stderr exec-inspect show ex1
	assert_success
	assert_line -n 0 --regexp "^run ex1: finished \(exec_failed 127\); refused \(unknown_run\), evidence exported to $BATS_TEST_TMPDIR/ev.jsonl at $DT$"
	[ "$(story_value outcome)" = "exec_failed 127" ]
	[[ "$(story_value message)" == "cannot execute '/nonexistent/prog': No such file or directory" ]]
	[[ "$(story_value evidence)" =~ ^refused\ \(unknown_run\),\ evidence\ exported\ to\ .*/ev.jsonl\ at\ $DT$ ]]
	[ "$(story_value delivery)" = "never acknowledged" ]
}

@test "show of a handed-back run: handed back at T, re-queued as rq-...; the startup report counts it apart from quarantined runs" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec hb1 /bin/true '[]' '"due_at":32503680000000')"
	exec-session close >/dev/null
	rq=$(sql "SELECT requeued_as FROM handbacks WHERE run_id = 'hb1'")
	[[ "$rq" =~ ^rq-[0-9a-f]{16}$ ]]
	run --separate-stderr exec-session open --dispatcher "$DISP_URL" --timeout-ms "$WAIT_MS"
	assert_success
	assert_line "quarantined: 0 runs of other sessions (0 queued, 0 started)"
	assert_line "handed back: 1 run since the state began (0 more marked, not acknowledged yet)"
	run --separate-stderr exec-inspect show hb1
	assert_success
	assert_line -n 0 --regexp "^run hb1: handed back at $DT, re-queued as $rq; never started here$"
	[[ "$(story_value binding)" == *"(session closed; not current: handed back)" ]]
	refute_output --partial "quarantined"
	refute_output --partial "not started yet"
	run --separate-stderr exec-inspect show hb1 --json
	assert_output --regexp '"verdict":"handed_back",'
	assert_output --regexp "\"handed_back_at\":[0-9]+,\"requeued_as\":\"$rq\","
	run --separate-stderr exec-inspect summary --json
	assert_output --partial '"quarantined":{"total":0,"queued":0,"started":0}'
	assert_output --partial '"handed_back":{"acknowledged":1,"pending":0}'
}

@test "show keeps why a run failed after acknowledgement, flags cut output, and tells env names (never values), cwd and timeout" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec wf1 /bin/sh '["-c","head -c 5000 /dev/zero; exit 7"]' \
		'"env":{"TOKEN":"s3cr3t-value","MODE":"x"},"cwd":"/tmp","timeout_ms":60000')"
	# queued: the execution row's env shows its names, never its values
	run --separate-stderr exec-inspect show wf1
	assert_success
	[ "$(story_value env)" = "MODE TOKEN (values not shown)" ]
	refute_output --partial s3cr3t-value
	run --separate-stderr exec-inspect show wf1 --json
	assert_output --partial '"env":{"MODE":"(value not shown)","TOKEN":"(value not shown)"}'
	refute_output --partial s3cr3t-value
	exec-run start --wait --max-output 1000 >/dev/null 2>&1 || true
	[ "$(sql "SELECT count(*) FROM receipts WHERE run_id = 'wf1'")" = 1 ]   # acknowledged
	run --separate-stderr exec-inspect show wf1
	assert_success
	[ "$(story_value message)" = "exited with status 7" ]
	[ "$(story_value output)" = "TRUNCATED at --max-output: 4000 bytes of stdout and 0 of stderr dropped" ]
	[ "$(story_value env)" = "MODE TOKEN (values not shown)" ]
	[ "$(story_value cwd)" = /tmp ]
	[ "$(story_value timeout)" = 1m00s ]
	refute_output --partial s3cr3t-value
	run --separate-stderr exec-inspect show wf1 --json
	assert_output --partial '"env":["MODE","TOKEN"],"cwd":"/tmp","timeout_ms":60000,'
	assert_output --partial '"message":"exited with status 7","stdout_dropped":4000,"stderr_dropped":0,'
	refute_output --partial s3cr3t-value
	# logs says so too, after the output and on stderr: a pipe gets the bytes alone
	run --separate-stderr exec-inspect logs wf1
	assert_success
	[ "$(exec-inspect logs wf1 2>/dev/null | wc -c)" = 1000 ]   # (NUL bytes: wc, not $output)
	[[ "$stderr" == "exec-inspect: run 'wf1': its stdout was cut at the capture bound (exec-run --max-output): 4000 more bytes were dropped" ]]
	[ "$(exec-inspect logs wf1 2>&1 >/dev/null)" = "$stderr" ]
	# and after the receipt is pruned, the run record keeps them, and the
	# spec itself is dropped: its environment values are nowhere any more
	sql_write "UPDATE receipts SET acked_at = acked_at - 2 * 86400000"
	exec-reconcile --prune-receipts 1d >/dev/null
	[ "$(sql "SELECT content FROM accepts WHERE run_id = 'wf1'")" = "" ]
	[ "$(sql "SELECT count(*) FROM runs WHERE run_id = 'wf1'")" = 0 ]
	[ "$(sql "SELECT count(*) FROM results WHERE run_id = 'wf1'")" = 0 ]
	run sqlite3 "$EXEC_STATE_DIR/state.db" .dump
	assert_success
	refute_output --partial s3cr3t-value
	run --separate-stderr exec-inspect show wf1
	[ "$(story_value message)" = "exited with status 7" ]
	[[ "$(story_value output)" == TRUNCATED* ]]
	[ "$(story_value program)" = /bin/sh ]
	[ "$(story_value env)" = "MODE TOKEN (values not shown)" ]
	[ "$(story_value cwd)" = /tmp ]
	[ "$(story_value timeout)" = 1m00s ]
	run --separate-stderr exec-inspect show wf1 --json
	assert_output --partial '"program":"/bin/sh","args":["-c","head -c 5000 /dev/zero; exit 7"],"env":["MODE","TOKEN"],"cwd":"/tmp","timeout_ms":60000,'
	run --separate-stderr exec-inspect list all
	assert_line --regexp '^wf1 +finished +/bin/sh +exited +7 '
	# a run whose output fitted says so
	submit_and_accept "$(spec wf2 /bin/echo '["hi"]')"
	exec-run start --wait >/dev/null 2>&1
	run --separate-stderr exec-inspect show wf2
	[ "$(story_value output)" = "kept whole" ]
	[ "$(story_value env)" = - ]
}

@test "a run settled for good keeps its identity without its spec: the same spec again is a duplicate, another a conflict" {
	start_dispatcher
	open_session
	local s1 s2
	s1=$(spec sd1 /bin/echo '["one"]' '"env":{"K":"v"}')
	submit_and_accept "$s1"
	exec-run start --wait >/dev/null 2>&1
	local receipt
	receipt=$(sql "SELECT receipt FROM accepts WHERE run_id = 'sd1'")
	# not settled for good yet: the database keeps the spec
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE accepts SET content_sha256 = printf('%064d', 0), content = ''"
	assert_failure
	assert_output --partial "an accepted spec is kept until its run is settled for good"
	sql_write "UPDATE receipts SET acked_at = acked_at - 2 * 86400000"
	exec-reconcile --prune-receipts 1d >/dev/null
	[ "$(sql "SELECT content FROM accepts WHERE run_id = 'sd1'")" = "" ]
	[[ "$(sql "SELECT content_sha256 FROM accepts WHERE run_id = 'sd1'")" =~ ^[0-9a-f]{64}$ ]]
	# the same spec, its keys in another order: a duplicate with the original receipt
	run exec-accept --json <<<'{"txn_id":"t-sd1","run_id":"sd1","program":"/bin/echo","env":{"K":"v"},"args":["one"]}'
	assert_success
	assert_output --partial '"outcome":"duplicate"'
	assert_output --partial "\"receipt\":\"$receipt\""
	# another spec, even only another environment value: a conflict
	s2=$(spec sd1 /bin/echo '["one"]' '"env":{"K":"w"}')
	run exec-accept <<<"$s2"
	[ "$status" -eq "$EK_DATAERR" ] || fail "status $status: $output"
	[[ $output == "conflict "*sd1* ]]
	[ "$(sql "SELECT count(*) FROM runs")" = 0 ]
	# a dropped spec never comes back, and its digest never changes
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE accepts SET content = '{}' WHERE run_id = 'sd1'"
	assert_failure
	run sqlite3 "$EXEC_STATE_DIR/state.db" "UPDATE accepts SET content_sha256 = printf('%064d', 0) WHERE run_id = 'sd1'"
	assert_failure
}

@test "cancel: the current session by default, several ids at once; one that cannot be cancelled is said and the rest go on" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec cq0 /bin/true '[]' '"due_at":32503680000000')"
	open_session   # cq0 is now quarantined
	submit_and_accept "$(spec cq1 /bin/true '[]' '"due_at":32503680000000')" \
		"$(spec cq2 /bin/true '[]' '"due_at":32503680000000')"
	run --separate-stderr exec-run cancel cq1 cq2
	assert_success
	assert_line --regexp '^cq1 cancelled 143: delivered '
	assert_line --regexp '^cq2 cancelled 143: delivered '
	[ "$(sql "SELECT group_concat(run_id) FROM receipts WHERE outcome = 'cancelled' ORDER BY run_id")" = cq1,cq2 ]
	submit_and_accept "$(spec cq3 /bin/true '[]' '"due_at":32503680000000')"
	run --separate-stderr exec-run cancel cq0 cq3 nosuch
	[ "$status" -eq "$EK_NOSESSION" ]   # the first failure's
	assert_line --regexp '^cq3 cancelled 143: delivered '
	[[ "$stderr" == *"run 'cq0' belongs to session"* ]]
	[[ "$stderr" == *"run 'nosuch': no execution row"* ]]
	[[ "$stderr" == *"2 runs not cancelled, of the 3 named"* ]]
	[ "$(sql "SELECT state FROM runs WHERE run_id = 'cq0'")" = queued ]
	# --session still guards: a session that is not current cancels nothing
	submit_and_accept "$(spec cq4 /bin/true '[]' '"due_at":32503680000000')"
	run --separate-stderr exec-run cancel cq4 --session ses-0000000000000000
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT cancel_at IS NULL FROM runs WHERE run_id = 'cq4'")" = 1 ]
}

@test "views fit the terminal: long ids cut with an ellipsis to COLUMNS or the tty's width, whole with -w or into a pipe" {
	two_refused
	# COLUMNS: the 100-character ids are cut, the line fits, the columns stay aligned
	run --separate-stderr env COLUMNS=60 LANG=C.UTF-8 exec-inspect list refused -o run_id,outcome,exit_code
	assert_success
	assert_line -n 0 --regexp '^RUN_ID +OUTCOME +EXIT_CODE$'
	assert_line --regexp "^${L1:0:20}x*…  exited "
	while IFS= read -r l; do
		[ "$(LANG=C.UTF-8 wc -m <<<"$l")" -le 61 ] || fail "over 60 columns: $l"
	done <<<"$output"
	refute_output --partial "$L1"
	# without a UTF-8 locale, three dots; aligned either way (awk counts bytes)
	run --separate-stderr env COLUMNS=60 LANG=C LC_ALL=C exec-inspect list refused -o run_id,outcome,exit_code
	assert_line --regexp "^${L1:0:20}x*\.\.\.  exited "
	aligned || fail "not aligned: $output"
	while IFS= read -r l; do
		[ "${#l}" -le 60 ] || fail "over 60 columns: $l"
	done <<<"$output"
	# -w: whole, however narrow the terminal
	run --separate-stderr env COLUMNS=60 exec-inspect list refused -o run_id,outcome -w
	assert_line --regexp "^$L1  exited"
	# into a pipe, with no COLUMNS: whole (programs get every character)
	run --separate-stderr env -u COLUMNS exec-inspect list refused -o run_id,outcome
	assert_line --regexp "^$L1  exited"
	# a terminal's own width (TIOCGWINSZ) when COLUMNS is not set
	run env -u COLUMNS script -qec "stty cols 50; exec-inspect list refused -o run_id,outcome" /dev/null
	assert_success
	[[ "$output" != *"$L1"* ]] || fail "not cut to the tty's 50 columns: $output"
	[[ "$output" == *"exited"* ]]
	# short cells (times, outcomes, 20-character session ids) are never cut
	run --separate-stderr env COLUMNS=40 exec-inspect list refused -o session_id,chosen_at
	assert_line -n 1 --regexp '^ses-[0-9a-f]{16}  [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}$'
	# --ids and --json are for programs: never cut
	run --separate-stderr env COLUMNS=20 exec-inspect list refused --ids
	assert_line "$L1"
}

@test "--no-headings, --limit N, --reverse (newest first); an empty list prints its header" {
	start_dispatcher
	open_session
	local i
	for i in 1 2 3; do submit_and_accept "$(spec "o$i" /bin/true)"; exec-run start --wait >/dev/null; done
	run --separate-stderr exec-inspect list receipts -o run_id
	assert_output "$(printf 'RUN_ID\no1\no2\no3')"
	run --separate-stderr exec-inspect list receipts -o run_id --no-headings
	assert_output "$(printf 'o1\no2\no3')"
	run --separate-stderr exec-inspect list receipts -o run_id --reverse
	assert_output "$(printf 'RUN_ID\no3\no2\no1')"
	run --separate-stderr exec-inspect list receipts --reverse --limit 2 --ids
	assert_output "$(printf 'o3\no2')"
	run --separate-stderr exec-inspect list receipts --limit 1 --json
	[ "${#lines[@]}" = 1 ]
	assert_output --partial '"run_id":"o1"'
	# the limit counts the rows that pass the filters
	run --separate-stderr exec-inspect list receipts --limit 1 --ids --session nobody
	assert_output ''
	# empty: the header, so "none" reads apart from "no answer"
	run --separate-stderr exec-inspect list refused
	assert_success
	assert_output --regexp '^RUN_ID +INCARNATION +SESSION_ID +OUTCOME +EXIT_CODE +CHOSEN_AT +ATTEMPTS +REFUSED_CAUSE +LAST_DIAG$'
	run --separate-stderr exec-inspect list refused --no-headings
	assert_output ''
	# usage errors
	run --separate-stderr exec-inspect list receipts --limit 0
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect list receipts --json -w
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect list receipts --ids --no-headings
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect summary --reverse
	[ "$status" -eq "$EK_USAGE" ]
}

@test "exec-session show fits the terminal too: a long dispatcher URL is cut, whole with -w" {
	start_dispatcher
	local url
	url="http://localhost:${DISP_URL##*:}/$(printf 'p%.0s' {1..80})"
	open_session
	# a long URL, as a dispatcher behind a proxy's path would have
	sql_write "UPDATE sessions SET dispatcher = '$url'"
	run --separate-stderr env COLUMNS=100 LANG=C.UTF-8 exec-session show
	assert_success
	refute_output --partial "$url"
	assert_line -n 1 --regexp "  http://loc[a-z0-9:/]*…$"
	assert_line -n 1 --regexp "^ses-[0-9a-f]{16}  inc-[0-9a-f]{16}  current  "
	run --separate-stderr env COLUMNS=100 exec-session show -w
	assert_line -n 1 --partial "$url"
	run --separate-stderr exec-session show --json -w
	[ "$status" -eq "$EK_USAGE" ]
}

@test "list all: one row per accepted run whatever holds it now, with PROGRAM, ELAPSED and DURATION; --failed keeps the failed" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec ok1 /bin/true)" "$(spec f3 /bin/sh '["-c","exit 3"]')" \
		"$(spec to1 /bin/sleep '["5"]' '"timeout_ms":200')" "$(spec q1 /bin/true '[]' '"due_at":9999999999999')"
	spec ref1 /bin/echo | exec-accept >/dev/null      # unknown to the dispatcher: refused
	run exec-run start --wait
	[ "$status" -eq "$EK_PROTOCOL" ]
	submit_and_accept "$(spec slow /bin/sleep '["3600"]')"
	exec-run start >/dev/null
	wait_until '[ "$(exec-inspect list running --ids)" = slow ]'
	# ok1's receipt pruned: only its run record is left, and it is still listed
	sql_write "UPDATE receipts SET acked_at = acked_at - 2 * 86400000 WHERE run_id = 'ok1'"
	exec-reconcile --prune-receipts 1d >/dev/null
	run --separate-stderr exec-inspect list all
	assert_success
	assert_line --index 0 --regexp '^RUN_ID +STATE +PROGRAM +OUTCOME +EXIT_CODE +ACCEPTED_AT +STARTED_AT +ELAPSED +DURATION +SESSION_ID$'
	aligned || fail "not aligned: $output"
	run --separate-stderr exec-inspect list all -o run_id,state,program,outcome,exit_code --no-headings
	assert_output "$(printf '%s\n' \
		'ok1   finished      /bin/true   exited   0' \
		'f3    acknowledged  /bin/sh     exited   3' \
		'to1   acknowledged  /bin/sleep  timeout  124' \
		'q1    queued        /bin/true   -        -' \
		'ref1  refused       /bin/echo   exited   0' \
		'slow  running       /bin/sleep  -        -')"
	# a running run's ELAPSED is how long it has run; a finished one's DURATION
	run --separate-stderr exec-inspect list all --json
	assert_line --regexp '^\{"run_id":"slow","state":"running",.*"elapsed_ms":[0-9]+,"duration_ms":null,'
	assert_line --regexp '^\{"run_id":"to1",.*"elapsed_ms":null,"duration_ms":[0-9]+,'
	assert_line --regexp '^\{"run_id":"ok1","state":"finished","program":"/bin/true",.*"duration_ms":[0-9]+,'
	# -o takes the header's names, or those of the JSON record
	run --separate-stderr exec-inspect list all -o run_id,elapsed,duration
	assert_success
	assert_line --index 0 --regexp '^RUN_ID +ELAPSED +DURATION$'
	assert_line --regexp '^to1 +- +[0-9]+ms$'
	run --separate-stderr exec-inspect list all -o run_id,elapsed_ms,duration_ms
	assert_success
	assert_line --index 0 --regexp '^RUN_ID +ELAPSED +DURATION$'
	# --failed: a non-zero exit and a timeout; not exit 0, not a queued or running run
	run --separate-stderr exec-inspect list all --failed --ids
	assert_output "$(printf 'f3\nto1')"
	run --separate-stderr exec-inspect list receipts --failed --ids
	assert_output "$(printf 'f3\nto1')"
	run --separate-stderr exec-inspect list all --reverse --limit 2 --ids
	assert_output "$(printf 'slow\nref1')"
	run --separate-stderr exec-inspect list all --outcome timeout --ids
	assert_output to1
	run --separate-stderr exec-inspect list queued --failed
	[ "$status" -eq "$EK_USAGE" ]
	run --separate-stderr exec-inspect summary --failed
	[ "$status" -eq "$EK_USAGE" ]
}

@test "summary: the session, its dispatcher, the last heartbeat and its age, and whether a loop runs" {
	local loop
	start_dispatcher
	open_session
	exec-session heartbeat >/dev/null
	run --separate-stderr exec-inspect summary
	assert_success
	assert_line "session: $(current_session) (incarnation $(sql "SELECT incarnation FROM sessions WHERE status = 'current'"))"
	assert_line "dispatcher: $DISP_URL"
	assert_line --regexp '^last heartbeat: [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}, [0-9]+(ms|s) ago$'
	assert_line "loop: not running"
	run --separate-stderr exec-inspect summary --json
	assert_output --regexp "\"session\":\\{\"session_id\":\"$(current_session)\",\"incarnation\":\"inc-[0-9a-f]+\",\"dispatcher\":\"$DISP_URL\",\"last_beat_at\":[0-9]+,\"beat_age_ms\":[0-9]+\\},\"loop\":\\{\"alive\":false,\"pid\":null\\}"
	# a scratch directory left by a dead loop, or naming a live process that
	# is no loop (this test's shell), is no loop
	mkdir "$EXEC_STATE_DIR/loop.999999999.aaaaaa" "$EXEC_STATE_DIR/loop.$$.bbbbbb"
	run --separate-stderr exec-inspect summary --json
	assert_output --partial '"loop":{"alive":false,"pid":null}'
	# a loop on this state directory: alive while it runs (--state-dir on its
	# command line, so teardown finds it), not once it has stopped
	exec-loop --dispatcher "$DISP_URL" --state-dir "$EXEC_STATE_DIR" --tick 0.1 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	wait_until '[[ $(exec-inspect summary --json) == *"\"loop\":{\"alive\":true,\"pid\":$loop}"* ]]'
	run --separate-stderr exec-inspect summary
	assert_line "loop: running (exec-loop, pid $loop)"
	kill -TERM "$loop"
	wait "$loop"
	run --separate-stderr exec-inspect summary
	assert_line "loop: not running"
	# no current session
	run --separate-stderr exec-inspect summary --json
	assert_output --partial '"session":null'
	run --separate-stderr exec-inspect summary
	assert_line "session: none current (exec-session open)"
}

@test "counts in human output agree with their number: 1 byte, 1 file, never '1 bytes'" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec one1 /bin/sh '["-c","printf x"]')"
	exec-run start --wait >/dev/null 2>&1
	run --separate-stderr exec-inspect summary
	assert_success
	assert_line "output: 1 file, 1 byte"
	submit_and_accept "$(spec cut1 /bin/sh '["-c","head -c 1001 /dev/zero"]')"
	exec-run start --wait --max-output 1000 >/dev/null 2>&1 || true
	run --separate-stderr exec-inspect show cut1
	assert_success
	[ "$(story_value output)" = "TRUNCATED at --max-output: 1 byte of stdout and 0 of stderr dropped" ] ||
		fail "output: $(story_value output)"
	run --separate-stderr exec-inspect summary     # the files kept, and out/cut1.truncated
	assert_line --regexp '^output: 3 files, [0-9]+ bytes$'
}
