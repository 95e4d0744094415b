// SPDX-License-Identifier: MIT
/*
 * Tree block checker (bi_block_check), leaves and nodes, and the reader
 * that applies it (bi_block_read: checksum, then the checker, then the
 * cache). Input:
 *
 *   byte 0    bits 0-2: nodesize 4096 << (v % 5); bit 3: recompute the
 *             header checksum; bits 4-5: csum type (crc32c, xxhash,
 *             sha256, blake2)
 *   byte 1    what the parent expects: bit 0 the level (bit 1: one more
 *             than the header's), bit 2 the generation (bit 3: plus one),
 *             bit 4 the first key (bit 5: its offset plus one), bit 6 a
 *             different fsid, bit 7 a different bytenr
 *   bytes 2-3 head length H (le16)
 *   then      H bytes at the start of the block, the rest at its end
 *             (the middle of a real leaf is free space: zeros)
 *
 * The fsid and bytenr expected are the block's own unless bits 6/7 ask
 * otherwise; a mismatch the input asked for must fail. On success every
 * item lies inside the block after the item table, items do not overlap
 * and keys ascend strictly; every pointer is nonzero with a nonzero
 * generation. The same block read through an in-memory handle must be
 * accepted exactly when its checksum matches and the checker accepts it,
 * and a cached block must be re-checked against a different parent.
 * Seeds: leaves and nodes of the committed images (gen_struct_seeds.py).
 */
#include <stdlib.h>
#include <string.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "btrfs/tree.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define NODESIZE_MAX 65536u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct want {
	uint8_t fsid[16];
	uint64_t bytenr;
	bi_key first;
	struct bi_expect e;
	bool must_fail;
};

static void walk_leaf(const struct bi_block *b)
{
	uint32_t table_end = HDR_SIZE + b->nritems * ITEM_SIZE, lowest = b->size;
	bi_key prev = { 0 }, k;
	for (uint32_t s = 0; s < b->nritems; s++) {
		const uint8_t *d;
		uint32_t n;
		bi_leaf_item(b, s, &k, &d, &n);
		uint32_t off = (uint32_t)(d - b->data);
		CHECK(d >= b->data + table_end && n <= b->size && off <= b->size - n);
		CHECK(off + n <= lowest);
		CHECK(s == 0 || bi_key_cmp(&prev, &k) < 0);
		lowest = off;
		prev = k;
	}
}

static void walk_node(const struct bi_block *b)
{
	CHECK(b->nritems >= 1 && HDR_SIZE + (uint64_t)b->nritems * KP_SIZE <= b->size);
	bi_key prev = { 0 }, k;
	for (uint32_t s = 0; s < b->nritems; s++) {
		uint64_t ptr, gen;
		bi_node_ptr(b, s, &k, &ptr, &gen);
		CHECK(ptr && gen);
		CHECK(s == 0 || bi_key_cmp(&prev, &k) < 0);
		prev = k;
	}
}

static void check_ok(const uint8_t *blk, uint32_t nodesize, const struct want *w)
{
	struct bi_block b = { .data = (uint8_t *)blk, .size = nodesize };
	b.level = blk[HDR_LEVEL];
	b.nritems = bi_le32(blk + HDR_NRITEMS);
	CHECK(!w->must_fail && b.level < MAX_LEVEL);
	CHECK(bi_le64(blk + HDR_BYTENR) == w->bytenr && !memcmp(blk + HDR_FSID, w->fsid, 16));
	if (b.level)
		walk_node(&b);
	else
		walk_leaf(&b);
	if (w->e.first_key && b.nritems) {
		bi_key k;
		bi_key_read(blk + HDR_SIZE, &k);
		CHECK(bi_key_cmp(&k, w->e.first_key) == 0);
	}
}

static struct bi_chunk *one_chunk(uint64_t logical, uint64_t length)
{
	struct bi_chunk *c = calloc(1, sizeof(*c) + sizeof(c->stripes[0]));
	if (!c)
		return NULL;
	*c = (struct bi_chunk){ logical, length, BG_METADATA, 65536, 1, 1 };
	c->stripes[0] = (struct bi_stripe){ 1, 0, { 0 } };
	return c;
}

