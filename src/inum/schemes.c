/* SPDX-License-Identifier: MIT */
/*
 * Inode-number schemes of the 2021 proposals (none merged), as pure
 * formulas (docs/inode-numbers.md has the sources and worked vectors):
 *
 *  - inumbits=N ([PATCH 1/4]): every fs tree but 5 gets
 *      overlay = swab64(subvol) >> (64 - N)      (N = 32..64; N = 0 is off)
 *    and an inode presents objectid ^ overlay, except the one objectid
 *    equal to the overlay, which presents itself (XOR would give 0).
 *  - nfsd ino_uniquifier: swab64(subvol) for every subvolume but 5, applied
 *    with the same "unless equal" rule: the N = 64 overlay under another name.
 *
 * Byte reversal puts the subvolume id's fast-changing low bytes into the
 * high bits of the inode number, where objectids (allocated from 256 up)
 * do not reach for a long time.
 *
 * Below the formulas: the bit-range arguments built on them (how large
 * objectids and subvolume ids may grow before two inodes can present the
 * same number) and their wording, for collide.c's results.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "btrfsimg_inum.h"
#include "inum/schemes.h"

#include "base/err.h"
#include "base/ondisk.h"

uint64_t bi_swab64(uint64_t v)
{
	uint64_t r = 0;

	for (int i = 0; i < 8; i++) {
		r = r << 8 | (v & 0xff);
		v >>= 8;
	}
	return r;
}

uint64_t btrfsimg_inumbits_overlay(uint64_t subvol, unsigned inumbits)
{
	/* The patch accepts BITS_PER_LONG/2..BITS_PER_LONG; anything else
	 * (and 0, "off") means no overlay. Never shift by 64. */
	if (inumbits < 32 || inumbits > 64 || subvol == OBJ_FS_TREE)
		return 0;
	return bi_swab64(subvol) >> (64 - inumbits);
}

uint64_t btrfsimg_presented_ino(uint64_t objectid, uint64_t v)
{
	return bi_presented_ino(objectid, v);
}

uint64_t btrfsimg_uniquifier(uint64_t subvol)
{
	return subvol == OBJ_FS_TREE ? 0 : bi_swab64(subvol);
}

/*
 * nfsd (patch v2) calls btrfs's getattr, which under inumbits already
 * returns the overlaid number, and XORs ino_uniquifier on top in
 * nfsd_uniquify_ino(): two "unless equal" steps, not one with the XOR of
 * both constants. A v3 READDIR takes the number btrfs's filldir passed
 * (overlaid with the directory's overlay) and the directory's uniquifier
 * (nfs3xdr.c, svcxdr_encode_entry3_common).
 */
uint64_t btrfsimg_nfs_fileid(uint64_t subvol, uint64_t objectid, unsigned inumbits)
{
	uint64_t ino = btrfsimg_presented_ino(objectid, btrfsimg_inumbits_overlay(subvol, inumbits));
	return btrfsimg_presented_ino(ino, btrfsimg_uniquifier(subvol));
}

uint64_t btrfsimg_nfs3_d_fileid(uint64_t dir_subvol, uint64_t location_objectid,
				unsigned inumbits)
{
	return btrfsimg_nfs_fileid(dir_subvol, location_objectid, inumbits);
}

/* MOUNTED_ON_FILEID: nfsd4_encode_fattr fills it from the entry's plain
 * stat.ino; only nfsd4_get_mounted_on_ino (a crossed mount's root) got the
 * uniquifier in the patch. */
uint64_t btrfsimg_nfs4_d_fileid(uint64_t subvol, uint64_t objectid, unsigned inumbits)
{
	return btrfsimg_presented_ino(objectid, btrfsimg_inumbits_overlay(subvol, inumbits));
}

/* At most n steps: a corrupt parent loop ends as "not below". */
int btrfsimg_subvol_depth(const struct btrfsimg_subvol *v, size_t n, uint64_t mount_subvol,
			  uint64_t subvol)
{
	const struct btrfsimg_subvol *s = btrfsimg_subvol_find(v, n, subvol);
	for (int d = 0; s && (size_t)d <= n; d++) {
		if (s->id == mount_subvol)
			return d;
		if (!s->parent_id || !s->path)
			return -1;
		s = btrfsimg_subvol_find(v, n, s->parent_id);
	}
	return -1;
}

