/* SPDX-License-Identifier: MIT */
/*
 * A tree's leaves in key order, by address: for readers that read, check
 * and parse leaves on other threads (the inode enumeration). The walk
 * itself (node reads through the block cache, read-ahead hints) stays on
 * the calling thread; each leaf comes with what its parent expects of it,
 * for the reader's checks.
 */
#ifndef BI_LEAFWALK_H
#define BI_LEAFWALK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/path.h"

struct bi_leafwalk {
	/* the one descent (path.h), stopping at level 1 (p.nodes[0] holds
	 * the root of a tree of one leaf, p.top == 0), with RING read-ahead;
	 * a caller that reads the leaves around the page cache sets
	 * p.no_leaf_hints (before its first bi_leafwalk_next_ptr): read-ahead
	 * requests for nodes only */
	struct bi_path p;
	bool started, done;
};

/* Start over [@min, @max] of @root. Leaves the key range of which @skip
 * (may be NULL) rejects are neither read nor checked, as bi_iter_skip_leaves
 * does (not the first leaf, not the last under each node). 0 or < 0 (the
 * root could not be read; message on fs). */
int bi_leafwalk_start(struct btrfsimg_fs *fs, struct bi_leafwalk *lw, const struct bi_root *root,
		      const bi_key *min, const bi_key *max,
		      bool (*skip)(const bi_key *lo, const bi_key *hi));
/* The next leaf, in key order, for callers that read and verify it
 * themselves (its copy 0, off the walking thread): where it is and what
 * its parent expects of it (level 0, this generation, this first key),
 * @first for the walk's first leaf (its items start at or after @min;
 * items past @max are the caller's to stop at). Nodes are read and
 * verified here. 1, 0 (no leaf left, or a tree of one leaf: top == 0),
 * < 0 (a node could not be read; message on fs). */
struct bi_leaf_ptr {
	uint64_t bytenr, generation;
	bi_key first_key;
	bool first;
};
int bi_leafwalk_next_ptr(struct bi_leafwalk *lw, struct bi_leaf_ptr *out);
void bi_leafwalk_end(struct bi_leafwalk *lw);

struct bi_dev;
/* Where copy 0 of [@logical, + @len) lies when bi_read_copy would read it
 * from one device in one piece (a present device, one stripe, no RAID5/6):
 * 0 with *@dev and *@physical (relative to the device's base); else
 * -EINVAL (read it with bi_read_copy). */
int bi_leaf_where(struct btrfsimg_fs *fs, uint64_t logical, uint32_t len, const struct bi_dev **dev,
		  uint64_t *physical);

#endif
