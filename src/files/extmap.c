/* SPDX-License-Identifier: MIT */
/*
 * Where a file's bytes lie: the forward map (file -> logical -> device ->
 * image), built on the extent cursor of extent.c and the chunk map.
 *
 * One record per piece bi_extent_pieces gives (a gap, the item's bytes, an
 * inline tail), further cut where uncompressed logical bytes cross a
 * stripe or chunk boundary: a chunk's copies share its stripe geometry, so
 * a piece that stays inside one stripe is contiguous on every copy. A
 * compressed extent is read whole, so its record's disk bytes are the
 * whole extent, in parts when they cross a stripe boundary.
 *
 * Cost: one step per extent item (holes and i_size cost nothing), plus,
 * with BTRFSIMG_EXTENTS_CSUM, one csum search per csum item or gap met.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/handle.h"
#include "image/container.h"
#include "image/dev.h"
#include "volume/vol.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "files/extent.h"

struct btrfsimg_extents {
	struct btrfsimg_fs *fs;
	struct bi_file *f;
	unsigned flags;
	bool nodatasum;
	uint64_t pos, size;
	struct btrfsimg_extent rec;
	/* a compressed extent's disk bytes still to list: [zpos, zend) */
	uint64_t zpos, zend;
};

const char *btrfsimg_csum_cover_name(int cover)
{
	static const char *const names[] = { "unchecked", "full",   "partial", "none",
					     "nodatasum", "inline", "zeros" };
	return cover >= 0 && cover < (int)(sizeof(names) / sizeof(names[0])) ? names[cover] : NULL;
}

/* Fill @c's image side for byte @physical of device @d. */
static void place(struct btrfsimg_fs *fs, const struct bi_dev *d, uint64_t physical,
		  struct btrfsimg_extent_copy *c)
{
	const struct bi_dev *img = NULL;
	uint64_t disk = 0;
	const char *why = "";
	c->device = d->name;
	c->note = "";
	if (bi_vol_locate(fs, d, physical, &img, &disk, &why) != 0) {
		c->note = why;
		return;
	}
	c->device = img->name;
	c->has_disk_offset = true;
	c->disk_offset = disk;
	if (!img->ctr) {
		c->has_image_offset = true;
		c->image_offset = disk;
	} else {
		c->note = "inside a container: disk_offset is in the disk it holds, not the file";
	}
}

int btrfsimg_device_place(btrfsimg_fs *fs, uint64_t devid, uint64_t physical,
			  struct btrfsimg_extent_copy *out)
{
	if (!fs || !out || !bi_opened(fs, __func__))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->devid = devid;
	out->physical = physical;
	out->note = "";
	struct bi_dev *d = bi_dev_by_id(fs, devid);
	if (!d)
		return bi_err(fs, -ENOENT, "device place: devid %" PRIu64 " was not supplied",
			      devid);
	place(fs, d, physical, out);
	return 0;
}

/* Every copy of logical @l; *run: bytes from @l contiguous on all of them
 * (at most @want). No chunk: ncopies 0 and damage reported. */
static void map_copies(struct btrfsimg_fs *fs, struct btrfsimg_extent *r, uint64_t l,
		       uint64_t want, uint64_t *run)
{
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, l);
	r->ncopies = 0;
	*run = want;
	if (!c) {
		bi_damage(fs, "extent map: logical %" PRIu64 " is in no chunk", l);
		return;
	}
	for (int k = 0; k < BTRFSIMG_EXTENT_COPIES_MAX; k++) {
		struct bi_phys ph;
		if (bi_chunk_map_phys(c, l, k, &ph) < 0)
			break;
		struct btrfsimg_extent_copy *cp = &r->copies[r->ncopies++];
		memset(cp, 0, sizeof(*cp));
		cp->devid = ph.devid;
		cp->physical = ph.physical;
		cp->note = "device missing";
		struct bi_dev *d = bi_dev_by_id(fs, ph.devid);
		if (d && !memcmp(d->dev_uuid, c->stripes[ph.stripe].dev_uuid, 16))
			place(fs, d, ph.physical, cp);
		if (ph.len < *run)
			*run = ph.len;
	}
	if (*run == 0) /* a chunk never ends at its own address; stay finite */
		*run = want;
}

