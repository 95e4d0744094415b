/* SPDX-License-Identifier: MIT */
/*
 * Finding btrfs in an image whose partition table is gone or no longer
 * points at it (zeroed, or rewritten by an installer): by its superblocks.
 *
 * A superblock copy lies at 64 KiB, 64 MiB or 256 GiB into the filesystem,
 * and its bytenr field says which (kernel fs/btrfs/disk-io.c,
 * btrfs_sb_offset). A filesystem starts on a sector boundary, so a copy
 * found at image byte Q (Q 512-byte aligned, magic at Q + 0x40) whose
 * checksum verifies implies the start Q - bytenr. The image is read once,
 * front to back, in PIECE reads; the candidates kept are bounded
 * (CAND_MAX), so many forged magics cost reads and checksums, never more.
 *
 * A copy of a superblock inside a file (an image of a disk kept on the
 * disk, a backup of the first megabytes) verifies as well as the real
 * one. Evidence decides, not order: a start whose chunk-tree root block
 * verifies where its own sys_chunk_array places it (bytenr, fsid and
 * checksum) beats one whose does not, then the start more copies agree on,
 * then the newer generation.
 *
 * It is apart from part.c (the tables) because it reads the whole image,
 * and apart from the btrfs core because the volume stack needs its answer
 * (a window of the image) before any btrfs is opened.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/fsfind.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "volume/stack.h"

#define PIECE	     (4u << 20)
/* read past each piece: a superblock, or the largest tree block for the
 * salvage scan that sees the same pieces (fs->raw_piece) */
#define OVERLAP	     65536u
#define SECTOR	     512u
#define CAND_MAX     64
#define NODESIZE_MAX 65536u
#define KEY_SIZE     17

_Static_assert(BI_FOUND_MAX == BI_MAX_DEVS, "one cached answer per device");

struct cand {
	uint64_t start, generation;
	unsigned copies; /* bit i: copy i verified here */
	unsigned votes;
	int first; /* the copy first seen, and where */
	uint64_t first_at;
	bool chunk_ok;
	uint8_t sb[SB_SIZE]; /* the newest copy */
};

struct finder {
	struct btrfsimg_fs *fs;
	const struct bi_dev *d;
	struct cand *c; /* CAND_MAX, and one more: the newcomer */
	uint8_t *blk;	/* a tree block read to check a chunk root */
	unsigned n;
	uint64_t bad, dropped;
	bool sure; /* a start whose chunk root verifies was seen */
};

static bool sb_csum_ok(const uint8_t *sb)
{
	uint8_t sum[CSUM_SIZE_MAX];
	int type = bi_le16(sb + SB_CSUM_TYPE);
	size_t n = bi_csum_size(type);
	return n && bi_csum(type, sb + SB_CSUM_START, SB_SIZE - SB_CSUM_START, sum) == 0 &&
	       memcmp(sum, sb, n) == 0;
}

/* The copy index bytenr names, or -1. */
static int copy_of(uint64_t bytenr)
{
	for (int i = 0; i < SB_MIRROR_MAX; i++)
		if (bytenr == bi_super_offset(i))
			return i;
	return -1;
}

static bool chunk_root_ok(struct finder *f, const struct cand *c, uint8_t *blk);

/* A slot for a new start: a free one or, all CAND_MAX taken, that of one
 * whose chunk root did not verify when this one's does, so a flood of
 * forged copies before the filesystem cannot push it out. One block read
 * per new start (a valid copy takes 4 KiB of the image: bounded). */
static struct cand *new_slot(struct finder *f, const uint8_t *sb, uint64_t start, int copy,
			     uint64_t at)
{
	struct cand *c = &f->c[f->n < CAND_MAX ? f->n : CAND_MAX];
	memset(c, 0, sizeof(*c));
	c->start = start;
	c->first = copy;
	c->first_at = at;
	memcpy(c->sb, sb, SB_SIZE);
	c->chunk_ok = chunk_root_ok(f, c, f->blk);
	f->sure |= c->chunk_ok;
	if (f->n < CAND_MAX)
		return &f->c[f->n++];
	for (unsigned k = 0; c->chunk_ok && k < CAND_MAX; k++)
		if (!f->c[k].chunk_ok) {
			f->c[k] = *c;
			f->dropped++; /* the one pushed out */
			return &f->c[k];
		}
	return NULL;
}

