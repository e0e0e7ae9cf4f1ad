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

# "[ a ] && [ b ]" as a statement is exempt from errexit but for its last
# part: in the middle of a test a false "a" can never fail it (git's
# t/chainlint.pl finds the like).  A test's last statement is its status,
# so there it may stand; in a condition (then, do, ;) too.
and_lists() {
	awk 'FNR == 1 { pend = "" }
	{
		if (pend != "" && $0 !~ /^[ \t]*$/) { if ($0 !~ /^[ \t]*}/) print pend; pend = "" }
		if ($0 ~ /^[ \t]+\[\[? .*\]\]? *&& *\[\[? / && $0 !~ /\|\|/ && $0 !~ /(then|do|;)[ \t]*$/)
			pend = FILENAME ":" FNR ": " $0
	}' "$@"
}

@test "no test file holds an '[ a ] && [ b ]' list before its last statement" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run and_lists $files
	assert_output ''
}

@test "the and-list lint finds what it must" {
	printf '@test "x" {\n\t[ a ] && [ b ]\n\t[ c ] && [ d ] || fail no\n\tif [ e ] && [ f ]; then :; fi\n\t[ g ] && [ h ]\n}\n' >"$BATS_TEST_TMPDIR/t.bats"
	run and_lists "$BATS_TEST_TMPDIR/t.bats"
	assert_output "$BATS_TEST_TMPDIR/t.bats:2: 	[ a ] && [ b ]"
}

# copied_blocks FILE...: each run of 6 lines (trimmed; blank lines, comments
# and lone closers skipped) that stands in two of FILEs, with the second's
# line: a fixture or a helper written twice, where tests/helpers.bash is
# its one home.
copied_blocks() {
	awk -v W=6 'FNR == 1 { n = 0 }
	{
		l = $0
		gsub(/^[ \t]+|[ \t]+$/, "", l)
		if (l == "" || l ~ /^#/ || l ~ /^(}|fi|done|esac|SQL|EOF)$/) next
		buf[n % W] = l
		if (++n < W) next
		k = ""
		for (i = n - W; i < n; i++) k = k buf[i % W] "\n"
		if (!(k in first)) first[k] = FILENAME
		else if (first[k] != FILENAME && !(k in said)) { said[k] = 1; print FILENAME ":" FNR ": copied from " first[k] }
	}' "$@"
}

@test "no six lines are copied between test files (helpers.bash holds what they share)" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' -o -name '*.bash' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run copied_blocks $files
	assert_output ''
}

@test "the copied-block lint finds what it must" {
	local t=$BATS_TEST_TMPDIR
	printf 'f() {\n\ta\n\tb\n\n\t# c\n\tc\n\td\n\te\n\tf\n}\n' >"$t/a.bats"
	printf 'g() {\n  a\n  b\n  c\n  d\n  e\n  x\n}\n' >"$t/b.bats"
	printf 'f() {\n\ta\n\tb\n\tc\n\td\n\te\n}\n' >"$t/c.bats"
	run copied_blocks "$t/a.bats" "$t/b.bats" "$t/c.bats"
	assert_output "$t/c.bats:6: copied from $t/a.bats"
}

# literal_statuses FILE...: an exit status compared with a sysexits number
# written out (64 to 78): the tests name them, EK_USAGE and the like, from
# libcommon/err.h through sysexits.h (tests/helpers.bash).
literal_statuses() {
	grep -nE '(status"? *(-eq|-ne|==|!=) *"?|assert_failure +|run +-|rc"? *(-eq|-ne) *"?)(6[4-9]|7[0-8])\b' "$@" || true
}

@test "no test compares an exit status with a literal sysexits number" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' -o -name '*.bash' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run literal_statuses $files
	assert_output ''
}

@test "the literal-status lint finds what it must" {
	printf '\t[[ $status -eq %s ]]\n\trun -%s x\n\tassert_failure %s\n\t[ "$status" -eq "$EK_USAGE" ]\n\trun -1 x\n' 64 78 75 >"$BATS_TEST_TMPDIR/t.bats"
	run literal_statuses "$BATS_TEST_TMPDIR/t.bats"
	assert_line --index 0 --partial '1:'
	assert_line --index 1 --partial '2:'
	assert_line --index 2 --partial '3:'
	[ "${#lines[@]}" = 3 ]
}

@test "the tests' exit-status names are sysexits.h's numbers, every one of err.h's" {
	local ek ex want n=0
	while read -r ek ex; do
		want=$(sed -n "s/^#define[[:space:]]*${ex}[[:space:]]*\([0-9]*\).*/\1/p" /usr/include/sysexits.h)
		[ -n "$want" ] || fail "$ex is not in sysexits.h"
		[ "${!ek}" = "$want" ] || fail "$ek is '${!ek}', $ex is $want"
		n=$((n + 1))
	done < <(sed -n 's/^[[:space:]]*\(EK_[A-Z]*\) = \(EX_[A-Z]*\),.*/\1 \2/p' "$SRC/libcommon/err.h")
	[ "$n" -ge 10 ]
	[ "$EK_USAGE" = 64 ]
}

