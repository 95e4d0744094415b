/* SPDX-License-Identifier: MIT */
/*
 * Bounded decompressors (pure).
 */
#ifndef BI_COMPRESS_H
#define BI_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reusable decompression state (zstd context, lzo work memory). One per
 * handle; never shared between handles. */
struct bi_zctx;
struct bi_zctx *bi_zctx_new(void);
void bi_zctx_free(struct bi_zctx *z);

/* Decompress one extent's bytes (btrfs compression type 1 zlib, 2 lzo,
 * 3 zstd) into at most @dstlen bytes. *outlen receives the bytes produced
 * (may be < dstlen: on success the rest of dst is zeroed; on failure dst
 * holds garbage). Never reads past @srclen or writes past @dstlen.
 * @sectorsize is the LZO segment unit (a power of 2 in [4K, 64K], else
 * -EINVAL). Returns 0, -EUCLEAN (corrupt stream, @why says where),
 * -EOPNOTSUPP (type not 1..3), -ENOMEM or -EINVAL (NULL arguments). */
int bi_decompress(struct bi_zctx *z, int type, const uint8_t *src, size_t srclen, uint8_t *dst,
		  size_t dstlen, uint32_t sectorsize, size_t *outlen, char *why, size_t whylen);

#endif
