// SPDX-License-Identifier: MIT
/*
 * The root tree's own lost blocks rebuilt in memory (bi_salvage_roottree,
 * salvage_roottree.h). A root tree of two or more levels (a few dozen
 * subvolumes at 4 KiB nodes: a ROOT_ITEM is 439 bytes) that lost one
 * node or leaf on every copy no longer reads whole; without this the open
 * falls back to an older root tree, older generations of every tree.
 *
 * The root tree is walked from its root. A node that reads on no copy is
 * replaced by one synthesized at its address and pinned in the block
 * cache, whose children are the blocks the extent tree records for tree 1
 * (TREE_BLOCK_REF 1: root-tree blocks are never shared) one level below
 * it, no newer than it, that read and whose keys lie in the node's range
 * (its parent's slot, bounded by the next slot's key); two of them whose
 * keys overlap refuse the node (one is forged). A lost child among them
 * (recorded, unreadable) is rebuilt over a gap between its readable
 * siblings, where its keys were.
 *
 * A leaf that reads on no copy is rebuilt from the root-tree leaves the
 * salvage scan found (it keeps every root-tree block): those no newer
 * than the lost leaf, newest generation first; of each, the items inside
 * the lost leaf's key range that no newer leaf's key span covers (a key a
 * newer leaf spans but lacks was deleted by then, and an older copy of a
 * key it holds is stale). A leaf newer than the lost one (a forgery, or
 * a later filesystem) is never used, nor a block of another owner. A
 * ROOT_ITEM taken from a leaf older than the lost one is said with that
 * generation, and the caller then looks for its tree's newer root by
 * scanning (salvage_roots.c).
 *
 * Work is bounded: levels only go down, a node is walked once, a recorded
 * block is a child once, at most RT_READS scanned leaves are read for
 * their key spans and at most RT_OVERLAP of them weighed per lost leaf.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage_roottree.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "base/search.h"
#include "btrfs/block.h"
#include "btrfs/salvage.h"
#include "btrfs/salvage_scan.h"
#include "btrfs/tree.h"

/* extent item (btrfs_tree.h): refs, generation, flags, then for a fat
 * EXTENT_ITEM a tree_block_info (key, level), then inline references of
 * a type byte and (for tree blocks) a u64 */
#define XI_GENERATION 8
#define XI_FLAGS 16
#define XI_REFS 24
#define XI_TREE_INFO 18
#define XI_TREE_BLOCK 2ULL
#define XREF_TREE_BLOCK 176
#define XREF_SHARED_BLOCK 182
#define XREF_OWNER 172
/* scanned leaves read at most to index their key spans */
#define RT_READS 65536u
/* of them, holding keys of one lost leaf's range, weighed at most (newest
 * first): each item is checked against the spans of those before it */
#define RT_OVERLAP 256u
/* recorded root-tree blocks at most (a root tree of 2^20 blocks is 16 GiB
 * of ROOT_ITEMs at 16 KiB nodes) */
#define RT_RECS (1u << 20)

struct rt_rec {
	uint64_t bytenr, generation;
	uint8_t level;
	bool used;
};

struct rt_item {
	bi_key key;
	uint8_t *data;
	uint32_t size;
	uint64_t as_of;		/* generation of the leaf it came from */
	uint64_t from;		/* that leaf's address */
};

struct span {
	bi_key lo, hi;		/* inclusive */
};

/* A root-tree leaf the scan found that reads: where, and its keys. */
struct sleaf {
	uint64_t bytenr, generation;
	bi_key first, last;
};

struct rt {
	struct btrfsimg_fs *fs;
	struct bi_root ext;
	struct rt_rec *rec;
	size_t nrec, rec_cap;
	uint64_t *seen;
	size_t nseen, seen_cap;
	uint8_t ids[HDR_GENERATION - HDR_FSID];	/* fsid .. chunk tree uuid */
	bool have_ids;
	struct sleaf *sl;	/* the scan's root-tree leaves, newest first */
	size_t nsl, sl_cap;
	bool indexed;
	struct bi_rt_result *out;
};

/* Keys [lo, hi) (hi unbounded when !bounded). */
struct krange {
	bi_key lo, hi;
	bool bounded;
};

/* ------------------------------------------------------------ records */

