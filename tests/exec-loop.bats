#!/usr/bin/env bats
# exec-loop: the tools composed into an executor.

load helpers
leak_scan_off   # the tools' own tests scan for leaks (helpers.bash)

finished() { admin GET /admin/summary | grep -o '"finished":[0-9]*' | cut -d: -f2; }

# start_loop [OPTION...]: the loop, logging everything (--log-level debug)
# unless OPTIONS say otherwise, its log in loop.err.
# (HUP at its default: a suite started under nohup would hand the loop an
# ignored HUP, which bash can never trap, and the HUP tests would wait in vain)
start_loop() {
	env --default-signal=HUP "${LOOP_BIN:+$LOOP_BIN/}exec-loop" --dispatcher "$DISP_URL" --tick 0.1 --log-level debug "$@" \
		2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	LOOP_PID=$!
}

# loop_bin_but TOOL: the next start_loop runs the loop with the tools
# linked into $LOOP_BIN, all but TOOL, which the caller writes there.
loop_bin_but() {
	local t
	LOOP_BIN=$BATS_TEST_TMPDIR/bin
	mkdir -p "$LOOP_BIN"
	for t in exec-session exec-accept exec-run exec-report exec-reconcile exec-inspect exec-shares exec-loop; do
		[ "$t" = "$1" ] || ln -s "$(command -v "$t")" "$LOOP_BIN/$t"
	done
}

# note_drains: the next start_loop runs the loop beside an exec-reconcile
# that notes, in $BATS_TEST_TMPDIR/drains, the pid of the worker (its
# parent) for each drain it runs.  Which worker ran a drain then tells a
# worker going on from a new one a heartbeat started.
note_drains() {
	loop_bin_but exec-reconcile
	# shellcheck disable=SC2016 # the wrapper's own words, expanded when it runs
	printf '#!/bin/sh\ncase " $* " in *" --drain "*) echo "$PPID" >>"%s/drains" ;; esac\nexec "%s" "$@"\n' \
		"$BATS_TEST_TMPDIR" "$(command -v exec-reconcile)" >"$LOOP_BIN/exec-reconcile"
	chmod +x "$LOOP_BIN/exec-reconcile"
}

# stop_loop: TERM the loop and wait (bounded) until it is gone; its status.
stop_loop() {
	kill -TERM "$LOOP_PID"
	wait_until '! kill -0 "$LOOP_PID" 2>/dev/null' || return 1
	wait "$LOOP_PID"
}

# loop_readers: the loop's JSON field readers (jfield, jcount, jtext),
# taken from cmd/exec-loop as they are, into this shell.
loop_readers() {
	local f=$BATS_TEST_TMPDIR/readers.bash
	sed -n '/^jfield() {/,/^}/p; /^jcount() {/,/^}/p; /^jtext() {/,/^}/p' "$SRC/cmd/exec-loop" >"$f"
	[ "$(grep -c '^}' "$f")" = 3 ] || fail "cmd/exec-loop: jfield, jcount or jtext not found"
	# shellcheck disable=SC1090
	source "$f"
}

@test "the loop reads a record's fields by key, and a string's escapes: control characters become '?'" {
	loop_readers
	local v rec LC_ALL=C.UTF-8   # (in the C locale, é stays \u00E9: ASCII, safe too)
	rec=$(printf '%s' '{"event":"reconcile_result","run_id":"a1","status":"failed","attempts":12,' \
		'"detail":"a \"q\" \\n\u001B]0;x\u0007 \u009B\u202E ,\"attempts\":9, \u00E9\ud83d\ude00 end","n":null}')
	jfield v "$rec" detail
	assert_equal "$v" 'a "q" \n?]0;x? ?? ,"attempts":9, é😀 end'
	jfield v "$rec" attempts
	assert_equal "$v" 12
	jcount v "$rec" hold_ms
	assert_equal "$v" 0
	jfield v "$rec" n
	assert_equal "$v" null
	run ! jfield v "$rec" hold_ms
	# a key is a key only where one begins: not inside a string
	jcount v '{"detail":"x,\"hold_ms\":5","hold_ms":0}' hold_ms
	assert_equal "$v" 0
}

@test "work flows from the dispatcher through the loop and back; TERM stops it cleanly" {
	start_dispatcher
	body=$(for i in $(seq 1 12); do spec "w$i" /bin/sh "[\"-c\",\"exit $((i % 3))\"]"; done | paste -sd, -)
	admin POST /admin/runs "{\"runs\":[$body]}" >/dev/null
	start_loop --slots 3
	wait_until '[ "$(finished)" = 12 ]'
	kill -TERM "$LOOP_PID"
	status=0
	wait "$LOOP_PID" || status=$?
	[ "$status" -eq 0 ]
	[ "$(sql "SELECT status FROM sessions")" = closed ]
	admin GET /admin/sessions | grep -q '"status":"closed"'
	[ "$(sql "SELECT count(*) FROM receipts")" = 12 ]
	[ "$(sql "SELECT count(*) FROM runs") $(sql "SELECT count(*) FROM results")" = "0 0" ]
	[ "$(admin GET /admin/summary | grep -o '"ledger_total":[0-9]*')" = '"ledger_total":12' ]
}

@test "results whose cleanup delivery failed are delivered by a reconcile pass" {
	start_dispatcher
	admin POST /admin/runs "$(spec late)" >/dev/null
	fault 5xx 3
	start_loop
	wait_until '[ "$(finished)" = 1 ]'
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
	[ "$(disp_reports late)" = 4 ]
	[ "$(disp_charges late)" = 1 ]
}

# TS: how every activity-log line begins (the local time, with its offset).
TS='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{4}'

