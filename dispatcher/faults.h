/*
 * faults — failures injected on purpose, for the executor's tests: the
 * queue, and what each kind does (served in a request's place by
 * routes.c).
 */
#ifndef EK_DISPATCHER_FAULTS_H
#define EK_DISPATCHER_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum fault_kind { F_NONE, F_DELAY, F_DROP_ACK, F_5XX, F_429, F_RESET, F_MALFORMED, F_HANG,
	F_4XX, F_LIE, F_KINDS };

#define FAULT_BODY_MAX 2048

struct fault {
	int kind;                        /* enum fault_kind; F_NONE = no fault */
	int64_t count, delay_ms;
	char path[256];                  /* applies to paths with this prefix */
	int status;                      /* F_LIE: the status to answer */
	char body[FAULT_BODY_MAX];       /* F_LIE: the body to answer, verbatim */
	bool chunked;                    /* F_LIE: in chunks of a few bytes */
};

/* The kind's name, as the admin API and the report log spell it. */
const char *fault_name(int kind);
/* Is any fault queued?  Without one a request takes none, and never
 * reaches the fault hook (routes.c). */
bool fault_any(void);
/* Take one use of the first queued fault whose path prefixes path. */
struct fault fault_take(const char *path);
/* Take one use of the first fault queued at point (its path, exactly):
 * a point inside the dispatcher that no request's path names. */
struct fault fault_take_at(const char *point);
/* Parse a fault request into f; NULL if valid, else why not. */
const char *fault_parse(json_t *in, struct fault *f);
/* Queue f; -1 if the queue is full. */
int fault_queue(const struct fault *f);
/* Forget every queued fault; how many there were. */
size_t fault_clear(void);

#endif
