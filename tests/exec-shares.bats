#!/usr/bin/env bats
# exec-shares and the shares exec-run joins and leaves: SPEC section 3
# "Shares", doc/shares.md.  Guests are real processes started by exec-run
# against a real exec-dispatcher; the cache is read from the real database.

load helpers

setup() {
	start_dispatcher
	open_session
}

teardown() {
	local p
	# Guests run in their own process groups: end them by id first.
	for p in $(sql "SELECT guest_pid FROM runs WHERE guest_pid > 0" 2>/dev/null); do
		kill -KILL -- "-$p" 2>/dev/null || true
	done
	common_teardown
}

# jget JSON PATH: a value out of one JSON text, read by SQLite's JSON functions.
jget() {
	sqlite3 :memory: "SELECT json_extract('${1//\'/\'\'}', '$2')"
}

# jtype JSON PATH: null for a JSON null, empty when the path is absent.
jtype() {
	sqlite3 :memory: "SELECT json_type('${1//\'/\'\'}', '$2')"
}

limits() { cat "$EXEC_STATE_DIR/out/$1.limits"; }

# lim RUN PATH: one field of RUN's limits file.
lim() { jget "$(limits "$1")" "$2"; }

# sleeper ID POLICY-JSON: a guest that runs until the test ends it.
sleeper() { spec "$1" /bin/sleep '["3600"]' "\"policy\":{$2}"; }

# The generation RUN's limits file must carry once it is up to date.
want_generation() {
	sql "SELECT sum(d.generation) FROM share_members m JOIN share_dims d ON d.dimension = m.dimension
		WHERE m.run_id = '$1'"
}

# limited RUN: one of RUN's dimensions has a capacity.
limited() {
	[ "$(sql "SELECT count(*) FROM share_members m JOIN share_dims d ON d.dimension = m.dimension
		WHERE m.run_id = '$1' AND d.capacity IS NOT NULL")" != 0 ]
}

# current RUN...: every RUN's limits file reflects the newest committed
# state; a run no capacity applies to may have none (doc/shares.md).
current() {
	local r
	for r in "$@"; do
		if [ ! -e "$EXEC_STATE_DIR/out/$r.limits" ] && ! limited "$r"; then
			continue
		fi
		[ -s "$EXEC_STATE_DIR/out/$r.limits" ] || return 1
		[ "$(lim "$r" '$.generation')" = "$(want_generation "$r")" ] || return 1
	done
}

# start_runs SPEC...: accept and start them; return once every one has joined
# and every limits file is up to date.
start_runs() {
	local s ids=()
	submit_and_accept "$@"
	exec-run start --slots 32 >/dev/null 3>&-
	for s in "$@"; do
		ids+=("$(jget "$s" '$.run_id')")
		wait_until "[ -n \"\$(sql \"SELECT guest_pid FROM runs WHERE run_id = '${ids[-1]}'\")\" ]"
	done
	wait_until 'current $(sql "SELECT DISTINCT run_id FROM share_members")'

}

# fresh RUN DIMENSION: 1 if the cached share is fresh, 0 if stale, empty if none.
fresh() {
	sql "SELECT c.generation = d.generation FROM share_cache c JOIN share_dims d
		ON d.dimension = c.dimension WHERE c.run_id = '$1' AND c.dimension = '$2'"
}

# ended RUN: wait until RUN has left every dimension.
ended() {
	wait_until "[ \"\$(sql \"SELECT count(*) FROM share_members WHERE run_id = '$1'\")\" = 0 ]"
}

@test "the worked example of doc/shares.md" {
	exec-shares capacity set executor 1000000 >/dev/null
	exec-shares capacity set dest:eu 300000 >/dev/null
	start_runs "$(sleeper A '"destinations":["eu","us"]')" \
		"$(sleeper B '"destinations":["eu"],"weight":2')" "$(sleeper C '')"
	[ "$(limits A)" = '{"run_id":"A","executor_bps":250000,"destinations":{"eu":100000,"us":null},"generation":5}' ]
	[ "$(limits B)" = '{"run_id":"B","executor_bps":500000,"destinations":{"eu":200000},"generation":5}' ]
	[ "$(limits C)" = '{"run_id":"C","executor_bps":250000,"destinations":{},"generation":3}' ]
	run exec-shares capacity set dest:eu 100000
	assert_success
	assert_output --partial "2 limits files rewritten"
	[ "$(lim A '$.destinations.eu') $(lim B '$.destinations.eu')" = "33333 66666" ]
	[ "$(lim C '$.generation')" = 3 ]
	exec-run cancel B --session "$(current_session)" >/dev/null
	ended B
	wait_until "current A C"
	[ "$(lim A '$.executor_bps') $(lim C '$.executor_bps') $(lim A '$.destinations.eu')" = "500000 500000 100000" ]
	[ ! -e "$EXEC_STATE_DIR/out/B.limits" ]
}

