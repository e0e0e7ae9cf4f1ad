/* table — see table.h. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "table.h"
#include "text.h"
#include "timefmt.h"

struct table {
	char **names;        /* ncols: the column names, upper case (what -o matches) */
	char **heads;        /* ncols: the headings: the names, less a "_MS" suffix (the
	                      * cells of a duration in ms read as elapsed times) */
	char **cells;        /* nrows * ncols, row-major; NULL: empty */
	size_t ncols, nrows, cap;
	size_t *order, nshow;   /* the columns printed, in order */
	size_t filled;       /* cells of the last row filled */
};

static bool
ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && strcmp(s + n - t, tail) == 0;
}

struct table *
table_new(void)
{
	return calloc(1, sizeof(struct table));
}

void
table_free(struct table *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->ncols; i++) {
		free(t->names[i]);
		free(t->heads[i]);
	}
	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->names);
	free(t->heads);
	free(t->cells);
	free(t->order);
	free(t);
}

int
table_column(struct table *t, const char *name)
{
	char **names;
	size_t *order, i;

	if (t->nrows)
		return -1;   /* columns come first */
	if (!(names = realloc(t->names, (t->ncols + 1) * sizeof *names)))
		return -1;
	t->names = names;
	if (!(names = realloc(t->heads, (t->ncols + 1) * sizeof *names)))
		return -1;
	t->heads = names;
	if (!(order = realloc(t->order, (t->ncols + 1) * sizeof *order)))
		return -1;
	t->order = order;
	if (!(t->names[t->ncols] = strdup(name)))
		return -1;
	if (!(t->heads[t->ncols] = strndup(name, strlen(name) - (ends_with(name, "_ms") ? 3 : 0)))) {
		free(t->names[t->ncols]);
		return -1;
	}
	for (i = 0; name[i]; i++)
		t->names[t->ncols][i] = (char)toupper((unsigned char)name[i]);
	for (i = 0; t->heads[t->ncols][i]; i++)
		t->heads[t->ncols][i] = (char)toupper((unsigned char)name[i]);
	t->order[t->nshow++] = t->ncols++;
	return 0;
}

int
table_row(struct table *t)
{
	char **cells;
	size_t want = (t->nrows + 1) * t->ncols;

	if (want > t->cap) {
		size_t cap = want * 2;

		if (!(cells = realloc(t->cells, cap * sizeof *cells)))
			return -1;
		t->cells = cells;
		t->cap = cap;
	}
	memset(t->cells + t->nrows * t->ncols, 0, t->ncols * sizeof *t->cells);
	t->nrows++;
	t->filled = 0;
	return 0;
}

int
table_cell(struct table *t, const char *text)
{
	size_t n = strlen(text) + 1;
	char *c;

	if (!t->nrows || t->filled == t->ncols)
		return -1;
	if (*text) {
		if (!(c = malloc(n)))
			return -1;
		text_safe(c, n, text);   /* never longer than the text */
		t->cells[(t->nrows - 1) * t->ncols + t->filled] = c;
	}
	t->filled++;
	return 0;
}

/* A stored value as a human reads it, in a new string: moments as
 * date-times, durations in ms as elapsed times, text as it is (the table
 * makes it safe; never shell-quoted), null empty.  NULL: out of memory. */
static char *
cell_text(const char *key, json_t *v)
{
	char buf[64];
	json_int_t i = json_integer_value(v);

	if (!v || json_is_null(v))
		return strdup("");
	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_boolean(v))
		return strdup(json_is_true(v) ? "yes" : "no");
	if (json_is_integer(v) && (ends_with(key, "_at") || strcmp(key, "claim_until") == 0))
		return strdup(timefmt_when(buf, sizeof buf, i));
	if (json_is_integer(v) && ends_with(key, "_ms"))
		return strdup(timefmt_elapsed(buf, sizeof buf, i));
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

int
table_cell_json(struct table *t, const char *key, json_t *v)
{
	char *c = cell_text(key, v);
	int rc = c ? table_cell(t, c) : -1;

	free(c);
	return rc;
}

int
table_pair(struct table *t, const char *label, const char *value)
{
	return table_row(t) < 0 || table_cell(t, label) < 0 || table_cell(t, value ? value : "") < 0 ?
	    -1 : 0;
}

size_t
table_rows(const struct table *t)
{
	return t->nrows;
}

/* The index of the column named name (any case), or ncols. */
static size_t
column_index(const struct table *t, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < t->ncols; i++)   /* the name, or the heading it is printed under */
		if ((strlen(t->names[i]) == len && strncasecmp(t->names[i], name, len) == 0) ||
		    (strlen(t->heads[i]) == len && strncasecmp(t->heads[i], name, len) == 0))
			break;
	return i;
}

static void
valid_names(const struct table *t, char *why, size_t n, const char *bad, size_t badlen)
{
	size_t i, used;

	used = (size_t)snprintf(why, n, "unknown column '%.*s' (valid: ", (int)badlen, bad);
	for (i = 0; i < t->ncols && used < n; i++)
		used += (size_t)snprintf(why + used, n - used, "%s%s", i ? ", " : "", t->names[i]);
	if (used < n)
		snprintf(why + used, n - used, ")");
}

