/* SPDX-License-Identifier: MIT */
/*
 * The salvage scan: every tree block on the devices, found by position,
 * for an open whose superblocks, chunk tree or root tree are gone.
 *
 * Each device is read once, front to back, in SCAN_PIECE pieces (each read
 * with the largest nodesize's worth more, so that a block across a piece
 * boundary is whole), by the ring reader (image/ring.h) where it can:
 * reads kept in flight while a piece is checked. At every 4 KiB boundary a header is a candidate when
 * it looks written by the kernel: the WRITTEN flag and backref revision 1,
 * a level below MAX_LEVEL, a nonzero generation and a sector-aligned
 * bytenr. A candidate of a filesystem already seen is checked under that
 * filesystem's nodesize and checksum type; one of a new fsid is tried
 * under each checksum type and nodesize until one verifies (a block
 * verifies under exactly one: the checksum covers [32, nodesize)). Then the
 * tree checker's header and item checks (bi_block_check) with the header's
 * own bytenr. Where the block sits is not trusted here: the salvage uses a
 * block only through a map that puts it where it was found.
 *
 * This is apart from the forensic scan (forensic/block_scan.c) because
 * the open needs it below the file layer and before any chunk map exists;
 * it keeps only what an open needs (scan.h), so its memory follows the
 * number of trees and chunks, not of blocks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage_scan.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "image/dev.h"
#include "image/ring.h"

#define SCAN_PIECE    (8u << 20)
/* pieces in the ring: three read ahead while one is checked */
#define SCAN_DEPTH    4u
#define SCAN_STEP     4096u
#define NODESIZE_MAX  65536u
#define HDR_WRITTEN   1ull
#define BACKREF_REV_1 1ull
/* grow the index up to this many entries between compactions */
#define SCAN_CAP_MIN  4096u

static const int csum_types[] = { CSUM_TYPE_CRC32C, CSUM_TYPE_XXHASH, CSUM_TYPE_SHA256,
				  CSUM_TYPE_BLAKE2 };

static bool looks_written(const uint8_t *h, uint64_t room)
{
	if (room < HDR_SIZE)
		return false;
	uint64_t flags = bi_le64(h + HDR_FLAGS), bytenr = bi_le64(h + HDR_BYTENR);
	return (flags & HDR_WRITTEN) && (flags >> 56) == BACKREF_REV_1 &&
	       (flags & ~(HDR_WRITTEN | 2ull | (0xffull << 56))) == 0 && h[HDR_LEVEL] < MAX_LEVEL &&
	       bi_le64(h + HDR_GENERATION) != 0 && bytenr != 0 && bytenr % SCAN_STEP == 0 &&
	       !bi_uuid_is_zero(h + HDR_FSID);
}

static bool csum_ok(const uint8_t *blk, uint32_t nodesize, int type)
{
	uint8_t sum[CSUM_SIZE_MAX];
	size_t n = bi_csum_size(type);
	return n && bi_csum(type, blk + HDR_FSID, nodesize - HDR_FSID, sum) == 0 &&
	       memcmp(sum, blk, n) == 0;
}

static bool checked(const uint8_t *blk, uint32_t nodesize)
{
	char why[256];
	return bi_block_check(blk, nodesize, bi_le64(blk + HDR_BYTENR), blk + HDR_FSID, NULL, why,
			      sizeof(why)) == 0;
}

/* A new filesystem: the pair (checksum type, nodesize) the block verifies
 * under, or -1. */
static int learn_fs(struct bi_sv_scan *s, const uint8_t *blk, uint64_t room)
{
	for (size_t t = 0; t < sizeof(csum_types) / sizeof(*csum_types); t++)
		for (uint32_t ns = 4096; ns <= NODESIZE_MAX && ns <= room; ns <<= 1) {
			if (!csum_ok(blk, ns, csum_types[t]) || !checked(blk, ns))
				continue;
			if (s->nfs >= BI_SV_MAX_FS)
				return -1;
			struct bi_sv_fs *f = &s->fss[s->nfs];
			memset(f, 0, sizeof(*f));
			memcpy(f->fsid, blk + HDR_FSID, 16);
			memcpy(f->chunk_uuid, blk + HDR_CHUNK_TREE_UUID, 16);
			f->nodesize = ns;
			f->csum_type = csum_types[t];
			f->gen_min = UINT64_MAX;
			return (int)s->nfs++;
		}
	return -1;
}

