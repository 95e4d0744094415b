// SPDX-License-Identifier: MIT
/*
 * Salvage of the root tree (bi_salvage_root, see salvage.h): the newest
 * root-tree root that reads whole, from the backup roots and the scan, and
 * for each tree a newer root the scan found when it verifies. Apart from
 * salvage_chunks.c because it stands on the map that one rebuilds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "btrfs/salvage.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/salvage_roottree.h"
#include "btrfs/salvage_scan.h"
#include "btrfs/tree.h"
#include "btrfs/tree_checker.h"
#include "image/dev.h"

/* root-tree candidates tried before giving up (each read whole) */
#define MAX_ROOT_TRIES 32

/* ------------------------------------------------------------ the root tree */

struct root_cand {
	uint64_t bytenr, generation;
	uint8_t level;
	int backup; /* superblock backup root index, or -1: the scan */
};

int bi_salvage_root_tree_whole(struct btrfsimg_fs *fs, const struct bi_root *r)
{
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	size_t n = 0;
	bool fs_tree = false;
	int rc = bi_iter_start(fs, &it, r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		n++;
		fs_tree |= item.key.objectid == OBJ_FS_TREE && item.key.type == KT_ROOT_ITEM;
		rc = 0;
	}
	bi_iter_end(&it);
	if (rc == 0 && !fs_tree)
		rc = bi_err(fs, -EUCLEAN, "root tree at %" PRIu64 ": no ROOT_ITEM of tree 5",
			    r->bytenr);
	return rc;
}

static size_t root_cands(struct btrfsimg_fs *fs, struct root_cand *v, size_t max)
{
	size_t n = 0;
	uint64_t cap = fs->salvage_super ? UINT64_MAX : fs->sb.info.generation;
	for (int b = 0; !fs->salvage_super && b < BACKUP_ROOTS && n < max; b++) {
		const uint8_t *p = fs->sb.raw + SB_SUPER_ROOTS + (size_t)b * BACKUP_SIZE;
		if (bi_le64(p) && bi_le64(p + 8) <= cap && p[BACKUP_TREE_LEVEL] < MAX_LEVEL)
			v[n++] = (struct root_cand){ bi_le64(p), bi_le64(p + 8), p[BACKUP_TREE_LEVEL],
						     b };
	}
	const struct bi_sv_scan *s = fs->scan;
	size_t lo, hi;
	bi_salvage_owner_range(s, fs->salvage_fsidx, OBJ_ROOT_TREE, &lo, &hi);
	uint64_t last = 0;
	for (size_t i = lo; i < hi && n < max; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		if (b->generation == last || b->generation > cap)
			continue; /* the highest level of each generation: its root */
		last = b->generation;
		v[n++] = (struct root_cand){ b->bytenr, b->generation, b->level, -1 };
	}
	return n;
}

static int rc_cmp(const void *pa, const void *pb)
{
	const struct root_cand *a = pa, *b = pb;
	if (a->generation != b->generation)
		return a->generation > b->generation ? -1 : 1;
	return (a->backup < 0) - (b->backup < 0); /* a backup root first */
}

/* Whether extent tree @ext records tree block @bytenr of @level (skinny
 * METADATA_ITEM or EXTENT_ITEM): a block freed since is not recorded. */
static bool recorded(struct btrfsimg_fs *fs, const struct bi_root *ext, uint64_t bytenr,
		     uint8_t level)
{
	bi_key skinny = { bytenr, KT_METADATA_ITEM, level }, fat = { bytenr, KT_EXTENT_ITEM,
								      fs->nodesize };
	return bi_tree_get(fs, ext, &skinny, NULL, NULL) == 0 ||
	       bi_tree_get(fs, ext, &fat, NULL, NULL) == 0;
}

/* Of the candidates [i, j) (one generation, highest level), the root:
 * the only one that reads, else the one the extent tree records (for the
 * extent tree itself: the one recording itself). NULL if none or several. */
