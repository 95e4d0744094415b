// SPDX-License-Identifier: MIT
/*
 * Chunk map tests, against three independent truths:
 *
 *  1. Hand-worked mapping vectors for every profile (the arithmetic is in
 *     the comments, done by hand from the layout rules, not by the code).
 *  2. What the kernel wrote: testdata/chunk/<layout>/ (made by gen_chunk.py on
 *     real loop devices): every chunk item must decode as btrfs-progs'
 *     dump-tree printed it, every 4 KiB block of a file must map to the
 *     device and offset where its bytes were found on the device files,
 *     and, for RAID5/6, the kernel's own parity must sit where we say P
 *     and Q are, equal XOR and ISA-L's pq_gen of the data, and rebuild
 *     every data block with any one (RAID5) or two (RAID6) devices gone.
 *  3. Brute force: a bit-by-bit GF(2^8) multiply, random RAID rows checked
 *     against ISA-L's pq_gen, and lookups against a linear scan.
 * Plus a must-fail case for every check of the chunk parser, the map and
 * the sys_chunk_array loader.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "btrfs/open.h"
#include "btrfs/raid.h"
#include "btrfs/tree.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define SL 65536ull
#define L0 (1024ull * MiB) /* every synthetic chunk starts at 1 GiB */

/* ================================================================ helpers */

/* A chunk item, laid out by hand from the format (48 + 32 per stripe). */
struct spec {
	uint64_t length, type, stripe_len;
	uint16_t n, sub;
	uint32_t ss;
	uint64_t devid[8], offset[8];
};

/* Stripe i on devid i+1 at (i+1) MiB unless told otherwise. */
static struct spec spec(uint64_t type, uint16_t n, uint64_t length)
{
	struct spec s = { length, type, SL, n, (type & BG_RAID10) ? 2 : 1, 4096, { 0 }, { 0 } };
	for (int i = 0; i < 8; i++) {
		s.devid[i] = (uint64_t)i + 1;
		s.offset[i] = ((uint64_t)i + 1) * MiB;
	}
	return s;
}

static size_t make_item(uint8_t *b, const struct spec *s)
{
	memset(b, 0, CHUNK_SIZE + 8 * STRIPE_SIZE);
	bi_put_le64(b + CHUNK_LENGTH, s->length);
	bi_put_le64(b + CHUNK_OWNER, 2);
	bi_put_le64(b + CHUNK_STRIPE_LEN, s->stripe_len);
	bi_put_le64(b + CHUNK_TYPE, s->type);
	bi_put_le32(b + CHUNK_IO_ALIGN, 65536);
	bi_put_le32(b + CHUNK_IO_WIDTH, 65536);
	bi_put_le32(b + CHUNK_SECTOR_SIZE, s->ss);
	bi_put_le16(b + CHUNK_NUM_STRIPES, s->n);
	bi_put_le16(b + CHUNK_SUB_STRIPES, s->sub);
	for (int i = 0; i < s->n && i < 8; i++) {
		uint8_t *st = b + CHUNK_SIZE + i * STRIPE_SIZE;
		bi_put_le64(st + STRIPE_DEVID, s->devid[i]);
		bi_put_le64(st + STRIPE_OFFSET, s->offset[i]);
		/* a dev_uuid derived from the devid: 0xa0.. for devid 1.. */
		memset(st + STRIPE_DEV_UUID, (int)(0x9f + s->devid[i]) & 0xff, 16);
	}
	return CHUNK_SIZE + (size_t)s->n * STRIPE_SIZE;
}

static struct bi_chunk *must_parse(const struct spec *s, uint64_t logical)
{
	uint8_t item[CHUNK_SIZE + 8 * STRIPE_SIZE];
	size_t len = make_item(item, s);
	struct bi_chunk *c = NULL;
	char why[256] = "";
	int rc = bi_chunk_parse(item, len, logical, 4096, &c, why, sizeof(why));
	if (rc)
		fail_msg("parse failed: %s", why);
	return c;
}

static void expect_phys(const struct bi_chunk *c, uint64_t logical, int copy, uint64_t devid,
			uint64_t physical, uint64_t len)
{
	struct bi_phys ph;
	assert_int_equal(bi_chunk_map_phys(c, logical, copy, &ph), 0);
	assert_int_equal(ph.devid, devid);
	assert_int_equal(ph.physical, physical);
	assert_int_equal(ph.len, len);
}

static void expect_row(const struct bi_chunk *c, uint64_t logical, uint32_t pos, uint64_t devid,
		       uint64_t physical)
{
	struct bi_phys ph;
	assert_int_equal(bi_chunk_map_row(c, logical, pos, &ph), 0);
	assert_int_equal(ph.devid, devid);
	assert_int_equal(ph.physical, physical);
}

/* ======================================================= 1. hand vectors */

static void test_map_single_dup(void **state)
{
	(void)state;
	/* single: stripe 0 = devid 1 at 1 MiB; off 200 KiB = 204800
	 * -> 1048576 + 204800 = 1253376, usable to the chunk end 8 MiB - 204800 */
	struct bi_chunk *c = must_parse(&(struct spec){ 8 * MiB, BG_DATA, SL, 1, 0, 4096,
							{ 1 }, { 1 * MiB } },
					L0);
	assert_int_equal(bi_chunk_num_copies(c), 1);
	expect_phys(c, L0 + 204800, 0, 1, 1253376, 8 * MiB - 204800);
	assert_int_equal(bi_chunk_map_phys(c, L0, 1, &(struct bi_phys){ 0 }), -EINVAL);
	free(c);

	/* dup: both stripes on devid 1, at 1 MiB and 9 MiB; off 300000
	 * copy 0 -> 1048576 + 300000 = 1348576, copy 1 -> 9437184 + 300000 = 9737184 */
	c = must_parse(&(struct spec){ 8 * MiB, BG_METADATA | BG_DUP, SL, 2, 0, 4096, { 1, 1 },
				       { 1 * MiB, 9 * MiB } },
		       L0);
	assert_int_equal(bi_chunk_num_copies(c), 2);
	expect_phys(c, L0 + 300000, 0, 1, 1348576, 8 * MiB - 300000);
	expect_phys(c, L0 + 300000, 1, 1, 9737184, 8 * MiB - 300000);
	assert_int_equal(bi_chunk_map_phys(c, L0, 2, &(struct bi_phys){ 0 }), -EINVAL);
	free(c);
}

static void test_map_raid1_family(void **state)
{
	(void)state;
	/* raid1 / raid1c3 / raid1c4: mirror k = stripe k (devid k+1 at (k+1) MiB) + off.
	 * off 70000: 1118576, 2167152, 3215728, 4264304 */
	static const uint64_t bits[] = { BG_RAID1, BG_RAID1C3, BG_RAID1C4 };
	static const uint64_t phys[] = { 1118576, 2167152, 3215728, 4264304 };
	for (int b = 0; b < 3; b++) {
		uint16_t n = (uint16_t)(b + 2);
		struct spec s = spec(BG_DATA | bits[b], n, 16 * MiB);
		struct bi_chunk *c = must_parse(&s, L0);
		assert_int_equal(bi_chunk_num_copies(c), n);
		for (int k = 0; k < n; k++)
			expect_phys(c, L0 + 70000, k, (uint64_t)k + 1, phys[k], 16 * MiB - 70000);
		assert_int_equal(bi_chunk_map_phys(c, L0, n, &(struct bi_phys){ 0 }), -EINVAL);
		free(c);
	}
}

static void test_map_raid0(void **state)
{
	(void)state;
	/* raid0, 3 stripes at 1, 2, 3 MiB, length 30 stripes = 1966080 (10 rows) */
	struct spec s = spec(BG_DATA | BG_RAID0, 3, 30 * SL);
	struct bi_chunk *c = must_parse(&s, L0);
	assert_int_equal(bi_chunk_num_copies(c), 1);
	/* off 200K = 204800: nr = 3, so = 8192, idx = 3 % 3 = 0, row = 1
	 * -> 1048576 + 65536 + 8192 = 1122304, 57344 left in the stripe */
	expect_phys(c, L0 + 204800, 0, 1, 1122304, 57344);
	/* off 5*64K + 100 = 327780: nr 5, idx 2, row 1 -> 3145728 + 65536 + 100 = 3211364 */
	expect_phys(c, L0 + 327780, 0, 3, 3211364, 65436);
	/* last 100 bytes: off 1965980, nr 29, so 65436, idx 2, row 9
	 * -> 3145728 + 589824 + 65436 = 3800988, 100 left (chunk end) */
	expect_phys(c, L0 + 1965980, 0, 3, 3800988, 100);
	assert_int_equal(bi_chunk_map_phys(c, L0 + 1966080, 0, &(struct bi_phys){ 0 }), -EINVAL);
	assert_int_equal(bi_chunk_map_phys(c, L0 - 1, 0, &(struct bi_phys){ 0 }), -EINVAL);
	assert_int_equal(bi_chunk_map_phys(c, L0, 1, &(struct bi_phys){ 0 }), -EINVAL);
	/* span: 10 rows of 64K per device */
	assert_int_equal(bi_chunk_stripe_span(c), 10 * SL);
	free(c);

	/* The kernel accepts a length that is no whole number of rows:
	 * raid0 2 stripes, length 3 * 64K. off 2*64K + 5: nr 2, idx 0, row 1
	 * -> 1048576 + 65536 + 5 = 1114117, left min(65531, 196608 - 131077) */
	s = spec(BG_DATA | BG_RAID0, 2, 3 * SL);
	c = must_parse(&s, L0);
	expect_phys(c, L0 + 2 * SL + 5, 0, 1, 1114117, 65531);
	assert_int_equal(bi_chunk_stripe_span(c), 2 * SL); /* ceil(3/2) rows */
	free(c);

	/* raid0 with a single stripe (the kernel allows it) is plain */
	s = spec(BG_DATA | BG_RAID0, 1, 4 * SL);
	c = must_parse(&s, L0);
	expect_phys(c, L0 + 3 * SL + 7, 0, 1, 1 * MiB + 3 * SL + 7, SL - 7);
	free(c);
}