/* Whether the inline references @p[0..len) name tree 1 by TREE_BLOCK_REF. */
static bool names_root_tree(const uint8_t *p, uint32_t len)
{
	for (uint32_t o = 0; o + 9 <= len; o += 9) {
		if (p[o] == XREF_TREE_BLOCK && bi_le64(p + o + 1) == OBJ_ROOT_TREE)
			return true;
		if (p[o] != XREF_TREE_BLOCK && p[o] != XREF_SHARED_BLOCK && p[o] != XREF_OWNER)
			return false; /* a data reference: no tree block's */
	}
	return false;
}

static int rec_add(struct rt *t, uint64_t bytenr, uint64_t gen, uint8_t level)
{
	if (t->nrec >= RT_RECS)
		return bi_err(t->fs, -E2BIG, "salvage: more than %u root-tree blocks recorded",
			      RT_RECS);
	if (bi_grow((void **)&t->rec, &t->rec_cap, t->nrec + 1, sizeof(*t->rec)))
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	t->rec[t->nrec++] = (struct rt_rec){ bytenr, gen, level, false };
	return 0;
}

/* One extent-tree item: a tree block whose references name tree 1 inline,
 * or a keyed TREE_BLOCK_REF 1 of the record before it (@last). */
static int extent_rec(struct rt *t, const struct bi_item *it, struct rt_rec *last)
{
	const uint8_t *d = it->data;
	if (it->key.type == XREF_TREE_BLOCK && it->key.offset == OBJ_ROOT_TREE && last &&
	    last->bytenr == it->key.objectid && !last->used) {
		last->used = true; /* the record now counts */
		return 0;
	}
	bool skinny = it->key.type == KT_METADATA_ITEM;
	uint32_t refs = XI_REFS + (skinny ? 0 : XI_TREE_INFO);
	if ((!skinny && it->key.type != KT_EXTENT_ITEM) || it->size < refs ||
	    !(bi_le64(d + XI_FLAGS) & XI_TREE_BLOCK))
		return 0;
	uint64_t level = skinny ? it->key.offset : d[XI_REFS + 17];
	if (level >= MAX_LEVEL)
		return 0;
	int rc = rec_add(t, it->key.objectid, bi_le64(d + XI_GENERATION), (uint8_t)level);
	if (rc == 0)
		t->rec[t->nrec - 1].used = names_root_tree(d + refs, it->size - refs);
	return rc;
}

static int rec_cmp(const void *pa, const void *pb)
{
	const struct rt_rec *a = pa, *b = pb;
	return a->bytenr < b->bytenr ? -1 : a->bytenr > b->bytenr;
}

/* Every tree block the extent tree records for tree 1, by address; `used`
 * cleared for the walk. A record without a reference to tree 1 (marked
 * not used while collecting) is dropped. */
static int load_records(struct rt *t)
{
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(t->fs, &it, &t->ext, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		if (t->nrec && t->rec[t->nrec - 1].bytenr != item.key.objectid &&
		    !t->rec[t->nrec - 1].used)
			t->nrec--; /* the previous block is no root-tree block */
		rc = extent_rec(t, &item, t->nrec ? &t->rec[t->nrec - 1] : NULL);
	}
	bi_iter_end(&it);
	if (rc < 0)
		return rc;
	if (t->nrec && !t->rec[t->nrec - 1].used)
		t->nrec--;
	if (t->nrec > 1)
		qsort(t->rec, t->nrec, sizeof(*t->rec), rec_cmp);
	for (size_t i = 0; i < t->nrec; i++)
		t->rec[i].used = false;
	return 0;
}

static struct rt_rec *rec_at(struct rt *t, uint64_t bytenr)
{
	size_t a = bi_lower_bound_field(t->rec, t->nrec, sizeof(*t->rec),
					offsetof(struct rt_rec, bytenr), bytenr);
	return a < t->nrec && t->rec[a].bytenr == bytenr ? &t->rec[a] : NULL;
}

/* With no superblock: the root is the one recorded block of the highest
 * level (the newest of it); two alike are no evidence. */
static int root_of_records(struct rt *t, struct bi_root *r)
{
	const struct rt_rec *top = NULL;
	size_t ties = 0;
	for (size_t i = 0; i < t->nrec; i++) {
		const struct rt_rec *c = &t->rec[i];
		if (top && (c->level < top->level ||
			    (c->level == top->level && c->generation < top->generation)))
			continue;
		ties = top && c->level == top->level && c->generation == top->generation ? ties + 1
											  : 0;
		top = c;
	}
	if (!top || ties)
		return bi_err(t->fs, -EUCLEAN, "the extent tree of generation %" PRIu64 " records "
			      "%s root-tree block of the highest level", t->ext.generation,
			      top ? "more than one" : "no");
	*r = (struct bi_root){ OBJ_ROOT_TREE, top->bytenr, top->generation, top->level };
	return 0;
}

