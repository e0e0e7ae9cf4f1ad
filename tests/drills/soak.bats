#!/usr/bin/env bats
# A bounded random-kill soak of the whole executor: exec-loop runs work from
# the dispatcher; at random moments the loop, the tools it is running and
# every live supervisor are killed with SIGKILL, and the loop is started
# again: a new session each time, so the previous session's queued rows are
# quarantined (there is no adoption yet), and each session gets a fresh batch
# of work from the dispatcher.  After the last kill: sweep, drain, check.
#
# SOAK_SEED picks the moments (default 1); SOAK_KILLS the number of kills
# (default 12); SOAK_BATCH the runs submitted per session (default 5).

load drill

# kill_executor LOOP_PID [reaped]: SIGKILL the loop, the tools it is
# running, and the supervisors the state names as live (all by pid); with
# 'reaped', wait (bounded) until all killed so far are gone from /proc: a killed
# detached supervisor stays a zombie until init reaps it, and execkit's
# liveness check (libcommon/proc.c) still counts a zombie as alive.
kill_executor() {
	local loop=$1 pids p
	pids="$loop $(pgrep -P "$loop" | tr '\n' ' ')"
	# the live supervisors the state names: pid and process start time match
	for p in $(val "SELECT sup_pid || ':' || sup_start FROM runs WHERE state = 'started' AND sup_pid > 0" 2>/dev/null); do
		[ "$(cut -d' ' -f22 "/proc/${p%%:*}/stat" 2>/dev/null)" = "${p#*:}" ] && pids="$pids ${p%%:*}"
	done
	# shellcheck disable=SC2086 # a list of pids
	kill -KILL $pids 2>/dev/null || true
	wait "$loop" 2>/dev/null || true
	echo "$pids" >>"$BATS_TEST_TMPDIR/killed"
	if [ "${2:-}" = reaped ]; then
		for p in $(cat "$BATS_TEST_TMPDIR/killed"); do
			wait_until "[ ! -e /proc/$p ]" >&2
		done
	fi
	echo "$pids" | wc -w
}

# batch K: submit SOAK_BATCH ledger guests for the K-th session.
batch() {
	local i code pause specs=()
	for i in $(seq 1 "${SOAK_BATCH:-5}"); do
		code=$((RANDOM % 3))   # drawn here: $RANDOM in a $(...) is not the seed's
		pause=0.$((RANDOM % 2))$((RANDOM % 10))
		specs+=("$(gspec "s$1-$i" "$code" 0 "$pause")")
	done
	submit "${specs[@]}"
}

soak() {
	local kills=${SOAK_KILLS:-12} i k loop target victims=0 finished
	RANDOM=${SOAK_SEED:-1}
	for k in $(seq 1 "$kills"); do
		batch "$k"
		exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 3 2>>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
		loop=$!
		remember "$loop"
		# a random moment: once 1 to SOAK_BATCH more guests have started
		# (bounded wait), plus up to 90 ms
		target=$(($(ran_total) + 1 + RANDOM % ${SOAK_BATCH:-5}))
		for i in $(seq 1 200); do
			[ "$(ran_total)" -ge "$target" ] && break
			kill -0 "$loop" 2>/dev/null || break
			sleep 0.025
		done
		sleep "0.0$((RANDOM % 10))"
		victims=$((victims + $(kill_executor "$loop")))
	done
	# The last loop runs until the current session's work is done, then dies too.
	batch last
	exec-loop --dispatcher "$DISP_URL" --tick 0.05 --slots 3 2>>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	loop=$!
	remember "$loop"
	wait_until "[ -n \"\$(current_session 2>/dev/null)\" ]"
	for i in $(seq 1 400); do
		[ "$(admin GET /admin/summary | grep -o '"queued":[0-9]*' | cut -d: -f2)" = 0 ] && \
			[ "$(val "SELECT count(*) FROM runs r JOIN sessions s USING (incarnation, session_id)
				WHERE s.status = 'current' AND r.state IN ('queued', 'started')")" = 0 ] && break
		sleep 0.025
	done
	victims=$((victims + $(kill_executor "$loop" reaped)))
	# Declared action: settle what the kills left, deliver what is retained.
	exec-run sweep >/dev/null
	exec-reconcile --drain >/dev/null
	check --drained
	finished=$(admin GET /admin/summary | grep -o '"finished":[0-9]*' | cut -d: -f2)
	echo "# soak: $kills restarts, $victims processes killed, $(ran_total) guests ran (each once), ${finished:-0} of $(( (kills + 1) * ${SOAK_BATCH:-5} )) finished at the dispatcher, $(val "SELECT count(*) FROM runs WHERE state = 'unknown'") unknown, $(val "SELECT count(*) FROM runs WHERE state = 'queued'") quarantined queued" >&3
	# not vacuous: work was done and processes were killed
	[ "${finished:-0}" -ge 5 ]
	[ "$victims" -ge "$kills" ]
}

ran_total() { if [ -f "$LEDGER" ]; then wc -l <"$LEDGER"; else echo 0; fi; }

@test "soak: kill -9 of exec-loop and its supervisors at random moments; nothing lost, nothing ran twice" {
	start_dispatcher
	in_child soak
}
