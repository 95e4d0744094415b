/* SPDX-License-Identifier: MIT */
/*
 * The collision engine against independent truth:
 *  - hand-worked cases (each expectation derived in its comment);
 *  - the brute-force reference of collide_brute.h (every presented number
 *    materialised, sorted, counted) on thousands of seeded random inputs
 *    built to collide: large objectids near 2^40..2^63, subvolume ids
 *    sharing low bytes, shared sets, deltas, the objectid == constant
 *    exception, stubs, both parities; counts, examples and members must
 *    be equal, and "proven" must never meet a collision;
 *  - headroom: the bounds are checked by building the inode sets they talk
 *    about (full objectid ranges, the first clashing subvolume id) and
 *    counting them by brute force, and the id search by a linear scan;
 *  - scale runs (timed, not asserted) with counts derived by hand or by
 *    brute force.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/cursor.h"
#include "base/err.h"
#include "inum/collide.h"
#include "inum/nfs.h"
#include "inum/schemes.h"
#include "../support/collide_brute.h"

/* ------------------------------ helpers ------------------------------ */

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int u64cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sort and drop duplicates; returns the new length. */
static size_t sort_unique(uint64_t *v, size_t n)
{
	size_t k = 0;
	qsort(v, n, sizeof(*v), u64cmp);
	for (size_t i = 0; i < n; i++)
		if (!k || v[k - 1] != v[i])
			v[k++] = v[i];
	return k;
}

/* An input and everything it points to. */
#define MAXS 2100
struct cfg {
	struct btrfsimg_collide_input in;
	struct btrfsimg_collide_subvol sv[MAXS];
	struct btrfsimg_collide_extra ex[8];
	struct btrfsimg_idset sets[3 * MAXS + 8];
	uint64_t *arrays[3 * MAXS + 8];
	size_t nsets;
};

static struct cfg *cfg_new(void)
{
	struct cfg *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->in.subvols = c->sv;
	c->in.extras = c->ex;
	return c;
}

static void cfg_free(struct cfg *c)
{
	for (size_t i = 0; i < c->nsets; i++)
		free(c->arrays[i]);
	free(c);
}

/* A set owning a copy of @v (sorted and de-duplicated here). */
static struct btrfsimg_idset *cfg_set(struct cfg *c, const uint64_t *v, size_t n)
{
	assert_true(c->nsets < 3 * MAXS + 8);
	uint64_t *a = malloc((n + 1) * sizeof(*a));
	assert_non_null(a);
	if (n)
		memcpy(a, v, n * sizeof(*a));
	n = sort_unique(a, n);
	c->arrays[c->nsets] = a;
	c->sets[c->nsets] = (struct btrfsimg_idset){ a, n };
	return &c->sets[c->nsets++];
}

static struct btrfsimg_idset *cfg_range(struct cfg *c, uint64_t lo, uint64_t hi)
{
	uint64_t *v = malloc((hi - lo + 1) * sizeof(*v));
	assert_non_null(v);
	for (uint64_t x = lo; x < hi; x++)
		v[x - lo] = x;
	struct btrfsimg_idset *s = cfg_set(c, v, hi - lo);
	free(v);
	return s;
}

static void cfg_subvol(struct cfg *c, uint64_t id, unsigned parity,
		       const struct btrfsimg_idset *base, const struct btrfsimg_idset *add,
		       const struct btrfsimg_idset *del)
{
	c->sv[c->in.nsubvols++] = (struct btrfsimg_collide_subvol){ id, parity, base, add, del };
}

static void cfg_extra(struct cfg *c, uint64_t subvol, uint64_t ino, unsigned parity)
{
	c->ex[c->in.nextras++] = (struct btrfsimg_collide_extra){ subvol, ino, parity };
}

static struct btrfsimg_scheme scheme(unsigned n, bool uq, int devs)
{
	return (struct btrfsimg_scheme){ n, uq, devs };
}

/* Run one scheme; compare with the brute force; return the result. */
static void check_one(const struct cfg *c, struct btrfsimg_scheme s, size_t maxex, size_t maxmem,
		      struct btrfsimg_collide_result *out)
{
	struct btrfsimg_collide_opts o = { maxex, maxmem };
	struct bf_result *want = malloc(sizeof(*want));
	char err[256] = "", name[64];
	assert_non_null(want);
	assert_int_equal(btrfsimg_collide(&c->in, &s, &o, out, err, sizeof(err)), 0);
	assert_int_equal(bf_count(&c->in, &s, maxex, maxmem ? maxmem : 16, want), 0);
	int line = bf_same(out, want);
	if (line) {
		btrfsimg_scheme_name(&s, name, sizeof(name));
		fail_msg(
			"%s: engine differs from brute force (collide_brute.h:%d): groups %llu/%llu "
			"inodes %llu/%llu",
			name, line, (unsigned long long)out->groups,
			(unsigned long long)want->groups, (unsigned long long)out->inodes,
			(unsigned long long)want->inodes);
	}
	free(want);
}

/* Every scheme through btrfsimg_collide_all, each against the brute force. */
static struct btrfsimg_collide_report *check_all(const struct cfg *c, size_t maxex, size_t maxmem)
{
	struct btrfsimg_collide_opts o = { maxex, maxmem };
	struct btrfsimg_collide_report *r = NULL;
	struct bf_result *want = malloc(sizeof(*want));
	char err[256] = "", name[64];
	assert_non_null(want);
	assert_int_equal(btrfsimg_collide_all(&c->in, &o, &r, err, sizeof(err)), 0);
	assert_int_equal(r->nresults, BTRFSIMG_COLLIDE_SCHEMES);
	unsigned free1 = 0, free2 = 0;
	for (size_t i = 0; i < r->nresults; i++) {
		struct btrfsimg_scheme s = bf_scheme(i);
		assert_int_equal(bf_count(&c->in, &s, maxex, maxmem ? maxmem : 16, want), 0);
		assert_int_equal(r->results[i].scheme.inumbits, s.inumbits);
		assert_int_equal(r->results[i].scheme.numdevs, s.numdevs);
		int line = bf_same(&r->results[i], want);
		btrfsimg_scheme_name(&s, name, sizeof(name));
		if (line) {
			for (size_t k = 0; k < c->in.nsubvols; k++) {
				const struct btrfsimg_collide_subvol *v = &c->sv[k];
				print_message("subvol %llu p%u:", (unsigned long long)v->id,
					      v->parity);
				const struct btrfsimg_idset *ss[3] = { v->base, v->add, v->del };
				for (int q = 0; q < 3; q++) {
					print_message(" |");
					for (size_t j = 0; ss[q] && j < ss[q]->n; j++)
						print_message(" %#llx",
							      (unsigned long long)ss[q]->v[j]);
				}
				print_message("\n");
			}
			for (size_t k = 0; k < c->in.nextras; k++)
				print_message("extra %llu ino %#llx p%u\n",
					      (unsigned long long)c->ex[k].subvol,
					      (unsigned long long)c->ex[k].ino, c->ex[k].parity);
			print_message("%s\n", r->results[i].reason);
			fail_msg("%s: engine differs from brute force (collide_brute.h:%d)", name,
				 line);
		}
		if (s.inumbits && !want->groups && s.numdevs == 1 && !free1)
			free1 = s.inumbits;
		if (s.inumbits && !want->groups && s.numdevs == 2 && !free2)
			free2 = s.inumbits;
	}
	assert_int_equal(r->min_free_n1, free1);
	assert_int_equal(r->min_free_n2, free2);
	free(want);
	return r;
}

/* ---------------------------- hand-worked ---------------------------- */

