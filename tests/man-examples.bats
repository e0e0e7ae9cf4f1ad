#!/usr/bin/env bats
# The man pages' EXAMPLES work: every command of every page's EXAMPLES
# section runs, as written and in the page's order, against a real
# dispatcher on 127.0.0.1, and exits 0 (as git's t0450 ties its docs to
# its code).  A reader's locations become the test's own (the state
# directory, the store, the port, /var/tmp ...), and the placeholders a
# page's prose names are filled in with what the earlier steps made (SID:
# the current session; ID: the inspection just asked).  Before each page's
# steps the test makes the world its prose assumes ("deliver two results":
# two retained results), nothing more.  The few commands that cannot run
# here (a systemd service, a guest user) are listed in SKIPPED with the
# reason; a SKIPPED entry that no example matches fails the last test.

load helpers
load doclib

# Commands that cannot run in a test, by an extended regular expression,
# and why; what they do is tested elsewhere.
SKIPPED=(
	'^systemd-sysusers |^echo .*>/etc/execkit/|^systemctl '
	'installs a system service (tests/install.bats checks what make install puts in place)'
	'--guest-user execkit-guest '
	'needs root and a user execkit-guest (tests/guest-world.bats runs guests as another user)'
)

# example_lines PAGE: the commands of PAGE's EXAMPLES, one a line: the
# text of each .nf/.fi block, roff escapes removed, a line ending in a
# backslash or a pipe joined with the next.
example_lines() {
	man_section "$1" EXAMPLES | awk '/^\.nf/ { on = 1; next } /^\.fi/ { on = 0 } on && !/^[.\x27]/' |
		unroff | sed -e ':a' -e '/\\$/{N;s/\\\n//;ba}' -e '/|$/{N;s/\n/ /;ba}' | grep -v '^[[:space:]]*$'
}

