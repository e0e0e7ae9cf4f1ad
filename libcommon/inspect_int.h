/*
 * inspect_int — internal to inspect.c and show.c, never included elsewhere:
 * how a stored row becomes JSON, shared by the lists and `show`.  The
 * contracts callers rely on are in inspect.h.
 */
#ifndef EK_INSPECT_INT_H
#define EK_INSPECT_INT_H

#include <jansson.h>
#include <sqlite3.h>

/* The current row of q as a new object, keys in column order: NULL as
 * null, `refused` as a boolean, args/env/policy as the JSON they hold,
 * text made valid UTF-8.  NULL when out of memory. */
json_t *inspect_row_json(sqlite3_stmt *q);

#endif
