/*
 * suggest — "did you mean" for a mistyped command word, as git's help.c
 * does it: a Damerau-Levenshtein distance weighted so that a swap of two
 * letters is cheap and a deletion dear, a prefix of a command counts as
 * an exact match, and only the best candidates under a threshold are
 * offered.  The commands are the names in the tool's command table, which
 * cli_find_command() looks words up in (cli.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "text.h"

enum { MAX_WORD = 32 };
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

/* The name of entry i of a command table: its first member (cli.h). */
const struct cli_command *
cli_find_command(const char *word, const struct cli_command *table, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(table[i].name, word) == 0)
			return &table[i];
	return NULL;
}

/* How far word is from the command name: 0 for a prefix of it, which is
 * as good as the word itself ("sh" for "show"), else the distance plus one. */
static int
score(const char *word, const char *name)
{
	return *word && strncmp(name, word, strlen(word)) == 0 ? 0 : distance(word, name) + 1;
}

char *
cli_command_names(char *buf, size_t n, const struct cli_command *table, size_t count)
{
	const char *names[33];
	size_t i;

	for (i = 0; i < count && i < sizeof names / sizeof names[0] - 1; i++)
		names[i] = table[i].name;
	names[i] = NULL;
	return text_join(buf, n, names);
}

int
cli_unknown_command(const char *prog, const char *word, const struct cli_command *table, size_t n)
{
	int best = SIMILARITY_FLOOR, count = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		int d = score(word, table[i].name);

		best = d < best ? d : best;
	}
	for (i = 0; i < n; i++)
		count += score(word, table[i].name) == best;
	fprintf(stderr, "%s: unknown command '%.100s'\n", prog, word);
	if (best < SIMILARITY_FLOOR) {
		fprintf(stderr, "\nThe most similar command%s\n", count == 1 ? " is" : "s are");
		for (i = 0; i < n; i++)
			if (score(word, table[i].name) == best)
				fprintf(stderr, "\t%s\n", table[i].name);
		fputc('\n', stderr);
	}
	fprintf(stderr, "Try '%s --help' for more information.\n", prog);
	return EK_USAGE;
}
