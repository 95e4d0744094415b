/* SPDX-License-Identifier: MIT */
/*
 * Superblocks: up to three 4096-byte copies per device, at 64 KiB, 64 MiB
 * and 256 GiB. A copy is valid when its magic, its own bytenr, its checksum
 * and every field used later pass their checks (bi_super_parse). The copy in
 * use is the newest valid one over all devices (or the forced mirror), and
 * the devices that carry the same fsid become the members of the filesystem.
 *
 * Invariant after bi_super_load(): fs->sb is a fully checked copy, the
 * incompat features are all understood, fs->nodesize/sectorsize/csum are
 * set, every member device has a distinct devid.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/super.h"

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"

/* The primary is at 64 KiB; mirror i >= 1 at 16 KiB << (12 * i). */
static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static void parse_fields(struct bi_cur *c, struct bi_super *s)
{
	struct btrfsimg_super_info *i = &s->info;
	bi_copy(c, SB_FSID, i->fsid, 16);
	i->generation = bi_u64(c, SB_GENERATION);
	i->root = bi_u64(c, SB_ROOT);
	i->chunk_root = bi_u64(c, SB_CHUNK_ROOT);
	i->log_root = bi_u64(c, SB_LOG_ROOT);
	s->log_root_transid = bi_u64(c, SB_LOG_ROOT_TRANSID);
	i->total_bytes = bi_u64(c, SB_TOTAL_BYTES);
	i->bytes_used = bi_u64(c, SB_BYTES_USED);
	i->root_dir_objectid = bi_u64(c, SB_ROOT_DIR_OBJECTID);
	i->num_devices = bi_u64(c, SB_NUM_DEVICES);
	i->sectorsize = bi_u32(c, SB_SECTORSIZE);
	i->nodesize = bi_u32(c, SB_NODESIZE);
	i->stripesize = bi_u32(c, SB_STRIPESIZE);
	s->sys_array_size = bi_u32(c, SB_SYS_CHUNK_ARRAY_SIZE);
	s->chunk_root_generation = bi_u64(c, SB_CHUNK_ROOT_GENERATION);
	i->compat_flags = bi_u64(c, SB_COMPAT_FLAGS);
	i->compat_ro_flags = bi_u64(c, SB_COMPAT_RO_FLAGS);
	i->incompat_flags = bi_u64(c, SB_INCOMPAT_FLAGS);
	i->csum_type = bi_u16(c, SB_CSUM_TYPE);
	i->root_level = bi_u8(c, SB_ROOT_LEVEL);
	i->chunk_root_level = bi_u8(c, SB_CHUNK_ROOT_LEVEL);
	i->log_root_level = bi_u8(c, SB_LOG_ROOT_LEVEL);
	i->cache_generation = bi_u64(c, SB_CACHE_GENERATION);
	i->uuid_tree_generation = bi_u64(c, SB_UUID_TREE_GENERATION);
	bi_copy(c, SB_LABEL, i->label, SB_LABEL_SIZE);
	i->label[SB_LABEL_SIZE] = '\0';
	if (i->incompat_flags & INCOMPAT_METADATA_UUID)
		bi_copy(c, SB_METADATA_UUID, i->metadata_uuid, 16);
	else
		memcpy(i->metadata_uuid, i->fsid, 16);
	s->devid = bi_u64(c, SB_DEV_ITEM + DEV_DEVID);
	s->dev_total_bytes = bi_u64(c, SB_DEV_ITEM + DEV_TOTAL_BYTES);
	bi_copy(c, SB_DEV_ITEM + DEV_UUID, s->dev_uuid, 16);
	bi_copy(c, SB_DEV_ITEM + DEV_FSID, s->dev_fsid, 16);
	i->devid = s->devid;
}

static int check_geometry(const struct bi_super *s, char *why, size_t whylen)
{
	const struct btrfsimg_super_info *i = &s->info;
	if (!is_pow2(i->sectorsize) || i->sectorsize < 4096 || i->sectorsize > 65536)
		return bi_why(why, whylen,
			      "bad sectorsize, have %u expect a power of two in [4096, 65536]",
			      i->sectorsize);
	if (!is_pow2(i->nodesize) || i->nodesize < i->sectorsize || i->nodesize > 65536)
		return bi_why(
			why, whylen,
			"bad nodesize, have %u expect a power of two in [sectorsize %u, 65536]",
			i->nodesize, i->sectorsize);
	if (i->stripesize != 4096 && i->stripesize != i->sectorsize)
		return bi_why(why, whylen, "bad stripesize, have %u expect 4096 or sectorsize %u",
			      i->stripesize, i->sectorsize);
	return 0;
}

