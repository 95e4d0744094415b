// SPDX-License-Identifier: MIT
/* Which scanned leaves a rebuilt tree keeps (btrfs/salvage_decide.h:
 * bi_sv_decide) against a brute force of the rule as it was first written
 * (every leaf in age order weighed against every range decided before it,
 * scanned one by one): random sets of leaves over a few keys, so that they
 * overlap, with twins of one rank alike and not, over thousands of rounds.
 * Beside the ranges kept, what the walk derives from them: the as_of mark
 * of each leaf kept (the generation a node names it in, its own if newer)
 * and the inodes cut at the edges no node names one after the other. And
 * two million leaves, decided well within the test's timeout (the sorted
 * array it replaces moved every range on each insert: hours). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "btrfs/salvage_decide.h"

#define MAXN 64

/* A leaf as salvage_leaves.c weighs it: its age (generation, named through
 * a root item, allocated, the newest node naming it), keys, items, and
 * the leaf a node names after it. */
struct leaf {
	uint64_t gen, as_of;
	int rooted, allocated;
	bi_key first, last;
	unsigned items;	/* leaves with equal items are the same leaf written twice */
	size_t next;	/* index of the leaf a node names after it, or SIZE_MAX */
	size_t id;
};

struct ref_range {
	bi_key first, last;
	size_t leaf;
};

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state % n;
}

static const uint8_t types[] = { 1, 12, 84, 96, 108 };

static bi_key key(void)
{
	bi_key k = { 256 + rnd(12), types[rnd(5)], rnd(3) };
	return k;
}

/* cand_by_age of salvage_leaves.c, with the index last */
static int by_age(const void *pa, const void *pb)
{
	const struct leaf *a = pa, *b = pb;
	if (a->gen != b->gen)
		return a->gen > b->gen ? -1 : 1;
	if (a->rooted != b->rooted)
		return a->rooted ? -1 : 1;
	if (a->allocated != b->allocated)
		return a->allocated ? -1 : 1;
	if (a->as_of != b->as_of)
		return a->as_of > b->as_of ? -1 : 1;
	int k = bi_key_cmp(&a->first, &b->first);
	return k ? k : (a->id > b->id) - (a->id < b->id);
}

static bool same_age(const struct leaf *a, const struct leaf *b)
{
	return a->gen == b->gen && a->rooted == b->rooted && a->allocated == b->allocated &&
	       a->as_of == b->as_of;
}

/* @n random leaves in age order, their spans (ranks) in @s. */
static void make(struct leaf *l, size_t n, struct bi_sv_span *s)
{
	for (size_t i = 0; i < n; i++) {
		if (i && rnd(4) == 0) { /* a twin of an earlier leaf, alike or not */
			l[i] = l[rnd(i)];
			l[i].items = rnd(2) ? l[i].items : 1000 + (unsigned)i;
			bi_key b = key(); /* alike in the callback yet not in keys: the
					   * rule is the callback's word, however it decides */
			if (rnd(3) == 0 && bi_key_cmp(&b, &l[i].first) >= 0)
				l[i].last = b;
		} else {
			bi_key a = key(), b = key();
			bool swap = bi_key_cmp(&a, &b) > 0;
			l[i] = (struct leaf){ .gen = 1 + rnd(3), .as_of = rnd(4), .rooted = !rnd(5),
					      .allocated = !rnd(3), .first = swap ? b : a,
					      .last = swap ? a : b, .items = (unsigned)i };
		}
		l[i].id = i;
		l[i].next = rnd(3) ? rnd(n) : SIZE_MAX;
	}
	qsort(l, n, sizeof(*l), by_age);
	for (size_t i = 0; i < n; i++)
		s[i] = (struct bi_sv_span){ l[i].first, l[i].last,
			!i ? 0 : s[i - 1].rank + !same_age(&l[i - 1], &l[i]) };
}

static int alike(void *ctx, size_t a, size_t b, bool *same)
{
	const struct leaf *l = ctx;
	*same = l[a].items == l[b].items;
	return 0;
}

static bool overlaps(const bi_key *a0, const bi_key *a1, const bi_key *b0, const bi_key *b1)
{
	return bi_key_cmp(a0, b1) <= 0 && bi_key_cmp(b0, a1) <= 0;
}

static int by_first(const void *pa, const void *pb)
{
	const struct ref_range *a = pa, *b = pb;
	return bi_key_cmp(&a->first, &b->first);
}

/* The rule by brute force: the leaves in age order, each against every
 * range decided (older or lost ranges in any overlap set it aside; a twin
 * whose items differ blocks the union of everything it overlaps). */
static size_t reference(const struct leaf *l, const struct bi_sv_span *s, size_t n,
			struct ref_range *r, struct bi_sv_tally *t)
{
	size_t nr = 0;
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		bool newer = false, tie = false, dup = false, any = false;
		unsigned twins = 0;
		for (size_t j = 0; j < nr; j++) {
			if (!overlaps(&r[j].first, &r[j].last, &l[i].first, &l[i].last))
				continue;
			any = true;
			if (r[j].leaf == BI_SV_BLOCKED || s[r[j].leaf].rank != s[i].rank) {
				newer = true;
				continue;
			}
			twins++;
			tie |= l[r[j].leaf].items != l[i].items;
			dup |= l[r[j].leaf].items == l[i].items;
		}
		assert_true(twins <= 1); /* what the O(n log n) rule relies on */
		if (!any) {
			r[nr++] = (struct ref_range){ l[i].first, l[i].last, i };
		} else if (tie) {
			t->ambiguous++;
			struct ref_range b = { l[i].first, l[i].last, BI_SV_BLOCKED };
			size_t keep = 0;
			for (size_t j = 0; j < nr; j++) {
				if (!overlaps(&r[j].first, &r[j].last, &l[i].first, &l[i].last)) {
					r[keep++] = r[j];
					continue;
				}
				if (bi_key_cmp(&r[j].first, &b.first) < 0)
					b.first = r[j].first;
				if (bi_key_cmp(&r[j].last, &b.last) > 0)
					b.last = r[j].last;
			}
			nr = keep;
			r[nr++] = b;
		} else {
			t->stale += newer;
			t->same += dup && !newer;
		}
	}
	qsort(r, nr, sizeof(*r), by_first);
	return nr;
}