/* ------------------------------------------------------------ helpers */

static bool in_krange(const struct krange *r, const bi_key *k)
{
	return bi_key_cmp(k, &r->lo) >= 0 && (!r->bounded || bi_key_cmp(k, &r->hi) < 0);
}

/* The key right after @k; false past the last key there is. */
static bool key_after(const bi_key *k, bi_key *out)
{
	*out = *k;
	if (++out->offset)
		return true;
	if (++out->type)
		return true;
	out->type = 0;
	return ++out->objectid != 0;
}

static void keep_ids(struct rt *t, const struct bi_block *b)
{
	if (!t->have_ids && !b->synthetic) {
		memcpy(t->ids, b->data + HDR_FSID, sizeof(t->ids));
		t->have_ids = true;
	}
}

static uint8_t *block_new(struct rt *t, uint64_t bytenr, uint64_t gen, uint8_t level, uint32_t n)
{
	uint8_t *buf = calloc(1, t->fs->nodesize);
	if (!buf)
		return NULL;
	memcpy(buf + HDR_FSID, t->ids, sizeof(t->ids));
	bi_put_le64(buf + HDR_BYTENR, bytenr);
	bi_put_le64(buf + HDR_GENERATION, gen);
	bi_put_le64(buf + HDR_OWNER, OBJ_ROOT_TREE);
	bi_put_le32(buf + HDR_NRITEMS, n);
	buf[HDR_LEVEL] = level;
	return buf;
}

static void key_put(uint8_t *p, const bi_key *k)
{
	bi_put_le64(p, k->objectid);
	p[8] = k->type;
	bi_put_le64(p + 9, k->offset);
}

static void block_keys(const struct bi_block *b, bi_key *first, bi_key *last)
{
	size_t step = b->level ? KP_SIZE : ITEM_SIZE;
	bi_key_read(b->data + HDR_SIZE, first);
	bi_key_read(b->data + HDR_SIZE + (size_t)(b->nritems - 1) * step, last);
}

/* ------------------------------------------------------------ lost leaves */

struct leaf_build {
	struct rt_item *v;
	size_t n, cap;
	uint32_t bytes;		/* item headers and data */
	struct span *spans;
	size_t nspans, spans_cap;
	size_t leaves, newer, full;
	bool capped;		/* more leaves held its keys than were weighed */
	uint64_t oldest, newest;
};

static bool shadowed(const struct leaf_build *lb, const bi_key *k)
{
	for (size_t i = 0; i < lb->nspans; i++)
		if (bi_key_cmp(k, &lb->spans[i].lo) >= 0 && bi_key_cmp(k, &lb->spans[i].hi) <= 0)
			return true;
	return false;
}

static int take_item(struct rt *t, struct leaf_build *lb, const struct bi_block *b, uint32_t slot)
{
	bi_key k;
	const uint8_t *data;
	uint32_t size;
	bi_leaf_item(b, slot, &k, &data, &size);
	if (lb->bytes + ITEM_SIZE + size > t->fs->nodesize - HDR_SIZE) {
		lb->full++;
		return 0;
	}
	if (bi_grow((void **)&lb->v, &lb->cap, lb->n + 1, sizeof(*lb->v)))
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	memcpy(copy, data, size);
	lb->v[lb->n++] = (struct rt_item){ k, copy, size, b->generation, b->bytenr };
	lb->bytes += ITEM_SIZE + size;
	lb->oldest = lb->oldest && lb->oldest < b->generation ? lb->oldest : b->generation;
	lb->newest = lb->newest > b->generation ? lb->newest : b->generation;
	return 0;
}

/* Scanned leaf @b: its items in @r that no newer leaf spans; then its
 * whole span shadows the older leaves' keys. */