# own_dispatchers FILE...: a test file that starts an exec-dispatcher
# server itself (a line that calls it with --port, not through bats' run),
# where tests/helpers.bash is the one place that does (spawn_dispatcher,
# start_dispatcher_in, free_port): its port file, log, admin token and
# leak scan are the same in every test.
own_dispatchers() {
	grep -HnE '(^|[[:space:];(&|"/])exec-dispatcher"?[[:space:]]+(--port|--store)' "$@" |
		grep -vE '^[^:]*:[0-9]+:[[:space:]]*(run|complete_words)[[:space:]]' || true
}

@test "no test file but helpers.bash starts a dispatcher" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run own_dispatchers $files
	assert_output ''
	run own_dispatchers "$SRC/tests/helpers.bash"
	assert_output --partial 'exec-dispatcher --port "$port"'
}

@test "the own-dispatcher lint finds what it must" {
	printf '\t%s --port 0 --store x &\n\trun %s --port 70000\n\t"$B/%s" --store d &\n\t%s submit --port 1\n' exec-dispatcher{,,,} >"$BATS_TEST_TMPDIR/t.bats"
	run own_dispatchers "$BATS_TEST_TMPDIR/t.bats"
	assert_line --index 0 --partial '1:'
	assert_line --index 1 --partial '3:'
	[ "${#lines[@]}" = 2 ]
}

# text_reads FILE: each call of an execkit tool in the loop script FILE
# whose standard output it keeps (into a file of its work directory, or a
# $(...)) without asking for machine output: --json (doc/json.md's line
# form), --ids (one id a line) or --version.  A call whose text the loop
# only logs says so on the line before: "# text: WHY".  Lines a trailing
# backslash continues are one call.
text_reads() {
	awk '{
		line = $0
		while (line ~ /\\$/ && (getline more) > 0) line = substr(line, 1, length(line) - 1) more
		if (line ~ /"\$bindir\/exec-[a-z]+"/ && (line ~ /(^|[ \t])>"\$work\// || line ~ /\$\("\$bindir/) &&
		    line !~ / --(json|ids|version)( |$)/ && prev !~ /^[ \t]*# text: /)
			print FILENAME ":" NR ": " line
		prev = line
	}' "$1"
}

@test "exec-loop reads no tool's text: machine output wherever it reads a tool's output" {
	run text_reads "$SRC/cmd/exec-loop"
	assert_output ''
	# and the calls excused, whose text is logged as is, are these two
	run grep -A1 '^[[:space:]]*# text: ' "$SRC/cmd/exec-loop"
	[ "$(grep -c 'bindir/exec-' <<<"$output")" = 2 ]
	assert_output --partial '"$bindir/exec-run" "${iso_opts[@]}" isolation >'
	assert_output --partial '"$bindir/exec-session" open --dispatcher'
}

@test "the text-read lint finds what it must" {
	local t=$BATS_TEST_TMPDIR/loop
	cat >"$t" <<'LOOP'
	logged "$bindir/exec-session" heartbeat >"$work/beat"
	logged "$bindir/exec-session" heartbeat --json >"$work/beat"
	logged "$bindir/exec-run" start --chain \
		--slots 1 >"$work/started"
	x=$("$bindir/exec-inspect" summary)
	"$bindir/exec-run" wait 2>"$work/wait"
	# text: logged as is
	logged "$bindir/exec-session" open >"$work/open"
	logged "$bindir/exec-reconcile" --output-cap 1 >/dev/null
LOOP
	run text_reads "$t"
	assert_line --index 0 --partial "$t:1: "
	assert_line --index 1 --partial "$t:4: "
	assert_line --index 2 --partial "$t:5: "
	[ "${#lines[@]}" = 3 ]
}

# muted_assertions FILE...: an assertion whose failure '|| true' (or
# '|| :') swallows: a test, an assert_/refute_ helper or grep -q, then
# nothing but the mute.
muted_assertions() {
	grep -nE '^[[:space:]]*(\[\[? [^|]*|assert_[a-z_]*[^|]*|refute_[a-z_]*[^|]*|grep -q[^|]*)\|\|[[:space:]]*(true|:)[[:space:]]*$' "$@" || true
}

@test "no test mutes an assertion with '|| true'" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' -o -name '*.bash' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run muted_assertions $files
	assert_output ''
}

@test "the muted-assertion lint finds what it must" {
	printf '\t[ "$(x)" = 1 ] || true\n\tassert_output --partial y || :\n\tgrep -q z f || true\n\t[ -z "$p" ] || kill "$p" || true\n\tgrep -c z f || true\n' >"$BATS_TEST_TMPDIR/t.bats"
	run muted_assertions "$BATS_TEST_TMPDIR/t.bats"
	assert_line --index 0 --partial '1:'
	assert_line --index 1 --partial '2:'
	assert_line --index 2 --partial '3:'
	[ "${#lines[@]}" = 3 ]
}

