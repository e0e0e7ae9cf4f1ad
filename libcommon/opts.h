/*
 * opts — a tool's options as one table, as git's parse-options: each row
 * names an option (long name, short letter), its kind (a flag, a string,
 * a bounded number, a word of a list, an age, or the tool's own function),
 * its metavariable, where its value goes and its help.  From the table
 * alone opts_parse() parses argv (getopt_long underneath) with one message
 * for every bad value, opts_usage() prints the options of --help, and
 * opts_completion() prints what the shell completions are made of
 * (--completion-helper, as git's --git-completion-helper), so the three
 * cannot drift apart.  Like cli.c, it is the command line's own: it prints
 * help and usage errors itself, where the rest of libcommon never prints.
 */
#ifndef EK_OPTS_H
#define EK_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "timefmt.h"

enum opt_kind {
	OPTK_FLAG,        /* no value: 1 into an int */
	OPTK_STRING,      /* its value into a const char *; .valid, when set, must
	                   * hold of it (else "is not .want") */
	OPTK_INT,         /* a whole number in [min, max] into an int64_t; .word, when
	                   * set, is a word that stands for .word_value instead */
	OPTK_ENUM,        /* one of .words into a const char *: the table's word */
	OPTK_PARSED,      /* .parse's int64_t of it (else "is not .want"): OPTS_AGE */
	OPTK_CALL,        /* .call(o, arg) does what the option means (arg NULL for a flag,
	                   * when .meta is NULL): 0, or an exit code it has reported */
	OPTK_HELP,        /* --help, -h: the usage on stdout */
	OPTK_VERSION,     /* --version, -V */
	OPTK_COMPLETION,  /* --completion-helper: the completion data (never in the help) */
};

struct opt {
	const char *name;           /* long name, without "--" */
	char letter;                /* short option letter, or 0 */
	enum opt_kind kind;
	const char *meta;           /* metavariable of its value (N, DIR, ...); NULL: takes none */
	const char *help;           /* lines apart by '\n'; the first describes it in completion */
	size_t off;                 /* where its value goes: offsetof() the tool's struct opts */
	int64_t min, max;           /* OPTK_INT: the bounds */
	const char *word;           /* OPTK_INT: a word for word_value ("auto"), or NULL */
	int64_t word_value;
	const char *const *words;   /* OPTK_ENUM: the words, NULL-ended */
	bool (*valid)(const char *arg);              /* OPTK_STRING */
	int (*parse)(const char *arg, int64_t *v);   /* OPTK_PARSED: 0 or -1 */
	const char *want;           /* what valid or parse wants, for the message */
	int (*call)(void *o, const char *arg);
	unsigned mark;              /* the tool's own: e.g. server's or submit's */
};

/* Rows, named after their kind; FIELD is a member of the tool's struct opts. */
#define OPTS_FLAG(NAME, LETTER, FIELD, HELP) { .name = NAME, .letter = LETTER, \
	.kind = OPTK_FLAG, .off = offsetof(struct opts, FIELD), .help = HELP }
#define OPTS_STRING(NAME, LETTER, FIELD, META, HELP) { .name = NAME, .letter = LETTER, \
	.kind = OPTK_STRING, .meta = META, .off = offsetof(struct opts, FIELD), .help = HELP }
#define OPTS_INT(NAME, FIELD, MIN, MAX, META, HELP) { .name = NAME, .kind = OPTK_INT, \
	.meta = META, .off = offsetof(struct opts, FIELD), .min = MIN, .max = MAX, .help = HELP }
#define OPTS_ENUM(NAME, FIELD, WORDS, META, HELP) { .name = NAME, .kind = OPTK_ENUM, \
	.meta = META, .off = offsetof(struct opts, FIELD), .words = WORDS, .help = HELP }
#define OPTS_CHECKED(NAME, FIELD, META, VALID, WANT, HELP) { .name = NAME, \
	.kind = OPTK_STRING, .meta = META, .off = offsetof(struct opts, FIELD), .valid = VALID, \
	.want = WANT, .help = HELP }
#define OPTS_PARSED(NAME, FIELD, META, PARSE, WANT, HELP) { .name = NAME, \
	.kind = OPTK_PARSED, .meta = META, .off = offsetof(struct opts, FIELD), .parse = PARSE, \
	.want = WANT, .help = HELP }
#define OPTS_AGE(NAME, FIELD, HELP) OPTS_PARSED(NAME, FIELD, "AGE", timefmt_parse_age, \
	"an age with its unit, like 30d, 12h, 90m or 3600s", HELP)
#define OPTS_CALL(NAME, LETTER, FN, META, HELP) { .name = NAME, .letter = LETTER, \
	.kind = OPTK_CALL, .meta = META, .call = FN, .help = HELP }

