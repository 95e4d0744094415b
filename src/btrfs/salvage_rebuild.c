// SPDX-License-Identifier: MIT
/*
 * A subvolume tree whose root node is gone on every copy (a new
 * filesystem's first commits wrote over it), rebuilt in memory from the
 * blocks that survive below it (bi_salvage_rebuild_lost, see salvage.h).
 *
 * Only evidence decides which blocks were the tree's as of the lost
 * root's generation: the extent tree of that generation (or newer) records
 * every live tree block with its level, the generation it was written in
 * and a TREE_BLOCK_REF of its root. A stale copy of an older generation
 * is never recorded at its own address with that generation, so it is
 * never used. The blocks one level below the lost root that read (and
 * whose key ranges do not overlap) become the children of a node
 * synthesized at the root's address and pinned in the block cache; the
 * descent then checks each child as under any parent (level, generation,
 * first key). A recorded child that does not read takes its keys with it:
 * said, never invented. Without a readable extent tree nothing is rebuilt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "btrfs/salvage.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"

/* extent item: refs, generation, flags; tree blocks add (fat items) a
 * tree_block_info (key, level) before the inline references */
#define EXT_GENERATION 8
#define EXT_FLAGS 16
#define EXT_INLINE 24
#define EXT_TREE_INFO 18
#define EXT_FLAG_TREE_BLOCK 2ULL
#define REF_TREE_BLOCK 176
#define REF_SHARED_BLOCK 182

struct live_blk {
	uint64_t bytenr, generation;
	bi_key first, last;
};

struct rebuild {
	uint64_t tree;
	uint8_t level;		/* of the blocks wanted: the lost root's - 1 */
	struct live_blk *v;	/* read */
	size_t n, cap;
	size_t recorded, unread;
	size_t shared;		/* recorded with shared references only: whose is unknown */
	size_t max;		/* children a node holds */
};

/* Whether the inline references at @p (@len bytes) name tree @tree: 1,
 * 0 if not, 2 if they are shared references only (a snapshot's block,
 * whose trees the parents would tell). */
static int refs_name(const uint8_t *p, uint32_t len, uint64_t tree)
{
	bool shared = false, named = false;
	for (uint32_t o = 0; o + 9 <= len; o += 9) {
		if (p[o] == REF_TREE_BLOCK && bi_le64(p + o + 1) == tree)
			return 1;
		if (p[o] != REF_TREE_BLOCK && p[o] != REF_SHARED_BLOCK)
			break; /* a data reference: not a tree block's */
		shared |= p[o] == REF_SHARED_BLOCK;
		named |= p[o] == REF_TREE_BLOCK;
	}
	return shared && !named ? 2 : 0;
}

/* Read recorded block @bytenr as the extent tree says it is. */
static int take_block(struct btrfsimg_fs *fs, struct rebuild *rb, uint64_t bytenr, uint64_t gen)
{
	if (++rb->recorded > rb->max)
		return bi_err(fs, -EUCLEAN, "more than the %zu children a node holds", rb->max);
	struct bi_expect e = { .owner = rb->tree, .generation = gen, .level = rb->level };
	struct bi_block *b;
	if (bi_block_read(fs, bytenr, &e, &b) < 0 || !b->nritems) {
		if (b)
			bi_block_put(fs, b);
		rb->unread++;
		return 0;
	}
	if (bi_grow((void **)&rb->v, &rb->cap, rb->n + 1, sizeof(*rb->v))) {
		bi_block_put(fs, b);
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	}
	struct live_blk *l = &rb->v[rb->n++];
	l->bytenr = bytenr;
	l->generation = gen;
	bi_key_read(b->data + HDR_SIZE, &l->first);
	size_t step = b->level ? KP_SIZE : ITEM_SIZE;
	bi_key_read(b->data + HDR_SIZE + (size_t)(b->nritems - 1) * step, &l->last);
	bi_block_put(fs, b);
	return 0;
}

