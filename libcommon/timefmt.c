/* timefmt — see timefmt.h. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "timefmt.h"

static bool in_utc, tz_read;

void
timefmt_utc(bool utc)
{
	in_utc = utc;
}

/* The zone is read once, at the first local time: a command that prints
 * none (a lookup) does not open /etc/localtime at all. */
static struct tm *
local_tm(const time_t *t, struct tm *tm)
{
	if (!tz_read)
		tzset();
	tz_read = true;
	return localtime_r(t, tm);
}

char *
timefmt_when(char *buf, size_t n, int64_t epoch_ms)
{
	time_t t = (time_t)(epoch_ms / 1000);
	struct tm tm;

	if (epoch_ms <= 0 || !(in_utc ? gmtime_r(&t, &tm) : local_tm(&t, &tm)) ||
	    strftime(buf, n, in_utc ? "%Y-%m-%d %H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, n, "-");
	return buf;
}

char *
timefmt_elapsed(char *buf, size_t n, int64_t ms)
{
	int64_t s = ms / 1000;

	if (ms < 0)
		snprintf(buf, n, "-");
	else if (ms < 1000)
		snprintf(buf, n, "%lldms", (long long)ms);
	else if (s < 60)
		snprintf(buf, n, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, n, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, n, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		snprintf(buf, n, "%lldd%02lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
	return buf;
}

int
timefmt_parse_age(const char *s, int64_t *ms)
{
	static const struct { char unit; int64_t ms; } units[] = {
		{ 's', 1000 }, { 'm', 60000 }, { 'h', 3600000 }, { 'd', 86400000 } };
	char num[32];
	size_t len = strlen(s), i;
	int64_t v, mult = 0;

	if (len < 2 || len >= sizeof num)
		return -1;
	memcpy(num, s, len + 1);
	for (i = 0; i < sizeof units / sizeof units[0]; i++)
		if (num[len - 1] == units[i].unit) {
			mult = units[i].ms;
			num[len - 1] = '\0';
		}
	if (mult == 0 || cli_parse_i64(num, 0, INT64_MAX / 86400000, &v) < 0)
		return -1;
	*ms = v * mult;
	return 0;
}