static int fs_of(struct bi_sv_scan *s, const uint8_t *blk, uint64_t room)
{
	for (unsigned i = 0; i < s->nfs; i++) {
		const struct bi_sv_fs *f = &s->fss[i];
		if (memcmp(f->fsid, blk + HDR_FSID, 16) != 0)
			continue;
		if (f->nodesize > room || !csum_ok(blk, f->nodesize, f->csum_type) ||
		    !checked(blk, f->nodesize))
			return -1;
		return (int)i;
	}
	return -2; /* an fsid not seen yet */
}

/* Whether a leaf holds a block-group item (of the extent or block-group
 * tree): the item table was checked, so every key is inside the block. */
static bool has_bg_item(const uint8_t *blk, uint32_t nritems)
{
	for (uint32_t i = 0; i < nritems; i++)
		if (blk[HDR_SIZE + (size_t)i * ITEM_SIZE + 8] == KT_BLOCK_GROUP_ITEM)
			return true;
	return false;
}

/* Kept whatever its generation (see struct bi_sv_scan). */
static bool keep_all(const struct bi_sv_blk *b, const uint8_t *blk)
{
	if (b->owner == OBJ_ROOT_TREE || b->owner == OBJ_CHUNK_TREE || b->owner == OBJ_DEV_TREE)
		return true;
	return (b->owner == OBJ_EXTENT_TREE || b->owner == OBJ_BLOCK_GROUP_TREE) && b->level == 0 &&
	       has_bg_item(blk, b->nritems);
}

static int blk_cmp(const void *pa, const void *pb)
{
	const struct bi_sv_blk *a = pa, *b = pb;
#define CMP(x, y) if ((x) != (y)) return (x) < (y) ? -1 : 1
	CMP(a->fsidx, b->fsidx);
	CMP(a->owner, b->owner);
	CMP(b->generation, a->generation);
	CMP(b->level, a->level);
	CMP(a->bytenr, b->bytenr);
	CMP(a->dev, b->dev);
	CMP(a->physical, b->physical);
#undef CMP
	return 0;
}

/* Entries not kept whatever their generation carry this bit in nritems'
 * place until the end (their nritems is not used). */
#define TOP_MARK 0x80000000u

/* Keep, per (filesystem, tree), all keep_all entries and, of the others,
 * the highest-level blocks of each of the newest BI_SV_TOPS generations
 * (at most BI_SV_SAME_GEN, copies included). */
static void compact(struct bi_sv_scan *s)
{
	if (s->n > 1)
		qsort(s->blk, s->n, sizeof(*s->blk), blk_cmp);
	size_t w = 0, gens = 0, same = 0;
	const struct bi_sv_blk *prev = NULL;
	struct bi_sv_blk keep = { 0 };
	for (size_t r = 0; r < s->n; r++) {
		struct bi_sv_blk *b = &s->blk[r];
		if (!(b->nritems & TOP_MARK)) {
			s->blk[w++] = *b;
			continue;
		}
		bool same_tree = prev && prev->fsidx == b->fsidx && prev->owner == b->owner;
		if (!same_tree) {
			gens = 0;
		} else if (keep.generation == b->generation) {
			/* a block written out during its transaction is copied
			 * again when changed: one generation can have several
			 * roots of a tree, and its extent tree tells which */
			if (keep.level == b->level && same < BI_SV_SAME_GEN) {
				s->blk[w++] = *b;
				same++;
			}
			continue;
		}
		if (gens >= BI_SV_TOPS) {
			prev = b;
			continue;
		}
		gens++;
		same = 1;
		keep = *b;
		prev = b;
		s->blk[w++] = *b;
	}
	s->n = w;
}

