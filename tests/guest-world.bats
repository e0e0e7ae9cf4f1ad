#!/usr/bin/env bats
# A guest's writable world is its own (libcommon/world.h, doc/security.md):
# a private /tmp, /var/tmp and /dev/shm, write access (Landlock) to those,
# its working directory and what the operator or its policy widens, and
# nothing else; and a root executor runs its guests as a guest user unless
# told otherwise (libcommon/isolate.h).

load helpers

setup() {
	# Outside every private directory, and outside the test's own
	# directory (which helpers.bash widens for every test).
	OUTSIDE=$(mktemp -d "$BUILD/ektest-world.XXXXXX")
	chmod 755 "$OUTSIDE"
	TAG="ektest-$$-$BATS_TEST_NUMBER"
}

teardown() {
	common_teardown
	rm -rf "$OUTSIDE"
	rm -f "/tmp/$TAG" "/tmp/$TAG.mine" "/var/tmp/$TAG.mine" "/dev/shm/$TAG.mine" "/$TAG.state.db"
}

# need_world: skip where guests are not isolated or Landlock is missing.
need_world() {
	landlocked || skip "$WHY"
}

# run_guest ID SCRIPT [EXTRA]: run sh -c SCRIPT as run ID, to its end.
run_guest() {
	local script=$2
	ready "$1" /bin/sh "[\"-c\",\"${script//\"/\\\"}\"]" "${3:-}"
	run exec-run start --wait
	assert_success
	assert_output --partial "$1 exited"
	slurp GUEST_OUT "$EXEC_STATE_DIR/out/$1.stdout"
	echo "guest said: $GUEST_OUT"
}

@test "a guest's /tmp, /var/tmp and /dev/shm are its own: what it writes there is not seen outside, nor what is there seen inside" {
	need_world
	echo planted >"/tmp/$TAG"
	run_guest w1 "cat /tmp/$TAG || echo unseen; for d in /tmp /var/tmp /dev/shm; do echo mine >\$d/$TAG.mine && echo wrote \$d; done"
	[[ "$GUEST_OUT" == *unseen* ]]
	[[ "$GUEST_OUT" == *"wrote /tmp"*"wrote /var/tmp"*"wrote /dev/shm"* ]]
	[ ! -e "/tmp/$TAG.mine" ]
	[ ! -e "/var/tmp/$TAG.mine" ]
	[ ! -e "/dev/shm/$TAG.mine" ]
}