static void test_nfsd_roots(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	uint64_t v[] = { 256, 257 };
	struct btrfsimg_idset *s = cfg_set(c, v, 2);
	cfg_subvol(c, 5, 0, s, NULL, NULL);
	cfg_subvol(c, 256, 1, s, NULL, NULL);
	struct btrfsimg_collide_result r;
	/* nfsd: both subvolumes present 256 and 257 as themselves: 2 groups of 2 */
	check_one(c, scheme(0, false, 1), 4, 0, &r);
	assert_int_equal(r.groups, 2);
	assert_int_equal(r.inodes, 4);
	assert_int_equal(r.nexamples, 2);
	assert_true(r.examples[0].ino == 256 && r.examples[0].nmembers == 2);
	assert_true(r.examples[0].members[0].subvol == 5 && r.examples[0].members[1].subvol == 256);
	assert_false(r.proven); /* constants 0 and 0 are equal */
	btrfsimg_collide_result_clear(&r);
	/* uniquifier: 256 presents 256 ^ 2^48: apart from 5 */
	check_one(c, scheme(0, true, 1), 4, 0, &r);
	assert_int_equal(r.groups, 0);
	assert_true(r.proven);
	assert_int_equal(r.objbits, 48);
	btrfsimg_collide_result_clear(&r);
	/* numdevs=many: one device each */
	check_one(c, scheme(0, false, 3), 4, 0, &r);
	assert_int_equal(r.groups, 0);
	assert_true(r.proven);
	assert_true(r.max_subvol == 0xffffffffffffff00ull);
	btrfsimg_collide_result_clear(&r);
	/* numdevs=2 with no overlay: different parities, so no collision */
	check_one(c, scheme(0, false, 2), 4, 0, &r);
	assert_int_equal(r.groups, 0);
	btrfsimg_collide_result_clear(&r);
	cfg_free(c);
}

static void test_stubs(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	uint64_t v[] = { 256 };
	cfg_subvol(c, 5, 0, cfg_set(c, v, 1), NULL, NULL);
	cfg_extra(c, 5, 2, 0);
	cfg_extra(c, 5, 2, 0);
	cfg_extra(c, 5, 2, 1);
	struct btrfsimg_collide_result r;
	/* numdevs=many: every stub is on the superblock's device: 1 group of 3 */
	check_one(c, scheme(0, false, 3), 4, 0, &r);
	assert_int_equal(r.groups, 1);
	assert_int_equal(r.inodes, 3);
	assert_true(r.examples[0].device == 0 && r.examples[0].members[0].extra);
	assert_false(r.proven);
	btrfsimg_collide_result_clear(&r);
	/* numdevs=2: two stubs on device 0, one on device 1: 1 group of 2 */
	check_one(c, scheme(56, false, 2), 4, 0, &r);
	assert_int_equal(r.groups, 1);
	assert_int_equal(r.inodes, 2);
	btrfsimg_collide_result_clear(&r);
	/* one device: 1 group of 3; subvolume 5 presents 256, not 2 */
	check_one(c, scheme(0, false, 1), 4, 0, &r);
	assert_int_equal(r.groups, 1);
	assert_int_equal(r.inodes, 3);
	btrfsimg_collide_result_clear(&r);
	cfg_free(c);
}

static void test_exception(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	/* subvol 257, N=32: constant 0x01010000. Objectid 0 presents 0 ^ c = c
	 * and objectid c presents c (the exception): one group of 2 inside one
	 * subvolume. Under N=33 the constant is 0x02020000: 0 -> 0x02020000,
	 * 0x01010000 -> 0x03030000, no group. */
	uint64_t v[] = { 0, 0x01010000 };
	cfg_subvol(c, 257, 0, cfg_set(c, v, 2), NULL, NULL);
	struct btrfsimg_collide_result r;
	check_one(c, scheme(32, false, 1), 4, 0, &r);
	assert_int_equal(r.groups, 1);
	assert_int_equal(r.inodes, 2);
	assert_true(r.examples[0].ino == 0x01010000);
	assert_true(r.examples[0].members[0].objectid == 0);
	assert_true(r.examples[0].members[1].objectid == 0x01010000);
	btrfsimg_collide_result_clear(&r);
	check_one(c, scheme(33, false, 1), 4, 0, &r);
	assert_int_equal(r.groups, 0);
	btrfsimg_collide_result_clear(&r);
	/* numdevs=many keeps the inside-one-subvolume group under N=32 */
	check_one(c, scheme(32, false, 3), 4, 0, &r);
	assert_int_equal(r.groups, 1);
	btrfsimg_collide_result_clear(&r);
	cfg_free(c);

	/* subvol 5 holds 0x01010000 (presents itself); 257 holds 0x01010000 and
	 * 256: its exception presents 0x01010000 too, 256 presents 0x01010100. */
	c = cfg_new();
	uint64_t w[] = { 256, 0x01010000 };
	cfg_subvol(c, 5, 0, cfg_set(c, w + 1, 1), NULL, NULL);
	cfg_subvol(c, 257, 0, cfg_set(c, w, 2), NULL, NULL);
	check_one(c, scheme(32, false, 1), 4, 0, &r);
	assert_int_equal(r.groups, 1);
	assert_int_equal(r.inodes, 2);
	assert_true(r.examples[0].ino == 0x01010000);
	btrfsimg_collide_result_clear(&r);
	cfg_free(c);
}

static void test_deltas(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	/* 4 snapshots share base {256..265}; one deletes 260 and adds 300, one
	 * adds 300. nfsd: values 256..265 except 260 have 4 inodes, 260 has 3,
	 * 300 has 2: 11 groups, 9*4 + 3 + 2 = 41 inodes. */
	struct btrfsimg_idset *base = cfg_range(c, 256, 266);
	uint64_t d[] = { 260 }, a[] = { 300 };
	struct btrfsimg_idset *del = cfg_set(c, d, 1), *add = cfg_set(c, a, 1);
	cfg_subvol(c, 256, 0, base, NULL, NULL);
	cfg_subvol(c, 257, 0, base, NULL, NULL);
	cfg_subvol(c, 258, 0, base, add, del);
	cfg_subvol(c, 259, 0, base, add, NULL);
	struct btrfsimg_collide_result r;
	check_one(c, scheme(0, false, 1), 20, 0, &r);
	assert_int_equal(r.groups, 11);
	assert_int_equal(r.inodes, 41);
	btrfsimg_collide_result_clear(&r);
	cfg_free(c);

	/* One array as one subvolume's deletion and another's addition (the
	 * weights cancel when merged): A = {256..265} - {260}, C = ({256..265}
	 * - {260}) + {260}. nfsd: 260 has 1 inode, the 9 others 2: 9 groups,
	 * 18 inodes. */
	c = cfg_new();
	base = cfg_range(c, 256, 266);
	del = cfg_set(c, d, 1);
	uint64_t y[] = { 256, 257, 258, 259, 261, 262, 263, 264, 265 };
	cfg_subvol(c, 256, 0, base, NULL, del);
	cfg_subvol(c, 257, 0, cfg_set(c, y, 9), del, NULL);
	check_one(c, scheme(0, false, 1), 20, 0, &r);
	assert_int_equal(r.groups, 9);
	assert_int_equal(r.inodes, 18);
	btrfsimg_collide_result_clear(&r);
	cfg_free(c);
}

/* 5 and 256..356 with objectids up to 1000255 < 2^20 (bit length 20). */
static struct cfg *hundred(void)
{
	struct cfg *c = cfg_new();
	uint64_t v[] = { 256, 1000255 };
	struct btrfsimg_idset *s = cfg_set(c, v, 2);
	cfg_subvol(c, 5, 0, s, NULL, NULL);
	for (uint64_t id = 256; id <= 356; id++)
		cfg_subvol(c, id, 1, s, NULL, NULL);
	return c;
}

