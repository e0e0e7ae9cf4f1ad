/*
 * proc — process identity, and a process's own heap.  A pid alone is not
 * an identity (pids are reused), so a supervisor is named by (pid, start
 * time in clock ticks since boot, field 22 of /proc/PID/stat).
 */
#ifndef EK_PROC_H
#define EK_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Start time of pid, or -1 if there is no such process. */
int64_t proc_start_time(pid_t pid);

/* True when pid still names the process that started at start. */
bool proc_alive(pid_t pid, int64_t start);

/* "PID:START" of this process, for claim owners. */
void proc_self_id(char *buf, size_t n);

/* The path of this process's program (/proc/self/exe) into buf, of n
 * bytes: 0, or -1 (errno; ENAMETOOLONG when it does not fit). */
int proc_self_exe(char *buf, size_t n);

/* Parse "PID:START"; true when it names a live process. */
bool proc_id_alive(const char *id);

/* Keep the heap this process frees mapped, for reuse, instead of handing
 * it back at once.  A supervisor forks a guest for every run: after each
 * fork, heap pages given back and taken again fault anew (and giving
 * them back flushes other CPUs' TLBs): on a virtual machine where a fault
 * traps to the hypervisor, that cost it several percent of its time. */
void proc_keep_heap(void);

#endif
