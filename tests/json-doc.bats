#!/usr/bin/env bats
# doc/json.md is the schema of every --json record: the real output of a
# workload that touches every record type is checked against its tables
# (tests/jsondoc.c): no undocumented key, no documented field missing
# unless marked optional, every value of a documented type, and every
# documented record seen.

load helpers
load workload

setup_file() {
	JSONDOC=$BATS_FILE_TMPDIR/jsondoc
	# shellcheck disable=SC2046 # the flags are a word list
	cc -std=c11 -D_GNU_SOURCE -o "$JSONDOC" "$SRC/tests/jsondoc.c" \
		$(pkg-config --cflags --libs jansson)
	export JSONDOC
}

@test "the doc's tables parse and name each record once" {
	run "$JSONDOC" "$SRC/doc/json.md" --records
	assert_success
	[ "${#lines[@]}" -gt 20 ]
	[ -z "$(printf '%s\n' "${lines[@]}" | sort | uniq -d)" ] || fail "a record is documented twice"
}

@test "the checker catches an undocumented key, a missing field and a wrong type" {
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<'{"event":"heartbeat","session_id":"s","status":"current","reconcile_due":false,"deliverable":0,"extra":1}'
	[ "$status" -eq 1 ]
	assert_output --partial "field 'extra' is not documented"
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<'{"event":"heartbeat","session_id":"s","status":"current","reconcile_due":false}'
	[ "$status" -eq 1 ]
	assert_output --partial "documented field 'deliverable' is missing"
	run "$JSONDOC" "$SRC/doc/json.md" summary <<<'{"queued":0,"running":0,"quarantined":{"total":0,"queued":0},"unknown":"0","unreconciled":{"total":0,"deliverable":0,"earlier_session":0,"refused":0},"unreconciled_attempts":0,"receipts":0,"oldest_unreconciled_ms":0}'
	[ "$status" -eq 1 ]
	assert_output --partial "'quarantined.started' is missing"
	assert_output --partial "field 'unknown' has a type"
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<'{"event":"no_such_record"}'
	[ "$status" -eq 1 ]
}

@test "the checker catches a line not in the form a shell may read: spaced, non-ASCII, a key twice" {
	local ok='{"event":"started","run_id":"r1"}'
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<"$ok"
	assert_success
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<'{"event": "started","run_id":"r1"}'
	[ "$status" -eq 1 ]
	assert_output --partial "not in the compact ASCII line form"
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<'{"event":"started","run_id":"r\u00E9"}'
	assert_success
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<$'{"event":"started","run_id":"r\xc3\xa9"}'
	[ "$status" -eq 1 ]
	run "$JSONDOC" "$SRC/doc/json.md" @event <<<'{"event":"started","run_id":"r1","run_id":"r2"}'
	[ "$status" -eq 1 ]
}

@test "every line of a real workload matches its record, and every record is seen" {
	local out=$BATS_TEST_TMPDIR/out f rec seen=$BATS_TEST_TMPDIR/seen
	workload "$out"
	workload_housekeeping "$out"
	: >"$seen"
	for f in "$out"/*.jsonl; do
		rec=$(basename "$f" .jsonl)
		[ "$rec" = event ] && rec=@event
		[ -s "$f" ] || fail "$(basename "$f"): the workload printed nothing"
		run --separate-stderr "$JSONDOC" "$SRC/doc/json.md" "$rec" <"$f"
		[ "$status" -eq 0 ] || fail "$(basename "$f"): $stderr"
		printf '%s\n' "$output" >>"$seen"
	done
	run diff <("$JSONDOC" "$SRC/doc/json.md" --records | sort -u) <(sort -u "$seen")
	assert_success   # a record only in the doc (<) was never printed
}

@test "every lookup answer and every FOUND field occurs in the workload" {
	local out=$BATS_TEST_TMPDIR/out
	workload "$out"
	run cat "$out/lookup.jsonl"
	assert_line --regexp '^\{"answer":"FOUND","run_id":"q-old",.*"started":false,.*"state":"queued"\}$'
	assert_line --regexp '^\{"answer":"FOUND","run_id":"k-old",.*"started":true,"start_marker":"[0-9]+:[0-9]+@[0-9]+","due_at":[0-9]+,"state":"retained"\}$'
	assert_line '{"answer":"FILTERED","run_id":"q-new"}'
	assert_line '{"answer":"ABSENT","run_id":"nope"}'
	# the same answers relayed through the dispatcher, and an ERROR
	run cat "$out/relay.jsonl"
	assert_line --regexp '^\{"inspection_id":"insp-[0-9a-f]+","recorded":true,"answer":\{"outcome":"FOUND","run_id":"q-old",.*"state":"queued"\}\}$'
	assert_line --regexp '^\{"inspection_id":"insp-[0-9a-f]+","recorded":true,"answer":\{"outcome":"FOUND","run_id":"k-old",.*"state":"retained"\}\}$'
	assert_line --regexp '^\{"inspection_id":"insp-[0-9a-f]+","recorded":true,"answer":\{"outcome":"FILTERED","run_id":"q-new"\}\}$'
	assert_line --regexp '^\{"inspection_id":"insp-[0-9a-f]+","recorded":true,"answer":\{"outcome":"ABSENT","run_id":"nope"\}\}$'
	assert_line --regexp '^\{"inspection_id":"insp-[0-9a-f]+","recorded":true,"answer":\{"outcome":"ERROR","reason":"malformed run id: [^"]*","exit_code":65\}\}$'
}