@test "a lowered capacity rewrites running guests' limits files at once, without a new start" {
	exec-shares capacity set executor 1000 >/dev/null
	exec-shares capacity set dest:a 600 >/dev/null
	start_runs "$(spec g1 /bin/sh "[\"-c\",\"cat \\\"\$EXEC_LIMITS_FILE\\\" >$BATS_TEST_TMPDIR/seen; echo \\\"\$EXEC_LIMITS_FILE\\\" >$BATS_TEST_TMPDIR/path; exec sleep 3600\"]" '"policy":{"destinations":["a"]}')" \
		"$(sleeper g2 '"destinations":["a"],"weight":2')"
	# The guest found its limits where its environment said.
	wait_until "[ -s $BATS_TEST_TMPDIR/seen ]"
	[ "$(cat "$BATS_TEST_TMPDIR/path")" = "$EXEC_STATE_DIR/out/g1.limits" ]
	[ "$(jget "$(cat "$BATS_TEST_TMPDIR/seen")" '$.run_id')" = g1 ]
	[ "$(lim g1 '$.executor_bps') $(lim g1 '$.destinations.a')" = "333 200" ]
	[ "$(lim g2 '$.executor_bps') $(lim g2 '$.destinations.a')" = "666 400" ]
	before_gen=$(lim g1 '$.generation')
	starts=$(sql "SELECT group_concat(run_id || ':' || started_at || ':' || sup_pid) FROM runs")
	run exec-shares capacity set dest:a 300
	assert_success
	# No wait: the files are rewritten when the command returns.
	[ "$(lim g1 '$.destinations.a') $(lim g2 '$.destinations.a')" = "100 200" ]
	[ "$(lim g1 '$.executor_bps')" = 333 ]
	[ "$(lim g1 '$.generation')" -gt "$before_gen" ]
	run exec-shares capacity set executor 300 --json
	assert_success
	[ "$(jget "$output" '$.rewritten')" = 2 ]
	[ "$(lim g1 '$.executor_bps') $(lim g2 '$.executor_bps')" = "100 200" ]
	[ "$(stat -c %a "$EXEC_STATE_DIR/out/g1.limits")" = 600 ]
	# Nothing started: the same two runs, same supervisors, nothing else accepted.
	[ "$(sql "SELECT group_concat(run_id || ':' || started_at || ':' || sup_pid) FROM runs")" = "$starts" ]
	[ "$(sql "SELECT count(*) FROM accepts")" = 2 ]
	# Lifting a capacity: null, not a number.
	exec-shares capacity set dest:a unlimited >/dev/null
	[ "$(jtype "$(limits g2)" '$.destinations.a')" = null ]
}

@test "reading the executor share leaves a pending destination recomputation pending" {
	exec-shares capacity set executor 1000 >/dev/null
	exec-shares capacity set dest:a 100 >/dev/null
	start_runs "$(sleeper p1 '"destinations":["a","b"]')"
	[ "$(fresh p1 executor) $(fresh p1 dest:a) $(fresh p1 dest:b)" = "1 1 1" ]
	# Two changes committed, neither published (the command dies in between).
	EXEC_CRASH_AT=shares-changed run exec-shares capacity set executor 500
	[ "$status" -eq 137 ]
	EXEC_CRASH_AT=shares-changed run exec-shares capacity set dest:a 50
	[ "$status" -eq 137 ]
	[ "$(fresh p1 executor) $(fresh p1 dest:a) $(fresh p1 dest:b)" = "0 0 1" ]
	run exec-shares show p1 --json
	assert_success
	[ "$(jget "$output" '$.share_bps') $(jget "$output" '$.recomputed')" = "500 1" ]
	# Only the share that was read is fresh; the destination's stays pending.
	[ "$(fresh p1 executor) $(fresh p1 dest:a) $(fresh p1 dest:b)" = "1 0 1" ]
	run exec-shares show p1 --json
	[ "$(jget "$output" '$.recomputed')" = 0 ]
	[ "$(fresh p1 dest:a)" = 0 ]
	run exec-shares show p1 --destination a --json
	assert_success
	[ "$(jget "$output" '$.share_bps') $(jget "$output" '$.recomputed')" = "50 1" ]
	[ "$(fresh p1 dest:a)" = 1 ]
	# The stale file is brought up to date by setting the capacity again.
	[ "$(lim p1 '$.destinations.a')" = 100 ]
	exec-shares capacity set dest:a 50 >/dev/null
	[ "$(lim p1 '$.destinations.a') $(lim p1 '$.executor_bps')" = "50 500" ]
}

