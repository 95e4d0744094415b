/* SPDX-License-Identifier: MIT */
/*
 * Salvage: where the filesystem starts in an image that says nothing of it
 * (no partition table, no superblock copy: volume/part.c leaves such a
 * device unplaced, its window the whole image).
 *
 * The salvage scan (salvage_scan.c) reads an unplaced device at every
 * 512-byte boundary, so a tree block is found at its image byte P. A
 * chunk item of a chunk-tree leaf found by the scan maps the block's
 * logical bytenr to a device offset D per stripe; the filesystem then
 * starts at P - D. Each block votes for the starts its stripes imply
 * (a DUP chunk gives two, one of them right); the start most blocks agree
 * on wins, never the first candidate. A forged leaf or block adds one
 * vote where the real filesystem's blocks add one each.
 *
 * Then the device becomes the window at start, as long as the DEV_ITEM of
 * the chunk-tree leaves says (bounded by the image), and every
 * entry of the index is moved into it (those before it dropped), so the
 * rest of the salvage (salvage.c, salvage_chunks.c, salvage_roots.c) runs
 * as on a device whose place was known.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/salvage.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/ondisk.h"
#include "btrfs/salvage_scan.h"
#include "image/dev.h"
#include "volume/vol.h"

#define CHUNKS_MAX  4096 /* distinct chunk items weighed */
#define STRIPES_MAX 16	 /* stripes of one chunk item weighed */
#define PER_BLOCK   8	 /* starts one block may vote for */
#define OVERLAP_MAX 8	 /* chunk items of other generations over one bytenr */
#define START_ALIGN 512u

struct pchunk {
	uint64_t logical, length;
	uint16_t nst;
	uint64_t phys[STRIPES_MAX];
};

struct votes {
	struct pchunk *c;
	size_t nc, ccap;
	uint64_t *start; /* one entry per (block, start) vote */
	size_t ns, scap;
	uint64_t devid, total; /* the DEV_ITEM found, if only one devid is */
	bool many_devids;
};

/* A DEV_ITEM: the device's size bounds its window, when the leaves name
 * one device only (else which one this image is is not known here). */
static void dev_item(struct votes *v, const uint8_t *it, const uint8_t *data, uint32_t size)
{
	if (bi_le64(it) != OBJ_DEV_ITEMS || size < 16)
		return;
	uint64_t devid = bi_le64(data), total = bi_le64(data + 8);
	v->many_devids |= v->devid && v->devid != devid;
	v->devid = devid;
	if (total > v->total)
		v->total = total;
}

static int pchunk_cmp(const void *pa, const void *pb)
{
	const struct pchunk *a = pa, *b = pb;
	if (a->logical != b->logical)
		return a->logical < b->logical ? -1 : 1;
	if (a->length != b->length)
		return a->length < b->length ? -1 : 1;
	return memcmp(a->phys, b->phys, sizeof(a->phys));
}

static int u64_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

/* The chunk items of leaf @buf (its item table checked by the scan). */
static int leaf_chunks(struct votes *v, const uint8_t *buf, uint32_t nodesize, uint32_t nritems)
{
	for (uint32_t k = 0; k < nritems && v->nc < CHUNKS_MAX; k++) {
		const uint8_t *it = buf + HDR_SIZE + (size_t)k * ITEM_SIZE;
		uint32_t off = bi_le32(it + ITEM_OFFSET), size = bi_le32(it + ITEM_DSIZE);
		if (!bi_fits(nodesize, (size_t)HDR_SIZE + off, size))
			continue;
		if (it[8] == KT_DEV_ITEM)
			dev_item(v, it, buf + HDR_SIZE + off, size);
		if (it[8] != KT_CHUNK_ITEM || size < CHUNK_SIZE)
			continue;
		const uint8_t *ch = buf + HDR_SIZE + off;
		uint16_t nst = bi_le16(ch + CHUNK_NUM_STRIPES);
		if (nst == 0 || (size_t)size < CHUNK_SIZE + (size_t)nst * STRIPE_SIZE)
			continue;
		if (bi_grow((void **)&v->c, &v->ccap, v->nc + 1, sizeof(*v->c)))
			return -ENOMEM;
		struct pchunk *c = &v->c[v->nc++];
		memset(c, 0, sizeof(*c));
		c->logical = bi_le64(it + 9);
		c->length = bi_le64(ch + CHUNK_LENGTH);
		c->nst = nst < STRIPES_MAX ? nst : STRIPES_MAX;
		for (uint16_t s = 0; s < c->nst; s++)
			c->phys[s] = bi_le64(ch + CHUNK_SIZE + (size_t)s * STRIPE_SIZE + 8);
	}
	return 0;
}

/* Every chunk item of filesystem @fi's chunk-tree leaves found on device
 * @dev, sorted by logical address, duplicates (older leaves) merged. */
static int gather_chunks(struct btrfsimg_fs *fs, const struct bi_sv_scan *s, uint32_t dev,
			 unsigned fi, struct votes *v)
{
	uint8_t *buf = malloc(s->fss[fi].nodesize);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; i < s->n && rc == 0; i++) {
		const struct bi_sv_blk *b = &s->blk[i];
		if (b->fsidx != fi || b->owner != OBJ_CHUNK_TREE || b->level != 0 || b->dev != dev)
			continue;
		if (bi_sv_scan_reread(fs, s, b, buf) < 0) {
			fs->err[0] = '\0';
			continue;
		}
		rc = leaf_chunks(v, buf, s->fss[fi].nodesize, b->nritems);
	}
	free(buf);
	if (v->nc > 1)
		qsort(v->c, v->nc, sizeof(*v->c), pchunk_cmp);
	size_t w = 0;
	for (size_t r = 0; r < v->nc; r++)
		if (w == 0 || pchunk_cmp(&v->c[w - 1], &v->c[r]) != 0)
			v->c[w++] = v->c[r];
	v->nc = w;
	return rc;
}