static int cover(struct btrfsimg_extents *it, struct btrfsimg_extent *r)
{
	if (r->type == BTRFSIMG_EXTENT_HOLE || r->type == BTRFSIMG_EXTENT_PREALLOC) {
		r->csum = BTRFSIMG_CSUM_ZEROS;
		return 0;
	}
	if (r->type == BTRFSIMG_EXTENT_INLINE) {
		r->csum = BTRFSIMG_CSUM_INLINE;
		return 0;
	}
	if (it->nodatasum) {
		r->csum = BTRFSIMG_CSUM_NODATASUM;
		return 0;
	}
	if (!(it->flags & BTRFSIMG_EXTENTS_CSUM)) {
		r->csum = BTRFSIMG_CSUM_UNCHECKED;
		return 0;
	}
	int rc = bi_file_csum_bytes(it->f, r->logical, r->disk_length, &r->csum_bytes);
	if (rc < 0)
		return rc;
	r->csum = r->csum_bytes == r->disk_length ? BTRFSIMG_CSUM_FULL
		  : r->csum_bytes			? BTRFSIMG_CSUM_PARTIAL
							: BTRFSIMG_CSUM_NONE;
	return 0;
}

static void from_item(struct btrfsimg_extent *r, const struct bi_extent *e)
{
	r->item_offset = e->file_offset;
	r->generation = e->generation;
	r->ram_bytes = e->ram_bytes;
	r->compression = e->compression;
	if (e->type != FE_TYPE_INLINE) {
		r->disk_bytenr = e->disk_bytenr;
		r->disk_num_bytes = e->disk_num_bytes;
		r->extent_offset = e->offset;
	}
}

/* The next part of a compressed extent's disk bytes (same file range). */
static int next_zpart(struct btrfsimg_extents *it)
{
	struct btrfsimg_extent *r = &it->rec;
	uint64_t run;
	r->logical = it->zpos;
	map_copies(it->fs, r, it->zpos, it->zend - it->zpos, &run);
	r->disk_length = run;
	it->zpos += run;
	return cover(it, r);
}

/* Turn piece @p of item @e (NULL: past the last item) into it->rec. */
static int from_piece(struct btrfsimg_extents *it, const struct bi_extent *e,
		      const struct bi_piece *p)
{
	struct btrfsimg_extent *r = &it->rec;
	memset(r, 0, sizeof(*r));
	r->file_offset = p->pos;
	r->length = p->len;
	r->type = BTRFSIMG_EXTENT_HOLE;
	bool in_item = e && p->pos >= e->file_offset;
	if (in_item)
		from_item(r, e);
	uint64_t run;
	switch (p->kind) {
	case BI_EXT_INLINE:
		r->type = BTRFSIMG_EXTENT_INLINE;
		break;
	case BI_EXT_DISK:
		r->type = BTRFSIMG_EXTENT_REGULAR;
		r->logical = p->src;
		map_copies(it->fs, r, p->src, p->len, &run);
		r->length = r->disk_length = run;
		break;
	case BI_EXT_COMPRESSED:
		r->type = BTRFSIMG_EXTENT_REGULAR;
		it->zpos = e->disk_bytenr;
		it->zend = e->disk_bytenr + e->disk_num_bytes; /* checked by bi_extent_parse */
		return next_zpart(it);
	default:
		if (in_item && e->type == FE_TYPE_PREALLOC) {
			r->type = BTRFSIMG_EXTENT_PREALLOC;
			r->logical = e->disk_bytenr + e->offset + (p->pos - e->file_offset);
			map_copies(it->fs, r, r->logical, p->len, &run);
			r->length = r->disk_length = run;
		}
		break;
	}
	return cover(it, r);
}

int btrfsimg_extents_open(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, unsigned flags,
			  btrfsimg_extents **out)
{
	if (!fs || !out || !bi_opened(fs, __func__))
		return -EINVAL;
	*out = NULL;
	if (flags & ~BTRFSIMG_EXTENTS_CSUM)
		return bi_err(fs, -EINVAL, "extents: unknown flags %#x", flags);
	struct btrfsimg_extents *it = calloc(1, sizeof(*it));
	if (!it)
		return bi_err(fs, -ENOMEM, "out of memory listing extents");
	int rc = bi_file_open(fs, subvol, objectid, &it->f);
	if (rc < 0) {
		free(it);
		return rc;
	}
	it->fs = fs;
	it->flags = flags;
	it->size = bi_file_size(it->f);
	it->nodatasum = bi_file_nodatasum(it->f);
	*out = it;
	return 0;
}

