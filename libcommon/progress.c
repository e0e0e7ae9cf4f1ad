/* progress — see progress.h. */
#include <stdio.h>
#include <unistd.h>

#include "clock.h"
#include "progress.h"
#include "timefmt.h"

enum { PROGRESS_EVERY_MS = 250 };

void
progress_begin(struct progress *p, const char *prog)
{
	p->prog = prog;
	p->on = isatty(STDERR_FILENO);
	p->shown = false;
	p->start = p->last = mono_ms();
}

void
progress_show(struct progress *p, int64_t done, const char *what, double fraction,
    const char *extra, bool force)
{
	int64_t now = mono_ms(), took = now - p->start;
	char eta[32];

	if (!p->on || (!force && p->shown && now - p->last < PROGRESS_EVERY_MS))
		return;
	p->last = now;
	p->shown = true;
	/* \033[K clears what a longer earlier line left on the right. */
	fprintf(stderr, "\r%s: %lld %s", p->prog, (long long)done, what);
	if (took > 0)
		fprintf(stderr, ", %.0f/s", (double)done * 1000.0 / (double)took);
	if (fraction > 0 && fraction < 1 && took > 0)
		fprintf(stderr, ", ETA %s", timefmt_elapsed(eta, sizeof eta,
		    (int64_t)((double)took * (1 - fraction) / fraction)));
	if (extra && *extra)
		fprintf(stderr, ", %s", extra);
	fputs("\033[K", stderr);
	fflush(stderr);
}

void
progress_end(struct progress *p)
{
	if (p->on && p->shown)
		fputc('\n', stderr);
	p->shown = false;
}
