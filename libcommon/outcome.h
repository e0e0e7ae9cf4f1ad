/*
 * outcome — the words of a run's result: how the end of its guest
 * (guest.h) becomes the outcome, exit code and message that
 * result_choose() stores (result.h) and doc/json.md lists.
 */
#ifndef EK_OUTCOME_H
#define EK_OUTCOME_H

#include <stddef.h>
#include <stdint.h>

#include "guest.h"

/* The result of a guest of program (run with a timeout of timeout_ms) that
 * ended as end: *outcome "exec_failed" (not run: code 126; exec failed:
 * guest_exit_code), "timeout" (124), "cancelled" (128 + SIGTERM), "killed"
 * or "exited" (guest_exit_code), and a one-line message into msg (n
 * bytes).  *outcome points to a constant. */
void outcome_describe(const struct guest_end *end, const char *program, int64_t timeout_ms,
    const char **outcome, int *code, char *msg, size_t n);

#endif
