/* SPDX-License-Identifier: MIT */
/*
 * Salvage: opening a filesystem whose way in is gone (no valid superblock,
 * no readable chunk tree, no readable root tree), from the tree blocks the
 * scan found on the devices (salvage_scan.c). Nothing is written anywhere.
 *
 * The blocks are attacker-controlled by definition, so nothing rebuilt is
 * used on the word of one block:
 *   - a chunk mapping is a candidate until the tree blocks it covers say
 *     where they are: a block whose header bytenr the mapping puts exactly
 *     where the block was found supports it, one it puts elsewhere counts
 *     against it; the best supported, then the newest, wins a range;
 *   - a root-tree root is used only when its whole tree reads through the
 *     map, and never one newer than a surviving superblock;
 *   - a tree's newer root found by scanning replaces what an older root
 *     tree names only when it verifies where that map reads it.
 * Every fallback taken is announced with bi_damage, which the CLI prints
 * and counts (exit 1: results despite damage).
 *
 * It sits in the btrfs core beside the open sequence (open.c calls it in
 * the middle of its steps), below the file layer.
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

/* root-tree candidates tried before giving up (each read whole) */
#define MAX_ROOT_TRIES 32
#define DEV_EXTENT_SIZE 48
#define BG_ITEM_SIZE 24
#define MAX_DEVEXT_PER_BG 4

