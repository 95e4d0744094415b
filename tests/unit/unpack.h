/* SPDX-License-Identifier: MIT */
/* Unit tests that need a committed image as a file: unpack it (cmocka
 * asserts; include after cmocka.h). */
#ifndef BTRFSIMG_TESTS_UNPACK_H
#define BTRFSIMG_TESTS_UNPACK_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* Unpack @zst into a new sparse file (zero blocks are skipped), using the
 * file @ref as the patch reference if given. Returns the path (free it). */
static char *unpack_zst(const char *zst, const char *ref)
{
	FILE *in = fopen(zst, "rb");
	if (!in)
		fail_msg("cannot open %s", zst);
	const char *tmp = getenv("TMPDIR");
	char *path = malloc(4096);
	snprintf(path, 4096, "%s/btrfsimg-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	assert_false(ZSTD_isError(ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 31)));
	void *map = NULL;
	size_t maplen = 0;
	if (ref) {
		int rfd = open(ref, O_RDONLY);
		struct stat st;
		assert_true(rfd >= 0 && fstat(rfd, &st) == 0);
		maplen = (size_t)st.st_size;
		map = mmap(NULL, maplen, PROT_READ, MAP_PRIVATE, rfd, 0);
		assert_true(map != MAP_FAILED);
		close(rfd);
		assert_false(ZSTD_isError(ZSTD_DCtx_refPrefix(dc, map, maplen)));
	}
	size_t inlen = ZSTD_DStreamInSize(), outlen = 1u << 20;
	uint8_t *ib = malloc(inlen), *ob = malloc(outlen), *zero = calloc(1, 65536);
	uint64_t pos = 0;
	size_t got;
	while ((got = fread(ib, 1, inlen, in)) > 0) {
		ZSTD_inBuffer zi = { ib, got, 0 };
		while (zi.pos < zi.size) {
			ZSTD_outBuffer zo = { ob, outlen, 0 };
			size_t rc = ZSTD_decompressStream(dc, &zo, &zi);
			if (ZSTD_isError(rc))
				fail_msg("%s: %s", zst, ZSTD_getErrorName(rc));
			for (size_t o = 0; o < zo.pos; o += 65536) {
				size_t n = zo.pos - o < 65536 ? zo.pos - o : 65536;
				if (memcmp(ob + o, zero, n) != 0)
					assert_int_equal(pwrite(fd, ob + o, n, (off_t)(pos + o)), (ssize_t)n);
			}
			pos += zo.pos;
		}
	}
	assert_int_equal(ftruncate(fd, (off_t)pos), 0);
	close(fd);
	fclose(in);
	free(ib);
	free(ob);
	free(zero);
	if (map)
		munmap(map, maplen);
	ZSTD_freeDCtx(dc);
	return path;
}

#endif
