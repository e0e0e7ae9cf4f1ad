/*
 * inspections — a client's InspectRetainedRun, relayed; client tokens
 * checked.
 */
#ifndef EK_DISPATCHER_INSPECTIONS_H
#define EK_DISPATCHER_INSPECTIONS_H

#include <stddef.h>

#include "http.h"

/* POST /v1/sessions/{sid}/inspections/{id} (settle.c's h_inspection_answer()),
 * before its transaction: the session id into sid (n bytes), the body
 * parsed, its size checked; 0, or 400 (answer set). */
int inspection_answer_check(struct req *rq, char *sid, size_t n);
/* ... inside its transaction: session sid gated and the answer recorded
 * once (invariant 5); 200, or the error status (answer set). */
int inspection_answer_record(struct req *rq, const char *sid);

handler_fn h_inspection_new, h_inspection_get, h_inspection_list;

#endif
