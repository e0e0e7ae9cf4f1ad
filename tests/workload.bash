# A small real workload against exec-dispatcher that leaves every state
# population non-empty and keeps the --json output of every command, for
# json-doc.bats and metrics.bats.  Load after helpers.
#
# workload OUT: the output goes to OUT/NAME.jsonl, where NAME is the record
# of doc/json.md the lines are (the mapping rule at the top of that file),
# or "event" for lines that name their record in their "event" field.
#
# At the end, under the second (current) session:
#   quarantined  q-old (queued under the first session)
#   unknown      u1 (its supervisor died after choosing, before retaining)
#   retained     k-old (the first session's, its reports failed: orphaned)
#                k-new (this session's, its reports failed: deliverable)
#   refused      ref1 (unknown to the dispatcher)
#   queued       q-new (due far in the future)
#   running      s2 (sleeps; declared destination "backup"; its notify hook fails)
#   receipts     ok1, ok2, k1, k2
# WORKLOAD_SID holds the current session id.

FAR='"due_at":9999999999999'

# j NAME CMD...: run CMD, keep its stdout as record NAME; its status is returned.
j() {
	local name=$1
	shift
	"$@" >>"$OUT/$name.jsonl"
}

# submit SPEC...: hand runs to the dispatcher (they are pulled later).
submit() {
	local body
	body=$(printf '%s,' "$@")
	admin POST /admin/runs "{\"runs\":[${body%,}]}" >/dev/null
}

workload() {
	OUT=$1
	mkdir -p "$OUT"
	start_dispatcher
	j event exec-session open --json --dispatcher "$DISP_URL"
	j event exec-session heartbeat --json

	# Accepting: from stdin (accepted, duplicate, conflict, invalid) and the feed.
	submit "$(spec ok1)"
	j submit exec-dispatcher submit --json --port-file "$BATS_TEST_TMPDIR/disp.port" \
		--store "$BATS_TEST_TMPDIR/disp.db" --id ok2 --txn-id t-ok2 -- /bin/sh -c 'exit 3'
	j accept exec-accept --json --from-dispatcher
	{ spec ok1; spec ok1 /bin/false; echo 'not json'; spec ref1; spec q-old /bin/true '[]' "$FAR"; } >"$OUT/in"
	j accept exec-accept --json <"$OUT/in" && return 1   # 65: a conflict and an invalid line
	j event exec-run start --wait --json || true          # ok1, ok2 delivered; ref1 refused

	# A result whose reports fail stays retained; then one report and one pass deliver.
	fault 5xx 100
	submit "$(spec k1)" "$(spec k2)"
	j accept exec-accept --json --from-dispatcher
	j event exec-run start --wait --json --budget-ms 200 || true
	admin DELETE /admin/faults >/dev/null
	j report exec-report --json k1
	j event exec-reconcile --json
	fault 5xx 100
	submit "$(spec k-old)"
	j accept exec-accept --json --from-dispatcher
	j event exec-run start --wait --json --budget-ms 200 || true
	admin DELETE /admin/faults >/dev/null

	# A run that dies between choosing and retaining its result: unknown.
	submit "$(spec u1)"
	j accept exec-accept --json --from-dispatcher
	EXEC_CRASH_AT=result-chosen exec-run start --wait >/dev/null 2>&1 || true
	j event exec-run sweep --json

	# Cancel: a started run (its supervisor reports), a queued one (result now).
	WORKLOAD_SID=$(current_session)
	submit "$(spec c1 /bin/sleep '["3600"]')" "$(spec c2 /bin/true '[]' "$FAR")"
	j accept exec-accept --json --from-dispatcher
	j event exec-run start --json
	j event exec-run cancel c1 --session "$WORKLOAD_SID" --json
	j event exec-run cancel c2 --session "$WORKLOAD_SID" --json
	exec-run wait --timeout-ms "$WAIT_MS" >/dev/null

	# The first session ends; the second quarantines q-old and orphans k-old.
	FIRST_SID=$WORKLOAD_SID
	j event exec-session open --json --dispatcher "$DISP_URL"
	WORKLOAD_SID=$(current_session)
	j session exec-session show --json
	j event exec-session report --json
	fault 5xx 100
	submit "$(spec k-new)"
	j accept exec-accept --json --from-dispatcher
	j event exec-run start --wait --json --budget-ms 200 || true
	admin DELETE /admin/faults >/dev/null
	export EXEC_ALLOW_HOOKS=/bin/false   # allowed, so that it runs (and fails)
	submit "$(spec s2 /bin/sleep '["3600"]' '"policy":{"destinations":["backup"],"notify":"/bin/false"}')"
	j accept exec-accept --json --from-dispatcher
	spec q-new /bin/true '[]' "$FAR" | j accept exec-accept --json
	j event exec-run start --json
	wait_until '[ "$(exec-inspect list running --ids)" = s2 ]'

	# Shares of the running program.
	j event exec-shares capacity set dest:backup 1000000 --json
	j dimension exec-shares capacity show --json
	j share exec-shares show s2 --json
	j share exec-shares show s2 --destination backup --json
	j share exec-shares list --json
	cp "$EXEC_STATE_DIR/out/s2.limits" "$OUT/limits.jsonl"

	# Inspection: every answer, every list, every kind of run.
	j lookup exec-inspect lookup q-old --session "$WORKLOAD_SID" --json   # FOUND, queued
	j lookup exec-inspect lookup k-old --session "$WORKLOAD_SID" --json   # FOUND, retained
	j lookup exec-inspect lookup q-new --session "$WORKLOAD_SID" --json   # FILTERED
	j lookup exec-inspect lookup nope --session "$WORKLOAD_SID" --json    # ABSENT
	j summary exec-inspect summary --json
	local kind id
	for kind in quarantined unknown retained refused orphaned queued running receipts all; do
		j "list_$kind" exec-inspect list "$kind" --json
	done
	for id in q-old u1 k-old ref1 ok1 q-new s2; do
		j show exec-inspect show "$id" --json
	done

	# The same lookups asked by a client through the dispatcher, and an ERROR:
	# the client's token goes in a header file, never on curl's command line.
	admin POST /admin/clients '{"name":"workload"}' |
		sed -n 's/.*"token":"\([0-9a-f]*\)".*/Authorization: Bearer \1/p' >"$OUT.client-auth"
	for id in q-old k-old q-new nope 'bad id'; do
		curl -sS --max-time "$WAIT_S" -H @"$OUT.client-auth" \
			-d "{\"run_id\":\"$id\",\"session_id\":\"$WORKLOAD_SID\"}" "$DISP_URL/v1/inspections" >/dev/null
	done
	j relay exec-inspect relay --json
}