/* ------------------------------------------------------------------ */
/*
 * Bit-range arguments (used by collide.c for headroom).
 *
 * Subvolume s presents objectid a as a ^ c_s (or c_s when a == c_s). With
 * every objectid in [256, 2^k), two subvolumes on one device cannot meet if
 * c_s ^ c_t >= 2^k, i.e. k <= msb(c_s ^ c_t): then a ^ b < 2^k never equals
 * c_s ^ c_t, a == c_s presents c_s = b ^ c_t only for b >= 2^k, and two
 * exceptions need c_s == c_t. Inside one subvolume only objectid 0 could meet
 * the exception. A fixed number e (a stub's 2) meets s only through objectid
 * e ^ c_s (>= 256 needed) or objectid c_s == e.
 */

static unsigned msb64(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

static int cconst_cmp(const void *a, const void *b)
{
	const struct bi_subvol_const *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->c < y->c ? -1 : x->c > y->c;
}

static void tighten(struct bi_limit *l, unsigned bits, int kind, uint64_t a, uint64_t b,
		    uint64_t dev)
{
	if (bits < l->bits)
		*l = (struct bi_limit){ bits, kind, a, b, dev };
}

/* First entry >= (dev, c) of the sorted table. */
static size_t cconst_lower(const struct bi_subvol_const *t, size_t n, uint64_t dev, uint64_t c)
{
	struct bi_subvol_const key = { dev, c, 0 };
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cconst_cmp(&t[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Constants inside e's 256-block give objectids < 256 (no constraint) except
 * c == e; outside it, the nearest constant on each side differs lowest. */
static void fixed_limit(const struct bi_subvol_const *t, size_t n, const struct bi_subvol_const *e,
			struct bi_limit *l)
{
	size_t i = cconst_lower(t, n, e->dev, e->c & ~0xffull);

	if (i > 0 && t[i - 1].dev == e->dev)
		tighten(l, msb64(e->c ^ t[i - 1].c), BI_LIM_FIXED, e->c, t[i - 1].id, e->dev);
	for (; i < n && t[i].dev == e->dev && t[i].c <= (e->c | 0xff); i++)
		if (t[i].c == e->c && e->c >= 256)
			tighten(l, msb64(e->c), BI_LIM_FIXED, e->c, t[i].id, e->dev);
	if (i < n && t[i].dev == e->dev)
		tighten(l, msb64(e->c ^ t[i].c), BI_LIM_FIXED, e->c, t[i].id, e->dev);
}

void bi_objbits(struct bi_subvol_const *t, size_t n, struct bi_subvol_const *fx, size_t nfx,
		struct bi_limit *l)
{
	*l = (struct bi_limit){ 64, BI_LIM_NONE, 0, 0, 0 };
	if (n)
		qsort(t, n, sizeof(*t), cconst_cmp);
	/* the closest pair in sorted order has the lowest differing bit */
	for (size_t i = 1; i < n; i++) {
		if (t[i].dev != t[i - 1].dev)
			continue;
		if (t[i].c == t[i - 1].c)
			tighten(l, 0, BI_LIM_SAME, t[i - 1].id, t[i].id, t[i].dev);
		else
			tighten(l, msb64(t[i].c ^ t[i - 1].c), BI_LIM_PAIR, t[i - 1].id, t[i].id,
				t[i].dev);
	}
	for (size_t i = 0; i < nfx; i++)
		fixed_limit(t, n, &fx[i], l);
	if (nfx)
		qsort(fx, nfx, sizeof(*fx), cconst_cmp);
	for (size_t i = 1; i < nfx; i++)
		if (cconst_cmp(&fx[i], &fx[i - 1]) == 0) {
			/* a collision whatever the objectids: it overrides */
			*l = (struct bi_limit){ 0, BI_LIM_FIXED2, fx[i].c, 0, fx[i].dev };
			break;
		}
}

bool bi_next_masked(uint64_t lo, uint64_t mask, uint64_t want, uint64_t *out)
{
	if (lo == UINT64_MAX)
		return false;
	uint64_t y = lo + 1;
	if ((y & mask) == want) {
		*out = y;
		return true;
	}
	/* agree with y above bit p, set p where y has 0, fill below minimally;
	 * the lowest such p gives the smallest x */
	for (unsigned p = 0; p < 64; p++) {
		uint64_t bit = 1ull << p, above = p == 63 ? 0 : ~0ull << (p + 1);
		if ((y & bit) || ((mask & bit) && !(want & bit)))
			continue;
		if ((y & mask & above) != (want & above))
			continue;
		*out = (y & above) | bit | (want & (bit - 1));
		return true;
	}
	return false;
}

/*
 * A new subvolume x has c_x >> k0 = swab64(x) >> j, j = 64 - N + k0: it
 * depends on the id bits that swab64 moves to positions >= j (@mask).
 */
struct idbits {
	unsigned j;
	uint64_t mask;
};

static struct idbits id_bits(unsigned nbits, unsigned k0)
{
	struct idbits b = { 64 - nbits + k0, 0 };

	if (b.j < 64)
		b.mask = bi_swab64(~0ull << b.j);
	return b;
}

/* Id bits a new subvolume needs so that c_x >> k0 == @g; false if none can. */
static bool id_target(struct idbits b, uint64_t g, uint64_t *want)
{
	*want = 0;
	if (b.j >= 64)
		return g == 0;
	if (b.j > 0 && (g >> (64 - b.j)) != 0)
		return false;
	*want = bi_swab64(g << b.j);
	return true;
}

/* Keep the earliest clash: the first x > @lo with (x & mask) == want. */
static void clash_min(struct bi_clash *c, uint64_t lo, uint64_t mask, uint64_t want,
		      uint64_t with, int kind)
{
	uint64_t at;

	if (bi_next_masked(lo, mask, want, &at) && (!c->kind || at < c->at))
		*c = (struct bi_clash){ at, with, kind };
}

static uint64_t shr(uint64_t v, unsigned k)
{
	return k >= 64 ? 0 : v >> k;
}

/*
 * Between new ids: x repeats t's kept bits at t + 2^l0 at the earliest
 * (l0 = the lowest dropped bit; the bits below it are kept). For t past
 * the first t* > lo with bit l0 clear the repeat comes after t* + 2^l0, and
 * the ids in (lo, t*) share their dropped bits, so their repeats come in
 * the order of the ids: only t = lo + 1 and t* are candidates.
 */
static void new_new(struct idbits b, uint64_t lo, struct bi_clash *c)
{
	uint64_t t[2] = { lo + 1, 0 };

	if (b.mask == ~0ull || lo == UINT64_MAX)
		return;
	uint64_t l0 = 1ull << __builtin_ctzll(~b.mask);
	int nt = bi_next_masked(lo, l0, 0, &t[1]) ? 2 : 1;
	for (int k = 0; k < nt; k++)
		clash_min(c, t[k], b.mask, t[k] & b.mask, t[k], BI_CLASH_NEW);
}

struct bi_clash bi_first_clash(unsigned nbits, unsigned k0, uint64_t lo,
			       const struct bi_subvol_const *t, size_t n, const struct bi_subvol_const *fx,
			       size_t nfx)
{
	struct idbits b = id_bits(nbits, k0);
	struct bi_clash c = { 0, 0, BI_CLASH_NONE };
	uint64_t want;

	for (size_t i = 0; i < n; i++)
		if (id_target(b, shr(t[i].c, k0), &want))
			clash_min(&c, lo, b.mask, want, t[i].id, BI_CLASH_SUBVOL);
	for (size_t i = 0; i < nfx; i++)
		if (id_target(b, shr(fx[i].c, k0), &want))
			clash_min(&c, lo, b.mask, want, fx[i].c, BI_CLASH_FIXED);
	new_new(b, lo, &c);
	return c;
}

/* ------------------------------------------------------------------ */
/* The headroom of one scheme, in numbers and in words. */

struct text {
	char *buf;
	size_t len, at;
};

static void put(struct text *t, const char *fmt, ...) BI_PRINTF(2, 3);
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;

	if (t->at >= t->len)
		return;
	va_start(ap, fmt);
	int k = vsnprintf(t->buf + t->at, t->len - t->at, fmt, ap);
	va_end(ap);
	if (k > 0)
		t->at += (size_t)k;
}

static void say_limit(struct text *t, const struct bi_limit *l, int numdevs)
{
	switch (l->kind) {
	case BI_LIM_NONE:
		put(t, numdevs == BTRFSIMG_NUMDEVS_MANY ? "one device per subvolume"
							: "no two constants share a device");
		break;
	case BI_LIM_PAIR:
		put(t,
		    "constants of subvolumes %" PRIu64 " and %" PRIu64 " (device %" PRIu64
		    ") first differ at bit %u",
		    (l->a), (l->b), (l->dev), l->bits);
		break;
	case BI_LIM_SAME:
		put(t,
		    "subvolumes %" PRIu64 " and %" PRIu64 " share device %" PRIu64
		    " and constant %s",
		    (l->a), (l->b), (l->dev), "(any common objectid collides)");
		break;
	case BI_LIM_FIXED:
		put(t,
		    "extra ino %" PRIu64 " meets subvolume %" PRIu64 " (device %" PRIu64
		    ") through objectid >= 2^%u",
		    (l->a), (l->b), (l->dev), l->bits);
		break;
	default:
		put(t, "two extras present %" PRIu64 " on device %" PRIu64, (l->a), (l->dev));
	}
	if (l->bits)
		put(t, ", so objectids < 2^%u cannot collide", l->bits);
}

static void say_clash(struct text *t, const struct btrfsimg_collide_result *o,
		      const struct bi_clash *c, unsigned k0)
{
	static const char *const what[] = { "", "subvolume", "new subvolume", "extra ino" };

	if (!o->clash_subvol) {
		put(t, "; no new subvolume id can collide");
		return;
	}
	put(t,
	    "; new subvolume ids up to %" PRIu64 " keep constants apart above bit %u (%" PRIu64
	    " would "
	    "meet %s %" PRIu64 ")",
	    (o->max_subvol), k0, (c->at), what[c->kind], (c->with));
}

static unsigned bitlen(uint64_t v)
{
	return v ? msb64(v) + 1 : 0;
}

static void verdict(struct text *t, const struct btrfsimg_collide_result *o,
		    const struct bi_collide_stats *st,
		    unsigned k0)
{
	if (o->groups)
		put(t, "; %" PRIu64 " numbers are shared by %" PRIu64 " inodes", (o->groups),
		    (o->inodes));
	else if (!o->proven)
		put(t,
		    "; no collision now only because of these sets (objectids %" PRIu64 "..%" PRIu64
		    ")",
		    (st->any ? st->minobj : 0), (st->maxobj));
	else
		put(t, "; largest objectid %" PRIu64 " < 2^%u: proven", (st->maxobj), k0);
}

void bi_headroom(const struct btrfsimg_scheme *s, struct bi_subvol_const *t, size_t n,
		 struct bi_subvol_const *fx, size_t nfx, const struct bi_collide_stats *st,
		 struct btrfsimg_collide_result *o)
{
	struct text txt = { o->reason, sizeof(o->reason), 0 };
	unsigned k0 = bitlen(st->maxobj);
	struct bi_clash c = { 0, 0, BI_CLASH_NONE };
	struct bi_limit l;

	bi_objbits(t, n, fx, nfx, &l);
	o->objbits = l.bits;
	o->max_objectid = l.bits >= 64 ? OBJ_LAST_FREE : (1ull << l.bits) - 1;
	if (o->max_objectid > OBJ_LAST_FREE)
		o->max_objectid = OBJ_LAST_FREE;
	/* objectids below 256 (never inodes) fall outside the argument */
	o->proven = l.kind != BI_LIM_FIXED2 && k0 <= l.bits && (!st->any || st->minobj >= 256);
	say_limit(&txt, &l, s->numdevs);
	verdict(&txt, o, st, k0);
	if (!o->proven)
		return;
	if (s->numdevs != BTRFSIMG_NUMDEVS_MANY)
		c = bi_first_clash(s->uniquifier ? 64 : s->inumbits, k0,
				   st->maxid > 255 ? st->maxid : 255, t, n, fx, nfx);
	o->max_subvol = OBJ_LAST_FREE;
	if (c.kind && c.at <= OBJ_LAST_FREE) {
		o->max_subvol = c.at - 1;
		o->clash_subvol = c.at;
		o->clash_with = c.with;
	}
	say_clash(&txt, o, &c, k0);
}