@test "a membership change on destination A does not invalidate destination B" {
	exec-shares capacity set dest:A 900 >/dev/null
	exec-shares capacity set dest:B 800 >/dev/null
	start_runs "$(sleeper x '"destinations":["A","B"]')"
	genB=$(sql "SELECT generation FROM share_dims WHERE dimension = 'dest:B'")
	cacheB=$(sql "SELECT generation || ':' || computed_at FROM share_cache WHERE run_id = 'x' AND dimension = 'dest:B'")
	genA=$(sql "SELECT generation FROM share_dims WHERE dimension = 'dest:A'")
	sleep 0.01   # a recomputation would show in computed_at
	start_runs "$(sleeper y '"destinations":["A"]')"
	[ "$(sql "SELECT generation FROM share_dims WHERE dimension = 'dest:A'")" -gt "$genA" ]
	[ "$(sql "SELECT generation FROM share_dims WHERE dimension = 'dest:B'")" = "$genB" ]
	[ "$(fresh x dest:B)" = 1 ]
	[ "$(sql "SELECT generation || ':' || computed_at FROM share_cache WHERE run_id = 'x' AND dimension = 'dest:B'")" = "$cacheB" ]
	[ "$(lim x '$.destinations.A') $(lim x '$.destinations.B')" = "450 800" ]
	# y leaves: A changes again, B still does not.
	exec-run cancel y --session "$(current_session)" >/dev/null
	ended y
	wait_until "current x"
	[ "$(sql "SELECT generation FROM share_dims WHERE dimension = 'dest:B'")" = "$genB" ]
	[ "$(sql "SELECT generation || ':' || computed_at FROM share_cache WHERE run_id = 'x' AND dimension = 'dest:B'")" = "$cacheB" ]
	[ "$(lim x '$.destinations.A')" = 900 ]
}

@test "an undeclared destination is an error with its own exit code, not a zero" {
	exec-shares capacity set dest:a 100 >/dev/null
	exec-shares capacity set dest:b 100 >/dev/null
	start_runs "$(sleeper u1 '"destinations":["a"]')" "$(sleeper u2 '"destinations":["b"]')"
	run --separate-stderr exec-shares show u1 --destination b
	[ "$status" -eq "$EK_NODEST" ]
	[ -z "$output" ]
	[[ "$stderr" == *"run 'u1' did not declare destination 'b'"* ]] || fail "$stderr"
	run --separate-stderr exec-shares show u1 --destination b --json
	[ "$status" -eq "$EK_NODEST" ]
	[ -z "$output" ]
	run exec-shares show u1 --destination nowhere
	[ "$status" -eq "$EK_NODEST" ]
	# No share, no limit: absent from the file and from the listing.
	[ -z "$(jtype "$(limits u1)" '$.destinations.b')" ]
	run exec-shares list dest:b
	assert_success
	assert_output --partial "u2 dest:b 100 bytes/s"
	refute_output --partial u1
	[ "$(sql "SELECT count(*) FROM share_cache WHERE run_id = 'u1' AND dimension = 'dest:b'")" = 0 ]
	# A run that is not running has no shares at all.
	run exec-shares show nobody
	[ "$status" -eq "$EK_NOINPUT" ]
	assert_output --partial "not running"
}

# sums_ok: in every dimension, the members and total weight match the
# memberships and the shares add up to the capacity, within rounding.
sums_ok() {
	local d members cap sum l
	for d in executor dest:a dest:b; do
		members=$(sql "SELECT count(*) FROM share_members WHERE dimension = '$d'")
		[ "$members" = "$(sql "SELECT members FROM share_dims WHERE dimension = '$d'")" ] || fail "$d: members"
		[ "$(sql "SELECT total(weight) FROM share_members WHERE dimension = '$d'")" = \
			"$(sql "SELECT total(total_weight) FROM share_dims WHERE dimension = '$d'")" ] || fail "$d: weight"
		cap=$(sql "SELECT capacity FROM share_dims WHERE dimension = '$d'")
		sum=0
		while read -r l; do
			sum=$((sum + $(jget "$l" '$.share_bps')))
		done < <(exec-shares list "$d" --json)
		[ "$members" -gt 0 ] || fail "$d has no members: a useless check"
		[ "$sum" -le "$cap" ] && [ "$((cap - sum))" -lt "$members" ] ||
			fail "$d: shares add up to $sum of $cap with $members members"
	done
}