int btrfsimg_extents_next(btrfsimg_extents *it, const struct btrfsimg_extent **out)
{
	if (!it || !out)
		return -EINVAL;
	int rc;
	if (it->zpos < it->zend) {
		if ((rc = next_zpart(it)) < 0)
			return rc;
		*out = &it->rec;
		return 1;
	}
	if (it->pos >= it->size)
		return 0;
	const struct bi_extent *e = NULL;
	uint64_t next = UINT64_MAX;
	if ((rc = bi_file_extent_at(it->f, it->pos, &e, &next)) < 0)
		return rc;
	struct bi_piece p[3];
	if (!e) {
		p[0] = (struct bi_piece){ it->pos, it->size - it->pos, BI_EXT_ZERO, 0 };
	} else if (bi_extent_pieces(e, next, it->pos, it->size, p) == 0) {
		return bi_err(it->fs, -EUCLEAN, "extent map: no piece at file offset %" PRIu64,
			      it->pos);
	}
	if ((rc = from_piece(it, e, &p[0])) < 0)
		return rc;
	it->pos = p[0].kind == BI_EXT_COMPRESSED ? p[0].pos + p[0].len
						 : it->rec.file_offset + it->rec.length;
	*out = &it->rec;
	return 1;
}

void btrfsimg_extents_close(btrfsimg_extents *it)
{
	if (!it)
		return;
	bi_file_close(it->f);
	free(it);
}

/* The records' coverage folded into one word: what a reader of the whole
 * file can rely on. */
static int fold(bool nodatasum, bool any_inline, uint64_t data, uint64_t csum)
{
	if (nodatasum && data)
		return BTRFSIMG_CSUM_NODATASUM;
	if (!data)
		return any_inline ? BTRFSIMG_CSUM_INLINE : BTRFSIMG_CSUM_ZEROS;
	if (csum == data)
		return any_inline ? BTRFSIMG_CSUM_PARTIAL : BTRFSIMG_CSUM_FULL;
	return csum ? BTRFSIMG_CSUM_PARTIAL : BTRFSIMG_CSUM_NONE;
}

int btrfsimg_file_csum_cover(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
			     uint64_t *data_bytes, uint64_t *csum_bytes)
{
	btrfsimg_extents *it;
	int rc = btrfsimg_extents_open(fs, subvol, objectid, BTRFSIMG_EXTENTS_CSUM, &it);
	if (rc < 0)
		return rc;
	const struct btrfsimg_extent *e;
	uint64_t data = 0, csum = 0;
	bool any_inline = false;
	while ((rc = btrfsimg_extents_next(it, &e)) > 0) {
		any_inline |= e->type == BTRFSIMG_EXTENT_INLINE;
		if (e->type == BTRFSIMG_EXTENT_REGULAR) {
			data += e->disk_length;
			csum += e->csum_bytes;
		}
	}
	bool nodatasum = it->nodatasum;
	btrfsimg_extents_close(it);
	if (rc < 0)
		return rc;
	if (data_bytes)
		*data_bytes = data;
	if (csum_bytes)
		*csum_bytes = csum;
	return fold(nodatasum, any_inline, data, csum);
}

int bi_extmap_items(struct btrfsimg_fs *fs, const struct bi_extent *ext, size_t n, uint64_t size,
		    bool nodatasum, btrfsimg_extent_fn fn, void *ctx)
{
	struct btrfsimg_extents it = { .fs = fs, .nodatasum = nodatasum };
	size_t i = 0;
	int rc = 0;
	while (rc == 0 && it.pos < size) {
		while (i < n) { /* the first item still visible at pos */
			uint64_t nx = i + 1 < n ? ext[i + 1].file_offset : UINT64_MAX;
			if ((ext[i].end < nx ? ext[i].end : nx) > it.pos)
				break;
			i++;
		}
		struct bi_piece p[3];
		const struct bi_extent *e = i < n ? &ext[i] : NULL;
		if (!e)
			p[0] = (struct bi_piece){ it.pos, size - it.pos, BI_EXT_ZERO, 0 };
		else if (bi_extent_pieces(e, i + 1 < n ? ext[i + 1].file_offset : UINT64_MAX, it.pos,
					  size, p) == 0)
			return bi_err(fs, -EUCLEAN, "extent map: no piece at file offset %" PRIu64,
				      it.pos);
		if ((rc = from_piece(&it, e, &p[0])) < 0)
			return rc;
		rc = fn(ctx, &it.rec);
		while (rc == 0 && it.zpos < it.zend) {
			if ((rc = next_zpart(&it)) < 0)
				return rc;
			rc = fn(ctx, &it.rec);
		}
		it.pos = p[0].kind == BI_EXT_COMPRESSED ? p[0].pos + p[0].len
							: it.rec.file_offset + it.rec.length;
	}
	return rc;
}
