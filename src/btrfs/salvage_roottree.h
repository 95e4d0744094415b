/* SPDX-License-Identifier: MIT */
/*
 * The root tree's own lost nodes and leaves rebuilt in memory
 * (salvage_roottree.c), so that a root tree of two or more levels that
 * lost one block on every copy is read at its generation rather than
 * rolled back to an older root tree.
 */
#ifndef BI_SALVAGE_ROOTTREE_H
#define BI_SALVAGE_ROOTTREE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/handle.h"

/* Every item of root tree @r read (salvage_roots.c): a tree that does not
 * read whole, or names no tree 5, is not the filesystem's. 0 or a
 * negative errno (message on @fs). */
int bi_salvage_root_tree_whole(struct btrfsimg_fs *fs, const struct bi_root *r);

/* What bi_salvage_roottree did. */
struct bi_rt_result {
	struct bi_root root;	/* the root tree to read (its lost blocks pinned) */
	size_t nodes, leaves;	/* rebuilt */
	/* the ROOT_ITEMs taken from scanned leaves (at most BI_RT_TAKEN are
	 * kept; @ntaken counts them all): the caller checks the root each
	 * names, and for one known only as of an older generation than its
	 * lost leaf's (said here) looks for a newer root by scanning */
#define BI_RT_TAKEN 256
	struct {
		uint64_t id, bytenr, generation, as_of, lost;
		uint8_t level;
	} taken[BI_RT_TAKEN];
	size_t ntaken;
	size_t nolder;	/* of them older than their lost leaf */
};

/* Rebuild root tree @rt (NULL: no superblock names one, the root is then
 * the highest recorded block) whose blocks the extent tree rooted at @ext
 * records: each lost node from the recorded blocks of the level below in
 * its key range, each lost leaf from the root-tree leaves the scan found
 * (gen no newer than it, newest generation first, an older leaf's keys
 * shadowed where a newer one spans them). Every rebuilt block and every
 * ROOT_ITEM known only from an older leaf is said as damage. 1 when
 * something was rebuilt (*out filled), 0 when nothing could be (said), or
 * a negative errno (no memory). */
int bi_salvage_roottree(struct btrfsimg_fs *fs, const struct bi_root *rt, const struct bi_root *ext,
			struct bi_rt_result *out);

#endif
