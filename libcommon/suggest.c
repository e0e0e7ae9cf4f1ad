/*
 * suggest — "did you mean" for a mistyped command word, as git's help.c
 * does it: a Damerau-Levenshtein distance weighted so that a swap of two
 * letters is cheap and a deletion dear, a prefix of a command counts as
 * an exact match, and only the best candidates under a threshold are
 * offered.  The commands come from the tool's own usage text (cli.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "err.h"

enum { MAX_CMDS = 32, MAX_WORD = 32 };
/* git's weights: swap 0, substitution 2, insertion 1, deletion 3 (plus one for not being a prefix). */
enum { W_SWAP = 0, W_SUBST = 2, W_INSERT = 1, W_DELETE = 3 };
/* git suggests nothing at a distance of 7 or more. */
enum { SIMILARITY_FLOOR = 7 };

static int
min3(int a, int b, int c)
{
	return a < b ? (a < c ? a : c) : (b < c ? b : c);
}

/* The weighted distance turning s into t (git's levenshtein()). */
static int
distance(const char *s, const char *t)
{
	int ls = (int)strlen(s), lt = (int)strlen(t);
	int row0[MAX_WORD + 1], row1[MAX_WORD + 1], row2[MAX_WORD + 1];
	int *r0 = row0, *r1 = row1, *r2 = row2, *tmp;

	if (ls > MAX_WORD || lt > MAX_WORD)
		return 1000;
	for (int j = 0; j <= lt; j++)
		r1[j] = j * W_INSERT;
	for (int i = 0; i < ls; i++) {
		r2[0] = (i + 1) * W_DELETE;
		for (int j = 0; j < lt; j++) {
			r2[j + 1] = r1[j] + W_SUBST * (s[i] != t[j]);
			if (i > 0 && j > 0 && s[i - 1] == t[j] && s[i] == t[j - 1] &&
			    r2[j + 1] > r0[j - 1] + W_SWAP)
				r2[j + 1] = r0[j - 1] + W_SWAP;
			r2[j + 1] = min3(r2[j + 1], r1[j + 1] + W_DELETE, r2[j] + W_INSERT);
		}
		tmp = r0; r0 = r1; r1 = r2; r2 = tmp;
	}
	return r1[lt];
}

static void
add_command(char cmds[][MAX_WORD + 1], int *n, const char *w, size_t len)
{
	if (len == 0 || len > MAX_WORD || *n == MAX_CMDS)
		return;
	for (size_t i = 0; i < len; i++)
		if (!islower((unsigned char)w[i]) && w[i] != '-')
			return;
	for (int i = 0; i < *n; i++)
		if (strlen(cmds[i]) == len && strncmp(cmds[i], w, len) == 0)
			return;
	memcpy(cmds[*n], w, len);
	cmds[(*n)++][len] = '\0';
}

/* The command word of each "Usage:" line: the first word after the tool's
 * name and "[OPTION]...", split at '|' ("heartbeat|close|show"). */
static int
usage_commands(const char *usage, const char *prog, char cmds[][MAX_WORD + 1])
{
	int n = 0;
	size_t plen = strlen(prog);

	for (const char *line = usage; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *p = line;

		if (strncmp(p, "Usage:", 6) == 0)
			p += 6;
		else if (*p != ' ')
			continue;
		p += strspn(p, " ");
		if (strncmp(p, prog, plen) != 0 || p[plen] != ' ')
			continue;
		p += plen + strspn(p + plen, " ");
		if (strncmp(p, "[OPTION]...", 11) == 0)
			p += 11 + strspn(p + 11, " ");
		for (;;) {
			size_t len = strcspn(p, "| \n");

			add_command(cmds, &n, p, len);
			if (p[len] != '|')
				break;
			p += len + 1;
		}
	}
	return n;
}

int
cli_unknown_command(const char *prog, const char *word, const char *usage)
{
	char cmds[MAX_CMDS][MAX_WORD + 1];
	int n = usage_commands(usage, prog, cmds), dist[MAX_CMDS], best = SIMILARITY_FLOOR, count = 0;

	for (int i = 0; i < n; i++) {
		/* a prefix is as good as the word itself: "sh" for "show" */
		dist[i] = *word && strncmp(cmds[i], word, strlen(word)) == 0 ? 0 : distance(word, cmds[i]) + 1;
		if (dist[i] < best)
			best = dist[i];
	}
	fprintf(stderr, "%s: unknown command '%.100s'\n", prog, word);
	for (int i = 0; i < n; i++)
		count += dist[i] == best;
	if (best < SIMILARITY_FLOOR) {
		fprintf(stderr, "\nThe most similar command%s\n", count == 1 ? " is" : "s are");
		for (int i = 0; i < n; i++)
			if (dist[i] == best)
				fprintf(stderr, "\t%s\n", cmds[i]);
		fputc('\n', stderr);
	}
	fprintf(stderr, "Try '%s --help' for more information.\n", prog);
	return EK_USAGE;
}
