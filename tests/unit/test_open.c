// SPDX-License-Identifier: MIT
/* The one open (btrfsimg_open_images) and the refusals it shares with the
 * step-by-step route: a partition asked of an image that holds btrfs
 * itself is refused by the library, whichever route (it used to be the
 * CLI alone that refused it, the API reading the image whole); which step
 * failed and which image; the options struct's size (a caller's older or
 * newer header); the format table every format name comes from. Images:
 * testdata/files/subvols.img.zst (btrfs itself), testdata/part/gpt-btrfs
 * (a GPT whose partition 2 holds btrfs, partition 1 not). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btrfsimg.h"
#include "unpack.h"

static char *plain, *disk;

static int setup(void **state)
{
	(void)state;
	plain = unpack_zst(TESTDATA "/files/subvols.img.zst", NULL);
	disk = unpack_zst(TESTDATA "/part/gpt-btrfs.img.zst", NULL);
	FILE *f = fopen(TESTDATA "/part/gpt-btrfs.size", "r");
	unsigned long long size = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu", &size), 1);
	fclose(f);
	assert_int_equal(truncate(disk, (off_t)size), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(plain);
	unlink(disk);
	free(plain);
	free(disk);
	return 0;
}

static void test_opens(void **state)
{
	(void)state;
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	btrfsimg_fs *fs = NULL;
	const char *imgs[] = { plain };
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), 0);
	assert_non_null(fs);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_NONE);
	struct btrfsimg_super_info si;
	assert_int_equal(btrfsimg_super(fs, &si), 0);
	assert_int_equal(si.num_devices, 1);
	btrfsimg_fs_free(fs);
	/* NULL options: every default */
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, NULL), 0);
	btrfsimg_fs_free(fs);
}

/* The CLI's refusal, now the library's: through the one call ... */
static void test_partition_of_btrfs_one_call(void **state)
{
	(void)state;
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	o.fs.partition = 2;
	btrfsimg_fs *fs = NULL;
	const char *imgs[] = { plain };
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -EINVAL);
	assert_non_null(fs);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_PARTITION);
	char want[600];
	snprintf(want, sizeof(want),
		 "--partition 2: image '%s' holds btrfs itself, not a partition table; "
		 "leave --partition out", plain);
	assert_string_equal(btrfsimg_errmsg(fs), want);
	btrfsimg_fs_free(fs);
}

/* ... and step by step, which before read the image whole and ignored
 * the number. */
static void test_partition_of_btrfs_steps(void **state)
{
	(void)state;
	struct btrfsimg_open_opts oo;
	btrfsimg_open_opts_init(&oo);
	oo.partition = 1;
	btrfsimg_fs *fs = NULL;
	assert_int_equal(btrfsimg_fs_new(&fs, &oo), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, plain), 0);
	assert_int_equal(btrfsimg_open(fs), -EINVAL);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_PARTITION);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "holds btrfs itself"));
	btrfsimg_fs_free(fs);
}

/* A whole disk is not refused: its partition 1 holds no btrfs (the open
 * says so), its partition 2 is found. */
static void test_partition_of_disk(void **state)
{
	(void)state;
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	o.fs.partition = 1;
	btrfsimg_fs *fs = NULL;
	const char *imgs[] = { disk };
	int rc = btrfsimg_open_images(&fs, imgs, 1, &o);
	assert_true(rc < 0);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_OPEN);
	assert_null(strstr(btrfsimg_errmsg(fs), "holds btrfs itself"));
	assert_non_null(strstr(btrfsimg_errmsg(fs), "partition 1"));
	btrfsimg_fs_free(fs);
}

static void test_image_step(void **state)
{
	(void)state;
	btrfsimg_fs *fs = NULL;
	const char *imgs[] = { plain, "/nonexistent/btrfsimg-test.img" };
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 2, NULL), -ENOENT);
	size_t which = 99;
	assert_int_equal(btrfsimg_open_step(fs, &which), BTRFSIMG_STEP_IMAGE);
	assert_int_equal(which, 1);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "/nonexistent/btrfsimg-test.img"));
	btrfsimg_fs_free(fs);
	/* no image at all: the open says so */
	assert_int_equal(btrfsimg_open_images(&fs, NULL, 0, NULL), -EINVAL);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_OPEN);
	assert_string_equal(btrfsimg_errmsg(fs), "no device image given");
	btrfsimg_fs_free(fs);
}

static void test_options_step(void **state)
{
	(void)state;
	const char *imgs[] = { plain };
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	btrfsimg_fs *fs = NULL;
	o.volume = "novolume";
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -EINVAL);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_OPTIONS);
	assert_string_equal(btrfsimg_errmsg(fs), "volume 'novolume': expected VG/LV");
	btrfsimg_fs_free(fs);
	o = (struct btrfsimg_open_options)BTRFSIMG_OPEN_OPTIONS_INIT;
	o.format = BTRFSIMG_FORMAT_COUNT;
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -EINVAL);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_OPTIONS);
	btrfsimg_fs_free(fs);
	o = (struct btrfsimg_open_options)BTRFSIMG_OPEN_OPTIONS_INIT;
	o.kdf_limit_ms = BTRFSIMG_KDF_LIMIT_MAX_MS + 1;
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "KDF limit"));
	btrfsimg_fs_free(fs);
	/* options btrfsimg_fs_new refuses: no handle at all */
	o = (struct btrfsimg_open_options)BTRFSIMG_OPEN_OPTIONS_INIT;
	o.fs.flags = 1u << 30;
	fs = (btrfsimg_fs *)&o;
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -EINVAL);
	assert_null(fs);
	assert_int_equal(btrfsimg_open_images(NULL, imgs, 1, NULL), -EINVAL);
}