# unused_make_vars MAKEFILE_AM FILE...: each Makefile variable the test
# FILEs read (make_var NAME) that the build does not use: Makefile.am
# refers to it ($(NAME), ${NAME}, @NAME@, "if NAME"), or it is one automake
# acts on (a _MANS, _PROGRAMS, _SCRIPTS or _DATA list, a _LOG_COMPILER) or
# an installation directory (...dir).  A test of a variable nothing uses
# checks nothing.
unused_make_vars() {
	local am=$1 name
	shift
	grep -ohE 'make_var [A-Za-z_][A-Za-z0-9_]*' "$@" | sort -u | while read -r _ name; do
		case $name in
		NAME | *dir | *_MANS | *_PROGRAMS | *_SCRIPTS | *_DATA | *_LOG_COMPILER) continue ;;
		esac
		grep -qE "[\$][({]${name}[)}]|@${name}@|^if ${name}\$" "$am" || echo "$name"
	done
}

@test "every Makefile variable a test reads is one the build uses" {
	local files
	files=$(find "$SRC/tests" -name '*.bats' -o -name '*.bash' | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run unused_make_vars "$SRC/Makefile.am" $files
	assert_output ''
}

@test "the unused-variable lint finds what it must" {
	local t=$BATS_TEST_TMPDIR
	printf 'USED = a\nUNUSED = b\nx_MANS = c\nif COND\nendif\nall: ; echo $(USED)\n' >"$t/Makefile.am"
	printf '\tmake_var %s\n' USED UNUSED x_MANS COND >"$t/t.bats"
	run unused_make_vars "$t/Makefile.am" "$t/t.bats"
	assert_output UNUSED
}

@test "every shell script passes shellcheck" {
	cd "$SRC"
	run shellcheck -S warning cmd/exec-loop scripts/*.sh bench/*.sh build-aux/gen-completion.sh \
		build-aux/sql2c.sh tests/*.bash tests/drills/*.bash tests/drills/check-invariants \
		tests/drills/measure.sh tests/fuzz/build.sh .ci/run
	assert_success
}

# Bats files too: their variables set elsewhere (SC2154) are not checked,
# since shellcheck does not follow `load` to the helpers, nor know the
# stderr and stderr_lines of bats' `run --separate-stderr`.
@test "every bats file passes shellcheck, but for variables set elsewhere" {
	cd "$SRC"
	run shellcheck -S warning -e SC2154 tests/*.bats tests/drills/*.bats
	assert_success
}

# The transition table of lifecycle.h: from its heading to the note after it.
lifecycle_table() {
	sed -n '/Transitions and the function that performs each/,/The delivery functions are in/p' "$1"
}

# Crash points named in the code (DIRS...) but missing from the table or
# from doc/recovery.md, one per line.
unlisted_points() {
	local table=$1 doc=$2 n
	shift 2
	for n in $(grep -rhoE 'crash_point\("[a-z-]+"\)' "$@" | sed -E 's/crash_point\("([a-z-]+)"\)/\1/' | sort -u); do
		grep -qE "(^|[^a-z-])$n([^a-z-]|$)" <(lifecycle_table "$table") || echo "$n: not in lifecycle.h"
		grep -qF -- "$n" "$doc" || echo "$n: not in doc/recovery.md"
	done
}

# Functions the table names that no source file (DIRS...) defines.
unknown_functions() {
	local table=$1 f
	shift
	for f in $(lifecycle_table "$table" | grep -oE '[a-z_]+\(\)' | tr -d '()' | sort -u); do
		grep -rqE "^$f\(" --include='*.c' "$@" || echo "$f"
	done
}

@test "every crash point is listed in lifecycle.h's table and in doc/recovery.md" {
	run unlisted_points "$SRC/libcommon/lifecycle.h" "$SRC/doc/recovery.md" "$SRC/cmd" "$SRC/libcommon" "$SRC/dispatcher"
	assert_output ''
}

@test "every function lifecycle.h's table names exists" {
	run unknown_functions "$SRC/libcommon/lifecycle.h" "$SRC/cmd" "$SRC/libcommon" "$SRC/dispatcher"
	assert_output ''
}

@test "the lifecycle lints find what they must" {
	mkdir -p "$BATS_TEST_TMPDIR/src"
	printf 'x\n * Transitions and the function that performs each:\n *   a  b  real_one()  point-a\n *   a  b  gone_one()  point-b\n * The delivery functions are in x\n' >"$BATS_TEST_TMPDIR/lc.h"
	printf 'int\nreal_one(void)\n{\n\tcrash_point("point-a");\n\tcrash_point("point-c");\n}\n' >"$BATS_TEST_TMPDIR/src/a.c"
	echo "point-a point-c" >"$BATS_TEST_TMPDIR/doc.md"
	run unknown_functions "$BATS_TEST_TMPDIR/lc.h" "$BATS_TEST_TMPDIR/src"
	assert_output gone_one
	run unlisted_points "$BATS_TEST_TMPDIR/lc.h" "$BATS_TEST_TMPDIR/doc.md" "$BATS_TEST_TMPDIR/src"
	assert_output "point-c: not in lifecycle.h"
}

# The layer of each libcommon module, from HACKING.md's table under "###
# libcommon by layer" ("| N | family | modules |"), as "module layer" lines.
layers() {
	awk '/^##/ { on = /^### libcommon by layer/ } on' "$1" |
		sed -n 's/^| \([1-6]\) | [^|]* | \([a-z_0-9 ]*\) |$/\1 \2/p' |
		while read -r n mods; do for m in $mods; do echo "$m $n"; done; done
}

# Includes that climb: "FILE includes MODULE (layer N above M)", one per
# line, for the C files given; the tools and the dispatcher are layer 7
# (the dispatcher's includes of its own headers: dispatcher_includes()).
climbing_includes() {
	local map=$1 f m n inc l
	shift
	for f in "$@"; do
		m=$(basename "${f%.*}")
		case $f in */libcommon/*) n=$(awk -v m="$m" '$1 == m { print $2 }' "$map") ;; *) n=7 ;; esac
		if [ -z "$n" ]; then echo "$f: module '$m' has no layer in HACKING.md"; continue; fi
		for inc in $(grep -oE '^#include "[a-z_0-9]+\.h"' "$f" | sed -E 's/.*"([a-z_0-9]+)\.h"/\1/'); do
			case $inc in config | schema_sql | "$m") continue ;; esac
			# a dispatcher file's own headers are found beside it first, as the
			# compiler finds them (dispatcher/http.h before libcommon's)
			case $f in */dispatcher/*) [ ! -f "${f%/*}/$inc.h" ] || continue ;; esac
			l=$(awk -v m="$inc" '$1 == m { print $2 }' "$map")
			[ -n "$l" ] || { echo "$f: includes '$inc.h', which has no layer in HACKING.md"; continue; }
			[ "$l" -le "$n" ] || echo "$f includes $inc (layer $l above $n)"
		done
	done
}

@test "no C file includes a module above it in HACKING.md's layer order" {
	layers "$SRC/HACKING.md" >"$BATS_TEST_TMPDIR/layers"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/layers")" -gt 30 ]
	run climbing_includes "$BATS_TEST_TMPDIR/layers" "$SRC"/libcommon/*.[ch] "$SRC"/cmd/*.c "$SRC"/dispatcher/*.[ch]
	assert_output ''
}

@test "the layer lint finds what it must" {
	printf '### libcommon by layer\n\n| 1 | base | low |\n| 2 | up | high |\n\n### Next\n\n| 1 | not this | stray |\n' >"$BATS_TEST_TMPDIR/H.md"
	layers "$BATS_TEST_TMPDIR/H.md" >"$BATS_TEST_TMPDIR/layers"
	mkdir "$BATS_TEST_TMPDIR/libcommon"
	printf '#include "high.h"\n' >"$BATS_TEST_TMPDIR/libcommon/low.c"
	printf '#include "low.h"\n' >"$BATS_TEST_TMPDIR/libcommon/high.c"
	printf '#include "low.h"\n' >"$BATS_TEST_TMPDIR/libcommon/stray.c"
	# a dispatcher file: its own header beside it is not libcommon's
	mkdir "$BATS_TEST_TMPDIR/dispatcher"
	printf '#include "high.h"\n#include "nosuch.h"\n#include "own.h"\n' >"$BATS_TEST_TMPDIR/dispatcher/d.c"
	: >"$BATS_TEST_TMPDIR/dispatcher/own.h"
	run climbing_includes "$BATS_TEST_TMPDIR/layers" "$BATS_TEST_TMPDIR"/libcommon/{low,high,stray}.c \
		"$BATS_TEST_TMPDIR/dispatcher/d.c"
	assert_output "$BATS_TEST_TMPDIR/libcommon/low.c includes high (layer 2 above 1)
$BATS_TEST_TMPDIR/libcommon/stray.c: module 'stray' has no layer in HACKING.md
$BATS_TEST_TMPDIR/dispatcher/d.c: includes 'nosuch.h', which has no layer in HACKING.md"
}

# The layer of each dispatcher file, from HACKING.md's table under "### The
# dispatcher by layer" ("| N | family | files |"), as "file layer" lines.
dispatcher_layers() {
	awk '/^##/ { on = /^### The dispatcher by layer/ } on' "$1" |
		sed -n 's/^| \([1-9][0-9]*\) | [^|]* | \([a-z_0-9 ]*\) |$/\1 \2/p' |
		while read -r n files; do for f in $files; do echo "$f $n"; done; done
}

# The dispatcher's includes that do not go down: "FILE includes NAME.h
# (layer N, not below M)", for the dispatcher's .c and .h files given.  A
# file includes its own header and those of the layers below its own,
# never one of its own layer (the order is strict, as for the calls).  A
# quoted include names a dispatcher header when the including file's
# directory holds one of that name, as the compiler looks there first;
# any other is libcommon's (climbing_includes() checks those).
dispatcher_includes() {
	local map=$1 f m n inc l
	shift
	for f in "$@"; do
		m=$(basename "${f%.*}")
		n=$(awk -v m="$m" '$1 == m { print $2 }' "$map")
		if [ -z "$n" ]; then echo "$f: no layer in HACKING.md"; continue; fi
		for inc in $(sed -nE 's/^#include "([a-z_0-9]+)\.h".*/\1/p' "$f"); do
			if [ "$inc" = "$m" ] || [ ! -f "${f%/*}/$inc.h" ]; then continue; fi
			l=$(awk -v m="$inc" '$1 == m { print $2 }' "$map")
			if [ -z "$l" ]; then echo "$f: includes '$inc.h', which has no layer in HACKING.md"; continue; fi
			[ "$l" -lt "$n" ] || echo "$f includes $inc.h (layer $l, not below $n)"
		done
	done
}

# layer_map EXT: HACKING.md's dispatcher layers into $BATS_TEST_TMPDIR/layers
# ("FILE LAYER" lines), each FILE.EXT there in dispatcher/.
layer_map() {
	local f n
	dispatcher_layers "$SRC/HACKING.md" >"$BATS_TEST_TMPDIR/layers"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/layers")" -ge 15 ] || fail "HACKING.md draws fewer than 15 dispatcher files"
	while read -r f n; do
		[ -f "$SRC/dispatcher/$f.$1" ] || fail "HACKING.md's layer $n names $f.$1, which is not in dispatcher/"
	done <"$BATS_TEST_TMPDIR/layers"
}

