/*
 * bell — the work bell: rung whenever runs become queued (a submission,
 * a re-queue), so that a feed request waiting for work (wait_ms) looks
 * again at once.  A ring wakes one waiter, not all of them: a fleet of
 * idle executors must not stampede the store for every run submitted.  A
 * woken waiter that took a full feed, or none for a reason of its own (its
 * session ended), rings on, so a large submission wakes as many waiters as
 * it feeds.  A waiter registers before its first look at the queue and a
 * ring leaves a token for a registered one, so a ring between a look and
 * the wait after it is never missed.  Ringing inside the submitter's
 * transaction is enough: the woken waiter's look takes the store's mutex
 * after that transaction.  A session that ends (closed, revoked, expired,
 * replaced) wakes every waiter instead, rarely enough not to matter: the
 * ended session's waiter must get its 410 now, not when its wait runs out.
 *
 * The bell is below the handlers that ring it (admin.c, sessions.c,
 * work.c) and the feed that waits on it (work.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "clock.h"

#include "util.h"
#include "http.h"
#include "bell.h"

enum { BELL_SLICE_MS = 100 };

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int waiters;   /* registered: looking or waiting */
	int tokens;    /* rings not taken yet, at most one per waiter */
	unsigned ends; /* sessions ended so far */
} bell = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };

void
work_ring(void)
{
	pthread_mutex_lock(&bell.mu);
	if (bell.tokens < bell.waiters) {
		bell.tokens++;
		pthread_cond_signal(&bell.cv);
	}
	pthread_mutex_unlock(&bell.mu);
}

void
work_session_ended(void)
{
	pthread_mutex_lock(&bell.mu);
	bell.ends++;
	pthread_cond_broadcast(&bell.cv);
	pthread_mutex_unlock(&bell.mu);
}

unsigned
bell_ends(void)
{
	unsigned n;

	pthread_mutex_lock(&bell.mu);
	n = bell.ends;
	pthread_mutex_unlock(&bell.mu);
	return n;
}

void
bell_register(bool in)
{
	pthread_mutex_lock(&bell.mu);
	bell.waiters += in ? 1 : -1;
	if (bell.tokens > bell.waiters)
		bell.tokens = bell.waiters;
	pthread_mutex_unlock(&bell.mu);
}

bool
bell_await(int64_t ms, unsigned ends, struct MHD_Connection *conn)
{
	int64_t end = mono_ms() + ms, left;
	struct timespec until;
	bool rung;

	pthread_mutex_lock(&bell.mu);
	while (!bell.tokens && bell.ends == ends && (left = end - mono_ms()) > 0 &&
	    !atomic_load(&dsp.stopping)) {
		pthread_mutex_unlock(&bell.mu);
		if (peer_gone(conn))
			return false;
		pthread_mutex_lock(&bell.mu);
		clock_gettime(CLOCK_REALTIME, &until);
		left = left < BELL_SLICE_MS ? left : BELL_SLICE_MS;
		until.tv_nsec += (long)(left % 1000) * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (!bell.tokens && bell.ends == ends)
			pthread_cond_timedwait(&bell.cv, &bell.mu, &until);
	}
	if ((rung = bell.tokens > 0))
		bell.tokens--;
	pthread_mutex_unlock(&bell.mu);
	return rung;
}