static int push(struct btrfsimg_fs *fs, struct bi_sv_scan *s, const struct bi_sv_blk *b)
{
	if (s->n == s->cap) {
		compact(s);
		if (s->n > s->cap / 2 || s->cap == 0) {
			size_t cap = s->cap ? s->cap * 2 : SCAN_CAP_MIN;
			struct bi_sv_blk *v = realloc(s->blk, cap * sizeof(*v));
			if (!v)
				return bi_err(fs, -ENOMEM, "salvage scan: out of memory for %zu blocks",
					      cap);
			s->blk = v;
			s->cap = cap;
		}
	}
	s->blk[s->n++] = *b;
	return 0;
}

static bool at_super(uint64_t off)
{
	for (int i = 0; i < SB_MIRROR_MAX; i++)
		if (off == bi_super_offset(i))
			return true;
	return false;
}

/* The per-filesystem summary (what `layers --scan` lists). */
static void count_block(struct bi_sv_fs *f, uint32_t dev, uint64_t off, uint64_t gen)
{
	f->nblocks++;
	if (gen > f->gen_max)
		f->gen_max = gen;
	if (gen < f->gen_min)
		f->gen_min = gen;
	if (f->last_dev != dev + 1) {
		f->ndevs++;
		f->last_dev = dev + 1;
	}
	if (f->nblocks == 1 || off < f->phys_min)
		f->phys_min = off;
	if (off > f->phys_max)
		f->phys_max = off;
}

bool bi_sv_fsid_wanted(const struct btrfsimg_fs *fs, const uint8_t uuid[16])
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; fs->want_fsid[i]; i++) {
		uint8_t nib = i % 2 ? uuid[i / 2] & 15 : uuid[i / 2] >> 4;
		if (digits[nib] != fs->want_fsid[i])
			return false;
	}
	return true;
}

/* One candidate at @off of device @dev: indexed if valid. */
static int one_block(struct btrfsimg_fs *fs, struct bi_sv_scan *s, bool known, uint32_t dev,
		     uint64_t off, const uint8_t *blk, uint64_t room)
{
	if (at_super(off) || !looks_written(blk, room))
		return 0;
	if (known && memcmp(blk + HDR_FSID, fs->meta_fsid, 16) != 0)
		return 0;
	int fi = fs_of(s, blk, room);
	if (fi == -2 && known)
		return 0;
	if (fi == -2)
		fi = learn_fs(s, blk, room);
	if (fi < 0) {
		if (fi == -1 && s->nfs >= BI_SV_MAX_FS)
			s->other_fs_blocks++;
		return 0;
	}
	struct bi_sv_fs *f = &s->fss[fi];
	count_block(f, dev, off, bi_le64(blk + HDR_GENERATION));
	if (!known && !bi_sv_fsid_wanted(fs, f->fsid))
		return 0; /* another filesystem than --fsid names: summed up only */
	struct bi_sv_blk b = { .physical = off,
				 .bytenr = bi_le64(blk + HDR_BYTENR),
				 .generation = bi_le64(blk + HDR_GENERATION),
				 .owner = bi_le64(blk + HDR_OWNER),
				 .dev = dev,
				 .nritems = bi_le32(blk + HDR_NRITEMS),
				 .level = blk[HDR_LEVEL],
				 .fsidx = (uint8_t)fi };
	if (s->only) { /* bi_sv_scan_trees: those trees' blocks, all of them */
		if (b.owner != OBJ_CSUM_TREE && b.owner != OBJ_FS_TREE &&
		    (b.owner < OBJ_FIRST_FREE || b.owner > OBJ_LAST_FREE))
			return 0;
		if (s->n >= BI_SV_TREE_MAX) {
			s->dropped++;
			return 0;
		}
	} else if (!keep_all(&b, blk)) {
		b.nritems |= TOP_MARK;
	}
	return push(fs, s, &b);
}

