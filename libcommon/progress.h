/*
 * progress — one line on a terminal for a long operation (a large accept,
 * a drain): how far, how fast, and how long is left.  Nothing at all when
 * standard error is not a terminal, so that logs and pipes stay clean.
 */
#ifndef EK_PROGRESS_H
#define EK_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct progress {
	const char *prog;
	bool on;          /* standard error is a terminal */
	bool shown;       /* a line is on the screen */
	int64_t start;    /* mono_ms() at progress_begin() */
	int64_t last;     /* when the line was last drawn */
};

void progress_begin(struct progress *p, const char *prog);

/* Draw the line; redraw it at most every 250 ms unless force: "PROG: DONE WHAT,
 * RATE/s[, ETA left][, EXTRA]".  fraction is how much of the whole is done
 * (0..1), or negative when the whole is unknown (then no ETA). */
void progress_show(struct progress *p, int64_t done, const char *what, double fraction,
    const char *extra, bool force);

/* End the line (a newline if one was drawn). */
void progress_end(struct progress *p);

#endif