static const struct bi_sv_blk *pick_of_gen(struct btrfsimg_fs *fs, uint64_t id, size_t i,
					   size_t j)
{
	const struct bi_sv_blk *v = fs->scan->blk, *pick = NULL, *ok = NULL;
	size_t nok = 0;
	for (size_t k = i; k < j; k++) {
		if (ok && v[k].bytenr == ok->bytenr)
			continue; /* another copy */
		struct bi_expect e = { .owner = id, .generation = v[k].generation,
				       .level = v[k].level };
		struct bi_block *blk;
		if (bi_block_read(fs, v[k].bytenr, &e, &blk) < 0)
			continue;
		bi_block_put(fs, blk);
		ok = &v[k];
		nok++;
		struct bi_root self = { id, v[k].bytenr, v[k].generation, v[k].level }, ext;
		if (id == OBJ_EXTENT_TREE)
			ext = self;
		else if (bi_root_find(fs, OBJ_EXTENT_TREE, &ext) < 0)
			continue;
		if (recorded(fs, &ext, v[k].bytenr, v[k].level)) {
			if (pick && pick->bytenr != v[k].bytenr)
				return NULL; /* two recorded: no evidence */
			pick = &v[k];
		}
	}
	return nok == 1 ? ok : pick;
}

static int push_root(struct btrfsimg_fs *fs, uint64_t id, const struct bi_sv_blk *b)
{
	struct bi_root *v = realloc(fs->salvage_roots, (fs->nsalvage_roots + 1) * sizeof(*v));
	if (!v)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	fs->salvage_roots = v;
	v[fs->nsalvage_roots++] = (struct bi_root){ id, b->bytenr, b->generation, b->level };
	return 0;
}

static int keep_root(struct btrfsimg_fs *fs, uint64_t id, uint64_t named,
		     const struct bi_sv_blk *b)
{
	int rc = push_root(fs, id, b);
	if (rc == 0)
		bi_damage(fs,
			  "root tree of generation %" PRIu64 " names tree %" PRIu64 " of generation %"
			  PRIu64 "; its root of generation %" PRIu64 " found by scanning is read "
			  "instead", fs->root_tree.generation, id, named, b->generation);
	return rc;
}

/* Tree @id's newest root the scan found that verifies, newer than the
 * @named generation the root tree gives and at most @newest; NULL if none. */
static const struct bi_sv_blk *scanned_root(struct btrfsimg_fs *fs, uint64_t id, uint64_t named,
					    uint64_t newest)
{
	size_t lo, hi;
	bi_salvage_owner_range(fs->scan, fs->salvage_fsidx, id, &lo, &hi);
	const struct bi_sv_blk *v = fs->scan->blk;
	for (size_t i = lo; i < hi && v[i].generation > named;) {
		size_t j = i;
		while (j < hi && v[j].generation == v[i].generation && v[j].level == v[i].level)
			j++;
		const struct bi_sv_blk *b = v[i].generation <= newest ? pick_of_gen(fs, id, i, j)
								      : NULL;
		if (b)
			return b;
		while (j < hi && v[j].generation == v[i].generation)
			j++; /* lower levels of the same generation */
		i = j;
	}
	return NULL;
}

static int newer_root(struct btrfsimg_fs *fs, uint64_t id, uint64_t named, uint64_t newest)
{
	const struct bi_sv_blk *b = scanned_root(fs, id, named, newest);
	return b ? keep_root(fs, id, named, b) : 0;
}

/* For each tree the chosen root tree names, in id order (the extent tree,
 * which the others' evidence comes from, first), a newer root found by
 * the scan. */
static int newer_tree_roots(struct btrfsimg_fs *fs, uint64_t newest)
{
	bi_key min = { 0, KT_ROOT_ITEM, 0 }, max = { UINT64_MAX, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint64_t prev = UINT64_MAX;
	struct {
		uint64_t id, gen;
	} *named = NULL;
	size_t n = 0;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type != KT_ROOT_ITEM || item.size < RI_LEVEL + 1 ||
		    item.key.objectid == prev)
			continue;
		prev = item.key.objectid;
		void *w = realloc(named, (n + 1) * sizeof(*named));
		if (!w) {
			rc = bi_err(fs, -ENOMEM, "salvage: out of memory");
			break;
		}
		named = w;
		named[n].id = item.key.objectid;
		named[n++].gen = bi_le64(item.data + RI_GENERATION);
	}
	bi_iter_end(&it);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = newer_root(fs, named[i].id, named[i].gen, newest);
	free(named);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------ its lost blocks */

