/* SPDX-License-Identifier: MIT */
/*
 * The chunk map: logical addresses to device offsets, for every profile.
 *
 * Chunks come from the superblock's sys_chunk_array (enough to read the
 * chunk tree) and then from the chunk tree. Each is checked once, when it
 * is decoded (bi_chunk_parse, the kernel's tree-checker rules), so the
 * mapping arithmetic never meets an impossible layout: stripe_len is
 * 64 KiB, stripe numbers fit in 32 bits, every stripe's device range fits
 * in 64 bits. With off = logical - chunk start, SL = stripe_len,
 * nr = off / SL, so = off % SL, n = num_stripes:
 *
 *   single dup raid1 raid1c3 raid1c4   mirror k: stripe[k] + off
 *   raid0     stripe[nr % n] + (nr / n) * SL + so
 *   raid10    f = n / 2; mirror k: stripe[(nr % f) * 2 + k] + (nr / f) * SL + so
 *   raid5/6   d = n - 1 (n - 2) data stripes; full = nr / d; the full
 *             stripe's position p (data 0..d-1 in logical order, P = d,
 *             Q = d + 1) is on stripe[(full + p) % n] + full * SL + so
 *
 *      raid5, n = 3     dev0  dev1  dev2
 *        full 0          D0    D1    P
 *        full 1          P     D0    D1      (parity rotates one device
 *        full 2          D1    P     D0       per full stripe)
 *
 * All of this was checked against images the kernel wrote
 * (testdata/chunk/, tests/unit/test_chunk.c).
 *
 * Reads pick a "copy" as the kernel numbers them: a mirror, or for
 * RAID5/6 a way to rebuild the data (see bi_chunk_num_copies and raid.c).
 * A stripe whose device was not supplied is read around where the profile
 * allows it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/chunk.h"

#include "base/grow.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/raid.h"

#define RAID56 (BG_RAID5 | BG_RAID6)
#define MIRRORED (BG_DUP | BG_RAID1 | BG_RAID1C3 | BG_RAID1C4)

struct bi_chunk_map {
	struct bi_chunk **v;	/* sorted by start, never overlapping */
	size_t n, cap;
	uint64_t degraded;
	uint64_t unreadable; /* degraded past what the profile tolerates */
	const struct bi_chunk *first_unreadable;
};

/* ------------------------------------------------------------ parsing */

/* ---------------------------------------------------------------- map */

struct bi_chunk_map *bi_chunk_map_new(void)
{
	return calloc(1, sizeof(struct bi_chunk_map));
}

void bi_chunk_map_free(struct bi_chunk_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i]);
	free(m->v);
	free(m);
}

/* Index of the first chunk starting after @logical. */
static size_t upper(const struct bi_chunk_map *m, uint64_t logical)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid]->logical <= logical)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool same_chunk(const struct bi_chunk *a, const struct bi_chunk *b)
{
	return a->length == b->length && a->type == b->type && a->num_stripes == b->num_stripes &&
	       !memcmp(a->stripes, b->stripes, a->num_stripes * sizeof(a->stripes[0]));
}

static bool overlaps(const struct bi_chunk *a, const struct bi_chunk *b)
{
	return a->logical < b->logical + b->length && b->logical < a->logical + a->length;
}

static int map_grow(struct bi_chunk_map *m)
{
	return bi_grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)) ? -ENOMEM : 0;
}

int bi_chunk_map_insert(struct bi_chunk_map *m, struct bi_chunk *c, char *why, size_t whylen)
{
	int rc = 0;
	if (!m || !c) {
		rc = -EINVAL;
		goto out;
	}
	size_t at = upper(m, c->logical);
	const struct bi_chunk *prev = at ? m->v[at - 1] : NULL;
	const struct bi_chunk *next = at < m->n ? m->v[at] : NULL;
	if (prev && prev->logical == c->logical && prev->length == c->length) {
		rc = same_chunk(prev, c) ? 0 : 1;
		goto out;
	}
	const struct bi_chunk *o = prev && overlaps(prev, c) ? prev
				   : next && overlaps(next, c) ? next : NULL;
	if (o) {
		rc = bi_why(why, whylen,
			    "chunk at logical %" PRIu64 ": range [%" PRIu64 ", %" PRIu64
			    ") overlaps chunk [%" PRIu64 ", %" PRIu64 ")",
			    c->logical, c->logical, (c->logical + c->length), o->logical,
			    (o->logical + o->length));
		goto out;
	}
	if ((rc = map_grow(m)) < 0)
		goto out;
	memmove(m->v + at + 1, m->v + at, (m->n - at) * sizeof(*m->v));
	m->v[at] = c;
	m->n++;
	return 0;
out:
	free(c);
	return rc;
}