/* What the walk derives from the ranges kept (salvage_leaves.c keep_as_of,
 * keep_cuts): a mark per leaf kept older than @tree_gen, and the objectids
 * cut at every edge no node names, as one checksum. */
static uint64_t derived(const struct leaf *l, const size_t *kept, size_t nk, uint64_t tree_gen)
{
	uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
	for (size_t i = 0; i < nk; i++) {
		if (kept[i] == BI_SV_BLOCKED)
			continue;
		const struct leaf *c = &l[kept[i]];
		uint64_t as_of = c->as_of > c->gen ? c->as_of : c->gen;
		if (as_of < tree_gen) {
			MIX(c->first.objectid);
			MIX(c->last.objectid);
			MIX(as_of);
		}
	}
	const struct leaf *prev = NULL;
	for (size_t i = 0; i <= nk; i++) {
		const struct leaf *c = i < nk && kept[i] != BI_SV_BLOCKED ? &l[kept[i]] : NULL;
		if (i < nk && !c)
			continue;
		if (prev && c && prev->next == c->id) {
			prev = c;
			continue;
		}
		if (prev)
			MIX(prev->last.objectid);
		if (c && c->first.type > 1)
			MIX(c->first.objectid | 1ull << 63);
		prev = c;
	}
#undef MIX
	return h;
}

static void round_of(size_t n, struct bi_sv_tally *sum)
{
	struct leaf l[MAXN];
	struct bi_sv_span s[MAXN];
	struct ref_range r[MAXN];
	size_t want[MAXN], have[MAXN];
	struct bi_sv_tally tr, t;
	struct bi_sv_kept *k = NULL;
	size_t nk = 0;
	make(l, n, s);
	size_t nr = reference(l, s, n, r, &tr);
	assert_int_equal(bi_sv_decide(s, n, alike, l, &k, &nk, &t), 0);
	assert_int_equal(nk, nr);
	for (size_t i = 0; i < nr; i++) {
		assert_int_equal(bi_key_cmp(&k[i].first, &r[i].first), 0);
		assert_int_equal(bi_key_cmp(&k[i].last, &r[i].last), 0);
		assert_int_equal(k[i].leaf, r[i].leaf);
		want[i] = r[i].leaf;
		have[i] = k[i].leaf;
	}
	assert_int_equal(t.stale, tr.stale);
	assert_int_equal(t.same, tr.same);
	assert_int_equal(t.ambiguous, tr.ambiguous);
	assert_true(derived(l, have, nk, 3) == derived(l, want, nr, 3));
	sum->stale += t.stale;
	sum->same += t.same;
	sum->ambiguous += t.ambiguous;
	free(k);
}

static void against_brute_force(void **state)
{
	(void)state;
	struct bi_sv_tally sum = { 0, 0, 0 };
	for (unsigned i = 0; i < 20000; i++)
		round_of(rnd(MAXN + 1), &sum);
	/* every branch of the rule was taken */
	assert_true(sum.stale > 0 && sum.same > 0 && sum.ambiguous > 0);
}

static int never_called(void *ctx, size_t a, size_t b, bool *same)
{
	(void)ctx, (void)a, (void)b, (void)same;
	fail_msg("no twins among disjoint leaves");
	return -1;
}

/* A million leaves of one generation, each over its own keys, and a
 * million older copies over pairs of them: every newer one kept, every
 * older set aside. */
static void a_million(void **state)
{
	(void)state;
	size_t n = 1000000;
	struct bi_sv_span *s = calloc(2 * n, sizeof(*s));
	assert_non_null(s);
	for (size_t i = 0; i < n; i++) {
		s[i] = (struct bi_sv_span){ { 256 + i, 1, 0 }, { 256 + i, 108, 4096 }, 0 };
		s[n + i] = (struct bi_sv_span){ { 256 + (i & ~(size_t)1), 1, 0 },
						{ 256 + (i | 1), 12, 0 }, 1 };
	}
	struct bi_sv_kept *k = NULL;
	size_t nk = 0;
	struct bi_sv_tally t;
	assert_int_equal(bi_sv_decide(s, 2 * n, never_called, NULL, &k, &nk, &t), 0);
	assert_int_equal(nk, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(k[i].leaf, i);
	assert_int_equal(t.stale, n);
	free(k);
	free(s);
}

static void out_of_order(void **state)
{
	(void)state;
	struct bi_sv_span s[2] = { { { 300, 1, 0 }, { 300, 1, 0 }, 0 },
				   { { 200, 1, 0 }, { 200, 1, 0 }, 0 } };
	struct bi_sv_kept *k = (void *)1;
	size_t nk = 1;
	struct bi_sv_tally t;
	assert_int_equal(bi_sv_decide(s, 2, alike, NULL, &k, &nk, &t), -EINVAL);
	assert_null(k);
	assert_int_equal(nk, 0);
	assert_int_equal(bi_sv_decide(s, 0, alike, NULL, &k, &nk, &t), 0);
	assert_int_equal(nk, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(against_brute_force),
		cmocka_unit_test(a_million),
		cmocka_unit_test(out_of_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