struct cand {
	struct bi_chunk *c;
	uint64_t generation;
	uint64_t placed, misplaced;
	bool synthesized; /* from device extents and a block group */
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

/* ------------------------------------------------------------ the scan */

static int ensure_scan(struct btrfsimg_fs *fs)
{
	if (fs->scan)
		return 0;
	bool known = fs->sb.info.generation != 0 && !fs->salvage_super;
	int rc = bi_sv_scan_devices(fs, known, &fs->scan);
	if (rc == 0)
		fs->salvage_fsidx = 0;
	return rc;
}

/* The blocks of tree @owner in the filesystem in use: [*lo, *hi) of the
 * index (newest generation first). */
static void owner_range(const struct bi_sv_scan *s, unsigned fsidx, uint64_t owner, size_t *lo,
			size_t *hi)
{
	size_t a = 0, b = s->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct bi_sv_blk *x = &s->blk[m];
		if (x->fsidx < fsidx || (x->fsidx == fsidx && x->owner < owner))
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	while (a < s->n && s->blk[a].fsidx == fsidx && s->blk[a].owner == owner)
		a++;
	*hi = a;
}

/* ------------------------------------------------------------ superblock */

static unsigned pick_fs(struct btrfsimg_fs *fs, const struct bi_sv_scan *s)
{
	unsigned best = 0;
	for (unsigned i = 1; i < s->nfs; i++)
		if (s->fss[i].nblocks > s->fss[best].nblocks)
			best = i;
	for (unsigned i = 0; i < s->nfs; i++) {
		char u[37];
		if (i == best)
			continue;
		bi_uuid_str(s->fss[i].fsid, u);
		bi_damage(fs,
			  "salvage: another filesystem's tree blocks are on the devices too: fsid %s, "
			  "%" PRIu64 " blocks of generations %" PRIu64 "-%" PRIu64 "; not read",
			  u, s->fss[i].nblocks, s->fss[i].gen_min, s->fss[i].gen_max);
	}
	return best;
}

/* The newest root candidate of @owner: the highest level of its newest
 * generation (index order). */
static const struct bi_sv_blk *newest_root(const struct bi_sv_scan *s, unsigned fsidx,
					     uint64_t owner)
{
	size_t lo, hi;
	owner_range(s, fsidx, owner, &lo, &hi);
	return lo < hi ? &s->blk[lo] : NULL;
}

/* The sector size the chunk items record (io_align and sector_size), from
 * the newest chunk-tree leaf that holds one; 4096 if none does. */
static uint32_t find_sectorsize(struct btrfsimg_fs *fs, const struct bi_sv_scan *s, unsigned fsidx,
				uint8_t *buf)
{
	size_t lo, hi;
	owner_range(s, fsidx, OBJ_CHUNK_TREE, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		if (b->level != 0 || bi_sv_scan_reread(fs, s, b, buf) < 0)
			continue;
		for (uint32_t k = 0; k < b->nritems; k++) {
			const uint8_t *it = buf + HDR_SIZE + (size_t)k * ITEM_SIZE;
			if (it[8] != KT_CHUNK_ITEM || bi_le32(it + ITEM_DSIZE) < CHUNK_SIZE)
				continue;
			uint32_t ss = bi_le32(buf + HDR_SIZE + bi_le32(it + ITEM_OFFSET) +
					      CHUNK_SECTOR_SIZE);
			if (ss >= 4096 && ss <= s->fss[fsidx].nodesize && !(ss & (ss - 1)))
				return ss;
		}
	}
	return 4096;
}

int bi_salvage_super(struct btrfsimg_fs *fs, const char *why)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", why);
	fs->salvage_super = true;
	int rc = ensure_scan(fs);
	if (rc < 0)
		return rc;
	struct bi_sv_scan *s = fs->scan;
	if (s->nfs == 0)
		return bi_err(fs, -EUCLEAN, "%s; a scan of %" PRIu64 " bytes found no btrfs tree block",
			      was, s->bytes);
	unsigned fi = pick_fs(fs, s);
	fs->salvage_fsidx = fi;
	const struct bi_sv_fs *f = &s->fss[fi];
	const struct bi_sv_blk *rt = newest_root(s, fi, OBJ_ROOT_TREE);
	const struct bi_sv_blk *ct = newest_root(s, fi, OBJ_CHUNK_TREE);
	char u[37];
	bi_uuid_str(f->fsid, u);
	if (!rt)
		return bi_err(fs, -EUCLEAN,
			      "%s; filesystem %s: %" PRIu64 " tree blocks found, none of the root tree",
			      was, u, f->nblocks);
	uint8_t *buf = malloc(f->nodesize);
	if (!buf)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	struct btrfsimg_super_info *i = &fs->sb.info;
	memset(&fs->sb, 0, sizeof(fs->sb));
	memcpy(i->fsid, f->fsid, 16);
	memcpy(i->metadata_uuid, f->fsid, 16);
	i->nodesize = f->nodesize;
	i->csum_type = (uint16_t)f->csum_type;
	i->sectorsize = i->stripesize = find_sectorsize(fs, s, fi, buf);
	free(buf);
	i->generation = rt->generation;
	i->root = rt->bytenr;
	i->root_level = rt->level;
	i->root_dir_objectid = 6;
	if (ct) {
		i->chunk_root = ct->bytenr;
		i->chunk_root_level = ct->level;
		fs->sb.chunk_root_generation = ct->generation;
	}
	i->mirror_used = -1;
	fs->nodesize = f->nodesize;
	fs->sectorsize = i->sectorsize;
	fs->csum_type = f->csum_type;
	fs->csum_size = (uint32_t)bi_csum_size(f->csum_type);
	memcpy(fs->meta_fsid, f->fsid, 16);
	bi_damage(fs,
		  "no superblock (%s): filesystem %s rebuilt from %" PRIu64
		  " tree blocks (nodesize %u, %s, sectorsize %u, generations %" PRIu64 "-%" PRIu64
		  ")",
		  was, u, f->nblocks, f->nodesize, btrfsimg_csum_name(f->csum_type), i->sectorsize,
		  f->gen_min, f->gen_max);
	return 0;
}

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
	owner_range(s, fs->salvage_fsidx, OBJ_CHUNK_TREE, &lo, &hi);
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
	owner_range(s, fs->salvage_fsidx, owner, &lo, &hi);
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

/* Mirrored profiles only: their stripes' order does not matter. */
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

