/*
 * field — checks on the string fields of a JSON object the dispatcher sent,
 * before any of them is used: in a request path, in the state, on a
 * terminal.  Kept apart from client.h so that a program which only reads
 * the state (exec-inspect, linked statically) does not link HTTP with them.
 */
#ifndef EK_FIELD_H
#define EK_FIELD_H

#include <jansson.h>
#include <stddef.h>

/* An id the dispatcher issued, in the shape doc/protocol.md gives it:
 * prefix followed by exactly hex lowercase hex digits; NULL if not (an id
 * such as ".." would otherwise become part of a request path). */
const char *field_shaped(json_t *o, const char *key, const char *prefix, size_t hex);

/* A string field of at most max bytes of [A-Za-z0-9._:-]; NULL if not. */
const char *field_id(json_t *o, const char *key, size_t max);

#endif