/* A handle whose only device holds the block at @bytenr (single profile). */
static struct btrfsimg_fs *mem_fs(const uint8_t *blk, uint32_t nodesize, uint64_t bytenr,
				  int csum_type, const uint8_t fsid[16])
{
	static uint8_t dev[NODESIZE_MAX + 4096];
	struct btrfsimg_fs *fs;
	if (btrfsimg_fs_new(&fs, NULL))
		return NULL;
	uint64_t off = bytenr % 4096;
	memset(dev, 0, off);
	memcpy(dev + off, blk, nodesize);
	char why[256];
	fs->chunks = bi_chunk_map_new();
	fs->cache = bi_cache_new(1 << 20);
	struct bi_chunk *c = one_chunk(bytenr - off, off ? nodesize + 4096 : nodesize);
	if (!fs->chunks || !fs->cache || !c ||
	    bi_chunk_map_insert(fs->chunks, c, why, sizeof(why)) ||
	    btrfsimg_add_device_mem(fs, dev, off + nodesize, NULL)) {
		btrfsimg_fs_free(fs);
		return NULL;
	}
	fs->devs[0].member = true;
	fs->devs[0].devid = 1;
	fs->nodesize = nodesize;
	fs->sectorsize = 4096;
	fs->csum_type = csum_type;
	fs->csum_size = (uint32_t)bi_csum_size(csum_type);
	memcpy(fs->meta_fsid, fsid, 16);
	return fs;
}

static void check_read(const uint8_t *blk, uint32_t nodesize, int csum_type,
		       const struct want *w, int checker_rc)
{
	if (w->bytenr > UINT64_MAX - 2 * NODESIZE_MAX)
		return;
	struct btrfsimg_fs *fs = mem_fs(blk, nodesize, w->bytenr, csum_type, w->fsid);
	if (!fs)
		return;
	uint8_t sum[CSUM_SIZE_MAX];
	bi_csum(csum_type, blk + HDR_FSID, nodesize - HDR_FSID, sum);
	bool csum_ok = !memcmp(sum, blk, fs->csum_size);
	struct bi_block *b = NULL, *again = NULL;
	int rc = bi_block_read(fs, w->bytenr, &w->e, &b);
	CHECK(rc == (!csum_ok ? -EIO : checker_rc));
	CHECK(rc == 0 ? b != NULL : (b == NULL && fs->err[0]));
	if (rc == 0) {
		CHECK(b->size == nodesize && !memcmp(b->data, blk, nodesize));
		CHECK(b->level == blk[HDR_LEVEL] && b->nritems == bi_le32(blk + HDR_NRITEMS));
		CHECK(bi_block_read(fs, w->bytenr, &w->e, &again) == 0 && again == b);
		bi_block_put(fs, again);
		/* another parent expecting another level must not get the cached block */
		struct bi_expect other = w->e;
		other.level = (b->level + 1) % MAX_LEVEL;
		again = NULL;
		CHECK(bi_block_read(fs, w->bytenr, &other, &again) == -EUCLEAN && !again);
		bi_block_put(fs, b);
	}
	btrfsimg_fs_free(fs);
}

static void make_want(const uint8_t *blk, uint8_t x, struct want *w)
{
	memcpy(w->fsid, blk + HDR_FSID, 16);
	w->bytenr = bi_le64(blk + HDR_BYTENR);
	w->e = (struct bi_expect){ 5, 0, -1, NULL };
	w->must_fail = false;
	if (x & 1) {
		w->e.level = blk[HDR_LEVEL] + ((x >> 1) & 1);
		w->must_fail |= (x & 2) != 0;
	}
	if (x & 4) {
		w->e.generation = bi_le64(blk + HDR_GENERATION) + ((x >> 3) & 1);
		/* generation 0 means "not checked" */
		w->must_fail |= (x & 8) && w->e.generation != 0;
	}
	if ((x & 16) && bi_le32(blk + HDR_NRITEMS)) {
		bi_key_read(blk + HDR_SIZE, &w->first);
		w->first.offset += (x >> 5) & 1;
		w->e.first_key = &w->first;
		w->must_fail |= (x & 32) != 0;
	}
	if (x & 64) {
		w->fsid[0] ^= 0x5a;
		w->must_fail = true;
	}
	if (x & 128) {
		w->bytenr += 4096;
		w->must_fail = true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	static uint8_t blk[NODESIZE_MAX];
	uint32_t nodesize = 4096u << ((data[0] & 7) % 5);
	int csum_type = (data[0] >> 4) & 3;
	size_t head = bi_le16(data + 2), rest = size - 4;
	if (head > rest)
		head = rest;
	size_t tail = rest - head;
	if (head > nodesize)
		head = nodesize;
	if (tail > nodesize - head)
		tail = nodesize - head;
	memset(blk, 0, nodesize);
	memcpy(blk, data + 4, head);
	memcpy(blk + nodesize - tail, data + size - tail, tail);
	if (data[0] & 8)
		bi_csum(csum_type, blk + HDR_FSID, nodesize - HDR_FSID, blk);
	struct want w;
	make_want(blk, data[1], &w);
	char why[512] = "";
	int rc = bi_block_check(blk, nodesize, w.bytenr, w.fsid, &w.e, why, sizeof(why));
	if (rc) {
		CHECK(rc == -EUCLEAN && why[0] && memchr(why, 0, sizeof(why)));
	} else {
		check_ok(blk, nodesize, &w);
	}
	check_read(blk, nodesize, csum_type, &w, rc);
	return 0;
}
