#!/bin/sh
# Install dependencies, build, and run the whole test suite twice: plainly
# and under AddressSanitizer + UndefinedBehaviorSanitizer.  The last line
# is the summary "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
scripts/deps.sh || exit 1

status=0
for variant in plain sanitizers; do
	dir=build
	flags=
	if [ "$variant" = sanitizers ]; then
		dir=build-san
		flags=--enable-sanitizers
	fi
	# shellcheck disable=SC2086 # flags is one optional word
	scripts/build.sh "$dir" $flags || { echo "build ($variant) failed"; status=1; continue; }
	echo "== test suite ($variant)"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		make -s -j3 -C "$dir" check >/dev/null 2>&1 || status=1
	for trs in "$dir"/tests/*.trs; do
		if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
			echo "--- failures in ${trs%.trs}.log"
			grep -vE '^ok ' "${trs%.trs}.log"
		fi
	done
done

echo "== make distcheck (the tarball builds and passes the contract tests)"
dist=0
make -s -C build distcheck TESTS=tests/contract.bats >build/distcheck.log 2>&1 || { dist=1; tail -20 build/distcheck.log; }

# Count test cases; a file that errored without failing a case counts once.
passed=0
failed=0
for trs in build/tests/*.trs build-san/tests/*.trs; do
	[ -f "$trs" ] || continue
	p=$(grep -cE '^:test-result: (PASS|XFAIL)' "$trs")
	f=$(grep -cE '^:test-result: (FAIL|XPASS)' "$trs")
	[ "$f" -eq 0 ] && grep -q '^:test-result: ERROR' "$trs" && f=1
	passed=$((passed + p))
	failed=$((failed + f))
done
if [ "$dist" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ] || status=1
echo "$passed passed, $failed failed"
exit "$status"
