#!/usr/bin/env bats
# What every tool shares on its command line (libcommon/cli.c, suggest.c):
# one report per bad option, -V for --version, "did you mean" for a
# mistyped command, and the words an operator reads in the tools' lines.

load helpers
load doclib

# bad_option TOOL ARG... : TOOL rejects its command line with exactly one
# error line and one hint, and says nothing on stdout.
bad_option() {
	local t=$1
	shift
	run --separate-stderr "$t" "$@"
	[ "$status" -eq "$EK_USAGE" ] || fail "$t $*: exit $status, want $EK_USAGE"
	[ -z "$output" ] || fail "$t $*: stdout: $output"
	[ "${#stderr_lines[@]}" -eq 2 ] || fail "$t $*: ${#stderr_lines[@]} lines: $stderr"
	[[ ${stderr_lines[0]} == "$t: "* ]] || fail "$t $*: ${stderr_lines[0]}"
	[ "${stderr_lines[1]}" = "Try '$t --help' for more information." ] || fail "$t $*: ${stderr_lines[1]}"
}

@test "each unknown option is reported once, by every tool" {
	local t
	for t in $TOOLS; do
		bad_option "$t" --no-such-option
		[[ $stderr == *"--no-such-option"* ]] || fail "$t: $stderr"
		bad_option "$t" --no-such-option=3
	done
	for t in ${TOOLS/exec-loop/}; do   # exec-loop has no short options but -h and -V
		bad_option "$t" -Z
		[[ ${stderr_lines[0]} == *"invalid option -- 'Z'" ]] || fail "$t: $stderr"
	done
}

@test "a missing or an unwanted option argument is named as such" {
	bad_option exec-run --slots
	assert_equal "${stderr_lines[0]}" "exec-run: option '--slots' requires an argument"
	bad_option exec-inspect --help=yes
	assert_equal "${stderr_lines[0]}" "exec-inspect: option '--help' doesn't allow an argument"
	bad_option exec-loop --slots
	assert_equal "${stderr_lines[0]}" "exec-loop: option '--slots' requires an argument"
	bad_option exec-loop --no-adopt=yes
	assert_equal "${stderr_lines[0]}" "exec-loop: option '--no-adopt' doesn't allow an argument"
}

@test "-V is --version for every tool, and --help lists it" {
	local t v
	for t in $TOOLS; do
		v=$("$t" --version) || fail "$t --version failed"
		[[ $v =~ ^$t\ \(execkit\)\ [0-9] ]] || fail "$t --version: $v"
		run --separate-stderr "$t" -V
		assert_success
		assert_output "$v"
		"$t" --help | grep -qE '^  -V, --version +show the version and exit$' || fail "$t --help lacks -V"
	done
}

@test "a mistyped command gets git's 'did you mean', on stderr, exit 64" {
	local t word want
	while read -r t word want; do
		run --separate-stderr "$t" "$word"
		[ "$status" -eq "$EK_USAGE" ] || fail "$t $word: exit $status"
		[ -z "$output" ] || fail "$t $word: stdout $output"
		assert_equal "${stderr_lines[0]}" "$t: unknown command '$word'"
		assert_equal "${stderr_lines[1]}" "The most similar command is"
		assert_equal "${stderr_lines[2]}" "$(printf '\t%s' "$want")"
		assert_equal "${stderr_lines[3]}" "Try '$t --help' for more information."
	done <<-EOF
		exec-run strat start
		exec-run cancle cancel
		exec-session shwo show
		exec-session hearbeat heartbeat
		exec-inspect lst list
		exec-inspect sumary summary
		exec-shares capacty capacity
	EOF
}

@test "every command of a tool's table is suggested for its word less the last letter" {
	local t w
	need_completion
	for t in exec-run exec-session exec-inspect exec-shares; do
		for w in $(complete_words "$t" ''); do
			run --separate-stderr "$t" "${w%?}"
			[ "$status" -eq "$EK_USAGE" ] || fail "$t ${w%?}: exit $status"
			assert_equal "${stderr_lines[1]}" "The most similar command is"
			assert_equal "${stderr_lines[2]}" "$(printf '\t%s' "$w")"
		done
	done
}

