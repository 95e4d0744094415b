/* SPDX-License-Identifier: MIT */
/*
 * Bounded decompression of compressed file extents (file_extent.compression
 * 1 zlib, 2 lzo, 3 zstd). The caller reads the whole on-disk extent
 * [disk_bytenr, +disk_num_bytes) (or an inline item's payload) and asks for
 * at most @dstlen bytes; each decoder stops as soon as that many are out,
 * as the kernel stops once the pages it reads into are full. Fewer bytes is
 * not an error (the caller zero-fills); a stream that is damaged before the
 * output is full is -EUCLEAN with the byte offset and the failed check.
 *
 * Invariants: never reads src past @srclen, never writes dst past @dstlen,
 * memory is bounded per context (zlib: 32 KiB window; zstd: the stream
 * buffers the kernel's workspace holds, about 3 MiB; lzo: one segment's
 * worth of scratch), and every loop consumes input or stops.
 *
 * zlib: one RFC 1950 stream. Like the kernel, the 2-byte header must say
 * deflate without a preset dictionary; the rest is inflated raw with the
 * header's window, so the adler32 trailer is never checked, and whatever
 * follows the final block (sector padding) is ignored.
 *
 * zstd: one frame (a skippable frame first ends the extent with no output,
 * as in the kernel). Legacy (pre-v0.8) frames are refused: the kernel's zstd
 * cannot decode them. The kernel does not cap the window itself (beyond
 * zstd's default 2^27): it decodes with a static context in the workspace
 * it set aside at mount, sized for compression level 15
 * (ZSTD_BTRFS_MAX_LEVEL) of 128 KiB, and a frame whose stream buffers (one
 * block in, the window plus two blocks out, or the content size when that
 * is smaller) do not fit there fails with ZSTD_error_memory_allocation.
 * The same rule is applied here, with libzstd's own sizes, before
 * decoding, so that whether a frame decodes never depends on @dstlen
 * (libzstd decodes in one pass, with no buffers and no window check, when
 * the whole content fits the output). Measured on Linux 6.18, 20,000-byte
 * extents: a 6 MiB window with the content size given decodes, and without
 * it windows up to 2.5 MiB decode while 2.75 MiB and more fail; the rule
 * agrees. (Under concurrent compression the kernel may hand out a workspace
 * of a lower level, which holds less; the usual case is followed.) A frame
 * longer than @dstlen is cut at @dstlen, not refused: the kernel decodes
 * only as far as its pages go and never looks at the rest, so refusing
 * would fail reads the kernel serves. A frame that ends before its end
 * marker is -EUCLEAN (the kernel silently returns a short read there; a
 * short read from an intact writer cannot happen).
 *
 * lzo: btrfs's own framing around lzo1x (kernel fs/btrfs/lzo.c):
 *
 *   sector 0                                  sector 1
 *   | total_len | seg_len | seg data ... |00| seg_len | seg data ...
 *     le32        le32      lzo1x stream   ^  never straddles a sector:
 *     (incl. itself)                       |  1..3 zero bytes pad the
 *                                          |  sector if fewer than 4 remain
 *
 * total_len <= min(srclen, 128 KiB) and round_up(total_len, sectorsize) >=
 * srclen (no wholly unused sector), as the kernel checks. Each segment
 * holds one sector of input; like the kernel it may decode to at most
 * lzo1x_worst_compress(sectorsize) bytes (the kernel's buffer size, not
 * sectorsize), and its data must lie within total_len (the kernel does not
 * check that; we cannot read past the extent).
 */
#include <limits.h>
#include <lzo/lzo1x.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY /* frame headers and the size estimates */
#include <zstd.h>
#include <zstd_errors.h>

#include "files/compress.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"

#define LZO_LEN 4
#define ZSTD_BTRFS_MAX_INPUT (128u * 1024u)
#define ZSTD_BTRFS_MAX_LEVEL 15

