/* SPDX-License-Identifier: MIT */
/*
 * Tree blocks: read, verify, cache, iterate.
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
 * Iteration keeps one verified block per level. Because each child's first
 * key must equal its parent pointer's key and the iterator requires keys to
 * increase strictly across leaves, a block reached twice (a loop or a shared
 * subtree inside one tree) is an error, not a hang: the work is bounded by
 * the number of distinct blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/tree.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"

static const char *block_kind(int level)
{
	return level < 0 ? "block" : level == 0 ? "leaf" : "node";
}

/* ------------------------------------------------------------------ cache */

/* The path of the last lookup that ended (root to leaf, one reference held
 * per block) and the key range [lo, hi) for which a descent from that root
 * takes exactly this path: at each node the pointer followed is the last
 * one whose key is <= the target (the first one for any target before
 * it), so the range is the intersection over the levels of [this pointer's
 * key, the next pointer's key). A lookup whose start key lies in it begins
 * at that leaf without the descent: lookups in key order (the inodes of a
 * directory's entries, one after the other) mostly fall in the last leaf.
 * Same blocks, same slots as a descent, so the same result, even on a
 * damaged tree; paths through blocks kept out of the cache are not kept. */
#define HINTS 4 /* one per tree in use: a walk alternates the root tree and a subvolume's */
struct path_hint {
	struct bi_root root;
	uint64_t used; /* when last kept or used: the oldest is replaced */
	int top;       /* root level, -1: no hint */
	struct bi_block *path[MAX_LEVEL];
	uint32_t slot[MAX_LEVEL];
	bi_key lo, hi;
	bool lo_open, hi_open; /* no lower / upper bound */
};

struct bi_cache {
	struct bi_block **buckets;
	size_t nbuckets;
	struct bi_block lru;	/* sentinel: lru.lru_next is the most recent */
	uint64_t bytes, max_bytes;
	uint8_t *spare;		/* a streamed leaf's buffer, for the next read */
	size_t spare_size;
	struct path_hint hint[HINTS];
	uint64_t hint_clock;
};

struct bi_cache *bi_cache_new(uint64_t max_bytes)
{
	struct bi_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->nbuckets = 4096;
	c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return NULL;
	}
	c->lru.lru_next = c->lru.lru_prev = &c->lru;
	c->max_bytes = max_bytes;
	for (int i = 0; i < HINTS; i++)
		c->hint[i].top = -1;
	return c;
}

static size_t bucket_of(const struct bi_cache *c, uint64_t bytenr)
{
	return (size_t)((bytenr >> 12) * 0x9E3779B97F4A7C15ull >> 40) & (c->nbuckets - 1);
}

static void lru_unlink(struct bi_block *b)
{
	b->lru_prev->lru_next = b->lru_next;
	b->lru_next->lru_prev = b->lru_prev;
	b->lru_next = b->lru_prev = b;
}

static void lru_push_front(struct bi_cache *c, struct bi_block *b)
{
	b->lru_next = c->lru.lru_next;
	b->lru_prev = &c->lru;
	c->lru.lru_next->lru_prev = b;
	c->lru.lru_next = b;
}

static void block_free(struct bi_block *b)
{
	if (b) {
		free(b->data);
		free(b);
	}
}

static void hash_remove(struct bi_cache *c, struct bi_block *b)
{
	struct bi_block **pp = &c->buckets[bucket_of(c, b->bytenr)];
	while (*pp && *pp != b)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = b->hnext;
}

/* Drop unreferenced blocks from the cold end until under budget. */
static void cache_trim(struct bi_cache *c)
{
	struct bi_block *b = c->lru.lru_prev;
	while (c->bytes > c->max_bytes && b != &c->lru) {
		struct bi_block *prev = b->lru_prev;
		if (b->refs == 0) {
			lru_unlink(b);
			hash_remove(c, b);
			c->bytes -= b->size;
			block_free(b);
		}
		b = prev;
	}
}