@test "shares stay correct under concurrent starts and ends" {
	local i d specs=()
	exec-shares capacity set executor 1000003 >/dev/null
	exec-shares capacity set dest:a 777 >/dev/null
	exec-shares capacity set dest:b 1000 >/dev/null
	for i in 1 2 3 4 5 6 7 8; do
		d=""
		if ((i % 5)); then d='"a"'; fi
		if ((i % 3)); then d="${d:+$d,}\"b\""; fi
		# Odd runs end on their own within a second, even ones run until cancelled.
		specs+=("$(spec c$i /bin/sleep "[\"$( ((i % 2)) && echo 0.$i || echo 3600)\"]" \
			"\"policy\":{\"destinations\":[$d],\"weight\":$((i % 4 + 1)).5}")")
	done
	submit_and_accept "${specs[@]}"
	# Two starters at once; the short guests end while the others join.
	exec-run start --slots 4 >/dev/null 3>&- &
	p1=$!
	exec-run start --slots 8 >/dev/null 3>&- &
	wait "$p1" "$!"
	exec-run start --slots 32 >/dev/null 3>&-
	wait_until '[ "$(sql "SELECT count(*) FROM runs")" = 4 ]' || { sql "SELECT run_id, state, sup_pid, guest_pid FROM runs"; cat $EXEC_STATE_DIR/out/supervisors.log; false; }
	wait_until "current c2 c4 c6 c8"
	sums_ok
	# Two of the long ones end together.
	sid=$(current_session)
	exec-run cancel c2 --session "$sid" >/dev/null &
	p1=$!
	exec-run cancel c4 --session "$sid" >/dev/null &
	wait "$p1" "$!"
	ended c2
	ended c4
	wait_until "current c6 c8"
	sums_ok
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT DISTINCT run_id FROM share_members ORDER BY run_id)")" = "c6,c8" ]
	# The files agree with the shares.
	for i in 6 8; do
		[ "$(lim c$i '$.executor_bps')" = "$(jget "$(exec-shares show c$i --json)" '$.share_bps')" ]
		[ "$(lim c$i '$.destinations.a')" = "$(jget "$(exec-shares show c$i --destination a --json)" '$.share_bps')" ]
	done
	# Every ended run left: no membership, no cached share, no limits file.
	[ "$(sql "SELECT count(*) FROM share_cache WHERE run_id NOT IN ('c6', 'c8')")" = 0 ]
	for i in 1 2 3 4 5 7; do [ ! -e "$EXEC_STATE_DIR/out/c$i.limits" ]; done
}

@test "the notify hook runs on a capacity change with the run id and its limits file" {
	printf '#!/bin/sh\necho "$1 $2 $EXEC_RUN_ID" >>%s/hook.log\ncat "$2" >%s/hook.seen\n' \
		"$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/hook"
	printf '#!/bin/sh\necho failing >&2\nexit 3\n' >"$BATS_TEST_TMPDIR/bad"
	chmod 755 "$BATS_TEST_TMPDIR/hook" "$BATS_TEST_TMPDIR/bad"
	export EXEC_ALLOW_HOOKS=$BATS_TEST_TMPDIR/hook:$BATS_TEST_TMPDIR/bad
	exec-shares capacity set dest:a 100 >/dev/null
	start_runs "$(sleeper n1 "\"destinations\":[\"a\"],\"notify\":\"$BATS_TEST_TMPDIR/hook\"")"
	[ ! -e "$BATS_TEST_TMPDIR/hook.log" ]         # not for the file written before the guest
	start_runs "$(sleeper n2 "\"destinations\":[\"a\"],\"notify\":\"$BATS_TEST_TMPDIR/bad\"")"
	# n2 joining changed n1's limits: its hook ran (in n2's supervisor)
	wait_until '[ "$(wc -l <"$BATS_TEST_TMPDIR/hook.log" 2>/dev/null)" = 1 ]'
	run --separate-stderr exec-shares capacity set dest:a 40 3>&-
	assert_success
	assert_output --partial "1 hook notified"
	[[ "$stderr" == *"run 'n2': notify: '$BATS_TEST_TMPDIR/bad' exited with status 3"* ]] || fail "$stderr"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/hook.log")" = 2 ]
	[ "$(tail -1 "$BATS_TEST_TMPDIR/hook.log")" = "n1 $EXEC_STATE_DIR/out/n1.limits n1" ]
	[ "$(jget "$(cat "$BATS_TEST_TMPDIR/hook.seen")" '$.destinations.a')" = 20 ]
	[ "$(cat "$EXEC_STATE_DIR/out/n2.notify")" = failing ]
	run --separate-stderr exec-shares capacity set dest:a 30 --json 3>&-
	assert_success
	[ "$(jget "${lines[0]}" '$.event') $(jget "${lines[0]}" '$.run_id')" = "publish_failure n2" ]
	[ "$(jget "${lines[1]}" '$.notified') $(jget "${lines[1]}" '$.hooks_failed')" = "1 1" ]
}