@test "the activity log: one timestamped line per accept, start, result, delivery and pass, on stderr" {
	start_dispatcher
	fault 5xx 3   # late's own three attempts fail; a reconcile pass delivers it
	admin POST /admin/runs "$(spec late)" >/dev/null
	start_loop --slots 1
	wait_until 'grep -q "exec-loop: reconcile: " "$BATS_TEST_TMPDIR/loop.err"'
	# two at once for one slot: the loop starts one, and either it or the
	# first one's supervisor (chained) the other
	admin POST /admin/runs "{\"runs\":[$(spec ok1),$(spec ok2)]}" >/dev/null
	wait_until '[ "$(sql "SELECT count(*) FROM receipts")" = 3 ]'
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
	run cat "$BATS_TEST_TMPDIR/loop.err"
	local r
	for r in late ok1 ok2; do
		assert_line --regexp "^$TS exec-loop: accepted $r "
		assert_line --regexp "^$TS (exec-loop: )?started $r( \\(chained\\))?\$"
	done
	assert_line --regexp "^$TS late exited 0: delivery failed \\(3 attempts\\): transient: HTTP 503"
	assert_line --regexp "^$TS exec-loop: delivered late \\(1 attempt\\): "
	assert_line --regexp "^$TS exec-loop: reconcile: 1 delivered, 0 refused, 0 waiting in 1 pass\$"
	assert_line --regexp "^$TS ok1 exited 0: delivered \\(1 attempt\\): "
	assert_line --regexp "^$TS ok2 exited 0: delivered \\(1 attempt\\): "
	# every line of the log is stamped
	run grep -Ev "^$TS " "$BATS_TEST_TMPDIR/loop.err"
	assert_output ""
}

@test "without --prefetch the queue doubles, up to 8 x --slots, when it ran dry; an idle round brings it back; a --prefetch given stays" {
	start_dispatcher
	body=$(for i in $(seq 1 30); do spec "p$i"; done | paste -sd, -)
	admin POST /admin/runs "{\"runs\":[$body]}" >/dev/null
	# every feed request waits (bounded) for the queue here to run dry, so
	# each takes all the room it has: 4 for one slot, then 8, and 8 again
	loop_bin_but exec-accept
	printf '#!/bin/sh\necho "$*" >>"%s/accepts"\ni=0\nwhile [ $i -lt 400 ] && [ "$(sqlite3 -readonly "%s" "SELECT count(*) FROM runs WHERE state = '"'queued'"'")" != 0 ]; do\n\tsleep 0.05; i=$((i + 1))\ndone\nexec "%s" "$@"\n' \
		"$BATS_TEST_TMPDIR" "$EXEC_STATE_DIR/state.db" "$(command -v exec-accept)" >"$LOOP_BIN/exec-accept"
	chmod +x "$LOOP_BIN/exec-accept"
	start_loop --slots 1
	wait_until '[ "$(finished)" = 30 ]'
	wait_until 'grep -q "exec-loop: prefetch: 4 (idle)\$" "$BATS_TEST_TMPDIR/loop.err"'
	stop_loop
	run cat "$BATS_TEST_TMPDIR/loop.err"
	assert_line --regexp "^$TS exec-loop: prefetch: 8 \(the queue ran dry\)\$"
	run grep -E "exec-loop: prefetch: " "$BATS_TEST_TMPDIR/loop.err"
	refute_output --regexp "prefetch: ([0-35-79]|[1-9][0-9]+) "   # 4 and 8 only
	run grep -c -- "--prefetch 8 " "$BATS_TEST_TMPDIR/accepts"
	(( output >= 2 ))   # and the queue ran dry at 8 too: kept at 8
	LOOP_BIN=
	# given, it is kept: the same backlog, no change said
	body=$(for i in $(seq 1 30); do spec "q$i"; done | paste -sd, -)
	admin POST /admin/runs "{\"runs\":[$body]}" >/dev/null
	start_loop --slots 1 --prefetch 4
	wait_until '[ "$(finished)" = 60 ]'
	stop_loop
	run grep -c "prefetch: " "$BATS_TEST_TMPDIR/loop.err"
	assert_output 0
}

# summary_count STATE: how many runs the dispatcher holds in STATE.
summary_count() { admin GET /admin/summary | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }

# submit_runs PREFIX N [EXTRA-JSON]: runs PREFIX1..PREFIXN at the dispatcher.
submit_runs() {
	local i
	admin POST /admin/runs "{\"runs\":[$(for ((i = 1; i <= $2; i++)); do spec "$1$i" /bin/true '[]' "${3:-}"; done |
		paste -sd, -)]}" >/dev/null
}

@test "runs due in the year 3000 take no room in the queue: due work runs, before and after they are handed back" {
	start_dispatcher
	submit_runs f 32 '"due_at":32503680000000'
	submit_runs o 20
	start_loop --slots 4 --prefetch 32
	wait_until '[ "$(finished)" = 20 ]' || fail "$(admin GET /admin/summary)"
	[ "$(sql "SELECT count(*) FROM runs WHERE state = 'queued' AND run_id LIKE 'f%'")" = 32 ]
	stop_loop
	# the close hands the 32 back, acknowledged: the dispatcher queues them again
	[ "$(sql "SELECT count(*) FROM handbacks WHERE acked_at IS NOT NULL AND run_id LIKE 'f%'")" = 32 ]
	[ "$(summary_count queued)" = 32 ]
	# a new loop pulls them first, and the next due work runs all the same
	submit_runs p 20
	start_loop --slots 4 --prefetch 32
	wait_until '[ "$(finished)" = 40 ]' || fail "$(admin GET /admin/summary)"
	stop_loop
	[ "$(sql "SELECT count(*) FROM handbacks WHERE acked_at IS NOT NULL")" = 64 ]   # pulled and handed back again
	[ "$(summary_count queued)" = 32 ]
	[ "$(summary_count finished)" = 40 ]
}

