#!/usr/bin/env bats
# Lints over the project's own shell: the scripts pass shellcheck, and no
# test hides an assertion where bats cannot see it fail.

load helpers

# A bare "! CMD" statement is exempt from errexit: in the middle of a test
# it can never fail it.  Allowed forms: "run ! CMD", "! CMD || fail ...",
# and a negation inside an if/while condition.
bare_negations() {
	grep -nE '^[[:space:]]*![[:space:]]' "$@" | grep -vE '\|\||&&' || true
}

@test "no test file holds a bare '! cmd' statement" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' -o -name '*.bash' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run bare_negations $files
	assert_output ''
}

@test "the bare-negation lint finds what it must" {
	printf '@test "x" {\n\t! grep -q a b\n\trun ! grep -q a b\n\t! grep a b || fail no\n}\n' >"$BATS_TEST_TMPDIR/t.bats"
	run bare_negations "$BATS_TEST_TMPDIR/t.bats"
	assert_output "2:	! grep -q a b"
}

@test "every shell script passes shellcheck" {
	cd "$SRC"
	run shellcheck -S warning cmd/exec-loop scripts/*.sh bench/*.sh build-aux/gen-completion.sh \
		build-aux/sql2c.sh tests/*.bash tests/drills/*.bash tests/drills/check-invariants \
		tests/drills/measure.sh tests/fuzz/build.sh .ci/run
	assert_success
}