static void test_map_raid10(void **state)
{
	(void)state;
	/* raid10, 4 stripes (1..4 MiB), f = 4 / 2 = 2 pairs.
	 * off 3*64K + 4096 = 200704: nr 3, so 4096, idx (3 % 2) * 2 = 2, row 3 / 2 = 1
	 * copy 0: stripe 2 (devid 3): 3145728 + 65536 + 4096 = 3215360
	 * copy 1: stripe 3 (devid 4): 4194304 + 65536 + 4096 = 4263936 */
	struct spec s = spec(BG_DATA | BG_RAID10, 4, 40 * SL);
	struct bi_chunk *c = must_parse(&s, L0);
	assert_int_equal(bi_chunk_num_copies(c), 2);
	assert_int_equal(c->sub_stripes, 2);
	expect_phys(c, L0 + 200704, 0, 3, 3215360, 61440);
	expect_phys(c, L0 + 200704, 1, 4, 4263936, 61440);
	assert_int_equal(bi_chunk_map_phys(c, L0, 2, &(struct bi_phys){ 0 }), -EINVAL);
	free(c);

	/* raid10, 6 stripes, f = 3. off 7*64K + 5 = 458757: nr 7, idx (7 % 3) * 2 = 2,
	 * row 7 / 3 = 2. copy 0: 3145728 + 131072 + 5 = 3276805;
	 * copy 1: 4194304 + 131072 + 5 = 4325381 */
	s = spec(BG_DATA | BG_RAID10, 6, 60 * SL);
	c = must_parse(&s, L0);
	expect_phys(c, L0 + 458757, 0, 3, 3276805, SL - 5);
	expect_phys(c, L0 + 458757, 1, 4, 4325381, SL - 5);
	free(c);

	/* raid10 with 3 stripes passes the kernel's checks: f = 1, the third
	 * stripe is never used. off 2*64K: nr 2, idx 0, row 2 -> 1048576 + 131072 */
	s = spec(BG_DATA | BG_RAID10, 3, 4 * SL);
	c = must_parse(&s, L0);
	expect_phys(c, L0 + 2 * SL, 0, 1, 1179648, SL);
	expect_phys(c, L0 + 2 * SL, 1, 2, 2228224, SL);
	free(c);
}

static void test_map_raid5(void **state)
{
	(void)state;
	/* raid5, 3 stripes (1, 2, 3 MiB): d = 2.
	 * off 5*64K + 10 = 327690: nr 5, so 10, full 5 / 2 = 2, di 1
	 * data: stripe (2 + 1) % 3 = 0 -> 1048576 + 2*65536 + 10 = 1179658
	 * P:    stripe (2 + 2) % 3 = 1 -> 2097152 + 131072 + 10 = 2228234
	 * D0:   stripe (2 + 0) % 3 = 2 -> 3145728 + 131072 + 10 = 3276810 */
	struct spec s = spec(BG_DATA | BG_RAID5, 3, 20 * SL);
	struct bi_chunk *c = must_parse(&s, L0);
	assert_int_equal(bi_chunk_num_copies(c), 2);
	expect_phys(c, L0 + 327690, 0, 1, 1179658, SL - 10);
	expect_row(c, L0 + 327690, 1, 1, 1179658);
	expect_row(c, L0 + 327690, 2, 2, 2228234);
	expect_row(c, L0 + 327690, 0, 3, 3276810);
	assert_int_equal(bi_chunk_map_row(c, L0, 3, &(struct bi_phys){ 0 }), -EINVAL);
	assert_int_equal(bi_chunk_map_phys(c, L0, 1, &(struct bi_phys){ 0 }), -EINVAL);
	free(c);

	/* raid5, 4 stripes: d = 3. off 7*64K = 458752: nr 7, full 2, di 1
	 * data: stripe (2 + 1) % 4 = 3 -> 4194304 + 131072 = 4325376
	 * P:    stripe (2 + 3) % 4 = 1 -> 2097152 + 131072 = 2228224 */
	s = spec(BG_DATA | BG_RAID5, 4, 30 * SL);
	c = must_parse(&s, L0);
	expect_phys(c, L0 + 458752, 0, 4, 4325376, SL);
	expect_row(c, L0 + 458752, 3, 2, 2228224);
	free(c);
}

static void test_map_raid6(void **state)
{
	(void)state;
	/* raid6, 4 stripes: d = 2. off 3*64K + 4096 = 200704: nr 3, full 1, di 1
	 * data: stripe (1 + 1) % 4 = 2 -> 3145728 + 65536 + 4096 = 3215360
	 * P:    stripe (1 + 2) % 4 = 3 -> 4194304 + 69632 = 4263936
	 * Q:    stripe (1 + 3) % 4 = 0 -> 1048576 + 69632 = 1118208 */
	struct spec s = spec(BG_DATA | BG_RAID6, 4, 20 * SL);
	struct bi_chunk *c = must_parse(&s, L0);
	assert_int_equal(bi_chunk_num_copies(c), 4); /* the kernel: num_stripes */
	expect_phys(c, L0 + 200704, 0, 3, 3215360, 61440);
	expect_row(c, L0 + 200704, 2, 4, 4263936);
	expect_row(c, L0 + 200704, 3, 1, 1118208);
	free(c);

	/* raid6, 5 stripes: d = 3. off 10*64K + 1 = 655361: nr 10, full 3, di 1
	 * data: stripe (3 + 1) % 5 = 4 -> 5242880 + 196608 + 1 = 5439489
	 * P:    stripe (3 + 3) % 5 = 1 -> 2097152 + 196608 + 1 = 2293761
	 * Q:    stripe (3 + 4) % 5 = 2 -> 3145728 + 196608 + 1 = 3342337 */
	s = spec(BG_DATA | BG_RAID6, 5, 30 * SL);
	c = must_parse(&s, L0);
	assert_int_equal(bi_chunk_num_copies(c), 5);
	expect_phys(c, L0 + 655361, 0, 5, 5439489, SL - 1);
	expect_row(c, L0 + 655361, 3, 2, 2293761);
	expect_row(c, L0 + 655361, 4, 3, 3342337);
	free(c);
}

/* ===================================================== parser must-fail */

struct bad_case {
	const char *what;
	struct spec s;
	uint64_t logical;
	size_t len_delta;	/* added to the item length (wraps for "minus") */
	const char *msg;	/* must appear in the message */
};

static void test_parse_must_fail(void **state)
{
	(void)state;
	const uint64_t R1 = BG_DATA | BG_RAID1;
	struct spec ok = spec(R1, 2, 8 * MiB);
	struct bad_case cases[40];
	size_t n = 0;
#define CASE(w, field, val, lg, msg_)                                                     \
	do {                                                                              \
		cases[n] = (struct bad_case){ w, ok, lg, 0, msg_ };                       \
		cases[n].s.field = val;                                                   \
		n++;                                                                      \
	} while (0)
	CASE("zero stripes", n, 0, L0, "bad num_stripes, have 0 expect >= 1");
	CASE("start misaligned", length, 8 * MiB, L0 + 512, "start not aligned, have 1073742336");
	CASE("sector_size", ss, 512, L0, "bad sector_size, have 512 expect 4096");
	CASE("length 0", length, 0, L0, "bad length, have 0");
	CASE("length unaligned", length, 4097, L0, "bad length, have 4097");
	CASE("end overflows", length, 8192, UINT64_MAX - 4095, "start + length overflows");
	CASE("stripe_len 32K", stripe_len, 32768, L0, "bad stripe_len, have 32768 expect 65536");
	CASE("stripe_len 0", stripe_len, 0, L0, "bad stripe_len, have 0");
	CASE("stripe_len 128K", stripe_len, 131072, L0, "bad stripe_len, have 131072");
	CASE("length at 2^32 stripes", length, (uint64_t)UINT32_MAX * SL, L0,
	     "length too large, have 281474976645120 expect < 281474976645120");
	CASE("unknown type bit", type, R1 | (1ull << 11), L0, "unknown type bits 0x800");
	CASE("unknown high bit", type, R1 | (1ull << 48), L0, "unknown type bits 0x1000000000000");
	CASE("two profiles", type, BG_DATA | BG_RAID1 | BG_DUP, L0,
	     "several profile bits, have 0x30");
	CASE("no type", type, BG_RAID1, L0, "no type bit, have 0x10");
	CASE("system and data", type, BG_SYSTEM | BG_DATA | BG_RAID1, L0,
	     "system chunk also data or metadata");
	CASE("system and metadata", type, BG_SYSTEM | BG_METADATA | BG_RAID1, L0,
	     "system chunk also data or metadata");
	CASE("single with 2", type, BG_DATA, L0, "bad num_stripes for single, have 2 expect 1");
	CASE("raid1c3 with 2", type, BG_DATA | BG_RAID1C3, L0,
	     "bad num_stripes for raid1c3, have 2 expect 3");
	CASE("raid1c4 with 2", type, BG_DATA | BG_RAID1C4, L0,
	     "bad num_stripes for raid1c4, have 2 expect 4");
	CASE("raid6 with 2", type, BG_DATA | BG_RAID6, L0,
	     "bad num_stripes for raid6, have 2 expect >= 3");
	CASE("stripe range overflows", offset[1], UINT64_MAX - 100, L0,
	     "stripe 1: device range overflows");
	CASE("stripe range ends at 2^64", offset[0], 0 - 8 * MiB, L0,
	     "stripe 0: device range overflows");
#undef CASE
	struct spec s;
#define SCASE(w, expr, msg_)                                                              \
	do {                                                                              \
		s = ok;                                                                   \
		expr;                                                                     \
		cases[n++] = (struct bad_case){ w, s, L0, 0, msg_ };                      \
	} while (0)
	SCASE("raid1 with 3", s.n = 3, "bad num_stripes for raid1, have 3 expect 2");
	SCASE("raid1 with 1", s.n = 1, "bad num_stripes for raid1, have 1 expect 2");
	SCASE("dup with 1", (s.n = 1, s.type = BG_METADATA | BG_DUP),
	      "bad num_stripes for dup, have 1 expect 2");
	SCASE("dup with 3", (s.n = 3, s.type = BG_METADATA | BG_DUP),
	      "bad num_stripes for dup, have 3 expect 2");
	SCASE("raid10 with 1", (s.n = 1, s.sub = 2, s.type = BG_DATA | BG_RAID10),
	      "bad num_stripes for raid10, have 1 expect >= 2");
	SCASE("raid10 sub 1", (s.n = 4, s.sub = 1, s.type = BG_DATA | BG_RAID10),
	      "bad sub_stripes for raid10, have 1 expect 2");
	SCASE("raid10 sub 0", (s.n = 4, s.sub = 0, s.type = BG_DATA | BG_RAID10),
	      "bad sub_stripes for raid10, have 0 expect 2");
	SCASE("raid5 with 1", (s.n = 1, s.type = BG_DATA | BG_RAID5),
	      "bad num_stripes for raid5, have 1 expect >= 2");
	SCASE("raid6 with 2", (s.n = 2, s.type = BG_DATA | BG_RAID6),
	      "bad num_stripes for raid6, have 2 expect >= 3");
	SCASE("raid5 range overflows",
	      (s.n = 3, s.type = BG_DATA | BG_RAID5, s.length = 4 * SL, s.offset[2] = 0 - 2 * SL),
	      "stripe 2: device range overflows"); /* span = 2 rows = 128K */
#undef SCASE
	cases[n++] = (struct bad_case){ "item one byte long", ok, L0, 1,
					"bad item size for 2 stripes, have 113 expect 112" };
	cases[n++] = (struct bad_case){ "item one stripe long", ok, L0, STRIPE_SIZE,
					"bad item size for 2 stripes, have 144 expect 112" };
	cases[n++] = (struct bad_case){ "item one byte short", ok, L0, (size_t)-1,
					"bad item size for 2 stripes, have 111 expect 112" };
	for (size_t i = 0; i < n; i++) {
		uint8_t item[CHUNK_SIZE + 9 * STRIPE_SIZE] = { 0 };
		size_t len = make_item(item, &cases[i].s) + cases[i].len_delta;
		struct bi_chunk *c = (struct bi_chunk *)&c; /* must be reset to NULL */
		char why[256] = "";
		int rc = bi_chunk_parse(item, len, cases[i].logical, 4096, &c, why, sizeof(why));
		if (rc != -EUCLEAN || c != NULL || !strstr(why, cases[i].msg))
			fail_msg("%s: rc %d, message '%s', expect -EUCLEAN and '%s'", cases[i].what,
				 rc, why, cases[i].msg);
		char at[64];
		snprintf(at, sizeof(at), "chunk at logical %llu: ",
			 (unsigned long long)cases[i].logical);
		if (strncmp(why, at, strlen(at)))
			fail_msg("%s: message '%s' does not name the logical address", cases[i].what,
				 why);
	}

	/* too short to hold num_stripes, and NULL / bad arguments */
	uint8_t item[CHUNK_SIZE + 8 * STRIPE_SIZE];
	make_item(item, &ok);
	struct bi_chunk *c;
	char why[256];
	assert_int_equal(bi_chunk_parse(item, 40, L0, 4096, &c, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "item too small, have 40 expect >= 48"));
	assert_int_equal(bi_chunk_parse(NULL, 0, L0, 4096, &c, why, sizeof(why)), -EUCLEAN);
	assert_int_equal(bi_chunk_parse(item, 112, L0, 0, &c, why, sizeof(why)), -EINVAL);
	assert_int_equal(bi_chunk_parse(item, 112, L0, 3000, &c, why, sizeof(why)), -EINVAL);
	assert_int_equal(bi_chunk_parse(item, 112, L0, 4096, NULL, why, sizeof(why)), -EINVAL);
}