@test "idle, the loop waits on the work feed: a run submitted then starts at once, not at the next tick" {
	start_dispatcher
	start_loop --tick 30
	wait_until 'admin GET /admin/stats | grep -q "\"waiting\":1"'   # idle, its feed request waiting
	local t0=$SECONDS
	admin POST /admin/runs "$(spec now1)" >/dev/null
	wait_until '[ "$(finished)" = 1 ]'
	(( SECONDS - t0 < 30 ))                         # well before the tick
	# idle again: a TERM ends the waiting feed request at once, not at its end
	wait_until 'admin GET /admin/stats | grep -q "\"waiting\":1"'
	t0=$SECONDS
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
	(( SECONDS - t0 < 30 ))
	[ "$(disp_charges now1)" = 1 ]
	[ "$(sql "SELECT status FROM sessions")" = closed ]
}

@test "with the dispatcher down, a TERM ends the pause between tries at once, not at the next tick" {
	start_dispatcher
	start_loop --tick 30
	wait_until 'admin GET /admin/stats | grep -q "\"waiting\":1"'
	stop_dispatcher                                  # the waiting request fails; the loop pauses
	wait_until 'grep -q "dispatcher unavailable" "$BATS_TEST_TMPDIR/loop.err"'
	local t0=$SECONDS
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID" || true                         # the close cannot reach the dispatcher
	(( SECONDS - t0 < 30 ))
	grep -q "exec-loop: stopping: " "$BATS_TEST_TMPDIR/loop.err"
}

@test "a TERM that comes as the pause begins (between the look at the stop and the wait) ends it at once too" {
	command -v strace >/dev/null || skip "no strace"
	start_dispatcher
	# Every fork of the loop returns to it 0.5 s late (strace; its guests
	# and tools are not traced), so the TERM sent when the loop says "next
	# try in" comes while it forks the pause: after its last look at the
	# stop, before its wait.  Waited on, that pause would last its tick.
	strace -o /dev/null -e trace=clone,clone3 -e inject=clone,clone3:delay_exit=500000 \
		exec-loop --dispatcher "$DISP_URL" --tick 30 -v 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	local tracer=$! loop t0
	wait_until 'admin GET /admin/stats | grep -q "\"waiting\":1"'
	loop=$(pgrep -P "$tracer") || fail "no loop under strace"
	stop_dispatcher
	wait_until 'grep -q "next try in" "$BATS_TEST_TMPDIR/loop.err"'
	t0=$SECONDS
	kill -TERM "$loop"
	wait "$tracer" || true
	(( SECONDS - t0 < 25 )) || fail "the stop waited for the pause: $((SECONDS - t0)) s"
	grep -q "exec-loop: stopping: " "$BATS_TEST_TMPDIR/loop.err"
}

# pauses_while_down OPTION...: a loop with OPTIONS whose dispatcher goes
# away; the pauses (ms) of its first six tries after that, one a line.
pauses_while_down() {
	start_dispatcher
	start_loop "$@"
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	stop_dispatcher
	wait_until '[ "$(grep -c "next try in" "$BATS_TEST_TMPDIR/loop.err")" -ge 6 ]'
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID" || true
	sed -n 's/.*exec-loop: next try in \([0-9]*\) ms$/\1/p' "$BATS_TEST_TMPDIR/loop.err" | head -n 6
}

@test "with the dispatcher down, the tries come a tick plus a random 0..--jitter-ms apart, spread" {
	local pauses p
	pauses=$(pauses_while_down --tick 0.4 --jitter-ms 150)
	[ "$(wc -l <<<"$pauses")" = 6 ] || fail "$pauses"
	for p in $pauses; do
		[ "$p" -ge 400 ] && [ "$p" -le 550 ] || fail "a pause of $p ms, not 400..550: $pauses"
	done
	# six draws from 400..550 that are all the same: a chance of 151^-5
	[ "$(sort -u <<<"$pauses" | wc -l)" -ge 2 ] || fail "never spread: $pauses"
}

@test "with --jitter-ms 0 the tries while the dispatcher is down come a tick apart" {
	local pauses
	pauses=$(pauses_while_down --tick 0.4 --jitter-ms 0)
	[ "$(sort -u <<<"$pauses")" = 400 ] || fail "$pauses"
}

@test "a loop killed with -9 leaves its scratch directory; the next loop removes it, and nothing else" {
	start_dispatcher
	mkdir -m 700 "$EXEC_STATE_DIR"
	mkdir "$EXEC_STATE_DIR/loop.1.keep"      # pid 1 lives: kept
	ln -s "$BATS_TEST_TMPDIR" "$EXEC_STATE_DIR/loop.999999999.link"   # a link: never followed
	start_loop
	wait_until 'compgen -G "$EXEC_STATE_DIR/loop.$LOOP_PID.*" >/dev/null'
	local dead=$LOOP_PID
	kill -KILL "$dead"
	wait "$dead" || true
	compgen -G "$EXEC_STATE_DIR/loop.$dead.*" >/dev/null || fail "no scratch directory left to sweep"
	start_loop
	wait_until 'compgen -G "$EXEC_STATE_DIR/loop.$LOOP_PID.*" >/dev/null'
	run ! compgen -G "$EXEC_STATE_DIR/loop.$dead.*"
	[ -d "$EXEC_STATE_DIR/loop.1.keep" ]
	[ -L "$EXEC_STATE_DIR/loop.999999999.link" ]
	[ -d "$BATS_TEST_TMPDIR" ]
	kill -TERM "$LOOP_PID" || fail "the second loop ended: $(cat "$BATS_TEST_TMPDIR/loop.err")"
	wait "$LOOP_PID" || true
	run ! compgen -G "$EXEC_STATE_DIR/loop.$LOOP_PID.*"   # a loop that stops removes its own
}

# heartbeats: how many heartbeats the dispatcher has received.
heartbeats() { admin GET /admin/stats | sed -n 's/.*"heartbeat":\([0-9]*\).*/\1/p'; }

