/* SPDX-License-Identifier: MIT */
/*
 * Checksums and name hashes (pure).
 */
#ifndef BI_CSUM_H
#define BI_CSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ondisk.h"

/* Digest size of a checksum type, 0 if unknown. */
size_t bi_csum_size(int csum_type);
/* Checksum @len bytes into @out (CSUM_SIZE_MAX bytes, zero padded) in the
 * on-disk byte order. Returns 0 or -EOPNOTSUPP for an unknown type. */
int bi_csum(int csum_type, const void *data, size_t len, uint8_t out[CSUM_SIZE_MAX]);
/* Raw CRC-32C update (no pre/post inversion): what name hashes use. */
uint32_t bi_crc32c_raw(uint32_t seed, const void *data, size_t len);
/* DIR_ITEM / XATTR_ITEM key offset of a name. */
uint64_t bi_name_hash(const void *name, size_t len);
/* INODE_EXTREF key offset. */
uint64_t bi_extref_hash(uint64_t parent, const void *name, size_t len);

#endif
