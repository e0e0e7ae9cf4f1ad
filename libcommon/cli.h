/*
 * cli — the conventions every exec-* tool shares: --version, usage errors,
 * its table of commands, number parsing, the state directory default, and a
 * checked exit that treats a failed write to stdout as an error.
 */
#ifndef EK_CLI_H
#define EK_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a tool's parse_args() returns once --help or --version has been
 * printed: main then exits 0 without doing anything else.  Negative, so
 * that it is never taken for an exit code.  A tool's options are
 * described and parsed by its table (opts.h). */
#define CLI_DONE (-2)

/* Print "prog (execkit) VERSION" on stdout. */
void cli_version(const char *prog);

/* Print "prog: msg" and "Try 'prog --help'" on stderr; return EK_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Report the option getopt_long rejected (optopt / argv[optind-1]), once:
 * opts_parse() sets opterr = 0 so getopt itself says nothing.  EK_USAGE. */
int cli_bad_option(const char *prog, char **argv);

/* A multi-command tool keeps its commands in a table, as git's commands[]
 * in git.c: an array of struct cli_command, one shape for every tool.
 * struct opts (the tool's parsed options) and struct state are each
 * tool's own; a tool leaves unset what it does not use.  The functions
 * below take the table and its length, as CLI_TABLE(t) passes them.  The
 * completion (opts_completion(), opts.h)
 * prints the same tables, so it cannot offer a command the tool lacks. */
struct opts;
struct state;
struct ek_err;
struct cli_command {
	const char *name;
	int (*run)(struct state *st, const struct opts *o, struct ek_err *e);
	int (*check)(struct opts *o);  /* its operands and options, before it runs */
	unsigned needs;                /* the tool's own flags: what it needs */
	const char *operand;           /* the operand its line of "Commands:" names, or NULL */
	const char *args;              /* the operands' metavariables for completion
	                                * ("RUN_ID...", "SET PREFIX"), or NULL */
	const char *const *words;      /* the words its first operand takes, or NULL */
	const char *help;              /* its text under "Commands:"; lines apart by '\n' */
	const struct cli_command *sub; /* its subcommands, nsub of them */
	size_t nsub;
};

#define CLI_TABLE(t) (t), sizeof (t) / sizeof (t)[0]

/* The entry of the table named word, or NULL. */
const struct cli_command *cli_find_command(const char *word, const struct cli_command *table,
    size_t n);

/* Report an unknown COMMAND word, git-style: "unknown command 'strat'" and,
 * when one is close enough, "The most similar command is\n\tstart".  The
 * candidates are the names in the tool's command table, so the suggestions
 * cannot drift from what it runs.  EK_USAGE. */
int cli_unknown_command(const char *prog, const char *word, const struct cli_command *table,
    size_t n);

/* The table's command names for a message, "a, b or c", into buf (n
 * bytes); returns buf.  A new command is named there without a word of
 * the message changed. */
char *cli_command_names(char *buf, size_t n, const struct cli_command *table, size_t count);

/* "1 run", "2 runs": the noun in the singular for n == 1 and with an "s"
 * otherwise, in buf.  Returns buf. */
const char *cli_plural(char *buf, size_t size, int64_t n, const char *noun);

/* Whether s is an http:// or https:// URL (a dispatcher's). */
bool cli_is_url(const char *s);

/* Parse a whole decimal number in [min, max]; 0 on success, -1 otherwise. */
int cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* The state directory: --state-dir, else $EXEC_STATE_DIR, else
 * $XDG_STATE_HOME/execkit, else $HOME/.local/state/execkit. Never NULL. */
const char *cli_state_dir(const char *opt);

/* Flush stdout; on failure print "prog: write error: ..." and return rc,
 * or EK_IOERR when rc was 0 (an earlier failure keeps its own code); else
 * return rc.  Call as the last thing in main(). */
int cli_finish(const char *prog, int rc);

#endif
