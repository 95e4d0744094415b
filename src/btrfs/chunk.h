/* SPDX-License-Identifier: MIT */
/*
 * The chunk map: logical addresses to device offsets, and reads through it.
 */
#ifndef BI_CHUNK_H
#define BI_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "btrfs/tree_checker.h"

struct bi_chunk_map *bi_chunk_map_new(void);
void bi_chunk_map_free(struct bi_chunk_map *m);
/* Take ownership of @c (freed on every path but a successful insert).
 * An overlap with another chunk is -EUCLEAN with @why set. A chunk with
 * the same start and length as one already present is dropped: 0 if it
 * is identical (the sys array and the chunk tree repeat each other), 1 if
 * it differs (the first one is kept, as the kernel keeps the sys array's). */
int bi_chunk_map_insert(struct bi_chunk_map *m, struct bi_chunk *c, char *why, size_t whylen);
/* The chunk holding @logical, or NULL. Borrowed from the map. O(log n). */
const struct bi_chunk *bi_chunk_lookup(const struct bi_chunk_map *m, uint64_t logical);
size_t bi_chunk_map_count(const struct bi_chunk_map *m);
const struct bi_chunk *bi_chunk_map_at(const struct bi_chunk_map *m, size_t i);
/* Chunks found degraded (some stripe's device missing) while loading. */
uint64_t bi_chunk_map_degraded(const struct bi_chunk_map *m);

/* Where one piece of a logical read lands. */
struct bi_phys {
	uint64_t devid;
	uint64_t physical;
	uint64_t len;		/* bytes usable before the stripe (or chunk) ends */
	uint32_t stripe;	/* index into chunk->stripes */
};
/* Map @logical inside @c for mirror @copy (0-based, below the profile's
 * mirror count: num_stripes for dup and raid1 to raid1c4, 2 for raid10,
 * else 1). RAID5/6 take copy 0 only: the data stripe itself. Pure
 * arithmetic; -EINVAL outside the chunk or for a bad copy. */
int bi_chunk_map_phys(const struct bi_chunk *c, uint64_t logical, int copy,
		      struct bi_phys *out);
/* RAID5/6: position @pos (0..d-1 the data stripes in logical order, d P,
 * d+1 Q) of the full stripe holding @logical, at the same offset inside
 * the stripe. -EINVAL for other profiles or a bad position. */
int bi_chunk_map_row(const struct bi_chunk *c, uint64_t logical, uint32_t pos,
		     struct bi_phys *out);
/* The inverse of bi_chunk_map_phys: byte @physical of stripe @idx of @c
 * is *logical, and *len bytes from there stay on that stripe. 1 when it is
 * RAID5/6 parity (*logical, *len: the row it protects); -EINVAL outside
 * the stripe's device extent. Pure. */
int bi_chunk_map_reverse(const struct bi_chunk *c, uint32_t idx, uint64_t physical,
			 uint64_t *logical, uint64_t *len);
/* How many ways there are to read a block of @c, as the kernel counts
 * them (btrfs_num_copies): the mirror count for dup, raid1 to raid1c4 and
 * raid10; raid5 2 (direct, rebuilt from P); raid6 num_stripes (direct,
 * from P, from Q, then from P and Q with one more data stripe distrusted,
 * each in turn); else 1. */
int bi_chunk_num_copies(const struct bi_chunk *c);

/* Parse the superblock's sys_chunk_array into fs->chunks. */
int bi_chunk_load_sys_array(struct btrfsimg_fs *fs);
/* Decode and check one chunk item found at @where (for messages) and add
 * it to fs->chunks; data+metadata needs the mixed-groups feature. */
int bi_chunk_add(struct btrfsimg_fs *fs, const uint8_t *item, size_t len, uint64_t logical,
		 const char *where);
/* Report (as damage) every chunk with a stripe on a missing device, saying
 * whether it can still be read whole. A stripe's device is present when a
 * member device has its devid and dev_uuid (as the kernel's
 * btrfs_find_device). */
void bi_chunk_map_report_degraded(struct btrfsimg_fs *fs);
/* What missing devices mean for the whole filesystem, for messages: "2 of
 * 3 devices missing; raid5 tolerates 1, so 3 of 4 chunks cannot be read
 * whole" (the profile of the first chunk past its tolerance), or just the
 * count. Writes nothing and returns 0 when no device is missing; else
 * snprintf's length. */
int bi_chunk_map_missing_summary(const struct btrfsimg_fs *fs, char *buf, size_t len);
/* Read @len bytes at @logical using way @copy (0 <= copy <
 * bi_num_copies(logical), else -EINVAL), crossing stripe and chunk
 * boundaries (a later chunk with fewer ways uses copy modulo its count).
 * Mirrors: copy k reads mirror k (-EIO if its device is missing).
 * RAID5/6: see bi_chunk_num_copies; copy 0 rebuilds when the data device
 * is missing, and every rebuild also works around missing devices while
 * at most 1 (raid5) or 2 (raid6) stripes of the row are lost. Memory: two
 * or three buffers of at most stripe_len, whatever the stripe count. */
int bi_read_copy(struct btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len, int copy);
/* Whether way @copy of @logical (a mirror profile) lies on a device that
 * was not supplied: known since the open, so a failed read of it needs no
 * report of its own. */
bool bi_copy_missing(struct btrfsimg_fs *fs, uint64_t logical, int copy);
/* Start reading the first copy of [logical, +len) into the page cache
 * ahead of its use (see bi_dev_prefetch); RAID5/6 chunks are left alone. */
void bi_prefetch(struct btrfsimg_fs *fs, uint64_t logical, uint64_t len);
/* Number of ways to read @logical (1 if unmapped: the read will fail). */
int bi_num_copies(struct btrfsimg_fs *fs, uint64_t logical);

#endif
