/*
 * gate — the adaptive limit: how many requests the gate lets in flight,
 * adapted from the latency it measures (http.c admits by it).
 *
 * A gradient controller, as Envoy's adaptive concurrency filter and
 * Netflix's concurrency-limits have it.  Each admitted result's latency
 * (admission to answer) is a sample.  Every WINDOW_MS (with at least one
 * sample) the window's median is the sample RTT, and
 *
 *     gradient = clamp(minRTT × (1 + BUFFER) / sampleRTT, 0.5, 2)
 *     limit    = limit × gradient + √limit              (in LIMIT_MIN..LIMIT_MAX)
 *
 * so the limit falls as soon as results wait longer than the dispatcher
 * takes unloaded, and grows while they do not: the dispatcher goes as fast
 * as it can without a queue of its own.  minRTT is the lowest sample RTT
 * of the last MINRTT_PERIOD_MS and the current one: old enough to have seen
 * a quiet moment, young enough to follow a store that got slower for good.
 * A window in which the requests in flight stayed below half the limit
 * leaves it as it is: the limit held nothing back, so the latency says
 * nothing about it (a slow sync at one request in flight is no reason to
 * admit fewer; a fast one, no reason to let the next burst through
 * unmeasured).  A window holds the samples of its own 100 ms: the first
 * sample after it closes it, and goes to the next.
 *
 * The limit starts at LIMIT_START.  --gate off keeps it at LIMIT_MAX, the
 * caps (--max-inflight, --max-rate) apart.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "gate.h"

enum { WINDOW_MS = 100, WINDOW_SAMPLES = 256, MINRTT_PERIOD_MS = 30000,
	LIMIT_START = 16, LIMIT_MIN = 4, LIMIT_MAX = MAX_CONNECTIONS };
#define BUFFER 1.0

static struct {
	pthread_mutex_t mu;
	double limit;
	int64_t min_rtt_us, period_min_us, period_start_ms, sample_rtt_us;
	int64_t window_start_ms, samples[WINDOW_SAMPLES];
	int n;                         /* samples in this window (the first WINDOW_SAMPLES kept) */
	int64_t busiest;               /* most in flight seen in this window */
	int64_t windows, lowest;       /* windows closed; the lowest limit since start */
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

int64_t
gate_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* √x for x ≥ 1, by Newton's method (no libm for one square root). */
static double
root(double x)
{
	double r = x;
	int i;

	for (i = 0; i < 20; i++)
		r = (r + x / r) / 2;
	return r;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Before the first use (under g.mu). */
static void
gate_init(int64_t now_ms)
{
	if (g.limit > 0)
		return;
	g.limit = dsp.cfg.gate_off ? LIMIT_MAX : LIMIT_START;
	g.lowest = (int64_t)g.limit;
	g.window_start_ms = g.period_start_ms = now_ms;
}

/* Close the window: its median updates minRTT and the limit (under g.mu). */
static void
gate_update(int64_t now_ms)
{
	int n = g.n < WINDOW_SAMPLES ? g.n : WINDOW_SAMPLES;
	double gradient, grown;
	int64_t rtt;

	qsort(g.samples, (size_t)n, sizeof g.samples[0], cmp_i64);
	rtt = g.samples[n / 2] > 0 ? g.samples[n / 2] : 1;
	g.sample_rtt_us = rtt;
	if (now_ms - g.period_start_ms >= MINRTT_PERIOD_MS) {
		g.min_rtt_us = g.period_min_us;   /* the last full period's lowest */
		g.period_min_us = 0;
		g.period_start_ms = now_ms;
	}
	if (!g.period_min_us || rtt < g.period_min_us)
		g.period_min_us = rtt;
	if (!g.min_rtt_us || rtt < g.min_rtt_us)
		g.min_rtt_us = rtt;
	gradient = (double)g.min_rtt_us * (1 + BUFFER) / (double)rtt;
	gradient = gradient < 0.5 ? 0.5 : gradient > 2 ? 2 : gradient;
	grown = g.limit * gradient + root(g.limit);
	if ((double)g.busiest < g.limit / 2)
		grown = g.limit;   /* the limit held nothing back: it is not what this measured */
	if (!dsp.cfg.gate_off)
		g.limit = grown < LIMIT_MIN ? LIMIT_MIN : grown > LIMIT_MAX ? LIMIT_MAX : grown;
	if ((int64_t)g.limit < g.lowest)
		g.lowest = (int64_t)g.limit;
	g.windows++;
	g.n = 0;
	g.busiest = 0;
	g.window_start_ms = now_ms;
}

void
gate_sample(int64_t rtt_us, int64_t in_flight)
{
	int64_t now = gate_now_us() / 1000;

	pthread_mutex_lock(&g.mu);
	gate_init(now);
	/* A window is the samples of its own 100 ms: a sample that comes
	 * after it closes it first, and opens the next.  Closed with that
	 * sample in it, a window left open across a quiet spell took in a
	 * sample of another load (a slowed store's first, beside the fast
	 * ones of before: their median said "fast", and the limit grew). */
	if (g.n > 0 && now - g.window_start_ms >= WINDOW_MS)
		gate_update(now);
	if (g.n < WINDOW_SAMPLES)
		g.samples[g.n] = rtt_us;
	g.n++;
	if (in_flight > g.busiest)
		g.busiest = in_flight;
	if (now - g.window_start_ms >= WINDOW_MS)   /* the first sample since the start */
		gate_update(now);
	pthread_mutex_unlock(&g.mu);
}

int64_t
gate_limit(void)
{
	int64_t limit;

	pthread_mutex_lock(&g.mu);
	gate_init(gate_now_us() / 1000);
	limit = (int64_t)g.limit;
	pthread_mutex_unlock(&g.mu);
	return limit;
}

int64_t
gate_rate(int64_t limit)
{
	int64_t rate;

	pthread_mutex_lock(&g.mu);
	gate_init(gate_now_us() / 1000);
	rate = g.sample_rtt_us > 0 ? (int64_t)((double)limit * 1e6 / (double)g.sample_rtt_us) : 0;
	pthread_mutex_unlock(&g.mu);
	return rate;
}

void
gate_read(struct gate_stats *out)
{
	pthread_mutex_lock(&g.mu);
	gate_init(gate_now_us() / 1000);
	out->limit = (int64_t)g.limit;
	out->lowest = g.lowest;
	out->min_rtt_us = g.min_rtt_us;
	out->sample_rtt_us = g.sample_rtt_us;
	out->windows = g.windows;
	pthread_mutex_unlock(&g.mu);
}
