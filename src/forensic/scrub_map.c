/* SPDX-License-Identifier: MIT */
/*
 * The chunk map read backwards: from a device's physical bytes to the
 * logical bytes (or parity) they hold, for readers that go through a
 * device in order (offline scrub, unallocated space).
 *
 * A device's allocated space is the union of its chunk stripes ("dev
 * extents"): [stripe.offset, stripe.offset + span) with span from
 * bi_chunk_stripe_span. Inside one, with po = physical - stripe.offset,
 * SL = stripe_len, r = po / SL, so = po % SL, n = num_stripes and i the
 * stripe's index (the inverse of the arithmetic in btrfs/chunk.c):
 *
 *   single dup raid1*  logical = start + po                  (mirror i)
 *   raid0              logical = start + (r * n + i) * SL + so
 *   raid10             f = n / 2: logical = start + (r * f + i / 2) * SL + so
 *                      (mirror i % 2)
 *   raid5/6            d data stripes; the row r puts position
 *                      p = (i - r) mod n on stripe i: p < d is data at
 *                      start + (r * d + p) * SL + so, p = d is P, d + 1 Q
 *
 * Offsets past the chunk's length (the tail of a last, partial row) map
 * to nothing. Everything from disk was checked when the chunk was parsed
 * (tree_checker.c: stripe_len 64 KiB, spans that do not overflow), and the dev
 * extents are clipped to the device, so the loops here are bounded by the
 * device's size.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "forensic/scrub_map.h"

#include "base/grow.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"

#define EXTENT_FLAG_TREE_BLOCK 2ull /* BTRFS_EXTENT_FLAG_TREE_BLOCK */

/* ------------------------------------------------------------ dev extents */

static int cmp_devext(const void *a, const void *b)
{
	const struct bi_smap_devext *x = a, *y = b;
	if (x->physical != y->physical)
		return x->physical < y->physical ? -1 : 1;
	return x->c->logical < y->c->logical ? -1 : x->c->logical > y->c->logical;
}

static int devext_push(struct bi_smap_devext **v, size_t *n, size_t *cap, struct bi_smap_devext x)
{
	if (bi_grow((void **)v, cap, *n + 1, sizeof(**v)))
		return -ENOMEM;
	(*v)[(*n)++] = x;
	return 0;
}

/* Trim overlaps (the earlier range keeps the bytes) and empty ranges. */
static size_t devext_clip(struct bi_smap_devext *v, size_t n)
{
	size_t out = 0;
	uint64_t end = 0;
	for (size_t i = 0; i < n; i++) {
		struct bi_smap_devext x = v[i];
		uint64_t xend = x.physical + x.span;
		if (xend <= end)
			continue;
		if (x.physical < end) {
			/* keep stripe-relative positions right: only the start moves */
			x.span = xend - end;
			x.physical = end;
		}
		end = xend;
		v[out++] = x;
	}
	return out;
}

int bi_smap_dev_extents(struct btrfsimg_fs *fs, uint64_t devid, uint64_t limit,
			struct bi_smap_devext **out, size_t *n)
{
	struct bi_smap_devext *v = NULL;
	size_t nv = 0, cap = 0;
	int rc = 0;
	for (size_t i = 0; i < bi_chunk_map_count(fs->chunks); i++) {
		const struct bi_chunk *c = bi_chunk_map_at(fs->chunks, i);
		uint64_t span = bi_chunk_stripe_span(c);
		for (uint32_t s = 0; s < c->num_stripes; s++) {
			uint64_t p = c->stripes[s].offset;
			if (c->stripes[s].devid != devid || p >= limit)
				continue;
			uint64_t len = span < limit - p ? span : limit - p;
			rc = devext_push(&v, &nv, &cap, (struct bi_smap_devext){ p, len, c, s });
			if (rc < 0)
				goto fail;
		}
	}
	if (nv)
		qsort(v, nv, sizeof(*v), cmp_devext);
	*out = v;
	*n = devext_clip(v, nv);
	return 0;
fail:
	free(v);
	return bi_err(fs, rc, "out of memory listing the chunks of device %" PRIu64, devid);
}

/* ------------------------------------------------------------ pieces */

/* The stripe-relative offset of @phys. A clipped dev extent starts later
 * than its stripe does: positions stay relative to the stripe's start. */
static uint64_t stripe_off(const struct bi_smap_devext *x, uint64_t phys)
{
	return phys - x->c->stripes[x->stripe].offset;
}