static void test_headroom_hand(void **state)
{
	(void)state;
	struct cfg *c = hundred();
	struct btrfsimg_collide_result r;
	/* N=56: c_s = swab64(s) >> 8. s = 0x1XX -> XX << 48 | 1 << 40; c_5 = 0.
	 * Closest pair: 5 and 256 (0 and 2^40): bit 40. Objectids < 2^40 safe,
	 * largest is < 2^20: proven. New ids: c_x >> 20 = swab64(x) >> 28
	 * keeps id bits 0..31 and 36..39; the first id > 356 with those all 0
	 * (as subvolume 5's) is 2^32; repeats of 256..356 come at t + 2^32. */
	check_one(c, scheme(56, false, 1), 0, 0, &r);
	assert_int_equal(r.groups, 0);
	assert_int_equal(r.objbits, 40);
	assert_true(r.proven);
	assert_true(r.max_objectid == (1ull << 40) - 1);
	assert_true(r.max_subvol == (1ull << 32) - 1);
	assert_true(r.clash_subvol == 1ull << 32);
	assert_true(r.clash_with == 5);
	btrfsimg_collide_result_clear(&r);
	/* numdevs=2: 5 alone on device 0; on device 1 constants differ in
	 * bits 48..55: objbits 48. Ids: any device, so still 2^32 - 1. */
	check_one(c, scheme(56, false, 2), 0, 0, &r);
	assert_int_equal(r.objbits, 48);
	assert_true(r.max_subvol == (1ull << 32) - 1);
	btrfsimg_collide_result_clear(&r);
	/* uniquifier: swab64(s) = XX << 56 | 1 << 48: 5 vs 256 at bit 48.
	 * c_x >> 20 = swab64(x) >> 20 keeps id bits 0..39 and 44..47: first
	 * all-zero id above 356 is 2^40. */
	check_one(c, scheme(0, true, 1), 0, 0, &r);
	assert_int_equal(r.objbits, 48);
	assert_true(r.max_subvol == (1ull << 40) - 1);
	assert_true(r.clash_with == 5);
	btrfsimg_collide_result_clear(&r);
	/* N=32: c_256 = 0x10000 meets c_5 = 0 at bit 16 < 20: not proven. */
	check_one(c, scheme(32, false, 1), 0, 0, &r);
	assert_int_equal(r.objbits, 16);
	assert_false(r.proven);
	assert_true(r.max_subvol == 0);
	btrfsimg_collide_result_clear(&r);
	/* Summary: numdevs=1 needs c_256 = 2^(N-16) >= 2^20: N = 36. Under
	 * numdevs=2 device 1's constants differ from bit N-8 up, 5 is alone:
	 * N = 32 already gives bit 24. */
	struct btrfsimg_collide_report *rep = check_all(c, 2, 4);
	assert_int_equal(rep->min_proven_n1, 36);
	assert_int_equal(rep->min_proven_n2, 32);
	btrfsimg_collide_report_free(rep);
	cfg_free(c);
}

/* ------------------------- random vs brute force ------------------------- */

/* An objectid from a palette built to collide under @target. */
static uint64_t pick_obj(uint64_t *rs, const struct cfg *c, struct btrfsimg_scheme target)
{
	uint64_t r = rnd(rs), small = 256 + rnd(rs) % 48;
	const struct btrfsimg_collide_subvol *v =
		c->in.nsubvols ? &c->sv[rnd(rs) % c->in.nsubvols] : NULL;
	uint64_t k = v ? bi_scheme_const(&target, v->id) : 0;
	switch (r % 12) {
	case 0:
	case 1:
	case 2:
		return small;
	case 3:
		return (1ull << (40 + 8 * (rnd(rs) % 3))) + rnd(rs) % 64 - 32;
	case 4:
		return (1ull << 63) + rnd(rs) % 64;
	case 5:
	case 6:
		return k ^ small;
	case 7:
		return k; /* the exception */
	case 8:
		return rnd(rs) % 8 == 0 ? 0 : 2 ^ k;
	case 9:
		return rnd(rs);
	default:
		return rnd(rs) % 100000;
	}
}

static uint64_t pick_id(uint64_t *rs)
{
	switch (rnd(rs) % 7) {
	case 0:
		return 5;
	case 1:
		return 256 + rnd(rs) % 16;
	case 2:
		return 256 + (rnd(rs) % 8) * 65536; /* share the low bytes */
	case 3:
		return 256 + (rnd(rs) % 4) * (1ull << 24) + (rnd(rs) % 2) * 65536;
	case 4:
		return (1ull << 32) + 256 + rnd(rs) % 4;
	case 5:
		return 256 + rnd(rs) % 0xffffffffffffff00ull;
	default:
		return 256 + (rnd(rs) % 4) * 256;
	}
}

static struct btrfsimg_idset *random_set(uint64_t *rs, struct cfg *c, struct btrfsimg_scheme target,
					 size_t max)
{
	uint64_t v[64];
	size_t n = rnd(rs) % (max + 1);
	for (size_t i = 0; i < n; i++)
		v[i] = pick_obj(rs, c, target);
	return cfg_set(c, v, n);
}

/* A delta for @base: add values not in it, or delete some of it. */
static struct btrfsimg_idset *random_delta(uint64_t *rs, struct cfg *c,
					   const struct btrfsimg_idset *base,
					   struct btrfsimg_scheme target, bool del)
{
	uint64_t v[64];
	size_t n = 0, want = 1 + rnd(rs) % 6;
	for (size_t i = 0; i < want; i++) {
		if (del && base->n)
			v[n++] = base->v[rnd(rs) % base->n];
		uint64_t x = pick_obj(rs, c, target);
		if (!del && !bi_idset_has(base, x))
			v[n++] = x;
	}
	return n ? cfg_set(c, v, n) : NULL;
}

static struct cfg *random_cfg(uint64_t *rs, size_t maxsub, size_t maxset)
{
	struct cfg *c = cfg_new();
	struct btrfsimg_scheme target = bf_scheme(rnd(rs) % BTRFSIMG_COLLIDE_SCHEMES);
	size_t nsub = 1 + rnd(rs) % maxsub, nsets = 1 + rnd(rs) % 4;
	for (size_t i = 0; i < nsub; i++) {
		uint64_t id = pick_id(rs);
		bool dup = false;
		for (size_t j = 0; j < c->in.nsubvols; j++)
			dup |= c->sv[j].id == id;
		if (!dup)
			cfg_subvol(c, id, rnd(rs) % 2, NULL, NULL, NULL);
	}
	/* sets are drawn after the ids so they can aim at the constants */
	struct btrfsimg_idset *sets[4];
	for (size_t i = 0; i < nsets; i++)
		sets[i] = random_set(rs, c, target, maxset);
	for (size_t i = 0; i < c->in.nsubvols; i++) {
		struct btrfsimg_collide_subvol *v = &c->sv[i];
		v->base = rnd(rs) % 8 ? sets[rnd(rs) % nsets] : NULL;
		if (v->base && rnd(rs) % 3 == 0)
			v->add = random_delta(rs, c, v->base, target, false);
		if (v->base && rnd(rs) % 3 == 0)
			v->del = random_delta(rs, c, v->base, target, true);
	}
	for (size_t i = 0, ne = rnd(rs) % 4; i < ne; i++) {
		uint64_t ino = rnd(rs) % 4 ? 2 : pick_obj(rs, c, target);
		cfg_extra(c, c->sv[rnd(rs) % c->in.nsubvols].id, ino, rnd(rs) % 4 == 0);
	}
	return c;
}

static void test_random_small(void **state)
{
	(void)state;
	uint64_t rs = 12345;
	for (int trial = 0; trial < 3000; trial++) {
		struct cfg *c = random_cfg(&rs, 10, 24);
		btrfsimg_collide_report_free(check_all(c, 3 + trial % 5, trial % 3 ? 3 : 0));
		cfg_free(c);
	}
}

