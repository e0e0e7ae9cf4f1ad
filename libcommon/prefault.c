/*
 * prefault.c — a constructor linked into every program, as an object (an
 * archive member nothing refers to would be left out).
 *
 * On the virtual machines we run on a page fault traps to the hypervisor:
 * 12 µs for each page touched one at a time, against 0.6 µs for each page
 * mapped by one madvise(MADV_POPULATE_WRITE) (bench/README.md, "Page
 * faults at start").  So before main() a program maps at once what it is
 * sure to touch:
 *
 *   - the start of its heap, where SQLite parses the schema and keeps its
 *     page cache: a lookup's faults go from 170 to 104 (/bin/true: 48);
 *   - under AddressSanitizer, the runtime's .bss, which LeakSanitizer
 *     scans at every exit (5.6 MB, some 1 200 faults).
 *
 * Mapping the program's own code too saved 20 faults more and no time that
 * could be measured, so it is left to fault in.  All of it is advice: a
 * kernel older than 5.14 refuses it (EINVAL) and the pages fault in as
 * before.
 */
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* About what a lookup's heap grows to: its faults stop falling here. */
#define HEAP_PREFAULT (256 * 1024)

static uintptr_t page_size;

static void
populate(uintptr_t begin, uintptr_t end, int advice)
{
	begin = (begin + page_size - 1) & ~(page_size - 1);
	end &= ~(page_size - 1);
	if (end > begin)
		(void)madvise((void *)begin, end - begin, advice);
}

/* glibc grows the heap by the top pad beyond each request and keeps that
 * much when it trims, so the pages populated here stay.  Under another
 * allocator (AddressSanitizer's) the first block is not below the break,
 * and nothing is done. */
static void
populate_heap(void)
{
	void *first, *brk_now;
	uintptr_t begin, end;

	if (mallopt(M_TOP_PAD, HEAP_PREFAULT) != 1)
		return;
	first = malloc(1);
	brk_now = sbrk(0);
	begin = (uintptr_t)first & ~(page_size - 1);
	end = (uintptr_t)brk_now;
	if (first && brk_now != (void *)-1 && begin < end && end - begin <= 2 * HEAP_PREFAULT)
		populate(begin, end, MADV_POPULATE_WRITE);
	free(first);
}

#ifdef __SANITIZE_ADDRESS__
static int
populate_asan_runtime(struct dl_phdr_info *info, size_t size, void *data)
{
	int i;

	(void)size;
	(void)data;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libasan"))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t begin = info->dlpi_addr + ph->p_vaddr;

		/* only ever read, by the scan: no copies are made */
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W))
			populate(begin, begin + ph->p_memsz, MADV_POPULATE_READ);
	}
	return 1;
}
#endif

__attribute__((constructor)) static void
prefault(void)
{
	page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
	populate_heap();
#ifdef __SANITIZE_ADDRESS__
	dl_iterate_phdr(populate_asan_runtime, NULL);
#endif
}
