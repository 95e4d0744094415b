/* SPDX-License-Identifier: MIT */
/*
 * Decompressors against independent truth:
 *  - round trips of data compressed here by the reference libraries (zlib
 *    compress2/deflate, ZSTD_compress, lzo1x_1_compress); the btrfs LZO
 *    framing is built by hand in this file from the format description,
 *    including segments that end 0..4 bytes before a sector end;
 *  - must-fail inputs: truncated streams, lying lengths, bad headers,
 *    oversized windows and segments, each checked for -EUCLEAN and a reason
 *    naming the byte offset;
 *  - extents the kernel compressed (testdata/compress/, see its README),
 *    checked against the sha256 of what the kernel read back.
 * Destination buffers are malloc'd at exactly dstlen so that sanitizer
 * builds catch any write past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lzo/lzo1x.h>
#include <sodium.h>
#include <zlib.h>
#include <zstd.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "files/compress.h"

static struct bi_zctx *zc;
static char why[256];

static int setup(void **state)
{
	(void)state;
	if (lzo_init() != LZO_E_OK)	/* for lzo1x_1_compress */
		return -1;
	zc = bi_zctx_new();
	return zc ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	bi_zctx_free(zc);
	return 0;
}

/* Lines of text with pseudo-random tokens and runs: compresses to ~40%. */
static uint8_t *make_data(size_t n, uint32_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	assert_non_null(p);
	uint32_t x = seed | 1;
	size_t i = 0;
	while (i < n) {
		char line[96];
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		int k = snprintf(line, sizeof(line), "%06zu btrfs extent token %08x %.*s\n", i,
				 (unsigned)x, (int)(x % 40), "........................................");
		for (int j = 0; j < k && i < n; j++)
			p[i++] = (uint8_t)line[j];
	}
	return p;
}

static uint8_t *make_random(size_t n, uint32_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	assert_non_null(p);
	uint32_t x = seed | 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)(x >> 11);
	}
	return p;
}

/* Decompress into an exact-size buffer; returns the error code. */
static int dec(int type, const uint8_t *src, size_t srclen, size_t dstlen, uint32_t ss,
	       uint8_t **dst, size_t *outlen)
{
	*dst = malloc(dstlen ? dstlen : 1);
	assert_non_null(*dst);
	memset(*dst, 0xAA, dstlen);
	*outlen = (size_t)-1;
	why[0] = 'X';
	return bi_decompress(zc, type, src, srclen, *dst, dstlen, ss, outlen, why, sizeof(why));
}

static void expect_ok(int type, const uint8_t *src, size_t srclen, size_t dstlen, uint32_t ss,
		      const uint8_t *want, size_t wantlen)
{
	uint8_t *dst;
	size_t out;
	int rc = dec(type, src, srclen, dstlen, ss, &dst, &out);
	if (rc)
		fprintf(stderr, "unexpected failure %d: %s\n", rc, why);
	assert_int_equal(rc, 0);
	assert_int_equal(out, wantlen);
	assert_memory_equal(dst, want, wantlen);
	for (size_t i = wantlen; i < dstlen; i++)	/* a short result is zero-padded */
		assert_int_equal(dst[i], 0);
	free(dst);
}

static void expect_corrupt(int type, const uint8_t *src, size_t srclen, size_t dstlen,
			   uint32_t ss, const char *reason)
{
	uint8_t *dst;
	size_t out;
	int rc = dec(type, src, srclen, dstlen, ss, &dst, &out);
	if (rc != -EUCLEAN || !strstr(why, reason) || !strstr(why, "byte"))
		fprintf(stderr, "want -EUCLEAN '%s', got %d '%s'\n", reason, rc, why);
	assert_int_equal(rc, -EUCLEAN);
	assert_non_null(strstr(why, reason));
	assert_non_null(strstr(why, "byte"));
	free(dst);
}

/* ================================================================ zlib */

