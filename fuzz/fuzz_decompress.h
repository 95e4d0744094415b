/* SPDX-License-Identifier: MIT */
/*
 * Shared body of fuzz_zlib, fuzz_lzo and fuzz_zstd.
 *
 * Input: le16 d, u8 s, then the compressed extent. The output buffer is
 * d*2 + (s & 1) bytes (0..131071, malloc'd to the byte so ASan sees any
 * overrun); the LZO sector size is {4K, 8K, 16K, 64K}[(s >> 1) & 3].
 *
 * Invariants, checked on every input:
 *  - the result is 0 or -EUCLEAN (never -EINVAL: arguments are valid);
 *  - on success *outlen <= dstlen and the rest of dst is zero;
 *  - decoding into half the buffer, with the same context, also succeeds
 *    and gives the first bytes of the same output (the decoders stop when
 *    the buffer is full and never look further).
 */
#ifndef FUZZ_DECOMPRESS_H
#define FUZZ_DECOMPRESS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ondisk.h"
#include "files/compress.h"

#define FUZZ_CHECK(c) do { if (!(c)) abort(); } while (0)

static int fuzz_decompress(int type, const uint8_t *data, size_t size)
{
	static const uint32_t sectors[4] = { 4096, 8192, 16384, 65536 };
	if (size < 3)
		return 0;
	size_t dstlen = (size_t)(data[0] | data[1] << 8) * 2 + (data[2] & 1);
	uint32_t ss = sectors[(data[2] >> 1) & 3];
	const uint8_t *src = data + 3;
	size_t srclen = size - 3;

	struct bi_zctx *z = bi_zctx_new();
	uint8_t *a = malloc(dstlen ? dstlen : 1);
	uint8_t *b = malloc(dstlen / 2 ? dstlen / 2 : 1);
	FUZZ_CHECK(z && a && b);
	char why[256];
	size_t outa = 0, outb = 0;

	int rc = bi_decompress(z, type, src, srclen, a, dstlen, ss, &outa, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -EUCLEAN);
	if (rc == 0) {
		FUZZ_CHECK(outa <= dstlen);
		for (size_t i = outa; i < dstlen; i++)
			FUZZ_CHECK(a[i] == 0);
		size_t half = dstlen / 2;
		rc = bi_decompress(z, type, src, srclen, b, half, ss, &outb, why, sizeof(why));
		FUZZ_CHECK(rc == 0);
		FUZZ_CHECK(outb == (outa < half ? outa : half));
		FUZZ_CHECK(memcmp(a, b, outb) == 0);
	} else {
		FUZZ_CHECK(why[0] != '\0');
	}
	free(b);
	free(a);
	bi_zctx_free(z);
	return 0;
}

#endif
