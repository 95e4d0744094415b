/* SPDX-License-Identifier: MIT */
/*
 * The block cache: verified blocks by address, least recently used first
 * out, with references; and the last paths walked (their blocks held), for
 * the path code (btrfs/path.c) to start the next lookup from.
 */
#ifndef BI_CACHE_H
#define BI_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/block.h"

/* The path of a lookup that ended (root to leaf, one reference held per
 * block) and the key range [lo, hi) for which a descent from that root
 * takes exactly this path (path.c keeps and uses them). */
#define BI_PATH_HINTS 4 /* one per tree in use: a walk alternates the root tree and a subvolume's */
struct bi_path_hint {
	struct bi_root root;
	uint64_t used; /* when last kept or used: the oldest is replaced */
	int top;       /* root level, -1: no hint */
	struct bi_block *nodes[MAX_LEVEL];
	uint32_t slots[MAX_LEVEL];
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
	struct bi_path_hint hint[BI_PATH_HINTS];
	uint64_t hint_clock;
};

/* A cache of blocks up to @max_bytes not in use; NULL if out of memory. */
struct bi_cache *bi_cache_new(uint64_t max_bytes);
void bi_cache_free(struct bi_cache *c);

/* The cached block at @bytenr with a reference taken, or NULL. */
struct bi_block *bi_cache_get(struct bi_cache *c, uint64_t bytenr);
/* Add a block just read (its reference passes to the caller's use). */
void bi_cache_insert(struct bi_cache *c, struct bi_block *b);
/* Drop a cached block no one holds (it failed what a parent expects, so
 * the next read goes back to the image and tries every copy). */
void bi_cache_evict(struct bi_cache *c, struct bi_block *b);
/* A buffer for a block read of @size bytes: a streamed leaf's, still warm
 * in the CPU's cache, or a new one (NULL: out of memory). */
uint8_t *bi_cache_buffer(struct bi_cache *c, size_t size);

void bi_block_put(struct btrfsimg_fs *fs, struct bi_block *b);
/* Put a block that will not be wanted again soon (a leaf already read or
 * summarized): unless someone else holds it, it leaves the cache and its
 * buffer serves the next read while still warm in the CPU's cache. */
void bi_block_put_once(struct btrfsimg_fs *fs, struct bi_block *b);

#endif