static uint8_t *zlib_make(const uint8_t *data, size_t len, int wbits, size_t *clen)
{
	z_stream s;
	memset(&s, 0, sizeof(s));
	assert_int_equal(deflateInit2(&s, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	size_t cap = deflateBound(&s, len) + 8192;
	uint8_t *out = calloc(1, cap);	/* zero tail = sector padding */
	assert_non_null(out);
	s.next_in = (Bytef *)(uintptr_t)data;
	s.avail_in = (uInt)len;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	assert_int_equal(deflate(&s, Z_FINISH), Z_STREAM_END);
	*clen = s.total_out;
	deflateEnd(&s);
	return out;
}

static void test_zlib_roundtrip(void **state)
{
	(void)state;
	size_t n = 128 * 1024, clen;
	uint8_t *data = make_data(n, 1);
	uint8_t *c = zlib_make(data, n, 15, &clen);
	assert_int_equal(c[0], 0x78);

	expect_ok(COMPRESS_ZLIB, c, clen, n, 4096, data, n);
	/* sector padding after the stream is ignored */
	expect_ok(COMPRESS_ZLIB, c, clen + 4000, n, 4096, data, n);
	/* a larger buffer: the stream's end decides */
	expect_ok(COMPRESS_ZLIB, c, clen, n + 100, 4096, data, n);
	/* a smaller buffer: stop when full */
	expect_ok(COMPRESS_ZLIB, c, clen, 1000, 4096, data, 1000);
	expect_ok(COMPRESS_ZLIB, c, clen, 1, 4096, data, 1);

	/* the kernel inflates raw after the header: adler32 is not checked */
	c[clen - 1] ^= 0xff;
	expect_ok(COMPRESS_ZLIB, c, clen, n, 4096, data, n);
	/* nor does it need to be there at all */
	expect_ok(COMPRESS_ZLIB, c, clen - 4, n, 4096, data, n);
	free(c);

	/* a 512-byte window announced in the header (CINFO 1) */
	c = zlib_make(data, n, 9, &clen);
	assert_int_equal(c[0] >> 4, 1);
	expect_ok(COMPRESS_ZLIB, c, clen, n, 4096, data, n);
	free(c);

	/* empty input */
	c = zlib_make(data, 0, 15, &clen);
	expect_ok(COMPRESS_ZLIB, c, clen, 4096, 4096, data, 0);
	free(c);
	free(data);
}

static void test_zlib_corrupt(void **state)
{
	(void)state;
	size_t n = 64 * 1024, clen;
	uint8_t *data = make_data(n, 2);
	uint8_t *c = zlib_make(data, n, 15, &clen);

	/* truncated: no final block before the input ends */
	expect_corrupt(COMPRESS_ZLIB, c, clen / 2, n, 4096, "truncated");
	expect_corrupt(COMPRESS_ZLIB, c, 2, n, 4096, "too short");

	uint8_t h[8];
	memcpy(h, c, sizeof(h));
	h[1] ^= 1;	/* FCHECK no longer makes CMF*256+FLG a multiple of 31 */
	expect_corrupt(COMPRESS_ZLIB, h, sizeof(h), n, 4096, "header");
	memcpy(h, c, sizeof(h));
	h[0] = 0x77;	/* method 7 */
	h[1] = (uint8_t)(31 - (0x7700 % 31));
	expect_corrupt(COMPRESS_ZLIB, h, sizeof(h), n, 4096, "header");
	h[0] = 0x78;	/* preset dictionary (FDICT) with a valid FCHECK */
	h[1] = 0x20;
	h[1] = (uint8_t)(h[1] + (31 - (((0x78 << 8) | h[1]) % 31)) % 31);
	assert_true(h[1] & 0x20);
	expect_corrupt(COMPRESS_ZLIB, h, sizeof(h), n, 4096, "header");
	h[0] = 0x88;	/* CINFO 8: a 64 KiB window is not deflate */
	h[1] = (uint8_t)((31 - ((0x88 << 8) % 31)) % 31);
	expect_corrupt(COMPRESS_ZLIB, h, sizeof(h), n, 4096, "window");
	static const uint8_t gz[] = { 0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0 };
	expect_corrupt(COMPRESS_ZLIB, gz, sizeof(gz), n, 4096, "header");

	/* BFINAL=1 BTYPE=3: a reserved block type */
	static const uint8_t bad_block[] = { 0x78, 0x9c, 0x07, 0x00, 0x00, 0x00 };
	expect_corrupt(COMPRESS_ZLIB, bad_block, sizeof(bad_block), n, 4096, "block type");

	/* a stored block whose LEN/NLEN disagree */
	static const uint8_t bad_stored[] = { 0x78, 0x9c, 0x01, 0x05, 0x00, 0x00, 0x00, 'a' };
	expect_corrupt(COMPRESS_ZLIB, bad_stored, sizeof(bad_stored), n, 4096, "stored");
	free(c);
	free(data);
}

/* ================================================================ zstd */

static uint8_t *zstd_make(const uint8_t *data, size_t len, int wlog, int checksum, size_t *clen)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	assert_non_null(cc);
	size_t cap = ZSTD_compressBound(len) + 8192;
	uint8_t *out = calloc(1, cap);
	assert_non_null(out);
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 3)));
	if (wlog)
		assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, wlog)));
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, checksum)));
	*clen = ZSTD_compress2(cc, out, cap, data, len);
	assert_false(ZSTD_isError(*clen));
	ZSTD_freeCCtx(cc);
	return out;
}

