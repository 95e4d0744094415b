/* SPDX-License-Identifier: MIT */
/*
 * Inode-number schemes of the 2021 proposals (none merged), as pure
 * formulas. See btrfs-facts.md section 4:
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
 */
#include "internal.h"

uint64_t btrfsimg_swab64(uint64_t v)
{
	uint64_t r = 0;

	for (int i = 0; i < 8; i++) {
		r = r << 8 | (v & 0xff);
		v >>= 8;
	}
	return r;
}

uint64_t btrfsimg_overlay(uint64_t subvol, unsigned inumbits)
{
	/* The patch accepts BITS_PER_LONG/2..BITS_PER_LONG; anything else
	 * (and 0, "off") means no overlay. Never shift by 64. */
	if (inumbits < 32 || inumbits > 64 || subvol == OBJ_FS_TREE)
		return 0;
	return btrfsimg_swab64(subvol) >> (64 - inumbits);
}

uint64_t btrfsimg_presented(uint64_t objectid, uint64_t v)
{
	return objectid == v ? objectid : objectid ^ v;
}

uint64_t btrfsimg_uniquifier(uint64_t subvol)
{
	return subvol == OBJ_FS_TREE ? 0 : btrfsimg_swab64(subvol);
}
