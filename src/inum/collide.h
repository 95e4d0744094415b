/* SPDX-License-Identifier: MIT */
/*
 * The collision engine's helpers (collide.c).
 */
#ifndef BI_COLLIDE_H
#define BI_COLLIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg_inum.h"

/* The engine behind btrfsimg_collide(). */
/* Index of the first element of the ascending @v[0..n) that is >= @x (n
 * if none): the search under both the counting and the input checks. */
static inline size_t bi_lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* x in @s (NULL = empty); O(log n). */
bool bi_idset_has(const struct btrfsimg_idset *s, uint64_t x);
/* a in base + add - del of @s. */
bool bi_collide_subvol_has(const struct btrfsimg_collide_subvol *s, uint64_t a);
/* The constant c_s a scheme XORs in: 0, the overlay or the uniquifier. */
uint64_t bi_scheme_const(const struct btrfsimg_scheme *s, uint64_t subvol);

/* Collisions of @in (validated already) with the constant @c[i] for
 * subvols[i] instead of a scheme's, on the devices of numdevs @numdevs:
 * presented(objectid, c[i]). Counts only; 0 or -ENOMEM. */
int bi_collide_consts(const struct btrfsimg_collide_input *in, const uint64_t *c, int numdevs,
		      uint64_t *groups, uint64_t *inodes);

struct bi_collide_stats;
/* The input checks of collide_input.c: 0, or -EINVAL with a message in
 * @err naming the first fault (-ENOMEM when out of memory). */
int bi_collide_input_ok(const struct btrfsimg_collide_input *in, size_t max_subvols,
			struct bi_collide_stats *st, char *err, size_t len);
int bi_collide_scheme_ok(const struct btrfsimg_scheme *s, char *err, size_t len);

#endif
