/* SPDX-License-Identifier: MIT */
/*
 * Counting the groups of a sum of signed pieces (trie.h): one device's
 * presented numbers, as collide.c lays them out, without expanding them.
 *
 * XOR trie over the value bits, high to low. At the node for bit b (values
 * lo .. lo + 2^(b+1) - 1) every piece's elements share the bits above b, so
 * a slice splits at bit b with one binary search:
 *
 *      slice (bit b of a):  [ 0 0 0 0 | 1 1 1 ]
 *      value bit b = a_b ^ c_b  ->  child c_b  |  child !c_b
 *
 * What makes it fast:
 *  - levels where every image sits on one side are jumped over at once;
 *    pieces whose constants differ above their sets' top bit part at the
 *    first differing bit (the bit-range argument, made exact and local);
 *  - a slice holding all 2^(b+1) objectids of its prefix (dense objectid
 *    ranges) covers the whole node: it is folded into the node's base
 *    weight, and a node whose base (minus any deletions) is >= 2 is all
 *    groups, counted in O(pieces);
 *  - one piece alone: its values are groups iff base + m >= 2;
 *  - pieces that all come from one subvolume (its base, deltas and the
 *    exception) present each value at most once: no groups, settled at
 *    once. Snapshots stored as deltas of one base are cut apart by their
 *    constants' high bits, then stop: their deltas cost only the levels
 *    they share with other subvolumes;
 *  - small nodes, or nodes of very short slices, are listed and sorted (or
 *    tallied in a table when they fill the node).
 *
 * Cost, with P pieces after merging and n the longest slice: O(P log P) to
 * merge, then each piece is touched at most once per trie level it shares
 * with another (<= 64), O(64 P log n); deltas cost O(64 |delta| log n) at
 * worst (one constant for all: nfsd), as the base is cut only along their
 * paths, and far less when constants differ; dense shared ranges cost O(64)
 * per range boundary. Images that genuinely interleave cost O(T log T) in
 * small sorted batches for the T interleaved elements (every one may be a
 * group of its own). Memory: O(P) plus the DFS piece stack, <= 64 P.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inum/trie.h"

#include "base/grow.h"
#include "base/search.h"

#define MAT_MAX	  256
#define MAT_SHORT 8 /* average slice length worth splitting */

struct bi_vm {
	uint64_t v;
	int64_t m;
};

/* The values a dense slice lacks in its range (see complement). */
struct bi_comp {
	const uint64_t *v; /* the slice */
	size_t n;
	uint64_t lo; /* its range: lo .. lo + 2^(b+1) - 1 */
	int b;
	uint64_t *gaps; /* ascending */
	size_t ngaps;
};
#define COMP_MAX_VALUES (8u << 20) /* the gaps kept at most: 64 MiB */
#define COMP_MAX_BITS	22	   /* complements and full tallies up to 2^22 values */

int bi_trie_reserve(struct bi_trie *r, size_t more)
{
	/* at least one piece: the stack is used even when empty */
	size_t need = more > SIZE_MAX - r->used ? SIZE_MAX : r->used + more;
	if (bi_grow((void **)&r->stack, &r->cap, need ? need : 1, sizeof(*r->stack)))
		return -ENOMEM;
	return 0;
}

static bool want_examples(const struct bi_trie *r)
{
	return !r->stop && (r->group || *r->nex < r->maxex);
}

static void example(struct bi_trie *r, uint64_t value, int64_t m)
{
	if (!want_examples(r))
		return;
	if (r->group) {
		int rc = r->group(r->group_ctx, r->dev, value, m);
		if (rc)
			r->stop = rc;
		return;
	}
	if (bi_grow_most((void **)r->ex, &r->capex, *r->nex + 1, sizeof(**r->ex), r->maxex)) {
		r->stop = -ENOMEM;
		return;
	}
	(*r->ex)[(*r->nex)++] =
		(struct btrfsimg_collide_group){ r->dev, value, (uint64_t)m, 0, NULL };
}

static void record(struct bi_trie *r, uint64_t value, int64_t m)
{
	if (m < 2)
		return;
	r->groups++;
	r->inodes += (uint64_t)m;
	example(r, value, m);
}

static void vm_swap(struct bi_vm *a, struct bi_vm *b)
{
	struct bi_vm t = *a;
	*a = *b;
	*b = t;
}

