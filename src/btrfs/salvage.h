/* SPDX-License-Identifier: MIT */
/*
 * Salvage: the open sequence's fallbacks when a way in is gone, each
 * rebuilt from the tree blocks the scan finds (salvage_scan.h) and announced as
 * damage (so a command that reads through it exits 1).
 */
#ifndef BI_SALVAGE_H
#define BI_SALVAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "base/handle.h"

/* No superblock copy valid: take the filesystem with the most verified
 * blocks on the devices, its fsid, chunk-tree uuid, nodesize and checksum
 * type from them, its newest generation, and the newest chunk-tree and
 * root-tree roots as the starting points. @why is the superblock reader's
 * message, kept in the error when nothing is found. */
int bi_salvage_super(struct btrfsimg_fs *fs, const char *why);

/* Build fs->chunks from what the scan found: the chunk items of every
 * chunk-tree leaf and, for block groups no chunk item covers, the
 * device extents of the device tree; each candidate verified by the tree
 * blocks it places where they were found (a candidate that misplaces
 * more than it places is set aside), then the best supported first,
 * newest first, overlaps left out; a surviving sys_chunk_array first. Devices
 * without a superblock get their devid from where the candidates place
 * the blocks found on them. */
int bi_salvage_chunks(struct btrfsimg_fs *fs);

/* The chunk tree read, but some devices had no superblock: each gets the
 * devid whose stripes put the most of its blocks where they were found
 * (fs->chunks the map), or is set aside, said either way. */
int bi_salvage_place_devices(struct btrfsimg_fs *fs);

/* Once the trees read: the stripe order of each striped data chunk rebuilt
 * from device extents, and which of two devices the tree blocks could not
 * tell apart is which, decided by the data checksums of sampled sectors
 * (salvage_stripes.c); said either way. Only fails for lack of memory. */
int bi_salvage_stripes(struct btrfsimg_fs *fs);
/* A chunk at @logical whose stripe order the tree blocks did not decide. */
int bi_salvage_note_unsure(struct btrfsimg_fs *fs, uint64_t logical);
/* Chunks wider than an order can be searched for (n! grows past 6) are
 * ordered one stripe at a time by votes: [extent][index] counts the
 * pieces of evidence (a tree block where it was found, a data sector
 * whose checksum verifies) that extent j of the chunk, its device extents
 * being its stripes as they stand, holds at stripe index k. */
#define BI_SV_MAX_WIDE 16
struct bi_chunk;
struct bi_sv_votes {
	uint32_t v[BI_SV_MAX_WIDE][BI_SV_MAX_WIDE];
};
/* Whether extent @j of @c, put at index @k, holds logical @logical at
 * @physical on its device (@c is restored before the return). */
bool bi_salvage_extent_holds(struct bi_chunk *c, uint16_t j, uint16_t k, uint64_t physical,
			     uint64_t logical);
/* What bi_salvage_order_by_votes decided. */
struct bi_sv_order {
	uint16_t decided;	/* indices placed by votes or, the last one, by elimination */
	uint64_t votes, against; /* votes the order takes, votes it overrules */
	bool refused;		/* two extents as well voted for one index: left unsure */
};
/* Reorder the stripes of @c (at most BI_SV_MAX_WIDE) by @v: the (extent,
 * index) pair with the most votes first, then the next among those left,
 * so that a forged minority is outvoted; a tie at the top between two
 * extents (not raid10 mirrors of each other) is refused, the rest left in
 * the order they had. */
void bi_salvage_order_by_votes(struct bi_chunk *c, const struct bi_sv_votes *v,
			       struct bi_sv_order *out);
/* The next order of @v[0..n) (lexicographic); false after the last. */
bool bi_salvage_next_order(uint16_t *v, size_t n);

/* The root tree cannot be read (or the superblock was rebuilt): the
 * newest candidate whose whole root tree reads, from the superblock's
 * backup roots and the scan; then for each tree, a newer root the scan
 * found (up to the newest generation known) that verifies, kept in
 * fs->salvage_roots for bi_root_find. */
