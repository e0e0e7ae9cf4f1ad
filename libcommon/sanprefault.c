/*
 * sanprefault.c — linked into the sanitized build only (configure
 * --enable-sanitizers).
 *
 * At every exit LeakSanitizer scans the writable segments of each loaded
 * module for pointers, AddressSanitizer's own runtime among them: 5.6 MB
 * of .bss that the process never touched.  Each page of it is faulted in
 * one at a time by that scan, some 1 200 faults, which made up a third of
 * a sanitized process's life on a slow machine (the test suite starts
 * tens of thousands).  Asking the kernel to map them all at once, before
 * main(), costs a fraction of that.  A kernel older than 5.14 refuses the
 * advice (EINVAL) and the scan faults them in as before.
 */
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static int
populate_runtime(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin, end;
	int i;

	(void)size;
	(void)data;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libasan"))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		begin = (info->dlpi_addr + ph->p_vaddr + page - 1) & ~(page - 1);
		end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
		if (end > begin)
			(void)madvise((void *)begin, end - begin, MADV_POPULATE_READ);
	}
	return 1;
}

__attribute__((constructor)) static void
sanprefault(void)
{
	dl_iterate_phdr(populate_runtime, NULL);
}
