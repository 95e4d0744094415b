/* SPDX-License-Identifier: MIT */
/*
 * The chunk map: logical addresses to device offsets.
 *
 * Chunks come from the superblock's sys_chunk_array (enough to read the
 * chunk tree) and then from the chunk tree. Each is checked when decoded
 * (bi_chunk_parse) so the mapping arithmetic never meets an impossible
 * layout. Profiles, with off = logical - chunk start, SL = stripe_len,
 * nr = off / SL, so = off % SL, n = num_stripes:
 *
 *   SINGLE DUP RAID1 RAID1C3 RAID1C4   copy k: stripe[k].offset + off
 *   RAID0    stripe[nr % n].offset + (nr / n) * SL + so
 *   RAID10   f = n / sub; stripe[(nr % f) * sub + k] at row nr / f
 *   RAID5/6  d = n - 1 (or n - 2) data stripes per full stripe:
 *            full = nr / d, di = nr % d; position p of the full stripe
 *            (data 0..d-1, P = d, Q = d + 1) lives on device index
 *            (full + p) % n at stripe[..].offset + full * SL + so
 *
 *      RAID5, n = 3:  full 0: D0 D1 P     full 1: P  D0 D1    full 2: D1 P  D0
 *
 * Ways to read RAID5/6 data ("copies"): 0 reads the data stripe (rebuilt
 * when its device is missing), 1 rebuilds it from P and the other data,
 * 2 (RAID6) from Q, and 3.. (RAID6) from P and Q together, treating one
 * more data stripe as bad as well: so any two bad stripes are survivable.
 * Q follows the Linux RAID-6 definition: GF(2^8) with polynomial 0x11d,
 * Q = sum g^i * D_i with g = 2 and i the data position. The field
 * arithmetic is ISA-L's (gf_mul, gf_inv).
 */
#include <isa-l/erasure_code.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define STRIPE_LEN 65536u	/* the only stripe length the kernel accepts */
#define STRIPES_MAX 256u	/* bounds the per-row rebuild buffers */

struct bi_chunk_map {
	struct bi_chunk **v;
	size_t n, cap;
};

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -EUCLEAN)

static int popcount64(uint64_t v)
{
	return __builtin_popcountll(v);
}

/* Stripes a profile needs: *min and *max (0 = no max), *exact_even. */
static int profile_stripes(uint64_t profile, uint16_t n, uint16_t sub, char *why, size_t whylen)
{
	switch (profile) {
	case 0:
		return n == 1 ? 0 : WHY("single profile with %u stripes, expect 1", n);
	case BG_DUP:
	case BG_RAID1:
		return n == 2 ? 0 : WHY("dup/raid1 profile with %u stripes, expect 2", n);
	case BG_RAID1C3:
		return n == 3 ? 0 : WHY("raid1c3 profile with %u stripes, expect 3", n);
	case BG_RAID1C4:
		return n == 4 ? 0 : WHY("raid1c4 profile with %u stripes, expect 4", n);
	case BG_RAID0:
		return n >= 1 ? 0 : WHY("raid0 profile with 0 stripes");
	case BG_RAID10:
		if (sub != 2 || n < 2 || n % 2)
			return WHY("raid10 profile with %u stripes, sub_stripes %u, expect an even count >= 2 and 2",
				   n, sub);
		return 0;
	case BG_RAID5:
		return n >= 2 ? 0 : WHY("raid5 profile with %u stripes, expect >= 2", n);
	case BG_RAID6:
		return n >= 3 ? 0 : WHY("raid6 profile with %u stripes, expect >= 3", n);
	default:
		return WHY("bad profile bits 0x%llx", (unsigned long long)profile);
	}
}

/* Data stripes per full stripe (the divisor of the chunk length). */
static uint32_t data_stripes(const struct bi_chunk *c)
{
	uint64_t p = c->type & BG_PROFILE_MASK;
	if (p == BG_RAID0)
		return c->num_stripes;
	if (p == BG_RAID10)
		return c->num_stripes / c->sub_stripes;
	if (p == BG_RAID5)
		return c->num_stripes - 1u;
	if (p == BG_RAID6)
		return c->num_stripes - 2u;
	return 1;
}

