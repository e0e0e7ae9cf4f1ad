/*
 * jsonout — JSON Lines output.  Every record is built with jansson and
 * printed compact, one per line; field names are documented in doc/json.md.
 */
#ifndef EK_JSONOUT_H
#define EK_JSONOUT_H

#include <jansson.h>
#include <stdio.h>

/* Print obj as one compact line on f and drop the reference. 0 or -1. */
int json_emit(FILE *f, json_t *obj);



/* Make s valid UTF-8 of at most max bytes, in place: invalid bytes become
 * '?', and a cut never splits a character.  Returns the new length. */
size_t utf8_clip(char *s, size_t max);
#endif
