// SPDX-License-Identifier: MIT
/*
 * Scattered O_DIRECT reads with many in flight (bi_aio_*, 1-image/direct.c),
 * as the inode enumeration reads leaves that are not in the page cache.
 *
 * Every byte a read hands back must equal the file's byte at that offset
 * (a pattern written by the test), for more reads than one io_submit
 * gathers, in any order of completion, on a device starting at an image
 * offset; the last block of a file whose size is not a multiple of 4 KiB
 * comes back short. Whatever O_DIRECT cannot read (an unaligned offset,
 * length or buffer, a device at an unaligned image offset, a range past
 * the device, memory) is refused with -EINVAL before anything is started,
 * more than the depth with -EAGAIN. The page cache question: the pattern
 * just written is cached; once synced and dropped (POSIX_FADV_DONTNEED),
 * it is not (but on tmpfs); memory is unknown.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <cmocka.h>

#include "0-base/handle.h"
#include "1-image/dev.h"
#include "1-image/direct.h"

#define SIZE ((1u << 20) + 1234u)

static uint8_t pat(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull;
	return (uint8_t)(x >> 56) ^ (uint8_t)i;
}

static char *pattern_file(const char *dir)
{
	char *path = malloc(4096);
	snprintf(path, 4096, "%s/btrfsimg-aio.XXXXXX", dir);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	uint8_t *b = malloc(SIZE);
	for (uint32_t i = 0; i < SIZE; i++)
		b[i] = pat(i);
	assert_int_equal(pwrite(fd, b, SIZE, 0), (ssize_t)SIZE);
	free(b);
	close(fd);
	return path;
}

static struct bi_dev file_dev(const char *path, uint64_t base)
{
	struct bi_dev d = { .name = (char *)path };
	d.fd = open(path, O_RDONLY);
	assert_true(d.fd >= 0);
	d.raw_size = (uint64_t)lseek(d.fd, 0, SEEK_END);
	d.base = base;
	d.size = d.raw_size - base;
	return d;
}

static void test_aio_reads(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	const char *dir = tmp && *tmp ? tmp : "/tmp";
	char *path = pattern_file(dir);
	int probe = open(path, O_RDONLY | O_DIRECT);
	if (probe < 0) {
		print_message("%s refuses O_DIRECT: leaves are read through the page cache\n", dir);
		unlink(path);
		free(path);
		skip();
		return;
	}
	close(probe);
	struct bi_dev d = file_dev(path, 4096);
	struct bi_aio *a = bi_aio_open(64);
	if (!a) {
		print_message("no native AIO here: leaves are read through the page cache\n");
		close(d.fd);
		unlink(path);
		free(path);
		skip();
		return;
	}

	/* just written: cached; synced and dropped: not */
	assert_int_equal(bi_aio_cached(a, &d, 8192, 16384), 1);
	assert_int_equal(fdatasync(d.fd), 0);
	assert_int_equal(posix_fadvise(d.fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	struct statfs sf;
	assert_int_equal(fstatfs(d.fd, &sf), 0);
	if (sf.f_type != TMPFS_MAGIC) /* tmpfs: the page cache is the file */
		assert_int_equal(bi_aio_cached(a, &d, 8192, 16384), 0);
	assert_true(bi_aio_cached(a, &d, d.size, 4096) < 0); /* past the device */

	/* 40 reads (more than one io_submit gathers), every other 4 KiB block
	 * of the device, backwards, 4 or 8 KiB each */
	enum { N = 40 };
	uint8_t *buf[N];
	size_t len[N];
	uint64_t off[N];
	for (int i = 0; i < N; i++) {
		assert_int_equal(posix_memalign((void **)&buf[i], 4096, 8192), 0);
		off[i] = (uint64_t)(N - i) * 8192;
		len[i] = i % 2 ? 8192 : 4096;
		assert_int_equal(bi_aio_submit(a, &d, off[i], buf[i], len[i], (uint64_t)i + 100),
				 0);
	}
	assert_int_equal(bi_aio_inflight(a), N);
	bool seen[N] = { false };
	unsigned got = 0;
	while (bi_aio_inflight(a)) {
		uint64_t tags[8];
		int res[8];
		unsigned n = bi_aio_reap(a, true, tags, res, 8);
		assert_true(n >= 1 && n <= 8);
		for (unsigned k = 0; k < n; k++) {
			assert_true(tags[k] >= 100 && tags[k] < 100 + N);
			int i = (int)(tags[k] - 100);
			assert_false(seen[i]);
			seen[i] = true;
			assert_int_equal(res[k], (int)len[i]);
			for (size_t j = 0; j < len[i]; j++)
				if (buf[i][j] != pat(d.base + off[i] + j))
					fail_msg("read %d byte %zu differs", i, j);
			got++;
		}
	}
	assert_int_equal(got, N);
	uint64_t tag;
	int res;
	assert_int_equal(bi_aio_reap(a, true, &tag, &res, 1), 0); /* nothing in flight */

	/* the file's last block: short */
	uint64_t last = (SIZE - d.base) / 4096 * 4096;
	assert_int_equal(bi_aio_submit(a, &d, last, buf[0], 4096, 7),
			 -EINVAL); /* past the device */
	struct bi_dev whole = file_dev(path, 0);
	assert_int_equal(bi_aio_submit(a, &whole, 1u << 20, buf[0], 1234, 7), -EINVAL);
	whole.size = 1u << 21; /* as if the image were cut while open */
	assert_int_equal(bi_aio_submit(a, &whole, 1u << 20, buf[0], 4096, 7), 0);
	assert_int_equal(bi_aio_reap(a, true, &tag, &res, 1), 1);
	assert_int_equal(tag, 7);
	assert_int_equal(res, 1234);
	for (int j = 0; j < 1234; j++)
		assert_int_equal(buf[0][j], pat((1u << 20) + (unsigned)j));

	/* refused before anything starts */
	assert_int_equal(bi_aio_submit(a, &d, 1000, buf[0], 4096, 1), -EINVAL);
	assert_int_equal(bi_aio_submit(a, &d, 4096, buf[0] + 512, 4096, 1), -EINVAL);
	assert_int_equal(bi_aio_submit(a, &d, 4096, buf[0], 1000, 1), -EINVAL);
	struct bi_dev odd = file_dev(path, 1000);
	assert_int_equal(bi_aio_submit(a, &odd, 4096, buf[0], 4096, 1), -EINVAL);
	static const uint8_t mem[8192];
	struct bi_dev m = {
		.name = "mem", .fd = -1, .mem = mem, .size = sizeof(mem), .raw_size = sizeof(mem)
	};
	assert_int_equal(bi_aio_submit(a, &m, 0, buf[0], 4096, 1), -EINVAL);
	assert_true(bi_aio_cached(a, &m, 0, 4096) < 0);
	assert_int_equal(bi_aio_inflight(a), 0);
	bi_aio_close(a);

	/* no more than the depth in flight; close waits for them */
	a = bi_aio_open(2);
	assert_non_null(a);
	assert_int_equal(bi_aio_submit(a, &d, 0, buf[0], 4096, 1), 0);
	assert_int_equal(bi_aio_submit(a, &d, 4096, buf[1], 4096, 2), 0);
	assert_int_equal(bi_aio_submit(a, &d, 8192, buf[2], 4096, 3), -EAGAIN);
	bi_aio_close(a);
	assert_null(bi_aio_open(0));
	assert_null(bi_aio_open(1025));

	for (int i = 0; i < N; i++)
		free(buf[i]);
	close(odd.fd);
	close(whole.fd);
	close(d.fd);
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aio_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