@test "several equally close commands are all offered; a far word gets none" {
	run --separate-stderr exec-inspect s
	[ "$status" -eq "$EK_USAGE" ]
	assert_equal "${stderr_lines[1]}" "The most similar commands are"
	assert_equal "$(printf '%s\n' "${stderr_lines[@]:2:2}")" "$(printf '\t%s\n' summary show)"
	run --separate-stderr exec-run xyzzyplugh
	[ "$status" -eq "$EK_USAGE" ]
	assert_equal "$stderr" "$(printf '%s\n' "exec-run: unknown command 'xyzzyplugh'" \
		"Try 'exec-run --help' for more information.")"
}

@test "one attempt, one run: the tools' lines use the singular for 1" {
	ready p1
	run exec-run start --wait --slots 1
	assert_success
	assert_line --regexp '^p1 exited 0: delivered \(1 attempt\): '
	run exec-run sweep
	assert_output "0 runs became unknown, 0 finished runs tidied"
}

@test "exec-run start --wait says how many runs --slots left queued" {
	start_dispatcher
	open_session
	submit_and_accept "$(spec q1)" "$(spec q2)" "$(spec q3)" "$(spec q4 /bin/true '[]' '"due_at":9999999999999')"
	run exec-run start --wait --slots 1
	assert_success
	assert_line "started 1 run; 3 runs left queued (--slots 1)"
	run exec-run start --wait --slots 2
	assert_line "started 2 runs; 1 run left queued (--slots 2)"
	run exec-run start --json --wait --slots 2
	refute_output --partial "left queued"
}

@test "a delivery that failed says it was the delivery, not the run" {
	ready f1
	fault 5xx 10
	run exec-run start --wait --budget-ms "$WAIT_MS"
	assert_success
	assert_line --regexp '^f1 exited 0: delivery failed \(3 attempts\): transient: HTTP 503'
}

@test "an HTTP 503 is transient whatever its body, a proxy's page included" {
	ready h1
	admin POST /admin/faults \
		'{"kind":"lie","path":"/v1/results","status":503,"body":"<html>Service Unavailable</html>","count":3}' >/dev/null
	run exec-run start --wait --budget-ms "$WAIT_MS"
	assert_success
	assert_line "h1 exited 0: delivery failed (3 attempts): transient: HTTP 503: <html>Service Unavailable</html>"
	[ "$(sql "SELECT refused FROM results WHERE run_id='h1'")" = 0 ]
	run exec-report h1
	assert_success
	assert_output --partial "delivered h1 (1 attempt)"
}