const struct bi_chunk *bi_chunk_lookup(const struct bi_chunk_map *m, uint64_t logical)
{
	if (!m)
		return NULL;
	size_t at = upper(m, logical);
	if (!at)
		return NULL;
	const struct bi_chunk *c = m->v[at - 1];
	return logical - c->logical < c->length ? c : NULL;
}

size_t bi_chunk_map_count(const struct bi_chunk_map *m)
{
	return m ? m->n : 0;
}

const struct bi_chunk *bi_chunk_map_at(const struct bi_chunk_map *m, size_t i)
{
	return m && i < m->n ? m->v[i] : NULL;
}

uint64_t bi_chunk_map_degraded(const struct bi_chunk_map *m)
{
	return m ? m->degraded : 0;
}

/* ------------------------------------------------------------ mapping */

/* Mirrors map_phys accepts (RAID5/6: 1, the data stripe). */
static int mirrors(const struct bi_chunk *c)
{
	if (bi_chunk_profile(c) & MIRRORED)
		return c->num_stripes;
	return bi_chunk_profile(c) == BG_RAID10 ? 2 : 1;
}

int bi_chunk_num_copies(const struct bi_chunk *c)
{
	if (bi_chunk_profile(c) == BG_RAID5)
		return 2;
	if (bi_chunk_profile(c) == BG_RAID6)
		return c->num_stripes;
	return mirrors(c);
}

/* @off is inside the chunk, @copy < mirrors(c). */
static void map_off(const struct bi_chunk *c, uint64_t off, uint32_t copy, struct bi_phys *out)
{
	uint64_t sl = c->stripe_len, nr = off / sl, so = off % sl, row;
	uint32_t n = c->num_stripes, idx, f, d;
	switch (bi_chunk_profile(c)) {
	case BG_RAID0:
		idx = (uint32_t)(nr % n);
		row = nr / n;
		break;
	case BG_RAID10:
		f = n / 2u;
		idx = (uint32_t)(nr % f) * 2u + copy;
		row = nr / f;
		break;
	case BG_RAID5:
	case BG_RAID6:
		d = bi_chunk_data_stripes(c);
		row = nr / d;
		idx = (uint32_t)((row + nr % d) % n);
		break;
	default: /* single, dup, raid1*: every mirror holds the chunk as is */
		*out = (struct bi_phys){ c->stripes[copy].devid, c->stripes[copy].offset + off,
					 c->length - off, copy };
		return;
	}
	uint64_t left = c->length - off;
	*out = (struct bi_phys){ c->stripes[idx].devid, c->stripes[idx].offset + row * sl + so,
				 sl - so < left ? sl - so : left, idx };
}

static bool inside(const struct bi_chunk *c, uint64_t logical)
{
	return c && logical >= c->logical && logical - c->logical < c->length;
}

int bi_chunk_map_phys(const struct bi_chunk *c, uint64_t logical, int copy,
		      struct bi_phys *out)
{
	if (!inside(c, logical) || !out || copy < 0 || copy >= mirrors(c))
		return -EINVAL;
	map_off(c, logical - c->logical, (uint32_t)copy, out);
	return 0;
}

int bi_chunk_map_row(const struct bi_chunk *c, uint64_t logical, uint32_t pos,
		     struct bi_phys *out)
{
	if (!inside(c, logical) || !out || !(bi_chunk_profile(c) & RAID56) || pos >= c->num_stripes)
		return -EINVAL;
	uint64_t off = logical - c->logical, sl = c->stripe_len, so = off % sl;
	uint64_t full = off / sl / bi_chunk_data_stripes(c), left = c->length - off;
	uint32_t idx = (uint32_t)((full + pos) % c->num_stripes);
	*out = (struct bi_phys){ c->stripes[idx].devid, c->stripes[idx].offset + full * sl + so,
				 sl - so < left ? sl - so : left, idx };
	return 0;
}

