/* SPDX-License-Identifier: MIT */
/*
 * Bytes to recovered versions and back: a version's extent map (its
 * EXTENT_DATA items, found in old leaves, through the live chunk map), and
 * the versions whose items pointed into a logical range. The items are
 * those the versions were built from (recover.c); nothing is read again.
 */
#include <inttypes.h>
#include <string.h>

#include "btrfsimg_forensic.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "files/extent.h"
#include "forensic/block_scan.h"
#include "forensic/version.h"

#define INODE_FLAG_NODATASUM 1ull

int btrfsimg_forensic_extents(btrfsimg_forensic *f, const char *id, btrfsimg_extent_fn fn,
			      void *ctx)
{
	if (!f || !id || !fn)
		return -EINVAL;
	int rc = bi_fx_ready(f);
	if (rc < 0)
		return rc;
	const struct fx_version *v = NULL;
	for (size_t i = 0; i < f->rec->nv && !v; i++)
		if (!f->rec->v[i].skip && strcmp(f->rec->v[i].res->id, id) == 0)
			v = &f->rec->v[i];
	if (!v)
		return bi_err(f->fs, -ENOENT, "no recovered version has id %s", id);
	if (v->dir)
		return bi_err(f->fs, -EISDIR, "recovered version %s is a directory (%s): no extents", id,
			      v->res->path);
	return bi_extmap_items(f->fs, v->ext, v->next, v->inode.size,
			       (v->inode.flags & INODE_FLAG_NODATASUM) != 0, fn, ctx);
}

/* Item @e of version @v against logical [lo, hi): its record, if any. */
static int version_item(const struct fx_version *v, const struct bi_extent *e, uint64_t next,
			uint64_t lo, uint64_t hi, btrfsimg_owner_fn fn, void *ctx)
{
	if (e->type == FE_TYPE_INLINE || e->disk_bytenr == 0)
		return 0;
	uint64_t vis_end = e->end < next ? e->end : next;
	if (vis_end <= e->file_offset)
		return 0;
	struct btrfsimg_owner r = { .kind = BTRFSIMG_OWNER_RECOVERED };
	uint64_t a, b;
	if (e->compression) {
		uint64_t end = e->disk_bytenr + e->disk_num_bytes;
		a = lo > e->disk_bytenr ? lo : e->disk_bytenr;
		b = hi < end ? hi : end;
		r.file_offset = e->file_offset;
		r.file_length = vis_end - e->file_offset;
	} else {
		uint64_t s = e->disk_bytenr + e->offset, t = s + (vis_end - e->file_offset);
		a = lo > s ? lo : s;
		b = hi < t ? hi : t;
		r.file_offset = e->file_offset + (a > s ? a - s : 0);
		r.file_length = b > a ? b - a : 0;
	}
	if (b <= a)
		return 0;
	r.logical = a;
	r.length = b - a;
	r.extent_bytenr = e->disk_bytenr;
	r.extent_bytes = e->disk_num_bytes;
	r.extent_generation = v->res->rec.generation;
	r.subvol = v->subvol;
	r.objectid = v->ino;
	r.extent_type = e->type == FE_TYPE_PREALLOC ? BTRFSIMG_EXTENT_PREALLOC
						    : BTRFSIMG_EXTENT_REGULAR;
	r.compression = e->compression;
	r.item_generation = e->generation;
	r.path = v->res->path;
	r.version_id = v->res->id;
	return fn(ctx, &r);
}

int btrfsimg_forensic_owners(btrfsimg_forensic *f, uint64_t logical, uint64_t len,
			     btrfsimg_owner_fn fn, void *ctx)
{
	uint64_t hi;
	if (!f || !fn)
		return -EINVAL;
	if (len == 0 || !bi_add_ok(logical, len, &hi))
		return bi_err(f->fs, -EINVAL, "forensic owners: range of %" PRIu64 " bytes at %"
			      PRIu64 " is empty or wraps around", len, logical);
	int rc = bi_fx_ready(f);
	for (size_t i = 0; rc == 0 && i < f->rec->nv; i++) {
		const struct fx_version *v = &f->rec->v[i];
		if (v->skip || v->dir)
			continue;
		for (size_t k = 0; rc == 0 && k < v->next; k++)
			rc = version_item(v, &v->ext[k],
					  k + 1 < v->next ? v->ext[k + 1].file_offset : UINT64_MAX,
					  logical, hi, fn, ctx);
	}
	return rc;
}
