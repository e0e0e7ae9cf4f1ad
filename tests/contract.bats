#!/usr/bin/env bats
# Every tool follows the shared conventions: --help and --version on
# stdout with exit 0 and nothing on stderr; an unknown option exits 64
# with stdout empty; the bash completion offers every long option of
# --help; the man page exists and matches --help (docs.bats has the rule).

load helpers
load doclib   # TOOLS, and what --help, the man page and the completion say

@test "--help prints usage on stdout, nothing on stderr, exit 0, in an empty environment too" {
	local keep=()   # a sanitized build's settings, nothing of execkit's
	[ -z "${ASAN_OPTIONS:-}" ] || keep+=("ASAN_OPTIONS=$ASAN_OPTIONS")
	[ -z "${UBSAN_OPTIONS:-}" ] || keep+=("UBSAN_OPTIONS=$UBSAN_OPTIONS")
	for t in $TOOLS; do
		run --separate-stderr env -i PATH="$PATH" "${keep[@]}" "$t" --help
		assert_success
		[[ "$output" == *"Usage: $t"* ]] || fail "$t --help in an empty environment: no usage line: $stderr"
		run --separate-stderr "$t" --help
		assert_success
		[[ "$output" == *"Usage: $t"* ]] || fail "$t --help: no usage line"
		[ -z "$stderr" ] || fail "$t --help wrote to stderr"
		run --separate-stderr "$t" -h
		assert_success
	done
}

@test "every line of every tool's --help fits 80 columns" {
	local t long
	for t in $TOOLS; do
		run --separate-stderr "$t" --help
		assert_success
		long=$(awk 'length($0) > 80 { printf "%d: %s\n", length($0), $0 }' <<<"$output")
		[ -z "$long" ] || fail "$t --help, lines over 80 columns: $long"
	done
}

@test "--version names the tool and the package" {
	for t in $TOOLS; do
		run --separate-stderr "$t" --version
		assert_success
		[[ "$output" =~ ^$t\ \(execkit\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$t --version: '$output'"
		[ -z "$stderr" ] || fail "$t --version wrote to stderr"
	done
}

@test "an unknown option exits 64 with a message and empty stdout" {
	for t in $TOOLS; do
		run --separate-stderr "$t" --no-such-option
		[ "$status" -eq "$EK_USAGE" ] || fail "$t: status $status"
		[ -z "$output" ] || fail "$t wrote to stdout"
		[[ "$stderr" == *"$t: "*"--no-such-option"* ]] || fail "$t stderr: $stderr"
		[[ "$stderr" == *"Try '$t --help'"* ]] || fail "$t: no hint"
		# said once: not getopt's message and then the tool's own
		[ "$(grep -c -- "--no-such-option" <<<"$stderr")" = 1 ] || fail "$t said it twice: $stderr"
	done
}

@test "the bash completion offers every long option of --help" {
	need_completion
	for t in $TOOLS; do
		run complete_words "$t" --
		assert_success
		for o in $(help_long_options "$t"); do
			assert_line "$o"
		done
	done
}

@test "each tool has a man page whose SYNOPSIS and OPTIONS match --help" {
	for t in $TOOLS; do
		[ -f "$MANDIR/$t.1" ] || fail "no man page $MANDIR/$t.1"
		diff -u <(usage_lines "$t") <(man_synopsis "$MANDIR/$t.1") || fail "$t.1: SYNOPSIS"
		diff -u <(help_long_options "$t") <(man_long_options "$MANDIR/$t.1") || fail "$t.1: OPTIONS"
	done
	[ -f "$MANDIR/execkit.7" ]
}