/* What the kernel accepts must pass too. */
static void test_parse_accepts(void **state)
{
	(void)state;
	struct spec s = spec(BG_DATA | BG_RAID1, 2, 8 * MiB);
	struct bi_chunk *c;
	/* sub_stripes 0 outside raid10 (old mkfs wrote it): ignored */
	s.sub = 0;
	c = must_parse(&s, L0);
	assert_int_equal(c->sub_stripes, 1);
	free(c);
	/* mixed data+metadata is the loader's business (it knows the features) */
	s.type = BG_DATA | BG_METADATA | BG_RAID1;
	free(must_parse(&s, L0));
	/* the largest length the kernel allows */
	s = spec(BG_DATA, 1, (uint64_t)UINT32_MAX * SL - 4096);
	c = must_parse(&s, 4096);
	assert_int_equal(c->length, (uint64_t)UINT32_MAX * SL - 4096);
	free(c);
	/* a chunk ending one sector before 2^64 (ending at 2^64 overflows, as
	 * the kernel's check_add_overflow says) */
	s = spec(BG_DATA, 1, 8192);
	free(must_parse(&s, 0 - 12288ull));
	/* a stripe ending exactly at 2^64 */
	s = spec(BG_DATA, 1, 8 * MiB);
	s.offset[0] = 0 - 8 * MiB - 1;
	free(must_parse(&s, L0));
	/* raid5 with 2 stripes (a mirror in effect), raid6 with 3 */
	s = spec(BG_DATA | BG_RAID5, 2, 4 * SL);
	free(must_parse(&s, L0));
	s = spec(BG_DATA | BG_RAID6, 3, 4 * SL);
	free(must_parse(&s, L0));
	/* 64 KiB sectors */
	s = spec(BG_DATA, 1, 8 * MiB);
	s.ss = 65536;
	uint8_t item[CHUNK_SIZE + 8 * STRIPE_SIZE];
	size_t len = make_item(item, &s);
	char why[256];
	assert_int_equal(bi_chunk_parse(item, len, L0, 65536, &c, why, sizeof(why)), 0);
	free(c);
}

/* ==================================================================== map */

static struct bi_chunk *chunk_at(uint64_t logical, uint64_t length, uint64_t devid)
{
	struct spec s = spec(BG_DATA, 1, length);
	s.devid[0] = devid;
	return must_parse(&s, logical);
}

static void test_map_insert_lookup(void **state)
{
	(void)state;
	struct bi_chunk_map *m = bi_chunk_map_new();
	char why[256];
	/* out of order: B [L0+8M, +8M) then A [L0, +8M) */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 + 8 * MiB, 8 * MiB, 2), why, 256), 0);
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0, 8 * MiB, 1), why, 256), 0);
	assert_int_equal(bi_chunk_map_count(m), 2);
	assert_int_equal(bi_chunk_map_at(m, 0)->logical, L0);
	assert_int_equal(bi_chunk_map_at(m, 1)->logical, L0 + 8 * MiB);
	assert_null(bi_chunk_map_at(m, 2));
	/* boundaries */
	assert_null(bi_chunk_lookup(m, L0 - 1));
	assert_int_equal(bi_chunk_lookup(m, L0)->stripes[0].devid, 1);
	assert_int_equal(bi_chunk_lookup(m, L0 + 8 * MiB - 1)->stripes[0].devid, 1);
	assert_int_equal(bi_chunk_lookup(m, L0 + 8 * MiB)->stripes[0].devid, 2);
	assert_int_equal(bi_chunk_lookup(m, L0 + 16 * MiB - 1)->stripes[0].devid, 2);
	assert_null(bi_chunk_lookup(m, L0 + 16 * MiB));
	assert_null(bi_chunk_lookup(m, 0));
	assert_null(bi_chunk_lookup(m, UINT64_MAX));
	/* overlaps, each way */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 + 4 * MiB, 8 * MiB, 3), why, 256),
			 -EUCLEAN);
	assert_non_null(strstr(why, "chunk at logical 1077936128: range [1077936128, 1086324736) "
				    "overlaps chunk [1073741824, 1082130432)"));
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 - 4 * MiB, 8 * MiB, 3), why, 256),
			 -EUCLEAN);
	assert_non_null(strstr(why, "overlaps chunk [1073741824, 1082130432)"));
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 + 15 * MiB, 2 * MiB, 3), why, 256),
			 -EUCLEAN);
	assert_non_null(strstr(why, "overlaps chunk [1082130432, 1090519040)"));
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 + 9 * MiB, 1 * MiB, 3), why, 256),
			 -EUCLEAN); /* inside */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 - 8 * MiB, 32 * MiB, 3), why, 256),
			 -EUCLEAN); /* around both */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0, 4 * MiB, 3), why, 256),
			 -EUCLEAN); /* same start, shorter */
	/* the same chunk again (sys array + chunk tree): dropped */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0, 8 * MiB, 1), why, 256), 0);
	/* same range, other stripes: dropped, the first one stays */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0, 8 * MiB, 7), why, 256), 1);
	assert_int_equal(bi_chunk_map_count(m), 2);
	assert_int_equal(bi_chunk_lookup(m, L0)->stripes[0].devid, 1);
	/* touching neighbours are fine */
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 - 8 * MiB, 8 * MiB, 4), why, 256), 0);
	assert_int_equal(bi_chunk_map_insert(m, chunk_at(L0 + 16 * MiB, 4096, 5), why, 256), 0);
	assert_int_equal(bi_chunk_map_count(m), 4);
	assert_int_equal(bi_chunk_map_degraded(m), 0);
	assert_int_equal(bi_chunk_map_insert(NULL, chunk_at(0, 4096, 1), why, 256), -EINVAL);
	bi_chunk_map_free(m);
	bi_chunk_map_free(NULL);
	assert_null(bi_chunk_lookup(NULL, 0));
}

/* Random disjoint chunks inserted in random order, against a linear scan. */
static void test_map_brute_force(void **state)
{
	(void)state;
	enum { N = 1500 };
	static uint64_t start[N], len[N];
	uint64_t pos = 4096, seed = 12345;
	for (int i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		pos += ((seed >> 33) % 4) * 4096; /* gaps of 0..3 sectors */
		start[i] = pos;
		len[i] = (1 + (seed >> 40) % 16) * 4096;
		pos += len[i];
	}
	int order[N];
	for (int i = 0; i < N; i++)
		order[i] = i;
	for (int i = N - 1; i > 0; i--) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		int j = (int)((seed >> 33) % (uint64_t)(i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	struct bi_chunk_map *m = bi_chunk_map_new();
	char why[256];
	for (int i = 0; i < N; i++)
		assert_int_equal(bi_chunk_map_insert(m, chunk_at(start[order[i]], len[order[i]],
								 (uint64_t)order[i] + 1),
						     why, 256),
				 0);
	for (uint64_t a = 0; a < pos + 8192; a += 1024 + 3) {
		int want = -1;
		for (int i = 0; i < N; i++)
			if (a >= start[i] && a < start[i] + len[i])
				want = i;
		const struct bi_chunk *c = bi_chunk_lookup(m, a);
		if (want < 0)
			assert_null(c);
		else
			assert_int_equal(c->stripes[0].devid, (uint64_t)want + 1);
	}
	bi_chunk_map_free(m);
}

/* ============================================= 2. the kernel's layouts */

struct pchunk {	/* a chunk as dump-tree printed it */
	uint64_t logical, length, stripe_len, type;
	uint32_t sector_size;
	unsigned num_stripes;
	struct {
		uint64_t devid, offset;
		uint8_t uuid[16];
	} s[8];
};

static uint64_t type_bits(const char *t)
{
	static const struct {
		const char *name;
		uint64_t bit;
	} names[] = { { "DATA", BG_DATA },	   { "SYSTEM", BG_SYSTEM }, { "METADATA", BG_METADATA },
		      { "RAID0", BG_RAID0 },	   { "RAID1", BG_RAID1 },   { "DUP", BG_DUP },
		      { "RAID10", BG_RAID10 },	   { "RAID5", BG_RAID5 },   { "RAID6", BG_RAID6 },
		      { "RAID1C3", BG_RAID1C3 },   { "RAID1C4", BG_RAID1C4 }, { "single", 0 } };
	uint64_t bits = 0;
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", t);
	for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|")) {
		size_t i;
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (!strcmp(tok, names[i].name))
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			fail_msg("unknown type name '%s'", tok);
		bits |= names[i].bit;
	}
	return bits;
}

static void uuid_parse(const char *s, uint8_t out[16])
{
	int k = 0;
	for (const char *p = s; *p && k < 16; p++) {
		if (*p == '-')
			continue;
		unsigned v;
		assert_int_equal(sscanf(p, "%2x", &v), 1);
		out[k++] = (uint8_t)v;
		p++;
	}
	assert_int_equal(k, 16);
}

static FILE *open_fixture(const char *layout, const char *file, const char *mode)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/chunk/%s/%s", TESTDATA, layout, file);
	FILE *f = fopen(path, mode);
	if (!f)
		fail_msg("cannot open %s", path);
	return f;
}

