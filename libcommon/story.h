/*
 * story — a run's whole story for an operator, out of what `exec-inspect
 * show` read: what ran (program, args), when (accepted, started, finished,
 * how long), how it ended (outcome, exit code), how its result travelled
 * (attempts, the dispatcher's record id, when it was acknowledged) and
 * where its captured output is.  Each fact is taken from the first row
 * that still holds it: the execution row, then the retained result (which
 * keeps program, args and start facts, schema steps 5 and 10), then the
 * receipt and the accepted spec, so the story outlives the release of the
 * execution row.  Never used by the InspectRetainedRun lookup.
 */
#ifndef EK_STORY_H
#define EK_STORY_H

#include <jansson.h>
#include <stdio.h>

#include "state.h"

/* Add "story" to show (inspect_show()'s object); spec is the accepted
 * spec's canonical JSON text, or NULL.  0, or -1 when out of memory. */
int story_add(const struct state *st, json_t *show, const char *spec);

/* Print show for a human on f: its verdict, the story one fact a line,
 * then each stored row as an indented key/value table (table.h).  Every
 * value is made safe for a terminal.  0, or -1 when out of memory. */
int story_print(FILE *f, json_t *show);

#endif
