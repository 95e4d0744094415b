// SPDX-License-Identifier: MIT
/* The stripe order of a chunk too wide for every order to be tried
 * (btrfs/salvage.h: bi_salvage_extent_holds, bi_salvage_order_by_votes):
 * evidence made through a chunk in the true order (bi_chunk_map_phys, the
 * reader's own map) must give that order back from the extents in devid
 * order, forged votes must be outvoted, and the order chosen must carry
 * as many votes as the best of all 8! orders (brute force). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/ondisk.h"
#include "btrfs/chunk.h"
#include "btrfs/salvage.h"
#include "btrfs/tree_checker.h"

#define N 8
#define SPAN (8ull << 20) /* bytes of each stripe on its device */
#define LOGICAL (1ull << 30)

/* the kernel's order of the test set (testdata/salvage-multi/wide) */
static const uint64_t truth[N] = { 4, 6, 2, 7, 5, 3, 1, 8 };

/* A chunk of @profile whose stripe k is on devid @ids[k], each devid's
 * extent at its own offset (devid * 64 MiB). */
static struct bi_chunk *chunk(uint64_t profile, const uint64_t *ids)
{
	struct bi_chunk *c = calloc(1, sizeof(*c) + N * sizeof(c->stripes[0]));
	assert_non_null(c);
	c->logical = LOGICAL;
	c->length = profile == BG_RAID10 ? SPAN * N / 2 : SPAN * N;
	c->type = BG_DATA | profile;
	c->stripe_len = BI_STRIPE_LEN;
	c->num_stripes = N;
	c->sub_stripes = profile == BG_RAID10 ? 2 : 1;
	for (int k = 0; k < N; k++) {
		c->stripes[k].devid = ids[k];
		c->stripes[k].offset = ids[k] << 26;
		c->stripes[k].dev_uuid[0] = (uint8_t)ids[k];
	}
	return c;
}

static struct bi_chunk *by_devid(uint64_t profile)
{
	uint64_t ids[N];
	for (int k = 0; k < N; k++)
		ids[k] = (uint64_t)k + 1;
	return chunk(profile, ids);
}

/* Blocks at every 16 KiB of the first @rows rows, as the true chunk puts
 * them (every copy), voted on the extents of @e. */
static void votes_from_truth(const struct bi_chunk *t, struct bi_chunk *e, int copies,
			     unsigned rows, struct bi_sv_votes *v)
{
	memset(v, 0, sizeof(*v));
	uint64_t data = t->length / SPAN; /* data stripes per row */
	for (uint64_t off = 0; off < rows * data * BI_STRIPE_LEN; off += 16384)
		for (int copy = 0; copy < copies; copy++) {
			struct bi_phys p;
			assert_int_equal(bi_chunk_map_phys(t, LOGICAL + off, copy, &p), 0);
			for (uint16_t j = 0; j < N; j++)
				for (uint16_t k = 0; e->stripes[j].devid == p.devid && k < N; k++)
					v->v[j][k] += bi_salvage_extent_holds(e, j, k, p.physical,
									      LOGICAL + off);
		}
}

/* The most votes any assignment of extents to indices carries. */
static uint64_t brute_best(const struct bi_sv_votes *v)
{
	uint16_t o[N];
	for (uint16_t k = 0; k < N; k++)
		o[k] = k;
	uint64_t best = 0;
	do {
		uint64_t sum = 0;
		for (uint16_t k = 0; k < N; k++)
			sum += v->v[o[k]][k];
		best = sum > best ? sum : best;
	} while (bi_salvage_next_order(o, N));
	return best;
}

static uint64_t votes_taken(const struct bi_chunk *before, const struct bi_chunk *after,
			    const struct bi_sv_votes *v)
{
	uint64_t sum = 0;
	for (uint16_t k = 0; k < N; k++)
		for (uint16_t j = 0; j < N; j++)
			if (before->stripes[j].devid == after->stripes[k].devid)
				sum += v->v[j][k];
	return sum;
}

static void test_raid0_order_back(void **state)
{
	(void)state;
	struct bi_chunk *t = chunk(BG_RAID0, truth), *e = by_devid(BG_RAID0), *was = by_devid(BG_RAID0);
	struct bi_sv_votes v;
	votes_from_truth(t, e, 1, 3, &v);
	v.v[3][1] += 5; /* forged: devid 4 (extent 3, truly index 0) at index 1... */
	v.v[0][1] += 5; /* ...and devid 1 (truly index 6) there too */
	uint64_t best = brute_best(&v);
	struct bi_sv_order o;
	bi_salvage_order_by_votes(e, &v, &o);
	for (int k = 0; k < N; k++)
		assert_int_equal(e->stripes[k].devid, truth[k]);
	assert_int_equal(o.decided, N);
	assert_false(o.refused);
	assert_int_equal(o.against, 10);
	assert_int_equal(votes_taken(was, e, &v), best);
	free(t);
	free(e);
	free(was);
}

/* raid10: a block votes for both indices of its mirror pair; each pair
 * must get its two devids, in either order (both read the same bytes). */
static void test_raid10_pairs(void **state)
{
	(void)state;
	struct bi_chunk *t = chunk(BG_RAID10, truth), *e = by_devid(BG_RAID10);
	struct bi_sv_votes v;
	votes_from_truth(t, e, 2, 2, &v);
	struct bi_sv_order o;
	bi_salvage_order_by_votes(e, &v, &o);
	assert_false(o.refused);
	assert_int_equal(o.decided, N);
	assert_int_equal(o.against, 0);
	for (int k = 0; k < N; k += 2) {
		uint64_t a = e->stripes[k].devid, b = e->stripes[k + 1].devid;
		assert_true((a == truth[k] && b == truth[k + 1]) ||
			    (a == truth[k + 1] && b == truth[k]));
	}
	free(t);
	free(e);
}

/* Evidence for seven stripes places the eighth; two extents as well voted
 * for one index (not mirrors) are refused, the order left as it was. */
static void test_elimination_and_tie(void **state)
{
	(void)state;
	struct bi_chunk *e = by_devid(BG_RAID0);
	struct bi_sv_votes v;
	memset(&v, 0, sizeof(v));
	for (uint16_t j = 0; j < N - 1; j++)
		v.v[j][N - 2 - j] = 3; /* extent j at index 6 - j; extent 7 not voted */
	struct bi_sv_order o;
	bi_salvage_order_by_votes(e, &v, &o);
	assert_int_equal(o.decided, N);
	assert_int_equal(e->stripes[N - 1].devid, N); /* the one gap left */
	free(e);
	e = by_devid(BG_RAID0);
	memset(&v, 0, sizeof(v));
	v.v[2][0] = 4;
	v.v[5][0] = 4;
	bi_salvage_order_by_votes(e, &v, &o);
	assert_true(o.refused);
	assert_int_equal(o.decided, 0);
	for (int k = 0; k < N; k++)
		assert_int_equal(e->stripes[k].devid, (uint64_t)k + 1);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raid0_order_back),
		cmocka_unit_test(test_raid10_pairs),
		cmocka_unit_test(test_elimination_and_tie),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
