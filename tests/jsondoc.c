/*
 * jsondoc — check JSON Lines against the record tables of doc/json.md.
 *
 *   jsondoc DOC --records       print every documented record name
 *   jsondoc DOC RECORD          check each line of stdin as RECORD
 *   jsondoc DOC @event          ... as the record its "event" field names
 *
 * DOC's records are "### record: NAME" headings, each followed by a table
 * "| field | type | meaning |".  A type is words joined by " or ":
 * string, integer, number, boolean, object, array, null ("array of
 * strings" is an array).  A field whose meaning starts with "optional" may
 * be absent.  A field "p.c" describes member c of object p: when p is an
 * object, its members are checked like the record's own.
 *
 * Every line must be a JSON object; each of its keys (and each member of a
 * checked object) must be documented for its record, each documented
 * field not optional must be present, and each value must have a
 * documented type.  Problems go to stderr; stdout gets the name of the
 * record of each line.  Exit 0 all good, 1 a line does not match, 2 usage
 * or a malformed DOC.  Used by tests/json-doc.bats.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

enum { T_STRING = 1, T_INTEGER = 2, T_NUMBER = 4, T_BOOLEAN = 8, T_OBJECT = 16, T_ARRAY = 32, T_NULL = 64 };

struct field {
	char name[128];
	int types;
	bool optional;
};

struct record {
	char name[64];
	struct field f[160];
	int n;
};

static struct record recs[64];
static int nrecs;

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t' || *s == '`')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '`'))
		*--e = '\0';
	return s;
}

/* "integer or null" -> T_INTEGER | T_NULL; 0 for a word outside the vocabulary. */
static int
parse_type(const char *s)
{
	static const struct { const char *w; int t; } words[] = {
		{ "string", T_STRING }, { "integer", T_INTEGER }, { "number", T_NUMBER | T_INTEGER },
		{ "boolean", T_BOOLEAN }, { "object", T_OBJECT }, { "array", T_ARRAY }, { "null", T_NULL },
	};
	char buf[256], *alt, *save = NULL;
	int t = 0;
	size_t i, len;

	snprintf(buf, sizeof buf, "%s", s);
	for (alt = strtok_r(buf, ",", &save); alt; alt = strtok_r(NULL, ",", &save)) {
		/* alternatives: "a or b"; only the first word of each counts */
		char *p = alt;

		while (p && *p) {
			char *or = strstr(p, " or ");

			if (or)
				*or = '\0';
			p = trim(p);
			for (i = 0; i < sizeof words / sizeof words[0]; i++) {
				len = strlen(words[i].w);
				if (strncmp(p, words[i].w, len) == 0 && (p[len] == '\0' || p[len] == ' '))
					break;
			}
			if (i == sizeof words / sizeof words[0])
				return 0;
			t |= words[i].t;
			p = or ? or + 4 : NULL;
		}
	}
	return t;
}

static int
load_doc(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	struct record *r = NULL;
	int lineno = 0, row = 0;

	if (!f) {
		perror(path);
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (strncmp(line, "### record: ", 12) == 0) {
			if (nrecs == (int)(sizeof recs / sizeof recs[0]))
				goto full;
			r = &recs[nrecs++];
			snprintf(r->name, sizeof r->name, "%s", trim(line + 12));
			row = 0;
			continue;
		}
		if (!r)
			continue;
		if (line[0] != '|') {
			if (row > 0 && line[0] != '\n')
				r = NULL;   /* the table ended */
			continue;
		}
		if (row++ < 2)      /* header and separator */
			continue;
		{
			char *cell[4] = { 0 }, *p = line + 1, *bar;
			int c = 0;
			struct field *fd;

			while (c < 4 && (bar = strchr(p, '|'))) {
				*bar = '\0';
				cell[c++] = trim(p);
				p = bar + 1;
			}
			if (c < 3 || !*cell[0]) {
				fprintf(stderr, "%s:%d: a table row needs field, type and meaning\n", path, lineno);
				fclose(f);
				return -1;
			}
			if (r->n == (int)(sizeof r->f / sizeof r->f[0]))
				goto full;
			fd = &r->f[r->n++];
			snprintf(fd->name, sizeof fd->name, "%s", cell[0]);
			if (!(fd->types = parse_type(cell[1]))) {
				fprintf(stderr, "%s:%d: field '%s': unknown type '%s'\n", path, lineno, cell[0], cell[1]);
				fclose(f);
				return -1;
			}
			fd->optional = strncasecmp(cell[2], "optional", 8) == 0;
		}
	}
	fclose(f);
	return 0;
full:
	fprintf(stderr, "%s:%d: too many records or fields for jsondoc\n", path, lineno);
	fclose(f);
	return -1;
}