/* Sort by value: quicksort with a median-of-three pivot, recursing into
 * the smaller side (depth <= log2 n), insertion sort for short runs.
 * qsort's indirect comparisons cost more than the whole trie. */
static void sort_vm(struct bi_vm *a, size_t n)
{
	while (n > 16) {
		size_t mid = n / 2, i = 0, j = n - 1;
		if (a[mid].v < a[0].v)
			vm_swap(&a[mid], &a[0]);
		if (a[n - 1].v < a[0].v)
			vm_swap(&a[n - 1], &a[0]);
		if (a[n - 1].v < a[mid].v)
			vm_swap(&a[n - 1], &a[mid]);
		uint64_t pivot = a[mid].v;
		for (;;) { /* Hoare partition */
			while (a[i].v < pivot)
				i++;
			while (a[j].v > pivot)
				j--;
			if (i >= j)
				break;
			vm_swap(&a[i++], &a[j--]);
		}
		size_t left = j + 1; /* [0, left) <= pivot <= [left, n) */
		if (left < n - left) {
			sort_vm(a, left);
			a += left;
			n -= left;
		} else {
			sort_vm(a + left, n - left);
			n = left;
		}
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && a[j].v < a[j - 1].v; j--)
			vm_swap(&a[j], &a[j - 1]);
}

/*
 * A trie node: the values lo .. lo + 2^(b+1) - 1. Pieces whose slice
 * covers all of them (positive weight, 2^(b+1) elements: dense objectid
 * ranges) are folded into @base, the inodes every value of the node holds.
 */
struct nd {
	int b;
	uint64_t lo;
	int64_t base;
	uint32_t base_owner; /* of the pieces folded into base (BI_OWNER_NONE: none) */
};

static uint32_t owner_join(uint32_t a, uint32_t b)
{
	return a == BI_OWNER_NONE ? b : b == BI_OWNER_NONE || a == b ? a : BI_OWNER_MIXED;
}

static int mat_reserve(struct bi_trie *r, size_t n)
{
	if (n > r->matcap) {
		if (n > SIZE_MAX / sizeof(*r->mat))
			return -ENOMEM;
		struct bi_vm *m = realloc(r->mat, n * sizeof(*m));
		if (!m)
			return -ENOMEM;
		r->mat = m;
		r->matcap = n;
	}
	return 0;
}

/* Dense node: weights summed in a table indexed by value - lo. */
static void tally(struct bi_trie *r, const struct bi_piece *p, size_t np, const struct nd *d)
{
	size_t size = (size_t)1 << (d->b + 1);

	for (size_t i = 0; i < size; i++)
		r->mat[i].m = 0;
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; j < p[i].n; j++)
			r->mat[(p[i].v[j] ^ p[i].c) - d->lo].m += p[i].m;
	for (size_t i = 0; i < size; i++)
		if (r->mat[i].m)
			record(r, d->lo + i, r->mat[i].m + d->base);
}

/* Few elements left, or pieces so short that splitting them costs more
 * than sorting (base <= 1, so uncovered values are no groups): list them,
 * sort (or tally, when they fill much of the node), sum equal values. */
static int materialise(struct bi_trie *r, const struct bi_piece *p, size_t np, size_t total,
		       const struct nd *d)
{
	size_t k = 0;
	bool dense = d->b < 40 && ((size_t)1 << (d->b + 1)) <= 2 * total;
	int rc = mat_reserve(r, dense ? (size_t)1 << (d->b + 1) : total);

	if (rc)
		return rc;
	if (dense) {
		tally(r, p, np, d);
		return 0;
	}
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; j < p[i].n; j++)
			r->mat[k++] = (struct bi_vm){ p[i].v[j] ^ p[i].c, p[i].m };
	sort_vm(r->mat, k);
	for (size_t i = 0; i < k;) {
		int64_t m = d->base;
		size_t j = i;
		for (; j < k && r->mat[j].v == r->mat[i].v; j++)
			m += r->mat[j].m;
		record(r, r->mat[i].v, m);
		i = j;
	}
	return 0;
}

/* First index whose bit b is set: the slice shares the bits above b, so
 * bit b reads 0...0 1...1 along it. */
