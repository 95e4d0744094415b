/* SPDX-License-Identifier: MIT */
/*
 * Exact collision counting of presented inode numbers over an abstract set
 * of inodes, without expanding shared sets.
 *
 * Model. Subvolume s holds objectids S_s (base + add - del) and presents
 * a as P_s(a) = a ^ c_s, except a == c_s which presents c_s (c_s: 0, the
 * inumbits overlay or the nfsd uniquifier). Extras (stubs) present a fixed
 * number. A group is a presented number held by >= 2 inodes of one device.
 *
 * Signed pieces. Everything a device presents is a sum of pieces (sorted
 * slice A, constant c, weight m): the multiset { a ^ c : a in A }, m times.
 * A subvolume gives base(+1), add(+1), del(-1); the exception a == c_s
 * gives {0}(-1) and {c_s}(+1); an extra gives {ino}(+1). Pieces with the
 * same slice and constant merge first: k snapshots sharing a tree under one
 * constant are one piece of weight k.
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_inum.h"
#include "inum/collide.h"

#include "base/cursor.h"
#include "base/err.h"
#include "inum/schemes.h"

#define MAT_MAX		256
#define MAT_SHORT	8 /* average slice length worth splitting */
#define DEFAULT_MEMBERS 16

static const uint64_t zero_value; /* the image of the exception a == c */

/* Whose elements a piece holds: a subvolume's index, or OWNER_MIXED for
 * extras, for a subvolume that may present a value twice (subvol_owner) and
 * once pieces of two owners merged. One owner presents each value at most
 * once (see single_owner). */
#define OWNER_MIXED UINT32_MAX
#define OWNER_NONE  (UINT32_MAX - 1)

struct piece {
	const uint64_t *v;
	size_t n;
	uint64_t c;
	int64_t m;
	uint32_t owner;
};

struct vm {
	uint64_t v;
	int64_t m;
};

struct ctx;

/* The most subvolumes the piece arrays can hold (checked with the input). */
#define MAX_SUBVOLS (SIZE_MAX / 8 / sizeof(struct piece))

/* The values a dense slice lacks in its range (see complement). */
struct comp {
	const uint64_t *v; /* the slice */
	size_t n;
	uint64_t lo; /* its range: lo .. lo + 2^(b+1) - 1 */
	int b;
	uint64_t *gaps; /* ascending */
	size_t ngaps;
};
#define COMP_MAX_VALUES (8u << 20) /* the gaps kept at most: 64 MiB */
#define COMP_MAX_BITS	22	   /* complements and full tallies up to 2^22 values */

/* One device's counting pass. */
struct run {
	struct piece *stack; /* DFS piece stack; indices, it may move */
	size_t used, cap;
	uint64_t dev;
	uint64_t groups, inodes;
	struct btrfsimg_collide_group **ex; /* the result's example array, grown */
	size_t *nex, maxex, capex;
	struct vm *mat; /* materialise scratch */
	size_t matcap;
	int32_t *cnt;	   /* full_tally's table, zero between uses */
	uint32_t *touched; /* and the entries it touched */
	size_t cntcap, touchcap;
	struct comp *comps; /* complements of dense slices (see complement_dense) */
	size_t ncomps, capcomps, compvals;
	struct ctx *x; /* streaming: each group goes to x->fn at once */
	int stop;      /* -ENOMEM, or what x->fn returned: the run ends */
};

bool bi_collide_subvol_has(const struct btrfsimg_collide_subvol *s, uint64_t a)
{
	if (bi_idset_has(s->add, a))
		return true;
	return bi_idset_has(s->base, a) && !bi_idset_has(s->del, a);
}

uint64_t bi_scheme_const(const struct btrfsimg_scheme *s, uint64_t subvol)
{
	if (s->uniquifier)
		return btrfsimg_uniquifier(subvol);
	return btrfsimg_inumbits_overlay(subvol, s->inumbits);
}

/* Device of subvols[i] (extras: see btrfsimg_collide_extra). */
static uint64_t subvol_dev(const struct btrfsimg_scheme *s, const struct btrfsimg_collide_subvol *v,
			   size_t i)
{
	if (s->numdevs == BTRFSIMG_NUMDEVS_2)
		return v->parity;
	if (s->numdevs == BTRFSIMG_NUMDEVS_MANY)
		return (uint64_t)i + 1;
	return 0;
}

