/* SPDX-License-Identifier: MIT */
/*
 * Verified tree blocks, the block cache, ordered iteration over a tree
 * with a log overlay merged in.
 */
#ifndef BI_TREE_H
#define BI_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"

/* A verified tree block. Item/pointer tables were checked when read. */
struct bi_block {
	uint64_t bytenr;
	uint64_t generation, owner;
	uint32_t nritems;
	uint8_t level;
	uint32_t size;
	uint8_t *data;
	/* cache bookkeeping (tree.c) */
	uint32_t refs;
	bool uncached;
	struct bi_block *hnext, *lru_prev, *lru_next;
};

/* Read and verify the block at @bytenr, trying every copy. Returns a
 * reference: release it with bi_block_put(). */
int bi_block_read(struct btrfsimg_fs *fs, uint64_t bytenr, const struct bi_expect *e,
		  struct bi_block **out);
void bi_block_put(struct btrfsimg_fs *fs, struct bi_block *b);
/* Put a block that will not be wanted again soon (a leaf already read or
 * summarized): unless someone else holds it, it leaves the cache and its
 * buffer serves the next read while still warm in the CPU's cache. */
void bi_block_put_once(struct btrfsimg_fs *fs, struct bi_block *b);

/* Slot accessors: valid for slot < nritems of a checked block. */
void bi_leaf_item(const struct bi_block *b, uint32_t slot, bi_key *k, const uint8_t **data,
		  uint32_t *size);
void bi_node_ptr(const struct bi_block *b, uint32_t slot, bi_key *k, uint64_t *blockptr,
		 uint64_t *gen);
/* The first item of a checked leaf whose key is >= @target (nritems if
 * none). */
uint32_t bi_leaf_slot(const struct bi_block *b, const bi_key *target);

struct bi_cache *bi_cache_new(uint64_t max_bytes);
void bi_cache_free(struct bi_cache *c);

/* Ordered iteration over [min, max] of one tree. */
struct bi_item {
	bi_key key;
	const uint8_t *data;	/* borrowed until the next call */
	uint32_t size;
	uint64_t block;		/* leaf bytenr, for messages */
	uint32_t slot;
};

/* Items that replace or hide a tree's own (the log tree replayed in
 * memory). Puts are sorted by key and unique; dels are sorted,
 * non-overlapping inclusive ranges. Owned by the handle (fs->overlays). */
struct bi_ovl_put {
	bi_key key;
	uint8_t *data;
	uint32_t size;
};
struct bi_ovl_del {
	bi_key start, end;
};
struct bi_log_overlay {
	uint64_t root;
	struct bi_ovl_put *puts;
	size_t nputs;
	struct bi_ovl_del *dels;
	size_t ndels;
	struct bi_log_overlay *next;
};
const struct bi_log_overlay *bi_overlay_for(const struct btrfsimg_fs *fs, uint64_t root);
void bi_overlays_free(struct btrfsimg_fs *fs);

struct bi_iter {
	struct btrfsimg_fs *fs;
	struct bi_root root;
	bi_key min, max, last;
	struct bi_block *path[MAX_LEVEL];
	uint32_t slot[MAX_LEVEL];
	int top;		/* root level */
	bool started, done;
	/* merging with an overlay (tree.c) */
	const struct bi_log_overlay *ovl;
	size_t ovl_pos, del_pos;
	struct bi_item base;
	bool have_base, base_done;
	bool (*skip)(const bi_key *lo, const bi_key *hi);
	bool stream;
	uint32_t ra_slot;	/* streaming: path[1]'s first slot not prefetched */
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
 * anyway, and filling the cache cost page faults and cache misses. */
void bi_iter_stream(struct bi_iter *it);

/* Find the item with exactly @key; -ENOENT if absent. The item is copied
 * into *data (malloc'd, caller frees) when @data is not NULL. */
int bi_tree_get(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *key,
		uint8_t **data, uint32_t *size);

/* The key of the last item at or before @max, from one path down the tree
 * (the log overlay is not looked at); -ENOENT if every item is after it. */
int bi_tree_last(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *max,
		 bi_key *out);

/* Free a list of overlays (the pure replay's result). */
void bi_lr_overlays_free(struct bi_log_overlay *list);

#endif