static size_t load_file(const char *layout, const char *file, uint8_t *buf, size_t max)
{
	FILE *f = open_fixture(layout, file, "rb");
	size_t n = fread(buf, 1, max, f);
	assert_true(feof(f) || n < max);
	fclose(f);
	return n;
}

static size_t load_pchunks(const char *layout, struct pchunk *out, size_t max)
{
	FILE *f = open_fixture(layout, "chunks.txt", "r");
	char line[512], t[128], u[64];
	size_t n = 0;
	struct pchunk *c = NULL;
	unsigned long long a, b;
	unsigned x, y, last = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, " key (")) {
			c = NULL;
			if (sscanf(line, " item %*u key (FIRST_CHUNK_TREE CHUNK_ITEM %llu)", &a) != 1)
				continue;
			assert_true(n < max);
			c = &out[n++];
			memset(c, 0, sizeof(*c));
			c->logical = a;
			last = 0;
		} else if (c && sscanf(line, " length %llu owner %*u stripe_len %llu type %127s", &a,
				       &b, t) == 3) {
			c->length = a;
			c->stripe_len = b;
			c->type = type_bits(t);
		} else if (c && sscanf(line, " io_align %*u io_width %*u sector_size %u", &x) == 1) {
			c->sector_size = x;
		} else if (c && sscanf(line, " num_stripes %u sub_stripes %u", &x, &y) == 2) {
			c->num_stripes = x;
		} else if (c && sscanf(line, " stripe %u devid %llu offset %llu", &x, &a, &b) == 3) {
			assert_true(x < 8);
			c->s[x].devid = a;
			c->s[x].offset = b;
			last = x;
		} else if (c && sscanf(line, " dev_uuid %63s", u) == 1) {
			/* the uuid line follows its stripe line */
			uuid_parse(u, c->s[last].uuid);
		}
	}
	fclose(f);
	return n;
}

static void expect_same(const struct bi_chunk *c, const struct pchunk *p)
{
	assert_int_equal(c->logical, p->logical);
	assert_int_equal(c->length, p->length);
	assert_int_equal(c->stripe_len, p->stripe_len);
	assert_int_equal(c->type, p->type);
	assert_int_equal(c->num_stripes, p->num_stripes);
	assert_int_equal(c->sub_stripes, (p->type & BG_RAID10) ? 2 : 1);
	for (unsigned i = 0; i < p->num_stripes; i++) {
		assert_int_equal(c->stripes[i].devid, p->s[i].devid);
		assert_int_equal(c->stripes[i].offset, p->s[i].offset);
		assert_memory_equal(c->stripes[i].dev_uuid, p->s[i].uuid, 16);
	}
}

/* A handle with no devices and an empty chunk map, for unit use. */
static struct btrfsimg_fs *fake_fs(void)
{
	struct btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	fs->sectorsize = 4096;
	fs->chunks = bi_chunk_map_new();
	assert_non_null(fs->chunks);
	return fs;
}

static void count_damage(void *ctx, bool damage, const char *msg)
{
	(void)msg;
	if (damage)
		(*(int *)ctx)++;
}

static struct bi_chunk_map *load_layout_map(const char *layout, struct pchunk *pc, size_t *npc)
{
	*npc = load_pchunks(layout, pc, 16);
	assert_true(*npc >= 3);
	struct bi_chunk_map *m = bi_chunk_map_new();
	for (size_t i = 0; i < *npc; i++) {
		char name[64], why[256];
		uint8_t item[512];
		snprintf(name, sizeof(name), "chunk-%llu.bin", (unsigned long long)pc[i].logical);
		size_t len = load_file(layout, name, item, sizeof(item));
		struct bi_chunk *c;
		if (bi_chunk_parse(item, len, pc[i].logical, 4096, &c, why, sizeof(why)))
			fail_msg("%s %s: %s", layout, name, why);
		assert_int_equal(pc[i].sector_size, 4096);
		expect_same(c, &pc[i]);
		assert_int_equal(bi_chunk_map_insert(m, c, why, sizeof(why)), 0);
	}
	return m;
}

struct loc {
	uint64_t logical, devid, physical;
};

static size_t load_map_txt(const char *layout, struct loc *out, size_t max)
{
	FILE *f = open_fixture(layout, "map.txt", "r");
	char line[256];
	size_t n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, c;
		if (line[0] == '#')
			continue;
		assert_int_equal(sscanf(line, "%llu %llu %llu", &a, &b, &c), 3);
		assert_true(n < max);
		out[n++] = (struct loc){ a, b, c };
	}
	fclose(f);
	return n;
}

static const char *const layouts[] = { "single",   "dup",     "raid0-3", "raid1",
				       "raid1c3",  "raid1c4", "raid10-4", "raid10-6",
				       "raid5-3",  "raid5-4", "raid6-4",  "raid6-5" };

/* Every copy of every file block is where the kernel put it. */
static void check_layout_map(const char *layout)
{
	struct pchunk pc[16];
	size_t npc;
	struct bi_chunk_map *m = load_layout_map(layout, pc, &npc);
	static struct loc locs[4096];
	size_t n = load_map_txt(layout, locs, 4096), groups = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && locs[j].logical == locs[i].logical)
			j++;
		const struct bi_chunk *c = bi_chunk_lookup(m, locs[i].logical);
		assert_non_null(c);
		assert_true(c->type & BG_DATA);
		bool raid56 = c->type & (BG_RAID5 | BG_RAID6);
		int copies = raid56 ? 1 : bi_chunk_num_copies(c);
		if ((size_t)copies != j - i)
			fail_msg("%s logical %llu: %zu copies on disk, we map %d", layout,
				 (unsigned long long)locs[i].logical, j - i, copies);
		bool used[8] = { false };
		for (int k = 0; k < copies; k++) {
			struct bi_phys ph;
			assert_int_equal(bi_chunk_map_phys(c, locs[i].logical, k, &ph), 0);
			assert_true(ph.len >= 4096);
			size_t hit = j;
			for (size_t q = i; q < j; q++)
				if (!used[q - i] && locs[q].devid == ph.devid &&
				    locs[q].physical == ph.physical)
					hit = q;
			if (hit == j)
				fail_msg("%s logical %llu copy %d: we map devid %llu physical %llu, "
					 "not where the kernel wrote it",
					 layout, (unsigned long long)locs[i].logical, k,
					 (unsigned long long)ph.devid,
					 (unsigned long long)ph.physical);
			used[hit - i] = true;
		}
		groups++;
		i = j;
	}
	assert_int_equal(groups, 512); /* 2 MiB in 4 KiB blocks */
	bi_chunk_map_free(m);

	/* the superblock's sys array decodes to the SYSTEM chunk progs printed */
	struct btrfsimg_fs *fs = fake_fs();
	int damage = 0;
	btrfsimg_set_log(fs, count_damage, &damage);
	fs->sb.sys_array_size = (uint32_t)load_file(layout, "sysarray.bin",
						    fs->sb.raw + SB_SYS_CHUNK_ARRAY,
						    SB_SYS_CHUNK_ARRAY_MAX);
	assert_int_equal(bi_chunk_load_sys_array(fs), 0);
	assert_int_equal(bi_chunk_map_count(fs->chunks), 1);
	const struct bi_chunk *sys = bi_chunk_map_at(fs->chunks, 0);
	size_t k;
	for (k = 0; k < npc && !(pc[k].type & BG_SYSTEM); k++)
		;
	assert_true(k < npc);
	expect_same(sys, &pc[k]);
	assert_int_equal(damage, 0);
	btrfsimg_fs_free(fs);
}

static void test_kernel_layouts(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		check_layout_map(layouts[i]);
}

/* ------------------------------------- RAID5/6 rows the kernel wrote */

#define SLICE 1024

struct slice {
	uint64_t rel, so, devid, physical;
	size_t binoff;
};

struct slicedev {
	uint64_t devid;
	const struct slice *sl;
	size_t n;
	const uint8_t *bin;
};

/* A device that holds only the recorded slices (zeros elsewhere). */
static int slice_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct slicedev *d = ctx;
	memset(buf, 0, len);
	for (size_t i = 0; i < d->n; i++) {
		const struct slice *s = &d->sl[i];
		if (s->devid != d->devid || s->physical >= off + len || s->physical + SLICE <= off)
			continue;
		uint64_t a = s->physical > off ? s->physical : off;
		uint64_t b = s->physical + SLICE < off + len ? s->physical + SLICE : off + len;
		memcpy((uint8_t *)buf + (a - off), d->bin + s->binoff + (a - s->physical), b - a);
	}
	return 0;
}

static struct bi_dev *add_member(struct btrfsimg_fs *fs, btrfsimg_read_fn rd, void *ctx,
				 uint64_t size, uint64_t devid, const uint8_t uuid[16])
{
	assert_int_equal(btrfsimg_add_device_io(fs, rd, ctx, size, NULL), 0);
	struct bi_dev *d = &fs->devs[fs->ndevs - 1];
	d->member = true;
	d->has_super = true;
	d->devid = devid;
	memcpy(d->dev_uuid, uuid, 16);
	return d;
}

static const struct slice *find_slice(const struct slice *sl, size_t n, uint64_t devid,
				      uint64_t physical)
{
	for (size_t i = 0; i < n; i++)
		if (sl[i].devid == devid && sl[i].physical == physical)
			return &sl[i];
	return NULL;
}

static const struct loc *find_loc(const struct loc *l, size_t n, uint64_t devid, uint64_t phys)
{
	for (size_t i = 0; i < n; i++)
		if (l[i].devid == devid && l[i].physical == phys)
			return &l[i];
	return NULL;
}

static void set_missing(struct btrfsimg_fs *fs, uint32_t mask)
{
	for (size_t i = 0; i < fs->ndevs; i++)
		fs->devs[i].member = !(mask & (1u << i));
}

struct rowctx {
	const char *layout;
	struct btrfsimg_fs *fs;
	const struct bi_chunk *c;
	uint32_t d, np, n;
	const uint8_t *blk[8];	/* the row's slices by position */
	uint64_t logical[8];	/* of the data positions */
	int devidx[8];		/* fs->devs index of each position */
};

enum outcome { MUST_FAIL, MUST_WORK, MAY_WORK };

/* Read data position x with devices @mask missing. Whatever a read
 * returns must be the kernel's bytes; @want says whether it must read. */
