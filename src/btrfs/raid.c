/* SPDX-License-Identifier: MIT */
/*
 * RAID5/6 reconstruction of one data block of a full stripe (a "row").
 *
 * A row has d data blocks D_0..D_{d-1} (in logical order, whatever device
 * they sit on), then P and, for RAID6, Q:
 *
 *     P = D_0 ^ D_1 ^ ... ^ D_{d-1}
 *     Q = g^0 D_0 ^ g^1 D_1 ^ ... ^ g^{d-1} D_{d-1}
 *
 * in GF(2^8) with the polynomial x^8+x^4+x^3+x^2+1 (0x11d) and g = {02}:
 * the Linux RAID-6 definition (lib/raid6), which btrfs uses with the data
 * blocks in logical order. ISA-L's field (gf_mul, gf_inv) is that field.
 *
 * To rebuild D_x when the blocks in a "lost" set are unusable, the plan
 * reads every other data block once and folds it into two accumulators,
 * so memory stays at two blocks whatever the stripe count:
 *
 *     pacc = P ^ sum D_i        (i not lost)  = D_x [^ D_y]
 *     qacc = Q ^ sum g^i D_i    (i not lost)  = g^x D_x [^ g^y D_y]
 *
 *   one lost data block, P usable:   D_x = pacc
 *   one lost data block, P lost:     D_x = qacc / g^x
 *   two lost data blocks x, y:       D_x = (qacc ^ g^y pacc) / (g^x ^ g^y)
 *
 * g has order 255, so with more than 255 data blocks two positions can
 * share a coefficient; such a pair cannot be told apart (-EINVAL).
 */
#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/raid.h"

#include "base/cursor.h"

/* g^i for g = {02}. */
static uint8_t gexp(uint32_t i)
{
	uint8_t r = 1;
	for (i %= 255; i; i--)
		r = gf_mul(r, 2);
	return r;
}

static void vec_xor(uint8_t *dst, const uint8_t *src, size_t len)
{
	for (size_t i = 0; i < len; i++)
		dst[i] ^= src[i];
}

/* dst = c * src (dst may be src), or dst ^= c * src when @acc. */
static void vec_mul(uint8_t *dst, const uint8_t *src, size_t len, uint8_t c, bool acc)
{
	uint8_t t[256];
	for (unsigned a = 0; a < 256; a++)
		t[a] = gf_mul((unsigned char)a, c);
	for (size_t i = 0; i < len; i++)
		dst[i] = (uint8_t)((acc ? dst[i] : 0) ^ t[src[i]]);
}

static bool in_set(const uint32_t *set, uint32_t n, uint32_t v)
{
	for (uint32_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

int bi_raid_plan(struct bi_raid_plan *p, uint32_t ndata, uint32_t nparity, uint32_t x,
		 const uint32_t *lost, uint32_t nlost)
{
	if (ndata == 0 || nparity < 1 || nparity > 2 || x >= ndata || !in_set(lost, nlost, x))
		return -EINVAL;
	*p = (struct bi_raid_plan){ ndata, nparity, x, UINT32_MAX, false, false };
	uint32_t nbad = 0;
	for (uint32_t i = 0; i < nlost; i++) {
		if (lost[i] >= ndata + nparity)
			return -EINVAL;
		if (in_set(lost, i, lost[i]))
			continue;	/* listed twice */
		nbad++;
		if (lost[i] < ndata && lost[i] != x)
			p->y = lost[i];
	}
	if (nbad > nparity)
		return -EINVAL;
	bool p_ok = !in_set(lost, nlost, ndata);
	bool q_ok = nparity == 2 && !in_set(lost, nlost, ndata + 1);
	if (p->y != UINT32_MAX) {
		/* two data blocks: needs both parities and distinct coefficients */
		if (!p_ok || !q_ok || gexp(x) == gexp(p->y))
			return -EINVAL;
		p->use_p = p->use_q = true;
	} else if (p_ok) {
		p->use_p = true;	/* as the kernel: one failure is rebuilt from P */
	} else if (q_ok) {
		p->use_q = true;
	} else {
		return -EINVAL;
	}
	return 0;
}

bool bi_raid_uses(const struct bi_raid_plan *p, uint32_t pos)
{
	if (pos < p->ndata)
		return pos != p->x && pos != p->y;
	if (pos == p->ndata)
		return p->use_p;
	return pos == p->ndata + 1 && p->use_q;
}

void bi_raid_fold(const struct bi_raid_plan *p, uint32_t pos, const uint8_t *blk, uint8_t *pacc,
		  uint8_t *qacc, size_t len)
{
	if (pos < p->ndata) {
		if (p->use_p)
			vec_xor(pacc, blk, len);
		if (p->use_q)
			vec_mul(qacc, blk, len, gexp(pos), true);
	} else if (pos == p->ndata) {
		vec_xor(pacc, blk, len);
	} else {
		vec_xor(qacc, blk, len);
	}
}

void bi_raid_solve(const struct bi_raid_plan *p, uint8_t *pacc, uint8_t *qacc, size_t len,
		   uint8_t *out)
{
	uint8_t gx = gexp(p->x);
	if (p->use_p && p->use_q) {
		vec_mul(qacc, pacc, len, gexp(p->y), true);
		vec_mul(out, qacc, len, gf_inv(gx ^ gexp(p->y)), false);
	} else if (p->use_p) {
		if (out != pacc)
			memcpy(out, pacc, len);
	} else {
		vec_mul(out, qacc, len, gf_inv(gx), false);
	}
}

int bi_raid_rebuild(const uint8_t *const *blk, uint32_t ndata, uint32_t nparity, uint32_t x,
		    const uint32_t *lost, uint32_t nlost, size_t len, uint8_t *out)
{
	struct bi_raid_plan p;
	int rc = bi_raid_plan(&p, ndata, nparity, x, lost, nlost);
	if (rc < 0)
		return rc;
	uint8_t *pacc = calloc(1, len ? len : 1), *qacc = calloc(1, len ? len : 1);
	if (!pacc || !qacc) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t pos = 0; pos < ndata + nparity; pos++) {
		if (!bi_raid_uses(&p, pos))
			continue;
		if (!blk[pos]) {
			rc = -EINVAL;
			goto out;
		}
		bi_raid_fold(&p, pos, blk[pos], pacc, qacc, len);
	}
	bi_raid_solve(&p, pacc, qacc, len, out);
out:
	free(pacc);
	free(qacc);
	return rc;
}
