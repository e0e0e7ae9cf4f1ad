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

@test "make check runs the bats configure found, and says first when there was none" {
	[ "$(make_var BATS_LOG_COMPILER)" = "$(make_var BATS)" ]
	[ "$(make_var BATS)" != no ]
	# every test log waits for the check (make's database: its prerequisites;
	# not the TESTS= of a make check this test may run under)
	run bash -c 'MAKEFLAGS= MAKELEVEL= make -C "$1" -pq nothing 2>/dev/null |
		grep -E "^tests/(lint|exec-loop)\.log:"' _ "$BUILD"
	[ "${#lines[@]}" = 2 ]
	assert_line --index 0 --regexp ': .*\bcheck-bats\b'
	assert_line --index 1 --regexp ': .*\bcheck-bats\b'
	run make -s -C "$BUILD" check-bats BATS=no
	assert_failure
	assert_output --partial "make check: bats was not found when configure ran"
	run make -s -C "$BUILD" check-bats
	assert_success
	run grep -E '^AC_PATH_PROG\(\[BATS\], \[bats\]' "$SRC/configure.ac"
	assert_success
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

# doc_endpoints FILE: "METHOD PATTERN" for each row of the endpoint table
# (the "## Endpoints" section) of doc/protocol.md, {x} written as the
# route table's "*"; sorted.
doc_endpoints() {
	awk '/^## / { on = ($0 == "## Endpoints") } on && /^\| [A-Z]+ \| `/' "$1" |
		sed -E 's/^\| ([A-Z]+) \| `([^`]*)`.*/\1 \2/; s/\{[^}]*\}/*/g' | sort
}

# route_table FILE: "METHOD PATTERN" for each row of dispatcher/routes.c's
# routes[]; sorted.
route_table() {
	awk '/^} routes\[\] = \{/ { on = 1; next } on && /^};/ { on = 0 } on' "$1" |
		sed -nE 's/^[[:space:]]*\{ "([A-Z]+)", "([^"]*)", h_[a-z_]+(, [A-Z_0-9]+)* \},$/\1 \2/p' | sort
}

@test "doc/protocol.md's endpoint table is the dispatcher's route table" {
	doc_endpoints "$SRC/doc/protocol.md" >"$BATS_TEST_TMPDIR/doc"
	route_table "$SRC/dispatcher/routes.c" >"$BATS_TEST_TMPDIR/code"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/code")" -ge 20 ] || fail "route table not read: $(cat "$BATS_TEST_TMPDIR/code")"
	diff -u "$BATS_TEST_TMPDIR/code" "$BATS_TEST_TMPDIR/doc" ||
		fail "doc/protocol.md's endpoint table (+) differs from routes[] in dispatcher/routes.c (-)"
}

@test "a real dispatcher serves every endpoint of doc/protocol.md's table" {
	local m p out
	start_dispatcher
	while read -r m p; do
		# the admin token: /admin/ takes it, /v1/ answers 401 to it (any
		# answer but "no such endpoint" or "method not allowed" will do)
		out=$(admin "$m" "${p//\*/x}") || fail "$m $p: no answer"
		[[ $out != *'"error":"not_found"'* ]] || fail "$m $p: $out"
		[[ $out != *'"error":"method_not_allowed"'* ]] || fail "$m $p: $out"
	done < <(doc_endpoints "$SRC/doc/protocol.md")
	# and the check can fail: a path the dispatcher does not serve
	run admin GET /v1/nowhere
	assert_output --partial '"error":"not_found"'
}

