/*
 * table — human tables whose columns are sized to their content, as ps(1)
 * and lsblk(8) size theirs: every row is held until the end, then each
 * column is as wide as its widest cell (counted in characters), columns
 * are two spaces apart and the last one is not padded.  Cells go through
 * text_safe() (text.h), so foreign text cannot reach the terminal raw; an
 * empty cell prints as "-" so every column stays readable by awk.
 *
 * -o COLUMNS: table_select() keeps the named columns, in the order named
 * (names are the headers, matched without regard to case).
 */
#ifndef EK_TABLE_H
#define EK_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct table;

/* A new table without columns; NULL when out of memory. */
struct table *table_new(void);
void table_free(struct table *t);

/* Add a column headed name (upper-cased when printed).  0 or -1. */
int table_column(struct table *t, const char *name);

/* Start a new row; the next table_cell() calls fill it left to right. */
int table_row(struct table *t);
int table_cell(struct table *t, const char *text);

/* A stored value (v, of the column or field key) as a human reads it:
 * moments (key ending in _at, and claim_until) as date-times, durations
 * (key ending in _ms) as elapsed times (timefmt.h; such a column's
 * heading drops the _MS: ELAPSED, DURATION), text as it is (made safe,
 * never shell-quoted), booleans yes/no, null empty, anything else as
 * compact JSON. */
int table_cell_json(struct table *t, const char *key, json_t *v);

/* A row of two cells: label and value (NULL: empty). */
int table_pair(struct table *t, const char *label, const char *value);

/* Keep only the columns of list (comma-separated), in its order.  -1 with
 * why naming the unknown column and the valid ones. */
int table_select(struct table *t, const char *list, char *why, size_t n);

/* Print the header (unless header is false) and every row, each cell
 * whole.  0 or -1. */
int table_print(const struct table *t, FILE *f, bool header);

/*
 * Tables that fit the terminal, as ps(1) and systemctl(1) make theirs:
 * when the line would be wider than width, the widest columns are narrowed
 * (never below their header, nor below 12 characters) and a cell longer
 * than its column is cut, its end replaced by an ellipsis.  -w (wide)
 * keeps every cell whole; width 0 (a pipe, no COLUMNS) never cuts.
 */
struct table_fit {
	size_t width;      /* the terminal's columns; 0: no limit */
	bool wide;         /* never cut a cell */
	bool headings;     /* print the header line (even with no rows) */
};

/* The width to fit on fd: $COLUMNS when it is a positive number, else the
 * terminal's (TIOCGWINSZ) when fd is one, else 0. */
size_t table_term_width(int fd);

/* Print t as fit says.  0 or -1. */
int table_print_fit(const struct table *t, FILE *f, const struct table_fit *fit);

/* Rows added so far. */
size_t table_rows(const struct table *t);

#endif
