/* SPDX-License-Identifier: MIT */
/*
 * Two trees compared item by item, reading only what differs: a subtree
 * both reach through the same block (same address, same generation) is
 * the same subtree and is skipped whole, which is what makes two
 * snapshots of one subvolume cheap to compare (the kernel's send walks
 * two trees the same way: fs/btrfs/send.c, btrfs_compare_trees).
 */
#ifndef BI_TREECMP_H
#define BI_TREECMP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"

/* One side's item: NULL data when the side has no item with the key. */
struct bi_cmp_side {
	const uint8_t *data;
	uint32_t size;
	bool present;
};

/* Called for every key whose item is absent on one side or differs in
 * its bytes, in key order. Nonzero stops the comparison and is returned. */
typedef int (*bi_treecmp_fn)(void *ctx, const bi_key *key, const struct bi_cmp_side *a,
			     const struct bi_cmp_side *b);

struct bi_treecmp_stats {
	uint64_t blocks_read;		/* tree blocks read, both sides */
	uint64_t subtrees_shared;	/* subtrees skipped as the same block */
};

/* Compare trees @a and @b. Trees with a replayed log overlay are compared
 * by bi_tree_compare_items instead (the overlay is not in the blocks). */
int bi_tree_compare(struct btrfsimg_fs *fs, const struct bi_root *a, const struct bi_root *b,
		    bi_treecmp_fn fn, void *ctx, struct bi_treecmp_stats *st);

/* Called when a subtree below the root of one side (@side_b: the second)
 * cannot be read (-EIO, -EUCLEAN; the message on that side's handle): its
 * keys [@lo, @hi) (@hi NULL: to the end) are compared no further on
 * either side, and the comparison goes on. Nonzero stops it and is
 * returned. */
typedef int (*bi_treecmp_unread_fn)(void *ctx, bool side_b, const bi_key *lo, const bi_key *hi,
				    int rc);

/* The same with tree @a read through @fsa and @b through @fsb: two
 * handles on the same devices opened at two generations. A block address
 * names the same bytes in both as long as the generation the pointer
 * expects matches, so shared subtrees are still skipped unread. With
 * @unread NULL every read failure stops the comparison; either way an
 * unreadable root does. Errors are left on the handle whose read failed. */
int bi_tree_compare_across(struct btrfsimg_fs *fsa, const struct bi_root *a,
			   struct btrfsimg_fs *fsb, const struct bi_root *b, bi_treecmp_fn fn,
			   bi_treecmp_unread_fn unread, void *ctx, struct bi_treecmp_stats *st);

/* The same answer from every item of both trees (overlays merged): for
 * trees with overlays, and as the reference the shared-subtree walk is
 * tested against. */
int bi_tree_compare_items(struct btrfsimg_fs *fs, const struct bi_root *a,
			  const struct bi_root *b, bi_treecmp_fn fn, void *ctx,
			  struct bi_treecmp_stats *st);
int bi_tree_compare_items_across(struct btrfsimg_fs *fsa, const struct bi_root *a,
				 struct btrfsimg_fs *fsb, const struct bi_root *b,
				 bi_treecmp_fn fn, void *ctx, struct bi_treecmp_stats *st);

#endif
