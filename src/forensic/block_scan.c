// SPDX-License-Identifier: MIT
/*
 * The forensic scan: every tree block of this filesystem on every device,
 * whether a live tree still reaches it or not.
 *
 * Each member device is read from end to end in SCAN_BUF pieces (large
 * sequential reads kept in flight ahead of the checks by reading threads:
 * image/ring.h), past the holes of a sparse image file. The reads go
 * through the page cache: `deleted` reads every leaf again right after
 * the scan (and a later command scans again), which then costs a copy,
 * not a second read of the disk in the index's scattered order. Tree
 * blocks sit at sectorsize-aligned device offsets; at each one the
 * header's fsid (offset 32) is compared with the metadata fsid, which
 * rejects nearly everything with one 16-byte compare. A candidate must
 * then pass, in order:
 *   1. its checksum over [32, nodesize) (the kernel's csum_tree_block);
 *   2. the checker the reader uses for live blocks (bi_block_check:
 *      header, item table, key order) with the header's own bytenr;
 *   3. placement: mirror k of the header's bytenr, mapped through
 *      today's chunk map or through a chunk item found in a stale
 *      chunk-tree leaf, is exactly (this device, this offset). A valid
 *      block copied elsewhere (or planted) is not indexed.
 * Copies of one block (dup, raid1) and the same block found twice give
 * one entry. The superblock copies are skipped by position; their roots
 * (and backup roots) are kept as the history's first entry points.
 *
 * Memory: one entry (104 bytes) per distinct block; blocks are read
 * again when used (bi_fx_read_block), through the same three checks.
 * Copies (dup, raid1) are dropped while scanning, whenever the entries
 * fill their array, where today's chunk map places them all: the one
 * kept is the one the end of the scan would keep (the lowest device and
 * offset of those placed), so a DUP filesystem's index does not hold
 * every block twice on its way.
 *
 * Superblock backup root (168 bytes each, four from 0xb2b):
 *   +0 tree_root +8 tree_root_gen +16 chunk_root +24 chunk_root_gen
 *   +32 extent_root +40 extent_root_gen +48 fs_root +56 fs_root_gen ...
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/block_scan.h"

#include "base/grow.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "image/ring.h"
#include "btrfs/chunk.h"
#include "btrfs/super.h"

/* 8 MiB pieces, four in the ring: 8 MiB reads are as fast as dd's
 * (bs=8M iflag=direct) here, and three in flight cover the checks. */
#define SCAN_BUF     (8u << 20)
#define SCAN_DEPTH   4u
#define SCAN_MAX     (64u << 20)

/* ------------------------------------------------------------ checks */

static uint64_t csum8(const uint8_t *blk)
{
	uint64_t v;
	memcpy(&v, blk, 8);
	return v;
}

/* Checks 1 and 2 on a block image; fills the entry but its location. */
static int block_valid(const struct btrfsimg_fs *fs, const uint8_t *blk, struct bi_fx_block *e,
		       bool *bad_csum)
{
	uint8_t sum[CSUM_SIZE_MAX];
	*bad_csum = false;
	if (bi_csum(fs->csum_type, blk + HDR_FSID, fs->nodesize - HDR_FSID, sum) < 0 ||
	    memcmp(sum, blk, fs->csum_size) != 0) {
		*bad_csum = true;
		return -EIO;
	}
	char why[256];
	uint64_t bytenr = bi_le64(blk + HDR_BYTENR);
	if (bi_block_check(blk, fs->nodesize, bytenr, fs->meta_fsid, NULL, why, sizeof(why)))
		return -EUCLEAN;
	memset(e, 0, sizeof(*e));
	e->bytenr = bytenr;
	e->generation = bi_le64(blk + HDR_GENERATION);
	e->owner = bi_le64(blk + HDR_OWNER);
	e->level = blk[HDR_LEVEL];
	e->nritems = bi_le32(blk + HDR_NRITEMS);
	e->csum8 = csum8(blk);
	if (e->nritems) {
		uint32_t per = e->level ? KP_SIZE : ITEM_SIZE;
		bi_key_read(blk + HDR_SIZE, &e->first);
		bi_key_read(blk + HDR_SIZE + (size_t)(e->nritems - 1) * per, &e->last);
	}
	return 0;
}