static void expect_read(const struct rowctx *r, uint32_t x, uint32_t mask, int copy,
			enum outcome want)
{
	uint8_t got[SLICE];
	set_missing(r->fs, mask);
	int rc = bi_read_copy(r->fs, r->logical[x], got, SLICE, copy);
	if (rc && want == MUST_WORK)
		fail_msg("%s logical %llu copy %d missing 0x%x: %d %s", r->layout,
			 (unsigned long long)r->logical[x], copy, mask, rc, r->fs->err);
	if (rc == 0 && want == MUST_FAIL)
		fail_msg("%s logical %llu copy %d missing 0x%x: read, expected -EIO", r->layout,
			 (unsigned long long)r->logical[x], copy, mask);
	if (rc && rc != -EIO)
		fail_msg("%s logical %llu copy %d missing 0x%x: %d, expected -EIO", r->layout,
			 (unsigned long long)r->logical[x], copy, mask, rc);
	if (rc == 0 && memcmp(got, r->blk[x], SLICE))
		fail_msg("%s logical %llu copy %d missing 0x%x: wrong bytes", r->layout,
			 (unsigned long long)r->logical[x], copy, mask);
}

/* The kernel's parity is where we say, and is what Linux RAID-6 defines. */
static void check_parity(const struct rowctx *r)
{
	uint8_t p[SLICE] = { 0 };
	for (uint32_t i = 0; i < r->d; i++)
		for (int k = 0; k < SLICE; k++)
			p[k] ^= r->blk[i][k];
	if (memcmp(p, r->blk[r->d], SLICE))
		fail_msg("%s row at logical %llu: P is not the XOR of the data", r->layout,
			 (unsigned long long)r->logical[0]);
	if (r->np < 2)
		return;
	/* Q by ISA-L's pq_gen, data blocks in logical order */
	void *v[10];
	uint8_t *bufs = aligned_alloc(32, (size_t)(r->d + 2) * SLICE);
	assert_non_null(bufs);
	for (uint32_t i = 0; i < r->d + 2; i++) {
		v[i] = bufs + (size_t)i * SLICE;
		if (i < r->d)
			memcpy(v[i], r->blk[i], SLICE);
	}
	assert_int_equal(pq_gen((int)r->d + 2, SLICE, v), 0);
	if (memcmp(v[r->d], r->blk[r->d], SLICE) || memcmp(v[r->d + 1], r->blk[r->d + 1], SLICE))
		fail_msg("%s row at logical %llu: Q differs from pq_gen of the data", r->layout,
			 (unsigned long long)r->logical[0]);
	free(bufs);
}

/*
 * Copy 0 reads the data (rebuilt if its device is gone); copy 1 distrusts
 * it and rebuilds (RAID5 from P; RAID6 from P, or from P and Q when one
 * more stripe is gone); RAID6's further copies distrust one more stripe.
 * A rebuild needs every stripe but at most 1 (RAID5) or 2 (RAID6).
 */
static void check_row_reads(const struct rowctx *r)
{
	int ncopies = bi_chunk_num_copies(r->c);
	for (uint32_t x = 0; x < r->d; x++) {
		uint32_t xdev = 1u << r->devidx[x];
		/* every way works with all devices there */
		for (int copy = 0; copy < ncopies; copy++)
			expect_read(r, x, 0, copy, MUST_WORK);
		for (uint32_t a = 0; a < r->n; a++) {
			uint32_t m = 1u << a;
			expect_read(r, x, m, 0, MUST_WORK);
			expect_read(r, x, m, 1, r->np == 2 || m == xdev ? MUST_WORK : MUST_FAIL);
			for (int copy = 2; copy < ncopies; copy++)
				expect_read(r, x, m, copy, m == xdev ? MUST_WORK : MAY_WORK);
		}
		for (uint32_t a = 0; a < r->n; a++)
			for (uint32_t b = a + 1; b < r->n; b++) {
				uint32_t m = (1u << a) | (1u << b);
				expect_read(r, x, m, 0,
					    r->np == 2 || !(m & xdev) ? MUST_WORK : MUST_FAIL);
				expect_read(r, x, m, 1,
					    r->np == 2 && (m & xdev) ? MUST_WORK : MUST_FAIL);
			}
		/* RAID6 copies >= 2 each distrust one more stripe, in the kernel's
		 * order (set_rbio_raid6_extra_error): copy 2 P, then the data
		 * stripes from the last down, x skipped. With that stripe's device
		 * gone, only that copy can still rebuild x. */
		for (uint32_t y = 0; r->np == 2 && y <= r->d; y++) {
			if (y == x)
				continue;
			int want = 2;
			if (y < r->d) {
				want = 3;
				for (uint32_t j = y + 1; j < r->d; j++)
					want += j != x;
			}
			for (int copy = 2; copy < ncopies; copy++)
				expect_read(r, x, 1u << r->devidx[y], copy,
					    copy == want ? MUST_WORK : MUST_FAIL);
		}
		/* three gone, x's among them: nothing rebuilds x */
		if (r->np == 2 && r->n >= 4) {
			uint32_t m = xdev;
			for (uint32_t a = 0, k = 0; a < r->n && k < 2; a++)
				if (!(xdev & (1u << a))) {
					m |= 1u << a;
					k++;
				}
			for (int copy = 0; copy < ncopies; copy++)
				expect_read(r, x, m, copy, MUST_FAIL);
			assert_non_null(strstr(r->fs->err, "cannot rebuild logical"));
		}
	}
	set_missing(r->fs, 0);
}

static size_t load_slices(const char *layout, struct slice *out, size_t max)
{
	FILE *f = open_fixture(layout, "rows.txt", "r");
	char line[256];
	size_t n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, c, d, e;
		if (line[0] == '#')
			continue;
		assert_int_equal(sscanf(line, "%llu %llu %llu %llu %llu", &a, &b, &c, &d, &e), 5);
		assert_true(n < max);
		out[n++] = (struct slice){ a, b, c, d, (size_t)e };
	}
	fclose(f);
	return n;
}

static void check_layout_rows(const char *layout)
{
	struct pchunk pc[16];
	size_t npc;
	struct bi_chunk_map *m = load_layout_map(layout, pc, &npc);
	static struct loc locs[4096];
	static struct slice sl[512];
	static uint8_t bin[512 * SLICE];
	size_t nloc = load_map_txt(layout, locs, 4096);
	size_t nsl = load_slices(layout, sl, 512);
	load_file(layout, "rows.bin", bin, sizeof(bin));

	struct rowctx r = { .layout = layout, .fs = fake_fs() };
	r.c = bi_chunk_lookup(m, locs[0].logical);
	assert_non_null(r.c);
	r.n = r.c->num_stripes;
	r.np = (r.c->type & BG_RAID6) ? 2 : 1;
	r.d = r.n - r.np;
	/* move the data chunk into the handle's map */
	struct bi_chunk *own = malloc(sizeof(*own) + r.n * sizeof(own->stripes[0]));
	memcpy(own, r.c, sizeof(*own) + r.n * sizeof(own->stripes[0]));
	bi_chunk_map_free(m);
	char why[256];
	assert_int_equal(bi_chunk_map_insert(r.fs->chunks, own, why, sizeof(why)), 0);
	r.c = own;
	struct slicedev devs[8];
	for (uint32_t i = 0; i < r.n; i++) {
		devs[i] = (struct slicedev){ r.c->stripes[i].devid, sl, nsl, bin };
		add_member(r.fs, slice_read, &devs[i], 1ull << 30, r.c->stripes[i].devid,
			   r.c->stripes[i].dev_uuid);
	}
	size_t rows = 0;
	for (size_t i = 0; i < nsl; i += r.n, rows++) {
		/* any data block of the row gives the row; find one */
		const struct loc *any = NULL;
		for (size_t k = i; k < i + r.n && !any; k++)
			any = find_loc(locs, nloc, sl[k].devid, sl[k].physical - sl[k].so % 4096);
		assert_non_null(any);
		uint64_t in_block = sl[i].so % 4096;
		uint64_t base = any->logical + in_block;
		for (uint32_t pos = 0; pos < r.n; pos++) {
			struct bi_phys ph;
			assert_int_equal(bi_chunk_map_row(r.c, base, pos, &ph), 0);
			const struct slice *s = find_slice(sl + i, r.n, ph.devid, ph.physical);
			if (!s)
				fail_msg("%s: position %u of the row at %llu maps to devid %llu "
					 "physical %llu, which is not in this row",
					 layout, pos, (unsigned long long)base,
					 (unsigned long long)ph.devid, (unsigned long long)ph.physical);
			r.blk[pos] = bin + s->binoff;
			r.devidx[pos] = (int)ph.stripe;
			const struct loc *l = find_loc(locs, nloc, ph.devid, ph.physical - in_block);
			if (pos < r.d) {
				/* a data position holds a file block */
				assert_non_null(l);
				r.logical[pos] = l->logical + in_block;
			} else {
				assert_null(l); /* parity holds no file block */
			}
		}
		/* data positions are consecutive stripes of the logical space */
		for (uint32_t pos = 1; pos < r.d; pos++)
			assert_int_equal(r.logical[pos], r.logical[pos - 1] + SL);
		check_parity(&r);
		check_row_reads(&r);
	}
	assert_true(rows >= 8);
	btrfsimg_fs_free(r.fs);
}

static void test_kernel_raid56_rows(void **state)
{
	(void)state;
	check_layout_rows("raid5-3");
	check_layout_rows("raid5-4");
	check_layout_rows("raid6-4");
	check_layout_rows("raid6-5");
}

/* ===================================================== 3. brute force */

/* GF(2^8) product by shift-and-add with x^8+x^4+x^3+x^2+1 (0x11d). */
static uint8_t slow_mul(uint8_t a, uint8_t b)
{
	unsigned r = 0, x = a;
	for (int i = 0; i < 8; i++) {
		if (b & (1u << i))
			r ^= x;
		x <<= 1;
		if (x & 0x100)
			x ^= 0x11d;
	}
	return (uint8_t)r;
}