@test "every dispatcher file includes only headers of the layers below its own in HACKING.md's order" {
	layer_map h
	run dispatcher_includes "$BATS_TEST_TMPDIR/layers" "$SRC"/dispatcher/*.[ch]
	assert_output ''
}

@test "the dispatcher's include lint finds what it must" {
	local d=$BATS_TEST_TMPDIR/d
	printf '### The dispatcher by layer\n\n| 2 | base | low peer |\n| 10 | up | high |\n\n### Next\n\n| 1 | not this | stray |\n' >"$BATS_TEST_TMPDIR/H.md"
	dispatcher_layers "$BATS_TEST_TMPDIR/H.md" >"$BATS_TEST_TMPDIR/layers"
	mkdir "$d"
	touch "$d"/{low,high,peer,stray,extra}.h
	# up (layer 10 above 2: numbers, not strings), within the layer, a
	# header with no row; not: its own header, a header not beside it
	# (libcommon's), a header down, a commented or indented line
	printf '#include "low.h"\n#include "clock.h"\n#include "high.h"\n#include "peer.h"\n#include "extra.h"\n/* #include "high.h" */\n' >"$d/low.c"
	printf '#include "high.h"\n#include "peer.h"\n#include "low.h"\n' >"$d/high.c"
	printf '#include "high.h"\n' >"$d/low.h"
	printf '#include "low.h"\n' >"$d/stray.c"
	run dispatcher_includes "$BATS_TEST_TMPDIR/layers" "$d"/{low,high,stray}.c "$d"/low.h
	assert_output "$d/low.c includes high.h (layer 10, not below 2)
$d/low.c includes peer.h (layer 2, not below 2)
$d/low.c: includes 'extra.h', which has no layer in HACKING.md
$d/stray.c: no layer in HACKING.md
$d/low.h includes high.h (layer 10, not below 2)"
}