/* Groups as a list, to compare two streams of them. */
struct glist {
	struct btrfsimg_collide_group *g;
	size_t n, cap;
	size_t stop_after; /* return 7 after this many (0: never) */
};

static int keep_group(void *ctx, const struct btrfsimg_collide_group *g)
{
	struct glist *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->g = realloc(l->g, l->cap * sizeof(*l->g));
		assert_non_null(l->g);
	}
	struct btrfsimg_collide_group *c = &l->g[l->n++];
	*c = *g;
	c->members = malloc((g->nmembers + 1) * sizeof(*c->members));
	assert_non_null(c->members);
	memcpy(c->members, g->members, g->nmembers * sizeof(*c->members));
	return l->stop_after && l->n == l->stop_after ? 7 : 0;
}

static void glist_free(struct glist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->g[i].members);
	free(l->g);
	*l = (struct glist){ 0 };
}

/* The line of the first difference, 0 if none. */
static int glist_diff(const struct glist *a, const struct glist *b)
{
	if (a->n != b->n)
		return __LINE__;
	for (size_t i = 0; i < a->n; i++) {
		const struct btrfsimg_collide_group *x = &a->g[i], *y = &b->g[i];
		if (x->device != y->device || x->ino != y->ino || x->size != y->size ||
		    x->nmembers != y->nmembers || x->nmembers != x->size)
			return __LINE__;
		for (size_t m = 0; m < x->nmembers; m++)
			if (x->members[m].subvol != y->members[m].subvol ||
			    x->members[m].objectid != y->members[m].objectid ||
			    x->members[m].extra != y->members[m].extra ||
			    x->members[m].extra_index != y->members[m].extra_index)
				return __LINE__;
	}
	return 0;
}

/* btrfsimg_collide_groups streams every group with every member: the
 * brute force's list exactly, and its counts; also with the extras left
 * out (the stub directories' "without stubs" verdict); a non-zero return
 * stops it. */
static void test_random_groups(void **state)
{
	(void)state;
	uint64_t rs = 4242;
	char err[256], name[64];
	for (int trial = 0; trial < 800; trial++) {
		struct cfg *c = random_cfg(&rs, 10, 24);
		for (int pass = 0; pass < 2; pass++) {
			struct btrfsimg_collide_input in = c->in;
			if (pass)
				in.nextras = 0;
			for (size_t i = 0; i < BTRFSIMG_COLLIDE_SCHEMES; i++) {
				struct btrfsimg_scheme s = bf_scheme(i);
				struct glist got = { 0 }, want = { 0 };
				assert_int_equal(btrfsimg_collide_groups(&in, &s, keep_group, &got,
									 err, sizeof(err)),
						 0);
				assert_int_equal(bf_groups(&in, &s, keep_group, &want), 0);
				struct btrfsimg_collide_result r;
				assert_int_equal(
					btrfsimg_collide(&in, &s, NULL, &r, err, sizeof(err)), 0);
				uint64_t inodes = 0;
				for (size_t g = 0; g < got.n; g++)
					inodes += got.g[g].size;
				int line = glist_diff(&got, &want);
				btrfsimg_scheme_name(&s, name, sizeof(name));
				if (line || r.groups != got.n || r.inodes != inodes)
					fail_msg(
						"trial %d %s%s: streamed groups differ (line %d): %zu/%zu "
						"groups, count %llu",
						trial, name, pass ? " without extras" : "", line,
						got.n, want.n, (unsigned long long)r.groups);
				btrfsimg_collide_result_clear(&r);
				if (got.n > 2) {
					struct glist some = { .stop_after = 2 };
					assert_int_equal(btrfsimg_collide_groups(&in, &s,
										 keep_group, &some,
										 err, sizeof(err)),
							 7);
					assert_int_equal(some.n, 2);
					glist_free(&some);
				}
				glist_free(&got);
				glist_free(&want);
			}
		}
		cfg_free(c);
	}
}

/* Dense sets and small constants (N = 32 and ids 256 + j * 65536 give
 * c = 0x10000 + 256 j): images overlap over many trie levels. */
static void test_random_dense(void **state)
{
	(void)state;
	uint64_t rs = 777;
	for (int trial = 0; trial < 60; trial++) {
		struct cfg *c = cfg_new();
		size_t nsets = 1 + rnd(&rs) % 3;
		struct btrfsimg_idset *sets[3];
		for (size_t i = 0; i < nsets; i++) {
			uint64_t lo = 256 + rnd(&rs) % 70000, n = 1 + rnd(&rs) % 3000;
			sets[i] = cfg_range(c, lo, lo + n);
		}
		for (uint64_t j = 0, ns = 2 + rnd(&rs) % 12; j < ns; j++) {
			uint64_t id = j == 0 ? 5 : 256 + (j - 1) * 65536 + (rnd(&rs) % 2) * 257;
			const struct btrfsimg_idset *b = sets[rnd(&rs) % nsets];
			const struct btrfsimg_idset *d = NULL;
			if (rnd(&rs) % 3 == 0) {
				uint64_t x[3] = { b->v[0], b->v[b->n / 2], b->v[b->n - 1] };
				d = cfg_set(c, x, 3);
			}
			cfg_subvol(c, id, rnd(&rs) % 2, b, NULL, d);
		}
		cfg_extra(c, 5, 2, 0);
		struct btrfsimg_collide_result r;
		for (unsigned n = 32; n <= 40; n += 2) {
			check_one(c, scheme(n, false, 1 + (int)(rnd(&rs) % 2)), 6, 5, &r);
			btrfsimg_collide_result_clear(&r);
		}
		check_one(c, scheme(0, false, 1), 6, 5, &r);
		btrfsimg_collide_result_clear(&r);
		cfg_free(c);
	}
}

/*
 * Snapshots of one dense tree under constants that land inside its
 * objectid range (inumbits=32..35, subvolume ids that differ in their
 * second byte): nearly every value is held several times over, which the
 * engine counts through the gaps of the dense slices (complement_dense,
 * full_tally). Holes in the base, deletions and additions per subvolume,
 * a second base, with and without examples, against the brute force.
 */
static bool set_has(const struct btrfsimg_idset *s, uint64_t x)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && s->v[lo] == x;
}

static void test_random_snapshot_gaps(void **state)
{
	(void)state;
	uint64_t rs = 4242;
	for (int trial = 0; trial < 6; trial++) {
		struct cfg *c = cfg_new();
		uint64_t top = 256 + (1u << 16) + rnd(&rs) % (1u << 16);
		uint64_t *v = malloc(top * sizeof(*v)), *w = malloc(top * sizeof(*v));
		size_t n = 0, nw = 0;
		assert_non_null(v);
		assert_non_null(w);
		for (uint64_t x = 256; x < top; x++) {
			if (rnd(&rs) % 100 >= (uint64_t)(trial % 3))
				v[n++] = x;
			if (rnd(&rs) % 50)
				w[nw++] = x;
		}
		const struct btrfsimg_idset *base = cfg_set(c, v, n), *other = cfg_set(c, w, nw);
		static const uint64_t ids[] = { 5, 256, 512, 768, 1024, 1280, 257, 513, 769, 260 };
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
			const struct btrfsimg_idset *b = i == 7 ? other : base;
			uint64_t d[64], a[64];
			size_t nd = 0, na = 0;
			for (int k = 0; k < 64 && i % 3; k++) {
				uint64_t x = b->v[rnd(&rs) % b->n];
				d[nd++] = x;
				uint64_t y = top + rnd(&rs) % 4096;
				if (!set_has(b, y))
					a[na++] = y;
				y = 256 + rnd(&rs) % (top - 256);
				if (!set_has(b, y))
					a[na++] = y;
				if (na > 60)
					break;
			}
			cfg_subvol(c, ids[i], (unsigned)(i % 2), b, na ? cfg_set(c, a, na) : NULL,
				   nd ? cfg_set(c, d, nd) : NULL);
		}
		free(v);
		free(w);
		struct btrfsimg_collide_result r;
		for (unsigned bits = 32; bits <= 36; bits++)
			for (int devs = 1; devs <= 2; devs++) {
				check_one(c, scheme(bits, false, devs), trial % 2 ? 3 : 0, 4, &r);
				btrfsimg_collide_result_clear(&r);
			}
		check_one(c, scheme(0, false, 1), 0, 4, &r);
		btrfsimg_collide_result_clear(&r);
		cfg_free(c);
	}
}

