/* SPDX-License-Identifier: MIT */
/*
 * A tree's leaves in key order, handed out whole: for readers that parse
 * leaves on other threads (the inode enumeration). The walk itself (node
 * reads, the block cache, prefetch hints) stays on the calling thread; a
 * leaf handed out is a verified block the caller holds a reference to and
 * may share, read-only, with other threads until it puts it back.
 */
#ifndef BI_LEAFWALK_H
#define BI_LEAFWALK_H

#include <stdbool.h>
#include <stdint.h>

#include "0-base/handle.h"
#include "0-base/key.h"
#include "0-base/ondisk.h"
#include "3-btrfs/tree.h"

struct bi_leafwalk {
	struct btrfsimg_fs *fs;
	struct bi_root root;
	bi_key min, max;
	struct bi_block *path[MAX_LEVEL]; /* nodes only: path[0] stays NULL */
	uint32_t slot[MAX_LEVEL];
	int top; /* root level */
	bool started, done;
	struct bi_block *root_leaf; /* a tree of one leaf, until handed out */
	bool (*skip)(const bi_key *lo, const bi_key *hi);
	uint32_t ra_slot; /* path[1]'s first slot not prefetched */
	/* hints for the next level-1 node's first leaves (leafwalk.c) */
	uint8_t *scratch;
	bool over_done;
	uint64_t over_bytenr;
	uint32_t over_to;
	struct bi_lw_hints *hints; /* the thread giving them, or NULL */
};

/* Start over [@min, @max] of @root. Leaves the key range of which @skip
 * (may be NULL) rejects are neither read nor checked, as bi_iter_skip_leaves
 * does (not the first leaf, not the last under each node). 0 or < 0 (the
 * root could not be read; message on fs). */
int bi_leafwalk_start(struct btrfsimg_fs *fs, struct bi_leafwalk *lw, const struct bi_root *root,
		      const bi_key *min, const bi_key *max,
		      bool (*skip)(const bi_key *lo, const bi_key *hi));
/* The next leaf, in key order: 1 and *@leaf (a reference: release it with
 * bi_block_put_once) with *@from, its first slot at or after @min (0 but
 * for the first leaf); 0 when no leaf is left; < 0 on a failed read
 * (message on fs; the walk is over). Items past @max are the caller's to
 * stop at, as bi_iter_next does. */
int bi_leafwalk_next(struct bi_leafwalk *lw, struct bi_block **leaf, uint32_t *from);
void bi_leafwalk_end(struct bi_leafwalk *lw);

#endif
