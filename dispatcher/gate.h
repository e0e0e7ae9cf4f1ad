/*
 * gate — the gate's adaptive limit: how many requests it lets in flight,
 * from the latency it measures (http.c admits by it).
 */
#ifndef EK_DISPATCHER_GATE_H
#define EK_DISPATCHER_GATE_H

#include <stdint.h>

struct gate_stats {
	int64_t limit, lowest;           /* the limit now; the lowest since start */
	int64_t min_rtt_us, sample_rtt_us;   /* what it was adapted from */
	int64_t windows;                 /* sample windows closed since start */
};

/* A monotonic clock in microseconds, for latency samples. */
int64_t gate_now_us(void);
/* One admitted result took rtt_us, in_flight requests being counted by the
 * gate as it ended; may close a window and adapt the limit. */
void gate_sample(int64_t rtt_us, int64_t in_flight);
/* How many requests the gate lets in flight now. */
int64_t gate_limit(void);
/* Requests a second limit places in flight let through at the latency
 * last measured (limit / the last window's median): 0 before any measure. */
int64_t gate_rate(int64_t limit);
void gate_read(struct gate_stats *out);

#endif
