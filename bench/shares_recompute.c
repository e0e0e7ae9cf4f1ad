/*
 * shares_recompute — what one capacity change costs the shares cache,
 * against recomputing every share.
 *
 * A fresh state in a temporary directory gets PROGRAMS running programs
 * (default 1000), each declaring DESTINATIONS destinations (default 100),
 * joined through the shares module (libcommon/shares.h) as exec-run does,
 * and every share computed once.  Then, per round (BENCH_ROUNDS, default 5):
 *
 *   one change   set the capacity of one destination, then read every share
 *                of that dimension (shares_list): only those PROGRAMS shares
 *                are stale, so only they are recomputed
 *   full         invalidate every dimension (a capacity change each, not
 *                timed), then read every share: all PROGRAMS x (1 +
 *                DESTINATIONS) are recomputed — what a single "dirty" flag
 *                would cost after any change
 *   publication  (one change, as exec-shares does it) the recomputation plus
 *                rewriting the PROGRAMS limits files, each fsync'd
 *
 * and prints the medians and the ratio full / one change.  It asserts
 * nothing.  Build against a configured build tree B:
 *
 *   cc -std=c11 -O2 -D_GNU_SOURCE -Ilibcommon -IB/libcommon bench/shares_recompute.c \
 *      B/libcommon/libcommon.a $(pkg-config --cflags --libs sqlite3 jansson) -lm
 *   ./a.out [PROGRAMS [DESTINATIONS]]
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shares.h"
#include "state.h"

static const char PROG[] = "shares_recompute";

struct count {
	long read, recomputed;
};

static int
count_share(const struct share *s, void *arg)
{
	struct count *c = arg;

	c->read++;
	c->recomputed += s->recomputed;
	return 0;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static double
median_ms(int64_t *us, int n)
{
	qsort(us, (size_t)n, sizeof *us, cmp_i64);
	return (double)us[n / 2] / 1000.0;
}

/* Monotonic microseconds. */
static int64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
die(const struct ek_err *e)
{
	ek_report(PROG, e);
	exit(1);
}

static void
dest_name(char *buf, size_t n, int d)
{
	snprintf(buf, n, "dest:d%03d", d);
}

/* PROGRAMS members of executor and of every destination, weights 1..3. */
static void
populate(struct state *st, int programs, int dests)
{
	struct ek_err e = { 0 };
	char run[32], name[32];
	json_t *policy, *list = json_array();
	int i;

	for (i = 0; i < dests; i++) {
		snprintf(name, sizeof name, "d%03d", i);
		json_array_append_new(list, json_string(name));
		dest_name(name, sizeof name, i);
		if (shares_set_capacity(st, name, 1000000 + i, SHARES_NO_PUBLISH, NULL, NULL, &e) < 0)
			die(&e);
	}
	if (shares_set_capacity(st, "executor", 125000000, SHARES_NO_PUBLISH, NULL, NULL, &e) < 0)
		die(&e);
	for (i = 0; i < programs; i++) {
		snprintf(run, sizeof run, "r%05d", i);
		policy = json_pack("{s:O, s:i}", "destinations", list, "weight", 1 + i % 3);
		if (shares_join(st, run, policy, SHARES_NO_PUBLISH, NULL, &e) < 0)
			die(&e);
		json_decref(policy);
	}
	json_decref(list);
}

/* Read every share of dim (NULL: all) and time it; counts into c. */
static int64_t
timed_list(struct state *st, const char *dim, struct count *c)
{
	struct ek_err e = { 0 };
	int64_t t0 = mono_us();

	*c = (struct count){ 0 };
	if (shares_list(st, dim, count_share, c, &e) < 0)
		die(&e);
	return mono_us() - t0;
}

static void
set_quiet(struct state *st, const char *dim, int64_t cap)
{
	struct ek_err e = { 0 };

	if (shares_set_capacity(st, dim, cap, SHARES_NO_PUBLISH, NULL, NULL, &e) < 0)
		die(&e);
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

int
main(int argc, char **argv)
{
	int programs = argc > 1 ? atoi(argv[1]) : 1000, dests = argc > 2 ? atoi(argv[2]) : 100;
	int rounds = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 5, r, d;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int64_t one[64], full[64], pub[64], t0;
	char dir[4096], state_dir[4200], name[32];
	struct count c1 = { 0 }, cf = { 0 };
	struct shares_note note;
	struct ek_err e = { 0 };
	struct state st;

	if (programs < 1 || dests < 1 || dests > 999 || rounds < 1 || rounds > 64) {
		fprintf(stderr, "usage: %s [PROGRAMS [DESTINATIONS (1-999)]]; BENCH_ROUNDS 1-64\n", PROG);
		return 64;
	}
	snprintf(dir, sizeof dir, "%s/shares-bench.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(state_dir, sizeof state_dir, "%s/state", dir);
	if (state_open(&st, state_dir, STATE_CREATE, &e) < 0)
		die(&e);
	fprintf(stderr, "%s: %d programs x %d destinations in %s\n", PROG, programs, dests, dir);
	populate(&st, programs, dests);
	timed_list(&st, NULL, &cf);   /* every share computed once */
	for (r = 0; r < rounds; r++) {
		dest_name(name, sizeof name, (r * 37) % dests);
		set_quiet(&st, name, 500000 + r);
		one[r] = timed_list(&st, name, &c1);
		for (d = 0; d < dests; d++) {
			dest_name(name, sizeof name, d);
			set_quiet(&st, name, 2000000 + r * 1000 + d);
		}
		set_quiet(&st, "executor", 100000000 + r);
		full[r] = timed_list(&st, NULL, &cf);
		dest_name(name, sizeof name, (r * 41) % dests);
		memset(&note, 0, sizeof note);
		t0 = mono_us();
		if (shares_set_capacity(&st, name, 300000 + r, 0, NULL, &note, &e) < 0)
			die(&e);
		pub[r] = mono_us() - t0;
		fprintf(stderr, "%s: round %d: one change %ld recomputed, full %ld recomputed, "
		    "%d limits files\n", PROG, r + 1, c1.recomputed, cf.recomputed, note.rewritten);
	}
	printf("shares: %d programs x %d destinations = %ld shares, median of %d rounds\n",
	    programs, dests, cf.read, rounds);
	printf("one capacity change, read its dimension: %8.2f ms (%ld shares recomputed)\n",
	    median_ms(one, rounds), c1.recomputed);
	printf("full recompute of every share:          %8.2f ms (%ld shares recomputed)\n",
	    median_ms(full, rounds), cf.recomputed);
	printf("ratio full / one change:                %8.1f x\n", median_ms(full, rounds) / median_ms(one, rounds));
	printf("one change published (recompute + %d limits files, fsync each): %.2f ms\n",
	    note.rewritten, median_ms(pub, rounds));
	state_close(&st);
	if (!getenv("BENCH_KEEP"))
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
