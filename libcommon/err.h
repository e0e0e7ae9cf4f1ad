/*
 * err — one error value that library code fills and main() reports.
 *
 * The library never prints and never exits: a failing function fills a
 * struct ek_err with an exit code from sysexits.h and a message naming the
 * subject and the cause, and returns -1.  main() prints it once as
 * "exec-NAME: message" and exits with the code.
 */
#ifndef EK_ERR_H
#define EK_ERR_H

#include <sysexits.h>

/* Exit codes every tool shares; tests and docs read them from here. */
enum {
	EK_OK = EX_OK,                /* 0 */
	EK_USAGE = EX_USAGE,          /* 64 bad option or operand */
	EK_DATAERR = EX_DATAERR,      /* 65 bad input, corrupt state */
	EK_NOINPUT = EX_NOINPUT,      /* 66 no such state directory, run or result */
	EK_NODEST = EX_NOHOST,        /* 68 the run did not declare that destination */
	EK_UNAVAILABLE = EX_UNAVAILABLE, /* 69 dispatcher unavailable / not implemented */
	EK_SOFTWARE = EX_SOFTWARE,    /* 70 internal error */
	EK_OSERR = EX_OSERR,          /* 71 system call failed */
	EK_CANTCREAT = EX_CANTCREAT,  /* 73 cannot create state */
	EK_IOERR = EX_IOERR,          /* 74 read or write failed */
	EK_TEMPFAIL = EX_TEMPFAIL,    /* 75 try again (busy, claimed, budget spent) */
	EK_PROTOCOL = EX_PROTOCOL,    /* 76 dispatcher refused or answered nonsense */
	EK_NOSESSION = EX_NOPERM,     /* 77 not the current session, and nothing else */
	EK_VERSION = EX_CONFIG,       /* 78 state from another package version */
	/* 78 too: unsafe permissions on the state (another owner, a mode that lets
	 * others in, a symbolic link).  Like a foreign version, a configuration
	 * the tool refuses and a restart cannot mend, so EX_CONFIG and not
	 * EX_NOPERM: 77 stays "not the current session", which exec-loop and
	 * scripts act on (stop, open a new session). */
	EK_UNSAFE = EX_CONFIG,
};

struct ek_err {
	int code;
	char msg[1024];
};

/* Fill e (if not NULL) with code and a printf-style message; return -1. */
int ek_fail(struct ek_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Put context before the message e already holds, with code: e->msg
 * becomes "CONTEXT: earlier message" (just CONTEXT when it held none).
 * The earlier message is copied first, so it may be passed nowhere else:
 * never give e->msg as an argument of ek_fail() on the same e (the
 * buffer would be read while it is written).  Returns -1. */
int ek_wrap(struct ek_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Reset e to "no error". */
void ek_clear(struct ek_err *e);

/* Print "prog: msg" on stderr and return e->code (EK_SOFTWARE if unset). */
int ek_report(const char *prog, const struct ek_err *e);

#endif
