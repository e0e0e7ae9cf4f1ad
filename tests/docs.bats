#!/usr/bin/env bats
# The man pages say what the tools do: one page per tool and execkit(7),
# each with the sections an operator looks for, a SYNOPSIS that is the
# tool's --help usage, every long option of --help described, and the exit
# codes of --help listed.
#
# The SYNOPSIS rule.  The usage of a tool is the "Usage:" line of its
# --help and each following line that starts with blanks and the tool's
# name, "Usage:" removed.  The SYNOPSIS of its page is each text line of
# the SYNOPSIS section (roff requests such as .nf dropped) with the roff
# escapes \fB \fI \fR \fP \f(XX \f[..] \& removed, \- read as -, \(dq as ".
# Both sides have blanks collapsed to one space and none at the ends; they
# must be the same lines in the same order.

load helpers
load doclib

SECTIONS=("NAME" "SYNOPSIS" "DESCRIPTION" "OPTIONS" "EXIT STATUS" "ENVIRONMENT" "FILES" "EXAMPLES" "SEE ALSO")

@test "every tool has a section 1 page, and execkit(7) exists, with every section" {
	local t page s
	for page in $(for t in $TOOLS; do echo "$MANDIR/$t.1"; done) "$MANDIR/execkit.7"; do
		[ -f "$page" ] || fail "missing $page"
		t=$(basename "$page")
		grep -q "^\.TH $(echo "${t%.*}" | tr a-z A-Z) ${t##*.} " "$page" || fail "$t: no matching .TH"
		for s in "${SECTIONS[@]}"; do
			grep -qE "^\.SH \"?$s\"?\$" "$page" || fail "$t: no $s section"
		done
	done
}

@test "each SYNOPSIS is the tool's --help usage, line for line" {
	local t
	for t in $TOOLS; do
		diff -u <(usage_lines "$t") <(man_synopsis "$MANDIR/$t.1") ||
			fail "$t: SYNOPSIS of $t.1 (+) differs from '$t --help' (-)"
		[ -n "$(usage_lines "$t")" ] || fail "$t: no usage lines"
	done
}

@test "OPTIONS describes exactly the long options --help names" {
	local t
	for t in $TOOLS; do
		diff -u <(help_long_options "$t") <(man_long_options "$MANDIR/$t.1") ||
			fail "$t: OPTIONS of $t.1 (+) differs from '$t --help' (-)"
	done
}

@test "EXIT STATUS lists exactly the codes --help names" {
	local t
	for t in $TOOLS; do
		[ -n "$(help_exit_codes "$t")" ] || fail "$t --help names no exit code"
		diff -u <(help_exit_codes "$t") <(man_exit_codes "$MANDIR/$t.1") ||
			fail "$t: EXIT STATUS of $t.1 (+) differs from '$t --help' (-)"
	done
}

@test "execkit(7) lists every tool and every exit code of libcommon/err.h" {
	local t v page=$MANDIR/execkit.7
	for t in $TOOLS; do
		man_section "$page" DESCRIPTION | grep -q "^\.BR $t (1)\$" || fail "execkit.7 does not list $t"
		man_section "$page" "SEE ALSO" | grep -q "^\.BR $t (1)" || fail "execkit.7: SEE ALSO lacks $t"
	done
	[ -n "${!EK_*}" ]
	for v in ${!EK_*}; do
		man_exit_codes "$page" | grep -qx "${!v}" || fail "execkit.7: EXIT STATUS lacks $v (${!v})"
	done
	for t in "state directory" "run id" "session id" "binding" "quarantine" "acknowledged" "refused" "session over" "transient"; do
		grep -qi "$t" "$page" || fail "execkit.7 does not explain '$t'"
	done
}

@test "every page names execkit(7) in SEE ALSO, and pages it names exist" {
	local page ref
	for page in "$MANDIR"/*.1; do
		man_section "$page" "SEE ALSO" | grep -q '^\.BR execkit (7)' || fail "$(basename "$page"): no execkit(7)"
	done
	for page in "$MANDIR"/*.[17]; do
		for ref in $(man_section "$page" "SEE ALSO" | sed -n 's/^\.BR \(exec[a-z-]*\) (\([17]\)).*/\1.\2/p'); do
			[ -f "$MANDIR/$ref" ] || fail "$(basename "$page") refers to missing $ref"
		done
	done
}

@test "the pages format without a warning" {
	command -v groff >/dev/null || skip "groff is not installed"
	local page
	for page in "$MANDIR"/*.[17]; do
		run --separate-stderr groff -man -ww -z "$page"
		assert_success
		[ -z "$stderr" ] || fail "$(basename "$page"): $stderr"
	done
}

@test "every page is installed: man_MANS lists each, and only those" {
	local page installed
	installed=$(make_var man_MANS)
	for page in "$MANDIR"/*.[17]; do
		[[ " $installed " == *" man/$(basename "$page") "* ]] || fail "man_MANS does not install $(basename "$page")"
	done
	for page in $installed; do
		[ -f "$MANDIR/${page#man/}" ] || fail "man_MANS names $page, which doc/man/ does not hold"
	done
}

@test "exec-loop(1) names the shell its #! line runs, bash, and no other" {
	head -n 1 "$SRC/cmd/exec-loop" | grep -qx '#!/bin/bash'
	man_section "$MANDIR/exec-loop.1" DESCRIPTION | grep -q '^is a short bash script' ||
		fail "exec-loop.1 does not say bash"
	run grep -niE 'posix (sh|shell)|/bin/sh\b' "$MANDIR/exec-loop.1"
	assert_failure
}

@test "every tool page's ENVIRONMENT names EXEC_STATE_DIR; its FILES the state database" {
	local t
	for t in ${TOOLS/exec-dispatcher/}; do
		man_section "$MANDIR/$t.1" ENVIRONMENT | grep -q '^\.B EXEC_STATE_DIR$' || fail "$t.1: ENVIRONMENT"
		man_section "$MANDIR/$t.1" FILES | grep -q '^\.I STATE/state.db$' || fail "$t.1: FILES"
	done
}
