/* SPDX-License-Identifier: MIT */
/*
 * A tree's leaves in key order, by address (see leafwalk.h): the one path
 * of path.c stopping at level 1, with its RING read-ahead (a wide window
 * asked for from a thread of its own, across level-1 nodes). It reads the
 * same nodes in the same order as the iterator would, so a damaged node
 * fails with the same message at the same place; the leaves are the
 * caller's to read and check (with the expectations given), and to fall
 * back to bi_block_read for (every copy, the messages) when its own read
 * or check fails.
 */
#include <stdlib.h>
#include <string.h>

#include "btrfs/leafwalk.h"

#include "base/err.h"
#include "image/dev.h"
#include "btrfs/block.h"
#include "btrfs/chunk.h"
#include "btrfs/path.h"

int bi_leafwalk_start(struct btrfsimg_fs *fs, struct bi_leafwalk *lw, const struct bi_root *root,
		      const bi_key *min, const bi_key *max,
		      bool (*skip)(const bi_key *lo, const bi_key *hi))
{
	bi_path_init(&lw->p, fs, root, max, false);
	lw->p.ra = BI_RA_RING;
	lw->p.skip = skip;
	lw->started = lw->done = false;
	int rc = bi_path_descend(&lw->p, min);
	if (rc < 0)
		lw->done = true;
	return rc;
}

int bi_leafwalk_next_ptr(struct bi_leafwalk *lw, struct bi_leaf_ptr *out)
{
	if (lw->done || lw->p.top == 0) {
		lw->done = true;
		return 0;
	}
	int rc = 1;
	bool first = !lw->started;
	if (lw->started)
		rc = bi_path_next_leaf(&lw->p);
	if (rc <= 0) {
		lw->done = true;
		return rc;
	}
	lw->started = true;
	bi_path_readahead(&lw->p);
	bi_node_ptr(lw->p.nodes[1], lw->p.slots[1], &out->first_key, &out->bytenr,
		    &out->generation);
	out->first = first;
	return 1;
}

void bi_leafwalk_end(struct bi_leafwalk *lw)
{
	if (!lw->p.fs)
		return;
	bi_path_release(&lw->p);
	lw->done = true;
}

int bi_leaf_where(struct btrfsimg_fs *fs, uint64_t logical, uint32_t len, const struct bi_dev **dev,
		  uint64_t *physical)
{
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
	struct bi_phys ph;
	if (!c || (bi_chunk_profile(c) & (BG_RAID5 | BG_RAID6)) ||
	    bi_chunk_map_phys(c, logical, 0, &ph) < 0 || ph.len < len ||
	    ph.stripe >= c->num_stripes)
		return -EINVAL;
	const struct bi_stripe *st = &c->stripes[ph.stripe];
	const struct bi_dev *d = bi_dev_by_id(fs, st->devid);
	if (!d || memcmp(d->dev_uuid, st->dev_uuid, 16) != 0)
		return -EINVAL;
	*dev = d;
	*physical = ph.physical;
	return 0;
}
