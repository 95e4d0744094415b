/* SPDX-License-Identifier: MIT */
/*
 * The block cache: verified tree blocks by address, with references, the
 * least recently used unreferenced ones dropped once over budget.
 *
 * Apart from the reading and checking (block.c) because it knows nothing
 * of the format: it holds buffers by address and counts references. A
 * leaf read once by a streaming walk leaves it at once and lends its
 * buffer to the next read. The cache also keeps the last paths walked
 * (struct bi_path_hint), whose blocks it frees with the rest; what they
 * mean is path.c's.
 */
#include <stdlib.h>

#include "btrfs/cache.h"

#include "base/handle.h"

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
	for (int i = 0; i < BI_PATH_HINTS; i++)
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

struct bi_block *bi_cache_get(struct bi_cache *c, uint64_t bytenr)
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

void bi_cache_insert(struct bi_cache *c, struct bi_block *b)
{
	size_t h = bucket_of(c, b->bytenr);
	b->hnext = c->buckets[h];
	c->buckets[h] = b;
	lru_push_front(c, b);
	c->bytes += b->size;
	cache_trim(c);
}

void bi_cache_evict(struct bi_cache *c, struct bi_block *b)
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

uint8_t *bi_cache_buffer(struct bi_cache *c, size_t size)
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