/* -o, --columns and -w, --wide: how the command CMD ("list", "show")
 * prints its table (table.h), into the fields columns and wide. */
#define OPTS_TABLE_VIEW(CMD) \
	OPTS_STRING("columns", 'o', columns, "COLUMNS", CMD ": print only these columns, in " \
	    "this order (comma\nlist of the header's names, any case)"), \
	OPTS_FLAG("wide", 'w', wide, CMD ": never cut a cell to fit the terminal")

/* The rows every tool ends its table with, OPTS_COMMON (--help, -h,
 * --version, -V, the hidden --completion-helper); a tool that opens a
 * state ends it with OPTS_STATE(its --json's help): --json, --state-dir
 * and OPTS_COMMON. */
#define OPTS_STATE_DIR OPTS_STRING("state-dir", 0, state_dir, "DIR", \
	"state directory (default $EXEC_STATE_DIR)")
#define OPTS_JSON(HELP) OPTS_FLAG("json", 0, json, HELP)
#define OPTS_COMMON \
	{ .name = "help", .letter = 'h', .kind = OPTK_HELP, .help = "show this help and exit" }, \
	{ .name = "version", .letter = 'V', .kind = OPTK_VERSION, \
		.help = "show the version and exit" }, \
	{ .name = "completion-helper", .kind = OPTK_COMPLETION }
#define OPTS_STATE(JSON_HELP) OPTS_JSON(JSON_HELP), OPTS_STATE_DIR, OPTS_COMMON

/* Options that go with some commands only: their long names and the
 * commands' names, each a list apart by blanks ("since limit", "list"). */
struct opts_only {
	const char *opts;
	const char *cmds;
};

/* A tool's command line: its name, its --help around the options, its
 * options and its commands (cli.h; none for a tool without). */
struct opts_spec {
	const char *prog;
	const char *usage_head;     /* the usage lines and what it does, through
	                             * "Options:\n" (with cmds_column: up to the
	                             * "Commands:" block opts_help() prints) */
	const char *usage_tail;     /* what follows the options: exit statuses */
	const struct opt *opts;
	size_t nopts;
	const struct cli_command *cmds;
	size_t ncmds;
	const struct opts_only *only;   /* which options go with which commands only */
	size_t nonly;
	int help_column;            /* where an option's help begins (0: 25) */
	int cmds_column;            /* where a command's help begins under "Commands:";
	                             * 0: no such block */
	const char *args;           /* the tool's own operands for completion, or NULL */
	bool in_order;              /* stop at the first operand (getopt's '+') */
	/* Called after each option is taken, for a tool that tracks which it
	 * saw (exec-dispatcher: server's or submit's): 0, or an exit code. */
	int (*seen)(void *o, const struct opt *opt);
	/* More completion data, lines as opts_completion() prints (exec-session:
	 * its show columns), or NULL. */
	void (*complete_more)(FILE *f);
};

/* A table and its length, for .opts, .cmds and .only (the length
 * initializes the member after: .nopts, .ncmds, .nonly). */
#define OPTS_TABLE(t) (t), sizeof (t) / sizeof (t)[0]

/* Parse the options of argv (from optind) into o by spec's table, up to
 * the end (or the first operand, in_order).  0; CLI_DONE once --help,
 * --version or --completion-helper has printed; else the exit code of a
 * usage error it reported, one message for a bad value of every kind:
 *   prog: --NAME: 'VALUE' is not a number from MIN to MAX
 *   prog: --NAME: 'VALUE' is not W1, W2 or W3
 *   prog: --NAME: 'VALUE' is not WANT   (a string .valid refuses, a value
 *                                         .parse refuses: an age, a URL, ...) */
int opts_parse(const struct opts_spec *spec, int argc, char **argv, void *o);

/* The command word at argv[optind], of spec's table, into *cmd, and optind
 * past it: 0; else EK_USAGE, reported: "missing command (a, b or c)", an
 * unknown word with the most similar commands (cli_unknown_command()), or
 * "--NAME goes with a or b only" for an option opts_parse() took that
 * spec's .only keeps to other commands. */
int opts_command(const struct opts_spec *spec, int argc, char **argv,
    const struct cli_command **cmd);

/* The "Usage: ... Options: ... Exit status" text of --help, on f. */
void opts_help(FILE *f, const struct opts_spec *spec);

/* The options' lines of --help: "  -X, --NAME META  help", the help at
 * column (25 when 0), after two blanks when the left part is wider, on
 * the next line when the help begins with '\n'. */
void opts_usage(FILE *f, const struct opt *opts, size_t n, int column);

/* The completion data of a tool (doc in build-aux/gen-completion.sh):
 * tab-separated "WHAT\tKEY\tVALUE" lines. */
void opts_completion(FILE *f, const struct opts_spec *spec);

#endif