/* Dense aligned blocks shared by several subvolumes (folded into a node's
 * base: whole trie levels counted at once), with deletions inside them
 * (negative weights under a base >= 2) and additions next to them. */
static struct btrfsimg_idset *block_set(uint64_t *rs, struct cfg *c)
{
	uint64_t *v = malloc(8192 * sizeof(*v));
	size_t n = 0;
	assert_non_null(v);
	for (int r = 0, nr = 1 + (int)(rnd(rs) % 4); r < nr; r++) {
		uint64_t len = rnd(rs) % 2 ? 1ull << (rnd(rs) % 11) : 1 + rnd(rs) % 1500;
		uint64_t at = 256 + (rnd(rs) % 64) * (rnd(rs) % 2 ? 1024 : 64);
		if (rnd(rs) % 5 == 0)
			at += 0x10000;
		for (uint64_t x = at; x < at + len && n < 8192; x++)
			v[n++] = x;
	}
	struct btrfsimg_idset *s = cfg_set(c, v, n);
	free(v);
	return s;
}

static void test_random_blocks(void **state)
{
	(void)state;
	uint64_t rs = 8086;
	for (int trial = 0; trial < 40; trial++) {
		struct cfg *c = cfg_new();
		struct btrfsimg_idset *sets[3];
		size_t nsets = 1 + rnd(&rs) % 3;
		for (size_t i = 0; i < nsets; i++)
			sets[i] = block_set(&rs, c);
		for (uint64_t j = 0, ns = 2 + rnd(&rs) % 8; j < ns; j++) {
			/* small constants under N = 32..35: 0x10000 + 256 k, (1 + k) << 16 */
			uint64_t id = j == 0 ? 5 : rnd(&rs) % 2 ? 256 + j * 65536 : 256 * (1 + j);
			const struct btrfsimg_idset *b = sets[rnd(&rs) % nsets], *add = NULL,
						    *del = NULL;
			if (rnd(&rs) % 3 == 0) {
				uint64_t x[40];
				size_t k = 0, from = rnd(&rs) % b->n, len = 1 + rnd(&rs) % 40;
				for (size_t q = from; q < b->n && k < len; q++)
					x[k++] = b->v[q];
				del = cfg_set(c, x, k);
			}
			if (rnd(&rs) % 3 == 0) {
				uint64_t x[8];
				size_t k = 0;
				for (int q = 0; q < 8; q++) {
					uint64_t y = 256 + rnd(&rs) % 0x20000;
					if (!bi_idset_has(b, y))
						x[k++] = y;
				}
				add = cfg_set(c, x, k);
			}
			cfg_subvol(c, id, rnd(&rs) % 2, b, add, del);
		}
		if (rnd(&rs) % 2)
			cfg_extra(c, 5, 2, 0);
		btrfsimg_collide_report_free(check_all(c, 1 + trial % 7, 4));
		cfg_free(c);
	}
}

/* ------------------------------ headroom ------------------------------ */

static void test_next_masked(void **state)
{
	(void)state;
	uint64_t rs = 99;
	for (int t = 0; t < 20000; t++) {
		uint64_t lo = rnd(&rs) % 5000, mask = rnd(&rs) & 0xfff, want = rnd(&rs) & mask, got;
		uint64_t x = lo + 1;
		while ((x & mask) != want)
			x++;
		assert_true(bi_next_masked(lo, mask, want, &got));
		assert_true(got == x);
	}
	uint64_t got;
	/* high bits: the next x > 2^63 with bit 63 clear does not exist */
	assert_false(bi_next_masked(1ull << 63, 1ull << 63, 0, &got));
	assert_false(bi_next_masked(UINT64_MAX, 0, 0, &got));
	assert_true(bi_next_masked(0, 0, 0, &got) && got == 1);
}

/* The first clashing new id by scanning ids one by one. */
static uint64_t scan_clash(unsigned nbits, unsigned k0, uint64_t lo,
			   const struct bi_subvol_const *t, size_t n,
			   const struct bi_subvol_const *fx, size_t nfx, uint64_t limit)
{
	unsigned shift = 64 - nbits + k0;
	size_t words = shift >= 64 ? 1 : ((size_t)1 << (64 - shift)) / 64 + 1;
	uint64_t *seen = calloc(words, sizeof(*seen));
	uint64_t hit = 0;
	assert_non_null(seen);
#define G(c)	((k0 >= 64 ? 0 : (c) >> k0))
#define MARK(g) (seen[(g) / 64] |= 1ull << ((g) % 64))
#define SEEN(g) ((seen[(g) / 64] >> ((g) % 64)) & 1)
	for (size_t i = 0; i < n; i++)
		MARK(G(t[i].c));
	for (size_t i = 0; i < nfx; i++)
		if (G(fx[i].c) < (uint64_t)words * 64)
			MARK(G(fx[i].c));
	for (uint64_t x = lo + 1; x <= lo + limit && !hit; x++) {
		uint64_t c = nbits ? bf_swab(x) >> (64 - nbits) : 0, g = G(c);
		if (SEEN(g))
			hit = x;
		MARK(g);
	}
#undef G
#undef MARK
#undef SEEN
	free(seen);
	return hit;
}

static void test_first_clash_scan(void **state)
{
	(void)state;
	uint64_t rs = 4242;
	for (int trial = 0; trial < 200; trial++) {
		unsigned nbits = 32 + rnd(&rs) % 33;
		/* keep at most ~22 id bits so the scan's bitmap stays small */
		unsigned k0 = nbits - 22 + rnd(&rs) % 23;
		struct bi_subvol_const t[6], fx[2];
		size_t n = 1 + rnd(&rs) % 6, nfx = rnd(&rs) % 3;
		uint64_t lo = 255;
		for (size_t i = 0; i < n; i++) {
			uint64_t id = i == 0 ? 5 : 256 + rnd(&rs) % 5000;
			t[i] = (struct bi_subvol_const){ 0, btrfsimg_inumbits_overlay(id, nbits),
							 id };
			lo = id > lo ? id : lo;
		}
		for (size_t i = 0; i < nfx; i++)
			fx[i] = (struct bi_subvol_const){ 0, rnd(&rs) % 2 ? 2 : rnd(&rs), 0 };
		struct bi_clash c = bi_first_clash(nbits, k0, lo, t, n, fx, nfx);
		uint64_t want = scan_clash(nbits, k0, lo, t, n, fx, nfx, 1u << 23);
		if (want)
			assert_true(c.kind && c.at == want);
		else
			assert_true(!c.kind || c.at > lo + (1u << 23));
	}
}

/* objbits is tight: with every objectid of [256, 2^k) nothing collides, with
 * [256, 2^(k+1)) something does (brute force). */