/* The bytes read at @pos: the piece and a largest block's worth after it,
 * so that a block starting in the piece is read whole. */
static size_t piece_len(uint64_t pos, uint64_t end)
{
	uint64_t want = (uint64_t)SCAN_PIECE + NODESIZE_MAX;
	return (size_t)(end - pos < want ? end - pos : want);
}

/* The candidates of piece [0, @piece) of @p (@len bytes read), every
 * @step bytes. */
static int scan_piece_step(struct btrfsimg_fs *fs, struct bi_sv_scan *s, bool known, uint32_t dev,
			   uint64_t pos, const uint8_t *p, size_t len, size_t piece, uint32_t step)
{
	for (uint64_t o = 0; o < piece && o + HDR_SIZE <= len; o += step) {
		int rc = one_block(fs, s, known, dev, pos + o, p + o, len - o);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* an image not placed yet: its filesystem may start at any sector */
#define UNPLACED_STEP 512u

static int scan_piece(struct btrfsimg_fs *fs, struct bi_sv_scan *s, bool known, uint32_t dev,
		      uint64_t pos, const uint8_t *p, size_t len)
{
	uint32_t step = fs->devs[dev].unplaced ? UNPLACED_STEP : SCAN_STEP;
	return scan_piece_step(fs, s, known, dev, pos, p, len, SCAN_PIECE, step);
}

int bi_sv_scan_observe(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t pos,
		       const uint8_t *p, size_t len, size_t piece)
{
	size_t k = (size_t)(d - fs->devs);
	if (d < fs->devs || k >= fs->ndevs || k >= BI_MAX_DEVS)
		return 0; /* not one of the handle's devices */
	if (!fs->pending && !(fs->pending = calloc(BI_MAX_DEVS, sizeof(*fs->pending))))
		return bi_err(fs, -ENOMEM, "salvage scan: out of memory");
	struct bi_sv_scan *s = fs->pending[k];
	if (!s) {
		if (!(s = fs->pending[k] = calloc(1, sizeof(*s))))
			return bi_err(fs, -ENOMEM, "salvage scan: out of memory");
		memcpy(s->want, fs->want_fsid, sizeof(s->want));
	}
	int rc = scan_piece_step(fs, s, false, (uint32_t)k, pos, p, len, piece, UNPLACED_STEP);
	s->bytes += len < piece ? len : piece;
	s->whole = rc == 0 && pos + piece >= d->raw_size;
	return rc;
}

void bi_sv_scan_pending_free(struct btrfsimg_fs *fs)
{
	for (size_t k = 0; fs->pending && k < BI_MAX_DEVS; k++)
		bi_sv_scan_free(fs->pending[k]);
	free(fs->pending);
	fs->pending = NULL;
}

/* The pending scan of device @k, if it stands for reading it now: made
 * under the same --fsid over the whole image, the device still unplaced
 * with its window the whole image. */
static struct bi_sv_scan *pending_for(const struct btrfsimg_fs *fs, size_t k)
{
	const struct bi_dev *d = &fs->devs[k];
	struct bi_sv_scan *p = fs->pending && k < BI_MAX_DEVS ? fs->pending[k] : NULL;
	if (!p || !p->whole || !d->unplaced || d->base != 0 || d->size != d->raw_size ||
	    strcmp(p->want, fs->want_fsid) != 0)
		return NULL;
	return p;
}

/* The index of @s for filesystem @f of a pending scan, added when new
 * (not @known), or -1: one_block's choice, made per filesystem. */
static int fs_slot(struct btrfsimg_fs *fs, struct bi_sv_scan *s, bool known,
		   const struct bi_sv_fs *f)
{
	if (known)
		return !memcmp(f->fsid, fs->meta_fsid, 16) && f->nodesize == s->fss[0].nodesize &&
				       f->csum_type == s->fss[0].csum_type ? 0 : -1;
	for (unsigned i = 0; i < s->nfs; i++)
		if (!memcmp(s->fss[i].fsid, f->fsid, 16))
			return f->nodesize == s->fss[i].nodesize &&
					       f->csum_type == s->fss[i].csum_type ? (int)i : -1;
	if (s->nfs >= BI_SV_MAX_FS)
		return -1;
	struct bi_sv_fs *n = &s->fss[s->nfs];
	*n = *f;
	n->nblocks = 0;
	n->ndevs = 0;
	n->last_dev = 0;
	n->gen_min = UINT64_MAX;
	n->gen_max = 0;
	return (int)s->nfs++;
}

/* A filesystem's counts from a pending scan of device @k added to @to. */
static void add_counts(struct bi_sv_fs *to, const struct bi_sv_fs *from, uint32_t k)
{
	if (!from->nblocks)
		return;
	if (!to->nblocks || from->phys_min < to->phys_min)
		to->phys_min = from->phys_min;
	if (from->phys_max > to->phys_max)
		to->phys_max = from->phys_max;
	if (from->gen_min < to->gen_min)
		to->gen_min = from->gen_min;
	if (from->gen_max > to->gen_max)
		to->gen_max = from->gen_max;
	to->nblocks += from->nblocks;
	if (to->last_dev != k + 1) {
		to->ndevs++;
		to->last_dev = k + 1;
	}
}

/* Device @k's pending scan taken into @s instead of a read. */
static int take_pending(struct btrfsimg_fs *fs, struct bi_sv_scan *s, bool known, uint32_t k,
			const struct bi_sv_scan *p)
{
	int map[BI_SV_MAX_FS];
	for (unsigned i = 0; i < p->nfs; i++) {
		map[i] = fs_slot(fs, s, known, &p->fss[i]);
		if (map[i] >= 0)
			add_counts(&s->fss[map[i]], &p->fss[i], k);
		else if (!known)
			s->other_fs_blocks += p->fss[i].nblocks;
	}
	s->other_fs_blocks += known ? 0 : p->other_fs_blocks;
	s->bytes += p->bytes;
	for (size_t i = 0; i < p->n; i++) {
		struct bi_sv_blk b = p->blk[i];
		if (map[b.fsidx] < 0)
			continue;
		b.fsidx = (uint8_t)map[b.fsidx];
		int rc = push(fs, s, &b);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The progress callback's word: 0 go on, else stop (-ECANCELED). */
static int say_progress(struct btrfsimg_fs *fs, uint64_t done, uint64_t total)
{
	if (!fs->scan_progress || fs->scan_progress(fs->scan_progress_ctx, done, total) == 0)
		return 0;
	return bi_err(fs, -ECANCELED, "salvage scan: stopped at byte %" PRIu64 " of %" PRIu64,
		      done, total);
}

/* A member's blocks lie inside the size its superblock gives it. */
static uint64_t scan_end(const struct bi_dev *d, bool known)
{
	return known && d->member && d->total_bytes && d->total_bytes < d->size ? d->total_bytes
										  : d->size;
}

/* A device front to back. A plain image file is read by a ring (image/
 * ring.h) that keeps pieces in flight while one is checked; anything else, and a piece the ring could not read, through
 * bi_dev_read (whose message names the device and the range). */
static int scan_device(struct btrfsimg_fs *fs, struct bi_sv_scan *s, bool known, uint32_t dev,
		       uint8_t *buf, uint64_t total)
{
	const struct bi_dev *d = &fs->devs[dev];
	uint64_t end = scan_end(d, known), sub = 0;
	/* through the page cache: every command on a damaged image scans it
	 * again, and a second scan of an image the cache holds is free */
	struct bi_ring *ring = bi_ring_open(d, (size_t)SCAN_PIECE + NODESIZE_MAX, SCAN_DEPTH, true);
	int rc = 0;
	for (uint64_t pos = 0; pos < end && rc == 0; pos += SCAN_PIECE) {
		for (; ring && sub < end && bi_ring_room(ring); sub += SCAN_PIECE)
			bi_ring_submit(ring, sub, piece_len(sub, end));
		size_t len = piece_len(pos, end);
		const uint8_t *p = NULL;
		if (!ring || bi_ring_next(ring, &p) < 0) {
			rc = bi_dev_read(fs, d, pos, buf, len);
			p = buf;
		}
		if (rc == 0)
			rc = scan_piece(fs, s, known, dev, pos, p, len);
		if (ring)
			bi_ring_release(ring);
		s->bytes += len < SCAN_PIECE ? len : SCAN_PIECE;
		if (rc == 0)
			rc = say_progress(fs, s->bytes, total);
	}
	bi_ring_close(ring);
	return rc;
}

static int scan_all(struct btrfsimg_fs *fs, bool known, struct bi_sv_scan *s,
		    struct bi_sv_scan **out);

int bi_sv_scan_devices(struct btrfsimg_fs *fs, bool known, struct bi_sv_scan **out)
{
	*out = NULL;
	return scan_all(fs, known, calloc(1, sizeof(struct bi_sv_scan)), out);
}

int bi_sv_scan_trees(struct btrfsimg_fs *fs, struct bi_sv_scan **out)
{
	*out = NULL;
	struct bi_sv_scan *s = calloc(1, sizeof(*s));
	if (s)
		s->only = true;
	return scan_all(fs, true, s, out);
}

/* Scan into @s (taken: freed on failure, else *@out). */
static int scan_all(struct btrfsimg_fs *fs, bool known, struct bi_sv_scan *s,
		    struct bi_sv_scan **out)
{
	uint8_t *buf = malloc((size_t)SCAN_PIECE + NODESIZE_MAX);
	int rc = 0;
	if (!s || !buf) {
		rc = bi_err(fs, -ENOMEM, "salvage scan: out of memory");
		goto out;
	}
	if (known) { /* the superblock's filesystem only */
		struct bi_sv_fs *f = &s->fss[s->nfs++];
		memcpy(f->fsid, fs->meta_fsid, 16);
		f->nodesize = fs->nodesize;
		f->csum_type = fs->csum_type;
		f->gen_min = UINT64_MAX;
	}
	uint64_t total = 0;
	for (size_t k = 0; k < fs->ndevs; k++)
		if (!fs->devs[k].absorbed)
			total += scan_end(&fs->devs[k], known);
	for (size_t k = 0; k < fs->ndevs && rc == 0; k++) {
		const struct bi_sv_scan *p = pending_for(fs, k);
		if (fs->devs[k].absorbed)
			continue;
		rc = p ? take_pending(fs, s, known, (uint32_t)k, p)
		       : scan_device(fs, s, known, (uint32_t)k, buf, total);
	}
	if (rc == 0) {
		compact(s);
		for (size_t i = 0; i < s->n; i++)
			s->blk[i].nritems &= ~TOP_MARK;
		*out = s;
		s = NULL;
	}
out:
	free(buf);
	bi_sv_scan_free(s);
	return rc;
}

void bi_sv_scan_free(struct bi_sv_scan *s)
{
	if (!s)
		return;
	free(s->blk);
	free(s);
}

int bi_sv_scan_reread(struct btrfsimg_fs *fs, const struct bi_sv_scan *s, const struct bi_sv_blk *b,
		   uint8_t *buf)
{
	const struct bi_sv_fs *f = &s->fss[b->fsidx];
	int rc = bi_dev_read(fs, &fs->devs[b->dev], b->physical, buf, f->nodesize);
	if (rc < 0)
		return rc;
	if (memcmp(buf + HDR_FSID, f->fsid, 16) != 0 || !csum_ok(buf, f->nodesize, f->csum_type) ||
	    !checked(buf, f->nodesize) || bi_le64(buf + HDR_BYTENR) != b->bytenr ||
	    bi_le64(buf + HDR_GENERATION) != b->generation)
		return bi_err(fs, -EIO,
			      "salvage: block %" PRIu64 " (device '%s' offset %" PRIu64
			      ") changed since the scan",
			      b->bytenr, fs->devs[b->dev].name, b->physical);
	return 0;
}