struct bi_zctx {
	ZSTD_DCtx *zstd;
	size_t zstd_room;	/* stream buffer bytes the kernel's workspace holds */
	z_stream zs;
	bool zs_ready;
	bool lzo_ready;
	uint8_t *lzo_buf;	/* a segment that does not fit the rest of dst */
	size_t lzo_cap;
};

struct bi_zctx *bi_zctx_new(void)
{
	return calloc(1, sizeof(struct bi_zctx));
}

void bi_zctx_free(struct bi_zctx *z)
{
	if (!z)
		return;
	ZSTD_freeDCtx(z->zstd);
	if (z->zs_ready)
		inflateEnd(&z->zs);
	free(z->lzo_buf);
	free(z);
}

/* ---------------------------------------------------------------- zlib */

static int zlib_header(const uint8_t *src, size_t srclen, int *wbits, char *why, size_t whylen)
{
	if (srclen < 3)
		return bi_why(why, whylen, "zlib stream at byte 0, too short, have %zu expect >= 3",
			      srclen);
	unsigned cmf = src[0], flg = src[1];
	if ((cmf & 0x0f) != Z_DEFLATED || ((cmf << 8) | flg) % 31 != 0 || (flg & 0x20))
		return bi_why(why, whylen,
			      "zlib header at byte 0, not deflate without preset dictionary, "
			      "have %02x %02x",
			      cmf, flg);
	*wbits = (int)(cmf >> 4) + 8;
	if (*wbits > MAX_WBITS)
		return bi_why(why, whylen,
			      "zlib header at byte 0, window too large, have 2^%d "
			      "expect <= 2^%d",
			      *wbits, MAX_WBITS);
	return 0;
}

static int zlib_reset(struct bi_zctx *z, int wbits)
{
	if (!z->zs_ready) {
		memset(&z->zs, 0, sizeof(z->zs));
		if (inflateInit2(&z->zs, -wbits) != Z_OK)
			return -ENOMEM;
		z->zs_ready = true;
		return 0;
	}
	return inflateReset2(&z->zs, -wbits) == Z_OK ? 0 : -ENOMEM;
}

static int do_zlib(struct bi_zctx *z, const uint8_t *src, size_t srclen, uint8_t *dst,
		   size_t dstlen, size_t *outlen, char *why, size_t whylen)
{
	int wbits = 0, rc = zlib_header(src, srclen, &wbits, why, whylen);
	if (rc)
		return rc;
	if ((rc = zlib_reset(z, wbits)) != 0)
		return rc;

	z_stream *s = &z->zs;
	size_t in = 2, out = 0;
	for (;;) {
		uInt ain = srclen - in > UINT_MAX ? UINT_MAX : (uInt)(srclen - in);
		uInt aout = dstlen - out > UINT_MAX ? UINT_MAX : (uInt)(dstlen - out);
		s->next_in = (Bytef *)(uintptr_t)(src + in);
		s->avail_in = ain;
		s->next_out = dst + out;
		s->avail_out = aout;
		int r = inflate(s, Z_NO_FLUSH);
		size_t used = ain - s->avail_in, made = aout - s->avail_out;
		in += used;
		out += made;
		if (r == Z_STREAM_END || out == dstlen)
			break;
		if (r == Z_MEM_ERROR)
			return -ENOMEM;
		if (r != Z_OK && r != Z_BUF_ERROR)
			return bi_why(why, whylen, "zlib stream corrupt at byte %zu, %s", in,
				      s->msg ? s->msg : "inflate error");
		if (used == 0 && made == 0)
			return bi_why(why, whylen,
				      "zlib stream truncated at byte %zu, no final "
				      "block, have %zu bytes out expect %zu",
				      in, out, dstlen);
	}
	*outlen = out;
	return 0;
}

/* ---------------------------------------------------------------- zstd */

/* What the kernel's decompression workspace leaves for stream buffers: it
 * is sized for the largest compression level or the decoder, whichever
 * needs more, and the decoder's context takes its share first. */