int bi_salvage_root(struct btrfsimg_fs *fs);
/* Each subvolume tree the chosen root tree names whose root node reads
 * on no copy: rebuilt in memory from the live blocks below it that the
 * extent tree records (salvage_rebuild.c), said as damage; left as it was
 * without that evidence. 0 or a negative errno (no memory). */
int bi_salvage_rebuild_lost(struct btrfsimg_fs *fs);
/* Tree @tree (a subvolume tree or the checksum tree; false for any other)
 * has a block that reads on no copy: its lost nodes rebuilt as
 * bi_salvage_rebuild_lost does, the first time it is asked for that tree
 * on this handle (true then: a read that failed is worth retrying), said
 * as damage; fs->err is left as it was. fs->lost_block in an open. */
bool bi_salvage_rebuild_tree(struct btrfsimg_fs *fs, uint64_t tree);
void bi_salvage_rebuild_free(struct btrfsimg_fs *fs);
/* Whether a tree read through @fs may miss leaves without a read error: a
 * salvage opened it, or a tree's lost nodes were rebuilt (their recorded
 * children that did not read are left out). Readers then look for what
 * such a leaf held by other ways (files/orphans.h). */
bool bi_salvage_trees_rebuilt(const struct btrfsimg_fs *fs);
/* Where a rebuilt node's recorded child that did not read may have held
 * keys: between two of its readable children, [lo, hi] (inclusive, so
 * the objectids at both ends are in it). */
struct bi_lost_keys {
	uint64_t tree;
	struct btrfsimg_key lo, hi;
	bool unbounded;		/* hi: none */
};
/* The next such range after @after (NULL: the first) where items of
 * @objectid in tree @tree may have been; NULL when none is left. Borrowed
 * for the handle's life. */
const struct bi_lost_keys *bi_salvage_lost_next(const struct btrfsimg_fs *fs, uint64_t tree,
						uint64_t objectid,
						const struct bi_lost_keys *after);

/* Tree @r (root node unreadable on every copy, @why) with no extent record
 * of its blocks (@no_records why not): rebuilt from the newest consistent
 * leaves a second scan of the devices finds under its owner
 * (salvage_leaves.c), said as damage. 0 or a negative errno (message on
 * @fs). */
int bi_salvage_leaves(struct btrfsimg_fs *fs, const struct bi_root *r, const char *why,
		      const char *no_records);
/* Of a tree rebuilt by bi_salvage_leaves, the generation as of which the
 * items of inode @objectid are known live when older than the tree's
 * (their leaf named by no node of the tree's generation), else 0. */
uint64_t bi_salvage_as_of(const struct btrfsimg_fs *fs, uint64_t tree, uint64_t objectid);

/* Whether inode @objectid of a tree bi_salvage_leaves rebuilt may miss
 * items: its keys run to the edge of a leaf next to which keys may be
 * lost. */
bool bi_salvage_cut(const struct btrfsimg_fs *fs, uint64_t tree, uint64_t objectid);

void bi_salvage_free(struct btrfsimg_fs *fs);

/* Devices left unplaced (no partition table, no superblock: bi_dev.unplaced)
 * get their window from the tree blocks the scan found on them: the start
 * most blocks' chunk mappings agree on (salvage_place.c); the index is
 * moved into the window. 0 or a negative errno (message on @fs). */
struct bi_sv_scan;
int bi_salvage_place(struct btrfsimg_fs *fs, struct bi_sv_scan *s);

/* What the three steps share (salvage.c): the scan of the devices, made
 * once; the blocks of tree @owner of filesystem @fsidx in the scan's
 * index, [*lo, *hi) (newest generation first). */
struct bi_sv_scan;
int bi_salvage_scan(struct btrfsimg_fs *fs);
void bi_salvage_owner_range(const struct bi_sv_scan *s, unsigned fsidx, uint64_t owner,
			    size_t *lo, size_t *hi);

#endif