void bi_cache_free(struct bi_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct bi_block *b = c->buckets[i];
		while (b) {
			struct bi_block *next = b->hnext;
			block_free(b);
			b = next;
		}
	}
	free(c->buckets);
	free(c->spare);
	free(c);
}

static struct bi_block *cache_get(struct bi_cache *c, uint64_t bytenr)
{
	for (struct bi_block *b = c->buckets[bucket_of(c, bytenr)]; b; b = b->hnext)
		if (b->bytenr == bytenr) {
			lru_unlink(b);
			lru_push_front(c, b);
			b->refs++;
			return b;
		}
	return NULL;
}

static void cache_put_new(struct bi_cache *c, struct bi_block *b)
{
	size_t h = bucket_of(c, b->bytenr);
	b->hnext = c->buckets[h];
	c->buckets[h] = b;
	lru_push_front(c, b);
	c->bytes += b->size;
	cache_trim(c);
}

/* Forget a cached block that failed what a parent expects, so the next
 * read goes back to the image and tries every copy. */
static void cache_evict(struct bi_cache *c, struct bi_block *b)
{
	lru_unlink(b);
	hash_remove(c, b);
	c->bytes -= b->size;
	block_free(b);
}

/* Under AddressSanitizer a put leaf is freed, not recycled: a pointer kept
 * into it past the walk's next leaf is then a use after free it reports,
 * not a silent read of the next leaf's bytes. */
#if defined(__SANITIZE_ADDRESS__)
#define RECYCLE_HIDES_BUGS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECYCLE_HIDES_BUGS 1
#endif
#endif
#ifndef RECYCLE_HIDES_BUGS
#define RECYCLE_HIDES_BUGS 0
#endif

/* A buffer for a block read: the last streamed leaf's, while it is still
 * in the CPU's cache, else a new one. */
static uint8_t *buffer_for_read(struct bi_cache *c, size_t size)
{
	if (c->spare && c->spare_size == size) {
		uint8_t *buf = c->spare;
		c->spare = NULL;
		return buf;
	}
	return malloc(size);
}

void bi_block_put_once(struct btrfsimg_fs *fs, struct bi_block *b)
{
	if (!b || b->uncached || b->refs != 1) {
		bi_block_put(fs, b);
		return;
	}
	struct bi_cache *c = fs->cache;
	b->refs = 0;
	lru_unlink(b);
	hash_remove(c, b);
	c->bytes -= b->size;
	if (!c->spare && !RECYCLE_HIDES_BUGS) {
		c->spare = b->data;
		c->spare_size = b->size;
		b->data = NULL;
	}
	block_free(b);
}

void bi_block_put(struct btrfsimg_fs *fs, struct bi_block *b)
{
	if (!b)
		return;
	if (b->uncached) {
		if (--b->refs == 0)
			block_free(b);
		return;
	}
	if (b->refs)
		b->refs--;
	if (b->refs == 0 && fs->cache->bytes > fs->cache->max_bytes)
		cache_trim(fs->cache);
}

/* ------------------------------------------------------------------ reads */

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
	uint8_t *buf = buffer_for_read(fs->cache, fs->nodesize);
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

