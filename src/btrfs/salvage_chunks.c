// SPDX-License-Identifier: MIT
/*
 * Salvage of the chunk map (bi_salvage_chunks, see salvage.h): candidate
 * mappings from every chunk-tree leaf found and from the device tree's
 * extents with the block groups, weighed by the tree blocks they place
 * where those were found. Apart from salvage.c (the scan, the superblock)
 * and salvage_roots.c (the root tree) because this is the evidence model
 * of chunks alone.
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
#include "btrfs/salvage_scan.h"
#include "btrfs/tree.h"
#include "btrfs/tree_checker.h"
#include "image/dev.h"

#define DEV_EXTENT_SIZE 48
#define BG_ITEM_SIZE 24
#define MAX_DEVEXT_PER_BG 16
/* stripe orders tried in full up to this many stripes (6! = 720) */
#define MAX_PERMUTED 6
/* devids told apart without any DEV_ITEM (as open.c's BI_MAX_DEVITEMS) */
#define MAX_DEVITEMS 4096

struct cand {
	struct bi_chunk *c;
	uint64_t generation;
	uint64_t placed, misplaced;
	bool synthesized; /* from device extents and a block group */
	bool unsure;	  /* striped, its order not told by tree blocks */
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

struct devext {
	uint64_t devid, physical, chunk_offset, length, generation;
};

struct bgitem {
	uint64_t logical, length, flags, generation;
};

/* ------------------------------------------------------------ chunk candidates */

static bool same_chunk(const struct bi_chunk *a, const struct bi_chunk *b)
{
	if (a->logical != b->logical || a->length != b->length || a->type != b->type ||
	    a->num_stripes != b->num_stripes || a->sub_stripes != b->sub_stripes)
		return false;
	for (uint16_t k = 0; k < a->num_stripes; k++)
		if (a->stripes[k].devid != b->stripes[k].devid ||
		    a->stripes[k].offset != b->stripes[k].offset)
			return false;
	return true;
}

/* Take @c (owned) as a candidate unless an identical one is in. */
static int cand_add(struct btrfsimg_fs *fs, struct cands *l, struct bi_chunk *c, uint64_t gen,
		    bool synthesized)
{
	for (size_t k = 0; k < l->n; k++)
		if (same_chunk(l->v[k].c, c)) {
			if (gen > l->v[k].generation)
				l->v[k].generation = gen;
			free(c);
			return 0;
		}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct cand *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			free(c);
			return bi_err(fs, -ENOMEM, "salvage: out of memory for chunk candidates");
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct cand){ .c = c, .generation = gen, .synthesized = synthesized };
	return 0;
}

static void cands_free(struct cands *l)
{
	for (size_t k = 0; k < l->n; k++)
		free(l->v[k].c);
	free(l->v);
}

/* The DEV_ITEMs of the newest chunk-tree leaf that has any become the
 * device table (fs->devitems). */
static int leaf_devitems(struct btrfsimg_fs *fs, const uint8_t *buf, uint32_t nritems)
{
	struct bi_devitem *v = NULL;
	size_t n = 0;
	for (uint32_t k = 0; k < nritems; k++) {
		const uint8_t *it = buf + HDR_SIZE + (size_t)k * ITEM_SIZE;
		bi_key key;
		bi_key_read(it, &key);
		struct bi_devitem d;
		char why[128];
		if (key.type != KT_DEV_ITEM || key.objectid != OBJ_DEV_ITEMS ||
		    bi_dev_item_parse(buf + HDR_SIZE + bi_le32(it + ITEM_OFFSET),
				      bi_le32(it + ITEM_DSIZE), key.offset, &d, why, sizeof(why)) < 0)
			continue;
		struct bi_devitem *w = realloc(v, (n + 1) * sizeof(*w));
		if (!w) {
			free(v);
			return bi_err(fs, -ENOMEM, "salvage: out of memory for dev items");
		}
		v = w;
		v[n++] = d;
	}
	if (!n)
		return 0;
	free(fs->devitems);
	fs->devitems = v;
	fs->ndevitems = n;
	return 1;
}

