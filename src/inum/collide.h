/* SPDX-License-Identifier: MIT */
/*
 * The collision engine (collide.c, its counting core trie.c, the
 * all-schemes report collide_all.c) and its input checks (collide_input.c).
 */
#ifndef BI_COLLIDE_H
#define BI_COLLIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btrfsimg_inum.h"

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
/* Count scheme @s over input the checks passed (@st, their statistics)
 * into @out (cleared first); with @fn, each group goes to it with all its
 * members instead of becoming an example, and no headroom is worked out.
 * 0, -ENOMEM, or what @fn returned. */
int bi_collide_run(const struct btrfsimg_collide_input *in, const struct btrfsimg_scheme *s,
		   const struct btrfsimg_collide_opts *o, const struct bi_collide_stats *st,
		   struct btrfsimg_collide_result *out, btrfsimg_collide_group_fn fn, void *fn_ctx);

#endif
