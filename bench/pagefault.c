/*
 * pagefault.c — what a page costs the first time it is touched, one fault
 * at a time against all of them mapped by one madvise(MADV_POPULATE_WRITE)
 * (Linux 5.14).  Behind libcommon/prefault.c; see bench/README.md,
 * "Page faults at start".
 *
 *   cc -O2 -o pagefault bench/pagefault.c && ./pagefault 64
 *
 * prints the best of 50 rounds of each, in µs per page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define ROUNDS 50
#define PAGE 4096

static double
now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The best time, in µs, to make PAGES fresh pages present. */
static double
best_us(long pages, int populate)
{
	double best = -1;
	size_t len = (size_t)pages * PAGE;

	for (int r = 0; r < ROUNDS; r++) {
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		double t0, d;

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		t0 = now_us();
		if (populate) {
			if (madvise(p, len, MADV_POPULATE_WRITE) != 0) {
				perror("madvise(MADV_POPULATE_WRITE)");
				exit(1);
			}
		} else {
			for (long i = 0; i < pages; i++)
				p[i * PAGE] = 1;
		}
		d = now_us() - t0;
		if (best < 0 || d < best)
			best = d;
		munmap(p, len);
	}
	return best;
}

int
main(int argc, char **argv)
{
	long pages = argc > 1 ? atol(argv[1]) : 64;
	double touched, populated;

	if (pages < 1 || pages > 1 << 20) {
		fprintf(stderr, "usage: pagefault [PAGES]  (1..1048576, default 64)\n");
		return 64;
	}
	touched = best_us(pages, 0);
	populated = best_us(pages, 1);
	printf("%ld pages: touched one at a time %.2f us/page, populated at once %.2f us/page (%.1fx)\n",
	    pages, touched / pages, populated / pages, touched / populated);
	return 0;
}
