/*
 * output — the life of a run's captured output (out/RUN.stdout, .stderr,
 * and its notify hook's out/RUN.notify).
 *
 * Output is disposable once the result is acknowledged (doc/recovery.md),
 * and it must not fill the disk under the state.  So it goes when nothing
 * refers to its run any more — the receipt pruned (`--prune-receipts`),
 * the result exported (`--export-evidence`) — and, past a total cap, the
 * output of acknowledged runs goes oldest first.  Output of a run that is
 * queued, running, unknown or retained is never removed: it may be
 * evidence still.
 */
#ifndef EK_OUTPUT_H
#define EK_OUTPUT_H

#include <stdint.h>

#include "err.h"
#include "state.h"

#define OUTPUT_CAP_DEFAULT (1024LL * 1024 * 1024)   /* bytes of output kept in all */

struct output_usage {
	int64_t bytes, files;
};

/* The output files in out/ and their bytes. */
int output_usage(const struct state *st, struct output_usage *u, struct ek_err *e);

/* Remove the output of runs nothing refers to (no execution row, no
 * result, no receipt), then, while the total exceeds cap (0: no cap), the
 * output of acknowledged runs, oldest receipt first.  *removed gets the
 * files removed.  0 or -1. */
int output_collect(struct state *st, int64_t cap, int64_t *removed, struct ek_err *e);

#endif