static void test_objbits_tight(void **state)
{
	(void)state;
	/* N=32: id 256 + j*65536 has c = 0x10000 + 256 j; 5 has 0. */
	static const uint64_t pairs[][2] = { { 256, 256 + 16 * 65536 },
					     { 5, 256 + 4 * 65536 },
					     { 256, 256 + 8 * 65536 },
					     { 5, 256 } };
	for (size_t p = 0; p < 4; p++) {
		struct btrfsimg_collide_result r;
		struct cfg *c = cfg_new();
		cfg_subvol(c, pairs[p][0], 0, NULL, NULL, NULL);
		cfg_subvol(c, pairs[p][1], 0, NULL, NULL, NULL);
		check_one(c, scheme(32, false, 1), 0, 0, &r);
		unsigned k = r.objbits;
		btrfsimg_collide_result_clear(&r);
		assert_true(k >= 10 && k <= 16);
		c->sv[0].base = c->sv[1].base = cfg_range(c, 256, 1ull << k);
		check_one(c, scheme(32, false, 1), 0, 0, &r);
		assert_int_equal(r.groups, 0);
		assert_true(r.proven);
		btrfsimg_collide_result_clear(&r);
		c->sv[0].base = c->sv[1].base = cfg_range(c, 256, 1ull << (k + 1));
		check_one(c, scheme(32, false, 1), 0, 0, &r);
		assert_true(r.groups > 0);
		assert_false(r.proven);
		btrfsimg_collide_result_clear(&r);
		cfg_free(c);
	}
}

/* The subvolume-id bound, by building the subvolumes it speaks of: new
 * ids up to max_subvol with every objectid below 2^k0 do not collide; the
 * first id past it (with its partner) does. */
static void test_subvol_bound_built(void **state)
{
	(void)state;
	uint64_t rs = 31337;
	const unsigned k0 = 12; /* objectids [256, 4096) */
	for (int trial = 0; trial < 120; trial++) {
		struct cfg *c = cfg_new();
		struct btrfsimg_idset *full = cfg_range(c, 256, 1u << k0);
		struct btrfsimg_scheme s = scheme(32 + rnd(&rs) % 33, trial % 5 == 0, 1);
		if (s.uniquifier)
			s.inumbits = 0;
		uint64_t maxid = 0;
		for (int i = 0, n = 1 + (int)(rnd(&rs) % 4); i < n; i++) {
			uint64_t id = i == 0 ? 5 : 256 + rnd(&rs) % 100000;
			if (id > maxid)
				maxid = id;
			bool dup = false;
			for (size_t j = 0; j < c->in.nsubvols; j++)
				dup |= c->sv[j].id == id;
			if (!dup)
				cfg_subvol(c, id, 0, full, NULL, NULL);
		}
		struct btrfsimg_collide_result r;
		check_one(c, s, 0, 0, &r);
		struct btrfsimg_collide_result keep = r;
		if (!r.proven) {
			btrfsimg_collide_result_clear(&r);
			cfg_free(c);
			continue;
		}
		size_t base = c->in.nsubvols;
		/* up to three new ids in (maxid, max_subvol]: still no collision */
		uint64_t room = keep.max_subvol - maxid;
		for (int i = 0; i < 3 && room; i++) {
			uint64_t id = maxid + 1 + rnd(&rs) % room;
			bool dup = false;
			for (size_t j = 0; j < c->in.nsubvols; j++)
				dup |= c->sv[j].id == id;
			if (!dup)
				cfg_subvol(c, id, 0, full, NULL, NULL);
		}
		btrfsimg_collide_result_clear(&r);
		check_one(c, s, 0, 0, &r);
		assert_int_equal(r.groups, 0);
		btrfsimg_collide_result_clear(&r);
		c->in.nsubvols = base;
		/* the first id past the bound, and its partner if it is new */
		if (keep.clash_subvol) {
			cfg_subvol(c, keep.clash_subvol, 0, full, NULL, NULL);
			if (keep.clash_with > maxid)
				cfg_subvol(c, keep.clash_with, 0, full, NULL, NULL);
			check_one(c, s, 0, 0, &r);
			assert_true(r.groups > 0);
			btrfsimg_collide_result_clear(&r);
		}
		cfg_free(c);
	}
}

/* ------------------------------ validation ------------------------------ */

static void expect_einval(const struct cfg *c, const char *needle)
{
	struct btrfsimg_scheme s = scheme(56, false, 1);
	struct btrfsimg_collide_result r;
	char err[256] = "";
	assert_int_equal(btrfsimg_collide(&c->in, &s, NULL, &r, err, sizeof(err)), -EINVAL);
	btrfsimg_collide_result_clear(&r);
	if (!strstr(err, needle))
		fail_msg("message \"%s\" lacks \"%s\"", err, needle);
}

/* The first wrong delta id in subvolume order, add before del, as a
 * one-by-one linear search finds it ("" when every delta is right). */
static void delta_truth(const struct cfg *c, char *msg, size_t len)
{
	msg[0] = 0;
	for (size_t i = 0; i < c->in.nsubvols; i++) {
		const struct btrfsimg_collide_subvol *v = &c->sv[i];
		size_t nb = v->base ? v->base->n : 0;
		for (size_t j = 0; v->add && j < v->add->n; j++)
			for (size_t k = 0; k < nb; k++)
				if (v->base->v[k] == v->add->v[j]) {
					snprintf(msg, len,
						 "subvolume %" PRIu64 ": added objectid %" PRIu64
						 " is already in the base",
						 v->id, v->add->v[j]);
					return;
				}
		for (size_t j = 0; v->del && j < v->del->n; j++) {
			bool in = false;
			for (size_t k = 0; k < nb && !in; k++)
				in = v->base->v[k] == v->del->v[j];
			if (!in) {
				snprintf(msg, len,
					 "subvolume %" PRIu64 ": deleted objectid %" PRIu64
					 " is not in the base",
					 v->id, v->del->v[j]);
				return;
			}
		}
	}
}

/* Deltas checked against bases shared by several subvolumes (the bitmap
 * path), sparse bases (no bitmap), ids below, inside and above a base's
 * range: the verdict and the message equal the one-by-one search's. */
static void test_delta_checks(void **state)
{
	(void)state;
	uint64_t rs = 77;
	for (int round = 0; round < 400; round++) {
		struct cfg *c = cfg_new();
		const struct btrfsimg_idset *bases[3];
		uint64_t lo[3], span[3];
		int nbases = 1 + (int)(rnd(&rs) % 3);
		for (int b = 0; b < nbases; b++) {
			size_t n = 1 + rnd(&rs) % 600;
			lo[b] = 256 + rnd(&rs) % 1000;
			/* dense (bitmap) or spread far apart (no bitmap) */
			span[b] =
				rnd(&rs) % 2 ? n + rnd(&rs) % (2 * n) : n * (100 + rnd(&rs) % 1000);
			uint64_t *v = malloc(n * sizeof(*v));
			assert_non_null(v);
			for (size_t k = 0; k < n; k++)
				v[k] = lo[b] + rnd(&rs) % span[b];
			bases[b] = cfg_set(c, v, n);
			free(v);
		}
		size_t ns = 1 + rnd(&rs) % 12;
		int bad = (int)(rnd(&rs) % 3); /* 0: all right; 1: a wrong add; 2: a wrong del */
		size_t badsv = rnd(&rs) % ns;
		for (size_t i = 0; i < ns; i++) {
			const struct btrfsimg_idset *base = bases[rnd(&rs) % (uint64_t)nbases];
			uint64_t add[64], del[64];
			size_t na = 0, nd = 0, want = rnd(&rs) % 40;
			for (size_t k = 0; k < want; k++) {
				uint64_t x = base->v[0] - 200 +
					     rnd(&rs) % (base->v[base->n - 1] - base->v[0] + 400);
				bool in = false;
				for (size_t q = 0; q < base->n && !in; q++)
					in = base->v[q] == x;
				if (in)
					del[nd++] = x;
				else
					add[na++] = x;
			}
			if (bad && i == badsv) {
				uint64_t x = base->v[rnd(&rs) % base->n];
				if (bad == 1)
					add[na++] = x; /* in the base */
				else
					del[nd++] = rnd(&rs) % 2 ? base->v[base->n - 1] + 1 +
									   rnd(&rs) % 5
								 : base->v[0] - 1 - rnd(&rs) % 5;
			}
			cfg_subvol(c, 256 + i, 0, base, na ? cfg_set(c, add, na) : NULL,
				   nd ? cfg_set(c, del, nd) : NULL);
		}
		char truth[256], err[256] = "";
		delta_truth(c, truth, sizeof(truth));
		struct btrfsimg_scheme s = scheme(56, false, 1);
		struct btrfsimg_collide_result r;
		int rc = btrfsimg_collide(&c->in, &s, NULL, &r, err, sizeof(err));
		btrfsimg_collide_result_clear(&r);
		if (truth[0]) {
			assert_int_equal(rc, -EINVAL);
			assert_string_equal(err, truth);
		} else {
			assert_int_equal(rc, 0);
		}
		cfg_free(c);
	}
}