static int check_roots(const struct bi_super *s, char *why, size_t whylen)
{
	const struct btrfsimg_super_info *i = &s->info;
	const struct {
		const char *name;
		uint64_t bytenr;
		uint8_t level;
	} r[] = { { "root", i->root, i->root_level },
		  { "chunk_root", i->chunk_root, i->chunk_root_level },
		  { "log_root", i->log_root, i->log_root_level } };
	for (size_t k = 0; k < 3; k++) {
		if (r[k].level >= MAX_LEVEL)
			return bi_why(why, whylen, "bad %s level, have %u expect < %d", r[k].name,
				      r[k].level, MAX_LEVEL);
		if (r[k].bytenr % i->sectorsize)
			return bi_why(why, whylen, "%s %" PRIu64 " not aligned to sectorsize %u",
				      r[k].name, r[k].bytenr, i->sectorsize);
	}
	if (i->root == 0 || i->chunk_root == 0)
		return bi_why(why, whylen,
			      "root %" PRIu64 " / chunk_root %" PRIu64 " must be nonzero", i->root,
			      i->chunk_root);
	return 0;
}

static int check_counts(const struct bi_super *s, char *why, size_t whylen)
{
	const struct btrfsimg_super_info *i = &s->info;
	if (s->sys_array_size > SB_SYS_CHUNK_ARRAY_MAX ||
	    s->sys_array_size < KEY_SIZE + CHUNK_SIZE + STRIPE_SIZE)
		return bi_why(why, whylen, "bad sys_chunk_array_size, have %u expect in [%u, %u]",
			      s->sys_array_size, KEY_SIZE + CHUNK_SIZE + STRIPE_SIZE,
			      SB_SYS_CHUNK_ARRAY_MAX);
	if (i->num_devices == 0 || i->num_devices > 65536)
		return bi_why(why, whylen, "bad num_devices, have %" PRIu64 " expect in [1, 65536]",
			      i->num_devices);
	if (i->generation == 0)
		return bi_why(why, whylen, "generation is 0");
	if (!bi_csum_size(i->csum_type))
		return bi_why(why, whylen, "unknown csum_type %u", i->csum_type);
	const uint8_t *want = (i->incompat_flags & INCOMPAT_METADATA_UUID) ? i->metadata_uuid
									   : i->fsid;
	if (memcmp(s->dev_fsid, want, 16) != 0)
		return bi_why(why, whylen, "dev_item fsid does not match the %s",
			      (i->incompat_flags & INCOMPAT_METADATA_UUID) ? "metadata_uuid"
									   : "fsid");
	return 0;
}

int bi_super_parse(const uint8_t *buf, size_t len, uint64_t bytenr, struct bi_super *out,
		   char *why, size_t whylen)
{
	struct bi_cur c = bi_cur_make(buf, len);
	why[0] = '\0';
	if (len < SB_SIZE) {
		bi_why(why, whylen, "short superblock, have %zu bytes expect %u", len, SB_SIZE);
		return BTRFSIMG_MIRROR_BAD_FIELDS;
	}
	uint64_t magic = bi_u64(&c, SB_MAGIC_OFF);
	if (magic != SB_MAGIC) {
		bi_why(why, whylen, "bad magic, have 0x%016" PRIx64 " expect 0x%016" PRIx64, magic,
		       (uint64_t)SB_MAGIC);
		return BTRFSIMG_MIRROR_BAD_MAGIC;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->raw, buf, SB_SIZE);
	parse_fields(&c, out);
	if (bi_u64(&c, SB_BYTENR) != bytenr) {
		bi_why(why, whylen, "bytenr field mismatch, have %" PRIu64 " expect %" PRIu64,
		       bi_u64(&c, SB_BYTENR), bytenr);
		return BTRFSIMG_MIRROR_BAD_BYTENR;
	}
	size_t csize = bi_csum_size(out->info.csum_type);
	if (!csize) {
		bi_why(why, whylen, "unknown csum_type %u", out->info.csum_type);
		return BTRFSIMG_MIRROR_BAD_FIELDS;
	}
	uint8_t sum[CSUM_SIZE_MAX];
	bi_csum(out->info.csum_type, buf + SB_CSUM_START, SB_SIZE - SB_CSUM_START, sum);
	if (memcmp(sum, buf + SB_CSUM, csize) != 0) {
		bi_why(why, whylen, "%s checksum mismatch",
		       btrfsimg_csum_name(out->info.csum_type));
		return BTRFSIMG_MIRROR_BAD_CSUM;
	}
	int rc = check_geometry(out, why, whylen);
	if (!rc)
		rc = check_roots(out, why, whylen);
	if (!rc)
		rc = check_counts(out, why, whylen);
	return rc < 0 ? BTRFSIMG_MIRROR_BAD_FIELDS : BTRFSIMG_MIRROR_VALID;
}

