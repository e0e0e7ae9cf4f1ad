#!/usr/bin/env bats
# Guests are contained (SPEC section 3): every process a guest started, in
# its process group or not, is gone before its result is reported, whether
# the guest exited, timed out or was cancelled.  libcommon/contain.h: the
# supervisor is a child subreaper, and each guest gets a cgroup of its own
# where one can be created.

load helpers

setup() {
	PIDFILE="$BATS_TEST_TMPDIR/descendant.pid"
	# The descendants sleep as "$BATS_TEST_TMPDIR/nap", so that teardown's
	# pkill of the test directory ends any that a failing test left behind.
	cp "$(type -P sleep)" "$BATS_TEST_TMPDIR/nap"
	TEST_CGROUP=
}

teardown() {
	common_teardown
	if [ -n "$TEST_CGROUP" ]; then
		wait_until '! grep -q . "$TEST_CGROUP/cgroup.procs"' || true
		rmdir "$TEST_CGROUP" || true
	fi
}

# guest KIND END: write the guest, a shell script.  It leaves one descendant
# of KIND behind, which writes its pid to $PIDFILE once it is what it should
# be; then the guest exits at once (END = exit) or stays until it is ended
# (timeout, cancel).
#   setsid  a child in a session (and process group) of its own
#   daemon  a double fork + setsid: the grandchild of a setsid'd child
#   group   a double fork that stays in the guest's process group, and
#           ignores SIGTERM (so only a SIGKILL ends it)
guest() {
	local nap="$BATS_TEST_TMPDIR/nap" tail='exit 0'
	[ "$2" = exit ] || tail="exec $nap 300"
	case $1 in
	setsid) cat <<-EOF ;;
		setsid sh -c 'echo \$\$ >$PIDFILE.tmp; mv $PIDFILE.tmp $PIDFILE; exec $nap 300' &
		while [ ! -s $PIDFILE ]; do $nap 0.01; done
		EOF
	daemon) cat <<-EOF ;;
		( setsid sh -c '$nap 300 & echo \$! >$PIDFILE.tmp; mv $PIDFILE.tmp $PIDFILE' & )
		while [ ! -s $PIDFILE ]; do $nap 0.01; done
		EOF
	group) cat <<-EOF ;;
		( trap '' TERM; $nap 300 & echo \$! >$PIDFILE.tmp; mv $PIDFILE.tmp $PIDFILE )
		EOF
	esac >"$BATS_TEST_TMPDIR/guest.sh"
	echo "$tail" >>"$BATS_TEST_TMPDIR/guest.sh"
}

# contained KIND END: run that guest as run g1 and end it by END; once the
# dispatcher has its result, the descendant must already be gone.
contained() {
	local kind=$1 end=$2 extra='' want=exited sup pid
	guest "$kind" "$end"
	[ "$end" != timeout ] || extra='"timeout_ms":3000'
	ready g1 /bin/sh "[\"$BATS_TEST_TMPDIR/guest.sh\"]" "$extra"
	exec-run start --wait >"$BATS_TEST_TMPDIR/out" 2>&1 &
	sup=$!
	wait_until '[ -s "$PIDFILE" ] || [ "$(disp_reports g1)" -ge 1 ]'
	[ -s "$PIDFILE" ]        # the descendant was there (not ended before it began)
	pid=$(cat "$PIDFILE")
	if [ "$end" = cancel ]; then
		kill -0 "$pid"
		exec-run cancel g1 --session "$(current_session)"
	fi
	wait_until '[ "$(disp_reports g1)" -ge 1 ]'
	ps -o pid=,ppid=,stat=,args= -p "$pid" || true   # shown if it fails: alive, or a zombie
	run ! kill -0 "$pid"     # gone (not even a zombie) by the time the dispatcher has the result
	wait "$sup"
	cat "$BATS_TEST_TMPDIR/out"
	[ "$end" = exit ] || want=${end/cancel/cancelled}
	[ "$(sql "SELECT outcome FROM receipts WHERE run_id = 'g1'")" = "$want" ]
}