@test "a limits file that cannot be written: the guest never runs, and that is its one result" {
	exec-shares capacity set executor 1000 >/dev/null
	mkdir -p "$EXEC_STATE_DIR/out/nl.limits"       # a directory where the file must go
	submit_and_accept "$(spec nl /bin/sh "[\"-c\",\"touch $BATS_TEST_TMPDIR/ran\"]")"
	run exec-run start --wait 3>&-
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]                # never without its limits
	[ "$(sql "SELECT outcome || ' ' || exit_code FROM receipts WHERE run_id = 'nl'")" = "exec_failed 126" ]
	[ "$(disp_charges nl)" = 1 ]
	run admin GET /admin/runs/nl
	assert_output --partial "not run: its limits file could not be written"
	[ "$(sql "SELECT count(*) FROM share_members") $(sql "SELECT count(*) FROM runs")" = "0 0" ]
}

@test "a run no capacity applies to makes no limits file, and its guest none; a capacity set while it runs gives it one at once" {
	local wait="i=0; while [ ! -s \\\"\$EXEC_LIMITS_FILE\\\" ] && [ \$i -lt $((WAIT_S * 20)) ]; do sleep 0.05; i=\$((i+1)); done"
	start_runs "$(spec q1 /bin/sh "[\"-c\",\"$wait; cat \\\"\$EXEC_LIMITS_FILE\\\" >$BATS_TEST_TMPDIR/seen; exec sleep 3600\"]")"
	[ ! -e "$EXEC_STATE_DIR/out/q1.limits" ]
	run ls "$EXEC_STATE_DIR/out"
	refute_output --partial q1.limits
	[ ! -e "$BATS_TEST_TMPDIR/seen" ]
	exec-shares capacity set executor 500 >/dev/null 3>&-
	wait_until "[ -s '$BATS_TEST_TMPDIR/seen' ]"
	[ "$(jget "$(cat "$BATS_TEST_TMPDIR/seen")" '$.executor_bps')" = 500 ]
	[ "$(lim q1 '$.executor_bps')" = 500 ]
}

@test "a hanging hook is killed after its bound and does not fail the change" {
	printf '#!/bin/sh\nexec sleep 3600\n' >"$BATS_TEST_TMPDIR/hang"
	chmod 755 "$BATS_TEST_TMPDIR/hang"
	export EXEC_ALLOW_HOOKS=$BATS_TEST_TMPDIR/hang
	start_runs "$(sleeper h1 "\"notify\":\"$BATS_TEST_TMPDIR/hang\"")"
	t0=$SECONDS
	run --separate-stderr exec-shares capacity set executor 10 3>&-
	assert_success
	# the hook would sleep an hour: only its bound can have ended the wait
	[ $((SECONDS - t0)) -lt "$WAIT_S" ] || fail "took $((SECONDS - t0)) s"
	[[ "$stderr" == *"did not end within"* ]] || fail "$stderr"
	[ "$(lim h1 '$.executor_bps')" = 10 ]
}