/* Read and classify the copies of one device; remember the best one. */
static int read_device_copies(struct btrfsimg_fs *fs, struct bi_dev *d, struct bi_super *best,
			      int *best_idx)
{
	static const char *const state_name[] = { "absent",  "valid",	   "bad magic",
						  "bad bytenr", "bad checksum", "bad fields",
						  "other fs",	"I/O error" };
	uint8_t buf[SB_SIZE];
	uint8_t primary_fsid[16] = { 0 };
	struct bi_super s;
	*best_idx = -1;
	for (int i = 0; i < SB_MIRROR_MAX; i++) {
		uint64_t off = bi_super_offset(i);
		struct btrfsimg_super_mirror *m = &d->mirrors[i];
		*m = (struct btrfsimg_super_mirror){ i, off, BTRFSIMG_MIRROR_ABSENT, 0 };
		/* The kernel treats a copy ending exactly at the device end as absent. */
		if (off + SB_SIZE >= d->size)
			continue;
		if (bi_dev_read(fs, d, off, buf, SB_SIZE) < 0) {
			m->state = BTRFSIMG_MIRROR_IO_ERROR;
			continue;
		}
		char why[256];
		m->state = bi_super_parse(buf, SB_SIZE, off, &s, why, sizeof(why));
		if (m->state != BTRFSIMG_MIRROR_BAD_MAGIC)
			m->generation = bi_le64(buf + SB_GENERATION);
		if (m->state != BTRFSIMG_MIRROR_VALID) {
			if (i == 0 || m->state != BTRFSIMG_MIRROR_BAD_MAGIC)
				bi_damage(fs,
					  "device '%s': superblock copy %d at %" PRIu64 ": %s (%s)",
					  d->name, i, off, state_name[m->state], why);
			continue;
		}
		/* The primary's fsid is authoritative: a mirror left by an older
		 * filesystem on the same device must not be picked up. */
		if (i == 0)
			memcpy(primary_fsid, s.info.fsid, 16);
		else if (d->mirrors[0].state == BTRFSIMG_MIRROR_VALID &&
			 memcmp(primary_fsid, s.info.fsid, 16) != 0) {
			m->state = BTRFSIMG_MIRROR_OTHER_FS;
			continue;
		}
		if ((fs->opts.flags & BTRFSIMG_OPEN_SUPER_MIRROR) && fs->opts.super_mirror != (unsigned)i)
			continue;
		if (*best_idx < 0 || s.info.generation > best->info.generation) {
			*best = s;
			*best_idx = i;
		}
	}
	return *best_idx;
}

static int check_features(struct btrfsimg_fs *fs)
{
	uint64_t bad = fs->sb.info.incompat_flags & ~INCOMPAT_SUPPORTED;
	if (!bad)
		return 0;
	int bit = __builtin_ctzll(bad);
	const char *name = btrfsimg_feature_name(BTRFSIMG_FEATURE_INCOMPAT, (unsigned)bit);
	if (name) {
		char upper[32] = ""; /* as btrfs-progs prints it */
		for (size_t i = 0; name[i] && i + 1 < sizeof(upper); i++)
			upper[i] = (char)toupper((unsigned char)name[i]);
		return bi_err(fs, -EOPNOTSUPP,
			      "unsupported incompat feature %s (bit %d, incompat_flags 0x%" PRIx64
			      ")",
			      upper, bit, fs->sb.info.incompat_flags);
	}
	return bi_err(fs, -EOPNOTSUPP,
		      "unsupported incompat feature: unknown bit %d (incompat_flags 0x%" PRIx64 ")",
		      bit, fs->sb.info.incompat_flags);
}