void bi_smap_piece_at(const struct bi_smap_devext *x, uint64_t phys, struct bi_smap_piece *out)
{
	const struct bi_chunk *c = x->c;
	uint64_t po = stripe_off(x, phys), sl = c->stripe_len;
	uint64_t r = po / sl, so = po % sl, nr = 0, prof = bi_chunk_profile(c);
	uint32_t n = c->num_stripes, i = x->stripe;
	*out = (struct bi_smap_piece){ .len = sl - so, .mapped = true, .unit = so };
	switch (prof) {
	case BG_RAID0:
		nr = r * n + i;
		break;
	case BG_RAID10:
		nr = r * (n / 2u) + i / 2u;
		out->copy = (int)(i % 2u);
		break;
	case BG_RAID5:
	case BG_RAID6: {
		uint32_t d = bi_chunk_data_stripes(c);
		uint32_t p = (uint32_t)((i + n - r % n) % n);
		if (p >= d) {
			out->parity = true;
			out->pos = p;
			out->logical = c->logical + r * d * sl;
			out->mapped = r * d * sl < c->length;
			return;
		}
		out->pos = p;
		nr = r * d + p;
		break;
	}
	default: /* single, dup, raid1, raid1c3, raid1c4 */
		out->len = c->length > po ? c->length - po : 0;
		out->logical = c->logical + po;
		out->copy = (int)i;
		out->mapped = po < c->length;
		if (!out->mapped)
			out->len = x->physical + x->span - phys;
		return;
	}
	/* nr * sl + so <= span * n, which bi_chunk_parse kept below 2^64 */
	uint64_t off = nr * sl + so;
	out->logical = c->logical + off;
	out->mapped = off < c->length;
	if (out->mapped && c->length - off < out->len)
		out->len = c->length - off;
}

/* ------------------------------------------------------------ extent tree */

static int ext_push(struct bi_smap_chunk *k, struct bi_smap_ext e)
{
	if (bi_grow((void **)&k->ext, &k->ncap, k->n + 1, sizeof(*k->ext)))
		return -ENOMEM;
	k->ext[k->n++] = e;
	return 0;
}

/* One EXTENT_ITEM / METADATA_ITEM, clipped to the chunk; others ignored. */
static int ext_item(struct btrfsimg_fs *fs, struct bi_smap_chunk *k, const struct bi_item *it)
{
	const struct bi_chunk *c = k->c;
	struct bi_smap_ext e = { .start = it->key.objectid };
	if (it->key.type == KT_METADATA_ITEM) {
		e.len = fs->nodesize;
		e.tree = true;
	} else if (it->key.type == KT_EXTENT_ITEM) {
		e.len = it->key.offset;
	} else {
		return 0;
	}
	if (it->size >= 24) { /* refs, generation, flags */
		e.gen = bi_le64(it->data + 8);
		if (bi_le64(it->data + 16) & EXTENT_FLAG_TREE_BLOCK)
			e.tree = true;
	}
	uint64_t cend = c->logical + c->length;
	if (e.len == 0 || e.start < c->logical || e.start >= cend)
		return 0;
	if (e.len > cend - e.start)
		e.len = cend - e.start;
	/* a hostile tree may repeat or overlap ranges: keep the order strict */
	if (k->n && e.start < k->ext[k->n - 1].start + k->ext[k->n - 1].len) {
		struct bi_smap_ext *prev = &k->ext[k->n - 1];
		uint64_t pend = prev->start + prev->len;
		if (e.start + e.len <= pend)
			return 0;
		e.len = e.start + e.len - pend;
		e.start = pend;
	}
	return ext_push(k, e);
}