# Calls that do not go down: "FILE uses NAME (DEF, layer N, not below M)",
# once per file and name, for the dispatcher's C files given (a file of
# the same layer is not below: the order is strict, so that no two files
# call each other around a circle): every name of a function
# another of them defines (not static: the type on a line of its own and
# the name at the start of the next, or a one-line definition), used
# anywhere in a file's code, comments and strings aside (a handler named
# in a table is used as much as one called).  With "-" for the map: the
# names it reads as defined, one a line.
climbing_calls() {
	local map=$1 prog
	shift
	prog='
	function base(p) { sub(/.*\//, "", p); sub(/\.c$/, "", p); return p }
	# the line without its comments, strings and characters (state kept
	# in incomment across lines)
	function code(s,    out, c, i, q) {
		out = ""
		for (i = 1; i <= length(s); i++) {
			c = substr(s, i, 1)
			if (incomment) {
				if (c == "*" && substr(s, i + 1, 1) == "/") { incomment = 0; i++ }
				continue
			}
			if (c == "/" && substr(s, i + 1, 1) == "*") { incomment = 1; i++; out = out " "; continue }
			if (c == "\"" || c == "\047") {
				q = c
				for (i++; i <= length(s) && substr(s, i, 1) != q; i++)
					if (substr(s, i, 1) == "\\") i++
				out = out " "
				continue
			}
			out = out c
		}
		gsub(/goto[ \t]+[A-Za-z_][A-Za-z_0-9]*/, " ", out)   # a label is no use
		sub(/^[A-Za-z_][A-Za-z_0-9]*:/, " ", out)
		return out
	}
	BEGIN {
		while (map != "" && (getline line < map) > 0) { split(line, w, " "); layer[w[1]] = w[2] }
	}
	FNR == 1 {
		f = base(FILENAME); prev = ""; incomment = 0
		if (pass == 2 && !(f in layer)) print FILENAME ": no layer in HACKING.md"
	}
	pass == 1 {   # the definitions, then (pass 2) the uses
		n = ""
		if ($0 ~ /^[a-z][a-z_0-9]*\(/ && prev !~ /^static/ && $0 !~ /;$/) {
			n = $0; sub(/\(.*/, "", n)
		} else if ($0 ~ /^[a-z][a-z_0-9 ]*[ *][a-z][a-z_0-9]*\(.*\{.*\}$/ && $0 !~ /^static/) {
			n = $0; sub(/\(.*/, "", n); sub(/.*[ *]/, "", n)
		}
		if (n != "") def[n] = f
		if (n != "" && map == "") print n
		prev = $0
		next
	}
	{
		s = code($0)
		while (match(s, /[A-Za-z_][A-Za-z_0-9]*/)) {
			n = substr(s, RSTART, RLENGTH)
			s = substr(s, RSTART + RLENGTH)
			if (!(n in def) || def[n] == f || (f SUBSEP n) in seen) continue
			if ((f in layer) && (def[n] in layer) && layer[def[n]] + 0 >= layer[f] + 0) {
				seen[f, n] = 1
				print FILENAME " uses " n " (" def[n] ".c, layer " layer[def[n]] ", not below " layer[f] ")"
			}
		}
	}'
	if [ "$map" = - ]; then
		awk -v map= "$prog" pass=1 "$@"
	else
		awk -v map="$map" "$prog" pass=1 "$@" pass=2 "$@"
	fi
}

@test "every dispatcher file calls only into the layers below its own in HACKING.md's order" {
	layer_map c
	run climbing_calls "$BATS_TEST_TMPDIR/layers" "$SRC"/dispatcher/*.c
	assert_output ''
}

# The definitions the lint reads are the functions the objects define, if
# the build has them: a definition written another way would escape it.
@test "the dispatcher's layer lint reads every function its objects define" {
	local objs
	objs=$(find "$BUILD/dispatcher" -name '*.o' 2>/dev/null | sort)
	[ -n "$objs" ] || skip "no objects in $BUILD/dispatcher"
	# shellcheck disable=SC2086 # a list of paths without blanks
	nm -g --defined-only $objs | awk '$2 == "T" { print $3 }' | sort >"$BATS_TEST_TMPDIR/nm"
	climbing_calls - "$SRC"/dispatcher/*.c | sort >"$BATS_TEST_TMPDIR/src"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/src")" -ge 80 ]
	diff -u "$BATS_TEST_TMPDIR/nm" "$BATS_TEST_TMPDIR/src" ||
		fail "the objects' functions (-) differ from those the lint reads (+)"
}

@test "the dispatcher's layer lint finds what it must" {
	local d=$BATS_TEST_TMPDIR/d
	printf '### The dispatcher by layer\n\n| 2 | base | low peer |\n| 10 | up | high |\n\n### Next\n\n| 1 | not this | stray |\n' >"$BATS_TEST_TMPDIR/H.md"
	dispatcher_layers "$BATS_TEST_TMPDIR/H.md" >"$BATS_TEST_TMPDIR/layers"
	mkdir "$d"
	# a call up (layer 10 above 2: numbers, not strings), a function named
	# as a value, a call within the layer; not: a call down, a name in a
	# comment or a string, a label, another file's static function (the
	# heredocs lose their tabs: a column-0 body line must not read as a
	# definition)
	cat >"$d/low.c" <<-'EOF'
	/* high_fn() is high.c's, "quoted" */
	int
	low_fn(void)
	{
	if (helper("high_other(), '\"' /*"))
	goto done;
	return high_fn() + f(high_other) + peer_fn();
	done:
	return 0;
	}
	EOF
	cat >"$d/high.c" <<-'EOF'
	int
	high_fn(void)
	{
	return low_fn();
	}

	int high_other(int x) { return x; }

	int
	done(void)
	{
	return 0;
	}

	static int
	helper(const char *s)
	{
	return 0;
	}
	EOF
	printf 'int\nstray_fn(void)\n{\n\treturn 0;\n}\n' >"$d/stray.c"
	printf 'int\npeer_fn(void)\n{\n\treturn 0;\n}\n' >"$d/peer.c"
	run climbing_calls "$BATS_TEST_TMPDIR/layers" "$d"/{low,high,stray,peer}.c
	assert_output "$d/low.c uses high_fn (high.c, layer 10, not below 2)
$d/low.c uses high_other (high.c, layer 10, not below 2)
$d/low.c uses peer_fn (peer.c, layer 2, not below 2)
$d/stray.c: no layer in HACKING.md"
}

# The fault injector is a hook of the route layer (routes.c), taken only
# while a fault is queued: no handler takes a request's fault itself.
fault_takers() {
	grep -lE '\bfault_take\(' "$@" | sed 's#.*/##' | grep -vxE 'faults\.c|routes\.c' || true
}

@test "only routes.c takes a request's fault" {
	run fault_takers "$SRC"/dispatcher/*.c
	assert_output ''
	printf '\trq->fault = fault_take(rq->path);\n' >"$BATS_TEST_TMPDIR/work.c"
	run fault_takers "$BATS_TEST_TMPDIR/work.c" "$SRC"/dispatcher/routes.c
	assert_output work.c
}

# SQLite builds an ephemeral index for a CHECK's IN list each time a
# statement checks it (schema/001_init.sql says what that cost).
@test "no schema CHECK tests a column against an IN list" {
	run grep -nE 'CHECK *\( *[a-z_]+ +IN\b' "$SRC"/schema/*.sql "$SRC"/schema/dispatcher/*.sql
	assert_output ''
}

# A function that fails returns -1 with its ek_err filled (err.h); any
# other negative value is a sentinel its callers must know by number
# (runlog.c's "-2: stopped" was one).  An out-parameter or a named
# constant says it instead.
magic_returns() {
	grep -nE 'return -[2-9][0-9]*;|[=!]= -[2-9][0-9]*\b' "$@" || true
}

@test "no C function returns a numbered negative sentinel" {
	run magic_returns "$SRC"/libcommon/*.[ch] "$SRC"/cmd/*.[ch] "$SRC"/dispatcher/*.[ch]
	assert_output ''
}

@test "the sentinel lint finds what it must" {
	printf 'int f(void)\n{\n\treturn -2;\n}\nint g(int fd)\n{\n\treturn fd == -3 ? 0 : -1;\n}\n' >"$BATS_TEST_TMPDIR/s.c"
	run magic_returns "$BATS_TEST_TMPDIR/s.c"
	assert_output "3:	return -2;
7:	return fd == -3 ? 0 : -1;"
}

# One atomic writer (file.c): every whole file put in place under a name,
# bytes or a second link, goes through file_replace_at() or file_link_at(),
# whose one rename syncs the directory when asked to be durable.  A rename
# or a link anywhere else is a second dance with its own guarantee.  The
# supervisor log's rotation (svlog.c) renames a log aside, replacing
# nothing a reader needs whole.
second_writers() {
	grep -nE '\b(renameat2?|rename|linkat|link)\(' "$@" | grep -v '^[^:]*svlog\.c:.*SVLOG_FILE' || true
}

@test "only file.c puts a file in place by rename or link" {
	local c
	c=$(find "$SRC"/libcommon "$SRC"/cmd "$SRC"/dispatcher -name '*.c' ! -name file.c | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run second_writers $c
	assert_output ''
}

@test "the one-writer lint finds what it must" {
	printf 'int f(void)\n{\n\tif (linkat(a, b, c, d, 0) < 0)\n\t\treturn -1;\n\treturn renameat(c, d, c, b);\n}\n' >"$BATS_TEST_TMPDIR/w.c"
	run second_writers "$BATS_TEST_TMPDIR/w.c"
	assert_output "3:	if (linkat(a, b, c, d, 0) < 0)
5:	return renameat(c, d, c, b);"
}

# The endpoints' paths are named once, in libcommon/protocol.h, and the
# dispatcher's route table (dispatcher/routes.c's routes[] rows) spells its
# patterns out; a path written anywhere else in C is a copy that can drift.
# Help text (a line that is a string only) may name them for people.
path_literals() {
	grep -HnE '"[^"]*/(v1|admin)/|"/(heartbeat|work|receipts|adoptions|handback|inspections)"' "$@" |
		grep -vE '^[^:]*:[0-9]+:[[:space:]]*(\{ "[A-Z]+", "/|")' || true
}

@test "no C file but protocol.h writes an endpoint's path" {
	local c
	c=$(find "$SRC"/libcommon "$SRC"/cmd "$SRC"/dispatcher -name '*.[ch]' ! -name protocol.h | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run path_literals $c
	assert_output ''
}

@test "the path lint finds what it must" {
	printf '\t{ "GET", "/v1/x", h_x },\n\tsnprintf(p, n, "/v1/sessions/%%s/work", sid);\n\t"  help: /admin/ requests\\n"\n\treturn session_call(st, o, "POST", "/heartbeat", b);\n' >"$BATS_TEST_TMPDIR/p.c"
	run path_literals "$BATS_TEST_TMPDIR/p.c"
	assert_output "$BATS_TEST_TMPDIR/p.c:2:	snprintf(p, n, \"/v1/sessions/%s/work\", sid);
$BATS_TEST_TMPDIR/p.c:4:	return session_call(st, o, \"POST\", \"/heartbeat\", b);"
}

# One hex check (text.h: text_is_hex, text_is_xdigits): an id's or a
# key's digits were checked three ways in three places.  The digits'
# alphabet as a whole string anywhere else is another copy (wire.c's
# chunk sizes and address literals have their own alphabets).
hex_copies() {
	grep -HnE '"0123456789abcdef(ABCDEF)?"' "$@" || true
}

@test "no C file but text.c checks hex digits itself" {
	local c
	c=$(find "$SRC"/libcommon "$SRC"/cmd "$SRC"/dispatcher -name '*.[ch]' ! -name text.c | sort)
	# shellcheck disable=SC2086 # a list of paths without blanks
	run hex_copies $c
	assert_output ''
}

@test "the hex lint finds what it must" {
	printf '\tif (strspn(s, "0123456789abcdef") != 64)\n\tif (!strchr("0123456789abcdefABCDEF", c))\n\tn = strspn(h, "0123456789abcdefABCDEF:.");\n' >"$BATS_TEST_TMPDIR/x.c"
	run hex_copies "$BATS_TEST_TMPDIR/x.c"
	assert_output "$BATS_TEST_TMPDIR/x.c:1:	if (strspn(s, \"0123456789abcdef\") != 64)
$BATS_TEST_TMPDIR/x.c:2:	if (!strchr(\"0123456789abcdefABCDEF\", c))"
}

# A request is made by libmicrohttpd's call into routes.c, and only
# there: work without one (the sweep) begins the store's transaction
# itself (store_begin()), where settle_sweep() once filled a struct req of
# its own to borrow the request layer's tx_begin().
made_requests() {
	grep -HnE '\bstruct req +[a-z_]+ *(;|=|\[|,)' "$@" | grep -v '^[^:]*/routes\.c:' || true
}

@test "no dispatcher file but routes.c makes a request" {
	run made_requests "$SRC"/dispatcher/*.[ch] "$SRC"/cmd/exec-dispatcher.c
	assert_output ''
}

@test "the made-request lint finds what it must" {
	printf '\tstruct req rq;\n\tstruct req *rq = p;\n\tstruct req fake = { 0 };\nint f(struct req *rq);\n' >"$BATS_TEST_TMPDIR/settle.c"
	run made_requests "$BATS_TEST_TMPDIR/settle.c"
	assert_output "$BATS_TEST_TMPDIR/settle.c:1:	struct req rq;
$BATS_TEST_TMPDIR/settle.c:3:	struct req fake = { 0 };"
}

# The store's mutexes are store.c's: a transaction is begun and ended
# through its store_begin*() and store_end() (or http.c's tx_*() around
# them), so that no file above keeps the lock by a path of its own
# (results.c unlocked it itself after a batch, past the write it left open).
store_lockers() {
	grep -HnE 'pthread_[a-z_]+\([^)]*store\.(peek_)?mu\b' "$@" | grep -v '^[^:]*/store\.c:' || true
}

@test "no dispatcher file but store.c takes or leaves the store's mutex" {
	run store_lockers "$SRC"/dispatcher/*.c "$SRC"/cmd/exec-dispatcher.c
	assert_output ''
}

@test "the store-mutex lint finds what it must" {
	printf '\tpthread_mutex_unlock(&dsp.store.mu);\n\tif (pthread_mutex_trylock(&dsp_store.peek_mu) != 0)\n\t/* dsp.store.mu guards it */\n' >"$BATS_TEST_TMPDIR/results.c"
	cp "$BATS_TEST_TMPDIR/results.c" "$BATS_TEST_TMPDIR/store.c"
	run store_lockers "$BATS_TEST_TMPDIR/results.c" "$BATS_TEST_TMPDIR/store.c"
	assert_output "$BATS_TEST_TMPDIR/results.c:1:	pthread_mutex_unlock(&dsp.store.mu);
$BATS_TEST_TMPDIR/results.c:2:	if (pthread_mutex_trylock(&dsp_store.peek_mu) != 0)"
}

# The dispatcher's bottom layer (util.c, store.c) knows no request: it
# fills a struct ek_err and returns, and the request's layer (http.c's
# tx_begin(), tx_end(), internal()) turns that into an answer; store.c's
# tx_begin() used to answer 500 itself.
request_in_bottom() {
	grep -HnE 'struct req\b|\brq->|\b(fail|fail_over|internal|answer|respond|tx_begin|tx_read|tx_end)\(' "$@" |
		grep -vE '^[^:]*:[0-9]+:[[:space:]]*/?\*' || true   # a comment may name them
}

@test "the dispatcher's util.c and store.c know no request and answer none" {
	run request_in_bottom "$SRC"/dispatcher/util.c "$SRC"/dispatcher/store.c
	assert_output ''
}

@test "the dispatcher's bottom-layer lint finds what it must" {
	printf '/* tx_begin(): the request layer'"'"'s */\nint\ntx_begin(struct req *rq)\n{\n\tif (store_begin(&rq->e) < 0)\n\t\treturn internal(rq);\n\treturn sql_exec(e, "x", "");\n}\n' >"$BATS_TEST_TMPDIR/store.c"
	run request_in_bottom "$BATS_TEST_TMPDIR/store.c"
	assert_output "$BATS_TEST_TMPDIR/store.c:3:tx_begin(struct req *rq)
$BATS_TEST_TMPDIR/store.c:5:	if (store_begin(&rq->e) < 0)
$BATS_TEST_TMPDIR/store.c:6:		return internal(rq);"
}