# guest_cgroup RUN: the name a guest's cgroup has: its supervisor's chain
# cgroup where Landlock keeps guests from writing to cgroups, else one of
# its own named for its run.
guest_cgroup() {
	if landlocked; then echo "execkit-*-chain"; else echo "execkit-*-$1"; fi
}

# Probe as libcommon/contain.c does: the cgroup2 mount (mountinfo), our own
# cgroup ("0::" of /proc/self/cgroup), and whether a child cgroup with
# cgroup.kill can be made there.  Sets CG_MNT and CG_OWN, or CG_WHY.
cgroup_probe() {
	local root probe
	read -r root CG_MNT < <(awk '{ for (i = 7; $i != "-"; i++); if ($(i + 1) == "cgroup2") { print $4, $5; exit } }' /proc/self/mountinfo)
	[ -n "${CG_MNT:-}" ] || { CG_WHY="no cgroup2 hierarchy is mounted"; return 1; }
	CG_OWN=$(sed -n 's/^0:://p' /proc/self/cgroup)
	[ -n "$CG_OWN" ] || { CG_WHY="this process is in no cgroup v2 hierarchy"; return 1; }
	[ "$root" = / ] || CG_OWN=${CG_OWN#"$root"}
	probe="$CG_MNT${CG_OWN%/}/ektest-probe-$$"
	mkdir "$probe" 2>/dev/null || { CG_WHY="cannot create a cgroup under $CG_MNT$CG_OWN"; return 1; }
	[ -e "$probe/cgroup.kill" ] || { rmdir "$probe"; CG_WHY="no cgroup.kill (Linux 5.14 or later)"; return 1; }
	rmdir "$probe"
}

@test "a setsid child is gone when the guest exits, before its result is reported" {
	contained setsid exit
}

@test "a daemon (double fork + setsid) is gone when the guest exits, before its result is reported" {
	contained daemon exit
}

@test "a double-forked child left in the guest's group is gone when the guest exits" {
	contained group exit
}

@test "a setsid child is gone when the guest times out, before its result is reported" {
	contained setsid timeout
}

@test "a daemon is gone when the guest times out, before its result is reported" {
	contained daemon timeout
}

@test "a double-forked child left in the guest's group is gone when the guest times out" {
	contained group timeout
}

@test "a setsid child is gone when the guest is cancelled, before its result is reported" {
	contained setsid cancel
}

@test "a daemon is gone when the guest is cancelled, before its result is reported" {
	contained daemon cancel
}

@test "a double-forked child left in the guest's group is gone when the guest is cancelled" {
	contained group cancel
}

@test "descendants are gone before the result is retained: a crash right after retaining leaves none" {
	guest daemon exit
	ready g1 /bin/sh "[\"$BATS_TEST_TMPDIR/guest.sh\"]"
	EXEC_CRASH_AT=retained run exec-run start --wait
	[ -s "$PIDFILE" ]
	[ "$(sql "SELECT outcome, attempts FROM results WHERE run_id = 'g1'")" = "exited|0" ]
	[ "$(disp_reports g1)" = 0 ]
	run ! kill -0 "$(cat "$PIDFILE")"
}

@test "where a cgroup can be made, the guest runs in a cgroup its supervisor made, removed when the supervisor is done" {
	cgroup_probe || skip "$CG_WHY"
	ready cg1 /bin/cat '["/proc/self/cgroup"]'
	run exec-run start --wait
	assert_success
	assert_output --partial "cg1 exited 0: delivered"
	refute_output --partial "cgroup"
	cg=$(sed -n 's/^0:://p' "$EXEC_STATE_DIR/out/cg1.stdout")
	echo "guest cgroup: $cg" >&3
	# shellcheck disable=SC2053
	[[ "$cg" == ${CG_OWN%/}/$(guest_cgroup cg1) ]]
	[ ! -e "$CG_MNT$cg" ]
}

# cg_guest: write the guest of the kept-cgroup tests.  It prints its
# cgroup's name, inode and cgroup.max.depth, tries to change that and to
# make a child cgroup (saying "wrote" and "made" if it could), and with the
# argument "leave" leaves a process behind.
cg_guest() {
	cat >"$BATS_TEST_TMPDIR/cg.sh" <<-EOF
		cg=$CG_MNT\$(sed -n 's/^0:://p' /proc/self/cgroup)
		echo "\${cg##*/} \$(stat -c %i "\$cg") \$(cat "\$cg/cgroup.max.depth")"
		echo 3 2>/dev/null >"\$cg/cgroup.max.depth" && echo wrote
		mkdir "\$cg/child" 2>/dev/null && rmdir "\$cg/child" && echo made
		if [ "\$1" = leave ]; then setsid $BATS_TEST_TMPDIR/nap 300 </dev/null >/dev/null 2>&1 & fi
		exit 0
	EOF
}

# cg_chain RUN[:leave]... [-- EXEC-RUN-OPTION...]: run them as one chain
# of one supervisor.
cg_chain() {
	local specs=() r arg
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		r=${1%:leave} arg=
		[ "$r" = "$1" ] || arg=',"leave"'
		specs+=("$(spec "$r" /bin/sh "[\"$BATS_TEST_TMPDIR/cg.sh\"$arg]")")
		shift
	done
	[ $# = 0 ] || shift
	start_dispatcher
	open_session
	submit_and_accept "${specs[@]}"
	run exec-run start --chain --slots 1 --wait "$@"
	echo "$output"
	assert_success
}

@test "a chain's guests that cannot write to cgroups share the chain's while each leaves it empty; one left holding a process is killed and removed, and the next guest gets a new one" {
	cgroup_probe || skip "$CG_WHY"
	landlocked || skip "$WHY"
	cg_guest
	cg_chain k1 k2:leave k3 k4
	local n1 i1 d1 n2 i2 d2 n3 i3 d3 n4 i4 d4
	read -r n1 i1 d1 <"$EXEC_STATE_DIR/out/k1.stdout"
	read -r n2 i2 d2 <"$EXEC_STATE_DIR/out/k2.stdout"
	read -r n3 i3 d3 <"$EXEC_STATE_DIR/out/k3.stdout"
	read -r n4 i4 d4 <"$EXEC_STATE_DIR/out/k4.stdout"
	cat "$EXEC_STATE_DIR"/out/k?.stdout >&3
	# the supervisor's chain cgroup; Landlock kept the guests from changing it
	[[ "$n1" == execkit-*-chain ]]
	[ "$n2 $n3 $n4" = "$n1 $n1 $n1" ]
	[ "$d1 $d2 $d3 $d4" = "max max max max" ]
	run ! grep -h -e wrote -e made "$EXEC_STATE_DIR"/out/k?.stdout
	[ "$i2" = "$i1" ]          # k1 left it empty: kept for k2
	[ "$i3" != "$i2" ]         # k2 left a process: killed, and not used again
	[ "$i4" = "$i3" ]
	# the process k2 left is gone, and the chain's cgroup with the chain
	run ! pgrep -f "$BATS_TEST_TMPDIR/nap"
	[ ! -e "$CG_MNT${CG_OWN%/}/$n4" ]
}

@test "a guest that could write to its cgroup (no Landlock: --isolation none, as root) never hands it to the next guest" {
	cgroup_probe || skip "$CG_WHY"
	[ "$EUID" = 0 ] || skip "only root may write a cgroup's files here"
	cg_guest
	cg_chain k1 k2 -- --isolation none
	local n1 i1 d1 n2 i2 d2
	{ read -r n1 i1 d1; read -r w1; } <"$EXEC_STATE_DIR/out/k1.stdout"
	read -r n2 i2 d2 <"$EXEC_STATE_DIR/out/k2.stdout"
	cat "$EXEC_STATE_DIR"/out/k?.stdout >&3
	[ "$d1 $w1" = "max wrote" ]   # it could, and did
	[[ "$n1 $n2" == execkit-*-k1\ execkit-*-k2 ]]   # each its own, named for its run
	[ "$i2" != "$i1" ]
	[ "$d2" = max ]
}

@test "the guest is born in its cgroup (clone3 CLONE_INTO_CGROUP): no move through cgroup.procs" {
	cgroup_probe || skip "$CG_WHY"
	command -v strace >/dev/null || skip "no strace"
	ready cg2 /bin/cat '["/proc/self/cgroup"]'
	# (LeakSanitizer cannot work under ptrace: leaks are checked elsewhere)
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
		strace -f -e trace=clone3,write -o "$BATS_TEST_TMPDIR/trace" exec-run supervise cg2 >/dev/null
	grep -q 'clone3(.*CLONE_INTO_CGROUP' "$BATS_TEST_TMPDIR/trace" || fail "$(grep clone "$BATS_TEST_TMPDIR/trace")"
	# no one writes a child's pid (into a cgroup.procs); the guest may join
	# a cgroup v1 hierarchy itself ("0") for its limits
	local pid pids
	pids=$(sed -n 's/.*clone3.*) *= \([0-9][0-9]*\)$/\1/p' "$BATS_TEST_TMPDIR/trace")
	[ -n "$pids" ] || fail "$(grep clone3 "$BATS_TEST_TMPDIR/trace")"
	for pid in $pids; do
		run ! grep "write([0-9]*, \"$pid\"" "$BATS_TEST_TMPDIR/trace"
	done
	# shellcheck disable=SC2053
	[[ "$(sed -n 's/^0:://p' "$EXEC_STATE_DIR/out/cg2.stdout")" == ${CG_OWN%/}/$(guest_cgroup cg2) ]]
}

@test "the guest, the supervisor and the probe share their parent's memory until they exec (clone3 CLONE_VM | CLONE_VFORK); each guest gets its own environment" {
	[ "$(uname -m)" = x86_64 ] || skip "the shared-memory spawn is written for x86-64"
	if sanitized_build; then
		skip "a sanitized build copies the supervisor (fork): AddressSanitizer does not follow a change of stack"
	fi
	command -v strace >/dev/null || skip "no strace"
	start_dispatcher
	open_session
	# e1 sets its own HOME; e2, run next by the same supervisor, must get
	# the supervisor's (the child assigned environ in shared memory).
	submit_and_accept "$(spec e1 /bin/sh '["-c","echo $HOME $V"]' '"env":{"HOME":"/e1home","V":"one"}')" \
		"$(spec e2 /bin/sh '["-c","echo $HOME ${V-unset}"]')"
	HOME=/supervisor-home strace -f -e trace=clone,clone3 -o "$BATS_TEST_TMPDIR/trace" \
		exec-run start --chain --slots 1 --wait >/dev/null
	# no process on the path is copied: the starter's supervisor, the
	# isolation probes and the two guests are all spawned sharing memory
	local procs
	procs=$(grep -E ' clone3?\(' "$BATS_TEST_TMPDIR/trace" | grep -v CLONE_THREAD) || true
	run grep -vc 'clone3({flags=CLONE_VM|CLONE_VFORK' <<<"$procs"
	[ "$output" = 0 ] || fail "$procs"
	[ "$(grep -c 'CLONE_VM|CLONE_VFORK' <<<"$procs")" -ge 4 ] || fail "$procs"
	[ "$(cat "$EXEC_STATE_DIR/out/e1.stdout")" = "/e1home one" ]
	[ "$(cat "$EXEC_STATE_DIR/out/e2.stdout")" = "/supervisor-home unset" ]
}

@test "where no cgroup can be made, the subreaper alone ends a daemon, and one line says so" {
	cgroup_probe || skip "$CG_WHY"
	# Run the executor in a cgroup that may have no child cgroups.
	TEST_CGROUP="$CG_MNT${CG_OWN%/}/ektest-$$-$BATS_TEST_NUMBER"
	mkdir "$TEST_CGROUP"
	echo 0 >"$TEST_CGROUP/cgroup.max.descendants"
	guest daemon exit
	ready g1 /bin/sh "[\"$BATS_TEST_TMPDIR/guest.sh\"]"
	run sh -c 'echo $$ >"$1/cgroup.procs" && exec exec-run start --wait' sh "$TEST_CGROUP"
	assert_success
	assert_output --partial "g1 exited 0: delivered"
	[ "$(grep -c "run 'g1': no cgroup for the guest (.*): its descendants are ended by the subreaper alone" <<<"$output")" = 1 ]
	[ -s "$PIDFILE" ]
	run ! kill -0 "$(cat "$PIDFILE")"
}

# --- what the tools write outside the state directory ------------------------
# (the loop's own files live in the state directory: exec-loop.bats)

@test "metrics --output: a link planted at the file is replaced, never written through" {
	start_dispatcher
	open_session
	mkdir "$BATS_TEST_TMPDIR/textfile"
	ln -s "$EXEC_STATE_DIR/state.db" "$BATS_TEST_TMPDIR/textfile/execkit.prom"
	exec-inspect metrics --output "$BATS_TEST_TMPDIR/textfile/execkit.prom"
	[ ! -L "$BATS_TEST_TMPDIR/textfile/execkit.prom" ]
	grep -q '^execkit_' "$BATS_TEST_TMPDIR/textfile/execkit.prom"
	[ "$(sql "PRAGMA integrity_check")" = ok ]
	run ! compgen -G "$BATS_TEST_TMPDIR/textfile/.execkit.prom.*"
}

@test "metrics --output and --port-file follow no link on the way that is not root's, in a directory only root writes" {
	start_dispatcher
	open_session
	local before
	before=$(ls -A "$EXEC_STATE_DIR")
	# a directory on the way replaced by a link into the state directory
	mkdir -m 1777 "$BATS_TEST_TMPDIR/shared"
	ln -s "$EXEC_STATE_DIR" "$BATS_TEST_TMPDIR/shared/textfile"
	run -"$EK_CANTCREAT" exec-inspect metrics --output "$BATS_TEST_TMPDIR/shared/textfile/state.db"
	assert_output --partial "symbolic link that is not root's (not followed)"
	run -"$EK_CANTCREAT" exec-dispatcher --port 0 --store "$BATS_TEST_TMPDIR/d2.db" \
		--port-file "$BATS_TEST_TMPDIR/shared/textfile/state.db"
	assert_output --partial "symbolic link that is not root's (not followed)"
	[ "$(ls -A "$EXEC_STATE_DIR")" = "$before" ]
	[ "$(sql "PRAGMA integrity_check")" = ok ]
	# root's own link, in a directory only root writes, is followed (/var/run -> /run)
	if [ "$(id -u)" = 0 ]; then
		mkdir -m 755 "$BATS_TEST_TMPDIR/sys" "$BATS_TEST_TMPDIR/real"
		ln -s "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/sys/run"
		exec-inspect metrics --output "$BATS_TEST_TMPDIR/sys/run/execkit.prom"
		[ -s "$BATS_TEST_TMPDIR/real/execkit.prom" ]
	fi
}

@test "a run's cgroup bounds its processes (policy pids_max): a fork bomb of 200 gets no further than 50" {
	local guest="i=0; while [ \$i -lt 200 ]; do $BATS_TEST_TMPDIR/nap 30 & echo \$! >>$BATS_TEST_TMPDIR/forked; i=\$((i+1)); done"
	ready f1 /bin/sh "[\"-c\",\"$guest\"]" '"policy":{"pids_max":50}'
	run exec-run start --wait
	assert_success
	[[ "$output" != *"resource limits are not all set"* ]] || skip "${output##*set: }"
	assert_output --partial "f1 exited"
	n=$(wc -l <"$BATS_TEST_TMPDIR/forked")
	echo "forked: $n" >&3
	((n >= 1 && n < 50)) || fail "$n forked"
}

@test "where pids and memory are cgroup v1, a supervisor joins its slot cgroups once for a chain; each guest is born in them, killable by the OOM killer, and one guest's leftovers leave the next its whole bound" {
	command -v strace >/dev/null || skip "no strace"
	grep -q ' - cgroup cgroup .*pids' /proc/self/mountinfo || skip "no cgroup v1 pids hierarchy"
	local nap="$BATS_TEST_TMPDIR/nap" f="$BATS_TEST_TMPDIR/forked"
	local bomb="i=0; while [ \$i -lt 60 ]; do $nap 30 & echo \$! >>$f.1; i=\$((i+1)); done"
	local ten="i=0; while [ \$i -lt 10 ]; do $nap 30 & echo \$! >>$f.2; i=\$((i+1)); done; cat /proc/self/cgroup /proc/self/oom_score_adj"
	start_dispatcher
	open_session
	submit_and_accept "$(spec s1 /bin/sh "[\"-c\",\"$bomb\"]" '"policy":{"pids_max":20}')" \
		"$(spec s2 /bin/sh "[\"-c\",\"$ten\"]" '"policy":{"pids_max":20}')" \
		"$(spec s3 /bin/cat '["/proc/self/cgroup"]')"
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -y -e trace=write \
		-o "$BATS_TEST_TMPDIR/trace" exec-run start --chain --slots 1 --wait >"$BATS_TEST_TMPDIR/out" 2>&1
	run cat "$BATS_TEST_TMPDIR/out"
	[[ "$output" != *"resource limits are not all set"* ]] || skip "${output##*set: }"
	assert_output --partial "s1 exited"
	assert_output --partial "s2 exited 0"
	assert_output --partial "s3 exited 0"
	# the bomb stopped at its bound; the next guest had all of it
	(($(wc -l <"$f.1") < 20)) || fail "$(wc -l <"$f.1") forked under pids_max 20"
	[ "$(wc -l <"$f.2")" = 10 ] || fail "the second guest forked $(wc -l <"$f.2") of 10"
	# three guests, and each v1 controller's cgroup.procs written once: by
	# the supervisor joining its slot, never for a guest
	run grep -c 'cgroup.procs>, "0"' "$BATS_TEST_TMPDIR/trace"
	[ "$output" -le 2 ] || fail "$(grep 'cgroup.procs>' "$BATS_TEST_TMPDIR/trace")"
	grep -q 'pids:/.*execkit-[0-9]*-slot$' "$EXEC_STATE_DIR/out/s2.stdout" || fail "$(cat "$EXEC_STATE_DIR/out/s2.stdout")"
	grep -q 'pids:/.*execkit-[0-9]*-slot$' "$EXEC_STATE_DIR/out/s3.stdout" || fail "$(cat "$EXEC_STATE_DIR/out/s3.stdout")"
	# the guest may be chosen by the OOM killer, whatever its supervisor's score
	[ "$(tail -n 1 "$EXEC_STATE_DIR/out/s2.stdout")" = 0 ]
}

@test "a run's cgroup bounds its memory (policy memory_max): 64 MiB in a 16 MiB run is killed; the default lets it be" {
	command -v python3 >/dev/null || skip "no python3"
	local alloc="x = b'x' * (64 << 20); print(len(x))"
	ready m1 /usr/bin/python3 "[\"-c\",\"$alloc\"]" '"policy":{"memory_max":16777216}'
	run exec-run start --wait
	assert_success
	[[ "$output" != *"resource limits are not all set"* ]] || skip "${output##*set: }"
	assert_output --regexp "m1 (exited|killed)"
	refute_output --partial "m1 exited 0"
	submit_and_accept "$(spec m2 /usr/bin/python3 "[\"-c\",\"$alloc\"]")"
	run exec-run start --wait
	assert_output --partial "m2 exited 0"
	[ "$(cat "$EXEC_STATE_DIR/out/m2.stdout")" = $((64 << 20)) ]
}