static int check_chunk(const struct bi_chunk *c, uint32_t sectorsize, char *why, size_t whylen)
{
	uint64_t profile = c->type & BG_PROFILE_MASK;
	if (c->length == 0 || c->length % sectorsize)
		return WHY("length %llu not a nonzero multiple of sectorsize %u",
			   (unsigned long long)c->length, sectorsize);
	if (c->logical % sectorsize)
		return WHY("start not aligned to sectorsize %u", sectorsize);
	uint64_t end;
	if (!bi_add_ok(c->logical, c->length, &end))
		return WHY("start + length overflows");
	if (c->stripe_len != STRIPE_LEN)
		return WHY("bad stripe_len, have %llu expect %u", (unsigned long long)c->stripe_len,
			   STRIPE_LEN);
	if (!(c->type & BG_TYPE_MASK))
		return WHY("type 0x%llx has none of data/system/metadata",
			   (unsigned long long)c->type);
	if (c->type & ~(BG_TYPE_MASK | BG_PROFILE_MASK))
		return WHY("unknown type bits 0x%llx",
			   (unsigned long long)(c->type & ~(BG_TYPE_MASK | BG_PROFILE_MASK)));
	if (popcount64(profile) > 1)
		return WHY("several profile bits 0x%llx", (unsigned long long)profile);
	int rc = profile_stripes(profile, c->num_stripes, c->sub_stripes, why, whylen);
	if (rc)
		return rc;
	uint32_t d = data_stripes(c);
	if (profile & (BG_RAID0 | BG_RAID10 | BG_RAID5 | BG_RAID6)) {
		if (c->length % ((uint64_t)d * STRIPE_LEN))
			return WHY("length %llu not a multiple of %u data stripes of %u",
				   (unsigned long long)c->length, d, STRIPE_LEN);
	}
	uint64_t per_dev = c->length / d, tmp;
	for (uint16_t i = 0; i < c->num_stripes; i++)
		if (!bi_add_ok(c->stripes[i].offset, per_dev, &tmp))
			return WHY("stripe %u: offset %llu + %llu overflows", i,
				   (unsigned long long)c->stripes[i].offset,
				   (unsigned long long)per_dev);
	return 0;
}

int bi_chunk_parse(const uint8_t *item, size_t len, uint64_t logical, uint32_t sectorsize,
		   struct bi_chunk **out, char *why, size_t whylen)
{
	struct bi_cur c = bi_cur_make(item, len);
	uint16_t n = bi_u16(&c, CHUNK_NUM_STRIPES);
	if (c.bad)
		return WHY("chunk item at logical %llu: size %zu, expect >= %u",
			   (unsigned long long)logical, len, CHUNK_SIZE);
	if (n == 0 || n > STRIPES_MAX)
		return WHY("chunk at logical %llu: num_stripes %u, expect 1..%u",
			   (unsigned long long)logical, n, STRIPES_MAX);
	if (len != CHUNK_SIZE + (size_t)n * STRIPE_SIZE)
		return WHY("chunk at logical %llu: item size %zu, expect %zu for %u stripes",
			   (unsigned long long)logical, len, CHUNK_SIZE + (size_t)n * STRIPE_SIZE, n);
	struct bi_chunk *ch = calloc(1, sizeof(*ch) + n * sizeof(struct bi_stripe));
	if (!ch)
		return -ENOMEM;
	ch->logical = logical;
	ch->length = bi_u64(&c, CHUNK_LENGTH);
	ch->stripe_len = bi_u64(&c, CHUNK_STRIPE_LEN);
	ch->type = bi_u64(&c, CHUNK_TYPE);
	ch->num_stripes = n;
	ch->sub_stripes = bi_u16(&c, CHUNK_SUB_STRIPES);
	for (uint16_t i = 0; i < n; i++) {
		size_t at = CHUNK_SIZE + (size_t)i * STRIPE_SIZE;
		ch->stripes[i].devid = bi_u64(&c, at + STRIPE_DEVID);
		ch->stripes[i].offset = bi_u64(&c, at + STRIPE_OFFSET);
		bi_copy(&c, at + STRIPE_DEV_UUID, ch->stripes[i].dev_uuid, 16);
	}
	char inner[200];
	int rc = check_chunk(ch, sectorsize, inner, sizeof(inner));
	if (rc) {
		free(ch);
		return WHY("chunk at logical %llu: %s", (unsigned long long)logical, inner);
	}
	*out = ch;
	return 0;
}