static int take_leaf(struct rt *t, struct leaf_build *lb, const struct bi_block *b,
		     const struct krange *r)
{
	bi_key first, last;
	block_keys(b, &first, &last);
	struct span s = { first, last };
	if (bi_key_cmp(&last, &r->lo) < 0 || (r->bounded && bi_key_cmp(&first, &r->hi) >= 0))
		return 0; /* none of its keys in the range */
	size_t before = lb->n;
	for (uint32_t i = 0; i < b->nritems; i++) {
		bi_key k;
		bi_key_read(b->data + HDR_SIZE + (size_t)i * ITEM_SIZE, &k);
		if (!in_krange(r, &k) || shadowed(lb, &k))
			continue;
		int rc = take_item(t, lb, b, i);
		if (rc < 0)
			return rc;
	}
	if (bi_grow((void **)&lb->spans, &lb->spans_cap, lb->nspans + 1, sizeof(*lb->spans)))
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	lb->spans[lb->nspans++] = s;
	lb->leaves += lb->n > before;
	return 0;
}

static int item_cmp(const void *pa, const void *pb)
{
	const struct rt_item *a = pa, *b = pb;
	return bi_key_cmp(&a->key, &b->key);
}

/* The root-tree leaves the scan found, read once for their key spans
 * (at most RT_READS). */
static int index_leaves(struct rt *t)
{
	size_t lo, hi;
	bi_salvage_owner_range(t->fs->scan, t->fs->salvage_fsidx, OBJ_ROOT_TREE, &lo, &hi);
	const struct bi_sv_blk *v = t->fs->scan->blk;
	uint32_t reads = 0;
	t->indexed = true;
	for (size_t i = lo; i < hi; i++) {
		if (v[i].level || (t->nsl && t->sl[t->nsl - 1].bytenr == v[i].bytenr &&
				   t->sl[t->nsl - 1].generation == v[i].generation))
			continue; /* a node, or another copy of the leaf just read */
		if (reads++ >= RT_READS)
			return bi_err(t->fs, -E2BIG, "more than %u root-tree leaves found by "
				      "scanning", RT_READS);
		struct bi_expect e = { .owner = OBJ_ROOT_TREE, .generation = v[i].generation,
				       .level = 0 };
		struct bi_block *b;
		if (bi_block_read(t->fs, v[i].bytenr, &e, &b) < 0)
			continue;
		struct sleaf l = { .bytenr = v[i].bytenr, .generation = v[i].generation };
		bool ok = b->nritems && b->owner == OBJ_ROOT_TREE;
		if (ok)
			block_keys(b, &l.first, &l.last);
		keep_ids(t, b);
		bi_block_put(t->fs, b);
		if (!ok)
			continue;
		if (bi_grow((void **)&t->sl, &t->sl_cap, t->nsl + 1, sizeof(*t->sl)))
			return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
		t->sl[t->nsl++] = l;
	}
	return 0;
}

static bool overlaps(const struct sleaf *l, const struct krange *r)
{
	return bi_key_cmp(&l->last, &r->lo) >= 0 &&
	       (!r->bounded || bi_key_cmp(&l->first, &r->hi) < 0);
}

/* The scanned root-tree leaves no newer than @gen holding keys of @r,
 * newest first (at most RT_OVERLAP). */
static int gather_items(struct rt *t, struct leaf_build *lb, uint64_t lost, uint64_t gen,
			const struct krange *r)
{
	int rc = t->indexed ? 0 : index_leaves(t);
	size_t weighed = 0;
	for (size_t i = 0; rc == 0 && i < t->nsl; i++) {
		const struct sleaf *l = &t->sl[i];
		if (l->bytenr == lost || !overlaps(l, r))
			continue;
		if (l->generation > gen) {
			lb->newer++;
			continue;
		}
		if (weighed++ >= RT_OVERLAP) {
			lb->capped = true;
			break;
		}
		struct bi_expect e = { .owner = OBJ_ROOT_TREE, .generation = l->generation,
				       .level = 0 };
		struct bi_block *b;
		if (bi_block_read(t->fs, l->bytenr, &e, &b) < 0)
			continue;
		rc = take_leaf(t, lb, b, r);
		bi_block_put(t->fs, b);
	}
	if (rc == 0 && lb->n > 1)
		qsort(lb->v, lb->n, sizeof(*lb->v), item_cmp);
	return rc;
}

