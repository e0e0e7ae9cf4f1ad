/*
 * cli — the conventions every exec-* tool shares: --help, --version,
 * usage errors, number parsing, the state directory default, and a
 * checked exit that treats a failed write to stdout as an error.
 */
#ifndef EK_CLI_H
#define EK_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Long options every tool accepts, with these values in its option table. */
enum { OPT_HELP = 'h', OPT_VERSION = 'V', OPT_STATE_DIR = 0x100, OPT_JSON,
	OPT_FIRST_TOOL /* tool-specific options start here */ };

/* What a tool's parse_args() returns once --help or --version has been
 * printed: main then exits 0 without doing anything else.  Negative, so
 * that it is never taken for an exit code. */
#define CLI_DONE (-2)

#define CLI_COMMON_OPTIONS \
	{ "help", no_argument, NULL, OPT_HELP }, \
	{ "version", no_argument, NULL, OPT_VERSION }

/* And every tool that works on a state directory (all but exec-dispatcher). */
#define CLI_STATE_OPTIONS \
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR }, \
	{ "json", no_argument, NULL, OPT_JSON }

/* The options every tool shares, for the default case of its option
 * switch: whatever getopt_long returned that the tool does not handle
 * itself.
 *   --help       usage on stdout                            CLI_DONE
 *   --version    cli_version()                              CLI_DONE
 *   --state-dir  its argument into *state_dir               0
 *   --json       1 into *json                               0
 *   anything else (getopt_long's '?'), cli_bad_option()     EK_USAGE
 * A tool without --state-dir or --json passes NULL for it. */
int cli_common_opt(int c, const char *prog, const char *usage, char **argv,
    const char **state_dir, int *json);

/* Print "prog (execkit) VERSION" on stdout. */
void cli_version(const char *prog);

/* Print "prog: msg" and "Try 'prog --help'" on stderr; return EK_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Report the option getopt_long rejected (optopt / argv[optind-1]), once:
 * the tools set opterr = 0 so getopt itself says nothing.  EK_USAGE. */
int cli_bad_option(const char *prog, char **argv);

/* A multi-command tool keeps its commands in a table, as git's commands[]
 * in git.c: an array of its own struct whose first member is the command's
 * name (const char *name).  The functions below take the table as qsort()
 * takes an array, and CLI_TABLE(t) passes it so: base, count, size.
 * build-aux/gen-completion.sh reads the same tables (commands[], and
 * NAME_commands[] for the subcommands of NAME). */
#define CLI_TABLE(t) (const void *)(t), sizeof (t) / sizeof (t)[0], sizeof (t)[0]

/* The entry of the table named word, or NULL. */
const void *cli_find_command(const char *word, const void *table, size_t n, size_t size);

/* Report an unknown COMMAND word, git-style: "unknown command 'strat'" and,
 * when one is close enough, "The most similar command is\n\tstart".  The
 * candidates are the names in the tool's command table, so the suggestions
 * cannot drift from what it runs.  EK_USAGE. */
int cli_unknown_command(const char *prog, const char *word, const void *table, size_t n,
    size_t size);

/* The table's command names for a message, "a, b or c", into buf (n
 * bytes); returns buf.  A new command is named there without a word of
 * the message changed. */
char *cli_command_names(char *buf, size_t n, const void *table, size_t count, size_t size);

/* "1 run", "2 runs": the noun in the singular for n == 1 and with an "s"
 * otherwise, in buf.  Returns buf. */
const char *cli_plural(char *buf, size_t size, int64_t n, const char *noun);

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
