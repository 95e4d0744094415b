/* SPDX-License-Identifier: MIT */
/*
 * Inode-number formulas against hand-worked vectors (docs/inode-numbers.md
 * sections 2 and 5; the inumbits values follow the patch mail
 * <162848132771.25823.16399620921119050413.stgit@noble.brown>). Every
 * expected value below is worked out by hand in its comment: swab64
 * reverses the 8 bytes, the overlay shifts right by 64 - N.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "inum/collide.h"
#include "inum/schemes.h"

static void test_swab64(void **state)
{
	(void)state;
	/* bytes 01..08 from low to high come back in the other order */
	assert_true(bi_swab64(0x0102030405060708ull) == 0x0807060504030201ull);
	/* 257 = 0x0101: bytes 01 01 00.. -> 0x0101000000000000 (docs/inode-numbers.md 2) */
	assert_true(bi_swab64(257) == 0x0101000000000000ull);
	/* 256 = 0x0100: byte 1 is 01 -> byte 6 is 01 */
	assert_true(bi_swab64(256) == 0x0001000000000000ull);
	assert_true(bi_swab64(0) == 0);
	assert_true(bi_swab64(~0ull) == ~0ull);
	/* an involution */
	assert_true(bi_swab64(bi_swab64(0x123456789abcdef0ull)) ==
		    0x123456789abcdef0ull);
}

static void test_overlay_257(void **state)
{
	(void)state;
	/* swab64(257) = 0x0101000000000000 shifted right by 64 - N: */
	/* N=64: no shift */
	assert_true(btrfsimg_inumbits_overlay(257, 64) == 0x0101000000000000ull);
	/* N=63: >> 1: 0x01 01 -> 0x00 80 80 */
	assert_true(btrfsimg_inumbits_overlay(257, 63) == 0x0080800000000000ull);
	/* N=56: >> 8 (docs/inode-numbers.md 2) */
	assert_true(btrfsimg_inumbits_overlay(257, 56) == 0x0001010000000000ull);
	/* N=48: >> 16 */
	assert_true(btrfsimg_inumbits_overlay(257, 48) == 0x0000010100000000ull);
	/* N=32: >> 32: the byte-reversed low 32 bits, 0x01010000 */
	assert_true(btrfsimg_inumbits_overlay(257, 32) == 0x0000000001010000ull);
}

static void test_overlay_other(void **state)
{
	(void)state;
	/* subvol 256, N=56: 0x0001000000000000 >> 8 (docs/inode-numbers.md 2) */
	assert_true(btrfsimg_inumbits_overlay(256, 56) == 0x0000010000000000ull);
	/* subvol 256, N=32: 0x0001000000000000 >> 32 = 0x00010000 */
	assert_true(btrfsimg_inumbits_overlay(256, 32) == 0x10000ull);
	/* subvol 0x123456789abc, N=48: swab64 = 0xbc9a785634120000, >> 16 */
	assert_true(btrfsimg_inumbits_overlay(0x123456789abcull, 48) == 0x0000bc9a78563412ull);
	/* the last fs tree id 2^64 - 256 = 0xffffffffffffff00, N=64:
	 * swab64 = 0x00ffffffffffffff */
	assert_true(btrfsimg_inumbits_overlay(0xffffffffffffff00ull, 64) == 0x00ffffffffffffffull);
	/* N=63: >> 1 of that */
	assert_true(btrfsimg_inumbits_overlay(0xffffffffffffff00ull, 63) == 0x007fffffffffffffull);
	/* subvolume 5 never gets an overlay */
	for (unsigned n = 32; n <= 64; n++)
		assert_true(btrfsimg_inumbits_overlay(5, n) == 0);
	/* N = 0 is off; other N outside 32..64 give 0 too (never shift by 64) */
	assert_true(btrfsimg_inumbits_overlay(257, 0) == 0);
	assert_true(btrfsimg_inumbits_overlay(257, 31) == 0);
	assert_true(btrfsimg_inumbits_overlay(257, 65) == 0);
	assert_true(btrfsimg_inumbits_overlay(257, 1) == 0);
}

