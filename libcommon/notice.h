/*
 * notice — the start count and the start notices (schema step 12;
 * doc/protocol.md, "Start notices and the start count").
 *
 * Every start marker commits with the count it brings and a notice (the
 * trigger start_counted).  A heartbeat carries the count and the notices
 * not yet told; once the dispatcher took them, they go.  A negotiation
 * carries the count and whether this state is a restored backup
 * (exec-session backup marks the copy), and the dispatcher's answer raises
 * the count to the highest it has seen from this executor.
 */
#ifndef EK_NOTICE_H
#define EK_NOTICE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "state.h"

#define NOTICE_MAX 1024          /* run ids one heartbeat names (the dispatcher's bound) */
#define NOTICE_BACKUP_KEY "backup_taken_at"   /* meta: set in a backup copy only */

/* The heartbeat's body: {"starts": N, "started": [run id, ...]}, the
 * oldest NOTICE_MAX notices; *upto: the count of the last one named (0:
 * none).  0, or -1 (e filled). */
int notice_body(struct state *st, json_t **body, int64_t *upto, struct ek_err *e);

/* The dispatcher took the notices up to count upto: drop them.  A writer
 * holding the lock past busy_ms leaves them for the next heartbeat (a
 * notice told twice is harmless).  0, or -1 (e filled). */
int notice_sent(struct state *st, int64_t upto, int64_t busy_ms, struct ek_err *e);

/* The count, and whether this state is a restored backup copy. */
int notice_count(struct state *st, int64_t *starts, bool *backup, struct ek_err *e);

/* After a negotiation: the count rises to seen if it is below, and a
 * backup copy's mark goes (the dispatcher now knows).  0, or -1. */
int notice_rebase(struct state *st, int64_t seen, struct ek_err *e);

#endif