# as_list WORD...: the words as a message lists them, "a, b or c".
as_list() {
	local out=$1
	shift
	while [ $# -gt 1 ]; do out+=", $1"; shift; done
	[ $# -eq 0 ] || out+=" or $1"
	printf '%s\n' "$out"
}

@test "a message's list of names is the code's own list: exec-inspect's commands, list kinds, outcomes" {
	local commands kinds outcomes
	# the commands: the ones its --help's usage lines run (docs.bats ties them to the page)
	commands=$(usage_lines exec-inspect | awk '{ print $3 }' | paste -sd' ')
	[ "$(wc -w <<<"$commands")" -ge 8 ] || fail "usage: $commands"
	run --separate-stderr exec-inspect
	[ "$status" -eq "$EK_USAGE" ]
	# shellcheck disable=SC2086 # words
	assert_equal "${stderr%%$'\n'*}" "exec-inspect: missing command ($(as_list $commands))"
	# the list kinds and the outcomes: the ones the completion offers, from inspect.c's lists
	kinds=$(complete_words exec-inspect list '' | paste -sd' ')
	[ "$(wc -w <<<"$kinds")" -ge 8 ] || fail "kinds: $kinds"
	run --separate-stderr exec-inspect list nope
	# shellcheck disable=SC2086
	assert_equal "${stderr%%$'\n'*}" "exec-inspect: unknown list 'nope' ($(as_list $kinds))"
	outcomes=$(complete_words exec-inspect list refused --outcome '' | paste -sd' ')
	[ "$(wc -w <<<"$outcomes")" -ge 5 ] || fail "outcomes: $outcomes"
	run --separate-stderr exec-inspect list refused --outcome nope
	# shellcheck disable=SC2086
	assert_equal "${stderr%%$'\n'*}" "exec-inspect: --outcome: 'nope' is not $(as_list $outcomes)"
}

# --- the option tables (libcommon/opts.c) -------------------------------------

# The tools whose options are a table: every one, the bash exec-loop too
# (its opt() rows).
TABLE_TOOLS=$TOOLS

# helper TOOL WHAT: the KEY<TAB>VALUE of TOOL --completion-helper's WHAT lines.
helper() {
	"$1" --completion-helper | awk -F '\t' -v w="$2" '$1 == w { print $2 "\t" $3 }'
}

# table_options TOOL: the options TOOL's table has, one a line, sorted.
table_options() {
	helper "$1" opts | awk -F '\t' -v t="$1" '$1 == t { print $2 }' | tr ' ' '\n' | LC_ALL=C sort
}

@test "every number option: a value out of its bounds or no number at all, one message in every tool" {
	local t opt min max word v n=0
	for t in $TABLE_TOOLS; do
		while IFS=$'\t ' read -r _ opt min max word; do
			[[ $opt == --* ]] || continue
			n=$((n + 1))
			for v in $((min - 1)) x 12x ''; do
				bad_option "$t" "$opt=$v"
				assert_equal "${stderr_lines[0]}" \
					"$t: $opt: '$v' is not a number from $min to $max${word:+, or $word}"
			done
			if [ "$max" != 9223372036854775807 ]; then
				bad_option "$t" "$opt" "$((max + 1))"
				assert_equal "${stderr_lines[0]}" \
					"$t: $opt: '$((max + 1))' is not a number from $min to $max${word:+, or $word}"
			fi
		done < <(helper "$t" bounds)
	done
	[ "$n" -ge 25 ] || fail "only $n number options in the tables"
}

@test "a number option takes its bounds and its word" {
	local t opt min max word
	for t in $TABLE_TOOLS; do
		while IFS=$'\t ' read -r _ opt min max word; do
			[[ $opt == --* ]] || continue
			for v in "$min" "$max" ${word:+"$word"}; do
				run --separate-stderr "$t" "$opt" "$v" --help
				[ "$status" -eq 0 ] || fail "$t $opt $v: $stderr"
			done
		done < <(helper "$t" bounds)
	done
}

@test "one bound where the tools share an option's meaning: --budget-ms of a delivery, --timeout-ms of a request" {
	assert_equal "$(helper exec-run bounds | grep -- '--budget-ms' | cut -f2)" "1 3600000"
	assert_equal "$(helper exec-report bounds | grep -- '--budget-ms' | cut -f2)" "1 3600000"
	local t
	for t in exec-accept exec-inspect exec-session; do
		assert_equal "$(helper "$t" bounds | grep -- '--timeout-ms' | cut -f2)" "1 3600000"
	done
}

@test "a word option: any other word is refused by the list of its words" {
	bad_option exec-inspect list refused --outcome nope
	assert_equal "${stderr_lines[0]}" \
		"exec-inspect: --outcome: 'nope' is not exited, killed, timeout, cancelled or exec_failed"
	bad_option exec-dispatcher --gate bogus
	assert_equal "${stderr_lines[0]}" "exec-dispatcher: --gate: 'bogus' is not adaptive or off"
	local w
	for w in $(helper exec-inspect words | awk -F '\t' '$1 == "exec-inspect --outcome" { print $2 }'); do
		run --separate-stderr exec-inspect --outcome "$w" --help
		[ "$status" -eq 0 ] || fail "--outcome $w: $stderr"
	done
}

@test "an age option: one message in every tool" {
	local t opt
	for t in "exec-inspect --since" "exec-reconcile --prune-receipts" "exec-reconcile --prune-records"; do
		read -r t opt <<<"$t"
		bad_option $t "$opt" 30
		assert_equal "${stderr_lines[0]}" "$t: $opt: '30' is not an age with its unit, like 30d, 12h, 90m or 3600s"
	done
}

# a_value DATA TOOL OPT: a value OPT takes, when it takes one, by TOOL's
# completion DATA: its lower bound, its first word, or one its
# metavariable describes.
a_value() {
	awk -F '\t' -v k="$2 $3" '
	$2 != k { next }
	$1 == "takes" { takes = 1 }
	$1 == "bounds" || $1 == "words" { split($3, v, " "); if (val == "") val = v[1] }
	$1 == "meta" { meta = $3 }
	END {
		if (!takes) exit
		if (meta == "URL") val = "http://127.0.0.1:9"
		if (meta == "AGE") val = "1d"
		print val == "" ? "x" : val
	}' <<<"$1"
}

@test "an option that goes with some commands only: refused with any other, in the table's words" {
	local t data path cmd opts opt v n=0 m=0
	for t in $TABLE_TOOLS; do
		data=$("$t" --completion-helper)
		while IFS=$'\t' read -r _ path opts; do
			[[ $path == "$t "* && $path != "$t "*" "* ]] || continue
			cmd=${path#"$t "}
			for opt in $(table_options "$t" | grep -- '^--'); do
				[[ $opt != --help && $opt != --version ]] || continue
				v=$(a_value "$data" "$t" "$opt")
				run --separate-stderr "$t" "$opt" ${v:+"$v"} "$cmd"
				if [[ " $opts " == *" $opt "* ]]; then
					m=$((m + 1))
					[[ $stderr != *"$opt goes with "*" only"* ]] || fail "$t $opt $cmd: $stderr"
				else
					n=$((n + 1))
					[ "$status" -eq "$EK_USAGE" ] || fail "$t $opt $cmd: exit $status"
					[[ ${stderr%%$'\n'*} =~ ^$t:\ $opt\ goes\ with\ [a-z]+(,\ [a-z]+)*(\ or\ [a-z]+)?\ only$ ]] ||
						fail "$t $opt $cmd: $stderr"
				fi
			done
		done < <(grep '^opts	' <<<"$data")
	done
	[ "$n" -ge 60 ] || fail "only $n options refused with a command"
	[ "$m" -ge 100 ] || fail "only $m options taken with a command"
}

@test "--help lists every option of the table, and no other" {
	local t
	for t in $TABLE_TOOLS; do
		diff -u <(table_options "$t" | grep -- '^--') <(help_long_options "$t") ||
			fail "$t: --help (+) differs from its table (-)"
		# a short letter is shown beside its long name
		while IFS=$'\t' read -r long short; do
			"$t" --help | grep -qE -- "^  $short, ${long#* }( |$)" || fail "$t --help: no '$short, ${long#* }'"
		done < <(helper "$t" short)
	done
}

@test "--completion-helper names only what the tool accepts: options, values and commands" {
	local t o arg path c unknown
	for t in $TABLE_TOOLS; do
		for o in $(table_options "$t"); do
			arg=()
			helper "$t" takes | grep -q "^$t $o	" && arg=(1)
			run --separate-stderr "$t" "$o" "${arg[@]}" --help
			[[ $stderr != *"unrecognized option"* && $stderr != *"invalid option"* &&
				$stderr != *"requires an argument"* && $stderr != *"allow an argument"* ]] ||
				fail "$t $o: $stderr"
			[ "$status" -eq 0 ] || [ "$status" -eq "$EK_USAGE" ] || fail "$t $o: exit $status"
		done
		# every command (and subcommand) it completes is one it runs: an
		# unknown word is an unknown command, or (a subcommand) its
		# command's usage error
		while IFS=$'\t' read -r path c; do
			unknown="unknown command"
			[ "$path" = "$t" ] || unknown="${path#* } needs"
			for c in $c; do
				# shellcheck disable=SC2086 # the path's words
				run --separate-stderr ${path} "$c"
				[[ $stderr != *"$unknown"* ]] || fail "$path $c: $stderr"
			done
		done < <(helper "$t" cmds)
	done
	# and it is never offered itself, nor shown in the help
	run --separate-stderr exec-run --help
	refute_output --partial completion-helper
}