@test "a run leaves when its guest ends; an orphaned guest keeps its share until it is gone" {
	exec-shares capacity set executor 100 >/dev/null
	submit_and_accept "$(spec e1 /bin/true '[]' '"policy":{"destinations":["a"]}')"
	gen=$(sql "SELECT generation FROM share_dims WHERE dimension = 'executor'")
	exec-run start --wait >/dev/null 3>&-
	[ "$(sql "SELECT count(*) FROM share_members") $(sql "SELECT count(*) FROM share_cache")" = "0 0" ]
	[ "$(sql "SELECT generation FROM share_dims WHERE dimension = 'executor'")" = $((gen + 2)) ]
	[ ! -e "$EXEC_STATE_DIR/out/e1.limits" ]
	start_runs "$(sleeper k1 '"destinations":["a"]')"
	sup=$(sql "SELECT sup_pid FROM runs WHERE run_id = 'k1'")
	kill -9 "$sup"
	wait_for sh -c "! kill -0 $sup 2>/dev/null"
	exec-run sweep >/dev/null
	[ "$(sql "SELECT state FROM runs WHERE run_id = 'k1'")" = unknown ]
	# the guest outlived its supervisor and still runs: it keeps its share
	guest=$(sql "SELECT guest_pid FROM runs WHERE run_id = 'k1'")
	kill -0 "$guest"
	[ "$(sql "SELECT count(*) FROM share_members WHERE run_id = 'k1'")" = 2 ]
	kill -9 "$guest"
	wait_for sh -c "[ \"\$(ps -o stat= -p $guest | cut -c1)\" != S ]"
	exec-run sweep >/dev/null
	[ "$(sql "SELECT count(*) FROM share_members")" = 0 ]
	[ "$(sql "SELECT members || ':' || total_weight FROM share_dims WHERE dimension = 'dest:a'")" = "0:0" ]
}

@test "a run leaves its dimensions in its result's commit: both or neither, one transaction" {
	submit_and_accept "$(spec c1 /bin/true '[]' '"policy":{"destinations":["a"]}')" \
		"$(spec c2 /bin/true '[]' '"policy":{"destinations":["a"]}')"
	# killed before the result's commit: no result, still a member
	run env EXEC_CRASH_AT=result-chosen exec-run supervise c1
	[ "$status" -eq 137 ]
	[ "$(sql "SELECT count(*) FROM results WHERE run_id = 'c1'")" = 0 ]
	[ "$(sql "SELECT count(*) FROM share_members WHERE run_id = 'c1'")" = 2 ]
	# killed right after it: the result retained, and no membership left
	run env EXEC_CRASH_AT=retained exec-run supervise c2
	[ "$status" -eq 137 ]
	[ "$(sql "SELECT count(*) FROM results WHERE run_id = 'c2'")" = 1 ]
	[ "$(sql "SELECT count(*) FROM share_members WHERE run_id = 'c2'")" = 0 ]
	[ "$(sql "SELECT members FROM share_dims WHERE dimension = 'dest:a'")" = 1 ]   # c1's
}

@test "capacity show, list, and usage errors" {
	exec-shares capacity set executor 1000 >/dev/null
	start_runs "$(sleeper s1 '"destinations":["a"],"weight":0.5')" "$(sleeper s2 '')"
	run exec-shares capacity show --json
	assert_success
	[ "${#lines[@]}" = 2 ]
	[ "$(jget "${lines[1]}" '$.dimension') $(jget "${lines[1]}" '$.capacity_bps') $(jget "${lines[1]}" '$.members') $(jget "${lines[1]}" '$.total_weight')" = "executor 1000 2 1.5" ]
	[ "$(jtype "${lines[0]}" '$.capacity_bps')" = null ]
	run exec-shares list
	assert_success
	assert_line "s1 dest:a unlimited (weight 0.5 of 0.5, capacity unlimited, generation 0)"
	assert_line "s1 executor 333 bytes/s (weight 0.5 of 1.5, capacity 1000 bytes/s, generation 2)"
	assert_line "s2 executor 666 bytes/s (weight 1 of 1.5, capacity 1000 bytes/s, generation 2)"
	for bad in "capacity set bogus 1" "capacity set dest: 1" "capacity set executor -5" \
		"capacity set executor 1x" "capacity set executor" "capacity" "show" "show s1 --destination a/b" \
		"list dest:a extra" "list nope" "list --destination a" "frobnicate"; do
		run --separate-stderr exec-shares $bad
		[ "$status" -eq "$EK_USAGE" ] || fail "'$bad': status $status"
		[[ "$stderr" == *"Try 'exec-shares --help'"* ]] || fail "'$bad': $stderr"
	done
	run exec-accept <<<"$(spec w1 /bin/true '[]' '"policy":{"notify":"relative/hook"}')"
	[ "$status" -eq "$EK_DATAERR" ]
}
