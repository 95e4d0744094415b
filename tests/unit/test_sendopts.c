// SPDX-License-Identifier: MIT
/*
 * struct btrfsimg_send_opts as a sized options struct (base/sized.c), on
 * the kernel-made snapshots of testdata/diff: the stream of an older
 * caller's smaller struct is the stream of the defaults for the fields it
 * does not have (even with bytes set past its size); a larger struct with
 * zero bytes past what the library knows gives the same stream; a set
 * byte there, or a size of 0, is refused with -EINVAL and a message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "btrfsimg.h"
#include "unpack.h"

#define S1 257 /* testdata/diff/snapshots.json */

/* The stream's length and an FNV-1a hash of its bytes. */
struct digest {
	uint64_t len, hash;
};

static int take(void *ctx, const void *buf, size_t len)
{
	struct digest *d = ctx;
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		d->hash = (d->hash ^ p[i]) * 1099511628211u;
	d->len += len;
	return 0;
}

static int send_digest(btrfsimg_fs *fs, const void *opts, struct digest *d)
{
	*d = (struct digest){ 0, 14695981039346656037u };
	return btrfsimg_send(fs, opts, take, d, NULL);
}

/* An older caller's struct, then bytes a newer header would have. */
struct grown {
	struct btrfsimg_send_opts o;
	uint64_t future;
};

static void sizes(void **state)
{
	(void)state;
	char *img = unpack_zst(TESTDATA "/diff/diff.img.zst", NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);

	struct btrfsimg_send_opts o = BTRFSIMG_SEND_OPTS_INIT;
	o.subvol = S1;
	struct digest want, got;
	assert_int_equal(send_digest(fs, &o, &want), 0);
	assert_true(want.len > 4096);

	/* an older caller that knew nothing past nclone_sources: proto and
	 * flags, set in its memory beyond its size, are the defaults */
	struct btrfsimg_send_opts old = o;
	old.size = offsetof(struct btrfsimg_send_opts, proto);
	old.proto = 2;
	old.flags = BTRFSIMG_SEND_COMPRESSED_DATA;
	assert_int_equal(send_digest(fs, &old, &got), 0);
	assert_true(got.len == want.len && got.hash == want.hash);

	/* proto 2 given in full is another stream: the test can tell */
	struct btrfsimg_send_opts v2 = o;
	v2.proto = 2;
	assert_int_equal(send_digest(fs, &v2, &got), 0);
	assert_true(got.hash != want.hash);

	/* a newer caller's larger struct: zero past what is known is fine */
	struct grown g = { .o = o, .future = 0 };
	g.o.size = sizeof(g);
	assert_int_equal(send_digest(fs, &g, &got), 0);
	assert_true(got.len == want.len && got.hash == want.hash);

	/* ... a field this library does not know, set, is refused */
	g.future = 1;
	assert_int_equal(send_digest(fs, &g, &got), -EINVAL);
	assert_int_equal(got.len, 0);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "past the"));

	/* a struct not from BTRFSIMG_SEND_OPTS_INIT (size 0) */
	struct btrfsimg_send_opts zero = { .subvol = S1 };
	assert_int_equal(send_digest(fs, &zero, &got), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "BTRFSIMG_SEND_OPTS_INIT"));

	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