static void test_zstd_roundtrip(void **state)
{
	(void)state;
	size_t n = 128 * 1024, clen;
	uint8_t *data = make_data(n, 3);
	uint8_t *c = zstd_make(data, n, 0, 0, &clen);

	expect_ok(COMPRESS_ZSTD, c, clen, n, 4096, data, n);
	expect_ok(COMPRESS_ZSTD, c, clen + 4000, n, 4096, data, n);	/* padding */
	expect_ok(COMPRESS_ZSTD, c, clen, n + 100, 4096, data, n);
	/* a frame longer than the buffer is cut there, as the kernel stops */
	expect_ok(COMPRESS_ZSTD, c, clen, 5000, 4096, data, 5000);
	expect_ok(COMPRESS_ZSTD, c, clen, 1, 4096, data, 1);
	free(c);

	/* one-shot ZSTD_compress (what btrfs-progs uses) */
	size_t cap = ZSTD_compressBound(n);
	c = malloc(cap);
	assert_non_null(c);
	clen = ZSTD_compress(c, cap, data, n, 1);
	assert_false(ZSTD_isError(clen));
	expect_ok(COMPRESS_ZSTD, c, clen, n, 4096, data, n);
	free(c);

	/* with a checksum: a flipped byte is caught when read to the end */
	c = zstd_make(data, n, 17, 1, &clen);
	expect_ok(COMPRESS_ZSTD, c, clen, n + 1, 4096, data, n);
	c[clen / 2] ^= 0x55;
	expect_corrupt(COMPRESS_ZSTD, c, clen, n + 1, 4096, "corrupt");
	free(c);
	free(data);
}

static void test_zstd_corrupt(void **state)
{
	(void)state;
	size_t n = 128 * 1024, clen;
	uint8_t *data = make_data(n, 4);
	uint8_t *c = zstd_make(data, n, 0, 0, &clen);

	expect_corrupt(COMPRESS_ZSTD, c, clen / 2, n, 4096, "truncated");
	expect_corrupt(COMPRESS_ZSTD, c, 3, n, 4096, "too short");
	uint8_t save = c[0];
	c[0] = 0x27;	/* 0xFD2FB527: a v0.7 legacy frame; the kernel has no legacy */
	expect_corrupt(COMPRESS_ZSTD, c, clen, n, 4096, "magic");
	c[0] = save;
	c[3] = 0;
	expect_corrupt(COMPRESS_ZSTD, c, clen, n, 4096, "magic");
	free(c);
	free(data);

	/* a 512 KiB window with the content size given: the buffers are the
	 * content, which the kernel's workspace holds */
	n = 512 * 1024;
	data = make_random(n, 5);
	c = zstd_make(data, n, 19, 0, &clen);
	expect_ok(COMPRESS_ZSTD, c, clen, 4096, 4096, data, 4096);
	free(c);
	free(data);
}