static int pin_leaf(struct rt *t, const struct leaf_build *lb, uint64_t bytenr, uint64_t gen)
{
	uint8_t *buf = block_new(t, bytenr, gen, 0, (uint32_t)lb->n);
	if (!buf)
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	uint32_t end = t->fs->nodesize - HDR_SIZE;
	for (size_t i = 0; i < lb->n; i++) {
		uint8_t *it = buf + HDR_SIZE + i * ITEM_SIZE;
		end -= lb->v[i].size;
		key_put(it, &lb->v[i].key);
		bi_put_le32(it + ITEM_OFFSET, end);
		bi_put_le32(it + ITEM_DSIZE, lb->v[i].size);
		memcpy(buf + HDR_SIZE + end, lb->v[i].data, lb->v[i].size);
	}
	return bi_block_pin_synthetic(t->fs, buf, t->fs->nodesize);
}

/* The ROOT_ITEMs of @lb, kept for the caller to check the roots they
 * name; one from a leaf older than the lost one (of @gen) said. */
static void note_roots(struct rt *t, const struct leaf_build *lb, uint64_t bytenr, uint64_t gen)
{
	struct bi_rt_result *o = t->out;
	for (size_t i = 0; i < lb->n; i++) {
		const struct rt_item *it = &lb->v[i];
		if (it->key.type != KT_ROOT_ITEM || it->size < RI_LEVEL + 1)
			continue;
		uint64_t named = bi_le64(it->data + RI_GENERATION);
		if (o->ntaken < BI_RT_TAKEN) {
			o->taken[o->ntaken].id = it->key.objectid;
			o->taken[o->ntaken].bytenr = bi_le64(it->data + RI_BYTENR);
			o->taken[o->ntaken].generation = named;
			o->taken[o->ntaken].level = it->data[RI_LEVEL];
			o->taken[o->ntaken].as_of = it->as_of;
			o->taken[o->ntaken].lost = gen;
		}
		o->ntaken++;
		if (it->as_of >= gen)
			continue;
		o->nolder++;
		bi_damage(t->fs, "root tree: ROOT_ITEM of tree %" PRIu64 " (its root of generation "
			  "%" PRIu64 ") known only as of generation %" PRIu64 " (leaf at logical %"
			  PRIu64 "), older than the lost leaf at logical %" PRIu64 " (generation %"
			  PRIu64 ")", it->key.objectid, named, it->as_of, it->from, bytenr, gen);
	}
}

static void leaf_build_free(struct leaf_build *lb)
{
	for (size_t i = 0; i < lb->n; i++)
		free(lb->v[i].data);
	free(lb->v);
	free(lb->spans);
}

/* Lost leaf @bytenr (generation @gen) over @r: the number of items of the
 * leaf synthesized at its address, 0 when none was (said unless @quiet),
 * or a negative errno. */
static int rebuild_leaf(struct rt *t, uint64_t bytenr, uint64_t gen, const struct krange *r,
			const char *why, bool quiet, bi_key *first)
{
	struct leaf_build lb = { 0 };
	int rc = gather_items(t, &lb, bytenr, gen, r);
	if (rc == 0 && lb.n && lb.full)
		bi_damage(t->fs, "root tree: leaf at logical %" PRIu64 " lost (%s); not rebuilt: "
			  "the items found for it are more than a leaf holds", bytenr, why);
	else if (rc == 0 && !lb.n && !quiet)
		bi_damage(t->fs, "root tree: leaf at logical %" PRIu64 " (generation %" PRIu64
			  ") lost (%s); not rebuilt: no root-tree leaf a scan found holds keys of "
			  "its range", bytenr, gen, why);
	if (rc == 0 && lb.n && !lb.full) {
		rc = pin_leaf(t, &lb, bytenr, gen);
		if (rc == 0) {
			bi_damage(t->fs, "root tree: leaf at logical %" PRIu64 " (generation %" PRIu64
				  ") lost (%s); rebuilt from %zu items of %zu root-tree leaves a "
				  "scan found (generations %" PRIu64 "..%" PRIu64 "), newer copies "
				  "shadowing older%s; %zu leaves newer than it holding its keys not "
				  "used", bytenr, gen, why, lb.n, lb.leaves, lb.oldest, lb.newest,
				  lb.capped ? " (only the newest that hold its keys)" : "", lb.newer);
			note_roots(t, &lb, bytenr, gen);
			*first = lb.v[0].key;
			t->out->leaves++;
			rc = (int)(lb.n > INT32_MAX ? INT32_MAX : lb.n);
		}
	}
	if (rc == -E2BIG) {
		bi_damage(t->fs, "root tree: leaf at logical %" PRIu64 " not rebuilt: %s", bytenr,
			  t->fs->err);
		rc = 0;
	}
	leaf_build_free(&lb);
	return rc;
}