static void test_gf_field(void **state)
{
	(void)state;
	for (unsigned a = 0; a < 256; a++)
		for (unsigned b = 0; b < 256; b++)
			assert_int_equal(gf_mul((uint8_t)a, (uint8_t)b),
					 slow_mul((uint8_t)a, (uint8_t)b));
	for (unsigned a = 1; a < 256; a++)
		assert_int_equal(slow_mul((uint8_t)a, gf_inv((uint8_t)a)), 1);
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random rows, P and Q from ISA-L, every lost set rebuilt. */
static void check_random_rows(uint32_t d, uint32_t np, size_t len, uint64_t seed)
{
	uint32_t n = d + np;
	uint8_t *bufs = aligned_alloc(32, (size_t)(d + 2) * len);
	void **v = calloc(d + 2, sizeof(*v));
	const uint8_t **blk = calloc(n, sizeof(*blk));
	uint8_t *out = malloc(len);
	assert_true(bufs && v && blk && out);
	for (uint32_t i = 0; i < d + 2; i++)
		v[i] = bufs + (size_t)i * len;
	for (size_t k = 0; k < (size_t)d * len; k++)
		bufs[k] = (uint8_t)rng(&seed);
	if (d >= 2) {
		assert_int_equal(pq_gen((int)d + 2, (int)len, v), 0);
	} else { /* one data block: P = Q = D0 */
		memcpy(v[1], v[0], len);
		memcpy(v[2], v[0], len);
	}
	for (uint32_t i = 0; i < n; i++)
		blk[i] = v[i];
	uint32_t step = d > 40 ? 37 : 1;
	for (uint32_t x = 0; x < d; x += step) {
		/* x alone */
		uint32_t lost[2] = { x, x };
		memset(out, 0, len);
		assert_int_equal(bi_raid_rebuild(blk, d, np, x, lost, 1, len, out), 0);
		assert_memory_equal(out, v[x], len);
		for (uint32_t y = 0; np == 2 && y < n; y += (y + 1 < d ? step : 1)) {
			if (y == x)
				continue;
			lost[1] = y;
			memset(out, 0, len);
			int rc = bi_raid_rebuild(blk, d, np, x, lost, 2, len, out);
			bool twin = y < d && (x % 255) == (y % 255);
			if (twin) {
				assert_int_equal(rc, -EINVAL);
				continue;
			}
			assert_int_equal(rc, 0);
			assert_memory_equal(out, v[x], len);
		}
		if (np == 1) { /* RAID5 cannot lose two */
			uint32_t two[2] = { x, d };
			assert_int_equal(bi_raid_rebuild(blk, d, np, x, two, 2, len, out), -EINVAL);
		}
	}
	if (np == 2 && d > 265) { /* g^10 = g^265: that pair is ambiguous */
		uint32_t twin[2] = { 10, 265 }, near[2] = { 10, 264 };
		assert_int_equal(bi_raid_rebuild(blk, d, np, 10, twin, 2, len, out), -EINVAL);
		assert_int_equal(bi_raid_rebuild(blk, d, np, 10, near, 2, len, out), 0);
		assert_memory_equal(out, v[10], len);
	}
	free(bufs);
	free(v);
	free(blk);
	free(out);
}

static void test_raid_rebuild_random(void **state)
{
	(void)state;
	check_random_rows(1, 1, 64, 1);
	check_random_rows(2, 1, 4096, 2);
	check_random_rows(7, 1, 96, 3);
	check_random_rows(1, 2, 64, 4);
	check_random_rows(2, 2, 4096, 5);
	check_random_rows(5, 2, 512, 6);
	check_random_rows(16, 2, 64, 7);
	check_random_rows(300, 2, 32, 8); /* beyond 255: coefficients repeat */
}

static void test_raid_plan_rules(void **state)
{
	(void)state;
	struct bi_raid_plan p;
	uint32_t l1[] = { 1 }, lp[] = { 1, 3 }, lq[] = { 1, 4 }, lxy[] = { 1, 0 },
		 l3[] = { 1, 0, 2 }, dup[] = { 1, 1, 4 }, far[] = { 1, 5 };
	/* raid6 d = 3: P = 3, Q = 4. One failure: P, as the kernel */
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, l1, 1), 0);
	assert_true(p.use_p && !p.use_q && p.y == UINT32_MAX);
	assert_false(bi_raid_uses(&p, 1));
	assert_true(bi_raid_uses(&p, 0) && bi_raid_uses(&p, 2) && bi_raid_uses(&p, 3));
	assert_false(bi_raid_uses(&p, 4));
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, lp, 2), 0);
	assert_true(!p.use_p && p.use_q);
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, lq, 2), 0);
	assert_true(p.use_p && !p.use_q);
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, lxy, 2), 0);
	assert_true(p.use_p && p.use_q && p.y == 0);
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, l3, 3), -EINVAL);
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, dup, 3), 0); /* duplicates count once */
	assert_int_equal(bi_raid_plan(&p, 3, 2, 1, far, 2), -EINVAL); /* no position 5 */
	assert_int_equal(bi_raid_plan(&p, 3, 2, 0, l1, 1), -EINVAL);  /* x not lost */
	assert_int_equal(bi_raid_plan(&p, 3, 1, 1, lp, 2), -EINVAL);  /* raid5: one only */
	assert_int_equal(bi_raid_plan(&p, 3, 3, 1, l1, 1), -EINVAL);
	assert_int_equal(bi_raid_plan(&p, 0, 1, 0, l1, 1), -EINVAL);
}

/* ============================================ reads on in-memory devices */

struct memdevs {
	uint8_t *buf[8];
	size_t size;
};

static uint8_t pattern(uint64_t logical)
{
	uint64_t h = logical * 0x9e3779b97f4a7c15ull;
	return (uint8_t)(h >> 56);
}

/* Write the pattern of every byte of @c to the devices, parity included,
 * using only hand rules: data at bi_chunk_map_row (checked against the
 * kernel above), P = XOR, Q = sum g^i D_i with g^i from slow_mul. */
static void fill_chunk(struct memdevs *md, const struct bi_chunk *c)
{
	uint64_t p = c->type & BG_PROFILE_MASK;
	bool raid56 = p & (BG_RAID5 | BG_RAID6);
	int copies = raid56 ? 1 : bi_chunk_num_copies(c);
	for (uint64_t a = c->logical; a < c->logical + c->length; a++)
		for (int k = 0; k < copies; k++) {
			struct bi_phys ph;
			assert_int_equal(bi_chunk_map_phys(c, a, k, &ph), 0);
			md->buf[ph.devid - 1][ph.physical] = pattern(a);
		}
	if (!raid56)
		return;
	uint32_t np = (p & BG_RAID6) ? 2 : 1, d = c->num_stripes - np;
	for (uint64_t a = c->logical; a < c->logical + c->length; a += SL * d) {
		for (uint64_t so = 0; so < SL; so++) {
			uint8_t pp = 0, qq = 0, g = 1;
			for (uint32_t i = 0; i < d; i++) {
				/* a partial last row: what lies past the end is zeros */
				uint64_t at = a + i * SL + so;
				uint8_t v = at < c->logical + c->length ? pattern(at) : 0;
				pp ^= v;
				qq ^= slow_mul(g, v);
				g = slow_mul(g, 2);
			}
			struct bi_phys ph;
			assert_int_equal(bi_chunk_map_row(c, a + so, d, &ph), 0);
			md->buf[ph.devid - 1][ph.physical] = pp;
			if (np == 2) {
				assert_int_equal(bi_chunk_map_row(c, a + so, d + 1, &ph), 0);
				md->buf[ph.devid - 1][ph.physical] = qq;
			}
		}
	}
}

static struct btrfsimg_fs *mem_fs(struct memdevs *md, uint32_t ndev, struct bi_chunk *const *cs,
				  size_t nc)
{
	struct btrfsimg_fs *fs = fake_fs();
	md->size = 16 * MiB;
	for (uint32_t i = 0; i < ndev; i++) {
		md->buf[i] = calloc(1, md->size);
		assert_non_null(md->buf[i]);
	}
	for (size_t k = 0; k < nc; k++)
		fill_chunk(md, cs[k]);
	for (uint32_t i = 0; i < ndev; i++) {
		uint8_t u[16];
		memset(u, 0xa0 + (int)i, 16); /* make_item's uuid for devid i+1 */
		assert_int_equal(btrfsimg_add_device_mem(fs, md->buf[i], md->size, NULL), 0);
		struct bi_dev *dv = &fs->devs[fs->ndevs - 1];
		dv->member = true;
		dv->devid = i + 1;
		memcpy(dv->dev_uuid, u, 16);
	}
	char why[256];
	for (size_t k = 0; k < nc; k++)
		assert_int_equal(bi_chunk_map_insert(fs->chunks, cs[k], why, sizeof(why)), 0);
	fs->opened = true;
	return fs;
}

static void mem_free(struct btrfsimg_fs *fs, struct memdevs *md, uint32_t ndev)
{
	btrfsimg_fs_free(fs);
	for (uint32_t i = 0; i < ndev; i++)
		free(md->buf[i]);
}

static void expect_pattern(struct btrfsimg_fs *fs, uint64_t logical, size_t len, int copy, int rc)
{
	uint8_t *buf = malloc(len ? len : 1);
	assert_non_null(buf);
	int got = copy < 0 ? btrfsimg_read_logical(fs, logical, buf, len)
			   : bi_read_copy(fs, logical, buf, len, copy);
	if (got != rc)
		fail_msg("read %llu +%zu copy %d: rc %d, expect %d (%s)",
			 (unsigned long long)logical, len, copy, got, rc, fs->err);
	for (size_t i = 0; rc == 0 && i < len; i++)
		if (buf[i] != pattern(logical + i))
			fail_msg("read %llu +%zu copy %d: byte %zu wrong", (unsigned long long)logical,
				 len, copy, i);
	free(buf);
}

static void test_read_raid56_mem(void **state)
{
	(void)state;
	/* raid6 on 5 devices (d = 3), 4 full rows; stripes at 1..5 MiB */
	struct spec s = spec(BG_DATA | BG_RAID6, 5, 12 * SL);
	struct bi_chunk *c = must_parse(&s, L0);
	struct memdevs md;
	struct btrfsimg_fs *fs = mem_fs(&md, 5, &c, 1);
	/* whole chunk and odd ranges, every way, all devices there */
	for (int copy = 0; copy < 5; copy++) {
		expect_pattern(fs, L0, 12 * SL, copy, 0);
		expect_pattern(fs, L0 + 1000, 300000, copy, 0);
	}
	/* any two devices missing: copy 0 rebuilds what it must */
	for (uint32_t a = 0; a < 5; a++)
		for (uint32_t b = a; b < 5; b++) {
			set_missing(fs, (1u << a) | (1u << b));
			expect_pattern(fs, L0 + 77, 12 * SL - 77, 0, 0);
			expect_pattern(fs, L0 + 77, 12 * SL - 77, -1, 0);
		}
	/* three missing: fails with a message naming the logical address */
	set_missing(fs, 7);
	expect_pattern(fs, L0, 12 * SL, 0, -EIO);
	assert_non_null(strstr(fs->err, "raid6 chunk 1073741824: cannot rebuild logical"));
	/* a device with the right devid but another dev_uuid is not ours */
	set_missing(fs, 0);
	fs->devs[0].dev_uuid[3] ^= 1;
	fs->devs[1].dev_uuid[3] ^= 1;
	fs->devs[2].dev_uuid[3] ^= 1;
	expect_pattern(fs, L0, 12 * SL, 0, -EIO);
	fs->devs[2].dev_uuid[3] ^= 1;
	expect_pattern(fs, L0, 12 * SL, 0, 0);
	mem_free(fs, &md, 5);

	/* raid5 on 4 devices with a partial last row (length 10 stripes, d = 3) */
	s = spec(BG_DATA | BG_RAID5, 4, 10 * SL);
	c = must_parse(&s, L0);
	fs = mem_fs(&md, 4, &c, 1);
	for (int copy = 0; copy < 2; copy++)
		expect_pattern(fs, L0 + 3, 10 * SL - 3, copy, 0);
	for (uint32_t a = 0; a < 4; a++) {
		set_missing(fs, 1u << a);
		expect_pattern(fs, L0, 10 * SL, 0, 0);
		expect_pattern(fs, L0, 10 * SL, -1, 0);
		/* copy 1 distrusts every data stripe in turn: with a device gone,
		 * some piece has two stripes lost */
		expect_pattern(fs, L0, 10 * SL, 1, -EIO);
	}
	set_missing(fs, 3);
	expect_pattern(fs, L0, 10 * SL, 0, -EIO);
	expect_pattern(fs, L0, 10 * SL, -1, -EIO);
	mem_free(fs, &md, 4);
}