/* One extent-tree item: a live block of tree @rb->tree at the level
 * wanted is read. */
static int extent_item(struct btrfsimg_fs *fs, struct rebuild *rb, const struct bi_item *it)
{
	uint32_t inl = EXT_INLINE;
	uint8_t level;
	if (it->key.type == KT_METADATA_ITEM) {
		level = (uint8_t)it->key.offset;
	} else if (it->key.type == KT_EXTENT_ITEM && it->size >= EXT_INLINE + EXT_TREE_INFO &&
		   (bi_le64(it->data + EXT_FLAGS) & EXT_FLAG_TREE_BLOCK)) {
		level = it->data[EXT_INLINE + 17];
		inl += EXT_TREE_INFO;
	} else {
		return 0;
	}
	int named = level == rb->level && it->size >= inl ?
			    refs_name(it->data + inl, it->size - inl, rb->tree) : 0;
	rb->shared += named == 2;
	if (named != 1)
		return 0;
	return take_block(fs, rb, it->key.objectid, bi_le64(it->data + EXT_GENERATION));
}

static int live_cmp(const void *pa, const void *pb)
{
	const struct live_blk *a = pa, *b = pb;
	return bi_key_cmp(&a->first, &b->first);
}

/* The blocks one level below @r that extent tree @ext records for it. */
static int collect(struct btrfsimg_fs *fs, const struct bi_root *ext, struct rebuild *rb)
{
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, ext, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = extent_item(fs, rb, &item);
	bi_iter_end(&it);
	if (rc < 0)
		return rc;
	if (rb->n > 1)
		qsort(rb->v, rb->n, sizeof(*rb->v), live_cmp);
	for (size_t i = 1; i < rb->n; i++)
		if (bi_key_cmp(&rb->v[i - 1].last, &rb->v[i].first) >= 0)
			return bi_err(fs, -EUCLEAN,
				      "tree %" PRIu64 ": recorded blocks %" PRIu64 " and %" PRIu64
				      " overlap in keys: no one tree to rebuild",
				      rb->tree, rb->v[i - 1].bytenr, rb->v[i].bytenr);
	return 0;
}

/* The node that was at @r: its header from a child's (fsid, chunk tree
 * uuid), its pointers the children's first keys. */
static uint8_t *synth_node(struct btrfsimg_fs *fs, const struct bi_root *r,
			   const struct rebuild *rb)
{
	uint8_t *buf = calloc(1, fs->nodesize);
	struct bi_block *c;
	struct bi_expect e = { .owner = rb->tree, .generation = rb->v[0].generation,
			       .level = rb->level };
	if (!buf || bi_block_read(fs, rb->v[0].bytenr, &e, &c) < 0) {
		free(buf);
		return NULL;
	}
	memcpy(buf + HDR_FSID, c->data + HDR_FSID, HDR_GENERATION - HDR_FSID);
	bi_block_put(fs, c);
	bi_put_le64(buf + HDR_BYTENR, r->bytenr);
	bi_put_le64(buf + HDR_GENERATION, r->generation);
	bi_put_le64(buf + HDR_OWNER, rb->tree);
	bi_put_le32(buf + HDR_NRITEMS, (uint32_t)rb->n);
	buf[HDR_LEVEL] = r->level;
	for (size_t i = 0; i < rb->n; i++) {
		uint8_t *kp = buf + HDR_SIZE + i * KP_SIZE;
		bi_put_le64(kp, rb->v[i].first.objectid);
		kp[8] = rb->v[i].first.type;
		bi_put_le64(kp + 9, rb->v[i].first.offset);
		bi_put_le64(kp + KP_BLOCKPTR, rb->v[i].bytenr);
		bi_put_le64(kp + KP_GENERATION, rb->v[i].generation);
	}
	return buf;
}