/* Bytes each stripe of @c holds on its device (the dev extent's length). */
static uint64_t stripe_bytes(const struct bi_chunk *c)
{
	uint64_t p = bi_chunk_profile(c);
	if (p == BG_RAID0)
		return c->length / c->num_stripes;
	if (p == BG_RAID10)
		return c->length / (c->num_stripes / 2u);
	if (p & (BG_RAID5 | BG_RAID6))
		return c->length / bi_chunk_data_stripes(c);
	return c->length;
}

int bi_chunk_map_reverse(const struct bi_chunk *c, uint32_t idx, uint64_t physical,
			 uint64_t *logical, uint64_t *len)
{
	if (idx >= c->num_stripes || physical < c->stripes[idx].offset ||
	    physical - c->stripes[idx].offset >= stripe_bytes(c))
		return -EINVAL;
	uint64_t dev_off = physical - c->stripes[idx].offset, sl = c->stripe_len;
	uint64_t row = dev_off / sl, so = dev_off % sl, nr;
	uint32_t n = c->num_stripes, d;
	switch (bi_chunk_profile(c)) {
	case BG_RAID0:
		nr = row * n + idx;
		break;
	case BG_RAID10:
		nr = row * (n / 2u) + idx / 2u;
		break;
	case BG_RAID5:
	case BG_RAID6:
		/* map_off puts data position p of row r on stripe (r + p) % n */
		d = bi_chunk_data_stripes(c);
		nr = (idx + n - row % n) % n;
		if (nr >= d) { /* parity: say which row it protects */
			*logical = c->logical + row * d * sl;
			*len = d * sl;
			return 1;
		}
		nr += row * d;
		break;
	default:
		*logical = c->logical + dev_off;
		*len = c->length - dev_off;
		return 0;
	}
	uint64_t off = nr * sl + so;
	if (off >= c->length)
		return -EINVAL;
	*logical = c->logical + off;
	*len = sl - so < c->length - off ? sl - so : c->length - off;
	return 0;
}

/* -------------------------------------------------------------- reads */

/* The member device of stripe @idx: same devid and dev_uuid, as the
 * kernel's btrfs_find_device. NULL when it was not supplied. */
static struct bi_dev *stripe_dev(struct btrfsimg_fs *fs, const struct bi_chunk *c, uint32_t idx)
{
	const struct bi_stripe *s = &c->stripes[idx];
	struct bi_dev *d = bi_dev_by_id(fs, s->devid);
	return d && !memcmp(d->dev_uuid, s->dev_uuid, 16) ? d : NULL;
}

static int read_stripe(struct btrfsimg_fs *fs, const struct bi_chunk *c, const struct bi_phys *ph,
		       void *buf, size_t len)
{
	struct bi_dev *d = stripe_dev(fs, c, ph->stripe);
	if (!d)
		return bi_err(fs, -EIO,
			      "chunk %" PRIu64 " stripe %u: devid %" PRIu64
			      " is missing (%zu bytes at physical %" PRIu64 ")",
			      c->logical, ph->stripe, ph->devid, len, ph->physical);
	return bi_dev_read(fs, d, ph->physical, buf, len);
}

/* One piece of a RAID5/6 read: position x of a row, inside one stripe. */
struct row {
	const struct bi_chunk *c;
	uint64_t logical;
	uint32_t d, np, x;
	size_t len;
};

static bool pos_missing(struct btrfsimg_fs *fs, const struct row *r, uint32_t pos)
{
	struct bi_phys ph;
	bi_chunk_map_row(r->c, r->logical, pos, &ph);
	return !stripe_dev(fs, r->c, ph.stripe);
}

static int pos_read(struct btrfsimg_fs *fs, const struct row *r, uint32_t pos, uint8_t *buf)
{
	struct bi_phys ph;
	bi_chunk_map_row(r->c, r->logical, pos, &ph);
	return read_stripe(fs, r->c, &ph, buf, r->len);
}

/* The kernel's extra distrusted stripe for RAID6 copy >= 2
 * (set_rbio_raid6_extra_error): P for copy 2, then the other data stripes
 * from the last one down. */
static uint32_t extra_lost(uint32_t n, uint32_t x, int copy)
{
	uint32_t f = n - (uint32_t)copy;
	return f <= x ? f - 1 : f;
}