/* A cached block was verified when read; re-check what this parent expects. */
static bool cached_matches(const struct bi_block *b, const struct bi_expect *e)
{
	if (!e)
		return true;
	if (e->level >= 0 && b->level != e->level)
		return false;
	if (e->generation && b->generation != e->generation)
		return false;
	if (e->first_key && b->nritems) {
		bi_key first;
		bi_key_read(b->data + HDR_SIZE, &first);
		if (bi_key_cmp(&first, e->first_key) != 0)
			return false;
	}
	return true;
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
	struct bi_block *b = cache_get(fs->cache, bytenr);
	if (b) {
		if (cached_matches(b, e)) {
			*out = b;
			return 0;
		}
		/* Another parent expects something else: re-read every copy. */
		if (--b->refs == 0)
			cache_evict(fs->cache, b);
		else
			held = true;
	}
	int rc = read_from_image(fs, bytenr, e, &b);
	if (rc < 0)
		return rc;
	if (held)
		b->uncached = true; /* the cached one is in use; keep this private */
	else
		cache_put_new(fs->cache, b);
	*out = b;
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

/* -------------------------------------------------------------- iteration */

static void ovl_start(struct bi_iter *it);

/* Last pointer whose key is <= target (slot 0 if target is before all). */
static uint32_t node_slot(const struct bi_block *b, const bi_key *target)
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

/* bi_leaf_slot, looking first just at and after @near (where the last
 * lookup in this leaf ended: lookups in key order find their key a few
 * items on), then doubling the step; the same answer, keys being strictly
 * ascending in a checked leaf. */
static uint32_t leaf_slot_from(const struct bi_block *b, const bi_key *target, uint32_t near)
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

/* ------------------------------------------------------------- prefetch */

/* A streamed walk keeps this much of the leaves ahead of it requested from
 * the kernel, so the disk always has work queued; reads then find the page
 * cache filled and the kernel's own readahead, blind to the tree, rarely
 * starts (on the bench disk it read 60% more than the walk needed). 1 to
 * 64 MiB measured alike there; giving the hints from a second thread did
 * not help, the formatting thread needing that core. */
#define PREFETCH_BYTES (8u << 20)

static bool slot_skippable(const struct bi_iter *it, uint32_t s);

/* Ask for the leaves behind slots [from, to) of path[1] that the walk will
 * read (not skipped, not past its range); adjacent blocks go as one
 * request. */
static void prefetch_leaves(struct bi_iter *it, uint32_t from, uint32_t to)
{
	const struct bi_block *n = it->path[1];
	uint32_t bs = it->fs->nodesize;
	uint64_t start = 0, len = 0;
	for (uint32_t s = from; s < to; s++) {
		bi_key k;
		uint64_t ptr, gen;
		bi_node_ptr(n, s, &k, &ptr, &gen);
		if (bi_key_cmp(&k, &it->max) > 0)
			break;
		if (slot_skippable(it, s))
			continue;
		if (len && ptr == start + len && len < PREFETCH_BYTES) {
			len += bs;
			continue;
		}
		if (len)
			bi_prefetch(it->fs, start, len);
		start = ptr;
		len = bs;
	}
	if (len)
		bi_prefetch(it->fs, start, len);
}

/* Before the leaf at path[1]'s slot is read: top the window up once half
 * of it has been used, so requests go in batches. */
static void prefetch_ahead(struct bi_iter *it)
{
	uint32_t s = it->slot[1], n = it->path[1]->nritems;
	uint32_t window = PREFETCH_BYTES / it->fs->nodesize;
	if (it->ra_slot > s && it->ra_slot - s > window / 2)
		return;
	uint32_t from = it->ra_slot > s ? it->ra_slot : s;
	uint32_t to = n - s > window ? s + window : n;
	if (from < to)
		prefetch_leaves(it, from, to);
	it->ra_slot = to;
}

/* On entering a level-1 node: its successor will be read when this one's
 * leaves are done; ask for it now so that read finds it in memory. */
static void prefetch_next_node(struct bi_iter *it)
{
	const struct bi_block *up = it->path[2];
	uint32_t s = it->slot[2] + 1;
	if (s >= up->nritems)
		return;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(up, s, &k, &ptr, &gen);
	if (bi_key_cmp(&k, &it->max) <= 0)
		bi_prefetch(it->fs, ptr, it->fs->nodesize);
}

/* ------------------------------------------------------------- descent */

/* Replace path[level-1] with the child behind path[level]'s slot. */
static int descend(struct bi_iter *it, int level)
{
	if (level == 1 && it->stream)
		prefetch_ahead(it);
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(it->path[level], it->slot[level], &k, &ptr, &gen);
	struct bi_expect e = { it->root.id, gen, level - 1, &k };
	struct bi_block *child;
	int rc = bi_block_read(it->fs, ptr, &e, &child);
	if (rc < 0)
		return rc;
	if (level == 1 && it->stream)
		bi_block_put_once(it->fs, it->path[0]);
	else
		bi_block_put(it->fs, it->path[level - 1]);
	it->path[level - 1] = child;
	if (level == 2 && it->stream) {
		it->ra_slot = 0;
		prefetch_next_node(it);
	}
	return 0;
}

/* ------------------------------------------------------------ path hint */

static bool same_root(const struct bi_root *a, const struct bi_root *b)
{
	return a->id == b->id && a->bytenr == b->bytenr && a->generation == b->generation &&
	       a->level == b->level;
}

/* The hint kept for @root, or NULL. */
static struct path_hint *hint_for(struct bi_cache *c, const struct bi_root *root)
{
	for (int i = 0; i < HINTS; i++)
		if (c->hint[i].top >= 0 && same_root(&c->hint[i].root, root))
			return &c->hint[i];
	return NULL;
}

/* Start at the hinted leaf if a descent to @min would take its path. */
static bool hint_start(struct bi_iter *it, const bi_key *min)
{
	struct bi_cache *c = it->fs->cache;
	struct path_hint *h = hint_for(c, &it->root);
	if (!h || (!h->lo_open && bi_key_cmp(min, &h->lo) < 0) ||
	    (!h->hi_open && bi_key_cmp(min, &h->hi) >= 0))
		return false;
	h->used = ++c->hint_clock;
	it->top = h->top;
	for (int lvl = 0; lvl <= h->top; lvl++) {
		it->path[lvl] = h->path[lvl];
		it->path[lvl]->refs++;
		it->slot[lvl] = h->slot[lvl];
	}
	it->slot[0] = leaf_slot_from(it->path[0], min, h->slot[0]);
	return true;
}

/* Whether the iterator ends on the hint's own path (it started there and
 * stayed in that leaf): the hint is then already right. */
static bool on_hint_path(const struct bi_iter *it, struct path_hint *h)
{
	if (h->top != it->top)
		return false;
	for (int lvl = 0; lvl <= h->top; lvl++)
		if (h->path[lvl] != it->path[lvl] || (lvl && h->slot[lvl] != it->slot[lvl]))
			return false;
	return true;
}

static void hint_drop(struct btrfsimg_fs *fs, struct path_hint *h)
{
	for (int lvl = 0; lvl <= h->top; lvl++)
		bi_block_put(fs, h->path[lvl]);
	h->top = -1;
}

/* Whether path[lvl - 1] is the child behind path[lvl]'s slot at every
 * level, as that pointer expects it (not so once next_leaf has stepped a
 * slot past the range), with no block private to this iterator. */
static bool path_whole(const struct bi_iter *it)
{
	for (int lvl = 0; lvl <= it->top; lvl++)
		if (!it->path[lvl] || it->path[lvl]->uncached)
			return false;
	for (int lvl = 1; lvl <= it->top; lvl++) {
		const struct bi_block *n = it->path[lvl];
		bi_key k;
		uint64_t ptr, gen;
		if (it->slot[lvl] >= n->nritems)
			return false;
		bi_node_ptr(n, it->slot[lvl], &k, &ptr, &gen);
		struct bi_expect e = { it->root.id, gen, lvl - 1, &k };
		if (ptr != it->path[lvl - 1]->bytenr || !cached_matches(it->path[lvl - 1], &e))
			return false;
	}
	return true;
}

/* Keep the ending iterator's path (its references pass to the hint). */
static bool hint_keep(struct bi_iter *it)
{
	if (it->stream || it->top < 0 || it->top >= MAX_LEVEL)
		return false;
	struct bi_cache *c = it->fs->cache;
	struct path_hint *h = hint_for(c, &it->root);
	if (h && on_hint_path(it, h)) {
		h->slot[0] = it->slot[0];
		return false; /* the iterator puts its references */
	}
	if (!path_whole(it))
		return false;
	for (int i = 0; i < HINTS && !h; i++)
		if (c->hint[i].top < 0)
			h = &c->hint[i];
	if (!h) { /* none free: the least recently used */
		h = &c->hint[0];
		for (int i = 1; i < HINTS; i++)
			if (c->hint[i].used < h->used)
				h = &c->hint[i];
	}
	hint_drop(it->fs, h);
	h->used = ++c->hint_clock;
	h->root = it->root;
	h->top = it->top;
	h->lo_open = h->hi_open = true;
	for (int lvl = 0; lvl <= it->top; lvl++) {
		h->path[lvl] = it->path[lvl];
		h->slot[lvl] = it->slot[lvl];
		it->path[lvl] = NULL;
		if (lvl == 0)
			continue;
		const struct bi_block *n = h->path[lvl];
		uint32_t s = h->slot[lvl];
		bi_key k;
		if (s > 0) {
			bi_key_read(n->data + HDR_SIZE + (size_t)s * KP_SIZE, &k);
			if (h->lo_open || bi_key_cmp(&k, &h->lo) > 0)
				h->lo = k;
			h->lo_open = false;
		}
		if (s + 1 < n->nritems) {
			bi_key_read(n->data + HDR_SIZE + (size_t)(s + 1) * KP_SIZE, &k);
			if (h->hi_open || bi_key_cmp(&k, &h->hi) < 0)
				h->hi = k;
			h->hi_open = false;
		}
	}
	return true;
}

int bi_iter_start(struct btrfsimg_fs *fs, struct bi_iter *it, const struct bi_root *root,
		  const bi_key *min, const bi_key *max)
{
	/* field by field: a memset of the whole struct (base included, set
	 * before it is read) was a third of a lookup's time in this function */
	it->fs = fs;
	it->root = *root;
	it->min = *min;
	it->max = *max;
	it->last = (bi_key){ 0 };
	memset(it->path, 0, sizeof(it->path));
	memset(it->slot, 0, sizeof(it->slot));
	it->top = 0;
	it->started = it->done = false;
	it->ovl = NULL;
	it->ovl_pos = it->del_pos = 0;
	it->have_base = it->base_done = false;
	it->skip = NULL;
	it->stream = false;
	it->ra_slot = 0;
	ovl_start(it);
	if (hint_start(it, min))
		return 0;
	struct bi_expect e = { root->id, root->generation, root->level, NULL };
	struct bi_block *b;
	int rc = bi_block_read(fs, root->bytenr, &e, &b);
	if (rc < 0) {
		it->done = true;
		return rc;
	}
	it->top = b->level;
	it->path[it->top] = b;
	for (int lvl = it->top; lvl > 0; lvl--) {
		it->slot[lvl] = node_slot(it->path[lvl], min);
		rc = descend(it, lvl);
		if (rc < 0) {
			bi_iter_end(it);
			return rc;
		}
	}
	it->slot[0] = bi_leaf_slot(it->path[0], min);
	return 0;
}

/* Whether the leaf behind slot @s of the level-1 node holds nothing the
 * caller wants: its keys lie in [this pointer's key, the next one's). */
static bool slot_skippable(const struct bi_iter *it, uint32_t s)
{
	const struct bi_block *n = it->path[1];
	if (!it->skip || s + 1 >= n->nritems)
		return false;
	bi_key lo, hi;
	bi_key_read(n->data + HDR_SIZE + (size_t)s * KP_SIZE, &lo);
	bi_key_read(n->data + HDR_SIZE + (size_t)(s + 1) * KP_SIZE, &hi);
	return it->skip(&lo, &hi);
}

/* Move to the next leaf. 1: moved; 0: the tree (or range) is exhausted. */
static int next_leaf(struct bi_iter *it)
{
	int lvl = 1;
	while (lvl <= it->top && it->slot[lvl] + 1 >= it->path[lvl]->nritems)
		lvl++;
	if (lvl > it->top)
		return 0;
	it->slot[lvl]++;
	bi_key k;
	uint64_t ptr, gen;
	bi_node_ptr(it->path[lvl], it->slot[lvl], &k, &ptr, &gen);
	if (bi_key_cmp(&k, &it->max) > 0)
		return 0;
	for (; lvl > 1; lvl--) {
		int rc = descend(it, lvl);
		if (rc < 0)
			return rc;
		it->slot[lvl - 1] = 0;
	}
	while (slot_skippable(it, it->slot[1]))
		it->slot[1]++;
	int rc = descend(it, 1);
	if (rc < 0)
		return rc;
	it->slot[0] = 0;
	return 1;
}

void bi_iter_skip_leaves(struct bi_iter *it, bool (*skip)(const bi_key *lo, const bi_key *hi))
{
	it->skip = skip;
}

void bi_iter_stream(struct bi_iter *it)
{
	it->stream = true;
}

static int base_next(struct bi_iter *it, struct bi_item *out)
{
	while (!it->done) {
		struct bi_block *leaf = it->path[0];
		if (it->slot[0] >= leaf->nritems) {
			int rc = next_leaf(it);
			if (rc <= 0) {
				it->done = true;
				return rc;
			}
			continue;
		}
		bi_leaf_item(leaf, it->slot[0], &out->key, &out->data, &out->size);
		if (bi_key_cmp(&out->key, &it->max) > 0)
			break;
		if (it->started && bi_key_cmp(&out->key, &it->last) <= 0) {
			it->done = true;
			return bi_item_err(
				it->fs, -EUCLEAN, "leaf", it->root.id, leaf->bytenr, it->slot[0],
				"key (%" PRIu64 " %u %" PRIu64
				") not after the previous leaf's (%" PRIu64 " %u %" PRIu64 ")",
				out->key.objectid, out->key.type, out->key.offset,
				it->last.objectid, it->last.type, it->last.offset);
		}
		it->started = true;
		it->last = out->key;
		out->block = leaf->bytenr;
		out->slot = it->slot[0]++;
		return 1;
	}
	it->done = true;
	return 0;
}

/* ---------------------------------------------------------------- overlay */

const struct bi_log_overlay *bi_overlay_for(const struct btrfsimg_fs *fs, uint64_t root)
{
	for (const struct bi_log_overlay *o = fs->overlays; o; o = o->next)
		if (o->root == root)
			return o;
	return NULL;
}

/* Deletions are sorted, non-overlapping ranges; keys arrive ascending. */
static bool ovl_hidden(const struct bi_log_overlay *o, const bi_key *k, size_t *pos)
{
	while (*pos < o->ndels && bi_key_cmp(&o->dels[*pos].end, k) < 0)
		(*pos)++;
	return *pos < o->ndels && bi_key_cmp(&o->dels[*pos].start, k) <= 0;
}

static const struct bi_ovl_put *ovl_peek(const struct bi_iter *it)
{
	const struct bi_log_overlay *o = it->ovl;
	if (it->ovl_pos >= o->nputs || bi_key_cmp(&o->puts[it->ovl_pos].key, &it->max) > 0)
		return NULL;
	return &o->puts[it->ovl_pos];
}

/* The tree's items merged with the overlay's: an overlay item replaces the
 * tree's item with the same key, and deleted ranges hide tree items. */
int bi_iter_next(struct bi_iter *it, struct bi_item *out)
{
	if (!it->ovl)
		return base_next(it, out);
	for (;;) {
		if (!it->have_base && !it->base_done) {
			int rc = base_next(it, &it->base);
			if (rc < 0)
				return rc;
			it->have_base = rc > 0;
			it->base_done = rc == 0;
		}
		const struct bi_ovl_put *p = ovl_peek(it);
		if (it->have_base && (ovl_hidden(it->ovl, &it->base.key, &it->del_pos) ||
				      (p && bi_key_cmp(&p->key, &it->base.key) == 0))) {
			it->have_base = false;
			continue;
		}
		if (p && (!it->have_base || bi_key_cmp(&p->key, &it->base.key) < 0)) {
			*out = (struct bi_item){ p->key, p->data, p->size, 0, (uint32_t)it->ovl_pos };
			it->ovl_pos++;
			return 1;
		}
		if (!it->have_base)
			return 0;
		*out = it->base;
		it->have_base = false;
		return 1;
	}
}

/* Here, not in state.c: the handle frees its overlays whether or not
 * the log replay is built in. */
void bi_lr_overlays_free(struct bi_log_overlay *o)
{
	while (o) {
		struct bi_log_overlay *next = o->next;
		for (size_t i = 0; i < o->nputs; i++)
			free(o->puts[i].data);
		free(o->puts);
		free(o->dels);
		free(o);
		o = next;
	}
}

void bi_overlays_free(struct btrfsimg_fs *fs)
{
	bi_lr_overlays_free(fs->overlays);
	fs->overlays = NULL;
}

static void ovl_start(struct bi_iter *it)
{
	const struct bi_log_overlay *o = bi_overlay_for(it->fs, it->root.id);
	if (!o)
		return;
	it->ovl = o;
	size_t lo = 0, hi = o->nputs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bi_key_cmp(&o->puts[mid].key, &it->min) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	it->ovl_pos = lo;
}

void bi_iter_end(struct bi_iter *it)
{
	if (!it->fs)
		return;
	hint_keep(it);
	if (it->stream)
		bi_block_put_once(it->fs, it->path[0]);
	else
		bi_block_put(it->fs, it->path[0]);
	it->path[0] = NULL;
	for (int lvl = 1; lvl < MAX_LEVEL; lvl++) {
		bi_block_put(it->fs, it->path[lvl]);
		it->path[lvl] = NULL;
	}
	it->done = true;
}

int bi_tree_get(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *key,
		uint8_t **data, uint32_t *size)
{
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, root, key, key);
	if (rc < 0)
		return rc;
	rc = bi_iter_next(&it, &item);
	if (rc == 0)
		rc = -ENOENT;
	if (rc > 0) {
		rc = 0;
		if (size)
			*size = item.size;
		if (data) {
			*data = malloc(item.size ? item.size : 1);
			if (*data)
				memcpy(*data, item.data, item.size);
			else
				rc = bi_err(fs, -ENOMEM, "out of memory");
		}
	}
	bi_iter_end(&it);
	return rc;
}

