// SPDX-License-Identifier: MIT
/*
 * What the forensic collection keeps as it reads leaves, against brute
 * force over everything it was given (src/forensic/reccollect.c):
 *  - names (bi_fx_refs_merge, merged at generation boundaries as
 *    bi_fx_collect does): for every inode and every generation, the name
 *    a path takes (the first at or before the generation in (generation
 *    descending, order found), else the oldest) has the same parent and
 *    text as over all the names; the newest generation naming each
 *    directory, and each directory entry, is kept;
 *  - versions (bi_fx_add_found_version): exactly one per (subvolume,
 *    inode, creation generation, signature), the one a stable sort in
 *    recover.c's order keeps (complete, newest leaf, newest transid, then
 *    the first found).
 * Random sequences from a fixed seed, with few names and generations so
 * that repeats, ties and changes back and forth are common.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/grow.h"
#include "forensic/version.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}
static uint64_t pick(uint64_t n)
{
	return next_rand() % n;
}

/* ------------------------------------------------------------ names */

struct plain_ref {
	uint64_t subvol, ino, parent, gen, seq;
	char name[8];
	bool dir, bad;
};

/* The truth's order: (subvol, ino), generation descending, order found. */
static int plain_cmp(const void *pa, const void *pb)
{
	const struct plain_ref *a = pa, *b = pb;
	if (a->subvol != b->subvol)
		return a->subvol < b->subvol ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	if (a->gen != b->gen)
		return a->gen > b->gen ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Brute force over all names: the first of (subvol, ino) at or before
 * @gen, else the last (oldest). */
static const struct plain_ref *truth_name(const struct plain_ref *all, size_t n, uint64_t subvol,
					  uint64_t ino, uint64_t gen)
{
	const struct plain_ref *last = NULL;
	for (size_t i = 0; i < n; i++) {
		if (all[i].subvol != subvol || all[i].ino != ino)
			continue;
		if (all[i].gen <= gen)
			return &all[i];
		last = &all[i];
	}
	return last;
}

/* The same query over the kept names (sorted by bi_fx_ref_cmp). */
static const struct fx_ref *kept_name(const struct bi_fx_recovered *r, uint64_t subvol,
				      uint64_t ino, uint64_t gen)
{
	const struct fx_ref *last = NULL;
	for (size_t i = 0; i < r->nrefs; i++) {
		const struct fx_ref *x = &r->refs[i];
		if (x->subvol != subvol || x->ino != ino)
			continue;
		if (x->gen <= gen)
			return x;
		last = x;
	}
	return last;
}

static void add(struct bi_fx_recovered *r, const struct plain_ref *p)
{
	assert_int_equal(bi_grow((void **)&r->refs, &r->crefs, r->nrefs + 1, sizeof(*r->refs)),
			 0);
	r->refs[r->nrefs++] = (struct fx_ref){ .subvol = p->subvol,
					       .ino = p->ino,
					       .parent = p->parent,
					       .gen = p->gen,
					       .name = strdup(p->name),
					       .bad = p->bad ? "damaged" : NULL,
					       .seq = p->seq,
					       .newest = p->gen,
					       .dir_gen = p->gen,
					       .dir = p->dir };
}

/* One round: names found tree by tree, generation by generation (the
 * index's order), merged at random generation boundaries. */
static void names_round(void)
{
	enum { TREES = 3, INOS = 6, MAXGEN = 12 };
	struct plain_ref all[600];
	size_t n = 0;
	struct bi_fx_recovered r = { 0 };
	for (uint64_t t = 0; t < TREES; t++)
		for (uint64_t g = 1; g <= MAXGEN; g++) {
			if (pick(3) == 0 && r.nrefs)
				bi_fx_refs_merge(&r);
			for (int k = (int)pick(12); k > 0 && n < 600; k--) {
				struct plain_ref *p = &all[n];
				*p = (struct plain_ref){ .subvol = 256 + t,
							 .ino = 257 + pick(INOS),
							 .parent = 256 + pick(2),
							 .gen = g,
							 .seq = n,
							 .dir = pick(4) == 0,
							 .bad = pick(10) == 0 };
				snprintf(p->name, sizeof(p->name), "n%u", (unsigned)pick(2));
				add(&r, p);
				n++;
			}
		}
	bi_fx_refs_merge(&r);
	qsort(all, n, sizeof(*all), plain_cmp);
	for (uint64_t t = 0; t < TREES; t++)
		for (uint64_t ino = 250; ino < 257 + INOS; ino++) {
			for (uint64_t g = 0; g <= MAXGEN + 1; g++) {
				const struct plain_ref *a = truth_name(all, n, 256 + t, ino, g);
				const struct fx_ref *b = kept_name(&r, 256 + t, ino, g);
				assert_true((a == NULL) == (b == NULL));
				if (!a)
					continue;
				assert_int_equal(a->parent, b->parent);
				assert_string_equal(a->name, b->name);
				assert_true(a->bad == (b->bad != NULL));
				if (a->bad) /* said with its generation */
					assert_int_equal(a->gen, b->gen);
			}
			/* the newest sighting as a parent and as a directory entry */
			uint64_t parent_new = 0, dir_new = 0, kparent_new = 0, kdir_new = 0;
			for (size_t i = 0; i < n; i++) {
				if (all[i].subvol != 256 + t)
					continue;
				if (all[i].parent == ino && all[i].gen > parent_new)
					parent_new = all[i].gen;
				if (all[i].ino == ino && all[i].dir && all[i].gen > dir_new)
					dir_new = all[i].gen;
			}
			for (size_t i = 0; i < r.nrefs; i++) {
				const struct fx_ref *x = &r.refs[i];
				if (x->subvol != 256 + t)
					continue;
				if (x->parent == ino && x->newest > kparent_new)
					kparent_new = x->newest;
				if (x->ino == ino && x->dir && x->dir_gen > kdir_new)
					kdir_new = x->dir_gen;
			}
			assert_int_equal(parent_new, kparent_new);
			assert_int_equal(dir_new, kdir_new);
		}
	for (size_t i = 0; i < r.nrefs; i++)
		free(r.refs[i].name);
	free(r.refs);
}

static void test_names(void **state)
{
	(void)state;
	for (int i = 0; i < 300; i++)
		names_round();
}

/* ------------------------------------------------------------ versions */

struct plain_ver {
	uint64_t subvol, ino, igen, size, leaf_gen, transid, seq;
	bool complete;
};

/* recover.c's ver_cmp over what a signature of an extent-less version
 * is made of (its size), then the order found: what a stable sort gives. */
static int plain_ver_cmp(const void *pa, const void *pb)
{
	const struct plain_ver *a = pa, *b = pb;
#define CMP(x, y)                                                                                  \
	if ((x) != (y))                                                                            \
	return (x) < (y) ? -1 : 1
	CMP(a->subvol, b->subvol);
	CMP(a->ino, b->ino);
	CMP(b->igen, a->igen);
	CMP(a->size, b->size);
	CMP(b->complete, a->complete);
	CMP(b->leaf_gen, a->leaf_gen);
	CMP(b->transid, a->transid);
	CMP(a->seq, b->seq);
#undef CMP
	return 0;
}

static bool same_key(const struct plain_ver *a, const struct plain_ver *b)
{
	return a->subvol == b->subvol && a->ino == b->ino && a->igen == b->igen &&
	       a->size == b->size;
}

static void versions_round(void)
{
	enum { N = 400 };
	struct plain_ver all[N];
	struct bi_fx_recovered r = { 0 };
	for (size_t i = 0; i < N; i++) {
		struct plain_ver *p = &all[i];
		*p = (struct plain_ver){ .subvol = 256 + pick(2),
					 .ino = 257 + pick(5),
					 .igen = 1 + pick(2),
					 .size = pick(3),
					 .leaf_gen = 1 + pick(4),
					 .transid = 1 + pick(3),
					 .seq = i,
					 .complete = pick(2) };
		struct fx_version v = { .subvol = p->subvol,
					.ino = p->ino,
					.leaf_gen = p->leaf_gen,
					.complete = p->complete,
					.leaf = i };
		v.inode.generation = p->igen;
		v.inode.size = p->size;
		v.inode.transid = p->transid;
		assert_int_equal(bi_fx_add_found_version(&r, &v), 0);
	}
	bi_fx_found_versions_done(&r);
	qsort(all, N, sizeof(*all), plain_ver_cmp);
	size_t want = 0;
	for (size_t i = 0; i < N; i++) {
		if (i && same_key(&all[i - 1], &all[i]))
			continue;
		want++;
		/* the first of its key is the one kept */
		size_t found = 0;
		for (size_t k = 0; k < r.nv; k++)
			if (r.v[k].subvol == all[i].subvol && r.v[k].ino == all[i].ino &&
			    r.v[k].inode.generation == all[i].igen &&
			    r.v[k].inode.size == all[i].size) {
				found++;
				assert_int_equal(r.v[k].leaf, all[i].seq);
			}
		assert_int_equal(found, 1);
	}
	assert_int_equal(r.nv, want);
	for (size_t k = 0; k < r.nv; k++)
		bi_fx_version_free(&r.v[k]);
	free(r.v);
}

static void test_versions(void **state)
{
	(void)state;
	for (int i = 0; i < 300; i++)
		versions_round();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_versions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