/* The frame of @c (single segment, 2-byte content size, as zstd_make makes
 * a small one) given another header: @fhd and window descriptor @wd, then
 * the content size @fcs in 0, 2 or 4 bytes as @fhd says. */
static uint8_t *zstd_reheader(const uint8_t *c, size_t clen, uint8_t fhd, uint8_t wd,
			      uint32_t fcs, size_t *outlen)
{
	assert_int_equal(c[4], 0x60); /* FCS 2 bytes, single segment, no dict id */
	static const size_t fcs_bytes[4] = { 0, 2, 4, 8 };
	size_t nf = fcs_bytes[fhd >> 6];
	uint8_t *o = calloc(1, clen + 16);
	assert_non_null(o);
	memcpy(o, c, 4);
	o[4] = fhd;
	o[5] = wd;
	uint32_t v = nf == 2 ? fcs - 256 : fcs;
	for (size_t i = 0; i < nf; i++)
		o[6 + i] = (uint8_t)(v >> (8 * i));
	memcpy(o + 6 + nf, c + 7, clen - 7);
	*outlen = clen - 7 + 6 + nf;
	return o;
}

/* Whether a frame decodes is the kernel's rule: its stream buffers must fit
 * the workspace (see compress.c). Each vector is a 20,000-byte extent whose
 * header was rewritten and read by Linux 6.18 from a loop-mounted image
 * (rescue=ignoredatacsums), with the kernel's verdict: window descriptor
 * 0x64 is 6 MiB, 0x38 128 KiB, 0x40 256 KiB, 0x58 2 MiB, 0x5a 2.5 MiB,
 * 0x5b 2.75 MiB, 0x5c 3 MiB. */
static void test_zstd_kernel_workspace(void **state)
{
	(void)state;
	size_t n = 20000, clen, len;
	uint8_t *data = make_data(n, 6);
	uint8_t *c = zstd_make(data, n, 0, 0, &clen);
	static const struct {
		uint8_t fhd, wd;
		bool ok;
	} v[] = {
		{ 0x40, 0x64, true },	/* 6 MiB window, content size 20000: read */
		{ 0x00, 0x38, true },	/* no content size: 128 KiB read */
		{ 0x00, 0x40, true },	/* 256 KiB read */
		{ 0x00, 0x58, true },	/* 2 MiB read */
		{ 0x00, 0x5a, true },	/* 2.5 MiB read */
		{ 0x00, 0x5b, false },	/* 2.75 MiB: error 64, memory_allocation */
		{ 0x00, 0x5c, false },	/* 3 MiB: error 64 */
		{ 0x00, 0x64, false },	/* 6 MiB: error 64 */
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint8_t *f = zstd_reheader(c, clen, v[i].fhd, v[i].wd, (uint32_t)n, &len);
		if (v[i].ok) {
			expect_ok(COMPRESS_ZSTD, f, len, 20480, 4096, data, n);
			/* the verdict does not depend on how much is asked for */
			expect_ok(COMPRESS_ZSTD, f, len, 1000, 4096, data, 1000);
		} else {
			expect_corrupt(COMPRESS_ZSTD, f, len, 20480, 4096, "window too large");
			expect_corrupt(COMPRESS_ZSTD, f, len, 1000, 4096, "window too large");
		}
		free(f);
	}
	/* 1 MiB window and content size 1 MiB: the buffers fit, but the frame
	 * ends at 20,000 bytes (the kernel: error 20, corruption_detected) */
	uint8_t *f = zstd_reheader(c, clen, 0x80, 0x50, 1u << 20, &len);
	expect_corrupt(COMPRESS_ZSTD, f, len, 20480, 4096, "corrupt");
	free(f);
	free(c);
	free(data);
}

/* A skippable frame ends the extent: the kernel's loop stops at the first
 * frame end, so nothing comes out and the caller zero-fills. */