static size_t split_at(const struct bi_piece *p, int b)
{
	uint64_t bit = 1ull << b;
	return bi_lower_bound(p->v, p->n, (p->v[0] & ~(bit - 1) & ~bit) | bit);
}

/*
 * Jump over the levels where nothing splits: when every piece's first and
 * last images agree above bit b', so do all images, and the levels above
 * b' each send everything to one child. (A piece covering a skipped level
 * would differ there, so no fold into base is missed.)
 */
static void skip_levels(const struct bi_piece *p, size_t np, struct nd *d)
{
	uint64_t x0, diff = 0;

	/* with base >= 2 the skipped siblings would be groups */
	if (!np || d->b < 0 || d->base >= 2)
		return;
	x0 = p[0].v[0] ^ p[0].c;
	for (size_t i = 0; i < np; i++)
		diff |= (p[i].v[0] ^ p[i].c ^ x0) | (p[i].v[p[i].n - 1] ^ p[i].c ^ x0);
	int b = diff ? 63 - __builtin_clzll(diff) : -1;
	if (b >= d->b)
		return;
	d->b = b;
	d->lo = b < 0 ? x0 : x0 & ~((2ull << b) - 1);
}

/* Fold the pieces covering the whole node into its base. */
static size_t absorb_full(struct bi_piece *p, size_t np, struct nd *d)
{
	size_t k = 0;

	if (d->b >= 62)
		return np;
	for (size_t i = 0; i < np; i++) {
		if (p[i].m > 0 && p[i].n == (size_t)1 << (d->b + 1)) {
			d->base += p[i].m;
			d->base_owner = owner_join(d->base_owner, p[i].owner);
		} else {
			p[k++] = p[i];
		}
	}
	return k;
}

/* Every value of the node holds >= 2 inodes: count them all; examples are
 * the first values, each weighed by the pieces that hold it. */
static void bulk(struct bi_trie *r, const struct bi_piece *p, size_t np, const struct nd *d)
{
	uint64_t size = 1ull << (d->b + 1);

	r->groups += size;
	r->inodes += (uint64_t)d->base * size;
	for (size_t i = 0; i < np; i++)
		r->inodes += (uint64_t)((int64_t)p[i].n * p[i].m);
	for (uint64_t v = d->lo; want_examples(r) && v - d->lo < size; v++) {
		int64_t m = d->base;
		for (size_t i = 0; i < np; i++) {
			size_t k = bi_lower_bound(p[i].v, p[i].n, v ^ p[i].c);
			m += k < p[i].n && p[i].v[k] == (v ^ p[i].c) ? p[i].m : 0;
		}
		example(r, v, m);
	}
}

/* Everything in the node comes from one owner, which presents each value
 * at most once: no groups here, however its deltas cut the base. */
static bool single_owner(const struct bi_piece *p, size_t np, const struct nd *d)
{
	uint32_t o = d->base ? d->base_owner : BI_OWNER_NONE;
	for (size_t i = 0; i < np; i++)
		o = owner_join(o, p[i].owner);
	return o != BI_OWNER_MIXED && o != BI_OWNER_NONE;
}

/*
 * Dense slices as their gaps. Snapshots of one tree present the same
 * dense objectid range under constants that differ in a few bits inside
 * it (inumbits=32..35): every value is held several times over, and
 * counting element by element touches each inode. A piece holding more
 * than 3/4 of its range counts instead as +m on every value of the node
 * (the node's base) and -m on the values it lacks: its gaps, found once
 * per slice and range and shared by every piece of that slice. Only once
 * no example is wanted (examples come in value order, and the base makes
 * every value a candidate).
 */
static const struct bi_comp *gaps_of(struct bi_trie *r, const struct bi_piece *p, int b)
{
	uint64_t size = 1ull << (b + 1), lo = p->v[0] & ~(size - 1);
	for (size_t i = 0; i < r->ncomps; i++) {
		const struct bi_comp *c = &r->comps[i];
		if (c->v == p->v && c->n == p->n && c->lo == lo && c->b == b)
			return c;
	}
	/* kept for the whole run: pieces on the stack point into them */
	if (r->compvals + (size - p->n) > COMP_MAX_VALUES)
		return NULL;
	if (bi_grow((void **)&r->comps, &r->capcomps, r->ncomps + 1, sizeof(*r->comps)))
		return NULL;
	uint64_t *g = malloc((size - p->n + 1) * sizeof(*g));
	if (!g)
		return NULL;
	size_t k = 0, j = 0;
	for (uint64_t x = lo; x - lo < size; x++) {
		if (j < p->n && p->v[j] == x)
			j++;
		else
			g[k++] = x;
	}
	struct bi_comp *c = &r->comps[r->ncomps++];
	*c = (struct bi_comp){ p->v, p->n, lo, b, g, k };
	r->compvals += k;
	return c;
}

