/* opts — see opts.h. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "opts.h"
#include "text.h"

/* Where the help of an option begins, and the most options a tool has. */
#define HELP_COLUMN 25
#define OPTS_MAX 64

/* The rows opts_parse() took, for opts_command()'s check against .only: one
 * command line per process, as getopt's optind. */
static bool taken[OPTS_MAX];

static void *
field(void *o, const struct opt *r)
{
	return (char *)o + r->off;
}

/* A number of r's kind, or the word that stands for one. */
static int
take_int(const char *prog, const struct opt *r, const char *arg, void *o)
{
	int64_t v;

	if (r->word && strcmp(arg, r->word) == 0)
		v = r->word_value;
	else if (cli_parse_i64(arg, r->min, r->max, &v) < 0)
		return cli_usage_error(prog, "--%s: '%.200s' is not a number from %lld to %lld%s%s",
		    r->name, arg, (long long)r->min, (long long)r->max, r->word ? ", or " : "",
		    r->word ? r->word : "");
	*(int64_t *)field(o, r) = v;
	return 0;
}

static int
take_enum(const char *prog, const struct opt *r, const char *arg, void *o)
{
	char words[256];
	int i = text_word_index(arg, r->words);

	if (i < 0)
		return cli_usage_error(prog, "--%s: '%.200s' is not %s", r->name, arg,
		    text_join(words, sizeof words, r->words));
	*(const char **)field(o, r) = r->words[i];
	return 0;
}

/* Take one option's value by its row: 0, CLI_DONE or an exit code. */
static int
take(const struct opts_spec *s, const struct opt *r, const char *arg, void *o)
{
	switch (r->kind) {
	case OPTK_FLAG: *(int *)field(o, r) = 1; return 0;
	case OPTK_STRING:
		if (r->valid && !r->valid(arg))
			return cli_usage_error(s->prog, "--%s: '%.200s' is not %s", r->name, arg, r->want);
		*(const char **)field(o, r) = arg;
		return 0;
	case OPTK_INT: return take_int(s->prog, r, arg, o);
	case OPTK_ENUM: return take_enum(s->prog, r, arg, o);
	case OPTK_PARSED:
		if (r->parse(arg, (int64_t *)field(o, r)) < 0)
			return cli_usage_error(s->prog, "--%s: '%.200s' is not %s", r->name, arg, r->want);
		return 0;
	case OPTK_CALL: return r->call(o, arg);
	case OPTK_HELP: opts_help(stdout, s); return CLI_DONE;
	case OPTK_VERSION: cli_version(s->prog); return CLI_DONE;
	case OPTK_COMPLETION: opts_completion(stdout, s); return CLI_DONE;
	}
	return 0;
}

/* getopt_long's tables from ours: option i returns 0x100 + i. */
static void
getopt_tables(const struct opts_spec *s, struct option *lo, char *shorts)
{
	size_t i, k = 0;

	if (s->in_order)
		shorts[k++] = '+';
	for (i = 0; i < s->nopts; i++) {
		const struct opt *r = &s->opts[i];

		lo[i] = (struct option){ r->name, r->meta ? required_argument : no_argument, NULL,
			0x100 + (int)i };
		if (r->letter) {
			shorts[k++] = r->letter;
			if (r->meta)
				shorts[k++] = ':';
		}
	}
	lo[i] = (struct option){ NULL, 0, NULL, 0 };
	shorts[k] = '\0';
}

static const struct opt *
by_letter(const struct opts_spec *s, int c)
{
	size_t i;

	for (i = 0; i < s->nopts; i++)
		if (s->opts[i].letter == c)
			return &s->opts[i];
	return NULL;
}

/* The words of a list apart by blanks into w (at most n - 1 of them,
 * NULL-ended), copied into buf. */
static const char *const *
split_words(const char *list, char *buf, size_t size, const char **w, size_t n)
{
	size_t k = 0;
	char *p;

	snprintf(buf, size, "%s", list);
	for (p = strtok(buf, " "); p && k + 1 < n; p = strtok(NULL, " "))
		w[k++] = p;
	w[k] = NULL;
	return w;
}