static uint64_t extra_dev(const struct btrfsimg_scheme *s, const struct btrfsimg_collide_extra *e)
{
	return s->numdevs == BTRFSIMG_NUMDEVS_2 ? e->parity : 0;
}

/* ---------------------------- the trie ---------------------------- */

static int stack_reserve(struct run *r, size_t more)
{
	if (r->stack && more <= r->cap - r->used)
		return 0;
	size_t cap = r->cap ? r->cap : 64;
	while (cap - r->used < more) {
		if (cap > SIZE_MAX / 2 / sizeof(struct piece))
			return -ENOMEM;
		cap *= 2;
	}
	struct piece *p = realloc(r->stack, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	r->stack = p;
	r->cap = cap;
	return 0;
}

static bool want_examples(const struct run *r)
{
	return !r->stop && (r->x || *r->nex < r->maxex);
}

static void stream_group(struct run *r, uint64_t value, int64_t m);

static void example(struct run *r, uint64_t value, int64_t m)
{
	if (!want_examples(r))
		return;
	if (r->x) {
		stream_group(r, value, m);
		return;
	}
	if (*r->nex == r->capex) {
		size_t cap = r->capex ? 2 * r->capex : 16;
		if (cap > r->maxex)
			cap = r->maxex;
		void *v = realloc(*r->ex, cap * sizeof(**r->ex));
		if (!v) {
			r->stop = -ENOMEM;
			return;
		}
		*r->ex = v;
		r->capex = cap;
	}
	(*r->ex)[(*r->nex)++] =
		(struct btrfsimg_collide_group){ r->dev, value, (uint64_t)m, 0, NULL };
}

static void record(struct run *r, uint64_t value, int64_t m)
{
	if (m < 2)
		return;
	r->groups++;
	r->inodes += (uint64_t)m;
	example(r, value, m);
}

static void vm_swap(struct vm *a, struct vm *b)
{
	struct vm t = *a;
	*a = *b;
	*b = t;
}

/* Sort by value: quicksort with a median-of-three pivot, recursing into
 * the smaller side (depth <= log2 n), insertion sort for short runs.
 * qsort's indirect comparisons cost more than the whole trie. */
static void sort_vm(struct vm *a, size_t n)
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
	uint32_t base_owner; /* of the pieces folded into base (OWNER_NONE: none) */
};

static uint32_t owner_join(uint32_t a, uint32_t b)
{
	return a == OWNER_NONE ? b : b == OWNER_NONE || a == b ? a : OWNER_MIXED;
}

static int mat_reserve(struct run *r, size_t n)
{
	if (n > r->matcap) {
		if (n > SIZE_MAX / sizeof(*r->mat))
			return -ENOMEM;
		struct vm *m = realloc(r->mat, n * sizeof(*m));
		if (!m)
			return -ENOMEM;
		r->mat = m;
		r->matcap = n;
	}
	return 0;
}