static void test_read_mirrors_and_boundaries(void **state)
{
	(void)state;
	/* raid1 [L0, +1M) on devids 1, 2; then single [L0+1M, +1M) on devid 3;
	 * then raid10 (4 stripes, devids 1..4 at 5..8 MiB) [L0+2M, +1M) */
	struct bi_chunk *cs[3];
	struct spec s = spec(BG_DATA | BG_RAID1, 2, 1 * MiB);
	cs[0] = must_parse(&s, L0);
	s = spec(BG_DATA, 1, 1 * MiB);
	s.devid[0] = 3;
	s.offset[0] = 1 * MiB;
	cs[1] = must_parse(&s, L0 + 1 * MiB);
	s = spec(BG_DATA | BG_RAID10, 4, 1 * MiB);
	for (int i = 0; i < 4; i++)
		s.offset[i] = (5 + (uint64_t)i) * MiB;
	cs[2] = must_parse(&s, L0 + 2 * MiB);
	/* make_item gives stripe i the uuid of its index: the single chunk's
	 * stripe 0 is devid 3 but carries 0xa0; give devid 3 that uuid too */
	struct memdevs md;
	struct btrfsimg_fs *fs = mem_fs(&md, 4, cs, 3);
	expect_pattern(fs, L0, 3 * MiB, 0, 0);
	expect_pattern(fs, L0, 3 * MiB, 1, 0); /* the single chunk uses copy 1 % 1 */
	expect_pattern(fs, L0 + 1 * MiB + 5, 100, 1, -EINVAL); /* single has one copy */
	expect_pattern(fs, L0 + 1 * MiB - 10, 20, 1, 0);
	expect_pattern(fs, L0 + 2 * MiB - 7, 200000, 0, 0);
	expect_pattern(fs, L0 + 2 * MiB + 5, 200000, 1, 0);
	/* devid 1 missing: copy 0 of raid1 fails, copy 1 works, read_logical works */
	set_missing(fs, 1);
	expect_pattern(fs, L0 + 5, 1000, 0, -EIO);
	assert_non_null(strstr(fs->err, "devid 1 is missing"));
	expect_pattern(fs, L0 + 5, 1000, 1, 0);
	expect_pattern(fs, L0, 3 * MiB, -1, 0);
	/* devid 3 missing: the single chunk cannot be read */
	set_missing(fs, 4);
	expect_pattern(fs, L0, 3 * MiB, -1, -EIO);
	/* unmapped: before, between (none) and after */
	set_missing(fs, 0);
	expect_pattern(fs, L0 - 10, 20, 0, -EIO);
	assert_non_null(strstr(fs->err, "logical 1073741814 is not in any chunk"));
	expect_pattern(fs, L0 + 3 * MiB - 10, 20, 0, -EIO);
	assert_non_null(strstr(fs->err, "logical 1076887552 is not in any chunk"));
	expect_pattern(fs, L0, 0, 0, 0);
	assert_int_equal(bi_num_copies(fs, L0), 2);
	assert_int_equal(bi_num_copies(fs, L0 + 1 * MiB), 1);
	assert_int_equal(bi_num_copies(fs, L0 + 2 * MiB), 2);
	assert_int_equal(bi_num_copies(fs, 5), 1);
	/* misuse */
	uint8_t b[4];
	assert_int_equal(bi_read_copy(fs, L0, b, 4, -1), -EINVAL);
	assert_int_equal(btrfsimg_read_logical(NULL, L0, b, 4), -EINVAL);
	assert_int_equal(btrfsimg_read_logical(fs, L0, NULL, 4), -EINVAL);
	fs->opened = false;
	assert_int_equal(btrfsimg_read_logical(fs, L0, b, 4), -EINVAL);
	mem_free(fs, &md, 4);
}

/* ====================================================== sys_chunk_array */

static size_t sys_entry(uint8_t *p, uint64_t objectid, uint8_t type, uint64_t logical,
			const struct spec *s)
{
	bi_put_le64(p, objectid);
	p[8] = type;
	bi_put_le64(p + 9, logical);
	return KEY_SIZE + make_item(p + KEY_SIZE, s);
}

static int load_sys(const uint8_t *arr, uint32_t size, int *damage, struct btrfsimg_fs **out)
{
	struct btrfsimg_fs *fs = fake_fs();
	btrfsimg_set_log(fs, count_damage, damage);
	memcpy(fs->sb.raw + SB_SYS_CHUNK_ARRAY, arr, size > 2048 ? 2048 : size);
	fs->sb.sys_array_size = size;
	int rc = bi_chunk_load_sys_array(fs);
	*out = fs;
	return rc;
}

