/* SPDX-License-Identifier: MIT */
/*
 * The btrfs core's open sequence, bottom up: locate every device (the
 * image itself or a partition: volume/part.c), read the superblocks and
 * match devices (super.c), bootstrap the chunk map from the
 * sys_chunk_array, read the chunk tree through it (chunk.c, block.c), then
 * check that the root tree is readable. Each step leaves a message on
 * failure. The file layer adds log replay on top (files/fs.c).
 *
 * The chunk tree is read here, above both the chunk map and the tree
 * reader, so that neither of them calls the other's loader: the map is
 * filled from below (bi_chunk_add) while block.c reads through it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/open.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "image/dev.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "volume/part.h"
#include "volume/vol.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "btrfs/salvage.h"
#include "btrfs/salvage_roottree.h"
#include "btrfs/salvage_scan.h"
#include "btrfs/super.h"
#include "btrfs/tree.h"

#define DEFAULT_CACHE_BYTES (64ull << 20)
/* btrfs allows 2^64 devids; a report needs no more than the kernel's
 * practical limit of devices per filesystem. */
#define BI_MAX_DEVITEMS 4096

/* Keep a DEV_ITEM for the device table (btrfsimg_devices). Only reports
 * read it, so a bad one is reported and left out rather than fatal. */
static int keep_dev_item(struct btrfsimg_fs *fs, const struct bi_item *item)
{
	struct bi_devitem d;
	char why[128];
	if (bi_dev_item_parse(item->data, item->size, item->key.offset, &d, why, sizeof(why)) < 0) {
		bi_damage(fs, "corrupt dev item: root=3 block=%" PRIu64 " slot=%u, %s; left out",
			  item->block, item->slot, why);
		return 0;
	}
	if (fs->ndevitems >= BI_MAX_DEVITEMS)
		return 0;
	struct bi_devitem *v = realloc(fs->devitems, (fs->ndevitems + 1) * sizeof(*v));
	if (!v)
		return bi_err(fs, -ENOMEM, "out of memory reading dev items");
	v[fs->ndevitems++] = d;
	fs->devitems = v;
	return 0;
}

int bi_load_chunk_tree(struct btrfsimg_fs *fs)
{
	/* the kernel takes every CHUNK_ITEM, whatever its objectid */
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, &fs->chunk_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		if (item.key.type == KT_DEV_ITEM && item.key.objectid == OBJ_DEV_ITEMS) {
			rc = keep_dev_item(fs, &item);
			continue;
		}
		if (item.key.type != KT_CHUNK_ITEM) {
			rc = 0;
			continue;
		}
		char where[96];
		snprintf(where, sizeof(where), "chunk tree leaf: block=%" PRIu64 " slot=%u",
			 item.block, item.slot);
		rc = bi_chunk_add(fs, item.data, item.size, item.key.offset, where);
	}
	bi_iter_end(&it);
	if (rc < 0)
		return rc;
	if (!fs->unplaced_devs) /* else once they are placed (salvage_chunks.c) */
		bi_chunk_map_report_degraded(fs);
	return 0;
}

static int open_locate_devices(struct btrfsimg_fs *fs)
{
	if (fs->ndevs == 0)
		return bi_err(fs, -EINVAL, "no device image given");
	/* an image without table is read once: its superblock scan indexes
	 * its tree blocks too, for the salvage if none is found */
	fs->raw_piece = bi_sv_scan_observe;
	return bi_vol_assemble(fs); /* partitions, LUKS, LVM (volume) */
}

/* A failed step falls back to the salvage unless devices are missing (a
 * degraded read fails where the missing device was needed, not because the
 * way in is gone) or a device without superblock may be the one needed. */
static bool salvageable(const struct btrfsimg_fs *fs)
{
	return fs->missing_devs == 0 || fs->unplaced_devs > 0;
}

/* The sys_chunk_array bootstraps the chunk tree. A chunk tree that does
 * not read leaves the map to the salvage (salvage.c). */
static int open_chunks(struct btrfsimg_fs *fs)
{
	fs->chunks = bi_chunk_map_new();
	fs->cache = bi_cache_new(fs->opts.cache_bytes ? fs->opts.cache_bytes
						      : DEFAULT_CACHE_BYTES);
	if (!fs->chunks || !fs->cache)
		return bi_err(fs, -ENOMEM, "out of memory creating the chunk map");
	/* Without a superblock, the newest chunk-tree root found may be an
	 * older one (the newest copies lost): the map is rebuilt from every
	 * candidate, the block groups and device extents included. */
	if (fs->salvage_super)
		return bi_salvage_chunks(fs);
	int rc = bi_chunk_load_sys_array(fs);
	if (rc == 0)
		rc = bi_load_chunk_tree(fs);
	if (rc < 0 && rc != -ENOMEM && salvageable(fs))
		return bi_salvage_chunks(fs);
	if (rc == 0 && fs->unplaced_devs)
		rc = bi_salvage_place_devices(fs);
	return rc;
}