/* ------------------------------------------------------------ lost nodes */

struct child {
	bi_key first, last;
	uint64_t bytenr, generation;
	bool rebuilt;
};

struct node_build {
	struct child *v;
	size_t n, cap;
	struct rt_rec **lost;
	size_t nlost, lost_cap;
	size_t unread, outside;
};

static int rebuild_block(struct rt *t, struct rt_rec *me, const struct krange *r, const char *why,
			 bool quiet, bi_key *first);

static int add_child(struct rt *t, struct node_build *nb, const struct child *c)
{
	if (bi_grow((void **)&nb->v, &nb->cap, nb->n + 1, sizeof(*nb->v)))
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	nb->v[nb->n++] = *c;
	return 0;
}

/* Recorded block @c as a child of a lost node of @level, @gen over @r. */
static int consider(struct rt *t, struct node_build *nb, struct rt_rec *c, uint8_t level,
		    uint64_t gen, const struct krange *r)
{
	if (c->used || c->level + 1 != level)
		return 0;
	if (c->generation > gen) {
		nb->outside++;
		return 0;
	}
	struct bi_expect e = { .owner = OBJ_ROOT_TREE, .generation = c->generation,
			       .level = c->level };
	struct bi_block *b;
	if (bi_block_read(t->fs, c->bytenr, &e, &b) < 0) {
		if (bi_grow((void **)&nb->lost, &nb->lost_cap, nb->nlost + 1, sizeof(*nb->lost)))
			return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
		nb->lost[nb->nlost++] = c;
		return 0;
	}
	keep_ids(t, b);
	struct child ch = { .bytenr = c->bytenr, .generation = c->generation };
	bool fits = b->nritems && b->owner == OBJ_ROOT_TREE;
	if (fits)
		block_keys(b, &ch.first, &ch.last);
	bi_block_put(t->fs, b);
	if (!fits || !in_krange(r, &ch.first) || !in_krange(r, &ch.last)) {
		nb->outside++;
		return 0;
	}
	return add_child(t, nb, &ch);
}

static int child_cmp(const void *pa, const void *pb)
{
	const struct child *a = pa, *b = pb;
	return bi_key_cmp(&a->first, &b->first);
}

/* The gap before readable child @g (g == nread: after the last) in @r. */
static bool gap_before(const struct node_build *nb, size_t nread, size_t g, const struct krange *r,
		       struct krange *gap)
{
	*gap = *r;
	if (g > 0 && !key_after(&nb->v[g - 1].last, &gap->lo))
		return false;
	if (g < nread) {
		gap->hi = nb->v[g].first;
		gap->bounded = true;
	}
	return !gap->bounded || bi_key_cmp(&gap->lo, &gap->hi) < 0;
}

/* The lost children rebuilt over the gaps between the readable ones: a
 * gap takes the first lost child that finds keys in it. */
static int fill_gaps(struct rt *t, struct node_build *nb, const struct krange *r)
{
	size_t nread = nb->n;
	for (size_t g = 0; g <= nread; g++) {
		struct krange gap;
		if (!gap_before(nb, nread, g, r, &gap))
			continue;
		for (size_t k = 0; k < nb->nlost; k++) {
			struct rt_rec *c = nb->lost[k];
			struct child ch = { .bytenr = c->bytenr, .generation = c->generation,
					    .rebuilt = true };
			if (c->used)
				continue;
			int n = rebuild_block(t, c, &gap, "unreadable", true, &ch.first);
			if (n < 0)
				return n;
			if (n == 0)
				continue;
			ch.last = ch.first;
			int rc = add_child(t, nb, &ch);
			if (rc < 0)
				return rc;
			break;
		}
	}
	for (size_t k = 0; k < nb->nlost; k++)
		nb->unread += !nb->lost[k]->used;
	return 0;
}

static const char *refuse(struct rt *t, const struct node_build *nb)
{
	for (size_t i = 1; i < nb->n; i++)
		if (!nb->v[i - 1].rebuilt && bi_key_cmp(&nb->v[i - 1].last, &nb->v[i].first) >= 0)
			return "two recorded blocks below it overlap in keys (one of them forged)";
	if (!nb->n && !nb->nlost)
		return "the extent tree records no readable root-tree block in its key range";
	if (nb->n + nb->nlost > (t->fs->nodesize - HDR_SIZE) / KP_SIZE)
		return "more recorded blocks below it than a node holds";
	return NULL;
}

