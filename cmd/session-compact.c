/*
 * exec-session compact — the state's free pages given back to the file
 * system while the executor runs (retention.h: an incremental vacuum in
 * bounded transactions, then a short checkpoint).  What pruning freed
 * (exec-reconcile --prune-receipts, --prune-records, --export-evidence)
 * is reused by SQLite without it; compact makes state.db smaller.
 */
#include <stdio.h>

#include "cli.h"
#include "exec-session.h"
#include "jsonout.h"
#include "retention.h"

int
session_compact(struct state *st, bool json, struct ek_err *e)
{
	struct compact_count c;
	char pages[48];

	if (state_compact(st, &c, e) < 0)
		return -1;
	if (json) {
		json_emit(stdout, json_pack("{s:s, s:I, s:I, s:I, s:b}", "event", "compacted", "pages",
		    (json_int_t)c.pages, "bytes_before", (json_int_t)c.bytes_before, "bytes_after",
		    (json_int_t)c.bytes_after, "checkpointed", c.checkpointed));
		return 0;
	}
	printf("compacted %s: %s given back, state.db and its WAL %lld -> %lld bytes%s\n", st->dbpath,
	    cli_plural(pages, sizeof pages, c.pages, "free page"), (long long)c.bytes_before,
	    (long long)c.bytes_after, c.checkpointed ? "" :
	    " (the WAL was busy: the file shrinks at its next checkpoint)");
	return 0;
}
