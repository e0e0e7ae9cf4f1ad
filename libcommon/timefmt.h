/*
 * timefmt — times and durations for human eyes, and ages typed by one.
 *
 * Human views never print raw epoch milliseconds: a moment is a local
 * date-time ("2026-12-01 19:40:02"; with timefmt_utc(true), UTC with a "Z"),
 * a duration or age is written as ps(1)'s ELAPSED is read: the two largest
 * units ("350ms", "12s", "3m12s", "1h05m", "2d04h").  JSON keeps epoch ms.
 */
#ifndef EK_TIMEFMT_H
#define EK_TIMEFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Print moments in UTC from now on (--utc) instead of the local zone. */
void timefmt_utc(bool utc);

/* epoch_ms as a date-time into buf (n bytes); "-" for 0 or less. */
char *timefmt_when(char *buf, size_t n, int64_t epoch_ms);

/* ms as an elapsed time into buf; "-" when negative. */
char *timefmt_elapsed(char *buf, size_t n, int64_t ms);

/* "30d", "12h", "90m" or "3600s" to ms (exec-reconcile --prune-receipts,
 * exec-inspect list --since).  The unit is required: a bare "30" is more
 * likely 30 days meant than 30 seconds, and a prune cannot be undone.
 * 0 or -1. */
int timefmt_parse_age(const char *s, int64_t *ms);

#endif