/* The extent tree's root for the rebuild of root tree @rt (NULL: none
 * known): its ROOT_ITEM when that reads (0), else the newest root the scan
 * found that verifies and records itself, kept in fs->salvage_roots (1). */
static int extent_root(struct btrfsimg_fs *fs, const struct bi_root *rt, uint64_t newest,
		       struct bi_root *ext)
{
	if (rt && bi_root_find(fs, OBJ_EXTENT_TREE, ext) == 0)
		return 0;
	const struct bi_sv_blk *b = scanned_root(fs, OBJ_EXTENT_TREE, 0, newest);
	if (!b)
		return bi_err(fs, -ENOENT, "no root of the extent tree found by scanning verifies");
	*ext = (struct bi_root){ OBJ_EXTENT_TREE, b->bytenr, b->generation, b->level };
	int rc = push_root(fs, OBJ_EXTENT_TREE, b);
	return rc < 0 ? rc : 1;
}

/* A ROOT_ITEM taken from a scanned leaf (@i of @res): the root it names
 * must verify (a forged leaf names what does not), else the tree's newest
 * root the scan found that verifies is read; one known only as of an
 * older generation than its lost leaf's, a newer root the scan found. */
static int check_taken(struct btrfsimg_fs *fs, const struct bi_rt_result *res, size_t i,
		       uint64_t newest)
{
	uint64_t id = res->taken[i].id, named = res->taken[i].generation;
	struct bi_expect e = { .owner = id, .generation = named, .level = res->taken[i].level };
	struct bi_block *blk;
	int rc = bi_block_read(fs, res->taken[i].bytenr, &e, &blk);
	if (rc == 0 && blk->owner != id) /* the reader leaves owners to the walks */
		rc = bi_err(fs, -EUCLEAN, "owner: have %" PRIu64 " expect %" PRIu64, blk->owner, id);
	if (blk)
		bi_block_put(fs, blk);
	if (rc == 0)
		return res->taken[i].as_of < res->taken[i].lost ? newer_root(fs, id, named, newest)
								 : 0;
	const struct bi_sv_blk *b = scanned_root(fs, id, 0, newest);
	bi_damage(fs, "root tree: the ROOT_ITEM of tree %" PRIu64 " taken from a scanned leaf "
		  "names a root at logical %" PRIu64 " (generation %" PRIu64 ") that does not "
		  "verify (%s); %s", id, res->taken[i].bytenr, named, fs->err,
		  b ? "its newest root found by scanning that verifies is read instead" :
		      "no root of it found by scanning verifies");
	return b ? push_root(fs, id, b) : 0;
}

/* Rebuilt root tree @res read from now on: said, and the roots its
 * ROOT_ITEMs from scanned leaves name checked. */
static int use_rebuilt(struct btrfsimg_fs *fs, const struct bi_rt_result *res,
		       const struct bi_root *ext, bool ext_scanned, uint64_t newest)
{
	fs->root_tree = res->root;
	if (ext_scanned)
		bi_damage(fs, "root tree: the extent tree's ROOT_ITEM unreadable; its root of "
			  "generation %" PRIu64 " at logical %" PRIu64 " found by scanning is read "
			  "instead", ext->generation, ext->bytenr);
	if (fs->salvage_super) {
		fs->sb.info.generation = res->root.generation;
		fs->sb.info.root = res->root.bytenr;
		fs->sb.info.root_level = res->root.level;
	}
	bi_damage(fs, "root tree of generation %" PRIu64 " at logical %" PRIu64 " read with %zu "
		  "nodes and %zu leaves rebuilt (%zu ROOT_ITEMs known only from older leaves), not "
		  "rolled back to an older root tree", res->root.generation, res->root.bytenr,
		  res->nodes, res->leaves, res->nolder);
	int rc = 0;
	for (size_t i = 0; rc >= 0 && i < res->ntaken && i < BI_RT_TAKEN; i++)
		rc = check_taken(fs, res, i, newest);
	return rc;
}

/* The newest root tree (the superblock's; none when it was rebuilt) of two
 * or more levels with its lost blocks rebuilt (salvage_roottree.c), so
 * that the open is not rolled back to an older root tree: 1 when it reads
 * whole then, 0 when not (the older candidates are tried), or -ENOMEM. */