@test "a guest cannot write outside its own world: not at /, not in HOME, not beside its working directory" {
	need_world
	mkdir "$OUTSIDE/home" "$OUTSIDE/cwd"
	chmod 777 "$OUTSIDE/home" "$OUTSIDE/cwd"
	run_guest w2 "touch /$TAG.state.db && echo root-written; touch \$HOME/x && echo home-written; touch $OUTSIDE/beside && echo beside-written; touch ./mine && echo cwd-written" \
		"\"cwd\":\"$OUTSIDE/cwd\",\"env\":{\"HOME\":\"$OUTSIDE/home\"}"
	[ ! -e "/$TAG.state.db" ]
	[ ! -e "$OUTSIDE/home/x" ]
	[ ! -e "$OUTSIDE/beside" ]
	# a build tree in /tmp (a CI clone, say) lies in the guest's private
	# /tmp: there its write beside the cwd lands in its own tmpfs, unseen
	case $OUTSIDE in
	/tmp/* | /var/tmp/* | /dev/shm/*) [ "$GUEST_OUT" = $'beside-written\ncwd-written' ] ;;
	*) [ "$GUEST_OUT" = cwd-written ] ;;
	esac
	[ -e "$OUTSIDE/cwd/mine" ]     # its working directory is its own
}

@test "a run's policy and the operator (--guest-writable) widen where a guest may write" {
	need_world
	mkdir "$OUTSIDE/policy" "$OUTSIDE/operator" "$OUTSIDE/neither"
	chmod 777 "$OUTSIDE"/*
	ready w3 /bin/sh "[\"-c\",\"for d in policy operator neither; do touch $OUTSIDE/\$d/x; done; true\"]" \
		"\"policy\":{\"writable\":[\"$OUTSIDE/policy\"]}"
	run exec-run start --wait --guest-writable "$OUTSIDE/operator"
	assert_success
	[ -e "$OUTSIDE/policy/x" ]
	[ -e "$OUTSIDE/operator/x" ]
	[ ! -e "$OUTSIDE/neither/x" ]
}

@test "a widened path in /tmp is the host's, bound into the guest's private /tmp" {
	need_world
	local dir
	dir=$(mktemp -d /tmp/ektest-wide.XXXXXX)
	chmod 777 "$dir"
	ready w4 /bin/sh "[\"-c\",\"touch $dir/x && touch /tmp/$TAG.mine\"]"
	EXEC_GUEST_WRITABLE=$BATS_TEST_TMPDIR:$dir run exec-run start --wait
	assert_success
	[ -e "$dir/x" ] || { rm -rf "$dir"; fail "not written through"; }
	rm -rf "$dir"
	[ ! -e "/tmp/$TAG.mine" ]
}

@test "--guest-writable: a path that does not exist, or is relative, is refused" {
	run -"$EK_USAGE" exec-run --guest-writable "$OUTSIDE/none" isolation
	assert_output --partial "--guest-writable $OUTSIDE/none: no such file or directory"
	run -"$EK_USAGE" exec-run --guest-writable rel isolation
	assert_output --partial "not an absolute path"
	EXEC_GUEST_WRITABLE=rel run -"$EK_USAGE" exec-run isolation
	assert_output --partial "EXEC_GUEST_WRITABLE:"
}

@test "policy.writable must be an array of absolute paths" {
	start_dispatcher
	open_session
	admin POST /admin/runs "{\"runs\":[$(spec p1 /bin/true '[]' '"policy":{"writable":["rel"]}')]}" >/dev/null
	run exec-accept --from-dispatcher
	assert_output --partial "policy.writable"
}

@test "as root, guests run as a guest user by default; userns keeps uid 0 in a namespace only when chosen" {
	[ "$EUID" = 0 ] || skip "not root"
	getent passwd nobody >/dev/null || skip "no user nobody"
	local want
	want=$(id -u execkit-guest 2>/dev/null || id -u nobody)
	unset EXEC_ISOLATION
	run exec-run isolation
	assert_success
	assert_output --partial "user: guests run as '"
	assert_output --partial "the default guest user of a root executor"
	ready r1 /bin/sh "[\"-c\",\"id -u; touch /tmp/$TAG.mine\"]"
	run exec-run start --wait
	assert_success
	[ "$(cat "$EXEC_STATE_DIR/out/r1.stdout")" = "$want" ]
	[ ! -e "/tmp/$TAG.mine" ]       # its /tmp is its own as that user too
	submit_and_accept "$(spec r2 /usr/bin/id '["-u"]')"
	EXEC_ISOLATION=userns run exec-run start --wait
	assert_success
	[ "$(cat "$EXEC_STATE_DIR/out/r2.stdout")" = 0 ]
}

# net_guest ID [EXTRA]: a guest that connects to the dispatcher's port and
# says whether it could (bash's /dev/tcp, no other tool needed).
net_guest() {
	local port=${DISP_URL##*:}
	submit_and_accept "$(spec "$1" /bin/bash "[\"-c\",\"exec 3<>/dev/tcp/127.0.0.1/$port && echo reached\"]" "${2:-}")"
}

@test "a run with policy network none, or every run with --guest-network none, cannot reach the dispatcher: loopback only" {
	need_world
	start_dispatcher
	open_session
	net_guest n1 '"policy":{"network":"none"}'
	net_guest n2
	run exec-run start --wait
	assert_success
	assert_output --partial "n1 exited 1"
	assert_output --partial "n2 exited 0"
	grep -q "Connection refused" "$EXEC_STATE_DIR/out/n1.stderr"   # its loopback is up, and empty
	[ "$(cat "$EXEC_STATE_DIR/out/n2.stdout")" = reached ]
	net_guest n3 '"policy":{"network":"host"}'
	run exec-run start --wait --guest-network none
	assert_success
	assert_output --partial "n3 exited 1"             # the operator's none holds
	run -"$EK_USAGE" exec-run --guest-network some isolation
}

@test "exec-loop --guest-network none passes it to every start: its guests reach nothing" {
	need_world
	start_dispatcher
	local port=${DISP_URL##*:}
	admin POST /admin/runs "{\"runs\":[$(spec l1 /bin/bash "[\"-c\",\"exec 3<>/dev/tcp/127.0.0.1/$port && echo reached\"]")]}" >/dev/null
	exec-loop --dispatcher "$DISP_URL" --tick 0.1 --guest-network none 2>"$BATS_TEST_TMPDIR/loop.err" 3>&- &
	local loop=$!
	wait_until '[ "$(sql "SELECT outcome || \" \" || exit_code FROM receipts WHERE run_id = '"'l1'"'" 2>/dev/null)" = "exited 1" ]' ||
		fail "$(cat "$BATS_TEST_TMPDIR/loop.err")"
	kill -TERM "$loop"
	wait "$loop"
	grep -q "exec-loop: isolation: .*; no network (loopback only)" "$BATS_TEST_TMPDIR/loop.err"
	run -"$EK_USAGE" exec-loop --dispatcher "$DISP_URL" --allow-hook relative/hook
	assert_output --partial "--allow-hook relative/hook: not an absolute path"
}
