/*
 * text — make foreign text safe for a terminal or a log line.
 *
 * Text that comes from a dispatcher (ids, error details, reply bodies) or
 * from a guest may hold escape sequences that retitle or clear an
 * operator's terminal, or newlines that forge log lines.  Before such text
 * is printed for a human it goes through text_safe(): every C0 control
 * (newline and tab included), DEL, every C1 control (U+0080 to U+009F,
 * U+009B, the one-byte CSI, among them), every character that reorders
 * what is shown (the bidirectional overrides, embeddings, isolates and
 * marks: U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C) or
 * breaks a line (U+2028, U+2029), and every byte that is not part of
 * valid UTF-8 becomes '?'.  Valid UTF-8 otherwise passes unchanged.
 */
#ifndef EK_TEXT_H
#define EK_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Copy src into dst (n bytes, NUL-terminated, cut on a character
 * boundary), each unsafe byte or character replaced by '?'; returns dst. */
char *text_safe(char *dst, size_t n, const char *src);

/* The one id alphabet (run ids, transaction ids, what the dispatcher
 * issues in that shape): is s 1 to max bytes of [A-Za-z0-9._:-]?  With
 * min 0 the empty string passes too (a prefix being typed). */
bool text_is_id(const char *s, size_t min, size_t max);

/* Is s exactly n lowercase hex digits, as execkit and the reference
 * dispatcher make them (keys, credentials, the hex of an issued id)? */
bool text_is_hex(const char *s, size_t n);

/* The same, either case: what the dispatcher accepts from a client. */
bool text_is_xdigits(const char *s, size_t n);

/* The index of s in words (NULL-terminated), or -1: the one "word in a
 * list" lookup (a field name, a kind, an outcome). */
int text_word_index(const char *s, const char *const *words);

/* Is s one of words? */
bool text_word_in(const char *s, const char *const *words);

/* words (NULL-terminated) for a message, "a, b or c", into buf (n bytes,
 * cut if need be); returns buf.  A list in a message is made from the
 * list the code checks, never copied into the message by hand. */
char *text_join(char *buf, size_t n, const char *const *words);

#endif
