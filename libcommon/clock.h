/*
 * clock — the two clocks every tool reads: the wall clock for what is
 * stored and shown (epoch milliseconds), the monotonic one for deadlines
 * and budgets, which a clock step must not stretch or cut.
 */
#ifndef EK_CLOCK_H
#define EK_CLOCK_H

#include <stdint.h>

/* Milliseconds since the epoch (CLOCK_REALTIME). */
int64_t now_ms(void);
/* Milliseconds of CLOCK_MONOTONIC. */
int64_t mono_ms(void);
/* Sleep ms milliseconds (nothing for ms <= 0); a signal may end it early:
 * only a shorter pause. */
void sleep_ms(int64_t ms);

#endif