static void test_validation(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	uint64_t bad[] = { 300, 299 }, good[] = { 256, 300 }, other[] = { 301 };
	struct btrfsimg_idset unsorted = { bad, 2 }, ok = { good, 2 }, o = { other, 1 };
	cfg_subvol(c, 256, 0, &unsorted, NULL, NULL);
	expect_einval(c, "not strictly increasing");
	c->sv[0].base = &ok;
	cfg_subvol(c, 256, 0, &ok, NULL, NULL);
	expect_einval(c, "listed twice");
	c->sv[1].id = 257;
	c->sv[1].del = &o;
	expect_einval(c, "not in the base");
	c->sv[1].del = NULL;
	c->sv[1].add = &ok;
	expect_einval(c, "already in the base");
	c->sv[1].add = &o;
	c->sv[1].parity = 2;
	expect_einval(c, "parity");
	c->sv[1].parity = 1;
	struct btrfsimg_idset nullv = { NULL, 3 };
	c->sv[1].add = &nullv;
	expect_einval(c, "no array");
	c->sv[1].add = &o;
	struct btrfsimg_collide_result r;
	char err[256] = "";
	struct btrfsimg_scheme bads[] = {
		{ 31, false, 1 }, { 56, true, 1 }, { 56, false, 4 }, { 65, false, 2 }
	};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(btrfsimg_collide(&c->in, &bads[i], NULL, &r, err, sizeof(err)),
				 -EINVAL);
		btrfsimg_collide_result_clear(&r);
		assert_non_null(strstr(err, "bad scheme"));
	}
	struct btrfsimg_scheme s = scheme(56, false, 2);
	assert_int_equal(btrfsimg_collide(&c->in, &s, NULL, &r, NULL, 0), 0);
	btrfsimg_collide_result_clear(&r);
	char name[64];
	btrfsimg_scheme_name(&s, name, sizeof(name));
	assert_string_equal(name, "inumbits=56,numdevs=2");
	s = scheme(0, false, 3);
	btrfsimg_scheme_name(&s, name, sizeof(name));
	assert_string_equal(name, "numdevs=many");
	cfg_free(c);
}

/* -------------------------------- scale -------------------------------- */

static void test_scale_snapshots(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	/* 101 subvolumes (5, 256..355) share [256, 1000256) (1,000,000 ids).
	 * 300 deletes [500000, 501000) and adds [2000000, 2001000); 320 deletes
	 * [600000, 600100) and adds [2000500, 2001500); 340 adds [3000000,
	 * 3000010). nfsd: every base value is held by >= 99 subvolumes:
	 * 1,000,000 groups with 101 * 10^6 - 1000 - 100 inodes; the adds
	 * share [2000500, 2001000): 500 groups of 2. */
	struct btrfsimg_idset *base = cfg_range(c, 256, 1000256);
	double t0 = now();
	cfg_subvol(c, 5, 0, base, NULL, NULL);
	for (uint64_t id = 256; id < 356; id++) {
		struct btrfsimg_idset *add = NULL, *del = NULL;
		if (id == 300) {
			del = cfg_range(c, 500000, 501000);
			add = cfg_range(c, 2000000, 2001000);
		} else if (id == 320) {
			del = cfg_range(c, 600000, 600100);
			add = cfg_range(c, 2000500, 2001500);
		} else if (id == 340) {
			add = cfg_range(c, 3000000, 3000010);
		}
		cfg_subvol(c, id, id % 2, base, add, del);
	}
	struct btrfsimg_collide_opts o = { 10, 8 };
	struct btrfsimg_collide_report *r = NULL;
	char err[256] = "";
	double t1 = now();
	assert_int_equal(btrfsimg_collide_all(&c->in, &o, &r, err, sizeof(err)), 0);
	double t2 = now();
	print_message("101 subvolumes x 1,000,000 shared objectids + deltas: all %d schemes in "
		      "%.3f s\n",
		      BTRFSIMG_COLLIDE_SCHEMES, t2 - t1);
	const struct btrfsimg_collide_result *nfsd = &r->results[0];
	assert_true(nfsd->groups == 1000000 + 500);
	assert_true(nfsd->inodes == 101ull * 1000000 - 1100 + 1000);
	assert_int_equal(nfsd->nexamples, 10);
	assert_true(nfsd->examples[0].ino == 256 && nfsd->examples[0].size == 101);
	/* uniquifier: constants swab64(s) differ from 2^48 up, ids < 2^22 */
	assert_int_equal(r->results[1].groups, 0);
	assert_true(r->results[1].proven);
	/* numdevs=many: nothing */
	assert_int_equal(r->results[68].groups, 0);
	/* N=56 numdevs=1 (index 2 + 24): 5 vs 256 at bit 40, ids < 2^22 */
	assert_int_equal(r->results[26].groups, 0);
	assert_int_equal(r->results[26].objbits, 40);
	assert_true(r->results[26].proven);
	print_message("  nfsd %llu groups; smallest collision-free N: numdevs=1 %u, numdevs=2 %u; "
		      "proven: %u, %u\n  N=56: %s\n",
		      (unsigned long long)nfsd->groups, r->min_free_n1, r->min_free_n2,
		      r->min_proven_n1, r->min_proven_n2, r->results[26].reason);
	(void)t0;
	btrfsimg_collide_report_free(r);
	cfg_free(c);
}

static void test_scale_many(void **state)
{
	(void)state;
	struct cfg *c = cfg_new();
	uint64_t rs = 5150, v[500];
	/* 2,000 subvolumes of 500 objectids each, separate arrays, objectids
	 * spread over [256, 2^20) */
	for (uint64_t i = 0; i < 2000; i++) {
		for (size_t k = 0; k < 500; k++)
			v[k] = 256 + rnd(&rs) % ((1u << 20) - 256);
		cfg_subvol(c, i == 0 ? 5 : 255 + i, rnd(&rs) % 2, cfg_set(c, v, 500), NULL, NULL);
	}
	cfg_extra(c, 300, 2, 0);
	struct btrfsimg_collide_opts o = { 5, 4 };
	struct btrfsimg_collide_report *r = NULL;
	char err[256] = "";
	double t1 = now();
	assert_int_equal(btrfsimg_collide_all(&c->in, &o, &r, err, sizeof(err)), 0);
	double t2 = now();
	print_message("2,000 subvolumes x 500 objectids: all %d schemes in %.3f s\n",
		      BTRFSIMG_COLLIDE_SCHEMES, t2 - t1);
	/* spot checks against the brute force */
	static const size_t pick[] = { 0, 1, 2, 10, 18, 26, 34, 35, 43, 51, 59, 67, 68 };
	struct bf_result *want = malloc(sizeof(*want));
	assert_non_null(want);
	for (size_t i = 0; i < sizeof(pick) / sizeof(pick[0]); i++) {
		struct btrfsimg_scheme s = bf_scheme(pick[i]);
		assert_int_equal(bf_count(&c->in, &s, 5, 4, want), 0);
		assert_int_equal(bf_same(&r->results[pick[i]], want), 0);
	}
	free(want);
	btrfsimg_collide_report_free(r);
	cfg_free(c);
}

