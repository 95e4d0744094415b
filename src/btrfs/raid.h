/* SPDX-License-Identifier: MIT */
/*
 * RAID5/6 rebuild arithmetic (pure).
 */
#ifndef BI_RAID_H
#define BI_RAID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rebuilding one data block of a RAID5/6 row (pure; see raid.c).
 * Positions: 0..ndata-1 data in logical order, ndata P, ndata+1 Q. */
struct bi_raid_plan {
	uint32_t ndata, nparity, x, y;	/* x: the block to rebuild; y: a second
					   lost data block or UINT32_MAX */
	bool use_p, use_q;
};
/* Plan the rebuild of data block @x when the positions in @lost (x among
 * them; duplicates allowed) cannot be used. -EINVAL if that is impossible
 * (more lost than @nparity, or two data blocks sharing a Q coefficient). */
int bi_raid_plan(struct bi_raid_plan *p, uint32_t ndata, uint32_t nparity, uint32_t x,
		 const uint32_t *lost, uint32_t nlost);
/* Whether the plan needs the block at @pos. */
bool bi_raid_uses(const struct bi_raid_plan *p, uint32_t pos);
/* Fold the block at @pos (one the plan uses) into @pacc / @qacc (@len
 * bytes each, zeroed before the first fold; @qacc only read if use_q). */
void bi_raid_fold(const struct bi_raid_plan *p, uint32_t pos, const uint8_t *blk, uint8_t *pacc,
		  uint8_t *qacc, size_t len);
/* Write data block x into @out (which may be @pacc) once every used block
 * was folded. Clobbers the accumulators. */
void bi_raid_solve(const struct bi_raid_plan *p, uint8_t *pacc, uint8_t *qacc, size_t len,
		   uint8_t *out);
/* The same over in-memory blocks @blk[pos] (NULL where absent; every block
 * the plan uses must be there, else -EINVAL). 0, -EINVAL or -ENOMEM. */
int bi_raid_rebuild(const uint8_t *const *blk, uint32_t ndata, uint32_t nparity, uint32_t x,
		    const uint32_t *lost, uint32_t nlost, size_t len, uint8_t *out);

#endif
