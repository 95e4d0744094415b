// SPDX-License-Identifier: MIT
/*
 * statfs of btrfsimg mount, computed as btrfs_statfs (fs/btrfs/super.c)
 * computes it on a read-only mount, from what the image records:
 *
 *   f_blocks  total_bytes / data copies
 *   f_bfree   f_blocks - (bytes used by every block group, times its
 *             copies) / data copies - the global block reserve
 *             (btrfs_update_global_block_rsv: the bytes of the extent,
 *             csum, free-space and block-group trees, at least room to
 *             insert 1 + those trees + 6 items and 6 delayed refs, doubled
 *             with a free-space tree; at most 512 MiB)
 *   f_bavail  the space data chunks could still get on the devices
 *             (btrfs_calc_avail_data_space: each device's unallocated bytes
 *             less 1 MiB, filled greedily by the data profile's stripes)
 *             / data copies; a read-only mount adds nothing from the free
 *             space inside data block groups (checked on kernel mounts)
 *
 * Blocks of sectorsize; no inode counts; names up to 255 bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mount/mount.h"

#define MIB	   (1ull << 20)
#define STRIPE_LEN (64ull << 10) /* BTRFS_STRIPE_LEN */
#define MAX_LEVEL  8		 /* BTRFS_MAX_LEVEL */

/* Block-group profile bits (BTRFS_BLOCK_GROUP_*). */
enum {
	BG_DATA = 1,
	BG_RAID0 = 8,
	BG_RAID1 = 16,
	BG_DUP = 32,
	BG_RAID10 = 64,
	BG_RAID5 = 128,
	BG_RAID6 = 256,
	BG_RAID1C3 = 512,
	BG_RAID1C4 = 1024
};

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* What btrfs_raid_array says of a profile. */
struct raid {
	unsigned ncopies, devs_min, dev_stripes;
};

static struct raid raid_of(uint64_t flags)
{
	if (flags & BG_RAID10)
		return (struct raid){ 2, 2, 1 };
	if (flags & BG_RAID1)
		return (struct raid){ 2, 2, 1 };
	if (flags & BG_RAID1C3)
		return (struct raid){ 3, 3, 1 };
	if (flags & BG_RAID1C4)
		return (struct raid){ 4, 4, 1 };
	if (flags & BG_DUP)
		return (struct raid){ 2, 1, 2 };
	if (flags & BG_RAID0)
		return (struct raid){ 1, 1, 1 };
	if (flags & BG_RAID5)
		return (struct raid){ 1, 2, 1 };
	if (flags & BG_RAID6)
		return (struct raid){ 1, 3, 1 };
	return (struct raid){ 1, 1, 1 };
}

struct sums {
	uint64_t disk_used; /* used bytes of every block group, times its copies */
	uint64_t data_flags;
	bool have_data;
	uint64_t roots_used; /* bytes of the trees the global reserve covers */
	unsigned roots;
	uint64_t dev_total[64], dev_used[64], devid[64];
	size_t ndevs;
};

static int on_block_group(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t n)
{
	struct sums *s = ctx;
	if (k->type != 192 || n < 24) /* BLOCK_GROUP_ITEM: used, chunk_objectid, flags */
		return 0;
	uint64_t used = le64(d), flags = le64(d + 16);
	s->disk_used += used * raid_of(flags).ncopies;
	if (flags & BG_DATA) {
		s->data_flags = flags;
		s->have_data = true;
	}
	return 0;
}

static int on_root(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t n)
{
	struct sums *s = ctx;
	/* ROOT_ITEM: a 160-byte inode item, generation, root_dirid, bytenr,
	 * byte_limit, then bytes_used */
	if (k->type == 132 && n >= 200) {
		s->roots_used += le64(d + 192);
		s->roots++;
	}
	return 0;
}

static int on_dev_item(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t n)
{
	struct sums *s = ctx;
	/* DEV_ITEM: devid, total_bytes, bytes_used (allocated to chunks) */
	if (k->type != 216 || n < 24 || s->ndevs == 64)
		return 0;
	s->devid[s->ndevs] = le64(d);
	s->dev_total[s->ndevs] = le64(d + 8);
	s->dev_used[s->ndevs++] = le64(d + 16);
	return 0;
}