/* Is word one of list's words (apart by blanks)? */
static bool
in_list(const char *word, const char *list)
{
	size_t n = strlen(word), k;
	const char *p = list + strspn(list, " ");

	for (; *p; p += k, p += strspn(p, " "))
		if ((k = strcspn(p, " ")) == n && strncmp(p, word, n) == 0)
			return true;
	return false;
}

/* The .only entry that keeps row r to some commands, or NULL. */
static const struct opts_only *
only_of(const struct opts_spec *s, const struct opt *r)
{
	size_t i;

	for (i = 0; i < s->nonly; i++)
		if (in_list(r->name, s->only[i].opts))
			return &s->only[i];
	return NULL;
}

static bool
goes_with(const struct opts_spec *s, const struct opt *r, const char *cmd)
{
	const struct opts_only *k = only_of(s, r);

	return !k || in_list(cmd, k->cmds);
}

/* Every option taken goes with cmd: 0, or the usage error. */
static int
check_taken(const struct opts_spec *s, const struct cli_command *cmd)
{
	const char *w[OPTS_MAX];
	char buf[1024], list[256];
	size_t i;

	for (i = 0; i < s->nopts; i++)
		if (taken[i] && !goes_with(s, &s->opts[i], cmd->name))
			return cli_usage_error(s->prog, "--%s goes with %s only", s->opts[i].name,
			    text_join(list, sizeof list, split_words(only_of(s, &s->opts[i])->cmds,
				buf, sizeof buf, w, OPTS_MAX)));
	return 0;
}

int
opts_parse(const struct opts_spec *s, int argc, char **argv, void *o)
{
	struct option lo[OPTS_MAX + 1];
	char shorts[2 * OPTS_MAX + 2];
	const struct opt *r;
	int c, rc;

	if (s->nopts > OPTS_MAX)
		abort();   /* a table larger than this file allows: a programming error */
	getopt_tables(s, lo, shorts);
	memset(taken, 0, sizeof taken);
	opterr = 0;   /* cli_bad_option() says it, once */
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		r = c >= 0x100 ? &s->opts[c - 0x100] : by_letter(s, c);
		if (!r)
			return cli_bad_option(s->prog, argv);
		if ((rc = take(s, r, optarg, o)) != 0)
			return rc;
		taken[r - s->opts] = true;
		if (s->seen && (rc = s->seen(o, r)) != 0)
			return rc;
	}
	return 0;
}

int
opts_command(const struct opts_spec *s, int argc, char **argv, const struct cli_command **cmd)
{
	char names[256];

	if (optind == argc)
		return cli_usage_error(s->prog, "missing command (%s)",
		    cli_command_names(names, sizeof names, s->cmds, s->ncmds));
	if (!(*cmd = cli_find_command(argv[optind], s->cmds, s->ncmds)))
		return cli_unknown_command(s->prog, argv[optind], s->cmds, s->ncmds);
	optind++;
	return check_taken(s, *cmd);
}

/* "left" and then help's lines from column col: on the same line after two
 * blanks when left is wider (a help that begins with '\n' starts below). */
static void
print_entry(FILE *f, const char *left, const char *help, int col)
{
	const char *p = help, *nl;
	int n = fprintf(f, "%s", left);

	for (;;) {
		nl = strchr(p, '\n');
		if (nl != p)
			fprintf(f, "%*s", n < col - 1 ? col - n : 2, "");
		fprintf(f, "%.*s\n", (int)(nl ? nl - p : (ptrdiff_t)strlen(p)), p);
		if (!nl)
			return;
		p = nl + 1;
		n = 0;
	}
}

