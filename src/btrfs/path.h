/* SPDX-License-Identifier: MIT */
/*
 * The one descent of a tree (the kernel's btrfs_path): one verified block
 * per level from the root down, the slot taken in each, stepped leaf by
 * leaf in key order. The iterator (btrfs/tree.h), the leaf walk
 * (btrfs/leafwalk.h) and lookups stand on it; read-ahead of the leaves
 * ahead is an option of the path, not another walker.
 */
#ifndef BI_PATH_H
#define BI_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"

/* What a path asks the kernel to read before the walk gets there. */
enum bi_readahead {
	BI_RA_NONE,   /* lookups: nothing */
	BI_RA_STREAM, /* a walk that reads each leaf once, in order: the leaves
		       * ahead, in batches, and the next level-1 node on entering
		       * one; a leaf passed leaves the cache */
	BI_RA_RING,   /* a walk handing leaves to other readers (leafwalk): a
		       * larger window, given from a thread of its own, running on
		       * into the next level-1 node */
};

struct bi_ra_queue;

struct bi_path {
	struct btrfsimg_fs *fs;
	struct bi_root root;
	bi_key max;	/* the walk stops at the first pointer or item after it */
	/* nodes[top] is the root; nodes[0] the leaf (NULL in a path that
	 * stops at level 1, unless the root is a leaf) */
	struct bi_block *nodes[MAX_LEVEL];
	uint32_t slots[MAX_LEVEL];
	int top;	/* root level */
	bool leaves;	/* descends to the leaves; false: stops at level 1 */
	/* Leaves whose whole key range [lo, hi) @skip rejects are stepped
	 * over unread (not the first, not the last under each node: its upper
	 * bound is unknown there). */
	bool (*skip)(const bi_key *lo, const bi_key *hi);
	/* read-ahead (path.c) */
	enum bi_readahead ra;
	bool no_leaf_hints;	/* RING: the caller reads around the page cache */
	uint32_t ra_slot;	/* nodes[1]'s first slot not asked for */
	uint8_t *scratch;	/* RING: the next level-1 node, read raw */
	bool over_done;
	uint64_t over_bytenr;
	uint32_t over_to;
	struct bi_ra_queue *queue; /* RING: the thread asking, or NULL */
};

/* An empty path over @root up to @max (nothing read, nothing held). Set
 * ra and skip after it as wanted. */
void bi_path_init(struct bi_path *p, struct btrfsimg_fs *fs, const struct bi_root *root,
		  const bi_key *max, bool leaves);
/* Descend from the root to where a walk from @min begins: at each node
 * the last pointer whose key is <= @min; in the leaf, the first item >=
 * @min. 0, or < 0 (message on fs; the path is released). */
int bi_path_descend(struct bi_path *p, const bi_key *min);
/* Read the root into nodes[top] (slot 0), nothing below it. */
int bi_path_root(struct bi_path *p);
/* Replace nodes[level - 1] with the child behind nodes[level]'s slot: one
 * level of the descent, for walks that choose their own way down (two
 * trees compared side by side). */
int bi_path_down(struct bi_path *p, int level);
/* Step to the next leaf (for a path stopping at level 1: the next slot of
 * nodes[1]), reading the nodes on the way. 1: moved; 0: the tree or range
 * is exhausted; < 0: a block could not be read (message on fs). */
int bi_path_next_leaf(struct bi_path *p);
/* For a path stopping at level 1: the leaf at nodes[1]'s slot is about to
 * be read by the caller, ask ahead as the path's read-ahead says. */
void bi_path_readahead(struct bi_path *p);
/* Put every block held (a streamed path's leaf leaving the cache). */
void bi_path_release(struct bi_path *p);

/* The last lookups' paths, kept in the cache: start at the kept leaf if a
 * descent to @min from this root would take its path (true), and keep an
 * ending path for the next lookup (true: its references passed to the
 * cache). */
bool bi_path_hint_start(struct bi_path *p, const bi_key *min);
bool bi_path_hint_keep(struct bi_path *p);

#endif