/* A chunk for block group @g from its device extents, or NULL. */
static struct bi_chunk *chunk_from_extents(const struct btrfsimg_fs *fs, const struct bgitem *g,
					   const struct devext *e, size_t ne)
{
	uint16_t want = mirror_count(g->flags), got = 0;
	if (!want || !(g->flags & BG_TYPE_MASK))
		return NULL;
	struct bi_chunk *c = calloc(1, sizeof(*c) + want * sizeof(c->stripes[0]));
	if (!c)
		return NULL;
	for (size_t i = 0; i < ne; i++) {
		if (e[i].chunk_offset != g->logical || e[i].length != g->length)
			continue;
		const uint8_t *uuid = devitem_uuid(fs, e[i].devid);
		if (got == want || !uuid) {
			free(c);
			return NULL;
		}
		c->stripes[got].devid = e[i].devid;
		c->stripes[got].offset = e[i].physical;
		memcpy(c->stripes[got].dev_uuid, uuid, 16);
		got++;
	}
	if (got != want) {
		free(c);
		return NULL;
	}
	c->logical = g->logical;
	c->length = g->length;
	c->type = g->flags;
	c->stripe_len = BI_STRIPE_LEN;
	c->num_stripes = want;
	c->sub_stripes = 1;
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

/* A device with no superblock: the devid whose stripes put the most of
 * its blocks where they were found. */
static void assign_devids(struct btrfsimg_fs *fs, const struct cands *l)
{
	const struct bi_sv_scan *s = fs->scan;
	for (size_t dv = 0; dv < fs->ndevs; dv++) {
		struct bi_dev *d = &fs->devs[dv];
		if (d->member || d->absorbed)
			continue;
		uint64_t best = 0, votes = 0;
		for (size_t i = 0; i < fs->ndevitems; i++) {
			uint64_t devid = fs->devitems[i].devid, n = 0;
			for (size_t j = 0; j < s->n; j++) {
				const struct bi_sv_blk *b = &s->blk[j];
				if (b->dev != dv || b->fsidx != fs->salvage_fsidx)
					continue;
				for (size_t k = 0; k < l->n; k++) {
					const struct bi_chunk *c = l->v[k].c;
					if (b->bytenr >= c->logical && b->bytenr - c->logical < c->length &&
					    cand_places(c, b->bytenr, devid, b->physical)) {
						n++;
						break;
					}
				}
			}
			if (n > votes) {
				votes = n;
				best = devid;
			}
		}
		if (!votes)
			continue;
		bool taken = false;
		for (size_t j = 0; j < fs->ndevs; j++)
			taken |= fs->devs[j].member && fs->devs[j].devid == best;
		if (taken)
			continue;
		d->member = true;
		d->devid = best;
		memcpy(d->dev_uuid, devitem_uuid(fs, best), 16);
		memcpy(d->fsid, fs->sb.info.fsid, 16);
		bi_damage(fs, "salvage: device '%s' is devid %" PRIu64 ": %" PRIu64
			  " tree blocks sit where its stripes put them", d->name, best, votes);
	}
	if (!fs->salvage_super)
		return; /* the superblock's device count stands */
	uint64_t members = 0;
	for (size_t j = 0; j < fs->ndevs; j++)
		members += fs->devs[j].member;
	fs->sb.info.num_devices = fs->ndevitems ? fs->ndevitems : members;
	fs->missing_devs = fs->sb.info.num_devices > members ? fs->sb.info.num_devices - members : 0;
	fs->sb.info.total_bytes = 0; /* as the superblock sums its devices */
	for (size_t i = 0; i < fs->ndevitems; i++)
		fs->sb.info.total_bytes += fs->devitems[i].total_bytes;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->placed != b->placed)
		return a->placed > b->placed ? -1 : 1;
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
		int rc = bi_chunk_map_insert(fs->chunks, x->c, why, sizeof(why));
		bool synth = x->synthesized;
		x->c = NULL; /* the map owns it, or the insert freed it */
		if (rc == -ENOMEM)
			return bi_err(fs, rc, "salvage: out of memory building the chunk map");
		if (rc < 0 || rc == 1) {
			r->overlapping++;
			continue;
		}
		r->used++;
		synth ? r->synthesized++ : r->items++;
	}
	return 0;
}

