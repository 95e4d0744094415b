/* SPDX-License-Identifier: MIT */
/*
 * Tree blocks: read and verify; the slots of a verified block.
 *
 * Every block is checked once, when it is read from the image, in three
 * layers (as the kernel's tree-checker does): the header (bytenr, fsid,
 * level, nritems bounds), the item or pointer table (every item's data
 * inside the block, after the table and not overlapping another item; keys
 * strictly ascending), then the checksum. What the parent expects (level,
 * generation, first key) is checked on every read, cached or not, because
 * the same block can be reached from different parents.
 *
 *   leaf:  | header 101 | item 0 | item 1 | ... |   free   | data 1 | data 0 |
 *   node:  | header 101 | key ptr 0 | key ptr 1 | ...                       |
 *
 * Item offsets count from the end of the header. A failed check on one copy
 * falls back to the next copy (mirror, or RAID5/6 rebuild); the error names
 * the block, the copy, the check, and have vs expected.
 *
 * Apart from the cache (cache.c), which only holds what this file verified,
 * and from the walks over many blocks (path.c, iter.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/block.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/cache.h"
#include "btrfs/chunk.h"
#include "btrfs/tree_checker.h"

static const char *block_kind(int level)
{
	return level < 0 ? "block" : level == 0 ? "leaf" : "node";
}

static int verify_copy(struct btrfsimg_fs *fs, const uint8_t *buf, uint64_t bytenr,
		       const struct bi_expect *e, char *why, size_t whylen)
{
	uint8_t sum[CSUM_SIZE_MAX];
	bi_csum(fs->csum_type, buf + HDR_FSID, fs->nodesize - HDR_FSID, sum);
	if (memcmp(sum, buf, fs->csum_size) != 0) {
		uint64_t have = 0, want = 0;
		memcpy(&have, buf, fs->csum_size < 8 ? fs->csum_size : 8);
		memcpy(&want, sum, fs->csum_size < 8 ? fs->csum_size : 8);
		snprintf(why, whylen, "%s checksum mismatch, have 0x%" PRIx64 " expect 0x%" PRIx64,
			 btrfsimg_csum_name(fs->csum_type), have, want);
		return -EIO;
	}
	return bi_block_check(buf, fs->nodesize, bytenr, fs->meta_fsid, e, why, whylen);
}

/* Readers know trees by id; a human wants the name too. */
static const char *tree_name(uint64_t id)
{
	switch (id) {
	case OBJ_ROOT_TREE: return " (root tree)";
	case OBJ_EXTENT_TREE: return " (extent tree)";
	case OBJ_CHUNK_TREE: return " (chunk tree)";
	case OBJ_DEV_TREE: return " (device tree)";
	case OBJ_FS_TREE: return " (top-level subvolume)";
	case OBJ_CSUM_TREE: return " (checksum tree)";
	case OBJ_UUID_TREE: return " (uuid tree)";
	case OBJ_FREE_SPACE_TREE: return " (free space tree)";
	case OBJ_BLOCK_GROUP_TREE: return " (block group tree)";
	case OBJ_TREE_LOG: return " (log tree)";
	default: return id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE ? " (subvolume)" : "";
	}
}

static int block_error(struct btrfsimg_fs *fs, int rc, uint64_t bytenr, int level,
		       const struct bi_expect *e, int copy, int ncopies, const char *why)
{
	uint64_t owner = e ? e->owner : 0;
	return bi_err(fs, rc, "%s %s: root=%" PRIu64 "%s block=%" PRIu64 " copy=%d/%d, %s",
		      rc == -EIO ? "bad" : "corrupt", block_kind(level), owner, tree_name(owner),
		      bytenr, copy + 1, ncopies, why);
}

/* Takes ownership of @buf (the verified copy, not copied again). */
static struct bi_block *block_new(uint8_t *buf, uint32_t size, uint64_t bytenr)
{
	struct bi_block *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->data = buf;
	b->bytenr = bytenr;
	b->size = size;
	b->level = buf[HDR_LEVEL];
	b->nritems = bi_le32(buf + HDR_NRITEMS);
	b->generation = bi_le64(buf + HDR_GENERATION);
	b->owner = bi_le64(buf + HDR_OWNER);
	b->refs = 1;
	b->lru_next = b->lru_prev = b;
	return b;
}