static void consider(struct finder *f, const uint8_t *sb, uint64_t at)
{
	int i = copy_of(bi_le64(sb + SB_BYTENR));
	if (i < 0 || at < bi_super_offset(i) || !sb_csum_ok(sb)) {
		f->bad++;
		return;
	}
	uint64_t start = at - bi_super_offset(i), gen = bi_le64(sb + SB_GENERATION);
	struct cand *c = NULL;
	for (unsigned k = 0; k < f->n && !c; k++)
		if (f->c[k].start == start && !memcmp(f->c[k].sb + SB_FSID, sb + SB_FSID, 16))
			c = &f->c[k];
	if (!c)
		c = new_slot(f, sb, start, i, at);
	if (!c) {
		f->dropped++;
		return;
	}
	c->votes += !(c->copies & (1u << i));
	c->copies |= 1u << i;
	if (gen >= c->generation) {
		c->generation = gen;
		memcpy(c->sb, sb, SB_SIZE);
	}
}

/* One pass over the image; each piece read with OVERLAP more, so a copy
 * (or, for the salvage scan that sees the same pieces, a tree block)
 * across a piece boundary is whole. */
static int scan(struct finder *f, uint8_t *buf, uint64_t *bytes)
{
	uint64_t end = f->d->raw_size;
	for (uint64_t pos = 0; pos < end; pos += PIECE) {
		uint64_t want = end - pos < (uint64_t)PIECE + OVERLAP ? end - pos
								      : (uint64_t)PIECE + OVERLAP;
		int rc = bi_dev_read_raw(f->fs, f->d, pos, buf, (size_t)want);
		if (rc < 0)
			return rc;
		*bytes += want < PIECE ? want : PIECE;
		for (uint64_t o = 0; o < PIECE && o + SB_SIZE <= want; o += SECTOR)
			if (bi_le64(buf + o + SB_MAGIC_OFF) == SB_MAGIC)
				consider(f, buf + o, pos + o);
		/* a start whose chunk root verifies will be taken: the salvage
		 * will not need the tree blocks, and an unfinished index is
		 * never used (bi_sv_scan_devices reads the image itself) */
		if (f->fs->raw_piece && !f->sure &&
		    (rc = f->fs->raw_piece(f->fs, f->d, pos, buf, (size_t)want, PIECE)) < 0)
			return rc;
	}
	return 0;
}

/* Whether a tree block at image byte @at is @bytenr of the filesystem
 * whose superblock is @sb: header bytenr, fsid and checksum. */
static bool block_ok(struct finder *f, const uint8_t *sb, uint64_t at, uint64_t bytenr,
		     uint8_t *blk)
{
	uint32_t ns = bi_le32(sb + SB_NODESIZE);
	int type = bi_le16(sb + SB_CSUM_TYPE);
	const uint8_t *fsid = bi_le64(sb + SB_INCOMPAT_FLAGS) & INCOMPAT_METADATA_UUID
				      ? sb + SB_METADATA_UUID
				      : sb + SB_FSID;
	uint8_t sum[CSUM_SIZE_MAX];
	size_t n = bi_csum_size(type);
	if (ns < 4096 || ns > NODESIZE_MAX || (ns & (ns - 1)) || !n ||
	    !bi_fits64(f->d->raw_size, at, ns) || bi_dev_read_raw(f->fs, f->d, at, blk, ns) < 0) {
		f->fs->err[0] = '\0';
		return false;
	}
	return bi_le64(blk + HDR_BYTENR) == bytenr && !memcmp(blk + HDR_FSID, fsid, 16) &&
	       bi_csum(type, blk + HDR_FSID, ns - HDR_FSID, sum) == 0 && !memcmp(sum, blk, n);
}

/* Walk the copy's sys_chunk_array to the chunk holding the chunk root and
 * check the root block at each of its stripes, relative to c->start. */
static bool chunk_root_ok(struct finder *f, const struct cand *c, uint8_t *blk)
{
	const uint8_t *sb = c->sb;
	uint32_t size = bi_le32(sb + SB_SYS_CHUNK_ARRAY_SIZE);
	uint64_t root = bi_le64(sb + SB_CHUNK_ROOT);
	const uint8_t *a = sb + SB_SYS_CHUNK_ARRAY;
	if (size > SB_SYS_CHUNK_ARRAY_MAX)
		return false;
	for (size_t p = 0; bi_fits(size, p, KEY_SIZE + CHUNK_SIZE);) {
		uint64_t logical = bi_le64(a + p + 9);
		const uint8_t *ch = a + p + KEY_SIZE;
		uint16_t nst = bi_le16(ch + CHUNK_NUM_STRIPES);
		size_t len = KEY_SIZE + CHUNK_SIZE + (size_t)nst * STRIPE_SIZE;
		if (a[p + 8] != KT_CHUNK_ITEM || nst == 0 || !bi_fits(size, p, len))
			return false;
		uint64_t clen = bi_le64(ch + CHUNK_LENGTH);
		for (uint16_t s = 0; root >= logical && root - logical < clen && s < nst; s++) {
			uint64_t phys = bi_le64(ch + CHUNK_SIZE + (size_t)s * STRIPE_SIZE + 8);
			uint64_t at = c->start + phys + (root - logical);
			if (at >= c->start && block_ok(f, sb, at, root, blk))
				return true;
		}
		p += len;
	}
	return false;
}