static int rebuild(struct btrfsimg_fs *fs, const struct row *r, const struct bi_raid_plan *p,
		   uint8_t *out)
{
	uint8_t *tmp = malloc(r->len), *pacc = calloc(1, r->len), *qacc = NULL;
	if (p->use_q)
		qacc = calloc(1, r->len);
	int rc = 0;
	if (!tmp || !pacc || (p->use_q && !qacc)) {
		rc = bi_err(fs, -ENOMEM, "out of memory rebuilding logical %" PRIu64, r->logical);
		goto out;
	}
	for (uint32_t pos = 0; pos < r->d + r->np && rc == 0; pos++) {
		if (!bi_raid_uses(p, pos))
			continue;
		rc = pos_read(fs, r, pos, tmp);
		if (rc == 0)
			bi_raid_fold(p, pos, tmp, pacc, qacc, r->len);
	}
	if (rc == 0)
		bi_raid_solve(p, pacc, qacc, r->len, out);
out:
	free(tmp);
	free(pacc);
	free(qacc);
	return rc;
}

static int lost_error(struct btrfsimg_fs *fs, const struct row *r, const uint32_t *lost,
		      uint32_t nlost, int copy)
{
	char list[200] = "";
	size_t at = 0;
	for (uint32_t i = 0; i < nlost && at < sizeof(list); i++) {
		struct bi_phys ph;
		bi_chunk_map_row(r->c, r->logical, lost[i], &ph);
		char what[16] = "P";
		if (lost[i] < r->d)
			snprintf(what, sizeof(what), "data %u", lost[i]);
		else if (lost[i] > r->d)
			what[0] = 'Q';
		at += (size_t)snprintf(list + at, sizeof(list) - at,
				       "%s%s on devid %" PRIu64 " (%s)", i ? ", " : "", what,
				       ph.devid,
				       pos_missing(fs, r, lost[i]) ? "missing" : "distrusted");
	}
	return bi_err(fs, -EIO,
		      "raid%c chunk %" PRIu64 ": cannot rebuild logical %" PRIu64
		      " (copy %d): %s%s unusable, "
		      "parity rebuilds at most %u",
		      r->np == 2 ? '6' : '5', r->c->logical, r->logical, copy, list,
		      nlost >= 4 ? ", ..." : "", r->np);
}

static int read_raid56(struct btrfsimg_fs *fs, const struct bi_chunk *c, uint64_t logical,
		       uint8_t *buf, size_t len, int copy)
{
	uint64_t nr = (logical - c->logical) / c->stripe_len;
	struct row r = { c, logical, bi_chunk_data_stripes(c), bi_chunk_nparity(c), 0, len };
	r.x = (uint32_t)(nr % r.d);
	if (copy == 0 && !pos_missing(fs, &r, r.x)) {
		struct bi_phys ph;
		bi_chunk_map_row(c, logical, r.x, &ph);
		return read_stripe(fs, c, &ph, buf, len);
	}
	uint32_t lost[4] = { r.x }, nlost = 1;
	if (copy >= 2)
		lost[nlost++] = extra_lost(c->num_stripes, r.x, copy);
	for (uint32_t pos = 0; pos < c->num_stripes && nlost < 4; pos++)
		if (pos != lost[0] && (nlost < 2 || pos != lost[1]) && pos_missing(fs, &r, pos))
			lost[nlost++] = pos;
	struct bi_raid_plan p;
	if (bi_raid_plan(&p, r.d, r.np, r.x, lost, nlost) < 0)
		return lost_error(fs, &r, lost, nlost, copy);
	return rebuild(fs, &r, &p, buf);
}

/* [logical, +len) inside chunk @c, way @copy (< its count). */
static int read_in_chunk(struct btrfsimg_fs *fs, const struct bi_chunk *c, uint64_t logical,
			 uint8_t *buf, size_t len, int copy)
{
	bool raid56 = bi_chunk_profile(c) & RAID56;
	while (len) {
		struct bi_phys ph;
		map_off(c, logical - c->logical, raid56 ? 0 : (uint32_t)copy, &ph);
		size_t n = len < ph.len ? len : (size_t)ph.len;
		int rc = raid56 ? read_raid56(fs, c, logical, buf, n, copy)
				: read_stripe(fs, c, &ph, buf, n);
		if (rc < 0)
			return rc;
		buf += n;
		len -= n;
		logical += n;
	}
	return 0;
}

