#!/usr/bin/env bats
# Every tool follows the shared conventions: --help and --version on
# stdout with exit 0; an unknown option exits 64 with stdout empty.

load helpers

TOOLS="exec-session exec-accept exec-run exec-report exec-reconcile exec-inspect exec-shares exec-dispatcher exec-loop"

@test "--help prints usage on stdout, nothing on stderr, exit 0" {
	for t in $TOOLS; do
		run --separate-stderr "$t" --help
		assert_success
		[[ "$output" == *"Usage: $t"* ]] || fail "$t --help: no usage line"
		[ -z "$stderr" ] || fail "$t --help wrote to stderr"
		run --separate-stderr "$t" -h
		assert_success
	done
}

@test "--version names the tool and the package" {
	for t in $TOOLS; do
		run --separate-stderr "$t" --version
		assert_success
		[[ "$output" =~ ^$t\ \(execkit\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$t --version: '$output'"
	done
}

@test "an unknown option exits 64 with a message and empty stdout" {
	for t in $TOOLS; do
		run --separate-stderr "$t" --no-such-option
		[ "$status" -eq "$EK_USAGE" ] || fail "$t: status $status"
		[ -z "$output" ] || fail "$t wrote to stdout"
		[[ "$stderr" == *"$t: "*"--no-such-option"* ]] || fail "$t stderr: $stderr"
		[[ "$stderr" == *"Try '$t --help'"* ]] || fail "$t: no hint"
	done
}