static int walk_type(btrfsimg_fs *fs, uint64_t tree, uint64_t obj_min, uint64_t obj_max,
		     uint8_t type, btrfsimg_item_fn fn, struct sums *s)
{
	struct btrfsimg_key lo = { obj_min, type, 0 }, hi = { obj_max, type, UINT64_MAX };
	int rc = btrfsimg_tree_walk(fs, tree, &lo, &hi, fn, s);
	return rc == -ENOENT ? 0 : rc; /* a tree the filesystem does not have */
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* btrfs_calc_avail_data_space: bytes data chunks could still get. */
static uint64_t avail_data(btrfsimg_fs *fs, const struct sums *s, struct raid r)
{
	struct btrfsimg_device devs[64];
	size_t nd = 0;
	if (btrfsimg_devices(fs, devs, 64, &nd) < 0)
		nd = 0;
	uint64_t avail[64];
	size_t n = 0;
	uint64_t min_stripe = r.dev_stripes * STRIPE_LEN;
	for (size_t i = 0; i < s->ndevs; i++) {
		bool missing = false;
		for (size_t j = 0; j < nd && j < 64; j++)
			if (devs[j].devid == s->devid[i])
				missing = devs[j].missing;
		if (missing || s->dev_used[i] > s->dev_total[i])
			continue;
		uint64_t a = s->dev_total[i] - s->dev_used[i];
		a -= a % STRIPE_LEN;
		if (a <= MIB + min_stripe)
			continue;
		avail[n++] = a - MIB;
	}
	qsort(avail, n, sizeof(avail[0]), cmp_desc);
	unsigned stripes = 1;
	if (s->data_flags & (BG_RAID0 | BG_RAID5 | BG_RAID6))
		stripes = (unsigned)n; /* parity not subtracted: the kernel's figure */
	else if (s->data_flags & (BG_RAID1 | BG_RAID1C3 | BG_RAID1C4))
		stripes = r.ncopies;
	else if (s->data_flags & BG_RAID10)
		stripes = 4;
	uint64_t total = 0;
	for (size_t left = n; left >= r.devs_min && left > 0; left--) {
		size_t i = left - 1;
		if (stripes > left)
			stripes = (unsigned)left;
		if (avail[i] < min_stripe)
			continue;
		uint64_t take = avail[i];
		total += take * stripes;
		for (size_t j = i + 1 - stripes; j <= i; j++)
			avail[j] -= take;
	}
	return total;
}

int mount_statfs(btrfsimg_fs *fs, struct statvfs *out, uint32_t *sectorsize)
{
	struct btrfsimg_super_info sb;
	int rc = btrfsimg_super(fs, &sb);
	if (rc < 0)
		return rc;
	struct sums *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	bool bgt = sb.compat_ro_flags & 8, fst = sb.compat_ro_flags & 1;
	rc = walk_type(fs, bgt ? 11 : 2, 0, UINT64_MAX, 192, on_block_group, s);
	static const uint64_t global[] = { 2, 7, 10, 11 }; /* extent, csum, free space, bg */
	for (size_t i = 0; rc == 0 && i < 4; i++)
		if (global[i] != 11 || bgt)
			rc = walk_type(fs, 1, global[i], global[i], 132, on_root, s);
	if (rc == 0)
		rc = walk_type(fs, 3, 1, 1, 216, on_dev_item, s);
	if (rc < 0) {
		free(s);
		return rc;
	}
	uint64_t bs = sb.sectorsize ? sb.sectorsize : 4096;
	struct raid r = raid_of(s->data_flags);
	uint64_t f = r.ncopies;
	uint64_t unit = (uint64_t)sb.nodesize * MAX_LEVEL * 2; /* btrfs_calc_insert_metadata_size */
	uint64_t rsv = unit * (1 + s->roots + 6) + unit * 6 * (fst ? 2 : 1);
	if (s->roots_used > rsv)
		rsv = s->roots_used;
	if (rsv > 512 * MIB)
		rsv = 512 * MIB;
	*out = (struct statvfs){ .f_bsize = bs, .f_frsize = bs, .f_namemax = 255 };
	out->f_blocks = sb.total_bytes / f / bs;
	uint64_t used = s->disk_used / f / bs;
	out->f_bfree = used < out->f_blocks ? out->f_blocks - used : 0;
	out->f_bfree = out->f_bfree >= rsv / bs ? out->f_bfree - rsv / bs : 0;
	out->f_bavail = avail_data(fs, s, r) / f / bs;
	*sectorsize = (uint32_t)bs;
	free(s);
	return 0;
}