static void test_zstd_skippable(void **state)
{
	(void)state;
	uint8_t buf[64] = { 0 };
	bi_put_le32(buf, 0x184D2A50);
	bi_put_le32(buf + 4, 4);
	memcpy(buf + 8, "junk", 4);
	uint8_t *d;
	size_t out;
	assert_int_equal(dec(COMPRESS_ZSTD, buf, sizeof(buf), 4096, 4096, &d, &out), 0);
	assert_int_equal(out, 0);
	free(d);
	bi_put_le32(buf + 4, 1000);	/* skippable frame longer than the extent */
	expect_corrupt(COMPRESS_ZSTD, buf, sizeof(buf), 4096, 4096, "truncated");
}

/* ================================================================ lzo */

struct lzo_out {
	uint8_t *buf;
	size_t len;		/* total_len */
	size_t cap;
	int pads[5];		/* padding events by width (1..3) */
	size_t seg_at[64];	/* where each segment header is */
	int nsegs;
};

/* The btrfs framing, written from the format description: total_len, then
 * per sector of input one segment (le32 length + lzo1x data); when fewer
 * than 4 bytes remain in the sector after a segment, zeros pad it. The
 * kernel pads after the last segment too, and total_len counts that. */
static void lzo_frame(const uint8_t *data, size_t len, uint32_t ss, size_t seg_in,
		      struct lzo_out *o)
{
	void *wrk = malloc(LZO1X_1_MEM_COMPRESS);
	uint8_t *tmp = malloc(seg_in + seg_in / 16 + 64 + 3);
	assert_non_null(wrk);
	assert_non_null(tmp);
	memset(o, 0, sizeof(*o));
	o->cap = 4 + (len / seg_in + 2) * (seg_in + seg_in / 16 + 64 + 3 + 8) + ss;
	o->buf = calloc(1, o->cap);
	assert_non_null(o->buf);
	size_t cur = 4;
	for (size_t off = 0; off < len; off += seg_in) {
		size_t n = len - off < seg_in ? len - off : seg_in;
		lzo_uint clen = 0;
		assert_int_equal(lzo1x_1_compress(data + off, n, tmp, &clen, wrk), LZO_E_OK);
		assert_true(o->nsegs < 64);
		o->seg_at[o->nsegs++] = cur;
		bi_put_le32(o->buf + cur, (uint32_t)clen);
		memcpy(o->buf + cur + 4, tmp, clen);
		cur += 4 + clen;
		size_t left = ss - cur % ss;
		if (left < 4) {
			o->pads[left]++;
			cur += left;	/* already zero */
		}
	}
	bi_put_le32(o->buf, (uint32_t)cur);
	o->len = cur;
	free(tmp);
	free(wrk);
}

/* disk_num_bytes: total_len rounded up to a sector */
static size_t disk_len(const struct lzo_out *o, uint32_t ss)
{
	return (o->len + ss - 1) / ss * ss;
}

static void test_lzo_roundtrip(void **state)
{
	(void)state;
	static const uint32_t sizes[] = { 4096, 16384, 65536 };
	for (int i = 0; i < 3; i++) {
		uint32_t ss = sizes[i];
		size_t n = 128 * 1024;
		uint8_t *data = make_data(n, 10 + (uint32_t)i);
		struct lzo_out o;
		lzo_frame(data, n, ss, ss, &o);
		assert_int_equal(o.nsegs, (int)(n / ss));
		expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), n, ss, data, n);
		expect_ok(COMPRESS_LZO, o.buf, o.len, n, ss, data, n);
		expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), n + 100, ss, data, n);
		/* stop when full, mid-segment and on a segment boundary */
		expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), 5000, ss, data, 5000);
		expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), ss, ss, data, ss);
		expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), 1, ss, data, 1);
		free(o.buf);
		free(data);
	}
	/* a short last segment (file tail) */
	size_t n = 3 * 4096 + 100;
	uint8_t *data = make_data(n, 20);
	struct lzo_out o;
	lzo_frame(data, n, 4096, 4096, &o);
	expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, 4096), 4 * 4096, 4096, data, n);
	free(o.buf);
	free(data);
}