static int pin_node(struct rt *t, const struct rt_rec *me, const struct node_build *nb)
{
	uint8_t *buf = block_new(t, me->bytenr, me->generation, me->level, (uint32_t)nb->n);
	if (!buf)
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	for (size_t i = 0; i < nb->n; i++) {
		uint8_t *kp = buf + HDR_SIZE + i * KP_SIZE;
		key_put(kp, &nb->v[i].first);
		bi_put_le64(kp + KP_BLOCKPTR, nb->v[i].bytenr);
		bi_put_le64(kp + KP_GENERATION, nb->v[i].generation);
	}
	return bi_block_pin_synthetic(t->fs, buf, t->fs->nodesize);
}

static int gather_children(struct rt *t, struct node_build *nb, const struct rt_rec *me,
			   const struct krange *r)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < t->nrec; i++)
		rc = consider(t, nb, &t->rec[i], me->level, me->generation, r);
	if (rc == 0 && nb->n > 1)
		qsort(nb->v, nb->n, sizeof(*nb->v), child_cmp);
	return rc;
}

static void say_node(struct rt *t, const struct rt_rec *me, const struct node_build *nb,
		     const char *why, const char *no)
{
	if (no) {
		bi_damage(t->fs, "root tree: node at logical %" PRIu64 " (level %u) lost (%s); not "
			  "rebuilt: %s", me->bytenr, me->level, why, no);
		return;
	}
	size_t rebuilt = 0;
	for (size_t i = 0; i < nb->n; i++)
		rebuilt += nb->v[i].rebuilt;
	bi_damage(t->fs, "root tree: node at logical %" PRIu64 " (level %u, generation %" PRIu64
		  ") lost (%s); rebuilt from %zu blocks of level %u (%zu of them rebuilt too) that "
		  "the extent tree of generation %" PRIu64 " records by TREE_BLOCK_REF of tree 1; "
		  "%zu recorded blocks unreadable, their keys lost; %zu recorded blocks outside "
		  "its key range or newer than it not used",
		  me->bytenr, me->level, me->generation, why, nb->n, me->level - 1u, rebuilt,
		  t->ext.generation, nb->unread, nb->outside);
}

/* Lost node @me over @r: its children (see the file's comment). */
static int rebuild_node(struct rt *t, struct rt_rec *me, const struct krange *r, const char *why,
			bool quiet, bi_key *first)
{
	struct node_build nb = { 0 };
	int rc = gather_children(t, &nb, me, r);
	const char *no = rc == 0 ? refuse(t, &nb) : NULL;
	if (rc == 0 && !no) {
		rc = fill_gaps(t, &nb, r);
		if (rc == 0 && nb.n > 1)
			qsort(nb.v, nb.n, sizeof(*nb.v), child_cmp);
		if (rc == 0 && !nb.n)
			no = "none of its recorded children reads or is rebuilt";
	}
	if (rc == 0 && !no)
		rc = pin_node(t, me, &nb);
	if (rc == 0 && (!no || !quiet))
		say_node(t, me, &nb, why, no);
	if (rc == 0 && !no) {
		for (size_t i = 0; i < nb.n; i++)
			rec_at(t, nb.v[i].bytenr)->used = true;
		*first = nb.v[0].first;
		t->out->nodes++;
		rc = (int)nb.n;
	}
	free(nb.v);
	free(nb.lost);
	return rc;
}

/* Lost block @me (recorded) over @r, a node or a leaf: the number of its
 * children or items, 0 when not rebuilt, or a negative errno. */
static int rebuild_block(struct rt *t, struct rt_rec *me, const struct krange *r, const char *why,
			 bool quiet, bi_key *first)
{
	me->used = true; /* never a child of a node below it */
	int n = me->level ? rebuild_node(t, me, r, why, quiet, first)
			  : rebuild_leaf(t, me->bytenr, me->generation, r, why, quiet, first);
	me->used = n > 0; /* one not rebuilt over this range may be over another */
	return n;
}

/* ------------------------------------------------------------ the walk */

