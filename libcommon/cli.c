/* cli — see cli.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cli.h"
#include "err.h"

void
cli_version(const char *prog)
{
	printf("%s (execkit) %s\n", prog, PACKAGE_VERSION);
}

int
cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", prog);
	return EK_USAGE;
}

int
cli_bad_option(const char *prog, char **argv)
{
	const char *arg = argv[optind - 1];

	if (!arg || !(arg[0] == '-' && arg[1] == '-'))
		return cli_usage_error(prog, "invalid option -- '%c'", optopt ? optopt : '?');
	/* glibc leaves optopt 0 for an unknown or ambiguous long option, and
	 * sets it to the option's value when its argument is wrong. */
	if (optopt == 0)
		return cli_usage_error(prog, "unrecognized option '%s'", arg);
	if (strchr(arg, '='))
		return cli_usage_error(prog, "option '%.*s' doesn't allow an argument",
		    (int)(strchr(arg, '=') - arg), arg);
	return cli_usage_error(prog, "option '%s' requires an argument", arg);
}

bool
cli_is_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

int
cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

const char *
cli_state_dir(const char *opt)
{
	static char buf[4096];
	const char *v;

	if (opt && *opt)
		return opt;
	if ((v = getenv("EXEC_STATE_DIR")) && *v)
		return v;
	if ((v = getenv("XDG_STATE_HOME")) && *v) {
		snprintf(buf, sizeof buf, "%s/execkit", v);
		return buf;
	}
	v = getenv("HOME");
	snprintf(buf, sizeof buf, "%s/.local/state/execkit", v && *v ? v : ".");
	return buf;
}

int
cli_finish(const char *prog, int rc)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: write error: %s\n", prog, strerror(errno));
		return rc ? rc : EK_IOERR;
	}
	return rc;
}

const char *
cli_plural(char *buf, size_t size, int64_t n, const char *noun)
{
	snprintf(buf, size, "%lld %s%s", (long long)n, noun, n == 1 ? "" : "s");
	return buf;
}
