/*
 * exec-shares — not implemented yet in this release; it answers --help and
 * --version and otherwise exits 69 (unavailable) rather than pretend.
 */
#include <stdio.h>

#include "cli.h"
#include "err.h"

static const char PROG[] = "exec-shares";

static const struct option options[] = {
	CLI_COMMON_OPTIONS,
	{ NULL, 0, NULL, 0 },
};

static const char USAGE[] =
	"Usage: exec-shares [OPTION]...\n"
	"Not implemented yet: exits 69.\n"
	"\n"
	"  -h, --help     show this help and exit\n"
	"      --version  show the version and exit\n";

int
main(int argc, char **argv)
{
	int c;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (c) {
		case OPT_HELP: fputs(USAGE, stdout); return cli_finish(PROG, EK_OK);
		case OPT_VERSION: cli_version(PROG); return cli_finish(PROG, EK_OK);
		default: return cli_bad_option(PROG, argv);
		}
	}
	fprintf(stderr, "%s: not implemented yet\n", PROG);
	return EK_UNAVAILABLE;
}