static int rebuilt_root_tree(struct btrfsimg_fs *fs, uint64_t newest)
{
	struct bi_root sb = { OBJ_ROOT_TREE, fs->sb.info.root, fs->sb.info.generation,
			      fs->sb.info.root_level }, ext, was = fs->root_tree;
	const struct bi_root *rt = fs->salvage_super ? NULL : &sb;
	if (rt && !rt->level)
		return 0; /* one leaf: nothing above it to rebuild from */
	size_t nroots = fs->nsalvage_roots;
	struct bi_rt_result *res = calloc(1, sizeof(*res));
	if (!res)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	if (rt)
		fs->root_tree = *rt; /* where the extent tree's ROOT_ITEM is looked up */
	int rc = extent_root(fs, rt, newest, &ext);
	bool ext_scanned = rc == 1;
	if (rc >= 0)
		rc = bi_salvage_roottree(fs, rt, &ext, res);
	if (rc > 0 && bi_salvage_root_tree_whole(fs, &res->root) < 0) {
		bi_damage(fs, "root tree of generation %" PRIu64 " at logical %" PRIu64 ": still "
			  "not whole after its lost blocks were rebuilt: %s", res->root.generation,
			  res->root.bytenr, fs->err);
		rc = 0;
	}
	bool ok = rc > 0;
	if (ok) {
		rc = use_rebuilt(fs, res, &ext, ext_scanned, newest);
	} else {
		fs->root_tree = was;
		fs->nsalvage_roots = nroots;
		rc = rc == -ENOMEM ? rc : 0;
	}
	free(res);
	return rc < 0 ? rc : ok;
}

int bi_salvage_root(struct btrfsimg_fs *fs)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", fs->err);
	int rc = bi_salvage_scan(fs);
	if (rc < 0)
		return rc;
	struct root_cand v[MAX_ROOT_TRIES + BACKUP_ROOTS];
	size_t n = root_cands(fs, v, sizeof(v) / sizeof(*v));
	if (n > 1)
		qsort(v, n, sizeof(*v), rc_cmp);
	uint64_t newest = 0, lost = fs->root_tree.generation;
	for (size_t i = 0; i < n; i++)
		newest = v[i].generation > newest ? v[i].generation : newest;
	if (!fs->salvage_super && fs->sb.info.generation > newest)
		newest = fs->sb.info.generation;
	rc = newest ? rebuilt_root_tree(fs, newest) : 0;
	if (rc != 0)
		return rc < 0 ? rc : bi_salvage_rebuild_lost(fs);
	size_t tried = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && v[i].bytenr == v[i - 1].bytenr && v[i].generation == v[i - 1].generation)
			continue;
		struct bi_root r = { OBJ_ROOT_TREE, v[i].bytenr, v[i].generation, v[i].level };
		tried++;
		if (bi_salvage_root_tree_whole(fs, &r) < 0)
			continue;
		fs->root_tree = r;
		if (fs->salvage_super) {
			fs->sb.info.generation = r.generation;
			fs->sb.info.root = r.bytenr;
			fs->sb.info.root_level = r.level;
		}
		if (tried > 1 || !fs->salvage_super) {
			char from[48] = "found by scanning";
			if (v[i].backup >= 0)
				snprintf(from, sizeof(from), "backup root %d", v[i].backup);
			bi_damage(fs,
				  "root tree unreadable (%s%s): root tree of generation %" PRIu64
				  " at logical %" PRIu64 " (%s) used instead; %zu newer candidates "
				  "did not read whole",
				  fs->salvage_super ? "the newest found" : was,
				  fs->salvage_super ? "" : "", r.generation, r.bytenr, from, tried - 1);
		} else {
			bi_damage(fs, "root tree of generation %" PRIu64 " at logical %" PRIu64
				  " (the newest found)", r.generation, r.bytenr);
		}
		/* an older root tree, or another of the newest generation (one the
		 * commit wrote and freed): its trees may have newer roots */
		rc = r.generation < newest || tried > 1 ? newer_tree_roots(fs, newest) : 0;
		return rc < 0 ? rc : bi_salvage_rebuild_lost(fs);
	}
	return bi_err(fs, -EUCLEAN,
		      "root tree unreadable (generation %" PRIu64 "): none of %zu candidates from "
		      "the backup roots and the scan reads whole",
		      lost, tried);
}
