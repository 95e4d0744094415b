// SPDX-License-Identifier: MIT
/*
 * The leaves kept of a tree rebuilt from scanning (salvage_decide.h).
 *
 * Leaves come newest first; each is weighed against the key ranges decided
 * before it, which never overlap. A key is named by its rank among every
 * first and last key of the spans (sorted once), so a range is a pair of
 * positions: the range starting at position p ends at end[p] and holds
 * leaf who[p]. Which positions start a range is a bitmap, summarized one
 * bit per 64-bit word a level up until one word is left:
 *
 *   level 2:  [1 0 ...]                  word 0 of level 1 has a bit set
 *   level 1:  [0 0 1 0 ...][...]         word 2 of level 0 has a bit set
 *   level 0:  [...][...][0 0 0 1 ...]    position 2*64+3 starts a range
 *
 * so the range at or before a key, and the next one, are found in a few
 * word reads: each leaf costs O(log n), and a range merged into a lost
 * one is cleared once. The sorted array of ranges this replaces moved the
 * ranges after each insert: the square of the leaves, refused past 32,768.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage_decide.h"

#include "base/grow.h"

#define NONE SIZE_MAX
#define LEVELS_MAX 12 /* 64^11 words: more than size_t counts */

/* Positions that start a range, level by level (see the file comment). */
struct bits {
	uint64_t *w[LEVELS_MAX];
	size_t nw[LEVELS_MAX];
	unsigned levels;
};

struct decide {
	const struct bi_sv_span *s;
	size_t n;
	bi_key *keys;		/* every first and last key, sorted, unique */
	size_t nkeys;
	size_t *end, *who;	/* per position starting a range */
	struct bits b;
};

static int bits_init(struct bits *b, size_t m)
{
	size_t nw = m / 64 + 1;
	for (b->levels = 0; b->levels < LEVELS_MAX; nw = (nw + 63) / 64) {
		b->nw[b->levels] = nw;
		b->w[b->levels] = calloc(nw, sizeof(uint64_t));
		if (!b->w[b->levels++])
			return -ENOMEM;
		if (nw == 1)
			return 0;
	}
	return -ENOMEM; /* not reached: size_t ends first */
}

static void bits_free(struct bits *b)
{
	for (unsigned k = 0; k < b->levels; k++)
		free(b->w[k]);
}

static void bits_set(struct bits *b, size_t p)
{
	for (unsigned k = 0; k < b->levels; k++, p /= 64)
		b->w[k][p / 64] |= (uint64_t)1 << (p % 64);
}

static void bits_clear(struct bits *b, size_t p)
{
	for (unsigned k = 0; k < b->levels; k++, p /= 64) {
		b->w[k][p / 64] &= ~((uint64_t)1 << (p % 64));
		if (b->w[k][p / 64])
			return; /* the word still has a bit: the levels above stay */
	}
}

/* The lowest set position at or after @p; NONE if none. */
static size_t bits_next(const struct bits *b, size_t p)
{
	unsigned k = 0;
	for (;; k++) { /* up until a word holds a bit at or after p */
		if (k == b->levels || p / 64 >= b->nw[k])
			return NONE;
		uint64_t w = b->w[k][p / 64] & (~(uint64_t)0 << (p % 64));
		if (w) {
			p = p / 64 * 64 + (size_t)__builtin_ctzll(w);
			break;
		}
		p = p / 64 + 1; /* the words after this one, a level up */
	}
	for (; k > 0; k--) /* down, the lowest bit of each word */
		p = p * 64 + (size_t)__builtin_ctzll(b->w[k - 1][p]);
	return p;
}

/* The highest set position at or before @p; NONE if none. */
static size_t bits_prev(const struct bits *b, size_t p)
{
	unsigned k = 0;
	if (p / 64 >= b->nw[0])
		p = b->nw[0] * 64 - 1;
	for (;; k++) {
		if (k == b->levels)
			return NONE;
		uint64_t mask = p % 64 == 63 ? ~(uint64_t)0 : ((uint64_t)1 << (p % 64 + 1)) - 1;
		uint64_t w = b->w[k][p / 64] & mask;
		if (w) {
			p = p / 64 * 64 + 63 - (size_t)__builtin_clzll(w);
			break;
		}
		if (p / 64 == 0)
			return NONE;
		p = p / 64 - 1;
	}
	for (; k > 0; k--)
		p = p * 64 + 63 - (size_t)__builtin_clzll(b->w[k - 1][p]);
	return p;
}

static int key_order(const void *pa, const void *pb)
{
	return bi_key_cmp(pa, pb);
}