/* ------------------------------------------------------------------ map */

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

/* First chunk whose start is > logical. */
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

int bi_chunk_map_insert(struct bi_chunk_map *m, struct bi_chunk *c, char *why, size_t whylen)
{
	size_t at = upper(m, c->logical);
	const struct bi_chunk *prev = at ? m->v[at - 1] : NULL;
	const struct bi_chunk *next = at < m->n ? m->v[at] : NULL;
	if (prev && prev->logical == c->logical && prev->length == c->length) {
		free(c); /* the sys array and the chunk tree repeat each other */
		return 0;
	}
	if ((prev && prev->logical + prev->length > c->logical) ||
	    (next && c->logical + c->length > next->logical)) {
		const struct bi_chunk *o = (prev && prev->logical + prev->length > c->logical) ? prev
											  : next;
		int rc = WHY("chunk [%llu, +%llu) overlaps chunk [%llu, +%llu)",
			     (unsigned long long)c->logical, (unsigned long long)c->length,
			     (unsigned long long)o->logical, (unsigned long long)o->length);
		free(c);
		return rc;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		void *v = realloc(m->v, cap * sizeof(*m->v));
		if (!v) {
			free(c);
			return -ENOMEM;
		}
		m->v = v;
		m->cap = cap;
	}
	memmove(m->v + at + 1, m->v + at, (m->n - at) * sizeof(*m->v));
	m->v[at] = c;
	m->n++;
	return 0;
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

/* -------------------------------------------------------------- mapping */

static bool is_raid56(const struct bi_chunk *c)
{
	return c->type & (BG_RAID5 | BG_RAID6);
}

static uint32_t parity_stripes(const struct bi_chunk *c)
{
	return (c->type & BG_RAID6) ? 2 : (c->type & BG_RAID5) ? 1 : 0;
}

int bi_chunk_num_copies(const struct bi_chunk *c)
{
	uint64_t p = c->type & BG_PROFILE_MASK;
	if (p == BG_DUP || p == BG_RAID1 || p == BG_RAID1C3 || p == BG_RAID1C4)
		return c->num_stripes;
	if (p == BG_RAID10)
		return c->sub_stripes;
	if (p == BG_RAID5)
		return 2;
	if (p == BG_RAID6)
		return 3 + (int)data_stripes(c) - 1;
	return 1;
}

/* Device index holding position @pos (data 0..d-1, P, Q) of full stripe @full. */
static uint32_t raid56_dev(const struct bi_chunk *c, uint64_t full, uint32_t pos)
{
	return (uint32_t)((full + pos) % c->num_stripes);
}

int bi_chunk_map_phys(const struct bi_chunk *c, uint64_t logical, int copy,
		      struct bi_phys *out)
{
	if (logical < c->logical || logical - c->logical >= c->length || copy < 0)
		return -EINVAL;
	uint64_t off = logical - c->logical, sl = c->stripe_len;
	uint64_t nr = off / sl, so = off % sl;
	uint64_t p = c->type & BG_PROFILE_MASK;
	uint32_t idx;
	uint64_t row;
	switch (p) {
	case 0: case BG_DUP: case BG_RAID1: case BG_RAID1C3: case BG_RAID1C4:
		if (copy >= c->num_stripes)
			return -EINVAL;
		*out = (struct bi_phys){ c->stripes[copy].devid, c->stripes[copy].offset + off,
					 c->length - off };
		return 0;
	case BG_RAID0:
		if (copy)
			return -EINVAL;
		idx = (uint32_t)(nr % c->num_stripes);
		row = nr / c->num_stripes;
		break;
	case BG_RAID10: {
		uint32_t f = c->num_stripes / c->sub_stripes;
		if (copy >= c->sub_stripes)
			return -EINVAL;
		idx = (uint32_t)(nr % f) * c->sub_stripes + (uint32_t)copy;
		row = nr / f;
		break;
	}
	default: { /* RAID5/6: the data stripe itself, whatever the copy */
		uint32_t d = data_stripes(c);
		row = nr / d;
		idx = raid56_dev(c, row, (uint32_t)(nr % d));
		break;
	}
	}
	*out = (struct bi_phys){ c->stripes[idx].devid, c->stripes[idx].offset + row * sl + so,
				 sl - so };
	return 0;
}

/* ---------------------------------------------------------------- reads */

static int read_stripe(struct btrfsimg_fs *fs, uint64_t devid, uint64_t phys, void *buf,
		       size_t len)
{
	struct bi_dev *d = bi_dev_by_id(fs, devid);
	if (!d)
		return bi_err(fs, -EIO, "devid %llu is missing (needed at physical %llu)",
			      (unsigned long long)devid, (unsigned long long)phys);
	return bi_dev_read(fs, d, phys, buf, len);
}

/* GF(2^8) helpers over ISA-L's field (polynomial 0x11d). */
static uint8_t gf_pow2(uint32_t e)
{
	uint8_t r = 1;
	while (e--)
		r = gf_mul(r, 2);
	return r;
}

static void gf_scale(uint8_t *dst, const uint8_t *src, size_t len, uint8_t c)
{
	uint8_t t[256];
	for (int i = 0; i < 256; i++)
		t[i] = gf_mul((unsigned char)i, c);
	for (size_t i = 0; i < len; i++)
		dst[i] = t[src[i]];
}

static void xor_into(uint8_t *dst, const uint8_t *src, size_t len)
{
	for (size_t i = 0; i < len; i++)
		dst[i] ^= src[i];
}

struct row {
	const struct bi_chunk *c;
	uint64_t full, so;	/* full stripe number, offset inside the stripe */
	uint32_t d;		/* data stripes */
	size_t len;
};

static bool pos_missing(struct btrfsimg_fs *fs, const struct row *r, uint32_t pos)
{
	return !bi_dev_by_id(fs, r->c->stripes[raid56_dev(r->c, r->full, pos)].devid);
}

static int read_pos(struct btrfsimg_fs *fs, const struct row *r, uint32_t pos, uint8_t *buf)
{
	const struct bi_stripe *s = &r->c->stripes[raid56_dev(r->c, r->full, pos)];
	return read_stripe(fs, s->devid, s->offset + r->full * r->c->stripe_len + r->so, buf,
			   r->len);
}

/*
 * Rebuild data position @x into @out. @bad is a bitmap of positions not to
 * use (x is in it); use_p/use_q say which parities may be used. Handles
 * one bad data stripe with P or with Q, and two with P and Q.
 */
static int rebuild(struct btrfsimg_fs *fs, const struct row *r, uint32_t x, const bool *bad,
		   bool use_p, bool use_q, uint8_t *out)
{
	uint32_t d = r->d, y = UINT32_MAX;
	for (uint32_t i = 0; i < d; i++)
		if (i != x && bad[i]) {
			if (y != UINT32_MAX)
				return bi_err(fs, -EIO, "raid%s: more than two stripes lost at row %llu",
					      parity_stripes(r->c) == 2 ? "6" : "5",
					      (unsigned long long)r->full);
			y = i;
		}
	use_p = use_p && !bad[d];
	use_q = use_q && parity_stripes(r->c) == 2 && !bad[d + 1];
	if (!use_p && !use_q)
		return bi_err(fs, -EIO, "raid: no parity usable at row %llu", (unsigned long long)r->full);
	if (y != UINT32_MAX && !(use_p && use_q))
		return bi_err(fs, -EIO, "raid: two stripes lost at row %llu and a parity too",
			      (unsigned long long)r->full);
	uint8_t *tmp = malloc(r->len), *pacc = calloc(1, r->len), *qacc = calloc(1, r->len);
	int rc = (tmp && pacc && qacc) ? 0 : bi_err(fs, -ENOMEM, "out of memory rebuilding");
	/* pacc = P ^ sum(other data); qacc = Q ^ sum(g^i * other data) */
	for (uint32_t i = 0; rc == 0 && i < d; i++) {
		if (i == x || i == y)
			continue;
		rc = read_pos(fs, r, i, tmp);
		if (rc == 0 && use_p)
			xor_into(pacc, tmp, r->len);
		if (rc == 0 && use_q) {
			gf_scale(tmp, tmp, r->len, gf_pow2(i));
			xor_into(qacc, tmp, r->len);
		}
	}
	if (rc == 0 && use_p && (rc = read_pos(fs, r, d, tmp)) == 0)
		xor_into(pacc, tmp, r->len);
	if (rc == 0 && use_q && (rc = read_pos(fs, r, d + 1, tmp)) == 0)
		xor_into(qacc, tmp, r->len);
	if (rc == 0 && y == UINT32_MAX && use_p) {
		memcpy(out, pacc, r->len); /* D_x = P ^ others */
	} else if (rc == 0 && y == UINT32_MAX) {
		gf_scale(out, qacc, r->len, gf_inv(gf_pow2(x))); /* D_x = Q' / g^x */
	} else if (rc == 0) {
		/* P' = Dx ^ Dy, Q' = gx Dx ^ gy Dy  =>  Dx = (Q' ^ gy P') / (gx ^ gy) */
		uint8_t gx = gf_pow2(x), gy = gf_pow2(y);
		gf_scale(tmp, pacc, r->len, gy);
		xor_into(tmp, qacc, r->len);
		gf_scale(out, tmp, r->len, gf_inv(gx ^ gy));
	}
	free(tmp);
	free(pacc);
	free(qacc);
	return rc;
}

/* One piece of a RAID5/6 read, within one stripe. */
static int read_raid56(struct btrfsimg_fs *fs, const struct bi_chunk *c, uint64_t logical,
		       uint8_t *buf, size_t len, int copy)
{
	uint64_t off = logical - c->logical, nr = off / c->stripe_len;
	struct row r = { c, 0, off % c->stripe_len, data_stripes(c), len };
	r.full = nr / r.d;
	uint32_t x = (uint32_t)(nr % r.d);
	bool bad[STRIPES_MAX] = { false };
	for (uint32_t p = 0; p < r.d + parity_stripes(c); p++)
		bad[p] = pos_missing(fs, &r, p);
	if (copy == 0 && !bad[x])
		return read_pos(fs, &r, x, buf);
	bad[x] = true;
	if (copy == 0)
		return rebuild(fs, &r, x, bad, true, true, buf);
	if (copy == 1)
		return rebuild(fs, &r, x, bad, true, false, buf);
	if (copy == 2)
		return rebuild(fs, &r, x, bad, false, true, buf);
	/* copy 3..: also distrust the (copy-3)th other data stripe */
	uint32_t k = (uint32_t)copy - 3, y = k < x ? k : k + 1;
	if (y >= r.d)
		return bi_err(fs, -EINVAL, "no copy %d of logical %llu", copy,
			      (unsigned long long)logical);
	bad[y] = true;
	return rebuild(fs, &r, x, bad, true, true, buf);
}

int bi_num_copies(struct btrfsimg_fs *fs, uint64_t logical)
{
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
	return c ? bi_chunk_num_copies(c) : 1;
}

int bi_read_copy(struct btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len, int copy)
{
	uint8_t *p = buf;
	while (len) {
		const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, logical);
		if (!c)
			return bi_err(fs, -EIO, "logical %llu is not in any chunk",
				      (unsigned long long)logical);
		if (copy >= bi_chunk_num_copies(c))
			return bi_err(fs, -EINVAL, "logical %llu has no copy %d",
				      (unsigned long long)logical, copy);
		struct bi_phys ph;
		bi_chunk_map_phys(c, logical, is_raid56(c) ? 0 : copy, &ph);
		size_t n = len < ph.len ? len : (size_t)ph.len;
		int rc = is_raid56(c) ? read_raid56(fs, c, logical, p, n, copy)
				      : read_stripe(fs, ph.devid, ph.physical, p, n);
		if (rc < 0)
			return rc;
		p += n;
		len -= n;
		logical += n;
	}
	return 0;
}