static int rebuild_tree(struct btrfsimg_fs *fs, const struct bi_root *r, const char *why)
{
	struct bi_root ext;
	struct rebuild rb = { .tree = r->id, .level = (uint8_t)(r->level - 1),
			      .max = (fs->nodesize - HDR_SIZE) / KP_SIZE };
	int rc = bi_root_find(fs, OBJ_EXTENT_TREE, &ext);
	if (rc == 0 && ext.generation < r->generation)
		rc = bi_err(fs, -ENOENT, "the extent tree (generation %" PRIu64 ") is older than "
			    "the tree (generation %" PRIu64 ")", ext.generation, r->generation);
	if (rc == 0)
		rc = collect(fs, &ext, &rb);
	if (rc == 0 && !rb.n)
		rc = bi_err(fs, -ENOENT, "the extent tree of generation %" PRIu64 " records no "
			    "readable block of level %u for it", ext.generation, rb.level);
	uint8_t *buf = rc == 0 ? synth_node(fs, r, &rb) : NULL;
	if (buf)
		rc = bi_block_pin_synthetic(fs, buf, fs->nodesize);
	else if (rc == 0)
		rc = bi_err(fs, -ENOMEM, "salvage: out of memory");
	if (rc == 0)
		bi_damage(fs,
			  "tree %" PRIu64 ": root node at logical %" PRIu64 " overwritten (%s); "
			  "rebuilt from %zu live blocks of level %u the extent tree of generation "
			  "%" PRIu64 " records; %zu recorded blocks unreadable, their keys lost; "
			  "%zu blocks of that level with shared references only not used",
			  r->id, r->bytenr, why, rb.n, rb.level, ext.generation, rb.unread,
			  rb.shared);
	free(rb.v);
	return rc;
}

static bool subvolume_tree(uint64_t id)
{
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE);
}

/* Tree @id: its root node read, else rebuilt when the evidence allows;
 * else left as it was (the walk then says why it cannot read it). */
static int check_tree(struct btrfsimg_fs *fs, uint64_t id)
{
	struct bi_root r;
	if (bi_root_find(fs, id, &r) < 0)
		return 0;
	struct bi_expect e = { .owner = id, .generation = r.generation, .level = r.level };
	struct bi_block *b;
	char why[sizeof(fs->err)];
	if (bi_block_read(fs, r.bytenr, &e, &b) == 0) {
		bi_block_put(fs, b);
		return 0;
	}
	snprintf(why, sizeof(why), "%s", fs->err);
	if (r.level && rebuild_tree(fs, &r, why) == 0)
		return 0;
	char no_records[sizeof(fs->err)];
	snprintf(no_records, sizeof(no_records), "%s", r.level ? fs->err : "a leaf");
	if (bi_salvage_leaves(fs, &r, why, no_records) == 0) /* without extent records */
		return 0;
	if (r.level)
		bi_damage(fs, "tree %" PRIu64 ": root node at logical %" PRIu64 " unreadable; "
			  "not rebuilt from the blocks below it: %s", id, r.bytenr, fs->err);
	snprintf(fs->err, sizeof(fs->err), "%s", why); /* the walk's error names the block */
	return 0;
}

int bi_salvage_rebuild_lost(struct btrfsimg_fs *fs)
{
	bi_key min = { 0, KT_ROOT_ITEM, 0 }, max = { UINT64_MAX, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint64_t *ids = NULL, prev = UINT64_MAX;
	size_t n = 0, ids_cap = 0;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type != KT_ROOT_ITEM || item.key.objectid == prev ||
		    !subvolume_tree(item.key.objectid))
			continue;
		prev = item.key.objectid;
		if (bi_grow((void **)&ids, &ids_cap, n + 1, sizeof(*ids))) {
			rc = bi_err(fs, -ENOMEM, "salvage: out of memory");
			break;
		}
		ids[n++] = prev;
	}
	bi_iter_end(&it);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = check_tree(fs, ids[i]);
	if (rc == 0) /* the data checksums, without which no extent is shown */
		rc = check_tree(fs, OBJ_CSUM_TREE);
	free(ids);
	return rc < 0 ? rc : 0;
}