/* ------------------------- NFS figures (nfs.c) ------------------------- */

/* f of an NFS figure's scheme, the reference way: "unless equal" per step. */
static uint64_t nf_f(const struct btrfsimg_scheme *s, uint64_t sv, uint64_t o)
{
	uint64_t ov = btrfsimg_inumbits_overlay(sv, s->inumbits);
	uint64_t x = o == ov ? o : o ^ ov;
	uint64_t u = s->uniquifier ? btrfsimg_uniquifier(sv) : 0;
	return x == u ? x : x ^ u;
}

static uint64_t nf_dev(const struct btrfsimg_scheme *s, const struct btrfsimg_collide_input *in,
		       size_t i)
{
	if (s->numdevs == BTRFSIMG_NUMDEVS_2)
		return in->subvols[i].parity;
	return s->numdevs == BTRFSIMG_NUMDEVS_MANY ? i + 1 : 0;
}

/* Every (device, number) listed and sorted: groups and inodes. */
static void nf_brute(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
		     uint64_t mask, uint64_t *groups, uint64_t *inodes, uint64_t *over)
{
	uint64_t (*v)[2] = calloc(4096, sizeof(*v));
	size_t n = 0;
	*groups = *inodes = *over = 0;
	for (size_t i = 0; i < in->nsubvols; i++) {
		const struct btrfsimg_idset *b = in->subvols[i].base;
		for (size_t k = 0; k < b->n; k++) {
			uint64_t f = nf_f(s, in->subvols[i].id, b->v[k]);
			*over += f > 0xffffffffull;
			v[n][0] = nf_dev(s, in, i);
			v[n++][1] = f & mask;
		}
	}
	for (size_t i = 0; i < in->nextras; i++) {
		v[n][0] = s->numdevs == BTRFSIMG_NUMDEVS_2 ? in->extras[i].parity : 0;
		v[n++][1] = in->extras[i].ino & mask;
	}
	for (size_t i = 0; i < n; i++) {
		size_t same = 0;
		bool first = true;
		for (size_t j = 0; j < n; j++) {
			if (v[j][0] == v[i][0] && v[j][1] == v[i][1]) {
				same++;
				first = first && j >= i;
			}
		}
		if (same > 1) {
			(*inodes)++;
			*groups += first;
		}
	}
	free(v);
}

/* Objectids chosen to meet every exception: each subvolume's overlay
 * (several N), uniquifier, their XOR and its low half, next to ordinary
 * small ones, in a few subvolumes whose ids share bytes. Every other
 * round keeps them below 2^32, where the 32-bit figures are corrected
 * counts rather than listed ones. */
static void test_nfs_figures_brute(void **state)
{
	(void)state;
	uint64_t seed = 7;
	for (int round = 0; round < 240; round++) {
		uint64_t limit = round % 2 ? 0xffffffffull : UINT64_MAX;
		size_t nsv = 1 + rnd(&seed) % 3;
		uint64_t ids[3], sets[3][40];
		struct btrfsimg_idset is[3];
		struct btrfsimg_collide_subvol sv[3];
		for (size_t i = 0; i < nsv; i++) {
			ids[i] = i == 0 && round % 3 == 0 ? 5 : 256 + i * 256 + rnd(&seed) % 3;
			size_t k = 0;
			for (int j = 0; j < 10; j++)
				sets[i][k++] = 256 + rnd(&seed) % 64;
			unsigned bits[] = { 32, 40, 47, 56, 64 };
			for (int j = 0; j < 5; j++) {
				uint64_t ov = btrfsimg_inumbits_overlay(ids[i], bits[j]);
				uint64_t u = btrfsimg_uniquifier(ids[i]);
				uint64_t c[] = { ov, u, ov ^ u, (ov ^ u) & 0xffffffffull, ov & 0xffffffffull };
				for (int m = 0; m < 5; m++)
					if (c[m] >= 256 && c[m] <= limit && rnd(&seed) % 2)
						sets[i][k++] = c[m];
			}
			/* another subvolume's constants collide with these */
			if (i > 0 && limit == UINT64_MAX)
				sets[i][k++] = btrfsimg_uniquifier(ids[0]) | 0x100;
			else if (i > 0) /* or another's overlay */
				sets[i][k++] = btrfsimg_inumbits_overlay(ids[0], 33) | 0x100;
			qsort(sets[i], k, sizeof(uint64_t), bf_cmp);
			size_t w = 0;
			for (size_t j = 0; j < k; j++)
				if (!w || sets[i][j] != sets[i][w - 1])
					sets[i][w++] = sets[i][j];
			is[i] = (struct btrfsimg_idset){ sets[i], w };
			sv[i] = (struct btrfsimg_collide_subvol){ ids[i], (unsigned)(i & 1), &is[i],
								  NULL, NULL };
		}
		struct btrfsimg_collide_extra ex[2] = { { ids[0], 2, 0 }, { ids[0], 2, 1 } };
		struct btrfsimg_collide_input in = { sv, nsv, ex, (size_t)(round % 3) };
		uint64_t maxobj = 0;
		for (size_t i = 0; i < nsv; i++)
			maxobj = is[i].v[is[i].n - 1] > maxobj ? is[i].v[is[i].n - 1] : maxobj;
		struct bi_nfs_input x = { &in, NULL, 0, maxobj };
		struct btrfsimg_nfs_report *r = NULL;
		assert_int_equal(bi_nfs_report(&x, &r), 0);
		for (size_t i = 0; i < r->n; i++) {
			const struct btrfsimg_nfs_figures *f = &r->figures[i];
			uint64_t g, n, o, g32, n32, o32;
			nf_brute(&in, &f->scheme, UINT64_MAX, &g, &n, &o);
			nf_brute(&in, &f->scheme, 0xffffffffull, &g32, &n32, &o32);
			if (f->groups != g || f->inodes != n || f->over32 != o ||
			    f->low32_groups != g32 || f->low32_inodes != n32) {
				char name[64];
				btrfsimg_scheme_name(&f->scheme, name, sizeof(name));
				fail_msg("round %d %s: have %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64
					 "/%" PRIu64 " want %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64
					 "/%" PRIu64,
					 round, name, f->groups, f->inodes, f->over32, f->low32_groups,
					 f->low32_inodes, g, n, o, g32, n32);
			}
		}
		btrfsimg_nfs_report_free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nfsd_roots),
		cmocka_unit_test(test_nfs_figures_brute),
		cmocka_unit_test(test_stubs),
		cmocka_unit_test(test_random_groups),
		cmocka_unit_test(test_exception),
		cmocka_unit_test(test_deltas),
		cmocka_unit_test(test_headroom_hand),
		cmocka_unit_test(test_random_small),
		cmocka_unit_test(test_random_dense),
		cmocka_unit_test(test_random_snapshot_gaps),
		cmocka_unit_test(test_random_blocks),
		cmocka_unit_test(test_next_masked),
		cmocka_unit_test(test_first_clash_scan),
		cmocka_unit_test(test_objbits_tight),
		cmocka_unit_test(test_subvol_bound_built),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_delta_checks),
		cmocka_unit_test(test_scale_snapshots),
		cmocka_unit_test(test_scale_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
