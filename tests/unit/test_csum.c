/* SPDX-License-Identifier: MIT */
/*
 * Checksums and name hashes against independent truth:
 *  - digests of fixed inputs computed outside this project: Python hashlib
 *    (sha256, blake2b digest_size=32), a bitwise CRC-32C written in Python,
 *    and xxhsum -H64 (cross-checked with a Python XXH64); the published
 *    check values CRC-32C("123456789") = E3069283 and XXH64("") =
 *    EF46DB3751D8E999;
 *  - the btrfs name hash of "default" (2378154706, the key offset of the
 *    root tree's "default" DIR_ITEM);
 *  - four superblocks whose checksum the kernel wrote (testdata/super/).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "btrfsimg.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"

static void unhex(const char *hex, uint8_t *out, size_t n)
{
	assert_int_equal(strlen(hex), 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

/* Expected on-disk field: the digest bytes as given, then zeros. */
static void check_csum(int type, const void *data, size_t len, const char *hex)
{
	uint8_t want[CSUM_SIZE_MAX] = { 0 }, got[CSUM_SIZE_MAX];
	size_t n = strlen(hex) / 2;

	assert_int_equal(n, bi_csum_size(type));
	unhex(hex, want, n);
	memset(got, 0xA5, sizeof(got));
	assert_int_equal(bi_csum(type, data, len, got), 0);
	assert_memory_equal(got, want, CSUM_SIZE_MAX);
}

/* Integers are printed as numbers by the generator; btrfs stores them LE. */
static void check_le(int type, const void *data, size_t len, uint64_t v)
{
	char hex[17];
	size_t n = bi_csum_size(type);

	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned)(v >> (8 * i)) & 0xff);
	check_csum(type, data, len, hex);
}

struct vec {
	const char *name;
	size_t len;
	uint32_t crc32c;
	uint64_t xxh64;
	const char *sha256, *blake2b;
};

static const struct vec vecs[] = {
	{ "empty", 0, 0x00000000, 0xef46db3751d8e999ull,
	  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	  "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8" },
	{ "a", 1, 0xc1d04330, 0xd24ec4f1a98c6e5bull,
	  "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
	  "8928aae63c84d87ea098564d1e03ad813f107add474e56aedd286349c0c03ea4" },
	{ "abc", 3, 0x364b3fb7, 0x44bc2cf5ad770999ull,
	  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	  "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319" },
	{ "123456789", 9, 0xe3069283, 0x8cb841db40e6ae83ull,
	  "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225",
	  "16e0bf1f85594a11e75030981c0b670370b3ad83a43f49ae58a2fd6f6513cde9" },
	{ "The quick brown fox jumps over the lazy dog", 43, 0x22620404, 0x0b242d361fda71bcull,
	  "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592",
	  "01718cec35cd3d796dd00020e0bfecb473ad23457d063b75eff29c0ffa2e58a9" },
};

static void test_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		const struct vec *v = &vecs[i];
		check_le(CSUM_TYPE_CRC32C, v->name, v->len, v->crc32c);
		check_le(CSUM_TYPE_XXHASH, v->name, v->len, v->xxh64);
		check_csum(CSUM_TYPE_SHA256, v->name, v->len, v->sha256);
		check_csum(CSUM_TYPE_BLAKE2, v->name, v->len, v->blake2b);
	}
	/* an empty input may come as NULL */
	check_le(CSUM_TYPE_CRC32C, NULL, 0, 0);
	check_csum(CSUM_TYPE_SHA256, NULL, 0, vecs[0].sha256);
}

/* byte i = (i*mul + add) & 0xff, as in the generator */
static uint8_t *pattern(size_t n, unsigned mul, unsigned add)
{
	uint8_t *p = malloc(n);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * mul + add) & 0xff);
	return p;
}

/* Longer inputs take the vector paths of ISA-L, xxhash and the hashes. */
static void test_long(void **state)
{
	(void)state;
	uint8_t *p = pattern(4096, 7, 3);
	check_le(CSUM_TYPE_CRC32C, p, 4096, 0xed96b643);
	check_le(CSUM_TYPE_XXHASH, p, 4096, 0x796398cd432797ccull);
	check_csum(CSUM_TYPE_SHA256, p, 4096,
		   "7486da8f1e13943fae21a0b043f1e99640d7d8ebafb25266478b5cddae1272b5");
	check_csum(CSUM_TYPE_BLAKE2, p, 4096,
		   "3b7dcca5dcb409b9ee1d33ac58a03966d5e86581278891945e3d2fd80e3aad58");
	free(p);

	p = pattern(100003, 31, 11);
	check_le(CSUM_TYPE_CRC32C, p, 100003, 0x9dd0fac8);
	check_le(CSUM_TYPE_XXHASH, p, 100003, 0x0a4e63b5afc7cd3bull);
	check_csum(CSUM_TYPE_SHA256, p, 100003,
		   "d337b0ecde8b6edde0692fbddcc503d08d44ed4a6f253aa9718aa45ef542de41");
	check_csum(CSUM_TYPE_BLAKE2, p, 100003,
		   "c64e7fa74f58b950a1ea3b33d281422b154d395b3d44f02112b165cb72fd992b");
	free(p);
}