static void test_presented(void **state)
{
	(void)state;
	uint64_t ov = 0x0001010000000000ull;	/* subvol 257, N=56 */
	/* ino 257 -> 0x0001010000000101 (docs/inode-numbers.md 2) */
	assert_true(btrfsimg_presented_ino(257, ov) == 0x0001010000000101ull);
	/* root dir 256 -> 0x0001010000000100 (docs/inode-numbers.md 2) */
	assert_true(btrfsimg_presented_ino(256, ov) == 0x0001010000000100ull);
	/* objectid equal to the overlay presents itself, not 0 */
	assert_true(btrfsimg_presented_ino(ov, ov) == ov);
	/* ... and objectid 0 presents the same number: 0 ^ ov = ov */
	assert_true(btrfsimg_presented_ino(0, ov) == ov);
	/* N=32, subvol 257: overlay 0x01010000 = 16842752 */
	assert_true(btrfsimg_presented_ino(16842752, btrfsimg_inumbits_overlay(257,
		    32)) == 16842752);
	assert_true(btrfsimg_presented_ino(16842753, btrfsimg_inumbits_overlay(257, 32)) == 1);
	/* N=64, subvol 257, ino 300 = 0x12c */
	assert_true(btrfsimg_presented_ino(300, btrfsimg_inumbits_overlay(257,
		    64)) == 0x010100000000012cull);
	/* N=48, subvol 257, ino 0x0000010100000000 (== overlay) stays */
	assert_true(btrfsimg_presented_ino(0x0000010100000000ull, btrfsimg_inumbits_overlay(257,
		    48)) ==
		    0x0000010100000000ull);
	/* N=63, subvol 257: 256 ^ 0x0080800000000000 */
	assert_true(btrfsimg_presented_ino(256, btrfsimg_inumbits_overlay(257,
		    63)) == 0x0080800000000100ull);
	/* subvolume 5 (overlay 0) presents objectids unchanged */
	assert_true(btrfsimg_presented_ino(256, btrfsimg_inumbits_overlay(5, 56)) == 256);
	assert_true(btrfsimg_presented_ino(0, 0) == 0);
}

static void test_uniquifier(void **state)
{
	(void)state;
	/* docs/inode-numbers.md 5: 0 for subvolume 5, else swab64(subvol) */
	assert_true(btrfsimg_uniquifier(5) == 0);
	assert_true(btrfsimg_uniquifier(257) == 0x0101000000000000ull);
	assert_true(btrfsimg_uniquifier(256) == 0x0001000000000000ull);
	/* fileid of the root dir (256) of subvol 257: 0x0101000000000000 ^ 0x100 */
	assert_true(btrfsimg_presented_ino(256, btrfsimg_uniquifier(257)) == 0x0101000000000100ull);
	/* the uniquifier is the N=64 overlay */
	for (uint64_t id = 256; id < 300; id++)
		assert_true(btrfsimg_uniquifier(id) == btrfsimg_inumbits_overlay(id, 64));
	/* subvolume 65792 = 0x10100 and 256 differ only in byte 2: uniquifiers
	 * 0x0001010000000000 and 0x0001000000000000 differ only in bit 40 */
	assert_true((btrfsimg_uniquifier(65792) ^ btrfsimg_uniquifier(256)) == 1ull << 40);
}

static void test_scheme_const(void **state)
{
	(void)state;
	struct btrfsimg_scheme nfsd = { 0, false, 1 }, uq = { 0, true, 1 }, n56 = { 56, false, 2 };
	assert_true(bi_scheme_const(&nfsd, 257) == 0);
	assert_true(bi_scheme_const(&uq, 257) == 0x0101000000000000ull);
	assert_true(bi_scheme_const(&uq, 5) == 0);
	assert_true(bi_scheme_const(&n56, 257) == 0x0001010000000000ull);
}