static int open_root_tree(struct btrfsimg_fs *fs)
{
	struct bi_expect e = { .owner = OBJ_ROOT_TREE,
			       .generation = fs->root_tree.generation,
			       .level = fs->root_tree.level };
	struct bi_block *b;
	int rc = bi_block_read(fs, fs->root_tree.bytenr, &e, &b);
	if (rc < 0)
		return rc;
	bi_block_put(fs, b);
	return 0;
}

/* --generation N: the root tree N committed. The superblock in use names
 * its own generation's root and, in its four backup roots, those of the
 * last commits (kernel fs/btrfs/disk-io.c backup_super_roots()); older
 * ones are found by the device scan behind fs->gen_scan. The chunk tree
 * stays today's (chunks rarely move; a block that no longer maps is
 * damage when read), and the log is not replayed: it continues the
 * superblock's generation, not N. Every block below the root is checked
 * against its parent's pointer (bytenr, generation <= N), so a block
 * overwritten since is damage where it is read, never followed. */
static int open_generation(struct btrfsimg_fs *fs)
{
	uint64_t n = fs->want_gen;
	if (n == 0)
		return 0;
	if (n == fs->sb.info.generation) {
		snprintf(fs->gen_how, sizeof(fs->gen_how),
			 "root tree at logical %" PRIu64 " (the superblock's)", fs->root_tree.bytenr);
		return 0;
	}
	fs->opts.flags |= BTRFSIMG_OPEN_NO_LOG_REPLAY;
	if (n > fs->sb.info.generation)
		return bi_err(fs, -ENOENT,
			      "generation %" PRIu64 ": newer than the superblock's, have %" PRIu64
			      " expect <= %" PRIu64,
			      n, n, fs->sb.info.generation);
	for (int b = 0; b < BACKUP_ROOTS; b++) {
		const uint8_t *p = fs->sb.raw + SB_SUPER_ROOTS + (size_t)b * BACKUP_SIZE;
		if (bi_le64(p + 8) != n || bi_le64(p) == 0)
			continue;
		fs->root_tree = (struct bi_root){ OBJ_ROOT_TREE, bi_le64(p), n,
						  p[BACKUP_TREE_LEVEL] };
		snprintf(fs->gen_how, sizeof(fs->gen_how),
			 "root tree at logical %" PRIu64 " (from backup root %d)", bi_le64(p), b);
		return 0;
	}
	if (!fs->gen_scan)
		return bi_err(fs, -ENOENT, "generation %" PRIu64 ": no backup root names it", n);
	return fs->gen_scan(fs, n, &fs->root_tree);
}

/* A read that failed with devices missing is first of all that: say so
 * before the failed check, or it reads like corruption. */
static void explain_missing(struct btrfsimg_fs *fs)
{
	char summary[256], detail[sizeof(fs->err)];
	if (!bi_chunk_map_missing_summary(fs, summary, sizeof(summary)))
		return;
	snprintf(detail, sizeof(detail), "%s", fs->err);
	bi_err(fs, 0, "%s: %s", summary, detail);
}

/* Whether no device has a valid superblock copy: the open then rebuilds
 * one (salvage.c) rather than give up. A copy forced by the caller
 * (super_mirror) is never replaced. */
static bool no_valid_super(const struct btrfsimg_fs *fs)
{
	if (fs->opts.flags & BTRFSIMG_OPEN_SUPER_MIRROR)
		return false;
	for (size_t k = 0; k < fs->ndevs; k++)
		for (int i = 0; i < SB_MIRROR_MAX; i++)
			if (fs->devs[k].mirrors[i].state == BTRFSIMG_MIRROR_VALID)
				return false;
	return true;
}

static int open_roots(struct btrfsimg_fs *fs)
{
	if (fs->salvage_super && fs->want_gen) /* no superblock says which is which */
		return bi_err(fs, -EOPNOTSUPP,
			      "generation %" PRIu64 ": not with a superblock rebuilt from the tree "
			      "blocks; open without --generation",
			      fs->want_gen);
	if (fs->salvage_super)
		return bi_salvage_root(fs); /* the newest root tree that reads whole */
	int rc = open_generation(fs);
	if (rc == 0)
		rc = open_root_tree(fs);
	if (rc == 0 && fs->root_tree.level && !fs->want_gen && salvageable(fs))
		rc = bi_salvage_root_tree_whole(fs, &fs->root_tree); /* a lost leaf: salvaged */
	if (rc < 0 && rc != -ENOMEM && !fs->want_gen && salvageable(fs))
		rc = bi_salvage_root(fs);
	return rc;
}