/* The raw update composes: crc(a||b) = raw(raw(~0, a), b) inverted. */
static void test_raw(void **state)
{
	(void)state;
	assert_int_equal(bi_crc32c_raw(~0u, "123456789", 9), ~0xE3069283u);
	uint32_t c = bi_crc32c_raw(~0u, "1234", 4);
	assert_int_equal(~bi_crc32c_raw(c, "56789", 5), 0xE3069283u);
	assert_int_equal(bi_crc32c_raw(0x12345678u, "", 0), 0x12345678u);
}

static void test_name_hash(void **state)
{
	(void)state;
	static const struct { const char *name; uint32_t hash; } v[] = {
		{ "default", 2378154706u }, { "", 4294967294u }, { "a", 3427024844u },
		{ "foo", 2507850652u }, { "..", 447303723u }, { "lost+found", 2734183504u },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(bi_name_hash(v[i].name, strlen(v[i].name)), v[i].hash);

	uint8_t all[255];
	for (int i = 0; i < 255; i++)
		all[i] = (uint8_t)(i + 1);
	assert_int_equal(bi_name_hash(all, sizeof(all)), 2591142962u);

	/* the key offset is a u64 holding a u32 */
	assert_true(bi_name_hash("default", 7) <= UINT32_MAX);
}

static void test_extref_hash(void **state)
{
	(void)state;
	assert_int_equal(bi_extref_hash(256, "file", 4), 2709724170u);
	/* only the low 32 bits of the parent seed the CRC */
	assert_int_equal(bi_extref_hash(0x100000100ull, "file", 4), 2709724170u);
	assert_int_equal(bi_extref_hash(5, "default", 7), 1822331537u);
	assert_int_equal(bi_extref_hash(UINT64_MAX, "x", 1), 1455661164u);
}

static void test_types(void **state)
{
	(void)state;
	uint8_t out[CSUM_SIZE_MAX];
	assert_int_equal(bi_csum_size(0), 4);
	assert_int_equal(bi_csum_size(1), 8);
	assert_int_equal(bi_csum_size(2), 32);
	assert_int_equal(bi_csum_size(3), 32);
	assert_int_equal(bi_csum_size(4), 0);
	assert_int_equal(bi_csum_size(-1), 0);
	assert_int_equal(bi_csum(4, "x", 1, out), -EOPNOTSUPP);
	assert_int_equal(bi_csum(0xffff, "x", 1, out), -EOPNOTSUPP);
	assert_string_equal(btrfsimg_csum_name(0), "crc32c");
	assert_string_equal(btrfsimg_csum_name(1), "xxhash64");
	assert_string_equal(btrfsimg_csum_name(2), "sha256");
	assert_string_equal(btrfsimg_csum_name(3), "blake2b");
	assert_null(btrfsimg_csum_name(4));
	assert_null(btrfsimg_csum_name(-1));
}

static void read_super(const char *name, uint8_t buf[SB_SIZE])
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/super/%s.bin", TESTDATA, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, SB_SIZE, f), SB_SIZE);
	fclose(f);
}

/* Superblocks the kernel wrote: the stored field must equal ours, digest
 * and zero padding alike; one flipped bit must change it. */
static void test_real_super(void **state)
{
	(void)state;
	static const char *names[] = { "crc32c", "xxhash64", "sha256", "blake2b" };
	uint8_t sb[SB_SIZE], got[CSUM_SIZE_MAX];

	for (int t = 0; t < 4; t++) {
		read_super(names[t], sb);
		assert_memory_equal(sb + SB_MAGIC_OFF, "_BHRfS_M", 8);
		assert_int_equal(bi_le16(sb + SB_CSUM_TYPE), t);
		assert_int_equal(bi_csum(t, sb + SB_CSUM_START, SB_SIZE - SB_CSUM_START, got), 0);
		assert_memory_equal(got, sb + SB_CSUM, CSUM_SIZE_MAX);

		sb[SB_SIZE - 1] ^= 0x01;
		assert_int_equal(bi_csum(t, sb + SB_CSUM_START, SB_SIZE - SB_CSUM_START, got), 0);
		assert_memory_not_equal(got, sb + SB_CSUM, bi_csum_size(t));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_long),
		cmocka_unit_test(test_raw),
		cmocka_unit_test(test_name_hash),
		cmocka_unit_test(test_extref_hash),
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_real_super),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