/* A hand-drawn tree: 5 > 256 > 257, 256 > 260 (unreachable: no path),
 * 258 <-> 259 a parent loop, 261 under a missing 300. */
/* What NFS clients of the patched nfsd see (docs/inode-numbers.md 6). */
static void test_nfs_numbers(void **state)
{
	(void)state;
	/* subvolume 256, objectid 256, plain: 256 ^ swab64(256) =
	 * 0x0001000000000100 = 281474976710912 (v3 and v4 fileid) */
	assert_true(btrfsimg_nfs_fileid(256, 256, 0) == 281474976710912ull);
	/* inumbits=56: btrfs gives 256 ^ (2^48 >> 8) = 0x0000010000000100; nfsd
	 * XORs 2^48 on top: 0x0001010000000100 = 282574488338688, the issue's
	 * measured value (not the plain 281474976710912) */
	assert_true(btrfsimg_nfs_fileid(256, 256, 56) == 282574488338688ull);
	/* inumbits=64: the overlay is the uniquifier, they cancel: 300 */
	assert_true(btrfsimg_nfs_fileid(257, 300, 64) == 300);
	/* ... except the objectid equal to the overlay: btrfs keeps it, nfsd
	 * then meets its equal and keeps it too */
	assert_true(btrfsimg_nfs_fileid(257, 0x0101000000000000ull, 64) == 0x0101000000000000ull);
	/* subvolume 5: no uniquifier, no overlay */
	assert_true(btrfsimg_nfs_fileid(5, 260, 56) == 260);
	/* v3 READDIR: entry naming subvolume 258 in a directory of 257:
	 * 258 ^ swab64(257) = 0x0101000000000102 */
	assert_true(btrfsimg_nfs3_d_fileid(257, 258, 0) == 0x0101000000000102ull);
	/* ... with inumbits=56: (258 ^ 0x0001010000000000) ^ 0x0101000000000000 */
	assert_true(btrfsimg_nfs3_d_fileid(257, 258, 56) == 0x0100010000000102ull);
	/* v4 d_ino: the plain st_ino (the sv000/d1/d2/text: 260) */
	assert_true(btrfsimg_nfs4_d_fileid(256, 260, 0) == 260);
	/* a subvolume entry: the child's root, 256; under inumbits=56 its
	 * overlaid number 256 ^ 0x0001010000000000 for child 257 */
	assert_true(btrfsimg_nfs4_d_fileid(257, 256, 0) == 256);
	assert_true(btrfsimg_nfs4_d_fileid(257, 256, 56) == 0x0001010000000100ull);
}

static void test_subvol_depth(void **state)
{
	(void)state;
	char top[] = "", a[] = "a", b[] = "a/b", l1[] = "x", l2[] = "y", m[] = "m";
	struct btrfsimg_subvol v[] = {
		{ .id = 5, .parent_id = 0, .path = top },
		{ .id = 256, .parent_id = 5, .path = a },
		{ .id = 257, .parent_id = 256, .path = b },
		{ .id = 258, .parent_id = 259, .path = l1 },
		{ .id = 259, .parent_id = 258, .path = l2 },
		{ .id = 260, .parent_id = 256, .path = NULL },
		{ .id = 261, .parent_id = 300, .path = m },
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 5), 0);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 256), 1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 257), 2);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 256, 257), 1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 256, 256), 0);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 256, 5), -1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 258), -1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 260), -1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 261), -1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 5, 999), -1);
	assert_int_equal(btrfsimg_subvol_depth(v, n, 258, 258), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swab64),
		cmocka_unit_test(test_overlay_257),
		cmocka_unit_test(test_overlay_other),
		cmocka_unit_test(test_presented),
		cmocka_unit_test(test_uniquifier),
		cmocka_unit_test(test_scheme_const),
		cmocka_unit_test(test_subvol_depth),
		cmocka_unit_test(test_nfs_numbers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