/* Dense node: weights summed in a table indexed by value - lo. */
static void tally(struct run *r, const struct piece *p, size_t np, const struct nd *d)
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
static int materialise(struct run *r, const struct piece *p, size_t np, size_t total,
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
			r->mat[k++] = (struct vm){ p[i].v[j] ^ p[i].c, p[i].m };
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

bool bi_idset_has(const struct btrfsimg_idset *s, uint64_t x)
{
	size_t k = s ? bi_lower_bound(s->v, s->n, x) : 0;
	return s && k < s->n && s->v[k] == x;
}

/* First index whose bit b is set: the slice shares the bits above b, so
 * bit b reads 0...0 1...1 along it. */
static size_t split_at(const struct piece *p, int b)
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
static void skip_levels(const struct piece *p, size_t np, struct nd *d)
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
static size_t absorb_full(struct piece *p, size_t np, struct nd *d)
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
static void bulk(struct run *r, const struct piece *p, size_t np, const struct nd *d)
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
static bool single_owner(const struct piece *p, size_t np, const struct nd *d)
{
	uint32_t o = d->base ? d->base_owner : OWNER_NONE;
	for (size_t i = 0; i < np; i++)
		o = owner_join(o, p[i].owner);
	return o != OWNER_MIXED && o != OWNER_NONE;
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
static const struct comp *gaps_of(struct run *r, const struct piece *p, int b)
{
	uint64_t size = 1ull << (b + 1), lo = p->v[0] & ~(size - 1);
	for (size_t i = 0; i < r->ncomps; i++) {
		const struct comp *c = &r->comps[i];
		if (c->v == p->v && c->n == p->n && c->lo == lo && c->b == b)
			return c;
	}
	/* kept for the whole run: pieces on the stack point into them */
	if (r->compvals + (size - p->n) > COMP_MAX_VALUES)
		return NULL;
	if (r->ncomps == r->capcomps) {
		size_t cap = r->capcomps ? 2 * r->capcomps : 16;
		struct comp *v = realloc(r->comps, cap * sizeof(*v));
		if (!v)
			return NULL;
		r->comps = v;
		r->capcomps = cap;
	}
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
	struct comp *c = &r->comps[r->ncomps++];
	*c = (struct comp){ p->v, p->n, lo, b, g, k };
	r->compvals += k;
	return c;
}

static int complement_dense(struct run *r, struct piece *p, size_t np, struct nd *d)
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
		const struct comp *c = gaps_of(r, &p[i], d->b);
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
static int full_tally(struct run *r, const struct piece *p, size_t np, size_t total,
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
static int settle(struct run *r, const struct piece *p, size_t np, const struct nd *d)
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
static int node(struct run *r, size_t first, size_t np, struct nd d)
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
		rc = stack_reserve(r, np);
		if (rc)
			return rc;
		struct piece *p = r->stack + first, *c0 = r->stack + r->used;
		size_t n0 = 0, n1 = 0;
		for (size_t i = 0; i < np; i++) {
			struct piece q = p[i];
			size_t k = split_at(&q, d.b);
			bool flip = (q.c >> d.b) & 1;
			/* low part: value bit = c_b; high part: !c_b */
			struct piece lo = { q.v, k, q.c, q.m, q.owner };
			struct piece hi = { q.v + k, q.n - k, q.c, q.m, q.owner };
			struct piece *to0 = flip ? &hi : &lo, *to1 = flip ? &lo : &hi;
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
static int count_pieces(struct run *r, size_t np)
{
	return node(r, 0, np, (struct nd){ 63, 0, 0, OWNER_NONE });
}

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	if (x->v != y->v)
		return (uintptr_t)x->v < (uintptr_t)y->v ? -1 : 1;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return x->c < y->c ? -1 : x->c > y->c;
}

/* Merge pieces with the same slice and constant; drop weight 0. */
static size_t merge_pieces(struct piece *p, size_t np)
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

/* ------------------------- one device, one scheme ------------------------- */

/* What one scheme run shares between devices. */
struct ctx {
	const struct btrfsimg_collide_input *in;
	const struct btrfsimg_scheme *s;
	uint64_t *c;   /* per-subvolume constant */
	size_t *order; /* subvolume indices grouped by device */
	size_t max_members;
	struct btrfsimg_collide_result *out;
	struct run run;
	struct piece *pieces; /* root pieces of the current device */
	/* streaming: every group, with every member, to fn */
	btrfsimg_collide_group_fn fn;
	void *fn_ctx;
	size_t lo, hi; /* the device being counted: order[lo, hi) */
	bool extras;   /* and its extras */
};

static void add_piece(struct piece *p, size_t *np, const struct btrfsimg_idset *set, uint64_t c,
		      int64_t m, uint32_t owner)
{
	if (set && set->n)
		p[(*np)++] = (struct piece){ set->v, set->n, c, m, owner };
}

static void add_value(struct piece *p, size_t *np, const uint64_t *v, int64_t m, uint32_t owner)
{
	p[(*np)++] = (struct piece){ v, 1, 0, m, owner };
}

/* Subvolume i's owner tag. Its base + add - del is a set and a ^ c is one
 * to one, so it presents each value once; except that with both 0 and c
 * in the set, 0 presents 0 ^ c = c and so does c: then it is left mixed. */
static uint32_t subvol_owner(const struct btrfsimg_collide_subvol *v, uint64_t c, size_t i)
{
	if (i >= OWNER_NONE || (c && bi_collide_subvol_has(v, 0) && bi_collide_subvol_has(v, c)))
		return OWNER_MIXED;
	return (uint32_t)i;
}

/* Root pieces of subvolumes order[lo, hi) and of the extras on @dev. */
static size_t device_pieces(struct ctx *x, size_t lo, size_t hi, uint64_t dev, bool extras)
{
	size_t np = 0;

	for (size_t k = lo; k < hi; k++) {
		size_t i = x->order[k];
		const struct btrfsimg_collide_subvol *v = &x->in->subvols[i];
		uint64_t c = x->c[i];
		uint32_t o = subvol_owner(v, c, i);
		add_piece(x->pieces, &np, v->base, c, 1, o);
		add_piece(x->pieces, &np, v->add, c, 1, o);
		add_piece(x->pieces, &np, v->del, c, -1, o);
		if (c && bi_collide_subvol_has(v, c)) {
			/* a == c presents c, not c ^ c = 0 */
			add_value(x->pieces, &np, &zero_value, -1, o);
			add_value(x->pieces, &np, &x->c[i], 1, o);
		}
	}
	for (size_t i = 0; extras && i < x->in->nextras; i++)
		if (extra_dev(x->s, &x->in->extras[i]) == dev)
			add_value(x->pieces, &np, &x->in->extras[i].ino, 1, OWNER_MIXED);
	return merge_pieces(x->pieces, np);
}

static int add_member(struct ctx *x, struct btrfsimg_collide_group *g, uint64_t subvol,
		      uint64_t obj, bool extra, size_t extra_index)
{
	if (!g->members) {
		size_t n = g->size < x->max_members ? (size_t)g->size : x->max_members;
		g->members = calloc(n ? n : 1, sizeof(*g->members));
		if (!g->members)
			return -ENOMEM;
	}
	if (g->nmembers < x->max_members)
		g->members[g->nmembers++] =
			(struct btrfsimg_collide_member){ subvol, obj, extra, extra_index };
	return 0;
}

/* Fill the members of example @g by asking each inode of its device. */
static int fill_members(struct ctx *x, struct btrfsimg_collide_group *g, size_t lo, size_t hi,
			bool extras)
{
	int rc = 0;

	for (size_t k = lo; k < hi && !rc; k++) {
		size_t i = x->order[k];
		const struct btrfsimg_collide_subvol *v = &x->in->subvols[i];
		uint64_t c = x->c[i], a = g->ino ^ c;
		/* a = ino ^ c presents ino unless a == c (ino == 0) */
		if ((c == 0 || a != c) && bi_collide_subvol_has(v, a))
			rc = add_member(x, g, v->id, a, false, 0);
		if (!rc && c && g->ino == c && bi_collide_subvol_has(v, c))
			rc = add_member(x, g, v->id, c, false, 0);
	}
	for (size_t i = 0; extras && !rc && i < x->in->nextras; i++) {
		const struct btrfsimg_collide_extra *e = &x->in->extras[i];
		if (extra_dev(x->s, e) == g->device && e->ino == g->ino)
			rc = add_member(x, g, e->subvol, e->ino, true, i);
	}
	return rc;
}

/* A group found while streaming: its members, then the caller's function. */
static void stream_group(struct run *r, uint64_t value, int64_t m)
{
	struct ctx *x = r->x;
	struct btrfsimg_collide_group g = { r->dev, value, (uint64_t)m, 0, NULL };
	int rc = fill_members(x, &g, x->lo, x->hi, x->extras);
	if (!rc)
		rc = x->fn(x->fn_ctx, &g);
	free(g.members);
	if (rc)
		r->stop = rc;
}

/* Count device @dev: subvolumes order[lo, hi), extras if @extras. */
static int count_device(struct ctx *x, size_t lo, size_t hi, uint64_t dev, bool extras)
{
	size_t np = device_pieces(x, lo, hi, dev, extras), ex0 = x->out->nexamples;
	struct run *r = &x->run;

	x->lo = lo;
	x->hi = hi;
	x->extras = extras;
	r->dev = dev;
	r->used = 0;
	int rc = stack_reserve(r, np);
	if (rc)
		return rc;
	if (np)
		memcpy(r->stack, x->pieces, np * sizeof(*r->stack));
	r->used = np;
	rc = count_pieces(r, np);
	if (!rc)
		rc = r->stop;
	for (size_t i = ex0; !rc && i < x->out->nexamples; i++)
		rc = fill_members(x, &x->out->examples[i], lo, hi, extras);
	return rc;
}

/* Group subvolume indices by device (parity 0 first under numdevs=2),
 * keeping input order within one; returns where device 1 starts. */
static size_t order_by_device(struct ctx *x)
{
	size_t n = x->in->nsubvols, k = 0, split = n;

	for (unsigned p = 0; p < 2; p++) {
		if (p == 1)
			split = k;
		for (size_t i = 0; i < n; i++)
			if (x->s->numdevs != BTRFSIMG_NUMDEVS_2 ? p == 0
								: x->in->subvols[i].parity == p)
				x->order[k++] = i;
	}
	return split;
}

static int count_all(struct ctx *x)
{
	size_t n = x->in->nsubvols, split = order_by_device(x);
	int rc;

	if (x->s->numdevs == BTRFSIMG_NUMDEVS_MANY) {
		/* the superblock's device holds only the extras */
		rc = count_device(x, 0, 0, 0, true);
		for (size_t i = 0; !rc && i < n; i++)
			rc = count_device(x, i, i + 1, (uint64_t)i + 1, false);
		return rc;
	}
	rc = count_device(x, 0, split, 0, true);
	if (!rc && x->s->numdevs == BTRFSIMG_NUMDEVS_2)
		rc = count_device(x, split, n, 1, true);
	return rc;
}

/* ----------------------------- headroom ----------------------------- */

/* Constant tables of the current scheme: subvolumes and extras. */
static int constants(struct ctx *x, struct bi_subvol_const **t, struct bi_subvol_const **fx)
{
	size_t n = x->in->nsubvols, ne = x->in->nextras;

	*t = calloc(n + 1, sizeof(**t));
	*fx = calloc(ne + 1, sizeof(**fx));
	if (!*t || !*fx)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		(*t)[i] = (struct bi_subvol_const){ subvol_dev(x->s, &x->in->subvols[i], i),
						    x->c[i], x->in->subvols[i].id };
	for (size_t i = 0; i < ne; i++)
		(*fx)[i] =
			(struct bi_subvol_const){ extra_dev(x->s, &x->in->extras[i]),
						  x->in->extras[i].ino, x->in->extras[i].subvol };
	return 0;
}

static int headroom(struct ctx *x, const struct bi_collide_stats *st)
{
	struct bi_subvol_const *t = NULL, *fx = NULL;
	int rc = constants(x, &t, &fx);

	if (!rc)
		bi_headroom(x->s, t, x->in->nsubvols, fx, x->in->nextras, st, x->out);
	free(t);
	free(fx);
	return rc;
}

/* ------------------- the interface analyze.c uses ------------------- */

static void ctx_free(struct ctx *x)
{
	free(x->c);
	free(x->order);
	free(x->pieces);
	free(x->run.stack);
	free(x->run.mat);
	free(x->run.cnt);
	free(x->run.touched);
	for (size_t i = 0; i < x->run.ncomps; i++)
		free(x->run.comps[i].gaps);
	free(x->run.comps);
}

static int ctx_alloc(struct ctx *x, size_t n, size_t nextras, size_t maxex)
{
	if (n > SIZE_MAX / 8 / sizeof(struct piece) ||
	    nextras > SIZE_MAX / 8 / sizeof(struct piece))
		return -ENOMEM;
	x->c = calloc(n + 1, sizeof(*x->c));
	x->order = calloc(n + 1, sizeof(*x->order));
	x->pieces = calloc(5 * n + nextras + 1, sizeof(*x->pieces));
	x->run.ex = &x->out->examples; /* grown as groups are found */
	x->run.nex = &x->out->nexamples;
	x->run.maxex = maxex;
	return x->c && x->order && x->pieces ? 0 : -ENOMEM;
}

/* ----------------------------- public API ----------------------------- */

int btrfsimg_scheme_name(const struct btrfsimg_scheme *s, char *buf, size_t len)
{
	static const char *const devs[] = { "", "1", "2", "many" };
	const char *d = s && s->numdevs >= 1 && s->numdevs <= 3 ? devs[s->numdevs] : "?";

	if (!s)
		return snprintf(buf, len, "?");
	if (s->uniquifier && s->inumbits)
		return snprintf(buf, len, "inumbits=%u+nfsd-uniquifier", s->inumbits);
	if (s->uniquifier)
		return snprintf(buf, len, "nfsd-uniquifier");
	if (!s->inumbits && s->numdevs == BTRFSIMG_NUMDEVS_1)
		return snprintf(buf, len, "nfsd");
	if (!s->inumbits)
		return snprintf(buf, len, "numdevs=%s", d);
	return snprintf(buf, len, "inumbits=%u,numdevs=%s", s->inumbits, d);
}

void btrfsimg_collide_result_clear(struct btrfsimg_collide_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->examples && i < r->nexamples; i++)
		free(r->examples[i].members);
	free(r->examples);
	r->examples = NULL;
	r->nexamples = 0;
}

/* Count one scheme over validated input; with @fn, stream every group. */
static int run_one(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
		   const struct btrfsimg_collide_opts *o, const struct bi_collide_stats *st,
		   struct btrfsimg_collide_result *out, btrfsimg_collide_group_fn fn, void *fn_ctx)
{
	size_t n = in->nsubvols, maxex = o && !fn ? o->max_examples : 0;
	struct ctx x = { .in = in, .s = s, .out = out, .fn = fn, .fn_ctx = fn_ctx };
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->scheme = *s;
	x.max_members = o && o->max_members ? o->max_members : DEFAULT_MEMBERS;
	if (fn) {
		x.max_members = SIZE_MAX;
		x.run.x = &x;
	}
	if (maxex > st->total / 2) /* each group holds >= 2 inodes */
		maxex = (size_t)(st->total / 2);
	if (ctx_alloc(&x, n, in->nextras, maxex))
		goto out;
	for (size_t i = 0; i < n; i++)
		x.c[i] = bi_scheme_const(s, in->subvols[i].id);
	rc = count_all(&x);
	out->groups = x.run.groups;
	out->inodes = x.run.inodes;
	if (!rc && !fn)
		rc = headroom(&x, st);
out:
	ctx_free(&x);
	return rc;
}

int btrfsimg_collide(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
		     const struct btrfsimg_collide_opts *o, struct btrfsimg_collide_result *out,
		     char *err, size_t errlen)
{
	struct bi_collide_stats st;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	int rc = bi_collide_scheme_ok(s, err, errlen);
	if (!rc)
		rc = bi_collide_input_ok(in, MAX_SUBVOLS, &st, err, errlen);
	if (!rc)
		rc = run_one(in, s, o, &st, out, NULL, NULL);
	if (rc == -ENOMEM)
		bi_msg(err, errlen, -ENOMEM, "out of memory counting collisions");
	return rc;
}

int bi_collide_consts(const struct btrfsimg_collide_input *in, const uint64_t *c, int numdevs,
		      uint64_t *groups, uint64_t *inodes)
{
	struct btrfsimg_scheme s = { 0, false, numdevs };
	struct btrfsimg_collide_result out;
	size_t n = in->nsubvols;
	struct ctx x = { .in = in, .s = &s, .out = &out, .max_members = DEFAULT_MEMBERS };
	int rc = -ENOMEM;

	memset(&out, 0, sizeof(out));
	if (!ctx_alloc(&x, n, in->nextras, 0)) {
		for (size_t i = 0; i < n; i++)
			x.c[i] = c[i];
		rc = count_all(&x);
	}
	*groups = x.run.groups;
	*inodes = x.run.inodes;
	ctx_free(&x);
	btrfsimg_collide_result_clear(&out);
	return rc;
}

int btrfsimg_collide_groups(const struct btrfsimg_collide_input *in,
			    const struct btrfsimg_scheme *s, btrfsimg_collide_group_fn fn,
			    void *ctx, char *err, size_t errlen)
{
	struct bi_collide_stats st;
	struct btrfsimg_collide_result out;

	if (!fn)
		return bi_msg(err, errlen, -EINVAL, "no function to call for each group");
	int rc = bi_collide_scheme_ok(s, err, errlen);
	if (!rc)
		rc = bi_collide_input_ok(in, MAX_SUBVOLS, &st, err, errlen);
	if (!rc)
		rc = run_one(in, s, NULL, &st, &out, fn, ctx);
	btrfsimg_collide_result_clear(&out);
	if (rc == -ENOMEM)
		bi_msg(err, errlen, -ENOMEM, "out of memory counting collisions");
	return rc;
}

void btrfsimg_collide_report_free(struct btrfsimg_collide_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->results && i < r->nresults; i++)
		btrfsimg_collide_result_clear(&r->results[i]);
	free(r->results);
	free(r);
}

/* The i-th scheme of a report (see btrfsimg_collide_report). */
static struct btrfsimg_scheme report_scheme(size_t i)
{
	if (i == 0)
		return (struct btrfsimg_scheme){ 0, false, BTRFSIMG_NUMDEVS_1 };
	if (i == 1)
		return (struct btrfsimg_scheme){ 0, true, BTRFSIMG_NUMDEVS_1 };
	if (i < 2 + 33)
		return (struct btrfsimg_scheme){ (unsigned)(32 + i - 2), false,
						 BTRFSIMG_NUMDEVS_1 };
	if (i < 2 + 66)
		return (struct btrfsimg_scheme){ (unsigned)(32 + i - 35), false,
						 BTRFSIMG_NUMDEVS_2 };
	return (struct btrfsimg_scheme){ 0, false, BTRFSIMG_NUMDEVS_MANY };
}

static void summarise(struct btrfsimg_collide_report *r)
{
	for (size_t i = 2; i < 2 + 66; i++) {
		const struct btrfsimg_collide_result *x = &r->results[i];
		bool two = x->scheme.numdevs == BTRFSIMG_NUMDEVS_2;
		unsigned *fr = two ? &r->min_free_n2 : &r->min_free_n1;
		unsigned *pr = two ? &r->min_proven_n2 : &r->min_proven_n1;
		if (!x->groups && !*fr)
			*fr = x->scheme.inumbits;
		if (x->proven && !*pr)
			*pr = x->scheme.inumbits;
	}
}

/* The schemes of a report, shared out between threads: each takes the
 * next scheme not taken yet; they read the input only and write their own
 * result. The first error is kept. */
struct all_job {
	const struct btrfsimg_collide_input *in;
	const struct btrfsimg_collide_opts *o;
	const struct bi_collide_stats *st;
	struct btrfsimg_collide_report *r;
	pthread_mutex_t mu;
	size_t next;
	int rc;
};

static void *all_worker(void *arg)
{
	struct all_job *j = arg;
	for (;;) {
		pthread_mutex_lock(&j->mu);
		size_t i = j->rc ? BTRFSIMG_COLLIDE_SCHEMES : j->next++;
		pthread_mutex_unlock(&j->mu);
		if (i >= BTRFSIMG_COLLIDE_SCHEMES)
			return NULL;
		struct btrfsimg_scheme s = report_scheme(i);
		int rc = run_one(j->in, &s, j->o, j->st, &j->r->results[i], NULL, NULL);
		if (rc) {
			pthread_mutex_lock(&j->mu);
			if (!j->rc)
				j->rc = rc;
			pthread_mutex_unlock(&j->mu);
		}
	}
}

/* Two threads (the schemes are independent; a few of them hold nearly all
 * the work on snapshot-heavy images), or one where a second cannot start. */
#define COLLIDE_THREADS 2

int btrfsimg_collide_all(const struct btrfsimg_collide_input *in,
			 const struct btrfsimg_collide_opts *o,
			 struct btrfsimg_collide_report **out, char *err, size_t errlen)
{
	struct btrfsimg_collide_report *r = NULL;
	struct bi_collide_stats st;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = bi_collide_input_ok(in, MAX_SUBVOLS, &st, err, errlen);
	if (rc)
		return rc;
	rc = -ENOMEM;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->results = calloc(BTRFSIMG_COLLIDE_SCHEMES, sizeof(*r->results))))
		goto out;
	for (size_t i = 0; i < BTRFSIMG_COLLIDE_SCHEMES; i++)
		r->results[i].scheme = report_scheme(i);
	r->nresults = BTRFSIMG_COLLIDE_SCHEMES;
	struct all_job j = { .in = in, .o = o, .st = &st, .r = r };
	pthread_t t[COLLIDE_THREADS - 1];
	size_t nt = 0;
	pthread_mutex_init(&j.mu, NULL);
	while (nt < COLLIDE_THREADS - 1 && pthread_create(&t[nt], NULL, all_worker, &j) == 0)
		nt++;
	all_worker(&j);
	for (size_t i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&j.mu);
	rc = j.rc;
	if (rc)
		goto out;
	summarise(r);
	*out = r;
	r = NULL;
out:
	if (rc == -ENOMEM)
		bi_msg(err, errlen, -ENOMEM, "out of memory counting collisions");
	btrfsimg_collide_report_free(r);
	return rc;
}
