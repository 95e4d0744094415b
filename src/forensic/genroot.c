// SPDX-License-Identifier: MIT
/*
 * The root-tree root of a generation, among the blocks the forensic scan
 * indexed: what --generation reads (generation.c) and history shows
 * (history.c).
 *
 * A commit can write a root-tree block of its generation more than once
 * (written out during the transaction, then copied again on the next
 * change): the earlier copies are freed before the commit and show less
 * than it did, with valid checksums and the right generation. The extent
 * tree the commit wrote records the blocks allocated at the commit, so
 * the root is the one its own extent tree records.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "forensic/block_scan.h"

#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"

/* Whether @cand's own extent tree records @cand as an allocated tree
 * block. A commit can write a root-tree block of generation N more than
 * once (written out during the transaction, then copied again): the
 * earlier copies were freed before the commit, so only the root the
 * commit wrote is in the extent tree it names (skinny METADATA_ITEM
 * (bytenr, 169, level) or EXTENT_ITEM (bytenr, 168, nodesize)). Probing
 * a candidate is not damage of the filesystem read: the handle's damage
 * count and log are kept out of it. */
static bool self_recorded(struct btrfsimg_fs *fs, const struct bi_root *cand)
{
	struct bi_root saved = fs->root_tree, extent;
	btrfsimg_log_fn log = fs->log;
	uint64_t damage = fs->damage;
	fs->root_tree = *cand;
	fs->log = NULL;
	bool yes = false;
	if (bi_root_find(fs, OBJ_EXTENT_TREE, &extent) == 0) {
		bi_key min = { cand->bytenr, KT_EXTENT_ITEM, 0 };
		bi_key max = { cand->bytenr, KT_METADATA_ITEM, UINT64_MAX };
		struct bi_iter it;
		struct bi_item item;
		int rc = bi_iter_start(fs, &it, &extent, &min, &max);
		yes = rc == 0 && bi_iter_next(&it, &item) > 0;
		bi_iter_end(&it);
	}
	fs->root_tree = saved;
	fs->log = log;
	fs->damage = damage;
	fs->err[0] = '\0';
	return yes;
}

/* The root-tree root of @gen in the index: the block a superblock copy
 * names, else, level by level from the highest, the one root-tree block
 * of @gen that its own extent tree records, else the only one at the
 * highest level (reported as damage). @how says which, or what failed. */
/* The root-tree block of @gen a superblock copy names, if indexed. */
static bool named_root(const struct btrfsimg_forensic *f, uint64_t gen, size_t lo, size_t hi,
		       struct bi_root *out)
{
	for (size_t s = 0; s < f->nsroots; s++)
		for (size_t i = lo; i < hi; i++)
			if (f->sroots[s].generation == gen && f->blocks[i].generation == gen &&
			    f->blocks[i].bytenr == f->sroots[s].bytenr) {
				*out = (struct bi_root){ OBJ_ROOT_TREE, f->blocks[i].bytenr, gen,
							 f->blocks[i].level };
				return true;
			}
	return false;
}

/* The root-tree blocks of @gen at @level: how many there are (*tried),
 * how many their own extent tree records (the return), the first such in
 * *out and any one of them in *any. */
static size_t at_level(struct btrfsimg_forensic *f, uint64_t gen, int level, size_t lo, size_t hi,
		       size_t *tried, struct bi_root *out, struct bi_root *any)
{
	size_t found = 0;
	*tried = 0;
	for (size_t i = lo; i < hi; i++) {
		const struct bi_fx_block *b = &f->blocks[i];
		if (b->generation != gen || b->level != level)
			continue;
		struct bi_root c = { OBJ_ROOT_TREE, b->bytenr, gen, b->level };
		*any = c;
		++*tried;
		if (self_recorded(f->fs, &c) && found++ == 0)
			*out = c;
	}
	return found;
}

/* No block of @gen is recorded by its extent tree (that tree no longer
 * readable whole): the only block at the highest level is the root,
 * unless a copy written earlier in the transaction is all that is left.
 * It is read, and that said as damage: it may show less than the commit. */
static void unconfirmed(struct btrfsimg_forensic *f, uint64_t gen, const struct bi_root *r)
{
	bi_damage(f->fs,
		  "generation %" PRIu64 ": root tree at logical %" PRIu64
		  " not confirmed by its extent tree (not readable whole); it may be a copy "
		  "written before the commit, showing less than the commit did",
		  gen, r->bytenr);
}

int bi_fx_pick_root(struct btrfsimg_forensic *f, uint64_t gen, struct bi_root *out, char *how,
		    size_t howlen, bool report)
{
	size_t lo, hi, ntop = 0; /* ntop: blocks at the highest level with any */
	struct bi_root top = { 0 };
	bi_fx_owner_range(f, OBJ_ROOT_TREE, &lo, &hi);
	if (named_root(f, gen, lo, hi, out)) {
		snprintf(how, howlen, "found by scanning; a superblock copy names it");
		return 0;
	}
	for (int level = MAX_LEVEL - 1; level >= 0; level--) {
		size_t tried;
		struct bi_root any;
		size_t found = at_level(f, gen, level, lo, hi, &tried, out, &any);
		if (tried && !ntop)
			ntop = tried, top = any;
		if (found == 1) {
			snprintf(how, howlen,
				 "found by scanning; %zu root-tree block%s of level %d, the one "
				 "its extent tree records",
				 tried, tried == 1 ? "" : "s", level);
			return 0;
		}
		if (found > 1) {
			snprintf(how, howlen,
				 "root-tree blocks of level %d recorded by their own extent tree, "
				 "have %zu expect 1",
				 level, found);
			return -ENOENT;
		}
	}
	if (ntop == 1 && report) {
		*out = top;
		unconfirmed(f, gen, &top);
		snprintf(how, howlen, "found by scanning; the only root-tree block of level %u",
			 top.level);
		return 0;
	}
	snprintf(how, howlen, "no root-tree block of it recorded by its own extent tree");
	return -ENOENT;
}