/* Evidence order: a verified chunk root, more copies, newer, earlier. */
static bool better(const struct cand *a, const struct cand *b)
{
	if (a->chunk_ok != b->chunk_ok)
		return a->chunk_ok;
	if (a->votes != b->votes)
		return a->votes > b->votes;
	if (a->generation != b->generation)
		return a->generation > b->generation;
	return a->start < b->start;
}

static void describe(struct bi_found *out, const struct cand *c)
{
	if (c->first == 0)
		snprintf(out->how, sizeof(out->how), "superblock at byte %" PRIu64, c->first_at);
	else
		snprintf(out->how, sizeof(out->how), "superblock copy %d at byte %" PRIu64,
			 c->first, c->first_at);
	size_t used = strlen(out->how);
	if (c->votes > 1)
		snprintf(out->how + used, sizeof(out->how) - used, " (%u copies agree)", c->votes);
}

static void choose(struct finder *f, struct bi_found *out, uint8_t *blk)
{
	int best = -1;
	for (unsigned k = 0; k < f->n; k++) {
		f->c[k].chunk_ok = chunk_root_ok(f, &f->c[k], blk);
		if (best < 0 || better(&f->c[k], &f->c[best]))
			best = (int)k;
	}
	if (best < 0)
		return;
	const struct cand *c = &f->c[best];
	out->found = true;
	out->start = c->start;
	uint64_t total = bi_le64(c->sb + SB_DEV_ITEM + 8), room = f->d->raw_size - c->start;
	out->size = total && total < room ? total : room;
	memcpy(out->fsid, c->sb + SB_FSID, 16);
	memcpy(out->label, c->sb + SB_LABEL, SB_LABEL_SIZE);
	out->label[SB_LABEL_SIZE] = '\0';
	describe(out, c);
	size_t used = 0;
	for (unsigned k = 0; k < f->n && used < sizeof(out->others); k++)
		if ((int)k != best)
			used += (size_t)snprintf(out->others + used, sizeof(out->others) - used,
						 "%sstart %" PRIu64 " (%u cop%s%s)",
						 used ? ", " : "", f->c[k].start, f->c[k].votes,
						 f->c[k].votes == 1 ? "y" : "ies",
						 f->c[k].chunk_ok ? "" : ", chunk root not there");
}

static struct bi_found *slot(struct btrfsimg_fs *fs, const struct bi_dev *d)
{
	struct bi_vols *V = bi_vols_get(fs);
	size_t k = (size_t)(d - fs->devs);
	if (!V || d < fs->devs || k >= fs->ndevs || k >= BI_FOUND_MAX)
		return NULL;
	if (!V->found[k])
		V->found[k] = calloc(1, sizeof(*V->found[k]));
	return V->found[k];
}

int bi_fsfind(struct btrfsimg_fs *fs, const struct bi_dev *d, const struct bi_found **out)
{
	struct bi_found *r = slot(fs, d);
	*out = r;
	if (!r)
		return bi_err(fs, -ENOMEM, "image '%s': out of memory scanning for btrfs", d->name);
	if (r->done)
		return 0;
	uint8_t *buf = malloc((size_t)PIECE + OVERLAP), *blk = malloc(NODESIZE_MAX);
	struct finder f = { fs, d, calloc(CAND_MAX + 1, sizeof(struct cand)), blk, 0, 0, 0, false };
	int rc = f.c && buf && blk ? 0
				   : bi_err(fs, -ENOMEM,
					    "image '%s': out of memory scanning for "
					    "btrfs",
					    d->name);
	if (rc == 0)
		rc = scan(&f, buf, &r->bytes);
	if (rc == 0) {
		choose(&f, r, blk);
		r->done = true;
		if (f.dropped)
			bi_info(fs,
				"image '%s': superblock scan: %" PRIu64
				" filesystem starts past %d "
				"set aside unweighed (never one whose chunk root verifies for "
				"one whose does not)",
				d->name, f.dropped, CAND_MAX);
	}
	free(f.c);
	free(buf);
	free(blk);
	return rc;
}
