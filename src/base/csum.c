/* SPDX-License-Identifier: MIT */
/*
 * Checksums of tree blocks, superblocks and data sectors, and the name
 * hashes that key DIR_ITEM, XATTR_ITEM and INODE_EXTREF items.
 *
 * csum_type (superblock 0xc4) picks the algorithm; the on-disk field is 32
 * bytes, the digest stored first in the byte order below and the rest zero:
 *   0 crc32c    4 B  le32 of the standard CRC-32C (init ~0, final ~)
 *   1 xxhash64  8 B  le64 of XXH64 with seed 0
 *   2 sha256   32 B  the digest as is
 *   3 blake2b  32 B  BLAKE2b, unkeyed, 32-byte digest
 * The caller chooses the covered range (bytes 32.. of a block).
 *
 * Name hashes use CRC-32C without the pre/post inversion: the name hash is
 * crc32c_raw(~1, name) (seed 0xFFFFFFFE, nothing inverted at the end) and
 * the extref hash crc32c_raw((u32)parent, name).
 *
 * The libraries are the fastest measured here: ISA-L's crc32_iscsi for
 * CRC-32C (three streams folded with PCLMULQDQ, ~2.4x a plain SSE4.2
 * loop), OpenSSL for SHA-256 (SHA-NI), libsodium for BLAKE2b, libxxhash
 * for XXH64; the figures are in bench/README.md ("Checksums").
 * crc32_iscsi is the raw update (no inversion in or out: tests/unit/test_csum.c
 * checks ~crc32_iscsi("123456789", ~0) == 0xE3069283) and takes an int
 * length, hence the chunking below. sodium_init() only switches BLAKE2b to
 * SIMD code and touches libsodium's global state, so it is left to the
 * library user: results are the same without it.
 */
#include <isa-l/crc.h>
#include <errno.h>
#include <limits.h>
#include <openssl/sha.h>
#include <sodium.h>
#include <xxhash.h>

#include "base/csum.h"

#include "base/cursor.h"
#include "base/ondisk.h"

#include "btrfsimg.h"

#include "base/cursor.h"
#include "base/ondisk.h"

size_t bi_csum_size(int csum_type)
{
	switch (csum_type) {
	case CSUM_TYPE_CRC32C:
		return 4;
	case CSUM_TYPE_XXHASH:
		return 8;
	case CSUM_TYPE_SHA256:
	case CSUM_TYPE_BLAKE2:
		return 32;
	default:
		return 0;
	}
}

const char *btrfsimg_csum_name(int csum_type)
{
	switch (csum_type) {
	case CSUM_TYPE_CRC32C:
		return "crc32c";
	case CSUM_TYPE_XXHASH:
		return "xxhash64";
	case CSUM_TYPE_SHA256:
		return "sha256";
	case CSUM_TYPE_BLAKE2:
		return "blake2b";
	default:
		return NULL;
	}
}

uint32_t bi_crc32c_raw(uint32_t seed, const void *data, size_t len)
{
	/* crc32_iscsi takes a non-const pointer but only reads it */
	unsigned char *p = (unsigned char *)(uintptr_t)data;
	uint32_t crc = seed;

	while (len > 0) {
		size_t n = len > (size_t)INT_MAX ? (size_t)INT_MAX & ~(size_t)7 : len;
		crc = crc32_iscsi(p, (int)n, crc);
		p += n;
		len -= n;
	}
	return crc;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int bi_csum(int csum_type, const void *data, size_t len, uint8_t out[CSUM_SIZE_MAX])
{
	/* (NULL, 0) is a valid empty input here; keep NULL from the callees */
	static const uint8_t empty[1];
	const uint8_t *p = data ? data : empty;

	memset(out, 0, CSUM_SIZE_MAX);
	switch (csum_type) {
	case CSUM_TYPE_CRC32C:
		put_le32(out, ~bi_crc32c_raw(~0u, p, len));
		return 0;
	case CSUM_TYPE_XXHASH:
		put_le64(out, (uint64_t)XXH64(p, len, 0));
		return 0;
	case CSUM_TYPE_SHA256:
		SHA256(p, len, out);
		return 0;
	case CSUM_TYPE_BLAKE2:
		/* cannot fail: outlen 32 is within [16, 64] and there is no key */
		crypto_generichash(out, 32, p, len, NULL, 0);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

uint64_t bi_name_hash(const void *name, size_t len)
{
	return bi_crc32c_raw(0xFFFFFFFEu, name, len);
}

uint64_t bi_extref_hash(uint64_t parent, const void *name, size_t len)
{
	return bi_crc32c_raw((uint32_t)parent, name, len);
}