int
table_select(struct table *t, const char *list, char *why, size_t n)
{
	const char *p = list;
	size_t len, i, nshow = 0;

	for (;;) {
		len = strcspn(p, ",");
		if ((i = column_index(t, p, len)) == t->ncols) {
			valid_names(t, why, n, p, len);
			return -1;
		}
		t->order[nshow++] = i;
		if (!p[len] || nshow == t->ncols)
			break;
		p += len + 1;
	}
	if (p[len]) {
		snprintf(why, n, "-o: more columns than the %zu there are", t->ncols);
		return -1;
	}
	t->nshow = nshow;
	return 0;
}

/* Characters in a UTF-8 string: bytes that do not continue a character. */
static size_t
chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

static const char *
cell(const struct table *t, size_t row, size_t col)
{
	const char *c = t->cells[row * t->ncols + col];

	return c ? c : "-";
}

size_t
table_term_width(int fd)
{
	const char *env = getenv("COLUMNS");
	struct winsize ws;
	char *end;
	long n;

	if (env && *env) {
		errno = 0;
		n = strtol(env, &end, 10);
		if (!*end && errno == 0 && n > 0 && n <= 100000)
			return (size_t)n;
	}
	return isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 0;
}

/* The ellipsis a cut cell ends with: one character in a UTF-8 locale, as
 * systemctl(1) prints it, else three dots. */
static const char *
ellipsis(void)
{
	const char *v = getenv("LC_ALL");

	if (!v || !*v)
		v = getenv("LC_CTYPE");
	if (!v || !*v)
		v = getenv("LANG");
	return v && (strcasestr(v, "utf-8") || strcasestr(v, "utf8")) ? "\u2026" : "...";
}

/* Print s in at most width characters: whole when it fits, else its first
 * characters and the ellipsis.  Returns the characters printed. */
static size_t
put_cut(FILE *f, const char *s, size_t width, const char *dots)
{
	size_t n = chars(s), keep, d = chars(dots);
	const char *p = s;

	if (n <= width) {
		fputs(s, f);
		return n;
	}
	if (width <= d) {   /* too narrow for any of it: the start alone */
		for (keep = 0; *p && keep < width; keep++)
			do
				fputc(*p++, f);
			while (((unsigned char)*p & 0xC0) == 0x80);
		return width;
	}
	for (keep = 0; keep < width - d; keep++)
		do
			fputc(*p++, f);
		while (((unsigned char)*p & 0xC0) == 0x80);
	fputs(dots, f);
	return width;
}

static void
print_line(const struct table *t, FILE *f, const size_t *width, size_t row, bool header,
    const char *dots)
{
	size_t i, pad;
	const char *s;

	for (i = 0; i < t->nshow; i++) {
		s = header ? t->heads[t->order[i]] : cell(t, row, t->order[i]);
		pad = put_cut(f, s, width[i], dots);
		if (i + 1 == t->nshow)
			break;
		for (; pad < width[i] + 2; pad++)
			fputc(' ', f);
	}
	fputc('\n', f);
}

/* Narrow the widest columns, one character at a time, until the line fits
 * fit->width or every column is down to its floor.  A column whose cells
 * are all short (times, outcomes, counts, the 20 characters of a session
 * id) is never cut; a longer one is cut no shorter than its header and
 * CUT_MIN characters (an id cut shorter tells nothing).  What still does
 * not fit, the terminal wraps. */
#define KEEP_WHOLE 20
#define CUT_MIN 16
static void
narrow(const struct table *t, size_t *width, const struct table_fit *fit)
{
	size_t i, total = 0, best, *floor = calloc(t->nshow ? t->nshow : 1, sizeof *floor);

	if (!floor)
		return;   /* printed whole: wider, never wrong */
	for (i = 0; i < t->nshow; i++) {
		floor[i] = fit->headings ? chars(t->heads[t->order[i]]) : 0;
		floor[i] = floor[i] > CUT_MIN ? floor[i] : CUT_MIN;
		if (width[i] <= KEEP_WHOLE)
			floor[i] = width[i];
		total += width[i] + (i ? 2 : 0);
	}
	while (total > fit->width) {
		best = t->nshow;
		for (i = 0; i < t->nshow; i++)
			if (width[i] > floor[i] && (best == t->nshow || width[i] > width[best]))
				best = i;
		if (best == t->nshow)
			break;
		width[best]--;
		total--;
	}
	free(floor);
}

int
table_print_fit(const struct table *t, FILE *f, const struct table_fit *fit)
{
	size_t *width = calloc(t->nshow ? t->nshow : 1, sizeof *width), i, r, w;
	const char *dots = ellipsis();

	if (!width)
		return -1;
	for (i = 0; i < t->nshow; i++) {
		width[i] = fit->headings ? chars(t->heads[t->order[i]]) : 0;
		for (r = 0; r < t->nrows; r++)
			if ((w = chars(cell(t, r, t->order[i]))) > width[i])
				width[i] = w;
	}
	if (fit->width && !fit->wide)
		narrow(t, width, fit);
	if (fit->headings)
		print_line(t, f, width, 0, true, dots);
	for (r = 0; r < t->nrows; r++)
		print_line(t, f, width, r, false, dots);
	free(width);
	return ferror(f) ? -1 : 0;
}

int
table_print(const struct table *t, FILE *f, bool header)
{
	struct table_fit whole = { .width = 0, .wide = true, .headings = header };

	return table_print_fit(t, f, &whole);
}
