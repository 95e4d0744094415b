// SPDX-License-Identifier: MIT
/*
 * Whole-tree scans (snapshot_scan.c): on the kernel-made snaps image (snapshots of a
 * many-leaf tree that add, delete, rewrite and rename inodes, and a source
 * that changed after them), every subvolume's inode set, full or stored as
 * a difference from a full set, must hold exactly the INODE_ITEMs an
 * item-by-item walk of that tree finds. The image must also make the scan
 * take each path: full sets, deltas that add and delete, and a snapshot
 * too far from its source for a delta.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "inum/snapshot_scan.h"
#include "unpack.h"

struct ids {
	uint64_t *v;
	size_t n, cap;
};

static void ids_add(struct ids *s, uint64_t x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_non_null(s->v);
	}
	s->v[s->n++] = x;
}

/* The truth: every INODE_ITEM key of the tree, through the item iterator. */
static struct ids walked_ids(btrfsimg_fs *fs, const struct bi_root *r)
{
	struct ids out = { 0 };
	bi_key min = { 256, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	assert_int_equal(bi_iter_start(fs, &it, r, &min, &max), 0);
	int rc;
	while ((rc = bi_iter_next(&it, &item)) > 0)
		if (item.key.type == KT_INODE_ITEM && item.key.objectid <= OBJ_LAST_FREE)
			ids_add(&out, item.key.objectid);
	assert_int_equal(rc, 0);
	bi_iter_end(&it);
	return out;
}

static bool holds(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* What a set stands for, spelled out the slow way: base - del + add,
 * sorted by insertion into place. */
static struct ids expanded(const struct bi_tree_ids *set)
{
	struct ids out = { 0 };
	const struct bi_tree_ids *full = set->base ? set->base : set;
	for (size_t i = 0; i < full->nids; i++)
		if (!set->base || !holds(set->del, set->ndel, full->ids[i]))
			ids_add(&out, full->ids[i]);
	for (size_t i = 0; set->base && i < set->nids; i++) {
		ids_add(&out, set->ids[i]);
		for (size_t k = out.n - 1; k > 0 && out.v[k - 1] > out.v[k]; k--) {
			uint64_t t = out.v[k];
			out.v[k] = out.v[k - 1];
			out.v[k - 1] = t;
		}
	}
	return out;
}

/* Every subvolume's set against its tree walked item by item; with
 * @worker the sets are built on the scan's second thread. */
static void check_sets(bool worker)
{
	char *img = unpack_zst(TESTDATA "/files/snaps.img.zst", NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	struct btrfsimg_subvol *v;
	size_t nv;
	assert_int_equal(btrfsimg_subvols(fs, &v, &nv), 0);
	struct bi_scan *scan = bi_scan_new(fs);
	assert_non_null(scan);
	if (worker)
		bi_scan_start(scan);
	struct bi_tree_ids **sets = calloc(nv + 1, sizeof(*sets));
	assert_non_null(sets);
	for (size_t i = 0; i < nv; i++) {
		if (v[i].deleted)
			continue;
		struct bi_root r;
		assert_int_equal(bi_root_find(fs, v[i].id, &r), 0);
		assert_int_equal(bi_scan_tree(scan, &r, &sets[i], NULL, NULL), 0);
	}
	assert_int_equal(bi_scan_wait(scan), 0);
	size_t both = 0;
	for (size_t i = 0; i < nv; i++) {
		if (v[i].deleted)
			continue;
		struct bi_root r;
		struct bi_tree_ids *set = sets[i];
		assert_non_null(set);
		assert_int_equal(bi_root_find(fs, v[i].id, &r), 0);
		struct ids want = walked_ids(fs, &r), have = expanded(set);
		if (have.n != want.n || (want.n && memcmp(have.v, want.v, want.n * 8)))
			fail_msg("subvolume %llu: %zu inodes in the set, %zu in the tree",
				 (unsigned long long)v[i].id, have.n, want.n);
		assert_int_equal(set->n, want.n);
		assert_int_equal(set->max_id, want.n ? want.v[want.n - 1] : 0);
		/* what the collision engine requires of a delta */
		for (size_t k = 0; set->base && k < set->ndel; k++) {
			assert_true(k == 0 || set->del[k - 1] < set->del[k]);
			assert_true(holds(set->base->ids, set->base->nids, set->del[k]));
		}
		for (size_t k = 0; set->base && k < set->nids; k++) {
			assert_true(k == 0 || set->ids[k - 1] < set->ids[k]);
			assert_false(holds(set->base->ids, set->base->nids, set->ids[k]));
		}
		const char *path = v[i].path ? v[i].path : "";
		if (!strcmp(path, "snaps/most-gone"))
			assert_null(set->base); /* lost 80%: a delta would be larger */
		if (!strcmp(path, "snaps/same") || !strcmp(path, "snaps/chmod") ||
		    !strcmp(path, "snaps/add") || !strcmp(path, "snaps/mixed"))
			assert_non_null(set->base);
		both += set->base && set->ndel && set->nids;
		free(want.v);
		free(have.v);
		bi_tree_ids_put(set);
	}
	assert_true(both >= 1);
	free(sets);
	bi_scan_free(scan);
	btrfsimg_subvols_free(v, nv);
	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
}

static void test_snapshot_sets(void **state)
{
	(void)state;
	check_sets(false);
}

static void test_snapshot_sets_worker(void **state)
{
	(void)state;
	check_sets(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_sets),
		cmocka_unit_test(test_snapshot_sets_worker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