/* Try every copy; keep the first error for the message. */
static int read_from_image(struct btrfsimg_fs *fs, uint64_t bytenr, const struct bi_expect *e,
			   struct bi_block **out)
{
	uint8_t *buf = bi_cache_buffer(fs->cache, fs->nodesize);
	if (!buf)
		return bi_err(fs, -ENOMEM, "out of memory reading block %" PRIu64, bytenr);
	int ncopies = bi_num_copies(fs, bytenr), first_rc = 0, good = -1;
	char first_msg[sizeof(fs->err)] = "";
	for (int copy = 0; copy < ncopies && good < 0; copy++) {
		char why[384];
		int rc = bi_read_copy(fs, bytenr, buf, fs->nodesize, copy);
		/* a failed read leaves @buf unset: name the level expected */
		int level = e ? e->level : -1;
		if (rc < 0) {
			snprintf(why, sizeof(why), "read failed: %.300s", fs->err);
		} else {
			level = buf[HDR_LEVEL];
			rc = verify_copy(fs, buf, bytenr, e, why, sizeof(why));
		}
		if (rc == 0) {
			good = copy;
			break;
		}
		bool missing = bi_copy_missing(fs, bytenr, copy); /* reported at open */
		if (!first_rc) {
			first_rc = rc;
			block_error(fs, rc, bytenr, level, e, copy, ncopies, why);
			memcpy(first_msg, fs->err, sizeof(first_msg));
		} else {
			block_error(fs, rc, bytenr, level, e, copy, ncopies, why);
		}
		if (copy + 1 < ncopies && !missing)
			bi_damage(fs, "%s; trying the next copy", fs->err);
	}
	int rc = 0;
	if (good < 0) {
		rc = bi_err(fs, first_rc ? first_rc : -EIO, "%s", first_msg);
	} else {
		*out = block_new(buf, fs->nodesize, bytenr);
		if (!*out)
			rc = bi_err(fs, -ENOMEM, "out of memory caching block %" PRIu64, bytenr);
		else
			buf = NULL;
	}
	free(buf);
	return rc;
}

/* A cached block was verified when read: only what this parent expects
 * is checked again. */
bool bi_block_matches(const struct bi_block *b, const struct bi_expect *e)
{
	if (!e)
		return true;
	if (e->level >= 0 && b->level != e->level)
		return false;
	if (e->generation && b->generation != e->generation)
		return false;
	if (e->first_key && b->nritems && !b->synthetic) {
		bi_key first;
		bi_key_read(b->data + HDR_SIZE, &first);
		if (bi_key_cmp(&first, e->first_key) != 0)
			return false;
	}
	return true;
}

/* After the salvage checked the tree of a block that read on no copy
 * (fs->lost_block): the node it synthesized at @bytenr, if it did, as the
 * parent expects it. A root (read without a first key) is taken at the
 * level it was given: a tree rebuilt from scanned leaves gets a root of
 * the height those need, and the descent takes the level from the block. */
static bool rebuilt_node(struct btrfsimg_fs *fs, uint64_t bytenr, const struct bi_expect *e,
			 struct bi_block **out)
{
	struct bi_block *b = bi_cache_get(fs->cache, bytenr);
	struct bi_expect x = *e;
	if (!e->first_key)
		x.level = -1;
	if (b && b->synthetic && bi_block_matches(b, &x)) {
		*out = b;
		return true;
	}
	if (b)
		bi_block_put(fs, b);
	return false;
}

int bi_block_read(struct btrfsimg_fs *fs, uint64_t bytenr, const struct bi_expect *e,
		  struct bi_block **out)
{
	*out = NULL;
	/* --generation N, older than the superblock's: the trees of N point
	 * only to blocks written by N at the latest (the chunk tree is
	 * today's, not read through them; the superblock's own generation
	 * keeps its log tree, written one transaction later) */
	if (e && fs->want_gen && fs->want_gen < fs->sb.info.generation &&
	    e->owner != OBJ_CHUNK_TREE && e->generation > fs->want_gen)
		return bi_err(fs, -EUCLEAN,
			      "corrupt pointer: tree %" PRIu64 " block=%" PRIu64
			      ", generation newer than the one read, have %" PRIu64
			      " expect <= %" PRIu64,
			      e->owner, bytenr, e->generation, fs->want_gen);
	bool held = false;
	struct bi_block *b = bi_cache_get(fs->cache, bytenr);
	if (b) {
		if (bi_block_matches(b, e)) {
			*out = b;
			return 0;
		}
		/* Another parent expects something else: re-read every copy. */
		if (--b->refs == 0)
			bi_cache_evict(fs->cache, b);
		else
			held = true;
	}
	int rc = read_from_image(fs, bytenr, e, &b);
	if (rc < 0 && rc != -ENOMEM && e && fs->lost_block && fs->lost_block(fs, e->owner) &&
	    rebuilt_node(fs, bytenr, e, out))
		return 0;
	if (rc < 0)
		return rc;
	if (held)
		b->uncached = true; /* the cached one is in use; keep this private */
	else
		bi_cache_insert(fs->cache, b);
	*out = b;
	return 0;
}