# workload_housekeeping OUT: the records of adopting, of exec-reconcile's
# housekeeping and of closing; run last (it removes refused results).
workload_housekeeping() {
	OUT=$1
	j event exec-session adopt "$FIRST_SID" --json   # k-old: deliverable again, not exported
	j event exec-session backup "$OUT/backup.db" --json
	j event exec-reconcile --json --dry-run --export-evidence "$OUT/evidence.jsonl"
	j event exec-reconcile --json --export-evidence "$OUT/evidence.jsonl"
	j event exec-reconcile --json --dry-run --prune-receipts 0s
	j event exec-reconcile --json --prune-receipts 30d
	j event exec-reconcile --json --prune-receipts 0s
	j event exec-reconcile --json --dry-run --prune-records 0s
	j event exec-reconcile --json --prune-records 0s
	j event exec-session compact --json
	j event exec-reconcile --json --output-cap 0
	exec-run cancel s2 --session "$WORKLOAD_SID" >/dev/null
	exec-run wait --timeout-ms "$WAIT_MS" >/dev/null
	j event exec-session close --json
}

# The sleeping run s2 outlives a test unless it is ended: end it (its
# supervisor holds the test's output open), then the usual teardown.
teardown() {
	if [ -n "${WORKLOAD_SID:-}" ]; then
		exec-run cancel s2 --session "$WORKLOAD_SID" >/dev/null 2>&1 || true
		exec-run wait --timeout-ms "$WAIT_MS" >/dev/null 2>&1 || true
	fi
	common_teardown
}