int btrfsimg_read_logical(btrfsimg_fs *fs, uint64_t logical, void *buf, size_t len)
{
	if (!fs || (!buf && len))
		return -EINVAL;
	if (!fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_read_logical: filesystem not open");
	int n = bi_num_copies(fs, logical), rc = -EIO;
	for (int copy = 0; copy < n; copy++)
		if ((rc = bi_read_copy(fs, logical, buf, len, copy)) == 0)
			return 0;
	return rc;
}

/* ---------------------------------------------------------------- load */

static int add_chunk(struct btrfsimg_fs *fs, const uint8_t *item, size_t len, uint64_t logical,
		     const char *where)
{
	char why[256];
	struct bi_chunk *c;
	int rc = bi_chunk_parse(item, len, logical, fs->sectorsize, &c, why, sizeof(why));
	if (rc == 0)
		rc = bi_chunk_map_insert(fs->chunks, c, why, sizeof(why));
	if (rc == -ENOMEM)
		return bi_err(fs, rc, "out of memory loading chunks");
	if (rc < 0)
		return bi_err(fs, rc, "corrupt %s: %s", where, why);
	return 0;
}

int bi_chunk_load_sys_array(struct btrfsimg_fs *fs)
{
	const uint8_t *a = fs->sb.raw + SB_SYS_CHUNK_ARRAY;
	uint32_t size = fs->sb.sys_array_size, pos = 0;
	while (pos < size) {
		if (size - pos < KEY_SIZE + CHUNK_SIZE)
			return bi_err(fs, -EUCLEAN,
				      "corrupt sys_chunk_array: entry at offset %u: %u bytes left, expect >= %u",
				      pos, size - pos, KEY_SIZE + CHUNK_SIZE);
		bi_key k;
		bi_key_read(a + pos, &k);
		if (k.type != KT_CHUNK_ITEM)
			return bi_err(fs, -EUCLEAN,
				      "corrupt sys_chunk_array: entry at offset %u: key type %u, expect %u",
				      pos, k.type, KT_CHUNK_ITEM);
		pos += KEY_SIZE;
		uint32_t n = bi_le16(a + pos + CHUNK_NUM_STRIPES);
		uint32_t len = CHUNK_SIZE + n * STRIPE_SIZE;
		if (n == 0 || len > size - pos)
			return bi_err(fs, -EUCLEAN,
				      "corrupt sys_chunk_array: chunk at offset %u: %u stripes need %u bytes, %u left",
				      pos, n, len, size - pos);
		int rc = add_chunk(fs, a + pos, len, k.offset, "sys_chunk_array");
		if (rc < 0)
			return rc;
		pos += len;
	}
	return 0;
}

/* Report chunks that cannot be read whole because devices are missing. */
static void report_degraded(struct btrfsimg_fs *fs)
{
	for (size_t i = 0; i < bi_chunk_map_count(fs->chunks); i++) {
		const struct bi_chunk *c = bi_chunk_map_at(fs->chunks, i);
		uint32_t missing = 0;
		for (uint16_t s = 0; s < c->num_stripes; s++)
			missing += !bi_dev_by_id(fs, c->stripes[s].devid);
		if (!missing)
			continue;
		uint64_t p = c->type & BG_PROFILE_MASK;
		uint32_t tolerated = (p == BG_RAID1 || p == BG_DUP) ? 1
				     : p == BG_RAID1C3 ? 2 : p == BG_RAID1C4 ? 3
				     : p == BG_RAID5 ? 1 : p == BG_RAID6 ? 2 : p == BG_RAID10 ? 1 : 0;
		if (missing > tolerated)
			bi_damage(fs, "chunk [%llu, +%llu): %u of %u stripes on missing devices: parts cannot be read",
				  (unsigned long long)c->logical, (unsigned long long)c->length,
				  missing, c->num_stripes);
	}
}

int bi_chunk_load_tree(struct btrfsimg_fs *fs)
{
	bi_key min = { OBJ_FIRST_CHUNK_TREE, KT_CHUNK_ITEM, 0 };
	bi_key max = { OBJ_FIRST_CHUNK_TREE, KT_CHUNK_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, &fs->chunk_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		char where[96];
		snprintf(where, sizeof(where), "chunk tree block %llu slot %u",
			 (unsigned long long)item.block, item.slot);
		rc = add_chunk(fs, item.data, item.size, item.key.offset, where);
	}
	bi_iter_end(&it);
	if (rc == 0 && fs->missing_devs)
		report_degraded(fs);
	return rc;
}