void
opts_usage(FILE *f, const struct opt *opts, size_t n, int column)
{
	char left[128];
	size_t i;

	for (i = 0; i < n; i++) {
		const struct opt *r = &opts[i];

		if (!r->help || r->kind == OPTK_COMPLETION)
			continue;
		snprintf(left, sizeof left, "  %c%c%c --%s%s%s", r->letter ? '-' : ' ',
		    r->letter ? r->letter : ' ', r->letter ? ',' : ' ', r->name, r->meta ? " " : "",
		    r->meta ? r->meta : "");
		print_entry(f, left, r->help, column ? column : HELP_COLUMN);
	}
}

/* The "Commands:" block: each command (a subcommand after its parent's
 * name) with its operand, its help from the column after the widest. */
static void
commands_usage(FILE *f, const char *parent, const struct cli_command *c, size_t n, int col)
{
	char left[128];
	size_t i;

	for (i = 0; i < n; i++) {
		if (c[i].sub) {
			commands_usage(f, c[i].name, c[i].sub, c[i].nsub, col);
			continue;
		}
		if (!c[i].help)
			continue;
		snprintf(left, sizeof left, "  %s%s%s%s%s", parent ? parent : "", parent ? " " : "",
		    c[i].name, c[i].operand ? " " : "", c[i].operand ? c[i].operand : "");
		print_entry(f, left, c[i].help, col);
	}
}

void
opts_help(FILE *f, const struct opts_spec *s)
{
	fputs(s->usage_head, f);
	if (s->cmds_column) {
		fputs("Commands:\n", f);
		commands_usage(f, NULL, s->cmds, s->ncmds, s->cmds_column);
		fputs("\nOptions:\n", f);
	}
	opts_usage(f, s->opts, s->nopts, s->help_column);
	fputs(s->usage_tail, f);
}

/* --- completion data ------------------------------------------------------ */

/* The first line of a help text, for the zsh and fish descriptions: cut
 * before a parenthesis it leaves open, and at a trailing , ; or :. */
static const char *
describe(char *buf, size_t n, const char *help)
{
	const char *p = help;
	char *open = NULL, *q;
	size_t len;
	int depth = 0;

	while (*p == '\n')
		p++;
	len = strcspn(p, "\n");
	snprintf(buf, n, "%.*s", (int)len, p);
	for (q = buf; *q; q++) {
		if (*q == '(' && depth++ == 0)
			open = q;
		else if (*q == ')' && depth > 0 && --depth == 0)
			open = NULL;
	}
	if (depth > 0 && open) {
		while (open > buf && open[-1] == ' ')
			open--;
		*open = '\0';
	}
	len = strlen(buf);
	if (len && strchr(",;:", buf[len - 1]))
		buf[len - 1] = '\0';
	return buf;
}

static void
print_words(FILE *f, const char *const *w)
{
	for (; *w; w++)
		fprintf(f, "%s%s", *w, w[1] ? " " : "\n");
}

/* One spelling's lines (name "--long" or "-x"): takes, meta, desc, words. */
static void
spelling_data(FILE *f, const char *tool, const char *name, const struct opt *r, const char *desc)
{
	if (r->meta)
		fprintf(f, "takes\t%s %s\t1\nmeta\t%s %s\t%s\n", tool, name, tool, name, r->meta);
	if (*desc)
		fprintf(f, "desc\t%s %s\t%s\n", tool, name, desc);
	if (r->words) {
		fprintf(f, "words\t%s %s\t", tool, name);
		print_words(f, r->words);
	}
	if (r->kind == OPTK_INT)   /* for the tests (cli.bats), not the scripts */
		fprintf(f, "bounds\t%s %s\t%lld %lld%s%s\n", tool, name, (long long)r->min,
		    (long long)r->max, r->word ? " " : "", r->word ? r->word : "");
}

/* "opts PATH": the options that go with command cmd (NULL: all of them),
 * the long ones first, in the table's order, then the short ones. */