@test "every path libcommon/protocol.h names is part of a route" {
	local name path
	route_table "$SRC/dispatcher/routes.c" | cut -d' ' -f2 >"$BATS_TEST_TMPDIR/patterns"
	while read -r name path; do
		grep -qF -- "$path" "$BATS_TEST_TMPDIR/patterns" || fail "$name $path: in no route"
	done < <(sed -nE 's/^#define (PROTO_[A-Z_]+) "(\/[^"]*)".*/\1 \2/p' "$SRC/libcommon/protocol.h")
	[ "$(sed -nE 's/^#define (PROTO_[A-Z_]+) "(\/[^"]*)".*/\1/p' "$SRC/libcommon/protocol.h" | wc -l)" -ge 10 ]
}

@test "the endpoint lints find what they must" {
	printf '## Endpoints\n\n| method | path |\n|---|---|\n| GET | `/a/{id}/b` | x |\n| POST | `/c` | y |\n\n## Next\n\n| GET | `/not/this` | z |\n' >"$BATS_TEST_TMPDIR/p.md"
	run doc_endpoints "$BATS_TEST_TMPDIR/p.md"
	assert_output "GET /a/*/b
POST /c"
	printf 'static const struct route {\n\tint x;\n} routes[] = {\n\t{ "POST", "/c", h_c, RK_OTHER, V1_MAX },\n\t{ "GET", "/a/*/b", h_ab },\n};\n\t{ "GET", "/after", h_no },\n' >"$BATS_TEST_TMPDIR/h.c"
	run route_table "$BATS_TEST_TMPDIR/h.c"
	assert_output "GET /a/*/b
POST /c"
}

# cited_paths FILE...: "FILE: PATH" for each path of the tree the files
# cite (a directory of the tree, then a name with a known extension),
# placeholders such as NAME and NNN left out.
cited_paths() {
	local f
	for f in "$@"; do
		grep -oE '(^|[^/A-Za-z0-9_.-])(doc|bench|libcommon|cmd|dispatcher|contrib|schema|scripts|tests|build-aux)/[A-Za-z0-9_./-]*\.(md|h|c|sh|bats|bash|sql|json|yml|png|service)\b' "$f" |
			sed -E 's/^[^a-z]//' | grep -vE 'NAME|NNN' | sort -u | sed "s|^|$f: |"
	done
}

@test "every file of the tree that README.md, HACKING.md and doc/*.md cite exists" {
	local f p n=0
	cd "$SRC"
	while IFS= read -r line; do
		f=${line%%: *} p=${line#*: }
		n=$((n + 1))
		[ -e "$p" ] || fail "$f cites $p, which does not exist"
	done < <(cited_paths README.md HACKING.md doc/*.md)
	[ "$n" -ge 100 ] || fail "only $n citations read"
}

# h2 FILE: the ## headings of FILE, outside code blocks.
h2() {
	awk '/^```/ { code = !code } !code && /^## / { sub(/^## /, ""); print }' "$1"
}

@test "README.md reads in order: what it is, install, quick start, daily use, then pointers" {
	run h2 "$SRC/README.md"
	assert_output "The tools
How it fits together
Install
Quick start
Daily use
Performance
Building and testing
Where to read on"
}

# perf_tables FILE: how many tables README's Performance section holds,
# and its rows that compare a before with an after ("→").
perf_tables() {
	awk '/^## / { on = ($0 == "## Performance") } on' "$1" |
		awk '/^\|---/ { t++ } /^\|.*→/ { print "before/after row: " substr($0, 1, 60) } END { print t + 0 " table(s)" }'
}

@test "README's Performance section is one table of current figures; the history is bench/README.md's" {
	run perf_tables "$SRC/README.md"
	assert_output "1 table(s)"
	grep -q "^## The README's figures, as they grew" "$SRC/bench/README.md"
}

@test "the README lints find what they must" {
	printf '## Performance\n\n| a | b |\n|---|---|\n| x | 1 → 2 |\n\n| c |\n|---|\n\n## Next\n\n| d |\n|---|\n' >"$BATS_TEST_TMPDIR/R.md"
	run perf_tables "$BATS_TEST_TMPDIR/R.md"
	assert_output "before/after row: | x | 1 → 2 |
2 table(s)"
	printf 'see doc/nowhere.md and `libcommon/db.h`, not /usr/share/doc/x.md or tests/exec-NAME.bats\n' >"$BATS_TEST_TMPDIR/C.md"
	run cited_paths "$BATS_TEST_TMPDIR/C.md"
	assert_output "$BATS_TEST_TMPDIR/C.md: doc/nowhere.md
$BATS_TEST_TMPDIR/C.md: libcommon/db.h"
	printf '## A\n```\n## not\n```\n## B\n' >"$BATS_TEST_TMPDIR/H.md"
	run h2 "$BATS_TEST_TMPDIR/H.md"
	assert_output "A
B"
}