static int load_extents(struct btrfsimg_fs *fs, struct bi_smap_chunk *k)
{
	struct bi_root root;
	int rc = bi_root_find(fs, OBJ_EXTENT_TREE, &root);
	if (rc < 0)
		return rc;
	const struct bi_chunk *c = k->c;
	bi_key lo = { c->logical, 0, 0 }, hi = { c->logical + c->length - 1, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	rc = bi_iter_start(fs, &it, &root, &lo, &hi);
	if (rc < 0)
		return rc;
	bi_iter_stream(&it);
	while ((rc = bi_iter_next(&it, &item)) > 0)
		if ((rc = ext_item(fs, k, &item)) < 0)
			break;
	bi_iter_end(&it);
	if (rc == -ENOMEM)
		return bi_err(fs, rc, "out of memory loading the extents of chunk %" PRIu64,
			      c->logical);
	return rc;
}

/* ------------------------------------------------------------ csum tree */

static int csum_push(struct btrfsimg_fs *fs, struct bi_smap_chunk *k, uint64_t start, uint64_t end,
		     const uint8_t *sums, size_t len)
{
	if (bi_grow((void **)&k->cs, &k->cscap, k->ncs + 1, sizeof(*k->cs)) ||
	    bi_grow((void **)&k->sums, &k->sumcap, k->sumlen + len, 1))
		return -ENOMEM;
	memcpy(k->sums + k->sumlen, sums, len);
	k->cs[k->ncs++] = (struct bi_smap_csum){ start, end, k->sumlen };
	k->sumlen += len;
	(void)fs;
	return 0;
}

/* One EXTENT_CSUM item: kept if it holds whole checksums of whole
 * sectors; the part inside the chunk and after the previous item only. */
static int csum_item(struct btrfsimg_fs *fs, struct bi_smap_chunk *k, const struct bi_item *it)
{
	const uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	uint64_t start = it->key.offset, end;
	if (it->key.objectid != OBJ_EXTENT_CSUM || it->key.type != KT_EXTENT_CSUM)
		return 0;
	if (start % ss || it->size % cs || !bi_add_ok(start, (uint64_t)(it->size / cs) * ss, &end))
		return 0; /* not a checksum of anything: its sectors count as unchecked */
	uint64_t lo = k->c->logical, hi = k->c->logical + k->c->length;
	if (k->ncs && k->cs[k->ncs - 1].end > lo)
		lo = k->cs[k->ncs - 1].end;
	if (start > lo)
		lo = start;
	if (end < hi)
		hi = end;
	if (lo >= hi)
		return 0;
	const uint8_t *p = it->data + (lo - start) / ss * cs;
	return csum_push(fs, k, lo, hi, p, (size_t)((hi - lo) / ss * cs));
}

static int load_csums(struct btrfsimg_fs *fs, struct bi_smap_chunk *k)
{
	struct bi_root root;
	int rc = bi_root_find(fs, OBJ_CSUM_TREE, &root);
	if (rc == -ENOENT)
		return 0; /* no checksums at all: every sector unchecked */
	if (rc < 0)
		return rc;
	const uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	/* an item covering the chunk's start begins at most a leaf earlier */
	uint64_t reach = (uint64_t)(fs->nodesize - HDR_SIZE - ITEM_SIZE) / cs * ss;
	const struct bi_chunk *c = k->c;
	bi_key lo = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM,
		      c->logical > reach ? c->logical - reach : 0 };
	bi_key hi = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, c->logical + c->length - 1 };
	struct bi_iter it;
	struct bi_item item;
	rc = bi_iter_start(fs, &it, &root, &lo, &hi);
	if (rc < 0)
		return rc;
	bi_iter_stream(&it);
	while ((rc = bi_iter_next(&it, &item)) > 0)
		if ((rc = csum_item(fs, k, &item)) < 0)
			break;
	bi_iter_end(&it);
	if (rc == -ENOMEM)
		return bi_err(fs, rc, "out of memory loading the checksums of chunk %" PRIu64,
			      c->logical);
	return rc;
}

int bi_smap_chunk_load(struct btrfsimg_fs *fs, const struct bi_chunk *c, bool csums,
		       struct bi_smap_chunk *k)
{
	k->c = c;
	k->n = k->ncs = k->sumlen = 0;
	int rc = load_extents(fs, k);
	if (rc == 0 && csums && fs->csum_size && (c->type & BG_DATA))
		rc = load_csums(fs, k);
	return rc;
}

void bi_smap_chunk_free(struct bi_smap_chunk *k)
{
	free(k->ext);
	free(k->cs);
	free(k->sums);
	memset(k, 0, sizeof(*k));
}

size_t bi_smap_ext_first(const struct bi_smap_chunk *k, uint64_t logical)
{
	size_t lo = 0, hi = k->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->ext[mid].start + k->ext[mid].len <= logical)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const uint8_t *bi_smap_csum_find(const struct bi_smap_chunk *k, uint64_t logical,
				 uint32_t csum_size, uint32_t sectorsize, size_t *hint)
{
	size_t i = *hint;
	if (i >= k->ncs || k->cs[i].start > logical) {
		size_t lo = 0, hi = k->ncs;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (k->cs[mid].end <= logical)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo;
	}
	while (i < k->ncs && k->cs[i].end <= logical)
		i++;
	*hint = i;
	if (i >= k->ncs || k->cs[i].start > logical)
		return NULL;
	return k->sums + k->cs[i].at + (logical - k->cs[i].start) / sectorsize * csum_size;
}