/* The position of @k among the sorted keys (it is one of them). */
static size_t position(const struct decide *d, const bi_key *k)
{
	size_t lo = 0, hi = d->nkeys;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bi_key_cmp(&d->keys[mid], k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the spans come in the order the rule weighs them. */
static bool in_order(const struct bi_sv_span *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (bi_key_cmp(&s[i].first, &s[i].last) > 0 ||
		    (i && (s[i].rank < s[i - 1].rank ||
			   (s[i].rank == s[i - 1].rank &&
			    bi_key_cmp(&s[i].first, &s[i - 1].first) < 0))))
			return false;
	return true;
}

static int prepare(struct decide *d)
{
	if (d->n > SIZE_MAX / 2 / sizeof(*d->keys))
		return -ENOMEM;
	d->keys = malloc(2 * d->n * sizeof(*d->keys));
	if (!d->keys)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		d->keys[2 * i] = d->s[i].first;
		d->keys[2 * i + 1] = d->s[i].last;
	}
	qsort(d->keys, 2 * d->n, sizeof(*d->keys), key_order);
	for (size_t i = 0; i < 2 * d->n; i++)
		if (!d->nkeys || bi_key_cmp(&d->keys[d->nkeys - 1], &d->keys[i]) != 0)
			d->keys[d->nkeys++] = d->keys[i];
	d->end = malloc(d->nkeys * sizeof(*d->end));
	d->who = malloc(d->nkeys * sizeof(*d->who));
	if (!d->end || !d->who)
		return -ENOMEM;
	return bits_init(&d->b, d->nkeys);
}

static void put(struct decide *d, size_t first, size_t last, size_t leaf)
{
	bits_set(&d->b, first);
	d->end[first] = last;
	d->who[first] = leaf;
}

/* Every range from position @p to @last, and leaf @i's (@f..@last), one
 * lost range. */
static void block(struct decide *d, size_t p, size_t f, size_t last)
{
	size_t lo = p < f ? p : f, hi = last;
	for (; p != NONE && p <= last; p = bits_next(&d->b, p + 1)) {
		hi = d->end[p] > hi ? d->end[p] : hi;
		bits_clear(&d->b, p);
	}
	put(d, lo, hi, BI_SV_BLOCKED);
}

/* Leaf @i against the ranges decided before it. */
static int weigh(struct decide *d, size_t i, bi_sv_same_fn same, void *ctx, struct bi_sv_tally *t)
{
	size_t f = position(d, &d->s[i].first), l = position(d, &d->s[i].last);
	size_t p = bits_prev(&d->b, f);
	if (p == NONE || d->end[p] < f)
		p = bits_next(&d->b, f);
	if (p == NONE || p > l) {
		put(d, f, l, i);
		return 0;
	}
	/* a twin holds f (it came first in key order; ranges are disjoint):
	 * it can only be the first range overlapping */
	size_t o = d->who[p], q = bits_next(&d->b, p + 1);
	bool twin = o != BI_SV_BLOCKED && d->s[o].rank == d->s[i].rank;
	/* any other range it overlaps is newer (it came first) or lost */
	bool newer = !twin || (q != NONE && q <= l), alike = false;
	if (twin) {
		int rc = same(ctx, o, i, &alike);
		if (rc < 0)
			return rc;
	}
	if (twin && !alike) {
		t->ambiguous++;
		block(d, p, f, l);
		return 0;
	}
	t->stale += newer;
	t->same += twin && !newer;
	return 0;
}

static int collect(struct decide *d, struct bi_sv_kept **out, size_t *nout)
{
	size_t cap = 0;
	for (size_t p = bits_next(&d->b, 0); p != NONE; p = bits_next(&d->b, p + 1)) {
		if (bi_grow((void **)out, &cap, *nout + 1, sizeof(**out)))
			return -ENOMEM;
		(*out)[(*nout)++] = (struct bi_sv_kept){ d->keys[p], d->keys[d->end[p]], d->who[p] };
	}
	return 0;
}

int bi_sv_decide(const struct bi_sv_span *s, size_t n, bi_sv_same_fn same, void *ctx,
		 struct bi_sv_kept **out, size_t *nout, struct bi_sv_tally *t)
{
	struct decide d = { .s = s, .n = n };
	*out = NULL;
	*nout = 0;
	memset(t, 0, sizeof(*t));
	if (!in_order(s, n))
		return -EINVAL;
	if (!n)
		return 0;
	int rc = prepare(&d);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = weigh(&d, i, same, ctx, t);
	if (rc == 0)
		rc = collect(&d, out, nout);
	if (rc < 0) {
		free(*out);
		*out = NULL;
		*nout = 0;
	}
	bits_free(&d.b);
	free(d.keys);
	free(d.end);
	free(d.who);
	return rc;
}
