// SPDX-License-Identifier: MIT
/* The calls the CLI and the Python binding share instead of keeping copies
 * (docs/front-ends.md): bytes as hex, a walk path's presented numbers, the
 * collisions verdict's headroom rows. Vectors worked by hand from the
 * header's definitions (swab64, XOR). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "btrfsimg.h"
#include "btrfsimg_inum.h"

static void test_hex(void **state)
{
	(void)state;
	char out[8];
	memset(out, 'x', sizeof(out));
	assert_int_equal(btrfsimg_hex("\x00\x9f\xa0", 3, out, 7), 0);
	assert_string_equal(out, "009fa0");
	assert_int_equal(btrfsimg_hex("", 0, out, 1), 0);
	assert_string_equal(out, "");
	/* no room for the NUL: nothing written */
	memset(out, 'x', sizeof(out));
	assert_int_equal(btrfsimg_hex("\x01\x02\x03", 3, out, 6), -EINVAL);
	assert_int_equal(out[0], 'x');
	assert_int_equal(btrfsimg_hex("\x01", 1, out, 0), -EINVAL);
	assert_int_equal(btrfsimg_hex(NULL, 1, out, sizeof(out)), -EINVAL);
	assert_int_equal(btrfsimg_hex("\x01", 1, NULL, 3), -EINVAL);
	/* a length whose hex would overflow size_t */
	assert_int_equal(btrfsimg_hex("\x01", SIZE_MAX / 2 + 1, out, SIZE_MAX), -EINVAL);
}

/* objectid 257 of subvolume 256, listed in a directory of subvolume 5 */
static struct btrfsimg_walk_entry child(void)
{
	struct btrfsimg_walk_entry e = { .kind = BTRFSIMG_WALK_PATH, .subvol = 256,
					 .objectid = 257, .dir_subvol = 5, .dir_objectid = 256 };
	e.ent.location_objectid = 256;
	return e;
}

static void test_walk_numbers(void **state)
{
	(void)state;
	struct btrfsimg_walk_numbers n;
	struct btrfsimg_walk_entry e = child();
	/* swab64(256) = 2^48: inumbits=56 overlays 2^40, the uniquifier 2^48;
	 * subvolume 5 presents its numbers as they are */
	btrfsimg_walk_numbers(&e, 56, NULL, &n);
	assert_true(n.ino == (257ull ^ 1ull << 40));
	assert_true(n.nfs_fileid == (257ull ^ 1ull << 48));
	assert_true(n.d_ino == 256 && n.nfs_d_fileid == 256);
	assert_int_equal(n.numdevs2_dev, -1); /* no numdevs=2 table */
	/* inumbits=0 is today's kernel: st_ino is the objectid */
	btrfsimg_walk_numbers(&e, 0, NULL, &n);
	assert_true(n.ino == 257);
	/* the start has no directory entry */
	e.is_start = true;
	btrfsimg_walk_numbers(&e, 56, NULL, &n);
	assert_true(n.d_ino == 0 && n.nfs_d_fileid == 0);
	assert_true(n.ino == (257ull ^ 1ull << 40));
	/* a stub directory is the kernel's inode 2 on device 0 under every scheme */
	e = child();
	e.stub = true;
	e.objectid = 2;
	btrfsimg_walk_numbers(&e, 56, NULL, &n);
	assert_true(n.ino == 2 && n.nfs_fileid == 2);
	assert_int_equal(n.numdevs2_dev, 0);
}

static void test_headroom(void **state)
{
	(void)state;
	struct btrfsimg_collide_result with[3] = { { .groups = 0 }, { .groups = 4 },
						   { .groups = 1 } };
	struct btrfsimg_collide_result bare[3] = { { .groups = 0 }, { .groups = 0 },
						   { .groups = 1 } };
	struct btrfsimg_collide_report rep = { .nresults = 3, .results = with };
	struct btrfsimg_collide_report ns = { .nresults = 3, .results = bare };
	struct btrfsimg_fs_collisions c = { .report = &rep };
	/* no stubs: the report is its own without them; no second list */
	assert_ptr_equal(btrfsimg_collisions_without_stubs(&c), &rep);
	assert_true(btrfsimg_collisions_headroom(&c, 0, false));
	assert_false(btrfsimg_collisions_headroom(&c, 1, false));
	for (size_t i = 0; i < 3; i++)
		assert_false(btrfsimg_collisions_headroom(&c, i, true));
	/* stubs: the second list holds what only their absence makes safe */
	c.report_without_stubs = &ns;
	assert_ptr_equal(btrfsimg_collisions_without_stubs(&c), &ns);
	assert_false(btrfsimg_collisions_headroom(&c, 0, true));
	assert_true(btrfsimg_collisions_headroom(&c, 1, true));
	assert_false(btrfsimg_collisions_headroom(&c, 2, true));
	assert_false(btrfsimg_collisions_headroom(&c, 2, false));
	assert_false(btrfsimg_collisions_headroom(&c, 3, false)); /* past the schemes */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_walk_numbers),
		cmocka_unit_test(test_headroom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