/* The starts block @b implies, each once, appended to v->start. */
static int block_votes(struct votes *v, const struct bi_sv_blk *b)
{
	uint64_t mine[PER_BLOCK];
	size_t n = 0, a = 0, z = v->nc;
	while (a < z) { /* the first chunk item past b->bytenr */
		size_t m = a + (z - a) / 2;
		if (v->c[m].logical <= b->bytenr)
			a = m + 1;
		else
			z = m;
	}
	for (size_t k = a, seen = 0; k-- > 0 && seen < OVERLAP_MAX; seen++) {
		const struct pchunk *c = &v->c[k];
		if (b->bytenr - c->logical >= c->length)
			continue;
		for (uint16_t s = 0; s < c->nst && n < PER_BLOCK; s++) {
			uint64_t d = c->phys[s] + (b->bytenr - c->logical);
			bool dup = false;
			for (size_t j = 0; j < n; j++)
				dup |= mine[j] == b->physical - d;
			if (d <= b->physical && (b->physical - d) % START_ALIGN == 0 && !dup)
				mine[n++] = b->physical - d;
		}
	}
	if (n == 0)
		return 0;
	if (bi_grow((void **)&v->start, &v->scap, v->ns + n, sizeof(*v->start)))
		return -ENOMEM;
	memcpy(v->start + v->ns, mine, n * sizeof(*mine));
	v->ns += n;
	return 0;
}

/* The start most votes name (*best votes), and the runner-up's votes. */
static uint64_t tally(struct votes *v, size_t *best, size_t *second)
{
	uint64_t pick = 0;
	*best = *second = 0;
	if (v->ns > 1)
		qsort(v->start, v->ns, sizeof(*v->start), u64_cmp);
	for (size_t i = 0, j; i < v->ns; i = j) {
		for (j = i; j < v->ns && v->start[j] == v->start[i]; j++)
			;
		if (j - i > *best) {
			*second = *best;
			*best = j - i;
			pick = v->start[i];
		} else if (j - i > *second)
			*second = j - i;
	}
	return pick;
}

/* Move device @dev's index entries into the window at @start. */
static void shift_index(struct bi_sv_scan *s, uint32_t dev, uint64_t start, uint64_t size)
{
	size_t w = 0;
	for (size_t r = 0; r < s->n; r++) {
		struct bi_sv_blk b = s->blk[r];
		if (b.dev == dev) {
			if (b.physical < start || b.physical - start >= size)
				continue;
			b.physical -= start;
		}
		s->blk[w++] = b;
	}
	s->n = w;
}

static int place_one(struct btrfsimg_fs *fs, struct bi_sv_scan *s, uint32_t dev, unsigned fi)
{
	struct bi_dev *d = &fs->devs[dev];
	struct votes v = { 0 };
	size_t blocks = 0, best, second;
	int rc = gather_chunks(fs, s, dev, fi, &v);
	for (size_t i = 0; i < s->n && rc == 0; i++)
		if (s->blk[i].dev == dev && s->blk[i].fsidx == fi) {
			blocks++;
			rc = block_votes(&v, &s->blk[i]);
		}
	uint64_t start = rc == 0 ? tally(&v, &best, &second) : 0;
	size_t nchunks = v.nc;
	uint64_t total = v.many_devids ? 0 : v.total;
	free(v.c);
	free(v.start);
	if (rc < 0)
		return bi_err(fs, rc, "salvage: out of memory placing image '%s'", d->name);
	/* A member of a multi-device filesystem may hold no chunk item (or be
	 * another filesystem's device, which the devid votes set aside): with
	 * no start that blocks agree on, the image is taken as the device, as
	 * before any scan; the chunk map then places its blocks or not. */
	if ((best < 2 || best == second) && fs->ndevs > 1) {
		d->unplaced = false;
		return 0;
	}
	if (best < 2 || best == second)
		return bi_err(fs, -EUCLEAN,
			      "image '%s': no partition table and no superblock, and its %zu tree "
			      "blocks do not say where the filesystem starts (%zu chunk items; "
			      "the best start has %zu votes, the next %zu)",
			      d->name, blocks, nchunks, best, second);
	d->base = start;
	d->size = total && total < d->raw_size - start ? total : d->raw_size - start;
	d->unplaced = false;
	shift_index(s, dev, start, d->size);
	char how[80];
	snprintf(how, sizeof(how), "tree blocks (%zu of %zu agree)", best, blocks);
	bi_vols_placed_row(fs, d, s->fss[fi].fsid, how);
	if (start == 0) /* the image is the filesystem: the salvage says the rest */
		return 0;
	bi_damage(fs,
		  "image '%s': no partition table and no superblock: the filesystem starts at "
		  "byte %" PRIu64 ", placed by its tree blocks (%zu of %zu agree; the next "
		  "start has %zu)",
		  d->name, start, best, blocks, second);
	return 0;
}

int bi_salvage_place(struct btrfsimg_fs *fs, struct bi_sv_scan *s)
{
	unsigned fi = 0; /* the filesystem with the most blocks, as pick_fs() */
	for (unsigned i = 1; i < s->nfs; i++)
		if (s->fss[i].nblocks > s->fss[fi].nblocks)
			fi = i;
	for (size_t k = 0; k < fs->ndevs && s->nfs; k++) {
		if (!fs->devs[k].unplaced || fs->devs[k].absorbed)
			continue;
		int rc = place_one(fs, s, (uint32_t)k, fi);
		if (rc < 0)
			return rc;
	}
	return 0;
}