static size_t zstd_kernel_room(void)
{
	size_t ws = ZSTD_estimateDStreamSize(ZSTD_BTRFS_MAX_INPUT);
	for (int level = 1; level <= ZSTD_BTRFS_MAX_LEVEL; level++) {
		ZSTD_compressionParameters p = ZSTD_getCParams(level, ZSTD_BTRFS_MAX_INPUT, 0);
		size_t c = ZSTD_estimateCStreamSize_usingCParams(p);
		if (c > ws)
			ws = c;
	}
	size_t dctx = ZSTD_estimateDCtxSize();
	return ws > dctx ? ws - dctx : 0;
}

static int zstd_ready(struct bi_zctx *z)
{
	if (!z->zstd) {
		z->zstd = ZSTD_createDCtx();
		if (!z->zstd)
			return -ENOMEM;
		/* zstd's default limit, which the kernel keeps: explicit, so a
		 * libzstd built with another default changes nothing */
		if (ZSTD_isError(ZSTD_DCtx_setParameter(z->zstd, ZSTD_d_windowLogMax,
							ZSTD_WINDOWLOG_LIMIT_DEFAULT))) {
			ZSTD_freeDCtx(z->zstd);
			z->zstd = NULL;
			return -ENOMEM;
		}
		z->zstd_room = zstd_kernel_room();
	}
	return ZSTD_isError(ZSTD_DCtx_reset(z->zstd, ZSTD_reset_session_only)) ? -ENOMEM : 0;
}

/* The kernel's rule (see the top): the frame's stream buffers must fit its
 * workspace. A header too short or damaged is left to the decoder. */
static int zstd_fits_kernel(const struct bi_zctx *z, const uint8_t *src, size_t srclen,
			    char *why, size_t whylen)
{
	ZSTD_frameHeader fh;
	if (ZSTD_getFrameHeader(&fh, src, srclen) != 0 || fh.frameType != ZSTD_frame)
		return 0;
	unsigned long long window = fh.windowSize < (1u << ZSTD_WINDOWLOG_MIN)
					    ? 1u << ZSTD_WINDOWLOG_MIN
					    : fh.windowSize;
	if (window > (1ull << ZSTD_WINDOWLOG_LIMIT_DEFAULT))
		return 0; /* the decoder's own window check reports it */
	size_t in = fh.blockSizeMax > 4 ? fh.blockSizeMax : 4;
	size_t out = ZSTD_decodingBufferSize_min(window, fh.frameContentSize);
	if (!ZSTD_isError(out) && in <= z->zstd_room && out <= z->zstd_room - in)
		return 0;
	char content[32] = "not given";
	if (fh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN)
		snprintf(content, sizeof(content), "%" PRIu64, (uint64_t)fh.frameContentSize);
	return bi_why(why, whylen,
		      "zstd frame at byte 0, window too large for the kernel's "
		      "workspace: window %" PRIu64 ", content size %s, needs %" PRIu64
		      " bytes of stream "
		      "buffers, expect <= %zu",
		      (uint64_t)window, content, (uint64_t)(ZSTD_isError(out) ? ~0ull : in + out),
		      z->zstd_room);
}

static int zstd_why(size_t r, size_t pos, char *why, size_t whylen)
{
	if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
		return bi_why(why, whylen,
			      "zstd frame at byte 0, window too large, expect <= %" PRIu64,
			      (uint64_t)(1ull << ZSTD_WINDOWLOG_LIMIT_DEFAULT));
	if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
		return -ENOMEM;
	return bi_why(why, whylen, "zstd frame corrupt at byte %zu, %s", pos, ZSTD_getErrorName(r));
}

