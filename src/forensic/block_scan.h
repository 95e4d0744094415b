/* SPDX-License-Identifier: MIT */
/*
 * The forensic index (block_scan.c): every tree block found on the devices,
 * as small entries; the blocks themselves are read again on demand
 * (bi_fx_read_block), through the same checks as at scan time.
 * recover.c builds file versions from it.
 */
#ifndef BI_FSCAN_H
#define BI_FSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "btrfsimg_forensic.h"
#include "base/handle.h"
#include "base/key.h"
#include "btrfs/tree_checker.h"

struct bi_fx_block {
	uint64_t bytenr, generation, owner;
	uint64_t devid, physical;
	uint64_t csum8; /* first 8 bytes of the checksum: copies compare equal */
	bi_key first, last;
	uint32_t nritems;
	uint8_t level;
	bool today; /* while scanning: today's chunk map places it */
};

/* A chunk item of a stale chunk-tree leaf (not in today's map). */
struct bi_fx_chunk {
	struct bi_chunk *c;
	uint64_t generation; /* of the leaf it came from */
};

/* A root the superblocks name: the primary root or a backup root. */
struct bi_fx_super_root {
	uint64_t generation, bytenr; /* the root tree's */
	uint64_t fs_bytenr, fs_gen;  /* tree 5's, 0 if unknown */
};

struct bi_fx_recovered; /* recover.c */

struct btrfsimg_forensic {
	struct btrfsimg_fs *fs;
	struct btrfsimg_scan_stats stats;
	struct bi_fx_block *blocks; /* sorted by owner, generation, level, first key */
	size_t nblocks;
	struct bi_fx_chunk *chunks;
	size_t nchunks;
	struct bi_fx_super_root *sroots;
	size_t nsroots;
	struct bi_fx_recovered *rec; /* built by the first btrfsimg_forensic_recovered */
	uint8_t *buf;		     /* nodesize bytes for re-reads */
};

/* Read block @b again from where it was found and check it (checksum,
 * header, item table, the indexed bytenr and generation). Returns 0 with
 * the block in f->buf, or a negative errno with a message. */
int bi_fx_read_block(struct btrfsimg_forensic *f, const struct bi_fx_block *b);
/* The same into @buf (nodesize bytes) instead of f->buf. */
int bi_fx_read_block_to(struct btrfsimg_forensic *f, const struct bi_fx_block *b, uint8_t *buf);

/* Map @logical to (devid, physical) for mirror 0 through today's chunk map
 * or, failing that, a stale chunk item. *old says which. -ENOENT if none. */
int bi_fx_map(struct btrfsimg_forensic *f, uint64_t logical, uint64_t *devid, uint64_t *physical,
	      uint64_t *room, bool *old);

/* The index range [*lo, *hi) of blocks owned by @owner. */
void bi_fx_owner_range(const struct btrfsimg_forensic *f, uint64_t owner, size_t *lo, size_t *hi);

/* btrfsimg_forensic_scan reading @piece bytes at a time (a multiple of
 * the sector size, at most 64 MiB) with @depth ring buffers per device
 * (2 to 16; anything else reads through bi_dev_read only): the tests
 * use small pieces to put blocks across piece boundaries. */
int bi_fx_scan(btrfsimg_fs *fs, size_t piece, unsigned depth, btrfsimg_scan_progress_fn fn,
	       void *ctx, btrfsimg_forensic **out);

/* Free the index and the handle (what the scan made; recover.c's
 * btrfsimg_forensic_free frees its part first). Accepts NULL. */
void bi_fx_index_free(struct btrfsimg_forensic *f);

/* history.c: every generation `history` lists, oldest first (*gens
 * malloc'ed, the caller frees). Returns 0 or -ENOMEM. */
int bi_fx_generations(const btrfsimg_forensic *f, uint64_t **gens, size_t *ngens);

/* genroot.c: the root-tree root of generation @gen: the block a
 * superblock copy names, else, level by level from the highest, the one
 * root-tree block of @gen that its own extent tree records; else (with
 * @report, as damage) the only one at the highest level. @how says which
 * or what failed. The filesystem's root tree is swapped for each probe
 * and restored. Returns 0 or -ENOENT. */
int bi_fx_pick_root(struct btrfsimg_forensic *f, uint64_t gen, struct bi_root *out, char *how,
		    size_t howlen, bool report);

/* qsort that accepts an empty (NULL) array, which qsort itself may not. */
static inline void fx_qsort(void *base, size_t n, size_t size,
			    int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

#endif
