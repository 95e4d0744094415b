/* SPDX-License-Identifier: MIT */
/*
 * Devices as the chunk map lays them out, for the readers that go through
 * a device from start to end (scrub.c, unalloc.c): which chunk stripe
 * holds each physical byte, what logical bytes (or which parity) lie
 * there, and what the extent and csum trees say of a chunk's range.
 */
#ifndef BI_SCRUB_MAP_H
#define BI_SCRUB_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"
#include "btrfs/tree_checker.h"

/* One stripe of one chunk on a device: [physical, physical + span). */
struct bi_smap_devext {
	uint64_t physical, span;
	const struct bi_chunk *c; /* borrowed from fs->chunks */
	uint32_t stripe;	  /* index into c->stripes */
};

/* Every stripe of every chunk on device @devid, sorted by physical
 * offset, clipped to [0, @limit) and to one another (a range two chunks
 * claim stays with the first), empty ones dropped. *out is malloc'd. */
int bi_smap_dev_extents(struct btrfsimg_fs *fs, uint64_t devid, uint64_t limit,
			struct bi_smap_devext **out, size_t *n);

/* What lies at one physical position of a stripe, up to where that
 * changes (the 64 KiB stripe unit ends, or the stripe does). */
struct bi_smap_piece {
	uint64_t len;	  /* bytes from the position on */
	bool mapped;	  /* false: past the chunk's last row (no data) */
	bool parity;	  /* RAID5/6 P or Q */
	uint32_t pos;	  /* RAID5/6 position in the row (d: P, d+1: Q) */
	uint64_t logical; /* data: the logical address; parity: its row's first */
	uint64_t unit;	  /* offset inside the 64 KiB stripe unit (striped profiles) */
	int copy;	  /* the mirror (0-based) bi_read_copy reads it as */
};
/* @phys lies in [x->physical, x->physical + x->span). Pure. */
void bi_smap_piece_at(const struct bi_smap_devext *x, uint64_t phys, struct bi_smap_piece *out);

/* What the extent tree says is in use in a chunk, sorted by start. */
struct bi_smap_ext {
	uint64_t start, len, gen;
	bool tree; /* a tree block (METADATA_ITEM or TREE_BLOCK flag) */
};
/* The data checksums of a chunk: items in logical order. */
struct bi_smap_csum {
	uint64_t start, end; /* logical, sector aligned */
	size_t at;	     /* offset of the first checksum in bi_smap_chunk.sums */
};
struct bi_smap_chunk {
	const struct bi_chunk *c;
	struct bi_smap_ext *ext;
	size_t n, ncap;
	struct bi_smap_csum *cs;
	size_t ncs, cscap;
	uint8_t *sums;
	size_t sumlen, sumcap;
};
/* Load what the extent tree (and with @csums, the csum tree) holds inside
 * chunk @c into @k (emptied first). Items that do not fit the chunk are
 * clipped to it. 0 or a negative errno (message on @fs). */
int bi_smap_chunk_load(struct btrfsimg_fs *fs, const struct bi_chunk *c, bool csums,
		       struct bi_smap_chunk *k);
void bi_smap_chunk_free(struct bi_smap_chunk *k);
/* Index of the first extent ending after @logical (k->n if none). */
size_t bi_smap_ext_first(const struct bi_smap_chunk *k, uint64_t logical);
/* The stored checksum of the sector at @logical, or NULL; @hint is a
 * cursor into k->cs (start at 0) that makes ascending lookups cheap. */
const uint8_t *bi_smap_csum_find(const struct bi_smap_chunk *k, uint64_t logical,
				 uint32_t csum_size, uint32_t sectorsize, size_t *hint);

#endif
