#!/bin/sh
# Install dependencies, build, and run the whole test suite twice: plainly
# and under AddressSanitizer + UndefinedBehaviorSanitizer.  The last line
# is the summary "N passed, N failed".
set -u
run_start=$(date +%s)
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
scripts/deps.sh || exit 1

# The tests' temporary files (every test's state directory, dispatcher
# store and logs) go on tmpfs when /dev/shm is one: the suite creates and
# removes files by the hundred thousand, and on an ext4 without a journal
# (these machines' root) each new file walks the inodes freed in the last
# minutes (bench/README.md, "The filesystem under the state"), so a run on
# /tmp slowed as it went.  The tests prove nothing about the disk itself.
# EXECKIT_TEST_TMPDIR names another place.
test_tmp=${EXECKIT_TEST_TMPDIR:-}
if [ -z "$test_tmp" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	test_tmp=$(mktemp -d /dev/shm/execkit-tests.XXXXXX) || exit 1
	trap 'rm -rf "$test_tmp"' EXIT
	# open to all, as /tmp is: a guest run as another user (--guest-user
	# nobody) executes from a directory the tests make in it
	chmod 1777 "$test_tmp" || exit 1
fi
[ -z "$test_tmp" ] || export TMPDIR="$test_tmp"

# The loaded run: the suites that once failed on a loaded machine (the
# drills that time a dispatcher, a session, a restart or a soak, the
# hostile and concurrent ones, exec-dispatcher and exec-shares) again on
# the plain build, in the background during the sanitizer pass: its four
# jobs of sanitized processes keep both cores busy, so the machine is
# loaded throughout by useful work.  The tests wait on events with
# generous bounds, so load only makes them slower; a failure here is a
# timing assumption that a loaded machine breaks.  The other drills run in
# both passes.  Two halves side by side: one bats in series outlasted the
# sanitizer pass, and ran on alone at the end.
loaded_pids=
start_loaded_run() {
	[ -x build/exec-run ] || return 0
	loaded_start=$(date +%s)
	start_loaded_half 1 tests/drills/dispatcher.bats tests/drills/session.bats tests/drills/soak.bats \
		tests/drills/restart.bats tests/drills/concurrency.bats tests/drills/hostile-guest.bats \
		tests/exec-shares.bats
	start_loaded_half 2 tests/exec-dispatcher.bats
}

start_loaded_half() {   # N FILE...: bats FILE... into build/loaded-N.tap; its end time in build/loaded-N.end
	n=$1
	shift
	rm -f "build/loaded-$n.end"
	{
		EXECKIT_BUILDDIR="$top/build" EXECKIT_SRCDIR="$top" DRILL_SEEDS=2 SOAK_KILLS=3 RESTART_STOPS=6 \
			bats --tap --timing "$@" >"build/loaded-$n.tap" 2>&1 </dev/null
		date +%s >"build/loaded-$n.end"
	} &
	loaded_pids="$loaded_pids $!"
}

# count_loaded TAP: add its cases to loaded_pass and loaded_fail; a plan
# not finished counts as one failure.
count_loaded() {
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$1" | head -1)
	p=$(grep -c '^ok ' "$1")
	f=$(grep -c '^not ok ' "$1")
	loaded_pass=$((loaded_pass + p))
	loaded_fail=$((loaded_fail + f))
	if [ -z "$planned" ] || [ $((p + f)) -ne "$planned" ]; then
		echo "--- the loaded run did not finish its plan ($1)"
		tail -20 "$1"
		loaded_fail=$((loaded_fail + 1))
	elif [ "$f" -gt 0 ]; then
		echo "--- failures in $1"
		grep -vE '^ok ' "$1"
	fi
}

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
	# Under the sanitizers every process is several times slower, and what
	# they look for (memory and undefined behaviour) is found on the first
	# pass through a path: the crash drills take fewer seeds there (the
	# plain run alone makes > 250 crashes), and the loop fewer stops (its
	# signal handling is the shell's; 200 stops in the plain run).
	seeds=14 kills=12 stops=200
	[ "$variant" = sanitizers ] && seeds=3 kills=3 stops=20
	[ "$variant" = sanitizers ] && start_loaded_run
	start=$(date +%s)
	DRILL_SEEDS=$seeds SOAK_KILLS=$kills LOOP_STOPS=$stops \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:handle_sigill=1 \
		make -s -j4 -C "$dir" check >/dev/null 2>&1 || status=1
	echo "   $(($(date +%s) - start)) s"
	for trs in "$dir"/tests/*.trs "$dir"/tests/drills/*.trs; do
		if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
			echo "--- failures in ${trs%.trs}.log"
			grep -vE '^ok ' "${trs%.trs}.log"
		fi
	done
done

# The crash drills' tally (tests/drills/crash-*.bats print it on fd 3).
for dir in build build-san; do
	[ -f "$dir/tests/drills/crash-run.log" ] || continue
	cat "$dir"/tests/drills/crash-*.log | awk -v d="$dir" '/^# crash point /{ p++; n += $(NF-3) }
		END { if (p) printf "== crash drills (%s): %d point runs, %d kill -9 crashes, 0 violations\n", d, p, n }'
done

# Fuzzing: each libFuzzer target (ASan + UBSan) for FUZZ_SECONDS (default
# 20), both at once, from the committed seeds; each target is one test case.
echo "== fuzzing (libFuzzer, ${FUZZ_SECONDS:-20} s per target)"
fuzz_pass=0
fuzz_fail=0
fuzz_targets="runspec classify wire"
if tests/fuzz/build.sh build/fuzz >build/fuzz.log 2>&1; then
	for t in $fuzz_targets; do
		rm -rf "build/fuzz/corpus/$t" && mkdir -p "build/fuzz/corpus/$t"
		"build/fuzz/fuzz_$t" -max_total_time="${FUZZ_SECONDS:-20}" -print_final_stats=1 \
			-artifact_prefix="build/fuzz/crash-$t-" "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
			>"build/fuzz/$t.log" 2>&1 &
		echo $! >"build/fuzz/$t.pid"
	done
	for t in $fuzz_targets; do
		if wait "$(cat "build/fuzz/$t.pid")"; then
			echo "fuzz_$t: $(sed -n 's/^stat::number_of_executed_units: *//p' "build/fuzz/$t.log") executions, no failure"
			fuzz_pass=$((fuzz_pass + 1))
		else
			echo "fuzz_$t: FAILED (build/fuzz/$t.log)"
			tail -40 "build/fuzz/$t.log"
			fuzz_fail=$((fuzz_fail + 1))
		fi
	done
else
	echo "fuzz targets did not build (build/fuzz.log)"
	tail -20 build/fuzz.log
	fuzz_fail=3
fi

echo "== make distcheck (the tarball builds and passes the contract tests)"
dist=0
start=$(date +%s)
make -s -j2 -C build distcheck TESTS=tests/contract.bats >build/distcheck.log 2>&1 || { dist=1; tail -20 build/distcheck.log; }
echo "   $(($(date +%s) - start)) s"

loaded_pass=0
loaded_fail=0
if [ -n "$loaded_pids" ]; then
	# shellcheck disable=SC2086 # the pids are words
	wait $loaded_pids
	loaded_end=$(cat build/loaded-1.end build/loaded-2.end 2>/dev/null | sort -n | tail -1)
	echo "== loaded run (beside the sanitizer pass): $((${loaded_end:-$(date +%s)} - loaded_start)) s"
	count_loaded build/loaded-1.tap
	count_loaded build/loaded-2.tap
fi

# Count test cases; a file that errored without failing a case counts once.
passed=0
failed=0
for trs in build/tests/*.trs build/tests/drills/*.trs build-san/tests/*.trs build-san/tests/drills/*.trs; do
	[ -f "$trs" ] || continue
	p=$(grep -cE '^:test-result: (PASS|XFAIL)' "$trs")
	f=$(grep -cE '^:test-result: (FAIL|XPASS)' "$trs")
	[ "$f" -eq 0 ] && grep -q '^:test-result: ERROR' "$trs" && f=1
	passed=$((passed + p))
	failed=$((failed + f))
done
if [ "$dist" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
passed=$((passed + fuzz_pass + loaded_pass))
failed=$((failed + fuzz_fail + loaded_fail))
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ] || status=1
echo "== the whole run: $(($(date +%s) - run_start)) s"
echo "$passed passed, $failed failed"
exit "$status"