static int seen_before(struct rt *t, uint64_t bytenr, bool *seen)
{
	for (size_t i = 0; i < t->nseen; i++)
		if (t->seen[i] == bytenr) {
			*seen = true;
			return 0;
		}
	*seen = false;
	if (bi_grow((void **)&t->seen, &t->seen_cap, t->nseen + 1, sizeof(*t->seen)))
		return bi_err(t->fs, -ENOMEM, "salvage: out of memory");
	t->seen[t->nseen++] = bytenr;
	return 0;
}

static int visit(struct rt *t, uint64_t bytenr, uint8_t level, uint64_t gen,
		 const struct krange *r);

static int visit_children(struct rt *t, const struct bi_block *b, const struct krange *r)
{
	int rc = 0;
	for (uint32_t i = 0; rc == 0 && b->level && i < b->nritems; i++) {
		const uint8_t *kp = b->data + HDR_SIZE + (size_t)i * KP_SIZE;
		struct krange cr = *r;
		bi_key_read(kp, &cr.lo);
		if (i + 1 < b->nritems) {
			bi_key_read(kp + KP_SIZE, &cr.hi);
			cr.bounded = true;
		}
		rc = visit(t, bi_le64(kp + KP_BLOCKPTR), (uint8_t)(b->level - 1),
			   bi_le64(kp + KP_GENERATION), &cr);
	}
	return rc;
}

/* Block @bytenr reads on no copy: rebuilt when the extent tree records it
 * there as it is expected; then the blocks below a rebuilt node walked. */
static int lost_block(struct rt *t, uint64_t bytenr, uint8_t level, uint64_t gen,
		      const struct krange *r)
{
	char why[sizeof(t->fs->err)];
	snprintf(why, sizeof(why), "%s", t->fs->err);
	struct rt_rec *me = rec_at(t, bytenr);
	if (!me || me->level != level || me->generation != gen || me->used) {
		bi_damage(t->fs, "root tree: block at logical %" PRIu64 " (level %u, generation %"
			  PRIu64 ") lost (%s); not rebuilt: the extent tree of generation %" PRIu64
			  " does not record it there so", bytenr, level, gen, why, t->ext.generation);
		return 0;
	}
	bi_key first;
	int n = rebuild_block(t, me, r, why, false, &first);
	struct bi_expect e = { .owner = OBJ_ROOT_TREE, .generation = gen, .level = level };
	struct bi_block *b;
	if (n > 0 && level && bi_block_read(t->fs, bytenr, &e, &b) == 0) {
		n = visit_children(t, b, r);
		bi_block_put(t->fs, b);
	}
	return n < 0 ? n : 0;
}

static int visit(struct rt *t, uint64_t bytenr, uint8_t level, uint64_t gen,
		 const struct krange *r)
{
	bool seen = false;
	int rc = level ? seen_before(t, bytenr, &seen) : 0; /* nodes only: a leaf has no walk */
	if (rc < 0 || seen)
		return rc;
	struct bi_expect e = { .owner = OBJ_ROOT_TREE, .generation = gen, .level = level };
	struct bi_block *b;
	if (bi_block_read(t->fs, bytenr, &e, &b) < 0)
		return lost_block(t, bytenr, level, gen, r);
	keep_ids(t, b);
	rc = visit_children(t, b, r);
	bi_block_put(t->fs, b);
	return rc;
}

int bi_salvage_roottree(struct btrfsimg_fs *fs, const struct bi_root *rt, const struct bi_root *ext,
			struct bi_rt_result *out)
{
	struct rt t = { .fs = fs, .ext = *ext, .out = out };
	struct krange all = { .lo = { 0, 0, 0 } };
	memset(out, 0, sizeof(*out));
	int rc = load_records(&t);
	if (rc == 0 && rt)
		out->root = *rt;
	else if (rc == 0)
		rc = root_of_records(&t, &out->root);
	if (rc == 0 && out->root.level >= MAX_LEVEL)
		rc = bi_err(fs, -EUCLEAN, "root tree level %u", out->root.level);
	if (rc == 0 && !out->root.level) { /* one leaf: the older root trees are tried */
		free(t.rec);
		return 0;
	}
	if (rc == 0)
		rc = visit(&t, out->root.bytenr, out->root.level, out->root.generation, &all);
	free(t.rec);
	free(t.seen);
	free(t.sl);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		bi_damage(fs, "root tree: its lost blocks not rebuilt from the extent tree of "
			  "generation %" PRIu64 ": %s", ext->generation, fs->err);
		return 0;
	}
	return out->nodes + out->leaves ? 1 : 0;
}
