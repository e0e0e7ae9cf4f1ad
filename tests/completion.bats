#!/usr/bin/env bats
# Bash completion, in a real bash with bash-completion loaded: options come
# from each tool's own option table and subcommands from its command table
# (TOOL --completion-helper, build-aux/gen-completion.sh), run ids and
# session ids from the state directory, read-only and fast.

load helpers
load doclib

setup() { need_completion; }

# A state with runs in several populations under two sessions:
#   old1 quarantined (queued under the first session), refused1 refused,
#   kept1 retained (its reports failed), new1 and new2 queued now.
populate() {
	start_dispatcher
	open_session
	spec old1 /bin/true '[]' '"due_at":9999999999999' | exec-accept >/dev/null
	spec refused1 | exec-accept >/dev/null           # unknown to the dispatcher
	exec-run start --wait >/dev/null 2>&1 || true
	fault 5xx 20
	submit_and_accept "$(spec kept1)"
	exec-run start --wait --budget-ms 300 >/dev/null 2>&1 || true
	admin DELETE /admin/faults >/dev/null
	open_session
	{ spec new1 /bin/true '[]' '"due_at":9999999999999'; spec new2 /bin/true '[]' '"due_at":9999999999999'; } |
		exec-accept >/dev/null
	[ "$(exec-inspect list refused --ids)" = refused1 ]
	[ "$(exec-inspect list retained --ids)" = kept1 ]
}

sorted() { LC_ALL=C sort; }

@test "the built completion is what the generator makes from the sources now" {
	diff <(sh "$SRC/build-aux/gen-completion.sh" "$SRC" "$BUILD") "$COMPLETION"
}

@test "exec-run --sl<TAB> completes to --slots" {
	run complete_words exec-run --sl
	assert_success
	assert_output --slots
}

@test "every long option of every tool's --help is offered, and no other" {
	local t
	for t in $TOOLS; do
		run complete_words "$t" --
		assert_success
		diff -u <(help_long_options "$t") <(printf '%s\n' "$output" | sorted) ||
			fail "$t: completion (+) differs from --help (-)"
	done
}

@test "after a command, only the options that go with it are offered, in bash, zsh and fish" {
	run complete_words exec-inspect logs --s
	assert_output "$(printf '%s\n' --stderr --state-dir)"
	run complete_words exec-inspect list --s
	assert_output "$(printf '%s\n' --since --session --state-dir)"
	run complete_words exec-inspect --s             # no command yet: all of them
	assert_output "$(printf '%s\n' --since --session --stderr --state-dir)"
	run complete_words exec-shares capacity show --d   # a subcommand: its command's
	assert_output ''
	run complete_words exec-shares show --d
	assert_output --destination
	need_zsh_fish
	run both exec-inspect logs --s
	assert_output "$(want --stderr --state-dir)"
	run both exec-run wait --
	assert_output "$(want --slots --budget-ms --grace-ms --max-output --output-quota --timeout-ms \
		--isolation --guest-user --guest-writable --guest-network --allow-hook --require-isolation \
		--json --state-dir --help --version)"
}

@test "subcommands and their subcommands come from the command tables, list kinds from inspect.c" {
	run complete_words exec-session ''
	assert_output "$(printf '%s\n' open heartbeat close show report adopt backup compact)"
	run complete_words exec-inspect ''
	assert_output "$(printf '%s\n' lookup summary list show logs metrics relay ids)"
	run complete_words exec-inspect --json s
	assert_output "$(printf '%s\n' summary show)"
	run complete_words exec-run s
	assert_output "$(printf '%s\n' start supervise sweep)"
	run complete_words exec-shares capacity ''
	assert_output "$(printf '%s\n' set show)"
	run complete_words exec-inspect list r
	assert_output "$(printf '%s\n' retained refused running receipts)"
	run complete_words exec-inspect summary ''   # summary takes no operand
	assert_output ''
	run complete_words exec-inspect list a
	assert_output all
	run complete_words exec-dispatcher ''
	assert_output "$(printf '%s\n' submit backup)"
	run complete_words exec-dispatcher submit --cwd /u
	assert_output --partial /usr
	run complete_words exec-dispatcher submit --e
	assert_output --partial -- --env
}

