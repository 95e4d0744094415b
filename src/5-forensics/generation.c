// SPDX-License-Identifier: MIT
/*
 * --generation N: open the filesystem as generation N's root tree saw it.
 *
 * The open (3-btrfs/open.c) takes N's root from the superblock in use or
 * one of its backup roots. Older generations are found as `history` finds
 * them (history.c): a scan of the devices for tree blocks (fscan.c), then
 * the root-tree block a superblock copy names for N, else the
 * highest-level root-tree block written in N. The scan runs here, above
 * the open, reached through fs->gen_scan, so the btrfs core never calls
 * up a layer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "5-forensics/fscan.h"

#include "0-base/err.h"
#include "0-base/ondisk.h"
#include "3-btrfs/root.h"
#include "3-btrfs/tree.h"

/* "3, 5, 8" (the first few and the last) into @buf. */
static void list_gens(char *buf, size_t len, const uint64_t *g, size_t n)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++) {
		if (n > 12 && i == 10) {
			at += (size_t)snprintf(buf + at, len - at, ", ...");
			i = n - 1;
		}
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%" PRIu64, at ? ", " : "",
					       g[i]);
	}
	if (n == 0)
		snprintf(buf, len, "none");
}

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
int bi_fx_pick_root(struct btrfsimg_forensic *f, uint64_t gen, struct bi_root *out, char *how,
		    size_t howlen, bool report)
{
	size_t lo, hi;
	bi_fx_owner_range(f, OBJ_ROOT_TREE, &lo, &hi);
	for (size_t s = 0; s < f->nsroots; s++)
		for (size_t i = lo; i < hi; i++)
			if (f->sroots[s].generation == gen && f->blocks[i].generation == gen &&
			    f->blocks[i].bytenr == f->sroots[s].bytenr) {
				*out = (struct bi_root){ OBJ_ROOT_TREE, f->blocks[i].bytenr, gen,
							 f->blocks[i].level };
				snprintf(how, howlen, "found by scanning; a superblock copy names it");
				return 0;
			}
	struct bi_root top = { 0 };
	size_t ntop = 0; /* root-tree blocks of @gen at the highest level */
	for (int level = MAX_LEVEL - 1; level >= 0; level--) {
		size_t found = 0, tried = 0;
		for (size_t i = lo; i < hi; i++) {
			const struct bi_fx_block *b = &f->blocks[i];
			if (b->generation != gen || b->level != level)
				continue;
			struct bi_root c = { OBJ_ROOT_TREE, b->bytenr, gen, b->level };
			tried++;
			if (ntop == 0 || top.level == c.level)
				top = c, ntop++;
			if (!self_recorded(f->fs, &c))
				continue;
			if (found++ == 0)
				*out = c;
		}
		if (found == 1) {
			snprintf(how, howlen,
				 "found by scanning; %zu root-tree block%s of level %d, the one its "
				 "extent tree records",
				 tried, tried == 1 ? "" : "s", level);
			return 0;
		}
		if (found > 1) {
			snprintf(how, howlen,
				 "%zu root-tree blocks of level %d each recorded by their own extent "
				 "tree, have %zu expect 1",
				 found, level, found);
			return -ENOENT;
		}
	}
	if (ntop == 1 && report) {
		/* One block at the top: the root unless a copy of it written
		 * earlier in the transaction is all that is left. Its extent
		 * tree could not tell (no longer readable whole): read it, and
		 * say so as damage, for it may show less than the commit did. */
		*out = top;
		bi_damage(f->fs,
			  "generation %" PRIu64 ": root tree at logical %" PRIu64
			  " not confirmed by its extent tree (not readable whole); it may be a "
			  "copy written before the commit, showing less than the commit did",
			  gen, top.bytenr);
		snprintf(how, howlen, "found by scanning; the only root-tree block of level %u",
			 top.level);
		return 0;
	}
	snprintf(how, howlen, "no root-tree block of it recorded by its own extent tree");
	return -ENOENT;
}

static int scan_for_root(struct btrfsimg_fs *fs, uint64_t gen, struct bi_root *out)
{
	btrfsimg_forensic *f = NULL;
	/* the scan reads devices through the chunk map, which is loaded; the
	 * root tree is not used by it */
	fs->opened = true;
	int rc = btrfsimg_forensic_scan(fs, NULL, NULL, &f);
	fs->opened = false;
	if (rc < 0)
		return rc;
	uint64_t *gens = NULL;
	size_t ngens = 0;
	char how[128];
	rc = bi_fx_generations(f, &gens, &ngens);
	if (rc == 0)
		rc = bi_fx_pick_root(f, gen, out, how, sizeof(how), true);
	if (rc == 0) {
		snprintf(fs->gen_how, sizeof(fs->gen_how), "root tree at logical %" PRIu64 " (%s)",
			 out->bytenr, how);
	} else if (rc == -ENOENT) {
		char list[200];
		list_gens(list, sizeof(list), gens, ngens);
		bi_err(fs, rc,
		       "generation %" PRIu64 ": no root tree found (%s); history lists: %s", gen,
		       how, list);
	} else {
		bi_err(fs, rc, "generation %" PRIu64 ": out of memory", gen);
	}
	free(gens);
	btrfsimg_forensic_free(f);
	return rc;
}

int btrfsimg_set_generation(btrfsimg_fs *fs, uint64_t transid)
{
	if (!fs)
		return -EINVAL;
	if (fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_set_generation: the filesystem is open");
	fs->want_gen = transid;
	fs->gen_scan = transid ? scan_for_root : NULL;
	return 0;
}

const char *btrfsimg_generation_root(const btrfsimg_fs *fs, uint64_t *transid)
{
	if (!fs || !fs->opened || !fs->want_gen)
		return NULL;
	if (transid)
		*transid = fs->want_gen;
	return fs->gen_how;
}