@test "the loop writes nothing where a guest can: a guest's links in the shared temporary directory reach no state file" {
	start_dispatcher
	export TMPDIR=$BATS_TEST_TMPDIR/tmp
	mkdir "$TMPDIR"
	# The guest plants, in every directory of TMPDIR it can find (where the
	# loop once kept its answers), a link by each name the loop writes,
	# each to state.db; then notes what it planted.
	cat >"$BATS_TEST_TMPDIR/planter.sh" <<-EOF
		n=0
		for d in "$TMPDIR" "$TMPDIR"/*/; do
			for f in beat busy started pass open isolation relayed err.\$PPID; do
				ln -sf "$EXEC_STATE_DIR/state.db" "\$d/\$f" 2>/dev/null && n=\$((n + 1))
			done
		done
		echo "\$n" >"$BATS_TEST_TMPDIR/planted"
	EOF
	start_loop
	wait_until '[ -e "$EXEC_STATE_DIR/state.db" ]'
	admin POST /admin/runs "{\"runs\":[$(spec p1 /bin/sh "[\"$BATS_TEST_TMPDIR/planter.sh\"]")]}" >/dev/null
	wait_until '[ -s "$BATS_TEST_TMPDIR/planted" ]'
	# the loop goes on for two heartbeats and a run after the links are planted
	local beats
	# shellcheck disable=SC2034 # read by wait_until's condition
	beats=$(heartbeats)
	wait_until '[ "$(heartbeats)" -ge $((beats + 2)) ] || grep -q "heartbeat failed" "$BATS_TEST_TMPDIR/loop.err"'
	admin POST /admin/runs "{\"runs\":[$(spec p2)]}" >/dev/null
	wait_until '[ "$(finished)" = 2 ]'
	[ "$(sql "PRAGMA integrity_check")" = ok ]
	[ "$(sql "SELECT count(*) FROM sessions WHERE status = 'current'")" = 1 ]
	run ! compgen -G "$TMPDIR/exec-loop.*"    # nothing of the loop's is there at all
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
}

@test "the loop refuses a state directory that is a link, or that others can enter, before it writes anything" {
	start_dispatcher
	mkdir -m 700 "$BATS_TEST_TMPDIR/real"
	ln -s "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/link"
	run -"$EK_UNSAFE" exec-loop --dispatcher "$DISP_URL" --state-dir "$BATS_TEST_TMPDIR/link"
	assert_output --partial "a link, not a directory, or not ours"
	run ! compgen -G "$BATS_TEST_TMPDIR/real/*"
	mkdir -m 755 "$BATS_TEST_TMPDIR/open"
	run -"$EK_UNSAFE" exec-loop --dispatcher "$DISP_URL" --state-dir "$BATS_TEST_TMPDIR/open"
	assert_output --partial "mode 755 lets others in"
	run ! compgen -G "$BATS_TEST_TMPDIR/open/*"
}

@test "a loop refused before its session leaves no state directory of its making behind" {
	run -"$EK_UNSAFE" exec-loop --dispatcher "http://127.0.0.1:1" --guest-user no-such-user-here \
		--state-dir "$BATS_TEST_TMPDIR/fresh/state"
	assert_output --partial "no user 'no-such-user-here'"
	[ ! -e "$BATS_TEST_TMPDIR/fresh/state" ]
}

@test "a revoked session stops the loop with exit 77" {
	start_dispatcher
	start_loop
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	admin POST "/admin/sessions/$(current_session)/revoke" >/dev/null
	status=0
	wait "$LOOP_PID" || status=$?
	[ "$status" -eq "$EK_NOSESSION" ]
	[ "$(sql "SELECT status FROM sessions")" = revoked ]
	grep -q "exec-loop: session is over (revoked); stopping" "$BATS_TEST_TMPDIR/loop.err"
	run grep -c "opening a new one" "$BATS_TEST_TMPDIR/loop.err"
	assert_output 0                                  # revoked: no new session
}

@test "on TERM a running guest finishes and its result is reported before the session closes" {
	start_dispatcher
	admin POST /admin/runs "$(spec slow /bin/sleep '["1"]')" >/dev/null
	start_loop
	wait_until '[ "$(sql "SELECT count(*) FROM runs WHERE state='"'started'"'" 2>/dev/null)" = 1 ]'
	kill -TERM "$LOOP_PID"
	status=0
	wait "$LOOP_PID" || status=$?
	[ "$status" -eq 0 ]
	[ "$(finished)" = 1 ]
	[ "$(sql "SELECT outcome FROM receipts")" = exited ]
}

@test "a dispatcher that is down at start: exit 69" {
	run exec-loop --dispatcher http://127.0.0.1:9 --tick 0.1
	[ "$status" -eq "$EK_UNAVAILABLE" ]
}

@test "--output-quota reaches the supervisors: a guest's output past it is truncated and flagged" {
	start_dispatcher
	admin POST /admin/runs "{\"runs\":[$(spec big /bin/sh '["-c","head -c 5000 /dev/zero"]')]}" >/dev/null
	start_loop --output-quota 1000
	wait_until '[ "$(finished)" = 1 ]'
	stop_loop
	[ "$(stat -c %s "$EXEC_STATE_DIR/out/big.stdout")" = 1000 ]
	grep -q "past the executor's output quota (1000 bytes)" "$EXEC_STATE_DIR/out/big.truncated"
	grep -q "exec-run: run 'big': output truncated: stdout: 1000 bytes kept, 4000 dropped" "$BATS_TEST_TMPDIR/loop.err"
}

@test "usage errors exit 64" {
	run exec-loop
	[ "$status" -eq "$EK_USAGE" ]
	run exec-loop --dispatcher http://x --slots many
	[ "$status" -eq "$EK_USAGE" ]
	# each number option's bounds are those of the tool it goes to, said
	# in the words every C tool uses (opts.c); the default --prefetch
	# follows --slots, and is not the one at fault
	local opt min max word v
	while read -r opt min max word; do
		for v in lots -1 "$((min - 1))" "${max}0"; do
			[ "$v" != -1 ] || [ "$min" -gt 0 ] || continue
			run --separate-stderr exec-loop --dispatcher http://x "--$opt" "$v"
			[ "$status" -eq "$EK_USAGE" ] || fail "--$opt $v: exit $status"
			[[ $stderr == "exec-loop: --$opt: '$v' is not a number from $min to $max${word:+, or $word}"* ]] ||
				fail "--$opt $v: $stderr"
		done
	done <<'BOUNDS'
slots 1 256
drain-ms 0 86400000
reconcile-ms 1 86400000
prefetch 1 1000
jitter-ms 0 3600000
output-cap 0 9223372036854775807 auto
output-quota 0 4611686018427387903 auto
BOUNDS
	run --separate-stderr exec-loop --dispatcher http://x --slots 257
	[[ $stderr == "exec-loop: --slots: '257' is not a number from 1 to 256"* ]] || fail "$stderr"
}

@test "--slots 256: the queue it asks for stays within exec-accept's --prefetch (1000), and work runs" {
	start_dispatcher
	start_loop --slots 256
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	admin POST /admin/runs "$(spec many)" >/dev/null
	wait_until '[ "$(finished)" = 1 ]'
	stop_loop
	run ! grep -q "accept failed\|is not a number from" "$BATS_TEST_TMPDIR/loop.err"
}

# catches_stops PID: PID is the loop's shell (its script named in its
# command line) and has its handlers for HUP and TERM installed (SigCgt
# bits 0 and 14; INT stays ignored in a background job).  Both: bash's
# trap installs them one at a time, TERM first, so a HUP sent once TERM's
# was seen could still meet the default action.  And the loop's own: a
# forked job is a copy of bats' shell until it execs, and that copy
# catches both too (bats has an EXIT trap, for which bash catches every
# terminating signal), so a stop sent then met a shell about to become
# `env`, and it exited 143 or 129 with nothing logged.
catches_stops() {
	local mask='' want=$(((1 << 0) | (1 << 14))) argv key value
	mapfile -d "" -t argv 2>/dev/null <"/proc/$1/cmdline" || return 1
	[[ ${argv[1]-} == */exec-loop ]] || return 1
	while read -r key value; do
		[ "$key" = SigCgt: ] && mask=$value
	done 2>/dev/null <"/proc/$1/status"
	[ -n "$mask" ] && (((16#$mask & want) == want))
}

# exited PID: PID has ended (a zombie waiting for us counts).
exited() {
	local st
	st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 0
	[ -z "$st" ] || [ "$st" = Z ]
}

@test "TERM at any moment stops the loop cleanly, every time, a HUP at any moment before it or not (${LOOP_STOPS:-100} stops)" {
	start_dispatcher
	admin POST /admin/runs "$(for i in $(seq 1 20); do spec "t$i"; done | paste -sd, - | sed 's/^/{"runs":[/; s/$/]}/')" >/dev/null
	local i n=${LOOP_STOPS:-100} pid rc sig err=$BATS_TEST_TMPDIR/stop.err
	for ((i = 1; i <= n; i++)); do
		sig=TERM
		((i % 2)) || sig="HUP then TERM"
		# (HUP at its default: a shell cannot trap what it was started
		# ignoring, as under a suite run with nohup)
		env --default-signal=HUP exec-loop --dispatcher "$DISP_URL" --tick 0.01 --slots 2 2>"$err" 3>&- &
		pid=$!
		wait_until "catches_stops $pid || exited $pid"
		sleep "$(printf '0.%03d' $((RANDOM % 200)))"   # a random moment of its life
		if [ "$sig" != TERM ]; then
			kill -s HUP "$pid"
			sleep "$(printf '0.%03d' $((RANDOM % 100)))"
			if exited "$pid"; then fail "stop $i: HUP ended the loop: $(cat "$err")"; fi
		fi
		kill -s TERM "$pid"
		wait_until "exited $pid" || { kill -KILL "$pid"; fail "stop $i ($sig) was lost: $(cat "$err")"; }
		rc=0
		wait "$pid" || rc=$?
		[ "$rc" -eq 0 ] || fail "stop $i ($sig): exit $rc: $(cat "$err")"
		run grep -E "unexpected EOF|trap:" "$err"
		[ "$status" -ne 0 ] || fail "stop $i ($sig): $output"
	done
	# every stop closed its session (with work flowing while it stopped)
	[ "$(sql "SELECT count(*) FROM sessions WHERE status = 'current'")" = 0 ]
	[ "$(sql "SELECT count(*) FROM sessions WHERE status = 'closed'")" = "$n" ]
}

# retained N: j1..jN ran, their results retained (a pass is due), and the
# session closed, so that a loop starts with a first pass to make.
retained() {
	local i specs=()
	start_dispatcher
	open_session
	for ((i = 1; i <= $1; i++)); do specs+=("$(spec "j$i")"); done
	submit_and_accept "${specs[@]}"
	fault 5xx 1000
	exec-run start --wait --slots "$1" --budget-ms 100 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	[ "$(sql "SELECT count(*) FROM results")" = "$1" ] || fail "not retained"
	exec-session close >/dev/null
}

two_retained() { retained 2; }   # j1 and j2

@test "the first reconcile pass after a start goes when its jitter ends, not at the next tick" {
	two_retained
	# a tick of an hour: only the wake at the jitter's end can start the pass
	start_loop --tick 3600 --jitter-ms 300
	wait_until '[ "$(sql "SELECT count(*) FROM receipts")" = 2 ]'
	kill -TERM "$LOOP_PID"   # it ends the idle feed request at once
	wait "$LOOP_PID"
	[ "$(disp_charges j1) $(disp_charges j2)" = "1 1" ]
}

# note_nices: the next start_loop runs the loop beside an exec-reconcile
# that notes its niceness (nice(1) with no operand prints it) in
# $BATS_TEST_TMPDIR/nices, a line for each drain it runs.
note_nices() {
	loop_bin_but exec-reconcile
	# shellcheck disable=SC2016 # the wrapper's own words, expanded when it runs
	printf '#!/bin/sh\ncase " $* " in *" --drain "*) nice >>"%s/nices" ;; esac\nexec "%s" "$@"\n' \
		"$BATS_TEST_TMPDIR" "$(command -v exec-reconcile)" >"$LOOP_BIN/exec-reconcile"
	chmod +x "$LOOP_BIN/exec-reconcile"
}

@test "the reconcile worker delivers 10 steps of nice below the loop; --reconcile-nice 0 at its own" {
	local base
	base=$(nice)   # the loop's, which it inherits from here
	two_retained
	note_nices
	start_loop --jitter-ms 0
	wait_until '[ "$(sql "SELECT count(*) FROM receipts")" = 2 ]'
	stop_loop
	run sort -u "$BATS_TEST_TMPDIR/nices"
	assert_output "$((base + 10 > 19 ? 19 : base + 10))"
	# at the loop's own priority when told so (and the bound is nice's)
	open_session                     # k1 retained, as two_retained left j1 and j2
	submit_and_accept "$(spec k1)"
	fault 5xx 1000
	exec-run start --wait --budget-ms 100 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	exec-session close >/dev/null
	rm -f "$BATS_TEST_TMPDIR/nices"
	start_loop --jitter-ms 0 --reconcile-nice 0
	wait_until '[ "$(sql "SELECT count(*) FROM receipts")" = 3 ]'
	stop_loop
	run sort -u "$BATS_TEST_TMPDIR/nices"
	assert_output "$base"
	run exec-loop --dispatcher "$DISP_URL" --reconcile-nice 20
	[ "$status" -eq "$EK_USAGE" ]
	assert_output --partial "--reconcile-nice: '20' is not a number from 0 to 19"
}

# beats N: wait until the current session has beaten N more times.
beats() {
	local i beat
	for ((i = 0; i < $1; i++)); do
		beat=$(sql "SELECT IFNULL(last_beat_at, 0) FROM sessions WHERE status = 'current'")
		wait_until '[ "$(sql "SELECT IFNULL(last_beat_at, 0) FROM sessions WHERE status = '"'current'"'")" -gt "$beat" ]'
	done
}

@test "a Retry-After past the worker's budget: the heartbeat tells the hold, and no pass starts before it ends" {
	two_retained
	local attempts passes
	attempts=$(sql "SELECT sum(attempts) FROM results")
	fault 429 1 3600000                              # the first report: 429, Retry-After an hour
	start_loop --jitter-ms 0 --reconcile-ms 1000
	# the 429 is in (a slow machine may spend a first pass's budget before
	# it sends anything: that pass is not the one under test)
	wait_until 'awk "/Retry-After/ { r = 1 } r && /exec-loop: reconcile: / { n++ } END { exit !n }" "$BATS_TEST_TMPDIR/loop.err"'
	passes=$(grep -c "exec-loop: reconcile: " "$BATS_TEST_TMPDIR/loop.err")
	beats 3                                          # three heartbeats, each saying hold-ms=...
	run exec-session heartbeat
	assert_output --regexp '^reconcile-due hold-ms=[0-9]+$'
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
	run grep -c "exec-loop: reconcile: " "$BATS_TEST_TMPDIR/loop.err"
	assert_output "$passes"                          # no pass since the hold began
	[ "$(sql "SELECT sum(attempts) FROM results")" = $((attempts + 1)) ]   # one report, the 429
}

@test "after a start (or an outage) the first reconcile pass waits within --jitter-ms; with 0 it goes at once" {
	two_retained
	local reports beat
	reports=$(admin GET /admin/summary | grep -o '"reports":[0-9]*')
	# a jitter window of an hour: the loop heartbeats on, but no pass starts
	# (and the stop below ends the worker's wait at once)
	start_loop --jitter-ms 3600000
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	beat=$(sql "SELECT IFNULL(last_beat_at, 0) FROM sessions WHERE status = 'current'")
	wait_until '[ "$(sql "SELECT IFNULL(last_beat_at, 0) FROM sessions WHERE status = '"'current'"'")" -gt "$beat" ]'
	# shellcheck disable=SC2034 # read by the wait_until condition below
	beat=$(sql "SELECT last_beat_at FROM sessions WHERE status = 'current'")
	wait_until '[ "$(sql "SELECT IFNULL(last_beat_at, 0) FROM sessions WHERE status = '"'current'"'")" -gt "$beat" ]'
	[ "$(admin GET /admin/summary | grep -o '"reports":[0-9]*')" = "$reports" ]   # nothing sent yet
	[ "$(sql "SELECT count(*) FROM results")" = 2 ]
	stop_loop
	# no jitter: the first heartbeat's pass delivers them (adopted at open)
	start_loop --jitter-ms 0
	wait_until '[ "$(sql "SELECT count(*) FROM receipts")" = 2 ]'
	kill -TERM "$LOOP_PID"
	wait "$LOOP_PID"
	[ "$(disp_charges j1) $(disp_charges j2)" = "1 1" ]
}

@test "a drain that settled results and left some waiting is followed by the next at once, not at the next heartbeat" {
	retained 8
	fault delay 100 300                              # each report takes 300 ms: a drain of 1 s delivers a few
	# a tick of an hour: few heartbeats; which worker ran each drain is noted
	note_drains
	start_loop --tick 3600 --jitter-ms 0 --reconcile-ms 1000
	wait_until '[ "$(sql "SELECT count(*) FROM receipts")" = 8 ]'
	stop_loop
	# one worker ran drains one after another
	[ "$(sort "$BATS_TEST_TMPDIR/drains" | uniq -c | sort -rn | awk 'NR == 1 { print $1 }')" -ge 2 ] ||
		fail "no worker ran a second drain: $(cat "$BATS_TEST_TMPDIR/loop.err")"
	# what a drain left unsent is in its totals, not a line each
	run grep -E "exec-loop: failed j[0-9]+ \(0 attempts\)" "$BATS_TEST_TMPDIR/loop.err"
	assert_failure
	grep -q "exec-loop: delivered j1 " "$BATS_TEST_TMPDIR/loop.err"
	local j
	for j in 1 2 3 4 5 6 7 8; do
		[ "$(disp_charges "j$j")" = 1 ] || fail "j$j charged $(disp_charges "j$j") times"
	done
}

@test "the worker does not go on after a drain that settled nothing" {
	retained 2
	fault 5xx 1000                                   # every report fails: nothing settles
	note_drains
	start_loop --tick 3600 --jitter-ms 0 --reconcile-ms 300
	wait_until '[ -s "$BATS_TEST_TMPDIR/drains" ]'
	local worker
	worker=$(head -n 1 "$BATS_TEST_TMPDIR/drains")
	# its drain settled nothing, so it ends; going on, it would drain again
	# and again while the faults last (a heartbeat may start another worker:
	# that one is another process)
	wait_until '! kill -0 "$worker" 2>/dev/null' || fail "the worker $worker is still draining"
	[ "$(grep -cx "$worker" "$BATS_TEST_TMPDIR/drains")" = 1 ] ||
		fail "the worker $worker ran $(grep -cx "$worker" "$BATS_TEST_TMPDIR/drains") drains"
	grep -q "exec-loop: reconcile: 0 delivered, 0 refused, 2 waiting" "$BATS_TEST_TMPDIR/loop.err" ||
		fail "$(cat "$BATS_TEST_TMPDIR/loop.err")"
	stop_loop
	[ "$(sql "SELECT count(*) FROM receipts")" = 0 ]
}

@test "a loop killed with -9 leaves no reconcile worker draining on: it ends after its drain" {
	retained 20
	fault delay 100 300                              # each report takes 300 ms: a drain of 1 s delivers 3 at most
	start_loop --tick 3600 --jitter-ms 0 --reconcile-ms 1000
	wait_until 'grep -q "exec-loop: reconcile: " "$BATS_TEST_TMPDIR/loop.err"'   # the second drain is on
	kill -KILL "$LOOP_PID"
	wait "$LOOP_PID" || true
	# the worker (a subshell of the loop, same command line) finishes its
	# drain and stops; going on, it would deliver all 20 in 7 drains or more
	wait_until '! pgrep -f "exec-loop --dispatcher $DISP_URL" >/dev/null'
	local n
	n=$(sql "SELECT count(*) FROM receipts")
	[ "$n" -lt 20 ] || fail "$n delivered: the worker went on after its loop was killed"
	[ "$(sql "SELECT count(*) FROM results")" = $((20 - n)) ]
}

# --- the log (exec-loop(1), LOG) ------------------------------------------------

# runs_of N PREFIX CODE: N specs PREFIX1..PREFIXN of /bin/sh exiting CODE, comma-joined.
runs_of() {
	local i
	for ((i = 1; i <= $1; i++)); do spec "$2$i" /bin/sh "[\"-c\",\"exit $3\"]"; done | paste -sd, -
}

@test "the default log level writes at most a line per run: each failure, a summary of the rest, a last line" {
	start_dispatcher
	admin POST /admin/runs "{\"runs\":[$(runs_of 38 ok 0),$(runs_of 2 bad 3)]}" >/dev/null
	start_loop --slots 4 --log-level notice
	wait_until '[ "$(finished)" = 40 ]'
	stop_loop
	local log=$BATS_TEST_TMPDIR/loop.err n
	n=$(wc -l <"$log")
	[ "$n" -le 40 ] || fail "$n lines for 40 runs: $(cat "$log")"
	run cat "$log"
	assert_line --regexp "^$TS bad1 exited 3: delivered \\(1 attempt\\): "
	assert_line --regexp "^$TS bad2 exited 3: delivered \\(1 attempt\\): "
	refute_output --partial " exited 0: "
	refute_output --partial "accepted "
	refute_output --partial "started "
	assert_line --regexp "^$TS exec-loop: stopped: 40 runs ran, 0 handed back, 0 results retained for delivery\$"
	assert_line -n $((${#lines[@]} - 1)) --regexp "exec-loop: stopped: "
	# the summaries count every run, once
	local sum=0 failed=0 k
	while read -r k; do sum=$((sum + ${k%% *})); failed=$((failed + ${k##* })); done < <(
		sed -n 's/.*exec-loop: ran \([0-9]*\) runs\? in the last [0-9]* s: [0-9]* exited 0, \([0-9]*\) failed$/\1 \2/p' "$log")
	[ "$sum" = 40 ] || fail "the summaries count $sum runs: $(cat "$log")"
	[ "$failed" = 2 ]
	run exec-loop --dispatcher http://127.0.0.1:1 --log-level bogus
	[ "$status" -eq "$EK_USAGE" ]
	run exec-loop --dispatcher http://127.0.0.1:1 -vq
	[ "$status" -eq "$EK_USAGE" ]
}

@test "-vv from warning writes every run's line; -q (from \$EXEC_LOG_LEVEL) keeps failures and drops the summary" {
	start_dispatcher
	admin POST /admin/runs "{\"runs\":[$(runs_of 3 ok 0),$(runs_of 1 bad 3)]}" >/dev/null
	start_loop --log-level warning -vv   # info
	wait_until '[ "$(finished)" = 4 ]'
	stop_loop
	run cat "$BATS_TEST_TMPDIR/loop.err"
	assert_line --regexp "^$TS ok3 exited 0: delivered"
	refute_output --partial "accepted "
	admin POST /admin/runs "{\"runs\":[$(runs_of 3 ok2x 0),$(runs_of 1 bad2x 3)]}" >/dev/null
	EXEC_LOG_LEVEL=notice exec-loop --dispatcher "$DISP_URL" --tick 0.1 -q 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	LOOP_PID=$!
	wait_until '[ "$(finished)" = 8 ]'
	stop_loop
	run cat "$BATS_TEST_TMPDIR/loop.err"
	assert_line --regexp "^$TS bad2x1 exited 3: "
	refute_output --partial " exited 0: "
	refute_output --partial "exec-loop: ran "
	refute_output --partial "isolation: "
}

# journal_loop JOURNAL_STREAM: a loop at -v whose stderr is loop.err, with
# JOURNAL_STREAM set as given ("" for that file's own DEV:INO); ok1 and
# bad1 (exit 3) run, then it is stopped.
journal_loop() {
	local f=$BATS_TEST_TMPDIR/loop.err js=$1
	: >"$f"
	[ -n "$js" ] || js=$(stat -c '%d:%i' "$f")
	start_dispatcher
	admin POST /admin/runs "{\"runs\":[$(runs_of 1 ok 0),$(runs_of 1 bad 3)]}" >/dev/null
	JOURNAL_STREAM=$js exec-loop --dispatcher "$DISP_URL" --tick 0.1 -v 2>>"$f" 3>&- &
	LOOP_PID=$!
	wait_until '[ "$(finished)" = 2 ]'
	stop_loop
}

@test "under journald (JOURNAL_STREAM names stderr's device and inode) no line carries a time, each a <N> priority" {
	journal_loop ""
	run cat "$BATS_TEST_TMPDIR/loop.err"
	assert_line --regexp "^<5>exec-loop: isolation: "
	assert_line --regexp "^<4>bad1 exited 3: delivered"     # a supervisor's failure
	assert_line --regexp "^<6>ok1 exited 0: delivered"      # and a success, at -v
	assert_line --regexp "^<5>exec-loop: stopped: 2 runs ran, "
	run grep -Ev '^<[3-7]>' "$BATS_TEST_TMPDIR/loop.err"
	assert_output ""
}

@test "JOURNAL_STREAM naming another stream (a parent's journal): times, no priorities" {
	local f=$BATS_TEST_TMPDIR/other
	: >"$f"
	journal_loop "$(stat -c '%d:%i' "$f")"
	run cat "$BATS_TEST_TMPDIR/loop.err"
	assert_line --regexp "^$TS bad1 exited 3: delivered"
	assert_line --regexp "^$TS exec-loop: isolation: "
	run grep -Ev "^$TS " "$BATS_TEST_TMPDIR/loop.err"
	assert_output ""
}

@test "the stop story: the runs still running by id, each run handed back with its new id, a last line" {
	start_dispatcher
	fault 5xx 100000   # kept's result stays retained
	local later='"due_at":32503680000000'   # q1 and q2: accepted, never due here
	admin POST /admin/runs "{\"runs\":[$(spec long /bin/sleep '["30"]'),$(spec kept),$(spec q1 /bin/true '[]' "$later"),$(spec q2 /bin/true '[]' "$later")]}" >/dev/null
	start_loop --slots 2 --drain-ms 200 --log-level notice
	wait_until '[ "$(sql "SELECT count(*) FROM runs WHERE state = '"'started'"'" 2>/dev/null)" = 1 ]'
	# kept's result retained and its supervisor done with it (no execution row)
	wait_until '[ "$(sql "SELECT count(*) FROM results WHERE run_id = '"'kept'"'") $(sql "SELECT count(*) FROM runs WHERE run_id = '"'kept'"'")" = "1 0" ]'
	wait_until '[ "$(sql "SELECT count(*) FROM runs WHERE state = '"'queued'"'")" = 2 ]'
	stop_loop
	run cat "$BATS_TEST_TMPDIR/loop.err"
	assert_line --regexp "^$TS exec-loop: stopping: waiting up to 200 ms for 1 running: long\$"
	assert_line --regexp "^$TS exec-loop: stopping: still running after 200 ms: long; their results stay retained for delivery\$"
	local r rq
	for r in q1 q2; do
		rq=$(sql "SELECT requeued_as FROM handbacks WHERE run_id = '$r'")
		[[ $rq == rq-* ]] || fail "$r: not handed back ($rq)"
		assert_line --regexp "^$TS exec-loop: handed back run '$r', re-queued as $rq\$"
	done
	assert_line -n $((${#lines[@]} - 1)) --regexp \
		"^$TS exec-loop: stopped: 1 run ran, 2 handed back, 1 result retained for delivery\$"
}

@test "HUP: a status line, whatever the level, and the loop goes on; TERM then stops it" {
	start_dispatcher
	start_loop --log-level warning
	wait_until '[ -n "$(current_session 2>/dev/null)" ]'
	admin POST /admin/runs "$(spec before)" >/dev/null
	wait_until '[ "$(finished)" = 1 ]'
	kill -HUP "$LOOP_PID"
	wait_until 'grep -q "exec-loop: status (HUP): " "$BATS_TEST_TMPDIR/loop.err"'
	run grep "exec-loop: status (HUP): " "$BATS_TEST_TMPDIR/loop.err"
	assert_output --regexp "^$TS exec-loop: status \\(HUP\\): 1 run ran since the start \\([0-9]+ s ago\\), 0 running; log level warning; nothing to reload"
	kill -0 "$LOOP_PID"
	# still working after it
	admin POST /admin/runs "$(spec after)" >/dev/null
	wait_until '[ "$(finished)" = 2 ]'
	stop_loop
	[ "$(sql "SELECT status FROM sessions")" = closed ]
}

@test "a HUP whose status line cannot be written (the terminal the loop logged to hung up) stops it cleanly" {
	command -v python3 >/dev/null || skip "no python3"
	start_dispatcher
	# the loop logs to a pseudo-terminal; once its startup report is out,
	# the terminal hangs up (its writes fail with EIO), then comes a HUP
	python3 -c '
import os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=s)
os.close(s)
out = b""
while b"handed back: " not in out:
    out += os.read(m, 4096)
os.close(m)
p.send_signal(1)
try:
    sys.exit(p.wait(timeout=60))
except subprocess.TimeoutExpired:
    p.terminate()
    p.wait()
    sys.exit("the loop went on")
' env --default-signal=HUP exec-loop --dispatcher "$DISP_URL" --tick 0.1 3>&- || fail "exit $?"
	[ "$(sql "SELECT status FROM sessions")" = closed ]
}