@test "--outcome offers the outcomes, -o the columns of the table at hand, name after comma" {
	run complete_words exec-inspect list refused --outcome ''
	assert_output "$(printf '%s\n' exited killed timeout cancelled exec_failed)"
	run complete_words exec-inspect list receipts --outcome=ex
	assert_output "$(printf '%s\n' exited exec_failed)"
	run complete_words exec-inspect list refused -o ''
	assert_output "$(printf '%s\n' run_id incarnation session_id outcome exit_code chosen_at attempts refused_cause last_diag)"
	run complete_words exec-inspect list queued --columns run_id,d
	assert_output run_id,due_at
	run complete_words exec-inspect list running -o 'run_id,sup_pid,g'
	assert_output run_id,sup_pid,guest_pid
	run complete_words exec-session show -o l
	assert_output "$(printf '%s\n' last_beat lease)"
	# each list's columns are its table's header (printed over no rows too)
	start_dispatcher
	open_session
	local k
	for k in quarantined unknown retained refused orphaned queued running receipts; do
		run complete_words exec-inspect list "$k" -o ''
		[ "$output" = "$(exec-inspect list "$k" | head -1 | tr 'A-Z ' 'a-z\n' | grep .)" ] ||
			fail "list $k: completion offers $output"
	done
}

# help_commands TOOL [WORD]: the command words (after WORD) that the usage
# lines of TOOL --help name, split at '|', one a line, sorted.
help_commands() {
	usage_lines "$1" | awk -v t="$1" -v after="${2:-}" '{
		i = 1; if ($i == t) i++; if ($i == "[OPTION]...") i++
		if (after != "") { if ($i != after) next; i++ }
		if ($i ~ /^[a-z][a-z|-]*$/) { n = split($i, w, "|"); for (j = 1; j <= n; j++) print w[j] }
	}' | LC_ALL=C sort -u
}

@test "every command of a tool's table is completed, named in its --help, and run by it" {
	local t w words
	for t in exec-run exec-session exec-inspect exec-shares "exec-shares capacity" exec-dispatcher; do
		read -r -a words <<<"$t"
		run complete_words "${words[@]}" ''
		assert_success
		[ -n "$output" ] || fail "$t: no commands completed"
		diff -u <(help_commands "${words[@]}") <(printf '%s\n' "$output" | sorted) ||
			fail "$t: completion (+) differs from the usage lines of --help (-)"
		for w in $output; do
			run --separate-stderr "${words[@]}" "$w"
			[[ $stderr != *"unknown command"* ]] || fail "$t $w: $stderr"
		done
	done
}

@test "exec-inspect lookup <TAB> offers the run ids of a real state" {
	populate
	run complete_words exec-inspect lookup ''
	assert_success
	assert_equal "$(printf '%s\n' "$output" | sorted)" "$(printf '%s\n' kept1 new1 new2 old1 refused1)"
	run complete_words exec-inspect lookup n
	assert_equal "$(printf '%s\n' "$output" | sorted)" "$(printf '%s\n' new1 new2)"
	run complete_words exec-inspect show re
	assert_output refused1
	run complete_words exec-report ''          # retained results only
	assert_output kept1
	run complete_words exec-report kept1 ''   # RUN_ID... repeats
	assert_output kept1
	run complete_words exec-run cancel o      # old1 is another session's: not cancellable
	assert_output ''
	run complete_words exec-inspect ids ''
	assert_output "$(printf '%s\n' all queued running live retained)"
}

@test "each RUN_ID gets the runs that make sense for its word" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec ack1)"
	exec-run start --wait >/dev/null                      # delivered: only a receipt is left
	[ "$(exec-inspect list receipts --ids)" = ack1 ]
	submit_and_accept "$(spec run1 /bin/sleep '["3600"]')"
	exec-run start >/dev/null
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'run1'"'")" -gt 0 ]'
	submit_and_accept "$(spec q1 /bin/true '[]' '"due_at":9999999999999')"
	run complete_words exec-run cancel ''                 # queued and running runs of the current session
	assert_output "$(printf '%s\n' q1 run1)"
	run complete_words exec-run cancel q1 ''              # RUN_ID... repeats
	assert_output "$(printf '%s\n' q1 run1)"
	run complete_words exec-shares show ''
	assert_output run1
	run complete_words exec-run supervise ''              # queued ones
	assert_output q1
	run complete_words exec-inspect show ''               # every run, acknowledged included
	assert_output "$(printf '%s\n' ack1 q1 run1)"
	run complete_words exec-inspect show a
	assert_output ack1
	run complete_words exec-report ''                     # nothing retained
	assert_output ''
	exec-run cancel run1 --session "$(current_session)" >/dev/null
	exec-run wait --timeout-ms "$WAIT_MS" >/dev/null
}