/* Segment 1 is incompressible, segment 2 is zeros then k random bytes, so
 * its end moves one byte per k; segment 3 follows. Over the k tried every
 * gap 0..4 before the sector end occurs, 1..3 of them padded. */
static void test_lzo_header_skip(void **state)
{
	(void)state;
	const uint32_t ss = 4096;
	int seen_left[5] = { 0 };
	for (size_t k = 3950; k <= 4096; k++) {
		uint8_t *data = make_data(3 * ss, 30);
		uint8_t *rnd = make_random(ss + k, 31);
		memcpy(data, rnd, ss);
		memset(data + ss, 0, ss - k);
		memcpy(data + 2 * ss - k, rnd + ss, k);
		free(rnd);

		struct lzo_out o;
		lzo_frame(data, 3 * ss, ss, ss, &o);
		assert_int_equal(o.nsegs, 3);
		/* gap between segment 2's end and the sector end */
		size_t end2 = o.seg_at[1] + 4 + bi_le32(o.buf + o.seg_at[1]);
		size_t gap = (ss - end2 % ss) % ss;
		if (gap <= 4)
			seen_left[gap]++;
		if (gap > 0 && gap < 4)
			assert_int_equal(o.seg_at[2] % ss, 0);
		else
			assert_int_equal(o.seg_at[2], end2);
		expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), 3 * ss, ss, data, 3 * ss);
		free(o.buf);
		free(data);
	}
	for (int g = 1; g <= 4; g++)
		assert_true(seen_left[g] > 0);
	assert_true(seen_left[0] > 0);	/* ends exactly on the sector end */
}

static void test_lzo_corrupt(void **state)
{
	(void)state;
	const uint32_t ss = 4096;
	size_t n = 3 * ss;
	uint8_t *data = make_data(n, 40);
	struct lzo_out o;
	lzo_frame(data, n, ss, ss, &o);
	size_t dl = disk_len(&o, ss);
	uint8_t *b = malloc(256 * 1024);
	assert_non_null(b);
	memset(b, 0, 256 * 1024);

#define FRESH() memcpy(b, o.buf, dl)
	FRESH();
	expect_corrupt(COMPRESS_LZO, b, 3, n, ss, "too short");
	/* total_len larger than the extent */
	bi_put_le32(b, (uint32_t)dl + 1);
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "total_len too large");
	/* truncated extent: total_len now lies */
	FRESH();
	expect_corrupt(COMPRESS_LZO, b, o.len - 100, n, ss, "total_len too large");
	/* total_len beyond BTRFS_MAX_COMPRESSED even with a big enough extent */
	FRESH();
	bi_put_le32(b, 128 * 1024 + 1);
	expect_corrupt(COMPRESS_LZO, b, 256 * 1024, n, ss, "total_len too large");
	/* a wholly unused sector after total_len */
	FRESH();
	expect_corrupt(COMPRESS_LZO, b, dl + ss, n, ss, "unused");
	bi_put_le32(b, 0);
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "unused");

	/* segment lengths that lie */
	size_t s1 = o.seg_at[0], s2 = o.seg_at[1];
	uint32_t len1 = bi_le32(o.buf + s1);
	FRESH();
	bi_put_le32(b + s1, (uint32_t)o.len);
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "segment at byte 4,");
	FRESH();
	bi_put_le32(b + s2, (uint32_t)(o.len - s2 - 4 + 1));	/* one byte past total_len */
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "past total_len");
	FRESH();
	bi_put_le32(b + s1, 0);
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "bad length");
	FRESH();
	bi_put_le32(b + s1, 4096 + 256 + 64 + 3 + 2 + 1);	/* over lzo1x_worst_compress */
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "bad length");
	FRESH();
	bi_put_le32(b + s1, len1 - 1);	/* cuts the end marker */
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "lzo segment at byte 4");
	FRESH();
	bi_put_le32(b + s1, len1 + 1);	/* data after the end marker */
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "after the end marker");
	/* a segment header cut by total_len */
	FRESH();
	bi_put_le32(b, (uint32_t)(o.seg_at[2] + 2));
	expect_corrupt(COMPRESS_LZO, b, (o.seg_at[2] + 2 + ss - 1) / ss * ss, n, ss,
		       "header at byte");
	/* garbage lzo1x data */
	FRESH();
	memset(b + s2 + 4, 0xff, 16);
	expect_corrupt(COMPRESS_LZO, b, dl, n, ss, "lzo segment at byte");
	/* an early total_len ends the extent short: not corrupt, like the kernel */
	FRESH();
	bi_put_le32(b, (uint32_t)s2);
	uint8_t *d;
	size_t out;
	assert_int_equal(dec(COMPRESS_LZO, b, (s2 + ss - 1) / ss * ss, n, ss, &d, &out), 0);
	assert_int_equal(out, ss);
	assert_memory_equal(d, data, ss);
	free(d);
