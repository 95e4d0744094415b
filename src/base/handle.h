/* SPDX-License-Identifier: MIT */
/*
 * The filesystem handle, as every layer sees it. Types only: each layer
 * owns the functions that fill its part (devices: image, superblock
 * and chunk map: btrfs, log overlays: files), and forward
 * declarations keep this header at the bottom of the stack.
 */
#ifndef BI_HANDLE_H
#define BI_HANDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg.h"
#include "base/ondisk.h"

struct bi_dev;
struct bi_cache;
struct bi_chunk_map;
struct bi_log_overlay;
struct bi_vols;
struct bi_sv_scan;
struct bi_orphans;
struct bi_rebuild;

struct bi_super {
	struct btrfsimg_super_info info;
	uint8_t raw[SB_SIZE];
	uint64_t chunk_root_generation;
	uint64_t log_root_transid;
	uint32_t sys_array_size;
	/* the dev_item of the device the copy came from */
	uint64_t devid;
	uint8_t dev_uuid[16];
	uint8_t dev_fsid[16];
	uint64_t dev_total_bytes;
};

/* One DEV_ITEM of the chunk tree: a device the filesystem has. */
struct bi_devitem {
	uint64_t devid, total_bytes;
	uint8_t uuid[16];
};

struct bi_sv_asof {
	uint64_t tree, first, last, as_of;
	uint64_t reach; /* the furthest last of its tree's entries up to it (sorted by first) */
};

struct bi_sv_cut {
	uint64_t tree, objectid;
};

struct bi_root {
	uint64_t id;
	uint64_t bytenr;
	uint64_t generation;
	uint8_t level;
};

struct btrfsimg_fs {
	struct btrfsimg_open_opts opts;
	char err[1024];
	btrfsimg_log_fn log;
	void *log_ctx;
	uint64_t damage;

	struct bi_dev *devs;	/* every device added, in order */
	size_t ndevs, devcap;
	bool opened;

	struct bi_super sb;	/* the copy in use */
	uint64_t missing_devs;
	uint32_t nodesize, sectorsize, csum_size;
	int csum_type;
	uint8_t meta_fsid[16];	/* fsid tree blocks carry */

	struct bi_chunk_map *chunks;
	struct bi_cache *cache;
	struct bi_root root_tree, chunk_tree;
	struct bi_log_overlay *overlays;	/* replayed log, per subvolume (replay.c) */
	struct btrfsimg_log_info log_info;	/* what the replay did (replay.c) */
	struct bi_devitem *devitems;		/* the chunk tree's DEV_ITEMs, devid order */
	size_t ndevitems;
	struct bi_vols *vols;	/* LUKS/LVM layers, keys, layer rows (volume/vol.c) */
	struct bi_dlist *dirs;	/* readdir's buffers, reused (files/dir.c) */

	/* --generation: the transid whose root tree the open reads (0: the
	 * superblock's), how that root was found (for the report), and the
	 * device scan that finds it when no superblock names it, set by
	 * btrfsimg_set_generation (forensic/generation.c) so that the
	 * open (btrfs) calls up only through this pointer. */
	uint64_t want_gen;
	char gen_how[160];
	int (*gen_scan)(struct btrfsimg_fs *fs, uint64_t gen, struct bi_root *out);

	/* which step of an open failed (enum btrfsimg_open_step) and, for an
	 * image, its index: btrfsimg_open_step() */
	int open_step;
	size_t open_image;
	/* salvage (btrfs/salvage.c): the scan of the devices when a way in
	 * is gone, which filesystem of it is read, whether the superblock
	 * was rebuilt, and the newer tree roots read instead of those an
	 * older root tree names (bi_root_find) */
	struct bi_sv_scan *scan;
	/* One pass over an image without partition table: the superblock
	 * scan of the volume stack (volume/fsfind.c) hands each piece it reads
	 * to @raw_piece (the salvage scan's, set by the open: btrfs/
	 * salvage_scan.c), which indexes its tree blocks in @pending[device],
	 * so that the salvage does not read an image it leaves unplaced
	 * again. Bytes [0, @piece) of @p are the piece, the rest up to @len
	 * what follows it. NULL: no hook. */
	int (*raw_piece)(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t pos,
			 const uint8_t *p, size_t len, size_t piece);
	struct bi_sv_scan **pending;
	/* the blocks of subvolume and checksum trees, scanned again once a
	 * tree is rebuilt from its leaves (salvage_leaves.c) */
	struct bi_sv_scan *tree_scan;
	/* the scan's progress (btrfsimg_set_scan_progress), or NULL */
	int (*scan_progress)(void *ctx, uint64_t done, uint64_t total);
	void *scan_progress_ctx;
	unsigned salvage_fsidx;
	bool salvage_super;
	/* devices given without a valid superblock beside ones with it: not
	 * members until the salvage places them by their blocks
	 * (salvage_chunks.c); counted in missing_devs meanwhile */
	uint64_t unplaced_devs;
	/* what tree blocks could not tell, for the data checksums
	 * (salvage_stripes.c): chunks whose stripe order is a guess, and
	 * devices placed by the salvage (index into devs) with another devid
	 * (free, or a device's placed alike) under which their blocks sit as
	 * well */
	uint64_t *salvage_unsure;
	size_t nsalvage_unsure;
#define BI_SV_MAX_TIES 8
	uint64_t salvage_ties[BI_SV_MAX_TIES][2];
	size_t nsalvage_ties;
	struct bi_root *salvage_roots;
	size_t nsalvage_roots;
	/* key ranges of rebuilt trees where a recorded block that did not
	 * read held its keys (salvage_rebuild.c): bi_salvage_items_lost */
	struct bi_lost_keys *salvage_lost;
	size_t nsalvage_lost;
	/* A block of a subvolume or checksum tree (@tree) that reads on no
	 * copy, in any open: that tree's lost nodes rebuilt then, once per
	 * tree and handle (bi_salvage_rebuild_tree, salvage_rebuild.c), through
	 * this pointer the open sets, so that block.c does not call up into
	 * the salvage; true when the read is worth retrying. @rebuild is its
	 * state: the extent tree's evidence, loaded once, and the trees tried. */
	bool (*lost_block)(struct btrfsimg_fs *fs, uint64_t tree);
	struct bi_rebuild *rebuild;
	/* trees rebuilt from the leaves a scan found (salvage_leaves.c): the
	 * objectid ranges of the leaves known live only as of an older
	 * generation than the tree's, for bi_salvage_as_of */
	struct bi_sv_asof *salvage_asof;
	size_t nsalvage_asof, salvage_asof_cap;
	/* ... and the inodes whose items may run into keys lost between its
	 * leaves (bi_salvage_cut) */
	struct bi_sv_cut *salvage_cut;
	size_t nsalvage_cut, salvage_cut_cap;
	/* per subvolume, its inodes' back references, read once a walk in
	 * damaged mode needs them (files/orphans.c) */
	struct bi_orphans *orphans;
	/* --fsid (btrfsimg_set_fsid): the filesystem to read, as lowercase
	 * hex digits without dashes, a prefix of 8 to 32 of them ("": the
	 * superblock's); and btrfsimg_scan_filesystems()'s list, kept */
	char want_fsid[33];
	struct btrfsimg_found_fs *found;
	size_t nfound;
};

#endif