/* Record the chosen copy's identity on the device. */
static void note_device(struct bi_dev *d, const struct bi_super *s)
{
	d->has_super = true;
	d->devid = s->devid;
	memcpy(d->dev_uuid, s->dev_uuid, 16);
	memcpy(d->fsid, s->info.fsid, 16);
	d->generation = s->info.generation;
	d->total_bytes = s->dev_total_bytes;
}

/* Pick the filesystem: the first device's fsid, newest copy among members. */
static int choose_super(struct btrfsimg_fs *fs, struct bi_super *per_dev, int *per_idx)
{
	int first = -1, pick = -1;
	for (size_t k = 0; k < fs->ndevs; k++) {
		if (per_idx[k] < 0)
			continue;
		if (first < 0)
			first = (int)k;
		if (memcmp(per_dev[k].info.fsid, per_dev[first].info.fsid, 16) != 0)
			continue;
		if (pick < 0 || per_dev[k].info.generation > per_dev[pick].info.generation ||
		    (per_dev[k].info.generation == per_dev[pick].info.generation &&
		     per_dev[k].devid < per_dev[pick].devid))
			pick = (int)k;
	}
	if (first < 0) {
		if (fs->opts.flags & BTRFSIMG_OPEN_SUPER_MIRROR)
			return bi_err(fs, -EUCLEAN,
				      "no valid superblock copy %u on any device (first: '%s')",
				      fs->opts.super_mirror, fs->devs[0].name);
		return bi_err(fs, -EUCLEAN, "no valid btrfs superblock on any device (first: '%s')",
			      fs->devs[0].name);
	}
	return pick;
}

static int match_members(struct btrfsimg_fs *fs, struct bi_super *per_dev, int *per_idx)
{
	char want[37], have[37];
	bi_uuid_str(fs->sb.info.fsid, want);
	uint64_t members = 0;
	const struct bi_dev *unplaced = NULL;
	for (size_t k = 0; k < fs->ndevs; k++) {
		struct bi_dev *d = &fs->devs[k];
		if (d->absorbed)
			continue;
		if (per_idx[k] < 0 && (fs->opts.flags & BTRFSIMG_OPEN_SUPER_MIRROR))
			return bi_err(fs, -EUCLEAN, "device '%s': no valid superblock copy",
				      d->name);
		if (per_idx[k] < 0) { /* placed by its blocks, if it can be */
			unplaced = unplaced ? unplaced : d;
			fs->unplaced_devs++;
			continue;
		}
		if (memcmp(per_dev[k].info.fsid, fs->sb.info.fsid, 16) != 0) {
			bi_uuid_str(per_dev[k].info.fsid, have);
			return bi_err(fs, -EINVAL,
				      "device '%s' belongs to another filesystem: fsid %s, expected %s",
				      d->name, have, want);
		}
		note_device(d, &per_dev[k]);
		for (size_t j = 0; j < k; j++)
			if (fs->devs[j].member && fs->devs[j].devid == d->devid)
				return bi_err(fs, -EINVAL,
					      "devid %" PRIu64 " given twice: '%s' and '%s'",
					      d->devid, fs->devs[j].name, d->name);
		if (d->generation != fs->sb.info.generation)
			bi_damage(fs,
				  "device '%s' (devid %" PRIu64 ") is stale: generation %" PRIu64
				  ", expected %" PRIu64,
				  d->name, d->devid, d->generation, fs->sb.info.generation);
		d->member = true;
		members++;
	}
	if (members > fs->sb.info.num_devices)
		return bi_err(fs, -EINVAL,
			      "%" PRIu64 " devices given, the superblock names only %" PRIu64,
			      members, fs->sb.info.num_devices);
	if (unplaced && members >= fs->sb.info.num_devices)
		return bi_err(fs, -EUCLEAN,
			      "device '%s': no valid superblock copy, and the %" PRIu64
			      " devices the superblock names are all given",
			      unplaced->name, fs->sb.info.num_devices);
	if (unplaced) /* one without superblock may be the device missing */
		bi_damage(fs,
			  "%" PRIu64 " devices without a valid superblock copy (first: '%s'); "
			  "their devids are looked for where the chunk map puts their tree blocks",
			  fs->unplaced_devs, unplaced->name);
	fs->missing_devs = fs->sb.info.num_devices - members;
	if (fs->missing_devs && !fs->unplaced_devs) /* else said once they are placed */
		bi_damage(fs, "%" PRIu64 " of %" PRIu64 " devices missing: reading degraded",
			  fs->missing_devs, fs->sb.info.num_devices);
	return 0;
}