static int do_zstd(struct bi_zctx *z, const uint8_t *src, size_t srclen, uint8_t *dst,
		   size_t dstlen, size_t *outlen, char *why, size_t whylen)
{
	if (srclen < 4)
		return bi_why(why, whylen, "zstd frame at byte 0, too short, have %zu expect >= 4",
			      srclen);
	uint32_t magic = bi_le32(src);
	if (magic != ZSTD_MAGICNUMBER && (magic & ZSTD_MAGIC_SKIPPABLE_MASK) !=
	    ZSTD_MAGIC_SKIPPABLE_START)
		return bi_why(why, whylen,
			      "zstd frame at byte 0, bad magic, have 0x%08x "
			      "expect 0x%08x",
			      magic, ZSTD_MAGICNUMBER);
	int rc = zstd_ready(z);
	if (rc == 0)
		rc = zstd_fits_kernel(z, src, srclen, why, whylen);
	if (rc)
		return rc;

	ZSTD_inBuffer in = { src, srclen, 0 };
	ZSTD_outBuffer out = { dst, dstlen, 0 };
	for (;;) {
		size_t in0 = in.pos, out0 = out.pos;
		size_t r = ZSTD_decompressStream(z->zstd, &out, &in);
		if (ZSTD_isError(r))
			return zstd_why(r, in.pos, why, whylen);
		if (r == 0 || out.pos == out.size)
			break;
		if (in.pos == in0 && out.pos == out0)
			return bi_why(why, whylen,
				      "zstd frame truncated at byte %zu, no frame end, "
				      "have %zu bytes out expect %zu",
				      in.pos, out.pos, dstlen);
	}
	*outlen = out.pos;
	return 0;
}

/* ---------------------------------------------------------------- lzo */

/* The kernel's per-segment buffer size: lzo1x_worst_compress(sectorsize). */
static size_t lzo_seg_max(uint32_t sectorsize)
{
	return (size_t)sectorsize + sectorsize / 16 + 64 + 3 + 2;
}

static const char *lzo_strerror(int r)
{
	switch (r) {
	case LZO_E_INPUT_OVERRUN:
		return "input overrun";
	case LZO_E_OUTPUT_OVERRUN:
		return "output overrun";
	case LZO_E_LOOKBEHIND_OVERRUN:
		return "lookbehind overrun";
	case LZO_E_EOF_NOT_FOUND:
		return "end marker not found";
	case LZO_E_INPUT_NOT_CONSUMED:
		return "data after the end marker";
	default:
		return "lzo1x error";
	}
}

static int lzo_ready(struct bi_zctx *z, size_t cap)
{
	if (!z->lzo_ready) {
		if (lzo_init() != LZO_E_OK)
			return -EOPNOTSUPP;
		z->lzo_ready = true;
	}
	if (z->lzo_cap < cap) {
		uint8_t *b = realloc(z->lzo_buf, cap);
		if (!b)
			return -ENOMEM;
		z->lzo_buf = b;
		z->lzo_cap = cap;
	}
	return 0;
}

/* Decode one segment to dst (at most @room bytes used). Straight into dst
 * when a whole segment fits, else through the scratch buffer. Returns an
 * LZO_E_* code; *made receives the bytes placed in dst. */
static int lzo_segment(struct bi_zctx *z, const uint8_t *seg, size_t seglen, uint8_t *dst,
		       size_t room, size_t seg_max, size_t *made)
{
	lzo_uint n = seg_max;
	uint8_t *to = room >= seg_max ? dst : z->lzo_buf;
	int r = lzo1x_decompress_safe(seg, seglen, to, &n, NULL);
	if (r != LZO_E_OK)
		return r;
	*made = n < room ? n : room;
	if (to != dst)
		memcpy(dst, to, *made);
	return LZO_E_OK;
}

