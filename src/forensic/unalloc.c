/* SPDX-License-Identifier: MIT */
/*
 * Unallocated space, for carving: the device bytes no live extent uses,
 * as The Sleuth Kit's blkls lists a filesystem's unallocated blocks.
 *
 * Per device, in physical order (scrub_map.c lists its chunk stripes):
 *   - bytes no chunk maps: kind "device" (the first MiB, the gaps the
 *     allocator left, the end of the device and whatever the image holds
 *     past the filesystem's own size);
 *   - inside a chunk stripe, the logical ranges of that stripe the extent
 *     tree holds no EXTENT_ITEM or METADATA_ITEM for: kind "data" or
 *     "metadata" (system included), with their logical address and the
 *     copy (mirror) the stripe is; each copy of a free range is listed,
 *     for its bytes may differ;
 *   - RAID5/6 parity of rows with no data in use: kind "parity";
 *   - the tail of a stripe past the chunk's last row: kind "device".
 * The superblock copies are live wherever they lie and are never listed.
 * Neighbouring ranges of one kind merge when their logical addresses run
 * on too, so the list is short and sorted, and no two ranges overlap.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btrfsimg_forensic.h"

#include "base/err.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "forensic/scrub_map.h"

struct ua {
	struct btrfsimg_fs *fs;
	const struct bi_dev *d;
	btrfsimg_unalloc_fn fn;
	void *ctx;
	struct btrfsimg_unalloc_range pend; /* the range being grown */
	bool have;
};

const char *btrfsimg_unalloc_kind_name(enum btrfsimg_unalloc_kind k)
{
	switch (k) {
	case BTRFSIMG_UNALLOC_DEVICE:
		return "device";
	case BTRFSIMG_UNALLOC_DATA:
		return "data";
	case BTRFSIMG_UNALLOC_METADATA:
		return "metadata";
	case BTRFSIMG_UNALLOC_PARITY:
		return "parity";
	}
	return "unknown";
}

static bool joins(const struct btrfsimg_unalloc_range *a, const struct btrfsimg_unalloc_range *b)
{
	return a->kind == b->kind && a->devid == b->devid &&
	       a->physical + a->length == b->physical && a->has_logical == b->has_logical &&
	       a->mirror == b->mirror && (!a->has_logical || a->logical + a->length == b->logical);
}

/* Grow the pending range or hand it over and start the next: 0, or the
 * callback's non-zero value (stop). */
static int push(struct ua *u, const struct btrfsimg_unalloc_range *r)
{
	if (u->have && joins(&u->pend, r)) {
		u->pend.length += r->length;
		return 0;
	}
	int rc = u->have ? u->fn(u->ctx, &u->pend) : 0;
	u->pend = *r;
	u->have = true;
	return rc;
}

/* Add @r without the superblock copies it covers. */
static int emit(struct ua *u, struct btrfsimg_unalloc_range r)
{
	for (int i = 0; i < SB_MIRROR_MAX && r.length; i++) {
		uint64_t sb = u->d->mirrors[i].bytenr, se = sb + SB_SIZE;
		if (sb == 0 || se <= r.physical || sb >= r.physical + r.length)
			continue;
		if (sb > r.physical) {
			struct btrfsimg_unalloc_range head = r;
			head.length = sb - r.physical;
			int rc = push(u, &head);
			if (rc)
				return rc;
		}
		uint64_t end = r.physical + r.length;
		uint64_t skip = (se < end ? se : end) - r.physical;
		r.physical += skip;
		r.logical += r.has_logical ? skip : 0;
		r.length = end - r.physical;
	}
	return r.length ? push(u, &r) : 0;
}

static int emit_device(struct ua *u, uint64_t a, uint64_t b)
{
	if (a >= b)
		return 0;
	return emit(u, (struct btrfsimg_unalloc_range){ .kind = BTRFSIMG_UNALLOC_DEVICE,
							.devid = u->d->devid,
							.physical = a,
							.length = b - a });
}

