/* proc — see proc.h. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

int64_t
proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	const char *p;
	FILE *f;
	size_t n;
	int field;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name (field 2) may hold spaces and ')': skip past the last ')'. */
	if (!(p = strrchr(buf, ')')))
		return -1;
	/* Field 3 is the state: a zombie (Z) or dead (X) process has finished,
	 * even if nobody has reaped it yet. */
	if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
		return -1;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return *p ? strtoll(p, NULL, 10) : -1;
}

bool
proc_alive(pid_t pid, int64_t start)
{
	return pid > 0 && start >= 0 && proc_start_time(pid) == start;
}

void
proc_self_id(char *buf, size_t n)
{
	pid_t pid = getpid();

	snprintf(buf, n, "%d:%lld", (int)pid, (long long)proc_start_time(pid));
}

int
proc_self_exe(char *buf, size_t n)
{
	ssize_t got = readlink("/proc/self/exe", buf, n);

	if (got < 0)
		return -1;
	if ((size_t)got >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	buf[got] = '\0';
	return 0;
}

bool
proc_id_alive(const char *id)
{
	long long pid, start;

	if (!id || sscanf(id, "%lld:%lld", &pid, &start) != 2)
		return false;
	return proc_alive((pid_t)pid, start);
}

void
proc_keep_heap(void)
{
	/* (a sanitizer's allocator ignores these) */
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
	mallopt(M_MMAP_THRESHOLD, 16 << 20);
	mallopt(M_TOP_PAD, 4 << 20);
}