static int unmapped(struct btrfsimg_fs *fs, uint64_t logical, size_t len)
{
	return bi_err(fs, -EIO, "logical %" PRIu64 " is not in any chunk (reading %zu bytes)",
		      logical, len);
}

bool bi_copy_missing(struct btrfsimg_fs *fs, uint64_t logical, int copy)
{
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
	if (!inside(c, logical) || (bi_chunk_profile(c) & RAID56) || copy < 0 || copy >= mirrors(c))
		return false;
	struct bi_phys ph;
	map_off(c, logical - c->logical, (uint32_t)copy, &ph);
	return stripe_dev(fs, c, ph.stripe) == NULL;
}

void bi_prefetch(struct btrfsimg_fs *fs, uint64_t logical, uint64_t len)
{
	while (len) {
		const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
		if (!inside(c, logical) || (bi_chunk_profile(c) & RAID56))
			return;
		struct bi_phys ph; /* one stripe's piece: RAID0/10 split a run */
		map_off(c, logical - c->logical, 0, &ph);
		uint64_t n = len < ph.len ? len : ph.len;
		const struct bi_dev *d = stripe_dev(fs, c, ph.stripe);
		if (d)
			bi_dev_prefetch(d, ph.physical, n);
		logical += n;
		len -= n;
	}
}

int bi_num_copies(struct btrfsimg_fs *fs, uint64_t logical)
{
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
	return c ? bi_chunk_num_copies(c) : 1;
}

int bi_read_copy(struct btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len, int copy)
{
	uint8_t *p = buf;
	bool first = true;
	while (len) {
		const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
		if (!c)
			return unmapped(fs, logical, len);
		int ways = bi_chunk_num_copies(c);
		if (copy < 0 || (first && copy >= ways))
			return bi_err(fs, -EINVAL, "logical %" PRIu64 " has %d copies, not copy %d",
				      logical, ways, copy);
		uint64_t left = c->logical + c->length - logical;
		size_t n = len < left ? len : (size_t)left;
		int rc = read_in_chunk(fs, c, logical, p, n, copy % ways);
		if (rc < 0)
			return rc;
		p += n;
		len -= n;
		logical += n;
		first = false;
	}
	return 0;
}

int btrfsimg_read_logical(btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len)
{
	if (!fs || (!buf && len))
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	uint8_t *p = buf;
	while (len) {
		const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
		if (!c)
			return unmapped(fs, logical, len);
		uint64_t left = c->logical + c->length - logical;
		size_t n = len < left ? len : (size_t)left;
		int rc = -EIO, ways = bi_chunk_num_copies(c);
		for (int copy = 0; copy < ways && rc < 0; copy++)
			rc = read_in_chunk(fs, c, logical, p, n, copy);
		if (rc < 0)
			return rc;
		p += n;
		len -= n;
		logical += n;
	}
	return 0;
}

/* ------------------------------------------------------------- loading */

int bi_chunk_add(struct btrfsimg_fs *fs, const uint8_t *item, size_t len, uint64_t logical,
		 const char *where)
{
	char why[320];
	struct bi_chunk *c;
	int rc = bi_chunk_parse(item, len, logical, fs->sectorsize, &c, why, sizeof(why));
	if (rc == 0 && !(fs->sb.info.incompat_flags & INCOMPAT_MIXED_GROUPS) &&
	    (c->type & BG_DATA) && (c->type & BG_METADATA)) {
		snprintf(why, sizeof(why),
			 "chunk at logical %" PRIu64
			 ": data and metadata in one chunk (type 0x%" PRIx64 ") "
			 "without the mixed-groups feature",
			 logical, c->type);
		free(c);
		rc = -EUCLEAN;
	}
	if (rc == 0)
		rc = bi_chunk_map_insert(fs->chunks, c, why, sizeof(why));
	if (rc == 1)
		bi_damage(fs,
			  "%s: chunk at logical %" PRIu64 " differs from the copy already loaded "
			  "(same range); keeping the first, as the kernel does",
			  where, logical);
	if (rc == -ENOMEM)
		return bi_err(fs, rc, "out of memory loading chunks");
	if (rc < 0)
		return bi_err(fs, rc, "corrupt %s, %s", where, why);
	return 0;
}

#define SYS_ERR(...) bi_err(fs, -EUCLEAN, "corrupt sys_chunk_array: " __VA_ARGS__)

/* One {disk key, chunk item} entry at *pos; the kernel's checks
 * (btrfs_read_sys_array). */