int bi_salvage_chunks(struct btrfsimg_fs *fs)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", fs->err);
	int rc = ensure_scan(fs);
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
	if (rc == 0)
		rc = extent_cands(fs, &l, &ex, &bg);
	if (rc < 0)
		goto out;
	assign_devids(fs, &l);
	score(fs, &l, &ex);
	struct map_report r = { 0 };
	rc = insert_cands(fs, &l, &r);
	if (rc < 0)
		goto out;
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

/* ------------------------------------------------------------ the root tree */

struct root_cand {
	uint64_t bytenr, generation;
	uint8_t level;
	int backup; /* superblock backup root index, or -1: the scan */
};

/* Read every item of the root tree @r: a tree that does not read whole is
 * not the filesystem's. */
static int root_tree_reads(struct btrfsimg_fs *fs, const struct bi_root *r)
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
	owner_range(s, fs->salvage_fsidx, OBJ_ROOT_TREE, &lo, &hi);
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

static int keep_root(struct btrfsimg_fs *fs, uint64_t id, uint64_t named,
		     const struct bi_sv_blk *b)
{
	struct bi_root *v = realloc(fs->salvage_roots, (fs->nsalvage_roots + 1) * sizeof(*v));
	if (!v)
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	fs->salvage_roots = v;
	v[fs->nsalvage_roots++] = (struct bi_root){ id, b->bytenr, b->generation, b->level };
	bi_damage(fs,
		  "root tree of generation %" PRIu64 " names tree %" PRIu64 " of generation %" PRIu64
		  "; its root of generation %" PRIu64 " found by scanning is read instead",
		  fs->root_tree.generation, id, named, b->generation);
	return 0;
}

/* Tree @id's newest root the scan found, newer than the @named generation
 * the root tree gives and at most @newest. */
static int newer_root(struct btrfsimg_fs *fs, uint64_t id, uint64_t named, uint64_t newest)
{
	size_t lo, hi;
	owner_range(fs->scan, fs->salvage_fsidx, id, &lo, &hi);
	const struct bi_sv_blk *v = fs->scan->blk;
	for (size_t i = lo; i < hi && v[i].generation > named;) {
		size_t j = i;
		while (j < hi && v[j].generation == v[i].generation && v[j].level == v[i].level)
			j++;
		const struct bi_sv_blk *b = v[i].generation <= newest ? pick_of_gen(fs, id, i, j)
								      : NULL;
		if (b)
			return keep_root(fs, id, named, b);
		while (j < hi && v[j].generation == v[i].generation)
			j++; /* lower levels of the same generation */
		i = j;
	}
	return 0;
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

int bi_salvage_root(struct btrfsimg_fs *fs)
{
	char was[sizeof(fs->err)];
	snprintf(was, sizeof(was), "%s", fs->err);
	int rc = ensure_scan(fs);
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
	size_t tried = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && v[i].bytenr == v[i - 1].bytenr && v[i].generation == v[i - 1].generation)
			continue;
		struct bi_root r = { OBJ_ROOT_TREE, v[i].bytenr, v[i].generation, v[i].level };
		tried++;
		if (root_tree_reads(fs, &r) < 0)
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
		return r.generation < newest ? newer_tree_roots(fs, newest) : 0;
	}
	return bi_err(fs, -EUCLEAN,
		      "root tree unreadable (generation %" PRIu64 "): none of %zu candidates from "
		      "the backup roots and the scan reads whole",
		      lost, tried);
}

void bi_salvage_free(struct btrfsimg_fs *fs)
{
	bi_sv_scan_free(fs->scan);
	fs->scan = NULL;
	free(fs->salvage_roots);
	fs->salvage_roots = NULL;
	fs->nsalvage_roots = 0;
}