static void adopt_super(struct btrfsimg_fs *fs, const struct bi_super *s, const struct bi_dev *d,
			int idx)
{
	fs->sb = *s;
	fs->sb.info.mirror_used = idx;
	memcpy(fs->sb.info.mirrors, d->mirrors, sizeof(d->mirrors));
	fs->nodesize = s->info.nodesize;
	fs->sectorsize = s->info.sectorsize;
	fs->csum_type = s->info.csum_type;
	fs->csum_size = (uint32_t)bi_csum_size(s->info.csum_type);
	memcpy(fs->meta_fsid, s->info.metadata_uuid, 16);
}

int bi_super_load(struct btrfsimg_fs *fs)
{
	struct bi_super *per_dev = calloc(fs->ndevs, sizeof(*per_dev));
	int *per_idx = calloc(fs->ndevs, sizeof(*per_idx));
	int rc = 0;
	if (!per_dev || !per_idx) {
		rc = bi_err(fs, -ENOMEM, "out of memory reading superblocks");
		goto out;
	}
	for (size_t k = 0; k < fs->ndevs; k++) {
		per_idx[k] = -1;
		if (!fs->devs[k].absorbed) /* a PV of an LV read as another device */
			read_device_copies(fs, &fs->devs[k], &per_dev[k], &per_idx[k]);
	}
	int pick = choose_super(fs, per_dev, per_idx);
	if (pick < 0) {
		rc = pick;
		goto out;
	}
	adopt_super(fs, &per_dev[pick], &fs->devs[pick], per_idx[pick]);
	rc = check_features(fs);
	if (rc == 0)
		rc = match_members(fs, per_dev, per_idx);
out:
	free(per_dev);
	free(per_idx);
	return rc;
}

/* Names as btrfs-progs prints them (`btrfs inspect-internal dump-super`,
 * `mkfs.btrfs -O list-all`); the bits are the kernel's BTRFS_FEATURE_*. */
static const char *const compat_ro_names[] = {
	"free_space_tree",
	"free_space_tree_valid",
	"verity",
	"block_group_tree",
};
static const char *const incompat_names[] = {
	"mixed_backref",   "default_subvol", "mixed_groups",	 "compress_lzo",
	"compress_zstd",   "big_metadata",   "extended_iref",	 "raid56",
	"skinny_metadata", "no_holes",	     "metadata_uuid",	 "raid1c34",
	"zoned",	   "extent_tree_v2", "raid_stripe_tree", NULL,
	"simple_quota",	   "remap_tree",
};

const char *btrfsimg_feature_name(enum btrfsimg_feature_kind kind, unsigned bit)
{
	switch (kind) {
	case BTRFSIMG_FEATURE_COMPAT_RO:
		return bit < sizeof(compat_ro_names) / sizeof(*compat_ro_names)
			       ? compat_ro_names[bit]
			       : NULL;
	case BTRFSIMG_FEATURE_INCOMPAT:
		return bit < sizeof(incompat_names) / sizeof(*incompat_names) ? incompat_names[bit]
									      : NULL;
	default:
		return NULL; /* no compat feature has a name */
	}
}

int btrfsimg_super(btrfsimg_fs *fs, struct btrfsimg_super_info *out)
{
	if (!fs || !out)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	*out = fs->sb.info;
	return 0;
}