@test "ids come from the state already matched to the word, at most 1000" {
	start_dispatcher
	open_session
	local i
	for i in $(seq 1 1005); do spec "b$i" /bin/true '[]' '"due_at":9999999999999'; done | exec-accept >/dev/null
	run complete_words exec-inspect show ''
	[ "${#lines[@]}" -eq 1000 ] || fail "offered ${#lines[@]} ids, want the first 1000"
	assert_equal "${lines[0]}" b1
	run complete_words exec-inspect show b100
	assert_equal "$(printf '%s\n' "$output" | sorted)" "$(printf '%s\n' b100 b1000 b1001 b1002 b1003 b1004 b1005)"
	run complete_words exec-inspect show 'b1 x'                # no run id has a blank
	assert_output ''
	run --separate-stderr exec-inspect ids everything b
	[ "$status" -eq "$EK_USAGE" ]
	[[ $stderr == *"unknown set of run ids 'everything'"* ]] || fail "$stderr"
}

@test "--store and --port-file complete file names" {
	mkdir -p "$BATS_TEST_TMPDIR/pick"
	touch "$BATS_TEST_TMPDIR/pick/d.db" "$BATS_TEST_TMPDIR/pick/port"
	run complete_words exec-dispatcher --store "$BATS_TEST_TMPDIR/pick/d"
	assert_output "$BATS_TEST_TMPDIR/pick/d.db"
	run complete_words exec-dispatcher --port-file "$BATS_TEST_TMPDIR/pick/p"
	assert_output "$BATS_TEST_TMPDIR/pick/port"
	run complete_words exec-dispatcher --port-file="$BATS_TEST_TMPDIR/pick/p"
	assert_output "$BATS_TEST_TMPDIR/pick/port"
}

@test "--session <TAB> offers the current session, in both spellings" {
	populate
	sid=$(current_session)
	[ -n "$sid" ]
	run complete_words exec-inspect lookup new1 --session ''
	assert_output "$sid"
	run complete_words exec-run cancel new1 --session=''
	assert_output "$sid"
	run complete_words exec-accept --session "${sid:0:6}"
	assert_output "$sid"
}

@test "exec-session adopt <TAB> offers the sessions of this state that have ended" {
	populate
	open_session                                       # a third: two have ended
	[ "$(sql "SELECT count(*) FROM sessions WHERE status <> 'current'")" = 2 ]
	run complete_words exec-session adopt ''
	assert_output "$(sql "SELECT session_id FROM sessions WHERE status <> 'current' ORDER BY seq")"
	refute_output --partial "$(current_session)"
}

@test "--state-dir on the command line wins over EXEC_STATE_DIR; no state offers nothing" {
	populate
	local dir=$EXEC_STATE_DIR
	export HOME=$BATS_TEST_TMPDIR/home XDG_STATE_HOME=$BATS_TEST_TMPDIR/xdg
	export EXEC_STATE_DIR=$BATS_TEST_TMPDIR/nothing-here
	run complete_words exec-inspect lookup ''
	assert_success
	assert_output ''
	run complete_words exec-inspect --state-dir "$dir" lookup o
	assert_output old1
	run complete_words exec-inspect --state-dir="$dir" show o
	assert_output old1
	run complete_words exec-inspect --state-dir "$dir" lookup old1 --session ''
	assert_output "$(EXEC_STATE_DIR=$dir current_session)"
}