static void test_sys_array(void **state)
{
	(void)state;
	uint8_t arr[2048] = { 0 };
	struct spec a = spec(BG_SYSTEM | BG_RAID1, 2, 8 * MiB);
	struct spec b = spec(BG_SYSTEM, 1, 4 * MiB);
	size_t n = sys_entry(arr, 256, KT_CHUNK_ITEM, L0, &a);
	size_t n2 = n + sys_entry(arr + n, 256, KT_CHUNK_ITEM, L0 + 8 * MiB, &b);
	int damage = 0;
	struct btrfsimg_fs *fs;
	assert_int_equal(load_sys(arr, (uint32_t)n2, &damage, &fs), 0);
	assert_int_equal(bi_chunk_map_count(fs->chunks), 2);
	assert_int_equal(bi_chunk_map_at(fs->chunks, 1)->length, 4 * MiB);
	assert_int_equal(damage, 0);
	btrfsimg_fs_free(fs);

	struct {
		const char *what;
		uint32_t size;
		void (*mutate)(uint8_t *);
		const char *msg;
	} bad[] = {
		{ "empty", 0, NULL, "corrupt sys_chunk_array: empty" },
		{ "too big", 2049, NULL, "size 2049, expect <= 2048" },
		{ "cut in the first chunk", (uint32_t)n - 1, NULL,
		  "chunk at offset 17: 2 stripes need 112 bytes, have 111" },
		{ "cut in the second chunk", (uint32_t)n2 - 1, NULL,
		  "entry at offset 129: too short, have 96 bytes expect >= 97" },
		{ "trailing bytes", (uint32_t)n2 + 5, NULL,
		  "entry at offset 226: too short, have 5 bytes expect >= 97" },
		{ "key cut", (uint32_t)n + 10, NULL, "entry at offset 129: too short" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = load_sys(arr, bad[i].size, &damage, &fs);
		if (rc != -EUCLEAN || !strstr(fs->err, bad[i].msg))
			fail_msg("%s: rc %d '%s', expect '%s'", bad[i].what, rc, fs->err, bad[i].msg);
		btrfsimg_fs_free(fs);
	}
	/* key type, zero stripes, not a system chunk, bad chunk, overlap */
	uint8_t c2[2048];
	struct spec z = a;
	memcpy(c2, arr, sizeof(c2));
	c2[8] = KT_DEV_ITEM;
	assert_int_equal(load_sys(c2, (uint32_t)n2, &damage, &fs), -EUCLEAN);
	assert_non_null(strstr(fs->err, "entry at offset 0: bad key type, have 216 expect 228"));
	btrfsimg_fs_free(fs);
	memcpy(c2, arr, sizeof(c2));
	bi_put_le16(c2 + KEY_SIZE + CHUNK_NUM_STRIPES, 0);
	assert_int_equal(load_sys(c2, (uint32_t)n2, &damage, &fs), -EUCLEAN);
	assert_non_null(strstr(fs->err, "chunk at offset 17: bad num_stripes, have 0"));
	btrfsimg_fs_free(fs);
	z.type = BG_METADATA | BG_RAID1;
	memset(c2, 0, sizeof(c2));
	n = sys_entry(c2, 256, KT_CHUNK_ITEM, L0, &z);
	assert_int_equal(load_sys(c2, (uint32_t)n, &damage, &fs), -EUCLEAN);
	assert_non_null(strstr(fs->err, "not a system chunk, type 0x14"));
	btrfsimg_fs_free(fs);
	z = a;
	z.stripe_len = 4096;
	n = sys_entry(c2, 256, KT_CHUNK_ITEM, L0, &z);
	assert_int_equal(load_sys(c2, (uint32_t)n, &damage, &fs), -EUCLEAN);
	assert_non_null(strstr(fs->err, "corrupt sys_chunk_array offset 17, chunk at logical "
					"1073741824: bad stripe_len, have 4096 expect 65536"));
	btrfsimg_fs_free(fs);
	n = sys_entry(c2, 256, KT_CHUNK_ITEM, L0, &a);
	n += sys_entry(c2 + n, 256, KT_CHUNK_ITEM, L0 + 4 * MiB, &b);
	assert_int_equal(load_sys(c2, (uint32_t)n, &damage, &fs), -EUCLEAN);
	assert_non_null(strstr(fs->err, "overlaps chunk"));
	btrfsimg_fs_free(fs);
	/* the kernel ignores the key objectid; we note it as damage */
	damage = 0;
	n = sys_entry(c2, 257, KT_CHUNK_ITEM, L0, &a);
	assert_int_equal(load_sys(c2, (uint32_t)n, &damage, &fs), 0);
	assert_int_equal(damage, 1);
	btrfsimg_fs_free(fs);
}

/* ======================================================= the chunk tree */

struct leafb {
	uint8_t blk[4096];
	uint32_t n, low;
};

static void leaf_add(struct leafb *l, uint64_t oid, uint8_t type, uint64_t off,
		     const uint8_t *data, uint32_t size)
{
	l->low -= size;
	uint8_t *it = l->blk + HDR_SIZE + l->n * ITEM_SIZE;
	bi_put_le64(it, oid);
	it[8] = type;
	bi_put_le64(it + 9, off);
	bi_put_le32(it + ITEM_OFFSET, l->low);
	bi_put_le32(it + ITEM_DSIZE, size);
	memcpy(l->blk + HDR_SIZE + l->low, data, size);
	l->n++;
}

static void leaf_add_chunk(struct leafb *l, uint64_t oid, uint64_t logical, const struct spec *s)
{
	uint8_t item[CHUNK_SIZE + 8 * STRIPE_SIZE];
	size_t len = make_item(item, s);
	leaf_add(l, oid, KT_CHUNK_ITEM, logical, item, (uint32_t)len);
}

struct logbuf {
	int damage;
	char text[4096];
};

static void log_keep(void *ctx, bool damage, const char *msg)
{
	struct logbuf *lb = ctx;
	lb->damage += damage;
	size_t at = strlen(lb->text);
	snprintf(lb->text + at, sizeof(lb->text) - at, "%s\n", msg);
}

/* One device (devid 1, 64 MiB) holding a one-leaf chunk tree at logical
 * and physical 1 MiB, mapped by a system chunk in the sys array. */
static int load_tree(struct leafb *l, uint64_t incompat, struct logbuf *lb,
		     struct btrfsimg_fs **out, uint8_t **dev)
{
	struct btrfsimg_fs *fs = fake_fs();
	memset(lb, 0, sizeof(*lb));
	btrfsimg_set_log(fs, log_keep, lb);
	fs->nodesize = 4096;
	fs->csum_type = CSUM_TYPE_CRC32C;
	fs->csum_size = 4;
	memset(fs->meta_fsid, 0x11, 16);
	fs->sb.info.incompat_flags = incompat;
	fs->cache = bi_cache_new(1 * MiB);
	fs->chunk_tree = (struct bi_root){ OBJ_CHUNK_TREE, 1 * MiB, 9, 0 };
	struct spec sys = spec(BG_SYSTEM, 1, 4 * MiB);
	fs->sb.sys_array_size = (uint32_t)sys_entry(fs->sb.raw + SB_SYS_CHUNK_ARRAY, 256,
						    KT_CHUNK_ITEM, 1 * MiB, &sys);
	uint8_t *b = l->blk;
	memcpy(b + HDR_FSID, fs->meta_fsid, 16);
	bi_put_le64(b + HDR_BYTENR, 1 * MiB);
	bi_put_le64(b + HDR_GENERATION, 9);
	bi_put_le64(b + HDR_OWNER, OBJ_CHUNK_TREE);
	bi_put_le32(b + HDR_NRITEMS, l->n);
	b[HDR_LEVEL] = 0;
	uint8_t sum[CSUM_SIZE_MAX];
	assert_int_equal(bi_csum(CSUM_TYPE_CRC32C, b + HDR_FSID, 4096 - HDR_FSID, sum), 0);
	memcpy(b, sum, 4);
	*dev = calloc(1, 64 * MiB);
	assert_non_null(*dev);
	memcpy(*dev + 1 * MiB, b, 4096);
	uint8_t u[16];
	memset(u, 0xa0, 16);
	assert_int_equal(btrfsimg_add_device_mem(fs, *dev, 64 * MiB, "dev1"), 0);
	fs->devs[0].member = true;
	fs->devs[0].devid = 1;
	memcpy(fs->devs[0].dev_uuid, u, 16);
	int rc = bi_chunk_load_sys_array(fs);
	if (rc == 0)
		rc = bi_load_chunk_tree(fs);
	*out = fs;
	return rc;
}

static void leaf_init(struct leafb *l)
{
	memset(l, 0, sizeof(*l));
	l->low = 4096 - HDR_SIZE;
	uint8_t devitem[DEV_ITEM_SIZE] = { 1 };
	leaf_add(l, OBJ_DEV_ITEMS, KT_DEV_ITEM, 1, devitem, sizeof(devitem));
	struct spec sys = spec(BG_SYSTEM, 1, 4 * MiB);
	leaf_add_chunk(l, 256, 1 * MiB, &sys);
}

static void test_load_tree(void **state)
{
	(void)state;
	struct leafb l;
	struct logbuf lb;
	struct btrfsimg_fs *fs;
	uint8_t *dev;
	/* raid1 over devids 1 and 2 (2 is missing): degraded, readable;
	 * raid0 over 1 and 2: degraded, unreadable; an odd key objectid */
	leaf_init(&l);
	struct spec r1 = spec(BG_DATA | BG_RAID1, 2, 8 * MiB), r0 = spec(BG_DATA | BG_RAID0, 2, 8 * MiB);
	r1.offset[0] = r1.offset[1] = 8 * MiB;
	r0.offset[0] = r0.offset[1] = 20 * MiB;
	struct spec meta = spec(BG_METADATA, 1, 4 * MiB);
	meta.offset[0] = 30 * MiB;
	leaf_add_chunk(&l, 256, 8 * MiB, &r1);
	leaf_add_chunk(&l, 256, 16 * MiB, &r0);
	leaf_add_chunk(&l, 300, 32 * MiB, &meta);
	int rc = load_tree(&l, 0, &lb, &fs, &dev);
	if (rc)
		fail_msg("load: %s", fs->err);
	assert_int_equal(bi_chunk_map_count(fs->chunks), 4);
	assert_int_equal(bi_chunk_map_degraded(fs->chunks), 2);
	assert_int_equal(lb.damage, 2);
	assert_non_null(strstr(lb.text, "chunk [8388608, 16777216) raid1: 1 of 2 stripes on missing "
					"devices (first: stripe 1, devid 2, dev_uuid "
					"a1a1a1a1-a1a1-a1a1-a1a1-a1a1a1a1a1a1); still readable"));
	assert_non_null(strstr(lb.text, "chunk [16777216, 25165824) raid0: 1 of 2 stripes on "
					"missing devices (first: stripe 1, devid 2, dev_uuid "
					"a1a1a1a1-a1a1-a1a1-a1a1-a1a1a1a1a1a1); parts of it cannot "
					"be read"));
	assert_non_null(bi_chunk_lookup(fs->chunks, 32 * MiB));
	btrfsimg_fs_free(fs);
	free(dev);

	/* only devid 1 exists: which profiles survive which losses */
	static const struct {
		uint64_t type;
		uint16_t n;
		uint64_t devid[4];
		bool readable;
	} cases[] = {
		{ BG_RAID1C3, 3, { 2, 1, 3 }, true },	  { BG_RAID1C4, 4, { 2, 3, 4, 5 }, false },
		{ BG_RAID5, 3, { 1, 2, 3 }, false },	  { BG_RAID5, 3, { 1, 1, 2 }, true },
		{ BG_RAID6, 4, { 1, 1, 2, 3 }, true },	  { BG_RAID6, 4, { 1, 2, 3, 4 }, false },
		{ BG_RAID10, 4, { 1, 2, 3, 4 }, false }, { BG_RAID10, 4, { 2, 1, 1, 3 }, true },
		{ BG_DUP, 2, { 2, 2 }, false },
	};
	leaf_init(&l);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct spec c = spec(BG_DATA | cases[i].type, cases[i].n, 4 * MiB);
		for (int k = 0; k < cases[i].n; k++) {
			c.devid[k] = cases[i].devid[k];
			c.offset[k] = (8 + 4 * i) * MiB;
		}
		leaf_add_chunk(&l, 256, (8 + 4 * i) * MiB, &c);
	}
	assert_int_equal(load_tree(&l, 0, &lb, &fs, &dev), 0);
	assert_int_equal(lb.damage, 9);
	char *line = lb.text;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *end = strchr(line, '\n');
		assert_non_null(end);
		*end = '\0';
		char want[64];
		snprintf(want, sizeof(want), "chunk [%llu,", (unsigned long long)(8 + 4 * i) * MiB);
		assert_non_null(strstr(line, want));
		assert_non_null(strstr(line, cases[i].readable ? "still readable" : "cannot be read"));
		line = end + 1;
	}
	btrfsimg_fs_free(fs);
	free(dev);

	/* data+metadata needs the mixed-groups feature */
	leaf_init(&l);
	struct spec mixed = spec(BG_DATA | BG_METADATA, 1, 4 * MiB);
	mixed.offset[0] = 8 * MiB;
	leaf_add_chunk(&l, 256, 8 * MiB, &mixed);
	assert_int_equal(load_tree(&l, 0, &lb, &fs, &dev), -EUCLEAN);
	assert_non_null(strstr(fs->err, "corrupt chunk tree leaf: block=1048576 slot=2, chunk at "
					"logical 8388608: data and metadata in one chunk (type 0x5)"));
	btrfsimg_fs_free(fs);
	free(dev);
	assert_int_equal(load_tree(&l, INCOMPAT_MIXED_GROUPS, &lb, &fs, &dev), 0);
	assert_int_equal(bi_chunk_map_count(fs->chunks), 2);
	assert_int_equal(lb.damage, 0);
	btrfsimg_fs_free(fs);
	free(dev);

	/* a bad item names the leaf and slot */
	leaf_init(&l);
	r1.stripe_len = 4096;
	leaf_add_chunk(&l, 256, 8 * MiB, &r1);
	assert_int_equal(load_tree(&l, 0, &lb, &fs, &dev), -EUCLEAN);
	assert_non_null(strstr(fs->err, "corrupt chunk tree leaf: block=1048576 slot=2, chunk at "
					"logical 8388608: bad stripe_len, have 4096 expect 65536"));
	btrfsimg_fs_free(fs);
	free(dev);

	/* the tree's copy of the system chunk differs from the sys array's:
	 * the first (sys array) one is kept, as the kernel does, and noted */
	memset(&l, 0, sizeof(l));
	l.low = 4096 - HDR_SIZE;
	struct spec sys2 = spec(BG_SYSTEM, 1, 4 * MiB);
	sys2.offset[0] = 40 * MiB;
	leaf_add_chunk(&l, 256, 1 * MiB, &sys2);
	assert_int_equal(load_tree(&l, 0, &lb, &fs, &dev), 0);
	assert_int_equal(lb.damage, 1);
	assert_non_null(strstr(lb.text, "chunk tree leaf: block=1048576 slot=0: chunk at logical "
					"1048576 differs from the copy already loaded"));
	assert_int_equal(bi_chunk_lookup(fs->chunks, 1 * MiB)->stripes[0].offset, 1 * MiB);
	btrfsimg_fs_free(fs);
	free(dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_single_dup),
		cmocka_unit_test(test_map_raid1_family),
		cmocka_unit_test(test_map_raid0),
		cmocka_unit_test(test_map_raid10),
		cmocka_unit_test(test_map_raid5),
		cmocka_unit_test(test_map_raid6),
		cmocka_unit_test(test_parse_must_fail),
		cmocka_unit_test(test_parse_accepts),
		cmocka_unit_test(test_map_insert_lookup),
		cmocka_unit_test(test_map_brute_force),
		cmocka_unit_test(test_kernel_layouts),
		cmocka_unit_test(test_kernel_raid56_rows),
		cmocka_unit_test(test_gf_field),
		cmocka_unit_test(test_raid_rebuild_random),
		cmocka_unit_test(test_raid_plan_rules),
		cmocka_unit_test(test_read_raid56_mem),
		cmocka_unit_test(test_read_mirrors_and_boundaries),
		cmocka_unit_test(test_sys_array),
		cmocka_unit_test(test_load_tree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
