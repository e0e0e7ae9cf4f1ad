/* clock — see clock.h. */
#include <time.h>

#include "clock.h"

static int64_t
read_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
now_ms(void)
{
	return read_ms(CLOCK_REALTIME);
}

int64_t
mono_ms(void)
{
	return read_ms(CLOCK_MONOTONIC);
}

void
sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	if (ms > 0)
		nanosleep(&ts, NULL);
}