static bool chunk_places(const struct bi_chunk *c, uint64_t logical, uint64_t devid, uint64_t phys)
{
	if (logical < c->logical || logical - c->logical >= c->length)
		return false;
	int n = bi_chunk_num_copies(c);
	uint64_t prof = bi_chunk_profile(c);
	if (prof & (BG_RAID5 | BG_RAID6))
		n = 1;
	for (int k = 0; k < n; k++) {
		struct bi_phys p;
		if (bi_chunk_map_phys(c, logical, k, &p) == 0 && p.devid == devid &&
		    p.physical == phys)
			return true;
	}
	return false;
}

/* Check 3: some chunk map puts @e where it was found. */
static bool placed(const struct btrfsimg_forensic *f, const struct bi_fx_block *e)
{
	const struct bi_chunk *c = bi_chunk_lookup(f->fs->chunks, e->bytenr);
	if (c && chunk_places(c, e->bytenr, e->devid, e->physical))
		return true;
	for (size_t i = 0; i < f->nchunks; i++)
		if (chunk_places(f->chunks[i].c, e->bytenr, e->devid, e->physical))
			return true;
	return false;
}

int bi_fx_read_block(struct btrfsimg_forensic *f, const struct bi_fx_block *b)
{
	return bi_fx_read_block_to(f, b, f->buf);
}

int bi_fx_read_block_to(struct btrfsimg_forensic *f, const struct bi_fx_block *b, uint8_t *buf)
{
	struct btrfsimg_fs *fs = f->fs;
	struct bi_dev *d = bi_dev_by_id(fs, b->devid);
	if (!d)
		return bi_err(fs, -EIO, "old tree blocks: device %" PRIu64 " is gone", b->devid);
	int rc = bi_dev_read(fs, d, b->physical, buf, fs->nodesize);
	if (rc < 0)
		return rc;
	struct bi_fx_block e;
	bool bad;
	if (block_valid(fs, buf, &e, &bad) < 0 || e.bytenr != b->bytenr ||
	    e.generation != b->generation || e.csum8 != b->csum8)
		return bi_err(fs, -EIO,
			      "old tree blocks: block %" PRIu64 " (devid %" PRIu64 " physical %" PRIu64
			      ") changed since the scan",
			      b->bytenr, b->devid, b->physical);
	return 0;
}

/* ------------------------------------------------------------ chunks */

static bool same_chunk(const struct bi_chunk *a, const struct bi_chunk *b)
{
	if (a->logical != b->logical || a->length != b->length || a->type != b->type ||
	    a->num_stripes != b->num_stripes)
		return false;
	for (uint16_t i = 0; i < a->num_stripes; i++)
		if (a->stripes[i].devid != b->stripes[i].devid ||
		    a->stripes[i].offset != b->stripes[i].offset)
			return false;
	return true;
}

static int add_old_chunk(struct btrfsimg_forensic *f, struct bi_chunk *c, uint64_t gen)
{
	const struct bi_chunk *now = bi_chunk_lookup(f->fs->chunks, c->logical);
	bool known = now && same_chunk(now, c);
	for (size_t i = 0; !known && i < f->nchunks; i++)
		known = same_chunk(f->chunks[i].c, c);
	if (known) {
		free(c);
		return 0;
	}
	struct bi_fx_chunk *n = realloc(f->chunks, (f->nchunks + 1) * sizeof(*n));
	if (!n) {
		free(c);
		return -ENOMEM;
	}
	f->chunks = n;
	f->chunks[f->nchunks++] = (struct bi_fx_chunk){ c, gen };
	f->stats.old_chunks++;
	return 0;
}