int bi_block_pin_synthetic(struct btrfsimg_fs *fs, uint8_t *buf, uint32_t size)
{
	struct bi_block *b = block_new(buf, size, bi_le64(buf + HDR_BYTENR));
	if (!b) {
		free(buf);
		return bi_err(fs, -ENOMEM, "salvage: out of memory");
	}
	b->synthetic = true;
	struct bi_block *old = bi_cache_get(fs->cache, b->bytenr);
	if (old) { /* a copy read before: this one replaces it */
		if (--old->refs == 0)
			bi_cache_evict(fs->cache, old);
	}
	bi_cache_insert(fs->cache, b); /* its reference is never put: pinned */
	return 0;
}

void bi_leaf_item(const struct bi_block *b, uint32_t slot, bi_key *k, const uint8_t **data,
		  uint32_t *size)
{
	const uint8_t *it = b->data + HDR_SIZE + (size_t)slot * ITEM_SIZE;
	bi_key_read(it, k);
	*data = b->data + HDR_SIZE + bi_le32(it + ITEM_OFFSET);
	*size = bi_le32(it + ITEM_DSIZE);
}

void bi_node_ptr(const struct bi_block *b, uint32_t slot, bi_key *k, uint64_t *blockptr,
		 uint64_t *gen)
{
	const uint8_t *kp = b->data + HDR_SIZE + (size_t)slot * KP_SIZE;
	bi_key_read(kp, k);
	*blockptr = bi_le64(kp + KP_BLOCKPTR);
	*gen = bi_le64(kp + KP_GENERATION);
}

/* ------------------------------------------------------------------ slots */

uint32_t bi_node_slot(const struct bi_block *b, const bi_key *target)
{
	uint32_t lo = 0, hi = b->nritems;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key k;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * KP_SIZE, &k);
		if (bi_key_cmp(&k, target) <= 0)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* First item in [lo, hi) whose key is >= @target (hi if none). */
static uint32_t slot_between(const struct bi_block *b, const bi_key *target, uint32_t lo,
			     uint32_t hi)
{
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key k;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * ITEM_SIZE, &k);
		if (bi_key_cmp(&k, target) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint32_t bi_leaf_slot(const struct bi_block *b, const bi_key *target)
{
	return slot_between(b, target, 0, b->nritems);
}

/* Looking first just at and after @near (lookups in key order find their
 * key a few items on), then doubling the step; the same answer as
 * bi_leaf_slot, keys being strictly ascending in a checked leaf. */
uint32_t bi_leaf_slot_from(const struct bi_block *b, const bi_key *target, uint32_t near)
{
	uint32_t n = b->nritems;
	bi_key k;
	if (near == 0 || near > n)
		return bi_leaf_slot(b, target);
	bi_key_read(b->data + HDR_SIZE + (size_t)(near - 1) * ITEM_SIZE, &k);
	if (bi_key_cmp(&k, target) >= 0)
		return bi_leaf_slot(b, target); /* the target is before @near */
	/* every key before @near is < target: gallop over [near, n) */
	uint32_t lo = near, step = 1;
	for (;;) {
		uint32_t probe = lo + step - 1;
		if (probe >= n)
			break;
		bi_key_read(b->data + HDR_SIZE + (size_t)probe * ITEM_SIZE, &k);
		if (bi_key_cmp(&k, target) >= 0) {
			n = probe + 1; /* the answer is in [lo, probe] */
			break;
		}
		lo = probe + 1;
		step *= 2;
	}
	return slot_between(b, target, lo, n);
}