/* A caller built against an older header (a shorter struct) or a newer
 * one (a longer struct whose unknown tail is zero) is served; a newer
 * one that sets a field this library does not know is refused. */
static void test_options_size(void **state)
{
	(void)state;
	const char *imgs[] = { plain };
	struct {
		struct btrfsimg_open_options o;
		uint64_t newer;
	} big = { BTRFSIMG_OPEN_OPTIONS_INIT, 0 };
	btrfsimg_fs *fs = NULL;
	big.o.size = sizeof(big);
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &big.o), 0);
	btrfsimg_fs_free(fs);
	big.newer = 1;
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &big.o), -EINVAL);
	assert_null(fs);
	/* older: only size and fs known; format and the rest read as zero
	 * whatever lies in memory past them */
	struct btrfsimg_open_options old = BTRFSIMG_OPEN_OPTIONS_INIT;
	old.size = offsetof(struct btrfsimg_open_options, format);
	old.format = 12345;
	old.volume = "bad";
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &old), 0);
	btrfsimg_fs_free(fs);
	old.size = 0;
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &old), -EINVAL);
	assert_null(fs);
}

static void uuid_hex(const uint8_t u[16], char out[33])
{
	for (int k = 0; k < 16; k++)
		snprintf(out + 2 * k, 3, "%02X", u[k]);
}

/* --fsid: a uuid or a prefix of 8 to 32 hex digits, dashes and case free;
 * the superblock's own changes nothing; one not found is refused with the
 * list the scan found (btrfsimg_scan_filesystems, the same list). */
static void test_fsid(void **state)
{
	(void)state;
	const char *imgs[] = { plain };
	btrfsimg_fs *fs = NULL;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_set_fsid(fs, "1234567"), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "7 hex digits, expect 8 to 32"));
	assert_int_equal(btrfsimg_set_fsid(fs, "zz345678"), -EINVAL);
	assert_int_equal(btrfsimg_set_fsid(fs, "0123456789abcdef0123456789abcdef0"), -EINVAL);
	assert_int_equal(btrfsimg_set_fsid(fs, "DE6FA44D-ac3a"), 0);
	assert_int_equal(btrfsimg_set_fsid(fs, NULL), 0);
	struct btrfsimg_found_fs found[4];
	size_t n = 0;
	assert_int_equal(btrfsimg_add_device_file(fs, plain), 0);
	assert_int_equal(btrfsimg_scan_filesystems(fs, found, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_true(found[0].current);
	assert_true(found[0].supers >= 1 && found[0].blocks > 0);
	assert_int_equal(btrfsimg_scan_filesystems(fs, NULL, 0, &n), 0); /* kept */
	assert_int_equal(n, 1);
	assert_int_equal(btrfsimg_open(fs), -EINVAL); /* another handle opens */
	btrfsimg_fs_free(fs);

	char hex[33], prefix[9];
	uuid_hex(found[0].fsid, hex);
	memcpy(prefix, hex, 8);
	prefix[8] = '\0';
	struct btrfsimg_open_options o = BTRFSIMG_OPEN_OPTIONS_INIT;
	o.fsid = prefix;
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), 0);
	struct btrfsimg_super_info si;
	assert_int_equal(btrfsimg_super(fs, &si), 0);
	assert_memory_equal(si.fsid, found[0].fsid, 16);
	assert_int_equal(btrfsimg_set_fsid(fs, prefix), -EINVAL); /* open */
	assert_int_equal(btrfsimg_scan_filesystems(fs, found, 4, &n), -EINVAL);
	btrfsimg_fs_free(fs);

	o.fsid = strcmp(prefix, "00000000") ? "00000000" : "11111111";
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -ENOENT);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_OPEN);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "no such filesystem on the devices"));
	for (char *c = hex; *c; c++)
		*c = (char)(*c >= 'A' ? *c - 'A' + 'a' : *c);
	memcpy(prefix, hex, 8);
	assert_non_null(strstr(btrfsimg_errmsg(fs), prefix)); /* the list found */
	btrfsimg_fs_free(fs);
	o.fsid = "nothex!!";
	assert_int_equal(btrfsimg_open_images(&fs, imgs, 1, &o), -EINVAL);
	assert_int_equal(btrfsimg_open_step(fs, NULL), BTRFSIMG_STEP_OPTIONS);
	btrfsimg_fs_free(fs);
}

/* Every format name comes from one table: named, parsed back, the count
 * its end; the aliases. */
static void test_format_table(void **state)
{
	(void)state;
	for (int f = 0; f < BTRFSIMG_FORMAT_COUNT; f++) {
		const char *name = btrfsimg_format_name(f);
		assert_non_null(name);
		assert_int_equal(btrfsimg_format_parse(name), f);
	}
	assert_null(btrfsimg_format_name(BTRFSIMG_FORMAT_COUNT));
	assert_null(btrfsimg_format_name(-1));
	assert_int_equal(btrfsimg_format_parse("E01"), BTRFSIMG_FORMAT_EWF);
	assert_int_equal(btrfsimg_format_parse("qcow"), BTRFSIMG_FORMAT_QCOW2);
	assert_int_equal(btrfsimg_format_parse("nosuch"), -EINVAL);
	assert_int_equal(btrfsimg_format_parse(NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opens),
		cmocka_unit_test(test_partition_of_btrfs_one_call),
		cmocka_unit_test(test_partition_of_btrfs_steps),
		cmocka_unit_test(test_partition_of_disk),
		cmocka_unit_test(test_image_step),
		cmocka_unit_test(test_options_step),
		cmocka_unit_test(test_options_size),
		cmocka_unit_test(test_format_table),
		cmocka_unit_test(test_fsid),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
