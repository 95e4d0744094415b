/* SPDX-License-Identifier: MIT */
/* "Did you mean": the closest of a list of words to a misspelled one. */
#ifndef BTRFSIMG_TOOLS_SUGGEST_H
#define BTRFSIMG_TOOLS_SUGGEST_H

#include <stddef.h>

/* Edits (insert, delete, substitute, swap two neighbours) from @a to @b. */
size_t edit_distance(const char *a, const char *b);

/* The word of @words (@n of them) closest to @typo: the only one @typo is
 * a prefix of, else the nearest within a third of its length (at least
 * one, at most two edits; ties go to the first). NULL if none is close. */
const char *closest_word(const char *typo, const char *const *words, size_t n);

#endif