/* Whether some device shows superblock magic at a copy's place: one that
 * was not located (another device failed first) still names the
 * filesystem, so the open is not a salvage. */
static bool any_super_magic(struct btrfsimg_fs *fs)
{
	for (size_t k = 0; k < fs->ndevs; k++)
		for (int i = 0; i < SB_MIRROR_MAX; i++) {
			uint8_t m[8];
			uint64_t off = bi_super_offset(i) + SB_MAGIC_OFF;
			if (off + sizeof(m) <= fs->devs[k].size &&
			    bi_dev_read(fs, &fs->devs[k], off, m, sizeof(m)) == 0 &&
			    bi_le64(m) == SB_MAGIC)
				return true;
		}
	return false;
}

/* --fsid names another filesystem than the valid superblock found (mkfs
 * made a new one over it): that superblock and the devices it matched are
 * set aside, and the one named is rebuilt from its own blocks. */
static int open_other_fsid(struct btrfsimg_fs *fs)
{
	char u[37], why[160];
	bi_uuid_str(fs->sb.info.fsid, u);
	snprintf(why, sizeof(why), "none of --fsid %s; the superblock found names filesystem %s",
		 fs->want_fsid, u);
	for (size_t k = 0; k < fs->ndevs; k++) {
		fs->devs[k].member = false;
		fs->devs[k].devid = 0;
	}
	fs->missing_devs = 0;
	return bi_salvage_super(fs, why);
}

static bool super_wanted(const struct btrfsimg_fs *fs)
{
	return bi_sv_fsid_wanted(fs, fs->sb.info.fsid) ||
	       bi_sv_fsid_wanted(fs, fs->sb.info.metadata_uuid);
}

int bi_core_open(struct btrfsimg_fs *fs)
{
	int rc = open_locate_devices(fs);
	bool located = rc == 0;
	if (rc == 0)
		rc = bi_super_load(fs);
	if (rc == 0 && !super_wanted(fs))
		rc = open_other_fsid(fs);
	else if (rc == -EUCLEAN && no_valid_super(fs) && (located || !any_super_magic(fs)))
		rc = bi_salvage_super(fs, fs->err);
	if (rc < 0)
		goto out;
	fs->root_tree = (struct bi_root){ OBJ_ROOT_TREE, fs->sb.info.root, fs->sb.info.generation,
					  fs->sb.info.root_level };
	fs->chunk_tree = (struct bi_root){ OBJ_CHUNK_TREE, fs->sb.info.chunk_root,
					   fs->sb.chunk_root_generation,
					   fs->sb.info.chunk_root_level };
	rc = open_chunks(fs);
	if (rc == 0)
		rc = open_roots(fs);
	if (rc == 0 && (fs->nsalvage_unsure || fs->nsalvage_ties))
		rc = bi_salvage_stripes(fs);
	if (rc == 0) /* lost nodes rebuilt when a read meets one, not before */
		fs->lost_block = bi_salvage_rebuild_tree;
	if (rc < 0)
		explain_missing(fs);
out:
	bi_sv_scan_pending_free(fs); /* what the salvage did not take */
	return rc;
}

static void device_from_image(struct btrfsimg_fs *fs, struct btrfsimg_device *o)
{
	const struct bi_dev *d = bi_dev_by_id(fs, o->devid);
	if (d && memcmp(d->dev_uuid, o->uuid, 16) != 0)
		d = NULL; /* another device with that devid: this one is missing */
	o->missing = !d;
	if (!d)
		return;
	o->image = d->name;
	o->partition = d->partition;
	o->offset = d->base;
	o->size = d->size;
}

int btrfsimg_devices(btrfsimg_fs *fs, struct btrfsimg_device *out, size_t max, size_t *n)
{
	if (!fs || !n || (max && !out))
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	*n = fs->ndevitems;
	for (size_t i = 0; i < fs->ndevitems && i < max; i++) {
		const struct bi_devitem *v = &fs->devitems[i];
		out[i] = (struct btrfsimg_device){ .devid = v->devid,
						   .total_bytes = v->total_bytes };
		memcpy(out[i].uuid, v->uuid, 16);
		device_from_image(fs, &out[i]);
	}
	return 0;
}
