/* SPDX-License-Identifier: MIT */
/*
 * Inode-number schemes: formulas and bit-range headroom (schemes.c).
 */
#ifndef BI_SCHEMES_H
#define BI_SCHEMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg_inum.h"

/* btrfsimg_presented_ino, inline for the per-inode loop (a call through
 * the PLT each time, three per inode, otherwise). */
static inline uint64_t bi_presented_ino(uint64_t objectid, uint64_t v)
{
	return objectid == v ? objectid : objectid ^ v;
}

/* swab64: byte-reverse a 64-bit value. */
uint64_t bi_swab64(uint64_t v);

/* Bit-range headroom. A constant on a device: a subvolume's
 * (c = c_s, id = subvol) or a fixed number's (c = the number, e.g. 2). */
struct bi_subvol_const {
	uint64_t dev, c, id;
};
enum { BI_LIM_NONE, BI_LIM_PAIR, BI_LIM_SAME, BI_LIM_FIXED, BI_LIM_FIXED2 };
/* What bounds objbits: a pair of subvolumes (a, b), a fixed number a and
 * subvolume b, or two fixed numbers a on one device. */
struct bi_limit {
	unsigned bits;
	int kind;
	uint64_t a, b, dev;
};
/* Largest bits such that objectids in [256, 2^bits) cannot collide: every
 * two constants of a device differ at bit >= bits, and no fixed number can
 * be met. Sorts both tables. O((n + nfx) log n). */
void bi_objbits(struct bi_subvol_const *t, size_t n, struct bi_subvol_const *fx, size_t nfx,
		struct bi_limit *l);
/* Smallest x > @lo with (x & @mask) == @want (@want inside @mask); false if
 * none below 2^64. O(64). */
bool bi_next_masked(uint64_t lo, uint64_t mask, uint64_t want, uint64_t *out);
enum { BI_CLASH_NONE, BI_CLASH_SUBVOL, BI_CLASH_NEW, BI_CLASH_FIXED };
struct bi_clash {
	uint64_t at;		/* the first new id that may collide */
	uint64_t with;		/* the subvolume, earlier new id, or fixed number */
	int kind;
};
/* The first new subvolume id > @lo (ids are allocated upwards) whose
 * constant (inumbits @nbits; 64 for the uniquifier, 0 for none) agrees above
 * bit @k0 with a constant of @t, a fixed number of @fx, or an earlier new id:
 * where objectids < 2^k0 stop being provably apart. Devices ignored (a new
 * subvolume may land anywhere). O((n + nfx) 64). */
struct bi_clash bi_first_clash(unsigned nbits, unsigned k0, uint64_t lo,
			       const struct bi_subvol_const *t, size_t n, const struct bi_subvol_const *fx,
			       size_t nfx);
/* What the headroom argument needs to know about an input. */
struct bi_collide_stats {
	uint64_t maxobj, minobj;	/* over every set (minobj UINT64_MAX if none) */
	uint64_t maxid;			/* largest subvolume id */
	uint64_t total;			/* inodes counted with base and add */
	bool any;			/* some set is not empty */
};
/* Fill @o's objbits, max_objectid, proven, max_subvol, clash_* and reason
 * (o->groups and o->inodes already counted) for scheme @s from the
 * subvolume constants @t and the fixed numbers @fx (both get sorted). */
void bi_headroom(const struct btrfsimg_scheme *s, struct bi_subvol_const *t, size_t n,
		 struct bi_subvol_const *fx, size_t nfx, const struct bi_collide_stats *st,
		 struct btrfsimg_collide_result *o);

#endif
