// SPDX-License-Identifier: MIT
/*
 * Scattered reads with many in flight (bi_aio_*, image/ring.c), as the
 * inode enumeration reads a tree's leaves: through the page cache by
 * io_uring, or with O_DIRECT by native AIO.
 *
 * Through the page cache: every byte equals the file's, at any offset,
 * length and buffer, for more reads than a batch gathers, whether the
 * file's pages were cached or dropped before, and the pages read are
 * cached after; the last block of the file comes back short; a range
 * past the device and a device in memory are refused; no more than the
 * depth in flight.
 *
 * O_DIRECT:
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

#include "base/handle.h"
#include "image/dev.h"
#include "image/ring.h"
#include "patfile.h"

#define SIZE ((1u << 20) + 1234u)

/* Reads of @n ranges (offset off[i], length len[i], into buf[i]), tags
 * 100 + i, all in flight, then every one reaped and its bytes checked. */
static void read_and_check(struct bi_aio *a, const struct bi_dev *d, int n, uint8_t **buf,
			   const uint64_t *off, const size_t *len)
{
	assert_true(n > 0 && n <= 64);
	for (int i = 0; i < n; i++)
		assert_int_equal(bi_aio_submit(a, d, off[i], buf[i], len[i], (uint64_t)i + 100), 0);
	assert_int_equal(bi_aio_inflight(a), (unsigned)n);
	bool seen[64] = { false };
	int got = 0;
	while (bi_aio_inflight(a)) {
		uint64_t tags[8];
		int res[8];
		unsigned k = bi_aio_reap(a, true, tags, res, 8);
		assert_true(k >= 1 && k <= 8);
		for (unsigned j = 0; j < k; j++) {
			assert_true(tags[j] >= 100 && tags[j] < 100 + (uint64_t)n);
			int i = (int)(tags[j] - 100);
			assert_false(seen[i]);
			seen[i] = true;
			assert_int_equal(res[j], (int)len[i]);
			for (size_t b = 0; b < len[i]; b++)
				if (buf[i][b] != pat(d->base + off[i] + b))
					fail_msg("read %d byte %zu differs", i, b);
			got++;
		}
	}
	assert_int_equal(got, n);
}

static void test_aio_reads(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	const char *dir = tmp && *tmp ? tmp : "/tmp";
	char *path = pattern_file(dir, SIZE);
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
	struct bi_aio *a = bi_aio_open(64, false);
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
	}
	read_and_check(a, &d, N, buf, off, len);
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
	a = bi_aio_open(2, false);
	assert_non_null(a);
	assert_int_equal(bi_aio_submit(a, &d, 0, buf[0], 4096, 1), 0);
	assert_int_equal(bi_aio_submit(a, &d, 4096, buf[1], 4096, 2), 0);
	assert_int_equal(bi_aio_submit(a, &d, 8192, buf[2], 4096, 3), -EAGAIN);
	bi_aio_close(a);
	assert_null(bi_aio_open(0, false));
	assert_null(bi_aio_open(1025, false));

	for (int i = 0; i < N; i++)
		free(buf[i]);
	close(odd.fd);
	close(whole.fd);
	close(d.fd);
	unlink(path);
	free(path);
}

static void test_buffered_reads(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	const char *dir = tmp && *tmp ? tmp : "/tmp";
	char *path = pattern_file(dir, SIZE);
	struct bi_dev d = file_dev(path, 1000); /* any image offset */
	struct bi_aio *a = bi_aio_open(64, true);
	assert_non_null(a);
	if (!bi_aio_buffered(a)) {
		print_message("no io_uring here: leaves not cached are read with O_DIRECT\n");
		bi_aio_close(a);
		close(d.fd);
		unlink(path);
		free(path);
		skip();
		return;
	}
	/* 50 reads (more than a batch), odd offsets and lengths, backwards,
	 * into buffers at odd addresses; once as written (cached), once with
	 * the file's pages dropped (read from the disk), then cached again */
	enum { N = 50 };
	uint8_t *mem[N], *buf[N];
	size_t len[N];
	uint64_t off[N];
	for (int i = 0; i < N; i++) {
		mem[i] = malloc(20000);
		assert_non_null(mem[i]);
		buf[i] = mem[i] + i % 7;
		off[i] = (uint64_t)(N - i) * 17000 + (uint64_t)i * 3;
		len[i] = 1 + (size_t)i * 389 % 16384;
	}
	read_and_check(a, &d, N, buf, off, len);
	assert_int_equal(fdatasync(d.fd), 0);
	assert_int_equal(posix_fadvise(d.fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	struct statfs sf;
	assert_int_equal(fstatfs(d.fd, &sf), 0);
	bool dropped = sf.f_type != TMPFS_MAGIC && bi_aio_cached(a, &d, 17000 * 10, 4096) == 0;
	read_and_check(a, &d, N, buf, off, len);
	if (dropped) /* what was read is in the cache now */
		assert_int_equal(bi_aio_cached(a, &d, off[N / 2], len[N / 2]), 1);

	/* the file's last bytes: short; past the device, memory: refused */
	uint64_t tag;
	int res;
	struct bi_dev whole = file_dev(path, 0);
	assert_int_equal(bi_aio_submit(a, &whole, SIZE - 100, buf[0], 200, 7), -EINVAL);
	whole.size = SIZE + 4096; /* as if the image were cut while open */
	assert_int_equal(bi_aio_submit(a, &whole, SIZE - 100, buf[0], 200, 7), 0);
	assert_int_equal(bi_aio_reap(a, true, &tag, &res, 1), 1);
	assert_int_equal(tag, 7);
	assert_int_equal(res, 100);
	for (int j = 0; j < 100; j++)
		assert_int_equal(buf[0][j], pat(SIZE - 100 + (unsigned)j));
	static const uint8_t bytes[8192];
	struct bi_dev m = {
		.name = "mem", .fd = -1, .mem = bytes, .size = sizeof(bytes), .raw_size = sizeof(bytes)
	};
	assert_int_equal(bi_aio_submit(a, &m, 0, buf[0], 4096, 1), -EINVAL);
	assert_int_equal(bi_aio_inflight(a), 0);
	assert_int_equal(bi_aio_reap(a, true, &tag, &res, 1), 0); /* nothing in flight */
	bi_aio_close(a);

	/* no more than the depth in flight; close waits for them */
	a = bi_aio_open(2, true);
	assert_non_null(a);
	assert_true(bi_aio_buffered(a));
	assert_int_equal(bi_aio_submit(a, &d, 0, buf[0], 4096, 1), 0);
	assert_int_equal(bi_aio_submit(a, &d, 5, buf[1], 4096, 2), 0);
	assert_int_equal(bi_aio_submit(a, &d, 9, buf[2], 4096, 3), -EAGAIN);
	bi_aio_close(a);

	for (int i = 0; i < N; i++)
		free(mem[i]);
	close(whole.fd);
	close(d.fd);
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aio_reads),
		cmocka_unit_test(test_buffered_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
