// SPDX-License-Identifier: MIT
/*
 * The tree comparison (btrfs/treecmp.c) against its brute-force reference:
 * on the kernel-made snapshots of testdata/diff, every pair of trees gives
 * the same differing keys, in the same order, whether shared subtrees are
 * skipped or every item of both trees is read; and the shared walk reads
 * fewer blocks when the trees share any. The same across two handles
 * opened at two generations of testdata/gendiff.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/handle.h"
#include "base/key.h"
#include "btrfs/root.h"
#include "btrfs/treecmp.h"
#include "unpack.h"

#define SEEN_MAX 65536

struct seen {
	bi_key key[SEEN_MAX];
	uint8_t sides[SEEN_MAX];	/* bit 0: in a, bit 1: in b */
	size_t n;
};

static int record(void *ctx, const bi_key *k, const struct bi_cmp_side *a,
		  const struct bi_cmp_side *b)
{
	struct seen *s = ctx;
	if (s->n == SEEN_MAX)
		return -ENOSPC;
	s->key[s->n] = *k;
	s->sides[s->n++] = (uint8_t)(a->present | b->present << 1);
	return 0;
}

static void compare_both_ways(btrfsimg_fs *fs, uint64_t x, uint64_t y, bool expect_shared)
{
	struct bi_root a, b;
	assert_int_equal(bi_root_find(fs, x, &a), 0);
	assert_int_equal(bi_root_find(fs, y, &b), 0);
	static struct seen fast, slow;
	memset(&fast, 0, sizeof(fast));
	memset(&slow, 0, sizeof(slow));
	struct bi_treecmp_stats sf, ss;
	assert_int_equal(bi_tree_compare(fs, &a, &b, record, &fast, &sf), 0);
	assert_int_equal(bi_tree_compare_items(fs, &a, &b, record, &slow, &ss), 0);
	assert_int_equal(fast.n, slow.n);
	for (size_t i = 0; i < fast.n; i++) {
		assert_int_equal(bi_key_cmp(&fast.key[i], &slow.key[i]), 0);
		assert_int_equal(fast.sides[i], slow.sides[i]);
	}
	if (x == y)
		assert_int_equal(fast.n, 0);
	if (expect_shared)
		assert_true(sf.subtrees_shared > 0);
}

static btrfsimg_fs *open_image(const char *zst, char **img)
{
	*img = unpack_zst(zst, NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, *img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	return fs;
}

static void close_image(btrfsimg_fs *fs, char *img)
{
	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
}

static void same_answer_as_every_item(void **state)
{
	(void)state;
	char *img;
	btrfsimg_fs *fs = open_image(TESTDATA "/diff/diff.img.zst", &img);
	/* testdata/diff/snapshots.json: data 256, s1 257, s2 258, s3 259 */
	for (uint64_t x = 256; x <= 259; x++)
		for (uint64_t y = 256; y <= 259; y++)
			compare_both_ways(fs, x, y, false);
	compare_both_ways(fs, 5, 257, false); /* unrelated trees */
	close_image(fs, img);
	/* three levels, nearly all shared: sv 256, a 257, b 258 */
	fs = open_image(TESTDATA "/diff/shared.img.zst", &img);
	compare_both_ways(fs, 257, 258, true);
	compare_both_ways(fs, 258, 257, true);
	compare_both_ways(fs, 256, 257, true);
	compare_both_ways(fs, 5, 258, false);
	close_image(fs, img);
}

static btrfsimg_fs *open_at(const char *img, uint64_t generation)
{
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_set_generation(fs, generation), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	return fs;
}

/* One subvolume at two generations, each read through its own handle
 * (testdata/gendiff: data 256 at generations 8 to 13): the shared walk
 * gives the keys reading every item gives, and skips what the two share. */
static void same_answer_across_generations(void **state)
{
	(void)state;
	char *img = unpack_zst(TESTDATA "/gendiff/gendiff.img.zst", NULL);
	static const uint64_t gens[] = { 8, 9, 10, 11, 13 };
	static struct seen fast, slow;
	for (size_t i = 0; i < 5; i++)
		for (size_t j = 0; j < 5; j++) {
			btrfsimg_fs *x = open_at(img, gens[i]), *y = open_at(img, gens[j]);
			struct bi_root a, b;
			assert_int_equal(bi_root_find(x, 256, &a), 0);
			assert_int_equal(bi_root_find(y, 256, &b), 0);
			memset(&fast, 0, sizeof(fast));
			memset(&slow, 0, sizeof(slow));
			struct bi_treecmp_stats sf, ss;
			assert_int_equal(bi_tree_compare_across(x, &a, y, &b, record, NULL, &fast, &sf),
					 0);
			assert_int_equal(bi_tree_compare_items_across(x, &a, y, &b, record, &slow, &ss),
					 0);
			assert_int_equal(fast.n, slow.n);
			for (size_t k = 0; k < fast.n; k++) {
				assert_int_equal(bi_key_cmp(&fast.key[k], &slow.key[k]), 0);
				assert_int_equal(fast.sides[k], slow.sides[k]);
			}
			if (i == j || (gens[i] >= 11 && gens[j] >= 11)) /* 13 left data alone */
				assert_true(fast.n == 0 && sf.blocks_read == 0);
			else
				assert_true(fast.n > 0);
			btrfsimg_fs_free(x);
			btrfsimg_fs_free(y);
		}
	unlink(img);
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_answer_as_every_item),
		cmocka_unit_test(same_answer_across_generations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
