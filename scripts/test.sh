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

# run_pass VARIANT DIR JOBS: the whole suite on DIR's build, JOBS files at
# once; its seconds into DIR/pass.seconds.  The plain pass runs the
# volumes the test files default to: 10 seeds a crash point (some 200 kill
# -9 crashes), 100 stops of the loop at random moments, 9 restarts, 60
# operations a concurrent worker.  (Deeper runs are a variable away:
# doc/recovery.md, "Running the drills".)  Under the sanitizers every
# process is several times slower, and what they look for (memory and
# undefined behaviour) is found on the first pass through a path, not by
# repeating it: there the crash drills take fewer seeds, the loop fewer
# stops (its signal handling is the shell's), the restart drill fewer
# restarts, and the concurrency drill and state.bats's concurrent workers
# fewer operations per worker (CONC_OPS); the WAL's bound, SQLite's own
# checkpointing, is left to the plain pass.
#
# The suites that check the tree rather than the build (TREE_TESTS in
# Makefile.am: the scripts, the pages, the installed layout and the drills'
# invariant checker) run in the plain pass only; they would find the same
# things twice.
run_pass() {
	seeds=10 kills=12 stops=100 restarts=9 ops=60 only=
	# shellcheck disable=SC2016 # make expands it
	[ "$1" = sanitizers ] && seeds=3 kills=3 stops=20 restarts=3 ops=30 only='TESTS=$(BUILD_TESTS)'
	pass_start=$(date +%s)
	DRILL_SEEDS=$seeds SOAK_KILLS=$kills LOOP_STOPS=$stops RESTART_STOPS=$restarts CONC_OPS=$ops \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:handle_sigill=1 \
		make -s -j"$3" -C "$2" check ${only:+"$only"} >/dev/null 2>&1
	pass_rc=$?
	echo $(($(date +%s) - pass_start)) >"$2/pass.seconds"
	return $pass_rc
}

# report_pass VARIANT DIR: its time and the log of each failed file.
report_pass() {
	echo "== test suite ($1): $(cat "$2/pass.seconds" 2>/dev/null || echo '?') s"
	for trs in "$2"/tests/*.trs "$2"/tests/drills/*.trs; do
		[ -f "$trs" ] || continue
		if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
			echo "--- failures in ${trs%.trs}.log"
			grep -vE '^ok ' "${trs%.trs}.log"
		fi
	done
}

# The two passes run side by side: the sanitized build is made and tested
# while the plain pass runs.  Each loads the machine for the other, so
# every suite runs on a loaded machine throughout (the tests wait on
# events with generous bounds: load only makes them slower, and a failure
# is a timing assumption that load breaks), and neither waits for the
# other's idle moments.  This replaces a "loaded run" that repeated the
# suites that once failed under load beside the sanitized pass.
status=0
rm -f build/pass.seconds build-san/pass.seconds
if ! scripts/build.sh build; then
	echo "build (plain) failed"
	echo "0 passed, 1 failed"
	exit 1
fi
{
	scripts/build.sh build-san --enable-sanitizers || exit 2
	run_pass sanitizers build-san 4
} &
san_pid=$!
# The fuzz targets (clang) are built beside the passes, at the lowest
# priority: in their idle moments, not after them.
nice -n 19 tests/fuzz/build.sh build/fuzz >build/fuzz.log 2>&1 &
fuzz_build_pid=$!
run_pass plain build 3 || status=1
# The distcheck (the tarball builds and passes the contract tests) as soon
# as the plain build is free: beside the rest of the sanitized pass, then
# beside the fuzzing.
dist_start=$(date +%s)
{
	make -s -j2 -C build distcheck TESTS=tests/contract.bats >build/distcheck.log 2>&1
	echo $? >build/distcheck.rc
	echo $(($(date +%s) - dist_start)) >build/distcheck.seconds
} &
dist_pid=$!
wait "$fuzz_build_pid"
fuzz_built=$?
wait "$san_pid"
case $? in
0) ;;
2) echo "build (sanitizers) failed"; status=1 ;;
*) status=1 ;;
esac
echo "== both passes, side by side: $(($(date +%s) - run_start)) s from the start"
report_pass plain build
report_pass sanitizers build-san

# The crash drills' tally (tests/drills/crash-*.bats print it on fd 3).
for dir in build build-san; do
	[ -f "$dir/tests/drills/crash-run.log" ] || continue
	cat "$dir"/tests/drills/crash-*.log | awk -v d="$dir" '/^# crash point /{ p++; n += $(NF-3) }
		END { if (p) printf "== crash drills (%s): %d point runs, %d kill -9 crashes, 0 violations\n", d, p, n }'
done

# Fuzzing: each libFuzzer target (ASan + UBSan) for FUZZ_SECONDS (default
# 15), all at once, from the committed seeds; each target is one test case.
echo "== fuzzing (libFuzzer, ${FUZZ_SECONDS:-15} s per target, beside the distcheck)"
fuzz_pass=0
fuzz_fail=0
fuzz_targets="runspec classify wire"
if [ "$fuzz_built" -eq 0 ]; then
	for t in $fuzz_targets; do
		rm -rf "build/fuzz/corpus/$t" && mkdir -p "build/fuzz/corpus/$t"
		"build/fuzz/fuzz_$t" -max_total_time="${FUZZ_SECONDS:-15}" -print_final_stats=1 \
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

wait "$dist_pid"
echo "== make distcheck (the tarball builds and passes the contract tests): $(cat build/distcheck.seconds) s"
dist=$(cat build/distcheck.rc)
[ "$dist" -eq 0 ] || tail -20 build/distcheck.log

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
passed=$((passed + fuzz_pass))
failed=$((failed + fuzz_fail))
# a pass that failed without a failed case (a build, a file that never
# ran) still says so in the summary
[ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
[ "$failed" -eq 0 ] || status=1
echo "== the whole run: $(($(date +%s) - run_start)) s"
echo "$passed passed, $failed failed"
exit "$status"