static int leaf_chunk_cands(struct btrfsimg_fs *fs, struct cands *l, const struct bi_sv_blk *b,
			    const uint8_t *buf)
{
	for (uint32_t k = 0; k < b->nritems; k++) {
		const uint8_t *it = buf + HDR_SIZE + (size_t)k * ITEM_SIZE;
		bi_key key;
		bi_key_read(it, &key);
		if (key.type != KT_CHUNK_ITEM)
			continue;
		struct bi_chunk *c;
		char why[256];
		if (bi_chunk_parse(buf + HDR_SIZE + bi_le32(it + ITEM_OFFSET), bi_le32(it + ITEM_DSIZE),
				   key.offset, fs->sectorsize, &c, why, sizeof(why)) < 0)
			continue;
		int rc = cand_add(fs, l, c, b->generation, false);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Chunk items of every chunk-tree leaf found, newest first; the device
 * table from the newest leaf with DEV_ITEMs when the chunk tree gave none. */
static int chunk_leaf_cands(struct btrfsimg_fs *fs, struct cands *l, uint8_t *buf,
			    uint64_t *newest)
{
	const struct bi_sv_scan *s = fs->scan;
	size_t lo, hi;
	bool have_devs = fs->ndevitems > 0;
	bi_salvage_owner_range(s, fs->salvage_fsidx, OBJ_CHUNK_TREE, &lo, &hi);
	*newest = 0;
	for (size_t i = lo; i < hi; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		if (b->level != 0 || bi_sv_scan_reread(fs, s, b, buf) < 0)
			continue;
		if (b->generation > *newest)
			*newest = b->generation;
		if (!have_devs) {
			int rc = leaf_devitems(fs, buf, b->nritems);
			if (rc < 0)
				return rc;
			have_devs = rc > 0;
		}
		int rc = leaf_chunk_cands(fs, l, b, buf);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Items of type @type of the leaves of tree @owner, newest leaf first,
 * the newest version of each key only, passed to @take. */
static int leaf_items(struct btrfsimg_fs *fs, uint64_t owner, uint8_t type, uint8_t *buf,
		      int (*take)(void *ctx, const bi_key *k, const uint8_t *d, uint32_t n,
				  uint64_t gen),
		      void *ctx)
{
	const struct bi_sv_scan *s = fs->scan;
	size_t lo, hi;
	bi_salvage_owner_range(s, fs->salvage_fsidx, owner, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		if (b->level != 0 || bi_sv_scan_reread(fs, s, b, buf) < 0)
			continue;
		for (uint32_t k = 0; k < b->nritems; k++) {
			const uint8_t *it = buf + HDR_SIZE + (size_t)k * ITEM_SIZE;
			bi_key key;
			bi_key_read(it, &key);
			if (key.type != type)
				continue;
			int rc = take(ctx, &key, buf + HDR_SIZE + bi_le32(it + ITEM_OFFSET),
				      bi_le32(it + ITEM_DSIZE), b->generation);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

struct vec {
	void *v;
	size_t n, cap, size;
};

static void *vec_push(struct vec *x)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 16;
		void *v = realloc(x->v, cap * x->size);
		if (!v)
			return NULL;
		x->v = v;
		x->cap = cap;
	}
	return (char *)x->v + x->size * x->n++;
}

static int take_devext(void *ctx, const bi_key *k, const uint8_t *d, uint32_t n, uint64_t gen)
{
	struct vec *x = ctx;
	if (n != DEV_EXTENT_SIZE)
		return 0;
	struct devext *all = x->v;
	for (size_t i = 0; i < x->n; i++) /* newest leaf first: keep the first */
		if (all[i].devid == k->objectid && all[i].physical == k->offset)
			return 0;
	struct devext *e = vec_push(x);
	if (!e)
		return -ENOMEM;
	*e = (struct devext){ k->objectid, k->offset, bi_le64(d + 16), bi_le64(d + 24), gen };
	return 0;
}

static int take_bg(void *ctx, const bi_key *k, const uint8_t *d, uint32_t n, uint64_t gen)
{
	struct vec *x = ctx;
	if (n != BG_ITEM_SIZE)
		return 0;
	struct bgitem *all = x->v;
	for (size_t i = 0; i < x->n; i++)
		if (all[i].logical == k->objectid && all[i].length == k->offset)
			return 0;
	struct bgitem *e = vec_push(x);
	if (!e)
		return -ENOMEM;
	*e = (struct bgitem){ k->objectid, k->offset, bi_le64(d + 16), gen };
	return 0;
}

static const uint8_t *devitem_uuid(const struct btrfsimg_fs *fs, uint64_t devid)
{
	for (size_t i = 0; i < fs->ndevitems; i++)
		if (fs->devitems[i].devid == devid)
			return fs->devitems[i].uuid;
	return NULL;
}

/* Copies of a mirrored profile (their stripes' order does not matter), 0
 * for a striped one. */
static uint16_t mirror_count(uint64_t flags)
{
	switch (flags & BG_PROFILE_MASK) {
	case 0:
		return 1;
	case BG_DUP:
	case BG_RAID1:
		return 2;
	case BG_RAID1C3:
		return 3;
	case BG_RAID1C4:
		return 4;
	default:
		return 0;
	}
}

/* Whether @n device extents make a striped chunk of this profile (the
 * kernel's devs_min and, for raid10, pairs). */
static bool striped_count_ok(uint64_t flags, size_t n)
{
	switch (flags & BG_PROFILE_MASK) {
	case BG_RAID0:
		return n >= 1;
	case BG_RAID10:
		return n >= 2 && n % 2 == 0;
	case BG_RAID5:
		return n >= 2;
	case BG_RAID6:
		return n >= 3;
	default:
		return false;
	}
}

static bool mirrored(uint64_t flags)
{
	return mirror_count(flags) != 0;
}

/* The device extents of block group @g, devid order (the index order of
 * the device tree), into @pick; how many, or SIZE_MAX if more than fit. */
static size_t extents_of(const struct bgitem *g, const struct devext *e, size_t ne,
			 const struct devext **pick, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < ne; i++) {
		if (e[i].chunk_offset != g->logical)
			continue;
		if (n == max)
			return SIZE_MAX;
		size_t k = n++;
		while (k > 0 && (pick[k - 1]->devid > e[i].devid ||
				 (pick[k - 1]->devid == e[i].devid &&
				  pick[k - 1]->physical > e[i].physical))) {
			pick[k] = pick[k - 1];
			k--;
		}
		pick[k] = &e[i];
	}
	return n;
}

/* A chunk for block group @g from its device extents, or NULL: a mirrored
 * profile's extents each span the chunk; a striped one's span its share
 * (bi_chunk_stripe_span), and their order, which no device extent records,
 * is devid order here until the evidence decides (best_order, and
 * salvage_stripes.c for data). */
static struct bi_chunk *chunk_from_extents(const struct btrfsimg_fs *fs, const struct bgitem *g,
					   const struct devext *e, size_t ne)
{
	const struct devext *pick[MAX_DEVEXT_PER_BG];
	size_t n = extents_of(g, e, ne, pick, MAX_DEVEXT_PER_BG);
	bool mir = mirrored(g->flags);
	if (!(g->flags & BG_TYPE_MASK) || n == 0 || n == SIZE_MAX ||
	    (mir ? n != mirror_count(g->flags) : !striped_count_ok(g->flags, n)))
		return NULL;
	struct bi_chunk *c = calloc(1, sizeof(*c) + n * sizeof(c->stripes[0]));
	if (!c)
		return NULL;
	c->logical = g->logical;
	c->length = g->length;
	c->type = g->flags;
	c->stripe_len = BI_STRIPE_LEN;
	c->num_stripes = (uint16_t)n;
	c->sub_stripes = (g->flags & BG_RAID10) ? 2 : 1;
	uint64_t span = mir ? g->length : bi_chunk_stripe_span(c);
	for (size_t k = 0; k < n; k++) {
		const uint8_t *uuid = devitem_uuid(fs, pick[k]->devid);
		if (!uuid || pick[k]->length != span) {
			free(c);
			return NULL;
		}
		c->stripes[k].devid = pick[k]->devid;
		c->stripes[k].offset = pick[k]->physical;
		memcpy(c->stripes[k].dev_uuid, uuid, 16);
	}
	return c;
}

/* Block groups (extent or block-group tree) mapped by the device extents
 * of the device tree: the same chunk as an item says merges with it; one
 * no item covers, or covers otherwise, competes on evidence. */
static int extent_cands(struct btrfsimg_fs *fs, struct cands *l, const struct vec *ex,
			const struct vec *bg)
{
	const struct bgitem *g = bg->v;
	for (size_t i = 0; i < bg->n; i++) {
		struct bi_chunk *c = chunk_from_extents(fs, &g[i], ex->v, ex->n);
		if (!c)
			continue;
		int rc = cand_add(fs, l, c, g[i].generation, true);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int read_extents(struct btrfsimg_fs *fs, uint8_t *buf, struct vec *ex, struct vec *bg)
{
	int rc = leaf_items(fs, OBJ_DEV_TREE, KT_DEV_EXTENT, buf, take_devext, ex);
	if (rc == 0)
		rc = leaf_items(fs, OBJ_EXTENT_TREE, KT_BLOCK_GROUP_ITEM, buf, take_bg, bg);
	if (rc == 0)
		rc = leaf_items(fs, OBJ_BLOCK_GROUP_TREE, KT_BLOCK_GROUP_ITEM, buf, take_bg, bg);
	return rc == -ENOMEM ? bi_err(fs, rc, "salvage: out of memory for device extents") : rc;
}

/* ------------------------------------------------------------ evidence */

static bool cand_places(const struct bi_chunk *c, uint64_t logical, uint64_t devid,
			uint64_t physical)
{
	int n = bi_chunk_num_copies(c);
	if (bi_chunk_profile(c) & (BG_RAID5 | BG_RAID6))
		n = 1;
	for (int k = 0; k < n; k++) {
		struct bi_phys p;
		if (bi_chunk_map_phys(c, logical, k, &p) == 0 && p.devid == devid &&
		    p.physical == physical)
			return true;
	}
	return false;
}

/* How many tree blocks of member devices @c puts where they were found. */
static uint64_t blocks_placed(const struct btrfsimg_fs *fs, const struct bi_chunk *c)
{
	const struct bi_sv_scan *s = fs->scan;
	uint64_t n = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		const struct bi_dev *d = &fs->devs[b->dev];
		if (b->fsidx == fs->salvage_fsidx && d->member && b->bytenr >= c->logical &&
		    b->bytenr - c->logical < c->length && cand_places(c, b->bytenr, d->devid, b->physical))
			n++;
	}
	return n;
}

/* Each tree block found on a member device inside @c votes for the
 * stripe indices at which that device's extent would hold it there. */
static void block_votes(const struct btrfsimg_fs *fs, struct bi_chunk *c, struct bi_sv_votes *v)
{
	const struct bi_sv_scan *s = fs->scan;
	for (size_t i = 0; i < s->n; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		const struct bi_dev *d = &fs->devs[b->dev];
		if (b->fsidx != fs->salvage_fsidx || !d->member || b->bytenr < c->logical ||
		    b->bytenr - c->logical >= c->length)
			continue;
		for (uint16_t j = 0; j < c->num_stripes; j++)
			for (uint16_t k = 0; c->stripes[j].devid == d->devid && k < c->num_stripes; k++)
				v->v[j][k] += bi_salvage_extent_holds(c, j, k, b->physical, b->bytenr);
	}
}

/* A chunk too wide for every order to be tried (n! past 6! = 720): its
 * stripes placed one at a time by the tree blocks that vote for them,
 * said. A data chunk has none; its order waits for the data checksums. */
static int wide_order(struct btrfsimg_fs *fs, struct cand *x)
{
	struct bi_chunk *c = x->c;
	struct bi_sv_votes *v = calloc(1, sizeof(*v));
	if (!v)
		return bi_err(fs, -ENOMEM, "salvage: out of memory ordering stripes");
	block_votes(fs, c, v);
	struct bi_sv_order o;
	bi_salvage_order_by_votes(c, v, &o);
	free(v);
	x->unsure = o.decided < c->num_stripes || (c->type & BG_DATA);
	if (o.votes || o.against || o.refused)
		bi_damage(fs,
			  "salvage: chunk [%" PRIu64 ", %" PRIu64 ") %s from device extents: %u "
			  "stripes, too many to try every order: placed one at a time by the tree "
			  "blocks found on each device, %u of them by %" PRIu64 " votes, %" PRIu64
			  " votes for another place outvoted%s",
			  c->logical, c->logical + c->length, bi_chunk_profile_name(c->type),
			  c->num_stripes, o.decided, o.votes, o.against,
			  o.refused ? "; refused at a stripe two devices are as well voted for: "
				      "the rest left in devid order, unsure" : "");
	return 0;
}

/* A striped chunk from device extents: the stripe order under which the
 * most tree blocks sit where they were found (devid order on a tie). A
 * data chunk holds no tree block: its order stays unsure, for the data
 * checksums to decide once the trees read (salvage_stripes.c). */
static int best_order(struct btrfsimg_fs *fs, struct cand *x)
{
	struct bi_chunk *c = x->c;
	size_t n = c->num_stripes;
	x->unsure = true;
	if (n > MAX_PERMUTED)
		return wide_order(fs, x);
	size_t bytes = sizeof(*c) + n * sizeof(c->stripes[0]);
	struct bi_chunk *t = malloc(bytes), *best = malloc(bytes);
	if (!t || !best) {
		free(t);
		free(best);
		return bi_err(fs, -ENOMEM, "salvage: out of memory ordering stripes");
	}
	memcpy(best, c, bytes);
	memcpy(t, c, bytes);
	uint16_t v[MAX_PERMUTED];
	for (size_t k = 0; k < n; k++)
		v[k] = (uint16_t)k;
	uint64_t most = blocks_placed(fs, c);
	while (bi_salvage_next_order(v, n)) {
		for (size_t k = 0; k < n; k++)
			t->stripes[k] = c->stripes[v[k]];
		uint64_t got = blocks_placed(fs, t);
		if (got > most) {
			most = got;
			memcpy(best, t, bytes);
		}
	}
	memcpy(c, best, bytes);
	free(t);
	free(best);
	x->unsure = most == 0 || (c->type & BG_DATA);
	return 0;
}

static int order_striped(struct btrfsimg_fs *fs, struct cands *l)
{
	for (size_t k = 0; k < l->n; k++) {
		struct cand *x = &l->v[k];
		if (!x->synthesized || mirrored(x->c->type))
			continue;
		int rc = best_order(fs, x);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The device tree's word on stripe @k of @c: +1 when a device extent
 * starts there for this chunk, -1 when the stripe overlaps another's, 0
 * when the device tree says nothing of that place. */
static int extent_vote(const struct bi_chunk *c, uint16_t k, const struct vec *ex)
{
	const struct devext *e = ex->v;
	uint64_t lo = c->stripes[k].offset, span = bi_chunk_stripe_span(c);
	int vote = 0;
	for (size_t i = 0; i < ex->n; i++) {
		if (e[i].devid != c->stripes[k].devid || e[i].physical >= lo + span ||
		    lo >= e[i].physical + e[i].length)
			continue;
		if (e[i].physical == lo && e[i].chunk_offset == c->logical)
			vote = vote < 0 ? vote : 1;
		else
			vote = -1;
	}
	return vote;
}

/* Count, for each candidate, the blocks it places where they were found
 * and those it puts elsewhere (only devices with a devid count), and the
 * device extents that agree or disagree with its stripes: data chunks
 * hold no tree block, the device tree is their evidence. */
static void score(struct btrfsimg_fs *fs, struct cands *l, const struct vec *ex)
{
	for (size_t k = 0; k < l->n; k++)
		for (uint16_t i = 0; i < l->v[k].c->num_stripes; i++) {
			int v = extent_vote(l->v[k].c, i, ex);
			l->v[k].placed += v > 0;
			l->v[k].misplaced += v < 0;
		}
	const struct bi_sv_scan *s = fs->scan;
	for (size_t i = 0; i < s->n; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		const struct bi_dev *d = &fs->devs[b->dev];
		if (b->fsidx != fs->salvage_fsidx || !d->member)
			continue;
		for (size_t k = 0; k < l->n; k++) {
			const struct bi_chunk *c = l->v[k].c;
			if (b->bytenr < c->logical || b->bytenr - c->logical >= c->length)
				continue;
			if (cand_places(c, b->bytenr, d->devid, b->physical))
				l->v[k].placed++;
			else
				l->v[k].misplaced++;
		}
	}
}

/* Whether @devid's extent in @c holds @logical at @physical at some
 * stripe index: for a chunk from device extents too wide for its order
 * to be known before the devices are (wide_order needs their devids). */
static bool held_at_any_index(const struct bi_chunk *c, uint64_t devid, uint64_t physical,
			      uint64_t logical)
{
	if (c->num_stripes <= MAX_PERMUTED || mirrored(c->type))
		return false;
	struct bi_chunk *m = (struct bi_chunk *)c; /* each probe restores it */
	for (uint16_t j = 0; j < c->num_stripes; j++)
		for (uint16_t k = 0; c->stripes[j].devid == devid && k < c->num_stripes; k++)
			if (bi_salvage_extent_holds(m, j, k, physical, logical))
				return true;
	return false;
}

/* How many of device @dv's blocks the chunks @cv put where they were found
 * if it were @devid; a wide chunk whose @any_index is set (its order not
 * known yet: no chunk item says it) counts its stripes at any index. */
static uint64_t votes_for_as(const struct btrfsimg_fs *fs, size_t dv, uint64_t devid,
			     const struct bi_chunk *const *cv, size_t nc, const bool *any_index)
{
	const struct bi_sv_scan *s = fs->scan;
	uint64_t n = 0;
	for (size_t j = 0; j < s->n; j++) {
		const struct bi_sv_blk *b = &s->blk[j];
		if (b->dev != dv || b->fsidx != fs->salvage_fsidx)
			continue;
		for (size_t k = 0; k < nc; k++) {
			const struct bi_chunk *c = cv[k];
			if (b->bytenr >= c->logical && b->bytenr - c->logical < c->length &&
			    (cand_places(c, b->bytenr, devid, b->physical) ||
			     (any_index && any_index[k] &&
			      held_at_any_index(c, devid, b->physical, b->bytenr)))) {
				n++;
				break;
			}
		}
	}
	return n;
}

static uint64_t votes_for(const struct btrfsimg_fs *fs, size_t dv, uint64_t devid,
			  const struct bi_chunk *const *cv, size_t nc)
{
	return votes_for_as(fs, dv, devid, cv, nc, NULL);
}

static bool devid_taken(const struct btrfsimg_fs *fs, uint64_t devid)
{
	for (size_t j = 0; j < fs->ndevs; j++)
		if (fs->devs[j].member && fs->devs[j].devid == devid)
			return true;
	return false;
}

static void place(struct btrfsimg_fs *fs, size_t dv, uint64_t devid, uint64_t votes,
		  uint64_t tied)
{
	struct bi_dev *d = &fs->devs[dv];
	const uint8_t *uuid = devitem_uuid(fs, devid);
	d->member = true;
	d->devid = devid;
	if (uuid)
		memcpy(d->dev_uuid, uuid, 16);
	memcpy(d->fsid, fs->sb.info.fsid, 16);
	char also[96] = "";
	if (tied) /* mirrored stripes at the same offsets: either reads the same */
		snprintf(also, sizeof(also), " (as many for devid %" PRIu64 ", taken in devid order)",
			 tied);
	bi_damage(fs,
		  "salvage: device '%s' is devid %" PRIu64 ": %" PRIu64
		  " of its tree blocks sit where that devid's stripes put them%s",
		  d->name, devid, votes, also);
}

/* The device placed among @placed that holds @devid, or SIZE_MAX. */
static size_t placed_with(const struct btrfsimg_fs *fs, const size_t *placed, size_t n,
			  uint64_t devid)
{
	for (size_t i = 0; i < n; i++)
		if (fs->devs[placed[i]].devid == devid)
			return placed[i];
	return SIZE_MAX;
}

/* Devices just placed whose blocks sit as well under another devid, free
 * or held by another device just placed that fits the swap alike (raid10's
 * mirror pairs: mirrored stripes at the same offsets): for the data
 * checksums to decide (salvage_stripes.c). */
static void note_ties(struct btrfsimg_fs *fs, const size_t *placed, size_t n,
		      const struct bi_chunk *const *cv, size_t nc)
{
	for (size_t i = 0; i < n; i++) {
		size_t a = placed[i];
		uint64_t ia = fs->devs[a].devid, va = votes_for(fs, a, ia, cv, nc);
		for (size_t k = 0; k < fs->ndevitems && fs->nsalvage_ties < BI_SV_MAX_TIES; k++) {
			uint64_t x = fs->devitems[k].devid;
			size_t b = placed_with(fs, placed, n, x);
			if (x == ia || (devid_taken(fs, x) && b == SIZE_MAX) || (b != SIZE_MAX && b < a) ||
			    votes_for(fs, a, x, cv, nc) != va ||
			    (b != SIZE_MAX && votes_for(fs, b, ia, cv, nc) != votes_for(fs, b, x, cv, nc)))
				continue;
			fs->salvage_ties[fs->nsalvage_ties][0] = a;
			fs->salvage_ties[fs->nsalvage_ties][1] = x;
			fs->nsalvage_ties++;
		}
	}
}

/* Devices with no superblock get devids one at a time, the pair (device,
 * devid not taken) with the most votes first, so that two devices never
 * share one and a device of mirrored stripes, which fits every mirror's
 * devid alike, takes the one left to it. A chunk from device extents
 * that no chunk item orders (@any_index), too wide to order by trying
 * each order, votes for a devid whose extent holds the block at any index:
 * where devids' extents lie alike, which of them a device is cannot be
 * told and does not matter, for its stripes are then ordered by the
 * devid it got (wide_order). */
static void assign_devids(struct btrfsimg_fs *fs, const struct bi_chunk *const *cv, size_t nc,
			  const bool *any_index)
{
	size_t placed[BI_MAX_DEVS], nplaced = 0;
	while (nplaced < BI_MAX_DEVS) {
		uint64_t best = 0, votes = 0, tied = 0;
		size_t bdv = 0;
		for (size_t dv = 0; dv < fs->ndevs; dv++) {
			const struct bi_dev *d = &fs->devs[dv];
			if (d->member || d->absorbed)
				continue;
			for (size_t i = 0; i < fs->ndevitems; i++) {
				uint64_t devid = fs->devitems[i].devid;
				if (devid_taken(fs, devid))
					continue;
				uint64_t n = votes_for_as(fs, dv, devid, cv, nc, any_index);
				if (n > votes) {
					votes = n, best = devid, bdv = dv, tied = 0;
				} else if (n == votes && n && dv == bdv && !tied) {
					tied = devid;
				}
			}
		}
		if (!votes)
			break;
		place(fs, bdv, best, votes, tied);
		placed[nplaced++] = bdv;
	}
	note_ties(fs, placed, nplaced, cv, nc);
}

/* What the placement leaves: devices set aside, devices missing, and (for
 * a rebuilt superblock) the device count and size it would have said. */
static void finish_placement(struct btrfsimg_fs *fs)
{
	char u[37];
	bi_uuid_str(fs->sb.info.fsid, u);
	uint64_t members = 0;
	for (size_t j = 0; j < fs->ndevs; j++) {
		const struct bi_dev *d = &fs->devs[j];
		members += d->member;
		if (!d->member && !d->absorbed)
			bi_damage(fs,
				  "salvage: device '%s' set aside: no tree block of filesystem %s on it "
				  "sits where the stripes of a devid not taken put it",
				  d->name, u);
	}
	if (fs->salvage_super) {
		fs->sb.info.num_devices = fs->ndevitems > members ? fs->ndevitems : members;
		fs->sb.info.total_bytes = 0; /* as the superblock sums its devices */
		for (size_t i = 0; i < fs->ndevitems; i++)
			fs->sb.info.total_bytes += fs->devitems[i].total_bytes;
	}
	fs->missing_devs = fs->sb.info.num_devices > members ? fs->sb.info.num_devices - members : 0;
	fs->unplaced_devs = 0;
	if (fs->missing_devs)
		bi_damage(fs, "%" PRIu64 " of %" PRIu64 " devices missing: reading degraded",
			  fs->missing_devs, fs->sb.info.num_devices);
	bi_chunk_map_report_degraded(fs);
}

/* Whether a device was given that no superblock placed. */
static bool any_unplaced(const struct btrfsimg_fs *fs)
{
	for (size_t j = 0; j < fs->ndevs; j++)
		if (!fs->devs[j].member && !fs->devs[j].absorbed)
			return true;
	return false;
}

int bi_salvage_place_devices(struct btrfsimg_fs *fs)
{
	int rc = bi_salvage_scan(fs);
	if (rc < 0)
		return rc;
	size_t nc = bi_chunk_map_count(fs->chunks);
	const struct bi_chunk **cv = calloc(nc ? nc : 1, sizeof(*cv));
	if (!cv)
		return bi_err(fs, -ENOMEM, "salvage: out of memory placing devices");
	for (size_t k = 0; k < nc; k++)
		cv[k] = bi_chunk_map_at(fs->chunks, k);
	assign_devids(fs, cv, nc, NULL);
	free(cv);
	finish_placement(fs);
	return 0;
}

/* No DEV_ITEM survived (no chunk-tree leaf; mkfs over the filesystem
 * rewrites its system chunk): the devices are those the superblocks name
 * and the devids the device extents give, their uuids unknown (zero) where
 * no superblock says them and their sizes, then, the end of their last
 * extent, so that devices can still be matched by where the blocks sit
 * (assign_devids). */
static int devitems_from_extents(struct btrfsimg_fs *fs, const struct vec *ex)
{
	const struct devext *e = ex->v;
	size_t from_extents = 0;
	for (size_t j = 0; j < fs->ndevs + ex->n; j++) {
		const struct bi_dev *d = j < fs->ndevs ? &fs->devs[j] : NULL;
		if (d && !d->member)
			continue;
		struct bi_devitem it = { .devid = d ? d->devid : e[j - fs->ndevs].devid,
					 .total_bytes = d ? d->total_bytes : 0 };
		if (d)
			memcpy(it.uuid, d->dev_uuid, 16);
		if (devitem_uuid(fs, it.devid) || fs->ndevitems >= MAX_DEVITEMS)
			continue;
		for (size_t i = 0; !d && i < ex->n; i++) {
			uint64_t end = e[i].physical + e[i].length;
			if (e[i].devid == it.devid && end >= e[i].physical && end > it.total_bytes)
				it.total_bytes = end;
		}
		struct bi_devitem *v = realloc(fs->devitems, (fs->ndevitems + 1) * sizeof(*v));
		if (!v)
			return bi_err(fs, -ENOMEM, "salvage: out of memory for dev items");
		v[fs->ndevitems++] = it;
		fs->devitems = v;
		from_extents += !d;
	}
	if (from_extents)
		bi_damage(fs, "salvage: no DEV_ITEM found (no chunk-tree leaf survives): %zu device%s "
			  "taken from the device tree's extents, uuids unknown",
			  from_extents, from_extents == 1 ? "" : "s");
	return 0;
}

static int assign_cands(struct btrfsimg_fs *fs, const struct cands *l)
{
	if (!any_unplaced(fs))
		return 0;
	const struct bi_chunk **cv = calloc(l->n ? l->n : 1, sizeof(*cv));
	bool *any = calloc(l->n ? l->n : 1, sizeof(*any));
	if (!cv || !any) {
		free(cv);
		free(any);
		return bi_err(fs, -ENOMEM, "salvage: out of memory placing devices");
	}
	for (size_t k = 0; k < l->n; k++) {
		cv[k] = l->v[k].c;
		any[k] = l->v[k].synthesized;
		for (size_t i = 0; any[k] && i < l->n; i++) /* a chunk item says its order */
			any[k] = l->v[i].synthesized || l->v[i].c->logical != cv[k]->logical;
	}
	assign_devids(fs, cv, l->n, any);
	free(cv);
	free(any);
	return 0;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->placed != b->placed)
		return a->placed > b->placed ? -1 : 1;
	if (a->synthesized != b->synthesized) /* an item records the stripe order */
		return a->synthesized ? 1 : -1;
	if (a->generation != b->generation)
		return a->generation > b->generation ? -1 : 1;
	return a->c->logical < b->c->logical ? -1 : a->c->logical > b->c->logical;
}

struct map_report {
	size_t used, items, synthesized, refuted, overlapping;
};

static int insert_cands(struct btrfsimg_fs *fs, struct cands *l, struct map_report *r)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), cand_cmp);
	for (size_t k = 0; k < l->n; k++) {
		struct cand *x = &l->v[k];
		if (x->misplaced > x->placed) {
			r->refuted++;
			continue;
		}
		const struct bi_chunk *have = bi_chunk_lookup(fs->chunks, x->c->logical);
		if (have && same_chunk(have, x->c))
			continue; /* the sys_chunk_array's own */
		char why[256];
		bool synth = x->synthesized, unsure = x->unsure;
		uint64_t logical = x->c->logical; /* read first: a refused insert frees it */
		int rc = bi_chunk_map_insert(fs->chunks, x->c, why, sizeof(why));
		x->c = NULL; /* the map owns it, or the insert freed it */
		if (rc == -ENOMEM)
			return bi_err(fs, rc, "salvage: out of memory building the chunk map");
		if (rc < 0 || rc == 1) {
			r->overlapping++;
			continue;
		}
		r->used++;
		synth ? r->synthesized++ : r->items++;
		if (unsure && bi_salvage_note_unsure(fs, logical) < 0)
			return bi_err(fs, -ENOMEM, "salvage: out of memory building the chunk map");
	}
	return 0;
}

int bi_salvage_chunks(struct btrfsimg_fs *fs)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", fs->err);
	int rc = bi_salvage_scan(fs);
	if (rc < 0)
		return rc;
	uint8_t *buf = malloc(fs->nodesize);
	struct cands l = { 0 };
	uint64_t newest = 0;
	struct vec ex = { .size = sizeof(struct devext) }, bg = { .size = sizeof(struct bgitem) };
	if (!buf)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	/* a fresh map: what a failed load left is not trusted */
	bi_chunk_map_free(fs->chunks);
	fs->chunks = bi_chunk_map_new();
	if (!fs->chunks) {
		rc = bi_err(fs, -ENOMEM, "salvage: out of memory");
		goto out;
	}
	fs->ndevitems = 0;
	if (!fs->salvage_super && (rc = bi_chunk_load_sys_array(fs)) < 0)
		goto out;
	rc = chunk_leaf_cands(fs, &l, buf, &newest);
	if (rc == 0)
		rc = read_extents(fs, buf, &ex, &bg);
	if (rc == 0 && fs->ndevitems == 0)
		rc = devitems_from_extents(fs, &ex);
	if (rc == 0)
		rc = extent_cands(fs, &l, &ex, &bg);
	if (rc == 0)
		rc = assign_cands(fs, &l);
	if (rc == 0)
		rc = order_striped(fs, &l);
	if (rc < 0)
		goto out;
	bool placing = fs->salvage_super || fs->unplaced_devs;
	score(fs, &l, &ex);
	struct map_report r = { 0 };
	rc = insert_cands(fs, &l, &r);
	if (rc < 0)
		goto out;
	if (placing)
		finish_placement(fs);
	if (bi_chunk_map_count(fs->chunks) == 0) {
		rc = bi_err(fs, -EUCLEAN,
			    "salvage: no chunk mapping found: %zu candidates from chunk-tree leaves and "
			    "device extents, %zu refuted by the tree blocks they misplace",
			    l.n, r.refuted);
		goto out;
	}
	char head[sizeof(fs->err) + 32] = "no superblock";
	if (!fs->salvage_super)
		snprintf(head, sizeof(head), "chunk tree unreadable (%s)", was);
	bi_damage(fs,
		  "%s: chunk map rebuilt from %zu chunk items of chunk-tree leaves (newest of "
		  "generation %" PRIu64 ") and %zu from device extents and block groups; %zu "
		  "candidates refuted by the tree blocks they misplace, %zu overlapping a better one",
		  head, r.items, newest, r.synthesized, r.refuted, r.overlapping);
out:
	cands_free(&l);
	free(ex.v);
	free(bg.v);
	free(buf);
	return rc;
}