/* The chunk items of a valid chunk-tree leaf (checked by bi_chunk_parse). */
static int leaf_chunks(struct btrfsimg_forensic *f, const uint8_t *blk, const struct bi_fx_block *e)
{
	for (uint32_t s = 0; s < e->nritems; s++) {
		const uint8_t *it = blk + HDR_SIZE + (size_t)s * ITEM_SIZE;
		bi_key k;
		bi_key_read(it, &k);
		if (k.type != KT_CHUNK_ITEM)
			continue;
		uint32_t off = bi_le32(it + ITEM_OFFSET), size = bi_le32(it + ITEM_DSIZE);
		struct bi_chunk *c;
		char why[256];
		if (bi_chunk_parse(blk + HDR_SIZE + off, size, k.offset, f->fs->sectorsize, &c, why,
				   sizeof(why)) < 0)
			continue;
		int rc = add_old_chunk(f, c, e->generation);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------ the scan */

struct found {
	struct bi_fx_block *v;
	size_t n, cap;
};

static int block_cmp(const void *pa, const void *pb);

/* Whether @b is a copy of @a: one block (bytenr, generation, checksum,
 * owner) found twice. */
static bool same_block(const struct bi_fx_block *a, const struct bi_fx_block *b)
{
	return a->bytenr == b->bytenr && a->generation == b->generation && a->csum8 == b->csum8 &&
	       a->owner == b->owner;
}

/* Drop the copies that today's chunk map places, but the first of each
 * block in block_cmp's order (the lowest device and offset): settle()
 * keeps that one of all the placed ones, and the copies it drops were
 * placed. Copies only an older chunk map might place are left for it. */
static void drop_copies(struct btrfsimg_forensic *f, struct found *fd)
{
	fx_qsort(fd->v, fd->n, sizeof(*fd->v), block_cmp);
	size_t w = 0;
	const struct bi_fx_block *kept = NULL; /* the first placed today of its block */
	for (size_t i = 0; i < fd->n; i++) {
		const struct bi_fx_block *e = &fd->v[i];
		if (e->today && kept && same_block(kept, e)) {
			f->stats.copies++;
			continue;
		}
		fd->v[w] = *e;
		if (e->today && (!kept || !same_block(kept, e)))
			kept = &fd->v[w];
		w++;
	}
	fd->n = w;
}

/* Append @e; when the array is full, drop copies first and grow only if
 * that did not free a quarter of it. */
static int push(struct btrfsimg_forensic *f, struct found *fd, const struct bi_fx_block *e)
{
	if (fd->n == fd->cap && fd->cap >= BI_GROW_FIRST) {
		drop_copies(f, fd);
		if (fd->n <= fd->cap - fd->cap / 4) {
			fd->v[fd->n++] = *e;
			return 0;
		}
	}
	if (bi_grow((void **)&fd->v, &fd->cap, fd->n + 1, sizeof(*fd->v)))
		return -ENOMEM;
	fd->v[fd->n++] = *e;
	return 0;
}

static bool super_position(uint64_t off, uint32_t nodesize)
{
	for (int i = 0; i < SB_MIRROR_MAX; i++) {
		uint64_t s = bi_super_offset(i);
		if (off < s + SB_SIZE && s < off + nodesize)
			return true;
	}
	return false;
}

struct scan_ctx {
	struct btrfsimg_forensic *f;
	struct found fd;
	btrfsimg_scan_progress_fn fn;
	void *ctx;
	uint64_t done, total;
	size_t piece;	/* bytes scanned per read (a multiple of sectorsize) */
	unsigned depth; /* ring buffers per device */
	uint8_t *buf;	/* piece + nodesize bytes for bi_dev_read, or NULL */
};

static int scan_piece(struct scan_ctx *s, const struct bi_dev *d, uint64_t pos, const uint8_t *buf,
		      size_t len)
{
	struct btrfsimg_fs *fs = s->f->fs;
	uint32_t ns = fs->nodesize;
	const uint8_t *fsid = fs->meta_fsid;
	for (size_t o = 0; o < s->piece && o + ns <= len; o += fs->sectorsize) {
		const uint8_t *p = buf + o;
		if (memcmp(p + HDR_FSID, fsid, 16) != 0 || super_position(pos + o, ns))
			continue;
		s->f->stats.candidates++;
		struct bi_fx_block e;
		bool bad;
		if (block_valid(fs, p, &e, &bad) < 0) {
			if (bad)
				s->f->stats.bad_csum++;
			else
				s->f->stats.bad_block++;
			continue;
		}
		e.devid = d->devid;
		e.physical = pos + o;
		const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, e.bytenr);
		e.today = c && chunk_places(c, e.bytenr, e.devid, e.physical);
		int rc = push(s->f, &s->fd, &e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The bytes read at @pos: the piece and the nodesize - sectorsize bytes
 * after it, so that a block starting in the piece is read whole. */
static size_t piece_len(const struct scan_ctx *s, const struct bi_dev *d, uint64_t pos)
{
	uint64_t want = (uint64_t)s->piece + s->f->fs->nodesize;
	return (size_t)(d->size - pos < want ? d->size - pos : want);
}

/* Whether the piece read at @pos is all a hole of the image file: zeros,
 * so no block (a zero fsid would make zeros candidates, which the stats
 * count: then every piece is read). */
static bool piece_hole(const struct scan_ctx *s, const struct bi_dev *d, uint64_t pos,
		       uint64_t *data)
{
	static const uint8_t zero[16];
	return memcmp(s->f->fs->meta_fsid, zero, 16) != 0 &&
	       bi_dev_hole(d, pos, piece_len(s, d, pos), data);
}

/* Queue the pieces from *sub on that are not holes, while the ring has
 * room; *sub ends at the first piece not queued. */
static void queue_pieces(struct scan_ctx *s, const struct bi_dev *d, struct bi_ring *ring,
			 uint64_t *sub, uint64_t *data)
{
	for (; *sub < d->size; *sub += s->piece) {
		if (piece_hole(s, d, *sub, data))
			continue;
		if (!bi_ring_room(ring))
			break;
		bi_ring_submit(ring, *sub, piece_len(s, d, *sub));
	}
}

/* A device from end to end, piece by piece. A plain image file is read by
 * a ring (ring.h) that keeps depth - 1 pieces in flight while one is
 * checked, past the file's holes (a sparse image's unwritten space holds
 * no block); anything else, and any piece the ring could not read,
 * through bi_dev_read (whose message names the device and the range). */
static int scan_device(struct scan_ctx *s, const struct bi_dev *d)
{
	struct btrfsimg_fs *fs = s->f->fs;
	struct bi_ring *ring = bi_ring_open(d, s->piece + fs->nodesize, s->depth, true);
	uint64_t sub = 0;		 /* the next piece to queue */
	uint64_t sub_data = 0, data = 0; /* bi_dev_hole's, of the queue and of the scan */
	int rc = 0;
	for (uint64_t pos = 0; pos < d->size && rc == 0; pos += s->piece) {
		bool hole = piece_hole(s, d, pos, &data);
		if (ring)
			queue_pieces(s, d, ring, &sub, &sub_data);
		size_t len = piece_len(s, d, pos);
		const uint8_t *p = NULL;
		if (!hole && (!ring || bi_ring_next(ring, &p) < 0)) {
			if (!s->buf && !(s->buf = malloc(s->piece + fs->nodesize))) {
				rc = -ENOMEM;
				break;
			}
			if (!ring)
				bi_dev_prefetch(d, pos + s->piece, s->piece);
			p = s->buf;
			if (bi_dev_read(fs, d, pos, s->buf, len) < 0) {
				bi_damage(fs, "forensic scan: %s: %s (skipped)", d->name, fs->err);
				p = NULL;
			}
		}
		if (p)
			rc = scan_piece(s, d, pos, p, len);
		if (ring && !hole)
			bi_ring_release(ring);
		uint64_t step = d->size - pos < s->piece ? d->size - pos : s->piece;
		s->done += step;
		s->f->stats.bytes += step;
		if (rc == 0 && s->fn)
			s->fn(s->ctx, s->done, s->total);
	}
	bi_ring_close(ring);
	if (rc == 0)
		s->f->stats.devices++;
	return rc;
}

static int block_cmp(const void *pa, const void *pb)
{
	const struct bi_fx_block *a = pa, *b = pb;
	if (a->owner != b->owner)
		return a->owner < b->owner ? -1 : 1;
	if (a->generation != b->generation)
		return a->generation < b->generation ? -1 : 1;
	if (a->level != b->level)
		return a->level < b->level ? -1 : 1;
	int c = bi_key_cmp(&a->first, &b->first);
	if (c)
		return c;
	if (a->bytenr != b->bytenr)
		return a->bytenr < b->bytenr ? -1 : 1;
	if (a->csum8 != b->csum8)
		return a->csum8 < b->csum8 ? -1 : 1;
	if (a->devid != b->devid)
		return a->devid < b->devid ? -1 : 1;
	return a->physical < b->physical ? -1 : a->physical > b->physical;
}

/* Older chunk maps: the chunk items of chunk-tree leaves that a map
 * already trusted places (today's, then the older ones found so far,
 * until nothing new turns up). A leaf nobody places adds nothing. */
static int old_chunk_maps(struct btrfsimg_forensic *f, struct found *fd)
{
	bool *used = calloc(fd->n ? fd->n : 1, sizeof(*used));
	if (!used)
		return -ENOMEM;
	int rc = 0;
	for (bool more = true; more && rc == 0;) {
		more = false;
		for (size_t i = 0; i < fd->n && rc == 0; i++) {
			const struct bi_fx_block *e = &fd->v[i];
			if (used[i] || e->owner != OBJ_CHUNK_TREE || e->level != 0 || !placed(f, e))
				continue;
			used[i] = true;
			size_t before = f->nchunks;
			if (bi_fx_read_block(f, e) == 0)
				rc = leaf_chunks(f, f->buf, e);
			more |= f->nchunks != before;
		}
	}
	free(used);
	return rc;
}

/* Keep placed blocks, one entry per (bytenr, generation, checksum). */
static int settle(struct btrfsimg_forensic *f, struct found *fd)
{
	int rc = old_chunk_maps(f, fd);
	if (rc < 0)
		return rc;
	size_t w = 0;
	for (size_t i = 0; i < fd->n; i++) {
		if (!placed(f, &fd->v[i])) {
			f->stats.unmapped++;
			continue;
		}
		fd->v[w++] = fd->v[i];
	}
	fx_qsort(fd->v, w, sizeof(*fd->v), block_cmp);
	size_t u = 0;
	for (size_t i = 0; i < w; i++) {
		const struct bi_fx_block *p = u ? &fd->v[u - 1] : NULL;
		if (p && p->bytenr == fd->v[i].bytenr && p->generation == fd->v[i].generation &&
		    p->csum8 == fd->v[i].csum8 && p->owner == fd->v[i].owner) {
			f->stats.copies++;
			continue;
		}
		fd->v[u++] = fd->v[i];
	}
	f->blocks = fd->v;
	f->nblocks = u;
	f->stats.blocks = u;
	fd->v = NULL;
	return 0;
}

/* ------------------------------------------------------------ superblocks */

static int add_sroot(struct btrfsimg_forensic *f, uint64_t gen, uint64_t bytenr, uint64_t fs_bytenr,
		     uint64_t fs_gen)
{
	if (!gen || !bytenr)
		return 0;
	for (size_t i = 0; i < f->nsroots; i++)
		if (f->sroots[i].generation == gen && f->sroots[i].bytenr == bytenr) {
			if (!f->sroots[i].fs_bytenr)
				f->sroots[i].fs_bytenr = fs_bytenr, f->sroots[i].fs_gen = fs_gen;
			return 0;
		}
	struct bi_fx_super_root *n = realloc(f->sroots, (f->nsroots + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	f->sroots = n;
	f->sroots[f->nsroots++] = (struct bi_fx_super_root){ gen, bytenr, fs_bytenr, fs_gen };
	return 0;
}

/* The root and backup roots of every valid copy on every device. */
static int super_roots(struct btrfsimg_forensic *f)
{
	struct btrfsimg_fs *fs = f->fs;
	uint8_t buf[SB_SIZE];
	struct bi_super *sb = malloc(sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	int rc = 0;
	for (size_t d = 0; d < fs->ndevs && rc == 0; d++) {
		const struct bi_dev *dev = &fs->devs[d];
		for (int m = 0; m < SB_MIRROR_MAX && rc == 0; m++) {
			uint64_t off = bi_super_offset(m);
			char why[256];
			if (!dev->member || off + SB_SIZE > dev->size ||
			    bi_dev_read(fs, dev, off, buf, SB_SIZE) < 0 ||
			    bi_super_parse(buf, SB_SIZE, off, sb, why, sizeof(why)) !=
				    BTRFSIMG_MIRROR_VALID ||
			    memcmp(sb->info.fsid, fs->sb.info.fsid, 16) != 0)
				continue;
			rc = add_sroot(f, sb->info.generation, sb->info.root, 0, 0);
			for (int b = 0; b < BACKUP_ROOTS && rc == 0; b++) {
				const uint8_t *p = buf + SB_SUPER_ROOTS + (size_t)b * BACKUP_SIZE;
				rc = add_sroot(f, bi_le64(p + 8), bi_le64(p), bi_le64(p + 48),
					       bi_le64(p + 56));
			}
		}
	}
	free(sb);
	return rc;
}

/* ------------------------------------------------------------ API */

int bi_fx_scan(btrfsimg_fs *fs, size_t piece, unsigned depth, btrfsimg_scan_progress_fn fn,
	       void *ctx, btrfsimg_forensic **out)
{
	if (!fs || !out)
		return -EINVAL;
	if (!bi_opened(fs, "btrfsimg_forensic_scan"))
		return -EINVAL;
	if (piece == 0 || piece % fs->sectorsize || piece > SCAN_MAX)
		return bi_err(fs, -EINVAL, "forensic scan: piece of %zu bytes", piece);
	struct btrfsimg_forensic *f = calloc(1, sizeof(*f));
	struct scan_ctx s = { .f = f, .fn = fn, .ctx = ctx, .piece = piece, .depth = depth };
	int rc = -ENOMEM;
	if (!f || !(f->buf = malloc(fs->nodesize)))
		goto out;
	f->fs = fs;
	for (size_t i = 0; i < fs->ndevs; i++)
		if (fs->devs[i].member)
			s.total += fs->devs[i].size;
	rc = super_roots(f);
	for (size_t i = 0; i < fs->ndevs && rc == 0; i++)
		if (fs->devs[i].member)
			rc = scan_device(&s, &fs->devs[i]);
	if (rc == 0)
		rc = settle(f, &s.fd);
out:
	free(s.buf);
	free(s.fd.v);
	if (rc < 0) {
		bi_fx_index_free(f);
		return rc == -ENOMEM ? bi_err(fs, rc, "forensic scan: out of memory") : rc;
	}
	*out = f;
	return 0;
}

int btrfsimg_forensic_scan(btrfsimg_fs *fs, btrfsimg_scan_progress_fn fn, void *ctx,
			   btrfsimg_forensic **out)
{
	return bi_fx_scan(fs, SCAN_BUF, SCAN_DEPTH, fn, ctx, out);
}

void bi_fx_index_free(struct btrfsimg_forensic *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nchunks; i++)
		free(f->chunks[i].c);
	free(f->chunks);
	free(f->sroots);
	free(f->blocks);
	free(f->buf);
	free(f);
}

int btrfsimg_forensic_stats(const btrfsimg_forensic *f, struct btrfsimg_scan_stats *out)
{
	if (!f || !out)
		return -EINVAL;
	*out = f->stats;
	return 0;
}

int btrfsimg_forensic_blocks(btrfsimg_forensic *f, btrfsimg_tree_block_fn fn, void *ctx)
{
	if (!f || !fn)
		return -EINVAL;
	for (size_t i = 0; i < f->nblocks; i++) {
		const struct bi_fx_block *e = &f->blocks[i];
		struct btrfsimg_tree_block b = { e->bytenr,   e->generation, e->owner,
						 e->level,    e->nritems,    e->devid,
						 e->physical, e->first,	     e->last };
		int rc = fn(ctx, &b);
		if (rc)
			return rc;
	}
	return 0;
}

void bi_fx_owner_range(const struct btrfsimg_forensic *f, uint64_t owner, size_t *lo, size_t *hi)
{
	size_t a = 0, b = f->nblocks;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (f->blocks[m].owner < owner)
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	b = f->nblocks;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (f->blocks[m].owner <= owner)
			a = m + 1;
		else
			b = m;
	}
	*hi = a;
}

int bi_fx_map(struct btrfsimg_forensic *f, uint64_t logical, uint64_t *devid, uint64_t *physical,
	      uint64_t *room, bool *old)
{
	const struct bi_chunk *c = bi_chunk_lookup(f->fs->chunks, logical);
	*old = false;
	for (size_t i = 0; !c && i < f->nchunks; i++) {
		const struct bi_chunk *o = f->chunks[i].c;
		if (logical >= o->logical && logical - o->logical < o->length) {
			c = o;
			*old = true;
		}
	}
	struct bi_phys p;
	if (!c || bi_chunk_map_phys(c, logical, 0, &p) < 0)
		return -ENOENT;
	*devid = p.devid;
	*physical = p.physical;
	*room = p.len;
	return 0;
}