static const struct record *
find_record(const char *name)
{
	int i;

	for (i = 0; i < nrecs; i++)
		if (strcmp(recs[i].name, name) == 0)
			return &recs[i];
	return NULL;
}

static int
type_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING: return T_STRING;
	case JSON_INTEGER: return T_INTEGER;
	case JSON_REAL: return T_NUMBER;
	case JSON_TRUE: case JSON_FALSE: return T_BOOLEAN;
	case JSON_OBJECT: return T_OBJECT;
	case JSON_ARRAY: return T_ARRAY;
	default: return T_NULL;
	}
}

static int bad;

static void
problem(int lineno, const char *rec, const char *fmt, const char *a)
{
	fprintf(stderr, "line %d: record %s: ", lineno, rec);
	fprintf(stderr, fmt, a);
	fputc('\n', stderr);
	bad = 1;
}

/*
 * Check the members of obj against the fields named prefix + member
 * (prefix "" for the record itself, "p." for object p).
 */
static void
check_object(const struct record *r, json_t *obj, const char *prefix, int lineno)
{
	size_t plen = strlen(prefix);
	const char *key;
	json_t *v;
	char full[256];
	int i;

	json_object_foreach(obj, key, v) {
		snprintf(full, sizeof full, "%s%s", prefix, key);
		for (i = 0; i < r->n && strcmp(r->f[i].name, full) != 0; i++)
			;
		if (i == r->n)
			problem(lineno, r->name, "field '%s' is not documented", full);
		else if (!(r->f[i].types & type_of(v)))
			problem(lineno, r->name, "field '%s' has a type the doc does not allow", full);
	}
	for (i = 0; i < r->n; i++) {
		const char *name = r->f[i].name;

		if (strncmp(name, prefix, plen) != 0 || strchr(name + plen, '.'))
			continue;
		if (!r->f[i].optional && !json_object_get(obj, name + plen))
			problem(lineno, r->name, "documented field '%s' is missing", name);
	}
}

/* Members of each object field p are checked when the doc lists any p.x. */
static void
check_line(const struct record *r, json_t *obj, int lineno)
{
	const char *key;
	json_t *v;
	char prefix[160];
	int i;

	check_object(r, obj, "", lineno);
	json_object_foreach(obj, key, v) {
		if (!json_is_object(v))
			continue;
		snprintf(prefix, sizeof prefix, "%s.", key);
		for (i = 0; i < r->n; i++)
			if (strncmp(r->f[i].name, prefix, strlen(prefix)) == 0) {
				check_object(r, v, prefix, lineno);
				break;
			}
	}
}

/* The line format doc/json.md promises to readers without a parser: the
 * line is exactly its object written compactly, in ASCII, in its own key
 * order (duplicate keys are refused by the parse). */
static void
check_form(const json_t *obj, const char *line, int lineno)
{
	char *again = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	size_t n = strlen(line);

	if (n > 0 && line[n - 1] == '\n')
		n--;
	if (!again || strlen(again) != n || memcmp(again, line, n) != 0)
		problem(lineno, "?", "%s", "not in the compact ASCII line form doc/json.md promises");
	free(again);
}

int
main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, i;

	if (argc != 3) {
		fprintf(stderr, "usage: jsondoc DOC --records | RECORD | @event < LINES\n");
		return 2;
	}
	if (load_doc(argv[1]) < 0)
		return 2;
	if (strcmp(argv[2], "--records") == 0) {
		for (i = 0; i < nrecs; i++)
			puts(recs[i].name);
		return 0;
	}
	while (getline(&line, &cap, stdin) > 0) {
		json_error_t err;
		json_t *obj = json_loads(line, JSON_REJECT_DUPLICATES, &err);
		const char *name = argv[2];
		const struct record *r;

		lineno++;
		if (!json_is_object(obj)) {
			problem(lineno, argv[2], "not a JSON object: %s", err.text);
			json_decref(obj);
			continue;
		}
		check_form(obj, line, lineno);
		if (strcmp(name, "@event") == 0 &&
		    !(name = json_string_value(json_object_get(obj, "event"))))
			problem(lineno, "?", "%s", "no \"event\" field to name the record");
		else if (!(r = find_record(name)))
			problem(lineno, name, "%s", "no such record in the doc");
		else {
			check_line(r, obj, lineno);
			puts(r->name);
		}
		json_decref(obj);
	}
	free(line);
	return bad;
}