# skip_reason LINE: why LINE cannot run here (status 0), or status 1.
skip_reason() {
	local i
	for ((i = 0; i < ${#SKIPPED[@]}; i += 2)); do
		if [[ $1 =~ ${SKIPPED[i]} ]]; then
			echo "${SKIPPED[i + 1]}"
			return 0
		fi
	done
	# a machine that cannot isolate guests refuses --require-isolation
	# (exit 78, tests/drills/hostile-guest.bats): the example is for one that can
	if [[ $1 == *--require-isolation* ]] && ! exec-run --require-isolation isolation >/dev/null 2>&1; then
		echo "guests cannot be isolated on this machine"
		return 0
	fi
	return 1
}

# relocate LINE: LINE with a reader's locations moved into the test's.
relocate() {
	local l=$1 t=$BATS_TEST_TMPDIR
	l=${l//\/var\/lib\/execkit/$EXEC_STATE_DIR}
	l=${l//\/var\/lib\/node_exporter\/textfile/$t/textfile}
	l=${l//\/var\/tmp\//$t/}
	l=${l//\/tmp\/d.db/$t/d.db}
	l=${l//\/tmp\/port/$t/port}
	l=${l//8080/$PORT}
	# a crontab line: the schedule is cron's, the command the example's
	[[ $l =~ ^\*\ \*\ \*\ \*\ \*\ (.*)$ ]] && l=${BASH_REMATCH[1]}
	printf '%s\n' "$l"
}

# fill LINE: the placeholders the pages' prose names, filled in.
fill() {
	local l=$1 sid
	sid=$(current_session 2>/dev/null)
	l=${l//\"SID\"/\"$sid\"}
	l=${l//ses-0123456789abcdef/$sid}          # exec-inspect(1): "the current session"
	l=${l//ses-4f9c2a1b7d3e5f60/${PREVIOUS_SID-}} # exec-session(1): "the previous session"
	l=${l//\/ID\?/\/${INSPECTION_ID-}?}
	printf '%s\n' "$l"
}

# answer_field FIELD: a string field of the last step's answer.
answer_field() {
	sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p" "$BATS_TEST_TMPDIR/step.out" | head -1
}

# before LINE: what the reader did before LINE, as the prose says.
before() {
	if [[ $1 == 'exec-session adopt '* ]]; then
		# "after a restart": the previous session is another than the current
		PREVIOUS_SID=$(current_session)
		exec-session open --dispatcher "http://127.0.0.1:$PORT" >/dev/null
	fi
}

# after LINE: what the reader keeps of LINE's answer, as the prose says.
after() {
	case $1 in
	*/admin/enrollments*)   # exec-dispatcher(1): "saved to the file enroll"
		[[ $1 == *'>'* ]] || (umask 077 && answer_field enroll_token >enroll) ;;
	*'-d '*/admin/clients*) # "the answer's token, here $token"
		# shellcheck disable=SC2034 # the next example's step reads it
		token=$(answer_field token) ;;
	*'-d '*/v1/inspections*)
		INSPECTION_ID=$(answer_field inspection_id) ;;
	esac
	# a reader types the next step once the dispatcher started in the
	# background listens
	if [[ $1 =~ ^exec-dispatcher\ .*\&[[:space:]]*$ ]]; then
		export DISP_PID=$!   # common_teardown stops it
		wait_until "(: </dev/tcp/127.0.0.1/\$(cat '$BATS_TEST_TMPDIR/port' 2>/dev/null || echo $PORT)) 2>/dev/null"
	fi
}

# loop_step LINE: exec-loop runs until it is stopped: it runs, opens a
# session, and a stop ends it cleanly (status 0).
loop_step() {
	local loop
	eval "$1 >step.out 2>&1 3>&- &"
	loop=$!
	wait_until '[ -n "$(current_session 2>/dev/null)" ] || ! kill -0 $loop 2>/dev/null'
	[ -n "$(current_session 2>/dev/null)" ] || fail "exec-loop opened no session: $1"$'\n'"$(cat steps.log step.out)"
	kill -TERM "$loop"
	wait "$loop" || fail "exec-loop: status $? after TERM: $(cat step.out)"
}

# run_examples PAGE: every example of PAGE, in order, in this shell (a
# step's variables, exports and background jobs stay for the next), each
# to exit 0.
run_examples() {
	local page=$MANDIR/$1 line lines step why n=0
	mapfile -t lines < <(example_lines "$page")
	[ "${#lines[@]}" -ge 1 ] || fail "$1: no examples"
	cd "$BATS_TEST_TMPDIR" || return 1   # the steps' own files (admin.auth, enroll) land here
	for line in "${lines[@]}"; do
		n=$((n + 1))
		if why=$(skip_reason "$line"); then
			echo "# skipped: $line ($why)" >>steps.log
			continue
		fi
		before "$line"
		step=$(fill "$(relocate "$line")")
		echo "\$ $step" >>steps.log
		if [[ $step == 'exec-loop '* || $step == *' exec-loop '* ]]; then
			loop_step "$step"
		elif [[ $step =~ \&[[:space:]]*$ ]]; then
			# in the background: its output would land in a later step's
			eval "$step" >>background.log 2>&1 3>&-
			: >step.out
		else
			eval "$step" >step.out 2>&1 3>&- ||
				fail "$1, example step $n failed (exit $?): $step"$'\n'"$(cat steps.log step.out)"
		fi
		cat step.out >>steps.log
		after "$step"
	done
}

# examples_dispatcher: the admin helper talks to the dispatcher an example
# started on PORT over the store d.db.
examples_dispatcher() {
	export DISP_URL=http://127.0.0.1:$PORT EXEC_ADMIN_TOKEN_FILE=$BATS_TEST_TMPDIR/d.db.admin-token
}

# A free loopback port: one a dispatcher chose, then stopped.
free_port() {
	spawn_dispatcher 0 --quiet --store "$BATS_TEST_TMPDIR/probe.db" || return 1
	cat "$BATS_TEST_TMPDIR/disp.port"
	stop_dispatcher
}

# The test's own dispatcher, on PORT, with the test's executor enrolled.
with_dispatcher() {
	start_dispatcher
	PORT=${DISP_URL##*:}
}

# A dispatcher and a current session.
with_session() {
	with_dispatcher
	open_session
}

# A run r1 that finished and was delivered.
with_finished_run() {
	with_session
	submit_and_accept "$(spec r1 /bin/echo '["hi"]')"
	exec-run start --wait >/dev/null
}

@test "exec-accept(1)'s examples run" {
	with_session
	admin POST /admin/runs "$(spec r2)" >/dev/null   # for --from-dispatcher to pull
	run_examples exec-accept.1
	[ "$(sql "SELECT group_concat(run_id) FROM (SELECT run_id FROM accepts ORDER BY run_id)")" = r1,r2 ]
}

@test "exec-dispatcher(1)'s examples run" {
	PORT=$(free_port)   # unused: the example's dispatcher chooses its port
	run_examples exec-dispatcher.1
	[ -n "${INSPECTION_ID-}" ] || fail "no inspection asked: $(cat steps.log)"
	PORT=$(cat "$BATS_TEST_TMPDIR/port")
	examples_dispatcher
	[ "$(disp_field r1 state)" = '"queued"' ] || fail "$(admin GET /admin/runs/r1)"
	[ "$(admin GET /admin/sessions | grep -o '"status":"current"' | wc -l)" -eq 1 ]
}

@test "exec-inspect(1)'s examples run" {
	with_finished_run
	mkdir "$BATS_TEST_TMPDIR/textfile"   # node_exporter's directory
	run_examples exec-inspect.1
	[ -s "$BATS_TEST_TMPDIR/textfile/execkit.prom" ]
}

@test "exec-loop(1)'s examples run" {
	PORT=$(free_port)
	run_examples exec-loop.1
	examples_dispatcher
	[ "$(admin GET /admin/sessions | grep -o '"status":"closed"' | wc -l)" -eq 1 ]
}

@test "exec-reconcile(1)'s examples run" {
	with_finished_run
	run_examples exec-reconcile.1
}

@test "exec-report(1)'s examples run" {
	with_session
	# four retained results: the dispatcher fails every report until the
	# faults are cleared
	fault 5xx 1000
	submit_and_accept "$(spec r1)" "$(spec r2)" "$(spec r3)" "$(spec r4)"
	exec-run start --wait >/dev/null 2>&1 || true   # undelivered: not this test's subject
	admin DELETE /admin/faults >/dev/null
	[ "$(exec-inspect list retained --ids | wc -l)" -eq 4 ]
	run_examples exec-report.1
	[ "$(exec-inspect list retained --ids | wc -l)" -eq 0 ]
}

@test "exec-run(1)'s examples run" {
	with_session
	# one run due now; three due in a day, still queued for the cancels
	submit_and_accept "$(spec r0)" "$(spec r1 /bin/true '[]' "\"due_at\":$(($(date +%s) * 1000 + 86400000))")" \
		"$(spec r2 /bin/true '[]' "\"due_at\":$(($(date +%s) * 1000 + 86400000))")" \
		"$(spec r3 /bin/true '[]' "\"due_at\":$(($(date +%s) * 1000 + 86400000))")"
	run_examples exec-run.1
}

@test "exec-session(1)'s examples run" {
	with_dispatcher
	run_examples exec-session.1
	[ -n "${PREVIOUS_SID-}" ] || fail "no adoption: $(cat steps.log)"
}

@test "exec-shares(1)'s examples run" {
	local go=$BATS_TEST_TMPDIR/go
	with_session
	# "what run r1 may use towards that destination": r1 running, and
	# declaring it
	submit_and_accept "$(spec r1 /bin/sh "[\"-c\",\"$(guest_wait "$go")\"]" '"policy":{"destinations":["backup"]}')"
	exec-run start >/dev/null
	wait_until '[ "$(sql "SELECT state FROM runs WHERE run_id = '"'r1'"'")" = started ]'
	run_examples exec-shares.1
	touch "$go"
}

@test "execkit(7)'s examples run" {
	PORT=$(free_port)
	mkdir "$BATS_TEST_TMPDIR/textfile"
	run_examples execkit.7
	examples_dispatcher
	[ "$(disp_field r1 state)" = '"finished"' ] || fail "$(admin GET /admin/runs/r1)"
	[ -s "$BATS_TEST_TMPDIR/textfile/execkit.prom" ]
}

@test "every page with examples has its test here, and every SKIPPED entry matches an example" {
	local page i all
	for page in "$MANDIR"/*.[17]; do
		page=$(basename "$page")
		page="${page%.*}(${page##*.})"
		grep -qF "@test \"$page's examples run\"" "$BATS_TEST_FILENAME" ||
			fail "$page: its examples are not run here"
	done
	all=$(for page in "$MANDIR"/*.[17]; do example_lines "$page"; done)
	for ((i = 0; i < ${#SKIPPED[@]}; i += 2)); do
		grep -qE -- "${SKIPPED[i]}" <<<"$all" || fail "SKIPPED entry matches no example: ${SKIPPED[i]}"
	done
}
