// SPDX-License-Identifier: MIT
/*
 * Every btrfs on the devices (btrfsimg_scan_filesystems, `layers --scan`):
 * after `mkfs` over an old filesystem the new one's superblock names only
 * the new one, while the old one's tree blocks stay where the new one did
 * not write, under their own fsid. The salvage scan (salvage_scan.c) finds
 * them all in one read of each device and sums them up per fsid; the
 * superblock copies that survive add the label and say which one an open
 * would read. Nothing is opened: a filesystem of the list is read with
 * btrfsimg_set_fsid on another handle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "btrfs/salvage_scan.h"
#include "btrfs/super.h"
#include "image/dev.h"
#include "volume/part.h"
#include "volume/vol.h"

static struct btrfsimg_found_fs *found_of(struct btrfsimg_found_fs *v, size_t *n, size_t max,
					  const uint8_t meta[16])
{
	for (size_t i = 0; i < *n; i++)
		if (memcmp(v[i].metadata_uuid, meta, 16) == 0)
			return &v[i];
	if (*n == max)
		return NULL;
	struct btrfsimg_found_fs *f = &v[(*n)++];
	memset(f, 0, sizeof(*f));
	memcpy(f->metadata_uuid, meta, 16);
	memcpy(f->fsid, meta, 16);
	return f;
}

static void from_scan(struct btrfsimg_found_fs *v, size_t *n, size_t max,
		      const struct bi_sv_scan *s)
{
	for (unsigned i = 0; i < s->nfs; i++) {
		const struct bi_sv_fs *sf = &s->fss[i];
		struct btrfsimg_found_fs *f = found_of(v, n, max, sf->fsid);
		if (!f)
			return;
		f->nodesize = sf->nodesize;
		f->csum_type = (uint16_t)sf->csum_type;
		f->blocks = sf->nblocks;
		f->gen_min = sf->gen_min;
		f->gen_max = sf->gen_max;
		f->first = sf->phys_min;
		f->last = sf->phys_max;
		f->devices = sf->ndevs;
	}
}

/* Every valid superblock copy on the devices names its filesystem: its
 * user-visible fsid, label and newest generation. */
static void from_supers(struct btrfsimg_fs *fs, struct btrfsimg_found_fs *v, size_t *n,
			size_t max)
{
	uint8_t buf[SB_SIZE];
	struct bi_super sb;
	for (size_t k = 0; k < fs->ndevs; k++)
		for (int i = 0; i < SB_MIRROR_MAX; i++) {
			const struct bi_dev *d = &fs->devs[k];
			uint64_t off = bi_super_offset(i);
			char why[128];
			if (d->absorbed || off + SB_SIZE > d->size ||
			    bi_dev_read(fs, d, off, buf, SB_SIZE) < 0 ||
			    bi_super_parse(buf, SB_SIZE, off, &sb, why, sizeof(why)) !=
				    BTRFSIMG_MIRROR_VALID)
				continue;
			struct btrfsimg_found_fs *f = found_of(v, n, max, sb.info.metadata_uuid);
			if (!f)
				return;
			memcpy(f->fsid, sb.info.fsid, 16);
			f->supers++;
			if (sb.info.generation < f->super_generation)
				continue;
			f->super_generation = sb.info.generation;
			snprintf(f->label, sizeof(f->label), "%s", sb.info.label);
			if (!f->blocks) { /* no block of it verified: the superblock says */
				f->nodesize = sb.info.nodesize;
				f->csum_type = sb.info.csum_type;
			}
		}
	fs->err[0] = '\0'; /* an unreadable copy is not this call's failure */
}

/* The current filesystem first, then by blocks (most first). */
static int found_cmp(const void *pa, const void *pb)
{
	const struct btrfsimg_found_fs *a = pa, *b = pb;
	if (a->current != b->current)
		return a->current ? -1 : 1;
	if (a->blocks != b->blocks)
		return a->blocks > b->blocks ? -1 : 1;
	return memcmp(a->metadata_uuid, b->metadata_uuid, 16);
}

static int scan_all(struct btrfsimg_fs *fs)
{
	int rc = bi_part_applies(fs); /* --partition of an image that is btrfs itself */
	fs->raw_piece = bi_sv_scan_observe; /* one pass: see bi_core_open */
	if (rc == 0)
		rc = bi_vol_assemble(fs);
	if (rc < 0)
		return rc;
	bool current = bi_super_load(fs) == 0;
	fs->err[0] = '\0'; /* no valid superblock is a finding here, not a failure */
	struct bi_sv_scan *s;
	char keep[sizeof(fs->want_fsid)];
	memcpy(keep, fs->want_fsid, sizeof(keep));
	fs->want_fsid[0] = '\0'; /* every filesystem, whatever --fsid says */
	rc = bi_sv_scan_devices(fs, false, &s);
	memcpy(fs->want_fsid, keep, sizeof(keep));
	if (rc < 0)
		return rc;
	size_t max = BI_SV_MAX_FS * 2, n = 0; /* those of the scan, and superblocks */
	struct btrfsimg_found_fs *v = calloc(max, sizeof(*v));
	if (!v) {
		bi_sv_scan_free(s);
		return bi_err(fs, -ENOMEM, "scan: out of memory");
	}
	from_scan(v, &n, max, s);
	bi_sv_scan_free(s);
	from_supers(fs, v, &n, max);
	for (size_t i = 0; current && i < n; i++)
		v[i].current = memcmp(v[i].metadata_uuid, fs->sb.info.metadata_uuid, 16) == 0;
	qsort(v, n, sizeof(*v), found_cmp);
	fs->found = v;
	fs->nfound = n;
	return 0;
}

int btrfsimg_scan_filesystems(btrfsimg_fs *fs, struct btrfsimg_found_fs *out, size_t max,
			      size_t *n)
{
	if (!fs || !n || (max && !out))
		return -EINVAL;
	if (fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_scan_filesystems: the filesystem is open");
	if (!fs->found) {
		int rc = scan_all(fs);
		if (rc < 0)
			return rc;
	}
	*n = fs->nfound;
	for (size_t i = 0; i < fs->nfound && i < max; i++)
		out[i] = fs->found[i];
	return 0;
}