@test "completing ids is read-only and offers every id" {
	populate
	local i before after
	for i in $(seq 1 300); do spec "bulk$i" /bin/true '[]' '"due_at":9999999999999'; done | exec-accept >/dev/null
	before=$(sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal 2>/dev/null)
	run complete_words exec-inspect lookup ''
	assert_success
	[ "${#lines[@]}" -eq 305 ] || fail "offered ${#lines[@]} ids, want 305"
	run complete_words exec-inspect lookup x --session ''
	after=$(sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal 2>/dev/null)
	assert_equal "$after" "$before"
}

@test "option values: directories for DIR, files for FILE, nothing for a number" {
	mkdir -p "$BATS_TEST_TMPDIR/pick/sub-dir"
	touch "$BATS_TEST_TMPDIR/pick/sub-file"
	run complete_words exec-inspect --state-dir "$BATS_TEST_TMPDIR/pick/sub"
	assert_output "$BATS_TEST_TMPDIR/pick/sub-dir"
	run complete_words exec-inspect metrics --output "$BATS_TEST_TMPDIR/pick/sub-f"
	assert_output "$BATS_TEST_TMPDIR/pick/sub-file"
	run complete_words exec-run start --slots ''
	assert_output ''
}

@test "destinations come from exec-shares, read-only: --destination, DIMENSION" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec s1 /bin/sleep '["3600"]' '"policy":{"destinations":["backup","mirror"]}')"
	exec-run start >/dev/null
	# guest_pid is the supervisor's last write until the guest exits;
	# "running" alone shows before the share join and the spawn are written.
	wait_until '[ "$(sql "SELECT IFNULL(guest_pid, 0) FROM runs WHERE run_id='"'s1'"'")" -gt 0 ]'
	local before
	before=$(sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal 2>/dev/null)
	run complete_words exec-shares show s1 --destination ''
	assert_equal "$(printf '%s\n' "$output" | sorted)" "$(printf '%s\n' backup mirror)"
	run complete_words exec-shares list d
	assert_equal "$(printf '%s\n' "$output" | sorted)" "$(printf '%s\n' dest:backup dest:mirror)"
	run complete_words exec-shares capacity set ''
	assert_equal "$(printf '%s\n' "$output" | sorted)" "$(printf '%s\n' dest:backup dest:mirror executor)"
	run complete_words exec-shares capacity set executor ''   # VALUE: a number
	assert_output ''
	assert_equal "$(sha256sum "$EXEC_STATE_DIR"/state.db "$EXEC_STATE_DIR"/state.db-wal 2>/dev/null)" "$before"
	exec-run cancel s1 --session "$(current_session)" >/dev/null
	exec-run wait --timeout-ms "$WAIT_MS" >/dev/null
}

@test "no destinations when exec-shares cannot tell: nothing, quietly" {
	export EXEC_STATE_DIR=$BATS_TEST_TMPDIR/none
	run --separate-stderr complete_words exec-shares show x --destination ''
	assert_success
	assert_output ''
	[ -z "$stderr" ]
}

# --- zsh and fish: the same data (gen-completion.sh --zsh, --fish) ---------

# both SHELL_complete WORD...: the zsh and the fish offers, each sorted, in
# one output: "zsh: X" and "fish: X" lines.
both() {
	zsh_complete "$@" | sorted | sed 's/^/zsh: /'
	fish_complete "$@" | sorted | sed 's/^/fish: /'
}

# want WORD...: the lines both() prints when each shell offers WORD...
want() {
	printf 'zsh: %s\n' "$@" | sorted
	printf 'fish: %s\n' "$@" | sorted
}

@test "the built zsh and fish completions are what the generator makes now, and parse" {
	need_zsh_fish
	diff <(sh "$SRC/build-aux/gen-completion.sh" --zsh "$SRC" "$BUILD") "$ZSH_COMPLETION"
	diff <(sh "$SRC/build-aux/gen-completion.sh" --fish "$SRC" "$BUILD") "$FISH_COMPLETION"
	zsh -n "$ZSH_COMPLETION"
	fish --no-execute "$FISH_COMPLETION"
	# zsh's #compdef line names every tool
	local t compdef
	compdef=$(head -n 1 "$ZSH_COMPLETION")
	[[ $compdef == "#compdef "* ]] || fail "first line: $compdef"
	for t in $TOOLS; do
		[[ "$compdef " == *" $t "* ]] || fail "#compdef does not name $t"
	done
}