static int complement_dense(struct bi_trie *r, struct bi_piece *p, size_t np, struct nd *d)
{
	if (d->b < 8 || d->b >= COMP_MAX_BITS || want_examples(r))
		return 0;
	/* Without deletions, dense slices sharing a node (snapshots that only
	 * grew) split into ranges that fill whole nodes and fold into the base
	 * at once: leave them. Deletions keep the base from settling nodes. */
	size_t neg = 0;
	for (size_t i = 0; i < np; i++)
		neg += p[i].m < 0 ? p[i].n : 0;
	if (neg < 16)
		return 0;
	uint64_t size = 1ull << (d->b + 1);
	for (size_t i = 0; i < np; i++) {
		if (p[i].m <= 0 || p[i].n * 4 <= size * 3)
			continue;
		const struct bi_comp *c = gaps_of(r, &p[i], d->b);
		if (!c)
			return 0; /* out of room for gaps: count the slices as they are */
		d->base += p[i].m;
		d->base_owner = owner_join(d->base_owner, p[i].owner);
		p[i].v = c->gaps;
		p[i].n = c->ngaps;
		p[i].m = -p[i].m;
	}
	return 0;
}

/* base >= 2 and no example wanted: every value holds base plus what the
 * pieces give it; values no piece reaches are groups of base. Counted in a
 * table of the node's values, visiting only the entries touched. */
static int full_tally(struct bi_trie *r, const struct bi_piece *p, size_t np, size_t total,
		      const struct nd *d)
{
	size_t size = (size_t)1 << (d->b + 1), k = 0;
	if (size > r->cntcap) {
		int32_t *t = calloc(size, sizeof(*t));
		if (!t)
			return -ENOMEM;
		free(r->cnt);
		r->cnt = t;
		r->cntcap = size;
	}
	if (total > r->touchcap) {
		uint32_t *t = realloc(r->touched, total * sizeof(*t));
		if (!t)
			return -ENOMEM;
		r->touched = t;
		r->touchcap = total;
	}
	/* a value whose sum comes back to 0 stays marked (INT32_MIN) as touched */
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; j < p[i].n; j++) {
			uint32_t at = (uint32_t)((p[i].v[j] ^ p[i].c) - d->lo);
			int32_t c = r->cnt[at];
			if (c == 0)
				r->touched[k++] = at;
			else if (c == INT32_MIN)
				c = 0;
			c += (int32_t)p[i].m;
			r->cnt[at] = c ? c : INT32_MIN;
		}
	uint64_t groups = size - k, inodes = (uint64_t)d->base * (size - k);
	for (size_t i = 0; i < k; i++) {
		int32_t v = r->cnt[r->touched[i]];
		int64_t m = d->base + (v == INT32_MIN ? 0 : v);
		r->cnt[r->touched[i]] = 0;
		if (m >= 2) {
			groups++;
			inodes += (uint64_t)m;
		}
	}
	r->groups += groups;
	r->inodes += inodes;
	return 0;
}