static void
opts_line(FILE *f, const struct opts_spec *s, const char *path, const char *cmd)
{
	const char *sep = "";
	size_t i;

	fprintf(f, "opts\t%s\t", path);
	for (i = 0; i < s->nopts; i++)
		if (s->opts[i].kind != OPTK_COMPLETION && (!cmd || goes_with(s, &s->opts[i], cmd))) {
			fprintf(f, "%s--%s", sep, s->opts[i].name);
			sep = " ";
		}
	for (i = 0; i < s->nopts; i++)
		if (s->opts[i].letter && (!cmd || goes_with(s, &s->opts[i], cmd)))
			fprintf(f, " -%c", s->opts[i].letter);
	fputc('\n', f);
}

/* The options: "opts TOOL", and each one's lines. */
static void
options_data(FILE *f, const struct opts_spec *s)
{
	char desc[256], name[64];
	size_t i;

	opts_line(f, s, s->prog, NULL);
	for (i = 0; i < s->nopts; i++) {
		const struct opt *r = &s->opts[i];

		if (r->kind == OPTK_COMPLETION)
			continue;
		describe(desc, sizeof desc, r->help ? r->help : "");
		snprintf(name, sizeof name, "--%s", r->name);
		spelling_data(f, s->prog, name, r, desc);
		if (!r->letter)
			continue;
		snprintf(name, sizeof name, "-%c", r->letter);
		spelling_data(f, s->prog, name, r, desc);
		fprintf(f, "short\t%s --%s\t%s\n", s->prog, r->name, name);
	}
}

/* A command table at path: "cmds PATH", and each command's args, words,
 * desc, and its own subcommands; when some options go with some commands
 * only, "opts PATH" for each, those of its first word (top, or its own). */
static void
commands_data(FILE *f, const struct opts_spec *s, const char *path, const char *top,
    const struct cli_command *c, size_t n)
{
	char sub[256], desc[256];
	size_t i;

	fprintf(f, "cmds\t%s\t", path);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%s", c[i].name, i + 1 < n ? " " : "\n");
	for (i = 0; i < n; i++) {
		snprintf(sub, sizeof sub, "%s %s", path, c[i].name);
		if (s->nonly)
			opts_line(f, s, sub, top ? top : c[i].name);
		if (c[i].args)
			fprintf(f, "args\t%s\t%s\n", sub, c[i].args);
		if (c[i].words) {
			fprintf(f, "words\t%s\t", sub);
			print_words(f, c[i].words);
		}
		if (c[i].help && *describe(desc, sizeof desc, c[i].help))
			fprintf(f, "desc\t%s\t%s\n", sub, desc);
		if (c[i].sub)
			commands_data(f, s, sub, top ? top : c[i].name, c[i].sub, c[i].nsub);
	}
}

/* Every name in .only is an option and a command of the tables: a table
 * that names what is not there is a programming error.  Checked where the
 * tables are printed for the completion, which the build makes (and
 * tests/cli.bats asks of every tool), not at every start. */
static void
check_only(const struct opts_spec *s)
{
	const char *w[OPTS_MAX];
	char buf[1024];
	size_t i, j, k;

	for (i = 0; i < s->nonly; i++) {
		split_words(s->only[i].opts, buf, sizeof buf, w, OPTS_MAX);
		for (j = 0; w[j]; j++) {
			for (k = 0; k < s->nopts && strcmp(s->opts[k].name, w[j]) != 0; k++)
				;
			if (k == s->nopts)
				abort();
		}
		split_words(s->only[i].cmds, buf, sizeof buf, w, OPTS_MAX);
		for (j = 0; w[j]; j++)
			if (!cli_find_command(w[j], s->cmds, s->ncmds))
				abort();
	}
}

void
opts_completion(FILE *f, const struct opts_spec *s)
{
	check_only(s);
	options_data(f, s);
	if (s->args)
		fprintf(f, "args\t%s\t%s\n", s->prog, s->args);
	if (s->cmds)
		commands_data(f, s, s->prog, NULL, s->cmds, s->ncmds);
	if (s->complete_more)
		s->complete_more(f);
}