#undef FRESH
	free(o.buf);
	free(b);
	free(data);
}

/* Segments that decode to more than a sector: the kernel gives each one a
 * lzo1x_worst_compress(sectorsize) buffer, so 4200 bytes are accepted and
 * 8192 are an output overrun. */
static void test_lzo_big_segment(void **state)
{
	(void)state;
	const uint32_t ss = 4096;
	uint8_t *data = make_data(8192, 50);
	struct lzo_out o;

	lzo_frame(data, 4200, ss, 4200, &o);
	expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), 8192, ss, data, 4200);
	expect_ok(COMPRESS_LZO, o.buf, disk_len(&o, ss), 4100, ss, data, 4100);
	free(o.buf);

	lzo_frame(data, 8192, ss, 8192, &o);
	assert_int_equal(o.nsegs, 1);
	expect_corrupt(COMPRESS_LZO, o.buf, disk_len(&o, ss), 8192, ss, "output overrun");
	free(o.buf);
	free(data);
}

/* ================================================================ misc */

static void test_api(void **state)
{
	(void)state;
	uint8_t src[16] = { 0 }, dst[16];
	size_t out = 99;
	static const int bad_types[] = { 0, 4, 255, -1 };
	for (int i = 0; i < 4; i++) {
		assert_int_equal(bi_decompress(zc, bad_types[i], src, sizeof(src), dst, sizeof(dst),
					       4096, &out, why, sizeof(why)), -EOPNOTSUPP);
		assert_non_null(strstr(why, "not supported"));
	}
	assert_int_equal(bi_decompress(zc, COMPRESS_ZLIB, src, 1, dst, 1, 4096, NULL, why,
				       sizeof(why)), -EINVAL);
	assert_int_equal(bi_decompress(NULL, COMPRESS_ZLIB, src, 1, dst, 1, 4096, &out, why,
				       sizeof(why)), -EINVAL);
	assert_int_equal(bi_decompress(zc, COMPRESS_ZLIB, NULL, 1, dst, 1, 4096, &out, why,
				       sizeof(why)), -EINVAL);
	assert_int_equal(bi_decompress(zc, COMPRESS_ZLIB, src, 1, NULL, 1, 4096, &out, why,
				       sizeof(why)), -EINVAL);
	/* nothing asked, nothing done */
	assert_int_equal(bi_decompress(zc, COMPRESS_ZSTD, src, 1, dst, 0, 4096, &out, why,
				       sizeof(why)), 0);
	assert_int_equal(out, 0);
	/* the LZO unit must be a sector size */
	static const uint32_t bad_ss[] = { 0, 512, 3000, 131072 };
	for (int i = 0; i < 4; i++)
		assert_int_equal(bi_decompress(zc, COMPRESS_LZO, src, sizeof(src), dst,
					       sizeof(dst), bad_ss[i], &out, why, sizeof(why)),
				 -EINVAL);
	/* no message buffer is fine */
	assert_int_equal(bi_decompress(zc, COMPRESS_LZO, src, 2, dst, sizeof(dst), 4096, &out,
				       NULL, 0), -EUCLEAN);
	bi_zctx_free(NULL);
}

