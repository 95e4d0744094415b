/* SPDX-License-Identifier: MIT */
/*
 * Which of the leaves a scan found under a tree's owner are kept, when no
 * extent record says which were live (bi_salvage_leaves, salvage.h): the
 * rule alone, over key ranges and ranks, so that it is tested against a
 * brute force (tests/unit/test_salvage_decide.c) apart from any device.
 */
#ifndef BI_SALVAGE_DECIDE_H
#define BI_SALVAGE_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/key.h"

/* A leaf weighed: its first and last key, and its rank: 0 for the newest
 * (generation, then named through a root item, allocated in the free space
 * tree, newest node naming it), one more for each step older. Leaves of
 * one rank are twins. */
struct bi_sv_span {
	bi_key first, last;
	uint64_t rank;
};

/* A key range decided: a leaf kept (@leaf its index among the spans), or,
 * @leaf BI_SV_BLOCKED, keys twins disagree on, lost. */
struct bi_sv_kept {
	bi_key first, last;
	size_t leaf;
};
#define BI_SV_BLOCKED SIZE_MAX

struct bi_sv_tally {
	size_t stale;		/* set aside: a range decided before overlaps it */
	size_t same;		/* twins holding the same items (one kept) */
	size_t ambiguous;	/* twins holding different items: ranges lost */
};

/* Whether leaves @a and @b (span indices) hold the same items in *@same;
 * 0, or a negative errno that ends the decision. */
typedef int (*bi_sv_same_fn)(void *ctx, size_t a, size_t b, bool *same);

/*
 * The rule, in the order of @s[0..@n) (ascending rank, and of one rank
 * ascending first key, else -EINVAL): a leaf overlapping no range decided
 * so far is kept; one overlapping a twin (at most one can: twins come in
 * first-key order and kept ranges do not overlap) that @same says differs
 * turns every range it overlaps, and itself, into one lost range; any other
 * overlapping leaf is set aside (counted stale when a newer or lost range
 * is among those it overlaps, else same). The ranges decided in *@out (key
 * order, caller frees) and *@nout; counts in *@t. O(n log n): the ranges
 * are kept by the rank of their first key among all the spans' keys, in a
 * bitmap of 64-bit words searched a word at a time, level by level.
 * 0, -ENOMEM, -EINVAL or what @same returned.
 */
int bi_sv_decide(const struct bi_sv_span *s, size_t n, bi_sv_same_fn same, void *ctx,
		 struct bi_sv_kept **out, size_t *nout, struct bi_sv_tally *t);

#endif
