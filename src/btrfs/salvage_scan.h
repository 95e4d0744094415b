/* SPDX-License-Identifier: MIT */
/*
 * The salvage scan: the tree blocks found on the devices, read by
 * position, not through any map, for an open whose way in is gone.
 */
#ifndef BI_SV_H
#define BI_SV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/handle.h"

/* At most this many filesystems (fsids) are told apart on the devices. */
#define BI_SV_MAX_FS 16
/* Per tree, root candidates of at most this many generations are kept. */
#define BI_SV_TOPS 4
/* ... and of one generation at most this many blocks of its highest level */
#define BI_SV_SAME_GEN 64

/* One tree block, where it was found. Valid: its checksum under its
 * filesystem's type and nodesize, and the tree checker's header and item
 * table checks with the header's own bytenr. */
struct bi_sv_blk {
	uint64_t physical, bytenr, generation, owner;
	uint32_t dev;		/* index into fs->devs */
	uint32_t nritems;
	uint8_t level;
	uint8_t fsidx;		/* index into bi_scan.fss */
};

/* A filesystem whose blocks were found: its identity from their headers,
 * its nodesize and checksum type the one pair its blocks verify under. */
struct bi_sv_fs {
	uint8_t fsid[16], chunk_uuid[16];
	uint32_t nodesize;
	int csum_type;
	uint64_t nblocks, gen_min, gen_max;
	uint64_t phys_min, phys_max;	/* device offsets of its first and last block */
	uint32_t ndevs;			/* devices it was found on */
	uint32_t last_dev;		/* + 1; 0: none yet */
};

/* The index: what the salvage needs, never the blocks. Kept are every
 * block of the root, chunk and device trees, the extent and block-group
 * tree leaves that hold block-group items, and for every other tree its
 * root candidates (the highest-level blocks of each of its newest
 * BI_SV_TOPS generations). Sorted by (fsidx, owner, generation desc,
 * level desc). */
struct bi_sv_scan {
	struct bi_sv_fs fss[BI_SV_MAX_FS];
	unsigned nfs;
	uint64_t other_fs_blocks;	/* of filesystems past BI_SV_MAX_FS */
	struct bi_sv_blk *blk;
	size_t n, cap;
	uint64_t bytes;			/* read in all */
	/* a device's scan made on the superblock scan's pass (fs->pending):
	 * whether it saw the whole image, and the --fsid it was made under */
	bool whole;
	char want[33];
	/* bi_sv_scan_trees: only the blocks of subvolume trees and the
	 * checksum tree, every one kept (up to BI_SV_TREE_MAX; the rest
	 * counted in @dropped) */
	bool only;
	uint64_t dropped;
};

/* At most this many blocks are indexed by bi_sv_scan_trees. */
#define BI_SV_TREE_MAX (1u << 20)

/* Read every device not absorbed by another (fs->devs) once, front to
 * back. With @known (fs->meta_fsid, nodesize and csum set from a valid
 * superblock) only that filesystem's blocks are checked; else every
 * filesystem's, each nodesize and checksum type tried until one verifies.
 * With fs->want_fsid set (--fsid), the blocks of filesystems it does not
 * name are counted in their summary (fss) but never enter the index.
 * 0 or a negative errno with the message on @fs. */
int bi_sv_scan_devices(struct btrfsimg_fs *fs, bool known, struct bi_sv_scan **out);
void bi_sv_scan_free(struct bi_sv_scan *s);

/* fs->raw_piece: index the tree blocks of a piece of image @d read by the
 * superblock scan (volume/fsfind.c) into fs->pending, as scan_device
 * would for @d unplaced (every 512 bytes, every filesystem); a later
 * bi_sv_scan_devices takes that index instead of reading @d again while
 * @d is still unplaced, whole and at byte 0. 0 or -ENOMEM. */
int bi_sv_scan_observe(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t pos,
		       const uint8_t *p, size_t len, size_t piece);
/* The pending scans dropped. */
void bi_sv_scan_pending_free(struct btrfsimg_fs *fs);
/* Every block of the subvolume trees and the checksum tree of the
 * filesystem in use (fs->meta_fsid, nodesize and checksum type set), all
 * levels and generations, read again from the devices (once: the first
 * scan keeps only their roots): for trees whose root and extent records
 * are lost, so that the blocks below them are known only by scanning.
 * Sorted as the index is (bi_salvage_owner_range, fsidx 0). 0 or a
 * negative errno with the message on @fs. */
int bi_sv_scan_trees(struct btrfsimg_fs *fs, struct bi_sv_scan **out);

/* Whether @uuid (16 bytes) is the filesystem --fsid names: its hex digits
 * begin with fs->want_fsid (true when none was given). */
bool bi_sv_fsid_wanted(const struct btrfsimg_fs *fs, const uint8_t uuid[16]);

/* Read block @b again from where it was found into @buf (the nodesize of
 * its filesystem) and check it as the scan did: 0, or -EIO if it changed. */
int bi_sv_scan_reread(struct btrfsimg_fs *fs, const struct bi_sv_scan *s, const struct bi_sv_blk *b,
		   uint8_t *buf);

#endif