/* The free parts of one data piece: its logical range minus the extents. */
static int free_in_piece(struct ua *u, const struct bi_smap_chunk *k, const struct bi_smap_piece *p,
			 uint64_t ph)
{
	int kind = (k->c->type & BG_DATA) ? BTRFSIMG_UNALLOC_DATA : BTRFSIMG_UNALLOC_METADATA;
	uint64_t at = p->logical, end = p->logical + p->len;
	struct btrfsimg_unalloc_range r = {
		.kind = kind, .devid = u->d->devid, .has_logical = true, .mirror = p->copy + 1
	};
	for (size_t i = bi_smap_ext_first(k, at); at < end; i++) {
		uint64_t next = i < k->n && k->ext[i].start < end ? k->ext[i].start : end;
		if (next > at) {
			r.logical = at;
			r.physical = ph + (at - p->logical);
			r.length = next - at;
			int rc = emit(u, r);
			if (rc)
				return rc;
		}
		if (i >= k->n || k->ext[i].start >= end)
			break;
		uint64_t eend = k->ext[i].start + k->ext[i].len;
		at = eend > at ? eend : at;
	}
	return 0;
}

static bool row_used(const struct bi_smap_chunk *k, uint64_t row_logical)
{
	uint64_t row = (uint64_t)bi_chunk_data_stripes(k->c) * k->c->stripe_len;
	size_t i = bi_smap_ext_first(k, row_logical);
	return i < k->n && k->ext[i].start < row_logical + row;
}

static int devext_free(struct ua *u, const struct bi_smap_devext *x, const struct bi_smap_chunk *k)
{
	uint64_t end = x->physical + x->span;
	struct bi_smap_piece p;
	int rc = 0;
	for (uint64_t ph = x->physical; rc == 0 && ph < end; ph += p.len) {
		bi_smap_piece_at(x, ph, &p);
		if (p.len == 0 || p.len > end - ph)
			p.len = end - ph;
		if (!p.mapped)
			rc = emit_device(u, ph, ph + p.len);
		else if (p.parity && !row_used(k, p.logical))
			rc = emit(u,
				  (struct btrfsimg_unalloc_range){ .kind = BTRFSIMG_UNALLOC_PARITY,
								   .devid = u->d->devid,
								   .physical = ph,
								   .length = p.len });
		else if (!p.parity)
			rc = free_in_piece(u, k, &p, ph);
	}
	return rc;
}

static int one_device(struct ua *u, struct bi_smap_chunk *k)
{
	struct bi_smap_devext *v;
	size_t n;
	int rc = bi_smap_dev_extents(u->fs, u->d->devid, u->d->size, &v, &n);
	if (rc < 0)
		return rc;
	uint64_t cur = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if ((rc = emit_device(u, cur, v[i].physical)) != 0)
			break;
		if (k->c != v[i].c && (rc = bi_smap_chunk_load(u->fs, v[i].c, false, k)) < 0) {
			k->c = NULL;
			break;
		}
		rc = devext_free(u, &v[i], k);
		cur = v[i].physical + v[i].span;
	}
	if (rc == 0)
		rc = emit_device(u, cur, u->d->size);
	free(v);
	return rc;
}

static int cmp_dev(const void *a, const void *b)
{
	const struct bi_dev *x = *(const struct bi_dev *const *)a;
	const struct bi_dev *y = *(const struct bi_dev *const *)b;
	return x->devid < y->devid ? -1 : x->devid > y->devid;
}

int btrfsimg_unallocated(btrfsimg_fs *fs, btrfsimg_unalloc_fn fn, void *ctx)
{
	if (!fn || !bi_opened(fs, "btrfsimg_unallocated"))
		return -EINVAL;
	struct ua u = { .fs = fs, .fn = fn, .ctx = ctx };
	struct bi_smap_chunk k = { 0 };
	const struct bi_dev **devs = calloc(fs->ndevs ? fs->ndevs : 1, sizeof(*devs));
	if (!devs)
		return bi_err(fs, -ENOMEM, "out of memory listing unallocated space");
	size_t nd = 0;
	for (size_t i = 0; i < fs->ndevs; i++)
		if (fs->devs[i].member)
			devs[nd++] = &fs->devs[i];
	qsort(devs, nd, sizeof(*devs), cmp_dev);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < nd; i++) {
		u.d = devs[i];
		rc = one_device(&u, &k);
	}
	if (rc == 0 && u.have)
		rc = fn(ctx, &u.pend);
	bi_smap_chunk_free(&k);
	free(devs);
	return rc;
}

int btrfsimg_device_read(btrfsimg_fs *fs, uint64_t devid, uint64_t physical, void *buf, size_t len)
{
	if (!buf || !bi_opened(fs, "btrfsimg_device_read"))
		return -EINVAL;
	struct bi_dev *d = bi_dev_by_id(fs, devid);
	if (!d)
		return bi_err(fs, -ENOENT, "device %" PRIu64 " was not supplied", devid);
	return bi_dev_read(fs, d, physical, buf, len);
}