static int sys_entry(struct btrfsimg_fs *fs, struct bi_cur *cur, uint32_t *pos)
{
	uint32_t at = *pos, size = (uint32_t)cur->len;
	if (!bi_fits(size, at, KEY_SIZE + CHUNK_SIZE + STRIPE_SIZE))
		return SYS_ERR("entry at offset %u: too short, have %u bytes expect >= %u", at,
			       size - at, KEY_SIZE + CHUNK_SIZE + STRIPE_SIZE);
	uint64_t objectid = bi_u64(cur, at), logical = bi_u64(cur, at + 9);
	uint8_t type = bi_u8(cur, at + 8);
	if (type != KT_CHUNK_ITEM)
		return SYS_ERR("entry at offset %u: bad key type, have %u expect %u", at, type,
			       KT_CHUNK_ITEM);
	at += KEY_SIZE;
	uint16_t n = bi_u16(cur, at + CHUNK_NUM_STRIPES);
	uint64_t ctype = bi_u64(cur, at + CHUNK_TYPE);
	if (n == 0)
		return SYS_ERR("chunk at offset %u: bad num_stripes, have 0 expect >= 1", at);
	if (!(ctype & BG_SYSTEM))
		return SYS_ERR("chunk at offset %u (logical %" PRIu64
			       "): not a system chunk, type 0x%" PRIx64,
			       at, logical, ctype);
	uint32_t len = CHUNK_SIZE + (uint32_t)n * STRIPE_SIZE;
	if (!bi_fits(size, at, len))
		return SYS_ERR("chunk at offset %u: %u stripes need %u bytes, have %u", at, n, len,
			       size - at);
	if (objectid != OBJ_FIRST_CHUNK_TREE)
		bi_damage(fs,
			  "sys_chunk_array: key at offset %u has objectid %" PRIu64
			  ", expect %" PRIu64,
			  *pos, objectid, (uint64_t)OBJ_FIRST_CHUNK_TREE);
	char where[64];
	snprintf(where, sizeof(where), "sys_chunk_array offset %u", at);
	*pos = at + len;
	return bi_chunk_add(fs, cur->p + at, len, logical, where);
}

