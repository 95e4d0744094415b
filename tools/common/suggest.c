// SPDX-License-Identifier: MIT
#include "common/suggest.h"

#include <string.h>

#define WORD_MAX 64	/* longer words are not compared */

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;
	return m < c ? m : c;
}

/* Optimal string alignment distance: Levenshtein plus adjacent swaps. */
size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > WORD_MAX || lb > WORD_MAX)
		return (size_t)-1;
	size_t d[WORD_MAX + 1][WORD_MAX + 1];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < d[i][j])
				d[i][j] = d[i - 2][j - 2] + 1;
		}
	}
	return d[la][lb];
}

static const char *only_prefix_of(const char *typo, const char *const *words, size_t n)
{
	const char *hit = NULL;
	size_t len = strlen(typo);
	for (size_t i = 0; len && i < n; i++) {
		if (strncmp(words[i], typo, len) != 0)
			continue;
		if (hit)
			return NULL;
		hit = words[i];
	}
	return hit;
}

const char *closest_word(const char *typo, const char *const *words, size_t n)
{
	const char *best = only_prefix_of(typo, words, n);
	if (best)
		return best;
	size_t len = strlen(typo), limit = len / 3;
	if (limit < 1)
		limit = 1;
	if (limit > 2)
		limit = 2;
	size_t best_d = limit + 1;
	for (size_t i = 0; i < n; i++) {
		size_t d = edit_distance(typo, words[i]);
		if (d < best_d) {
			best_d = d;
			best = words[i];
		}
	}
	return best;
}