static int lzo_total(const uint8_t *src, size_t srclen, uint32_t sectorsize, size_t *total,
		     char *why, size_t whylen)
{
	if (srclen < LZO_LEN)
		return bi_why(why, whylen, "lzo header at byte 0, too short, have %zu expect >= %u",
			      srclen, LZO_LEN);
	size_t t = bi_le32(src);
	size_t lim = srclen < MAX_COMPRESSED ? srclen : MAX_COMPRESSED;
	if (t > lim)
		return bi_why(why, whylen,
			      "lzo header at byte 0, total_len too large, have %zu "
			      "expect <= %zu",
			      t, lim);
	size_t rounded = (t + sectorsize - 1) / sectorsize * sectorsize;
	if (rounded < srclen)
		return bi_why(why, whylen,
			      "lzo header at byte 0, total_len leaves whole sectors "
			      "unused, have %zu (%zu rounded up) expect >= %zu",
			      t, rounded, srclen);
	*total = t;
	return 0;
}

static int do_lzo(struct bi_zctx *z, const uint8_t *src, size_t srclen, uint8_t *dst,
		  size_t dstlen, uint32_t sectorsize, size_t *outlen, char *why, size_t whylen)
{
	if (sectorsize < 4096 || sectorsize > 65536 || (sectorsize & (sectorsize - 1)))
		return -EINVAL;
	size_t total = 0, seg_max = lzo_seg_max(sectorsize);
	int rc = lzo_total(src, srclen, sectorsize, &total, why, whylen);
	if (rc || (rc = lzo_ready(z, seg_max)) != 0)
		return rc;

	size_t cur = LZO_LEN, out = 0;
	while (cur < total && out < dstlen) {
		if (total - cur < LZO_LEN)
			return bi_why(why, whylen,
				      "lzo segment header at byte %zu, past total_len, "
				      "have end %zu expect <= %zu",
				      cur, cur + LZO_LEN, total);
		size_t seg = bi_le32(src + cur);
		if (seg < 3 || seg > seg_max)
			return bi_why(why, whylen,
				      "lzo segment at byte %zu, bad length, have %zu "
				      "expect 3..%zu",
				      cur, seg, seg_max);
		if (seg > total - cur - LZO_LEN)
			return bi_why(why, whylen,
				      "lzo segment at byte %zu, data past total_len, "
				      "have end %zu expect <= %zu",
				      cur, cur + LZO_LEN + seg, total);
		size_t made = 0;
		int r = lzo_segment(z, src + cur + LZO_LEN, seg, dst + out, dstlen - out, seg_max,
				    &made);
		if (r != LZO_E_OK)
			return bi_why(why, whylen, "lzo segment at byte %zu, %s (lzo1x %d)", cur,
				      lzo_strerror(r), r);
		out += made;
		cur += LZO_LEN + seg;
		/* a segment header never straddles a sector: skip the padding */
		size_t left = sectorsize - cur % sectorsize;
		if (left < LZO_LEN)
			cur += left;
	}
	*outlen = out;
	return 0;
}

/* ---------------------------------------------------------------- entry */

int bi_decompress(struct bi_zctx *z, int type, const uint8_t *src, size_t srclen, uint8_t *dst,
		  size_t dstlen, uint32_t sectorsize, size_t *outlen, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = '\0';
	if (!outlen || !z || (!src && srclen) || (!dst && dstlen))
		return -EINVAL;
	*outlen = 0;
	if (type < COMPRESS_ZLIB || type > COMPRESS_ZSTD) {
		if (why && whylen)
			snprintf(why, whylen, "compression type %d not supported", type);
		return -EOPNOTSUPP;
	}
	if (dstlen == 0)
		return 0;
	int rc;
	switch (type) {
	case COMPRESS_ZLIB:
		rc = do_zlib(z, src, srclen, dst, dstlen, outlen, why, whylen);
		break;
	case COMPRESS_LZO:
		rc = do_lzo(z, src, srclen, dst, dstlen, sectorsize, outlen, why, whylen);
		break;
	default:
		rc = do_zstd(z, src, srclen, dst, dstlen, outlen, why, whylen);
		break;
	}
	/* zstd parks literals in the unused tail of dst: leave zeros there, as
	 * the kernel does for a short extent */
	if (rc == 0 && *outlen < dstlen)
		memset(dst + *outlen, 0, dstlen - *outlen);
	return rc;
}
