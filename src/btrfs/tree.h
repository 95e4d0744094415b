/* SPDX-License-Identifier: MIT */
/*
 * Ordered iteration over a tree, with a log overlay merged in, and
 * lookups. What a walker needs comes with it: verified blocks
 * (btrfs/block.h), their references (btrfs/cache.h), the descent
 * (btrfs/path.h) and the overlays (btrfs/overlay.h).
 */
#ifndef BI_TREE_H
#define BI_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"
#include "btrfs/cache.h"
#include "btrfs/overlay.h"
#include "btrfs/path.h"
#include "btrfs/tree_checker.h"

/* Ordered iteration over [min, max] of one tree. */
struct bi_item {
	bi_key key;
	const uint8_t *data;	/* borrowed until the next call */
	uint32_t size;
	uint64_t block;		/* leaf bytenr, for messages */
	uint32_t slot;
};

struct bi_iter {
	struct bi_path p;	/* p.nodes[0], p.slots[0]: the next item */
	bi_key last;
	bool started, done;
	/* merging with an overlay (iter.c) */
	struct bi_ovl_cursor ovl;
	struct bi_item base;
	bool have_base, base_done;
};

int bi_iter_start(struct btrfsimg_fs *fs, struct bi_iter *it, const struct bi_root *root,
		  const bi_key *min, const bi_key *max);
/* 1: *out holds an item; 0: no more; < 0: error (message on fs). */
int bi_iter_next(struct bi_iter *it, struct bi_item *out);
void bi_iter_end(struct bi_iter *it);
/* Leaves whose whole key range [lo, hi) @skip rejects are not read (after
 * the first leaf; the last leaf under each node is always read, its upper
 * bound being unknown there). For callers that want a few item types: a
 * skipped leaf is neither read nor checked. */
void bi_iter_skip_leaves(struct bi_iter *it, bool (*skip)(const bi_key *lo, const bi_key *hi));
/* Leaves are read once, in order (a whole-tree walk): each one is dropped
 * from the block cache when the walk moves on, unless someone else holds
 * it, and its buffer takes the next leaf, still warm in the CPU's cache.
 * A linear walk of a tree larger than the cache gets no hits from it
 * anyway, and filling the cache cost page faults and cache misses. The
 * leaves ahead are asked for in batches (BI_RA_STREAM). */
void bi_iter_stream(struct bi_iter *it);

/* Find the item with exactly @key; -ENOENT if absent. The item is copied
 * into *data (malloc'd, caller frees) when @data is not NULL. */
int bi_tree_get(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *key,
		uint8_t **data, uint32_t *size);

/* The key of the last item at or before @max, from one path down the tree
 * (the log overlay is not looked at); -ENOENT if every item is after it. */
int bi_tree_last(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *max,
		 bi_key *out);

#endif