int bi_chunk_load_sys_array(struct btrfsimg_fs *fs)
{
	uint32_t size = fs->sb.sys_array_size, pos = 0;
	if (size > SB_SYS_CHUNK_ARRAY_MAX)
		return SYS_ERR("size %u, expect <= %u", size, SB_SYS_CHUNK_ARRAY_MAX);
	if (size == 0)
		return SYS_ERR("empty: no chunk maps the chunk tree");
	struct bi_cur cur = bi_cur_make(fs->sb.raw + SB_SYS_CHUNK_ARRAY, size);
	while (pos < size) {
		int rc = sys_entry(fs, &cur, &pos);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Whether every byte of @c can still be read with the devices present. */
static bool readable(struct btrfsimg_fs *fs, const struct bi_chunk *c, uint32_t nmissing)
{
	uint64_t p = bi_chunk_profile(c);
	if (p & MIRRORED)
		return nmissing < c->num_stripes;
	if (p & RAID56)
		return nmissing <= bi_chunk_nparity(c);
	if (p != BG_RAID10)
		return nmissing == 0;
	for (uint32_t i = 0; i + 1 < c->num_stripes; i += 2)
		if (!stripe_dev(fs, c, i) && !stripe_dev(fs, c, i + 1))
			return false;
	return true;
}

static void report_degraded(struct btrfsimg_fs *fs, const struct bi_chunk *c)
{
	uint32_t nmissing = 0, first = 0;
	for (uint32_t i = c->num_stripes; i-- > 0;)
		if (!stripe_dev(fs, c, i)) {
			nmissing++;
			first = i;
		}
	if (!nmissing)
		return;
	fs->chunks->degraded++;
	bool ok = readable(fs, c, nmissing);
	if (!ok && !fs->chunks->unreadable++)
		fs->chunks->first_unreadable = c;
	const struct bi_stripe *s = &c->stripes[first];
	char uuid[37];
	bi_uuid_str(s->dev_uuid, uuid);
	bi_damage(fs,
		  "chunk [%" PRIu64 ", %" PRIu64
		  ") %s: %u of %u stripes on missing devices (first: stripe %u, "
		  "devid %" PRIu64 ", dev_uuid %s)%s",
		  c->logical, (c->logical + c->length), bi_chunk_profile_name(c->type), nmissing,
		  c->num_stripes, first, s->devid, uuid,
		  ok ? "; still readable from the other stripes" : "; parts of it cannot be read");
}

/* Devices a chunk of this profile can lose and still be read whole (raid10
 * may survive more, one per mirror pair). */
static unsigned tolerated(const struct bi_chunk *c)
{
	uint64_t p = bi_chunk_profile(c);
	if (p & (BG_RAID1 | BG_RAID1C3 | BG_RAID1C4))
		return c->num_stripes - 1u;
	if (p & (BG_RAID10 | BG_RAID5))
		return 1;
	return p & BG_RAID6 ? 2 : 0;
}

int bi_chunk_map_missing_summary(const struct btrfsimg_fs *fs, char *buf, size_t len)
{
	const struct bi_chunk_map *m = fs->chunks;
	if (!fs->missing_devs)
		return 0;
	if (!m || !m->unreadable)
		return snprintf(buf, len, "%" PRIu64 " of %" PRIu64 " devices missing",
				fs->missing_devs, fs->sb.info.num_devices);
	const struct bi_chunk *c = m->first_unreadable;
	return snprintf(buf, len,
			"%" PRIu64 " of %" PRIu64 " devices missing; %s tolerates %u, so %" PRIu64
			" of %zu chunks cannot be read whole",
			fs->missing_devs, fs->sb.info.num_devices, bi_chunk_profile_name(c->type),
			tolerated(c), m->unreadable, m->n);
}

void bi_chunk_map_report_degraded(struct btrfsimg_fs *fs)
{
	for (size_t i = 0; i < fs->chunks->n; i++)
		report_degraded(fs, fs->chunks->v[i]);
	char summary[256];
	if (fs->chunks->unreadable && bi_chunk_map_missing_summary(fs, summary, sizeof(summary)))
		bi_damage(fs, "%s", summary);
}

/* data first, then metadata, then system; mixed groups with data */
static int type_rank(uint64_t t)
{
	return (t & BG_DATA) ? 0 : (t & BG_METADATA) ? 1 : 2;
}

static int use_cmp(const void *a, const void *b)
{
	const struct btrfsimg_profile_use *x = a, *y = b;
	int rx = type_rank(x->type), ry = type_rank(y->type);
	if (rx != ry)
		return rx - ry;
	return strcmp(x->profile, y->profile);
}

/* At most every type combination (data, metadata, system, mixed) times
 * every profile: a small fixed table. */
#define MAX_USES 64

/* As btrfs-progs btrfs_group_type_str() (btrfs filesystem df): a mixed
 * group, both bits set, is "Data+Metadata"; lower case here. */
const char *btrfsimg_bg_type_name(unsigned type)
{
	if ((type & BTRFSIMG_BG_DATA) && (type & BTRFSIMG_BG_METADATA))
		return "data+metadata";
	if (type & BTRFSIMG_BG_DATA)
		return "data";
	if (type & BTRFSIMG_BG_METADATA)
		return "metadata";
	return type & BTRFSIMG_BG_SYSTEM ? "system" : "other";
}

int btrfsimg_profiles(btrfsimg_fs *fs, struct btrfsimg_profile_use *out, size_t max, size_t *n)
{
	if (!fs || !n || (max && !out))
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct btrfsimg_profile_use use[MAX_USES];
	size_t k = 0;
	for (size_t i = 0; i < fs->chunks->n; i++) {
		const struct bi_chunk *c = fs->chunks->v[i];
		unsigned type = (unsigned)(c->type & BG_TYPE_MASK);
		const char *name = bi_chunk_profile_name(c->type);
		size_t j = 0;
		while (j < k && (use[j].type != type || strcmp(use[j].profile, name) != 0))
			j++;
		if (j == k) {
			if (k == MAX_USES)
				continue;
			use[k++] = (struct btrfsimg_profile_use){ type, name, 0, 0, tolerated(c) };
		}
		use[j].chunks++;
		use[j].bytes += c->length;
		if (tolerated(c) < use[j].tolerates)
			use[j].tolerates = tolerated(c);
	}
	qsort(use, k, sizeof(use[0]), use_cmp);
	*n = k;
	memcpy(out, use, (k < max ? k : max) * sizeof(use[0]));
	return 0;
}