/* A context is reusable across types and after errors. */
static void test_reuse(void **state)
{
	(void)state;
	struct bi_zctx *save = zc;
	zc = bi_zctx_new();
	assert_non_null(zc);
	size_t n = 20000, clen;
	uint8_t *data = make_data(n, 60);
	uint8_t *cz = zlib_make(data, n, 15, &clen);
	size_t zlen;
	uint8_t *cs = zstd_make(data, n, 0, 0, &zlen);
	for (int round = 0; round < 3; round++) {
		expect_corrupt(COMPRESS_ZLIB, cz, clen / 3, n, 4096, "truncated");
		expect_ok(COMPRESS_ZLIB, cz, clen, n, 4096, data, n);
		expect_corrupt(COMPRESS_ZSTD, cs, zlen / 3, n, 4096, "truncated");
		expect_ok(COMPRESS_ZSTD, cs, zlen, n, 4096, data, n);
	}
	free(cz);
	free(cs);
	free(data);
	bi_zctx_free(zc);
	zc = save;
}

/* ================================================================ golden */

static uint8_t *read_file(const char *name, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/compress/%s", TESTDATA, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	uint8_t *p = malloc((size_t)n);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static void test_golden(void **state)
{
	(void)state;
	char path[4096];
	snprintf(path, sizeof(path), "%s/compress/golden.txt", TESTDATA);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char line[512], name[128], hex[65];
	int type, count = 0;
	unsigned ss;
	size_t ram;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#')
			continue;
		assert_int_equal(sscanf(line, "%127s %d %u %zu %64s", name, &type, &ss, &ram, hex),
				 5);
		size_t srclen, out;
		uint8_t *src = read_file(name, &srclen);
		uint8_t *dst = calloc(1, ram);
		assert_non_null(dst);
		int rc = bi_decompress(zc, type, src, srclen, dst, ram, ss, &out, why, sizeof(why));
		if (rc)
			fprintf(stderr, "%s: %d %s\n", name, rc, why);
		assert_int_equal(rc, 0);
		assert_true(out <= ram);
		uint8_t h[32];
		char got[65];
		crypto_hash_sha256(h, dst, ram);
		for (int i = 0; i < 32; i++)
			snprintf(got + 2 * i, 3, "%02x", h[i]);
		if (strcmp(got, hex))
			fprintf(stderr, "%s: out %zu\n", name, out);
		assert_string_equal(got, hex);

		/* a prefix read gives the same bytes */
		uint8_t *part = malloc(ram / 3);
		assert_non_null(part);
		assert_int_equal(bi_decompress(zc, type, src, srclen, part, ram / 3, ss, &out, why,
					       sizeof(why)), 0);
		assert_int_equal(out, ram / 3);
		assert_memory_equal(part, dst, ram / 3);
		free(part);
		free(dst);
		free(src);
		count++;
	}
	fclose(f);
	assert_int_equal(count, 3);
}

/* The kernel's LZO extent has padding at byte 24575: ignoring the skip
 * rule would read the zero byte as part of a segment length. Damaging a
 * segment header must be caught. */
static void test_golden_lzo_damage(void **state)
{
	(void)state;
	size_t srclen, out;
	uint8_t *src = read_file("lzo-tail.bin", &srclen);
	assert_int_equal(src[24575], 0);
	assert_true(bi_le32(src + 24576) > 0);
	uint8_t *dst = malloc(49152);
	assert_non_null(dst);
	bi_put_le32(src + 24576, 0x10000);
	assert_int_equal(bi_decompress(zc, COMPRESS_LZO, src, srclen, dst, 49152, 4096, &out, why,
				       sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "byte 24576"));
	free(dst);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zlib_roundtrip),
		cmocka_unit_test(test_zlib_corrupt),
		cmocka_unit_test(test_zstd_roundtrip),
		cmocka_unit_test(test_zstd_corrupt),
		cmocka_unit_test(test_zstd_kernel_workspace),
		cmocka_unit_test(test_zstd_skippable),
		cmocka_unit_test(test_lzo_roundtrip),
		cmocka_unit_test(test_lzo_header_skip),
		cmocka_unit_test(test_lzo_corrupt),
		cmocka_unit_test(test_lzo_big_segment),
		cmocka_unit_test(test_api),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_golden_lzo_damage),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