@test "zsh and fish offer every long option of every tool's --help, and no other" {
	need_zsh_fish
	local t
	for t in $TOOLS; do
		diff -u <(help_long_options "$t") <(zsh_complete "$t" -- | sorted) ||
			fail "$t: zsh completion (+) differs from --help (-)"
		diff -u <(help_long_options "$t") <(fish_complete "$t" -- | sorted) ||
			fail "$t: fish completion (+) differs from --help (-)"
	done
}

@test "zsh and fish: an option is described by its --help line, and takes a value or not as there" {
	need_zsh_fish
	run zsh_complete exec-run --sl
	assert_output --slots
	run fish_complete_described exec-run --sl
	assert_output "--slots	$(exec-run --help | sed -n 's/^ *--slots N *//p')"
	run fish_complete_described exec-inspect -
	assert_line "-o	list: print only these columns, in this order"
	assert_line "--columns	list: print only these columns, in this order"
	run fish_complete exec-run --slots ''            # a number: nothing to offer
	assert_output ''
	run zsh_complete exec-run --slots ''
	assert_output ''
	run fish_complete exec-inspect --json s           # --json takes none: a subcommand follows
	assert_output "$(printf '%s\n' show summary)"
}

@test "zsh and fish: subcommands, list kinds, outcomes, columns after a comma" {
	need_zsh_fish
	run both exec-session ''
	assert_output "$(want open heartbeat close show report adopt backup compact)"
	run both exec-shares capacity ''
	assert_output "$(want set show)"
	run both exec-inspect --state-dir /nonexistent list r
	assert_output "$(want retained refused running receipts)"
	run both exec-inspect summary ''
	assert_output ''
	run both exec-inspect list receipts --outcome=ex
	assert_output "$(want exited exec_failed)"
	run both exec-inspect list refused -o ''
	assert_output "$(want run_id incarnation session_id outcome exit_code chosen_at attempts refused_cause last_diag)"
	run both exec-inspect list running -o run_id,sup_pid,g
	assert_output "$(want run_id,sup_pid,guest_pid)"
	run both exec-session show -o l
	assert_output "$(want last_beat lease)"
	run both exec-inspect ids ''
	assert_output "$(want all queued running live retained)"
}

@test "zsh and fish: run ids and sessions come from the state, --state-dir on the line first" {
	need_zsh_fish
	populate
	local dir=$EXEC_STATE_DIR sid
	sid=$(current_session)
	run both exec-inspect lookup ''
	assert_output "$(want kept1 new1 new2 old1 refused1)"
	run both exec-report ''                          # retained results only
	assert_output "$(want kept1)"
	run both exec-run cancel o                       # another session's: not cancellable
	assert_output ''
	run both exec-inspect lookup new1 --session ''
	assert_output "$(want "$sid")"
	export EXEC_STATE_DIR=$BATS_TEST_TMPDIR/nothing-here
	run both exec-inspect lookup ''
	assert_output ''
	run both exec-inspect --state-dir "$dir" show o
	assert_output "$(want old1)"
	run both exec-inspect --state-dir="$dir" show re
	assert_output "$(want refused1)"
}

@test "zsh and fish: file and directory names where the help names FILE or DIR" {
	need_zsh_fish
	mkdir -p "$BATS_TEST_TMPDIR/pick/sub-dir"
	touch "$BATS_TEST_TMPDIR/pick/sub-file"
	run fish_complete exec-inspect --state-dir "$BATS_TEST_TMPDIR/pick/sub"
	assert_output "$BATS_TEST_TMPDIR/pick/sub-dir/"
	run fish_complete exec-inspect metrics --output "$BATS_TEST_TMPDIR/pick/sub-f"
	assert_output "$BATS_TEST_TMPDIR/pick/sub-file"
	# zsh's _files and _directories add the name's last part
	run zsh_complete exec-inspect --state-dir "$BATS_TEST_TMPDIR/pick/sub"
	assert_output --partial sub-dir
	refute_output --partial sub-file
	run zsh_complete exec-inspect metrics --output "$BATS_TEST_TMPDIR/pick/sub-f"
	assert_output --partial sub-file
}