/* A node that needs no split: 1 if it was settled, 0 if not, or -ENOMEM. */
static int settle(struct bi_trie *r, const struct bi_piece *p, size_t np, const struct nd *d)
{
	int64_t neg = 0;
	size_t total = 0;

	if (single_owner(p, np, d))
		return true;

	for (size_t i = 0; i < np; i++) {
		neg += p[i].m < 0 ? p[i].m : 0;
		total += p[i].n;
	}
	if (d->base + neg >= 2) {
		bulk(r, p, np, d);
		return true;
	}
	if (np == 0)
		return true; /* every value holds base <= 1 */
	if (np == 1 && (!want_examples(r) || (d->base + p->m < 2 && d->base < 2))) {
		/* covered values hold base + m, the others base (then m < 0) */
		if (d->base + p->m >= 2) {
			r->groups += p->n;
			r->inodes += (uint64_t)((int64_t)p->n * (d->base + p->m));
		}
		if (d->base >= 2) {
			uint64_t rest = (1ull << (d->b + 1)) - p->n;
			r->groups += rest;
			r->inodes += rest * (uint64_t)d->base;
		}
		return true;
	}
	if (d->b < 0) { /* one value; every piece holds it once */
		int64_t m = d->base;
		for (size_t i = 0; i < np; i++)
			m += p[i].m;
		record(r, d->lo, m);
		return true;
	}
	if (d->base <= 1 && (total <= MAT_MAX || total <= MAT_SHORT * np)) {
		int rc = materialise(r, p, np, total, d);
		return rc ? rc : 1;
	}
	if (d->base >= 2 && d->b < COMP_MAX_BITS && !want_examples(r)) {
		int rc = full_tally(r, p, np, total, d);
		return rc ? rc : 1;
	}
	return 0;
}

/*
 * Pieces stack[first, first+np) at node @d. Child 0 (value bit 0) is pushed
 * on the stack and counted first, so groups come out in value order; child
 * 1 is compacted in place and handled by the loop.
 */
static int node(struct bi_trie *r, size_t first, size_t np, struct nd d)
{
	for (;; d.b--) {
		skip_levels(r->stack + first, np, &d);
		np = absorb_full(r->stack + first, np, &d);
		int rc = complement_dense(r, r->stack + first, np, &d);
		if (rc)
			return rc;
		rc = settle(r, r->stack + first, np, &d);
		if (r->stop)
			return r->stop;
		if (rc)
			return rc < 0 ? rc : 0;
		rc = bi_trie_reserve(r, np);
		if (rc)
			return rc;
		struct bi_piece *p = r->stack + first, *c0 = r->stack + r->used;
		size_t n0 = 0, n1 = 0;
		for (size_t i = 0; i < np; i++) {
			struct bi_piece q = p[i];
			size_t k = split_at(&q, d.b);
			bool flip = (q.c >> d.b) & 1;
			/* low part: value bit = c_b; high part: !c_b */
			struct bi_piece lo = { q.v, k, q.c, q.m, q.owner };
			struct bi_piece hi = { q.v + k, q.n - k, q.c, q.m, q.owner };
			struct bi_piece *to0 = flip ? &hi : &lo, *to1 = flip ? &lo : &hi;
			if (to0->n)
				c0[n0++] = *to0;
			if (to1->n)
				p[n1++] = *to1;
		}
		r->used += n0;
		rc = node(r, r->used - n0, n0, (struct nd){ d.b - 1, d.lo, d.base, d.base_owner });
		r->used -= n0;
		if (rc)
			return rc;
		d.lo |= 1ull << d.b;
		np = n1;
	}
}

/* Count every group of the pieces on the stack (one device). */
int bi_trie_count(struct bi_trie *r, size_t np)
{
	return node(r, 0, np, (struct nd){ 63, 0, 0, BI_OWNER_NONE });
}

static int piece_cmp(const void *a, const void *b)
{
	const struct bi_piece *x = a, *y = b;
	if (x->v != y->v)
		return (uintptr_t)x->v < (uintptr_t)y->v ? -1 : 1;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->c < y->c ? -1 : x->c > y->c;
}

/* Merge pieces with the same slice and constant; drop weight 0. */
size_t bi_trie_merge(struct bi_piece *p, size_t np)
{
	size_t k = 0;

	qsort(p, np, sizeof(*p), piece_cmp);
	for (size_t i = 0; i < np; i++) {
		if (k && piece_cmp(&p[k - 1], &p[i]) == 0) {
			p[k - 1].m += p[i].m;
			p[k - 1].owner = owner_join(p[k - 1].owner, p[i].owner);
		} else {
			p[k++] = p[i];
		}
		if (k && p[k - 1].m == 0 && (i + 1 == np || piece_cmp(&p[k - 1], &p[i + 1])))
			k--;
	}
	return k;
}

void bi_trie_free(struct bi_trie *r)
{
	free(r->stack);
	free(r->mat);
	free(r->cnt);
	free(r->touched);
	for (size_t i = 0; i < r->ncomps; i++)
		free(r->comps[i].gaps);
	free(r->comps);
}