int bi_tree_last(struct btrfsimg_fs *fs, const struct bi_root *root, const bi_key *max,
		 bi_key *out)
{
	struct bi_expect e = { root->id, root->generation, root->level, NULL };
	struct bi_block *b;
	int rc = bi_block_read(fs, root->bytenr, &e, &b);
	while (rc == 0 && b->level > 0) {
		bi_key k;
		uint64_t ptr, gen;
		bi_node_ptr(b, node_slot(b, max), &k, &ptr, &gen);
		struct bi_expect ce = { root->id, gen, b->level - 1, &k };
		struct bi_block *child;
		rc = bi_block_read(fs, ptr, &ce, &child);
		bi_block_put(fs, b);
		b = child;
	}
	if (rc < 0)
		return rc;
	/* bi_leaf_slot: the first item >= max; the one before it is < max */
	uint32_t s = bi_leaf_slot(b, max);
	bi_key k = { 0, 0, 0 };
	if (s < b->nritems)
		bi_key_read(b->data + HDR_SIZE + (size_t)s * ITEM_SIZE, &k);
	if (s < b->nritems && bi_key_cmp(&k, max) == 0)
		*out = k;
	else if (s > 0)
		bi_key_read(b->data + HDR_SIZE + (size_t)(s - 1) * ITEM_SIZE, out);
	else
		rc = -ENOENT;
	bi_block_put(fs, b);
	return rc;
}
