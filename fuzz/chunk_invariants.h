/* SPDX-License-Identifier: MIT */
/*
 * What every chunk that bi_chunk_parse accepted must satisfy when mapped,
 * shared by fuzz_chunk and fuzz_sysarray: each piece lies inside its
 * stripe's device range [offset, offset + span), names the stripe's
 * devid, is nonempty and ends by the stripe (or chunk) end; RAID5/6 rows
 * put their positions on distinct stripes, and copy 0 is the data
 * position of the row.
 */
#ifndef FUZZ_CHUNK_INVARIANTS_H
#define FUZZ_CHUNK_INVARIANTS_H

#include <stdlib.h>

#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static void check_piece(const struct bi_chunk *c, uint64_t off, const struct bi_phys *ph)
{
	uint64_t span = bi_chunk_stripe_span(c);
	CHECK(ph->stripe < c->num_stripes);
	const struct bi_stripe *s = &c->stripes[ph->stripe];
	CHECK(ph->devid == s->devid);
	CHECK(ph->len >= 1 && ph->len <= c->length - off);
	CHECK(ph->physical >= s->offset && ph->physical - s->offset < span);
	CHECK(ph->len <= span - (ph->physical - s->offset));
	if (c->type & (BG_RAID0 | BG_RAID10 | BG_RAID5 | BG_RAID6))
		CHECK(ph->len <= c->stripe_len);
}

static void check_offset(const struct bi_chunk *c, uint64_t off)
{
	uint64_t logical = c->logical + off;
	bool raid56 = c->type & (BG_RAID5 | BG_RAID6);
	int ways = bi_chunk_num_copies(c), mirrors = raid56 ? 1 : ways;
	CHECK(ways >= 1 && ways <= c->num_stripes);
	struct bi_phys ph, first = { 0 };
	for (int copy = 0; copy < mirrors; copy++) {
		CHECK(bi_chunk_map_phys(c, logical, copy, &ph) == 0);
		check_piece(c, off, &ph);
		if (copy == 0)
			first = ph;
		else /* mirrors hold the chunk at the same place in their stripes */
			CHECK(ph.physical - c->stripes[ph.stripe].offset ==
			      first.physical - c->stripes[first.stripe].offset);
	}
	CHECK(bi_chunk_map_phys(c, logical, mirrors, &ph) == -EINVAL);
	CHECK(bi_chunk_map_phys(c, logical, -1, &ph) == -EINVAL);
	if (!raid56) {
		CHECK(bi_chunk_map_row(c, logical, 0, &ph) == -EINVAL);
		return;
	}
	/* the positions of a row sit on distinct stripes, at the same offset;
	 * copy 0 is one of its data positions (checked over the first 64) */
	uint32_t npos = c->num_stripes < 64 ? c->num_stripes : 64, used[64];
	uint32_t nd = c->num_stripes - ((c->type & BG_RAID6) ? 2u : 1u);
	bool hit = false;
	for (uint32_t pos = 0; pos < npos; pos++) {
		CHECK(bi_chunk_map_row(c, logical, pos, &ph) == 0);
		check_piece(c, off, &ph);
		CHECK(ph.physical - c->stripes[ph.stripe].offset ==
		      first.physical - c->stripes[first.stripe].offset);
		for (uint32_t j = 0; j < pos; j++)
			CHECK(used[j] != ph.stripe);
		used[pos] = ph.stripe;
		if (pos < nd && ph.stripe == first.stripe)
			hit = true;
	}
	CHECK(hit || npos < c->num_stripes);
	CHECK(bi_chunk_map_row(c, logical, c->num_stripes, &ph) == -EINVAL);
}

/* Offsets worth probing: both ends, stripe edges around @probe, @probe. */
static void check_chunk(const struct bi_chunk *c, uint64_t probe)
{
	uint64_t len = c->length, sl = c->stripe_len;
	uint64_t p = probe % len, edge = p - p % sl;
	uint64_t offs[] = { 0, len - 1, len / 2, p, edge, edge ? edge - 1 : 0, edge + sl - 1,
			    edge + sl };
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] < len)
			check_offset(c, offs[i]);
	struct bi_phys ph;
	CHECK(bi_chunk_map_phys(c, c->logical + len, 0, &ph) == -EINVAL);
	if (c->logical)
		CHECK(bi_chunk_map_phys(c, c->logical - 1, 0, &ph) == -EINVAL);
}

#endif
