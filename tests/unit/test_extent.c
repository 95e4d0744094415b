/* SPDX-License-Identifier: MIT */
/*
 * File contents against independent truth:
 *  - EXTENT_DATA items built here byte by byte from the on-disk layout
 *    (21-byte header, inline payload or four u64), valid ones and ones
 *    damaged one field at a time; each damage must fail with a reason that
 *    names the check and the value;
 *  - range composition (holes, partial references, inline, overlapping
 *    items) against a brute-force per-byte model of the kernel's rule: a
 *    byte comes from the last item at or before it, if that item reaches it;
 *  - images written by the kernel (testdata/extent/, made by gen-extent.sh there):
 *    every file read whole, streamed, and in pieces must give the sha256 the
 *    kernel read back after a fresh mount;
 *  - corrupted data: one byte flipped in the sector btrfs-map-logical says
 *    holds a file's first block. With data DUP the read must still give the
 *    kernel's bytes and report damage naming the bad copy; with both copies
 *    (or the only copy) damaged it must fail with -EIO and a message naming
 *    subvolume, inode, file offset and logical address. Damaging every
 *    sector of one copy (extents and csum leaves from FIEMAP and the chunk
 *    tree dump) must give one report per sector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>
#include <zstd.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "btrfs/tree_checker.h"
#include "files/extent.h"

#define SS 4096u

static char why[256];

/* A 53-byte regular / prealloc item. */
static void reg_item(uint8_t *it, uint8_t type, uint8_t comp, uint64_t ram, uint64_t bytenr,
		     uint64_t disk, uint64_t off, uint64_t num)
{
	memset(it, 0, 53);
	bi_put_le64(it + 0, 7);	/* generation */
	bi_put_le64(it + 8, ram);
	it[16] = comp;
	it[20] = type;
	bi_put_le64(it + 21, bytenr);
	bi_put_le64(it + 29, disk);
	bi_put_le64(it + 37, off);
	bi_put_le64(it + 45, num);
}

/* An inline item: 21-byte header then @n payload bytes. */
static uint32_t inline_item(uint8_t *it, uint8_t comp, uint64_t ram, const void *payload,
			    uint32_t n)
{
	memset(it, 0, 21);
	bi_put_le64(it + 0, 7);
	bi_put_le64(it + 8, ram);
	it[16] = comp;
	it[20] = 0;
	memcpy(it + 21, payload, n);
	return 21 + n;
}

static void expect_fail(const uint8_t *it, uint32_t size, uint64_t key_off, const char *what)
{
	struct bi_extent e;
	int rc = bi_extent_parse(it, size, key_off, SS, &e, why, sizeof(why));
	if (rc != -EUCLEAN || !strstr(why, what))
		fail_msg("expected -EUCLEAN with \"%s\", have %d \"%s\"", what, rc, why);
}

/* ------------------------------------------------------------- parsing */

static void test_parse_valid(void **state)
{
	(void)state;
	uint8_t it[4200];
	struct bi_extent e;

	uint32_t n = inline_item(it, 0, 5, "hello", 5);
	assert_int_equal(bi_extent_parse(it, n, 0, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.kind, BI_EXT_INLINE);
	assert_int_equal(e.inline_size, 5);
	assert_memory_equal(e.inline_data, "hello", 5);
	assert_int_equal(e.end, SS);	/* an inline extent maps the first sector */
	assert_int_equal(e.generation, 7);

	n = inline_item(it, 3, 3000, "\x28\xb5\x2f\xfd", 4);	/* payload not looked at */
	assert_int_equal(bi_extent_parse(it, n, 0, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.compression, 3);
	assert_int_equal(e.ram_bytes, 3000);

	n = inline_item(it, 0, 0, "", 0);	/* empty inline: describes nothing */
	assert_int_equal(bi_extent_parse(it, n, 0, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.end, 0);

	reg_item(it, 1, 0, 1 << 20, 13631488, 1 << 20, 8192, 65536);
	assert_int_equal(bi_extent_parse(it, 53, 40960, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.kind, BI_EXT_DISK);
	assert_int_equal(e.file_offset, 40960);
	assert_int_equal(e.end, 40960 + 65536);
	assert_int_equal(e.disk_bytenr, 13631488);
	assert_int_equal(e.offset, 8192);

	reg_item(it, 1, 1, 131072, 13631488, 16384, 4096, 8192);
	assert_int_equal(bi_extent_parse(it, 53, 0, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.kind, BI_EXT_COMPRESSED);

	reg_item(it, 1, 0, 1 << 30, 0, 0, 0, 1 << 30);	/* explicit hole */
	assert_int_equal(bi_extent_parse(it, 53, 4096, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.kind, BI_EXT_ZERO);

	reg_item(it, 2, 0, 1 << 20, 13631488, 1 << 20, 0, 1 << 20);	/* prealloc */
	assert_int_equal(bi_extent_parse(it, 53, 0, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.kind, BI_EXT_ZERO);
	assert_int_equal(e.type, 2);

	reg_item(it, 1, 0, 4096, 4096, 4096, 0, 0);	/* num_bytes 0: describes nothing */
	assert_int_equal(bi_extent_parse(it, 53, 0, SS, &e, why, sizeof(why)), 0);
	assert_int_equal(e.end, 0);
}

static void test_parse_fail_header(void **state)
{
	(void)state;
	uint8_t it[4200];
	uint32_t n = inline_item(it, 0, 5, "hello", 5);
	expect_fail(it, 20, 0, "size 20, expect >= 21");
	it[16] = 4;
	expect_fail(it, n, 0, "invalid compression 4");
	it[16] = 255;
	expect_fail(it, n, 0, "invalid compression 255");
	it[16] = 0;
	it[17] = 1;
	expect_fail(it, n, 0, "invalid encryption 1");
	it[17] = 0;
	it[19] = 1;
	expect_fail(it, n, 0, "invalid other_encoding 256");
	it[19] = 0;
	it[20] = 3;
	expect_fail(it, n, 0, "invalid file extent type 3");
	it[20] = 0;
	expect_fail(it, n, 4096, "inline extent at file offset 4096");
	expect_fail(it, n, 100, "unaligned file offset 100");

	struct bi_extent e;
	assert_int_equal(bi_extent_parse(it, n, 0, 3000, &e, why, sizeof(why)), -EINVAL);
	assert_int_equal(bi_extent_parse(it, n, 0, 0, &e, why, sizeof(why)), -EINVAL);
}

static void test_parse_fail_inline(void **state)
{
	(void)state;
	uint8_t it[8400], big[5000] = { 0 };
	uint32_t n = inline_item(it, 0, 6, "hello", 5);	/* ram_bytes lies */
	expect_fail(it, n, 0, "item size 26, expect 27");
	n = inline_item(it, 0, 4, "hello", 5);
	expect_fail(it, n, 0, "item size 26, expect 25");
	n = inline_item(it, 0, 4097, big, 4097);	/* more than a sector */
	expect_fail(it, n, 0, "ram_bytes 4097, expect <= sectorsize 4096");
	n = inline_item(it, 1, 5000, big, 100);
	expect_fail(it, n, 0, "ram_bytes 5000");
	n = inline_item(it, 2, 100, big, 0);
	expect_fail(it, n, 0, "empty payload");
}

static void test_parse_fail_regular(void **state)
{
	(void)state;
	uint8_t it[64];
	reg_item(it, 1, 0, 8192, 13631488, 8192, 0, 8192);
	expect_fail(it, 54, 0, "item size 54, expect 53");
	expect_fail(it, 52, 0, "item size 52, expect 53");
	reg_item(it, 1, 0, 8192, 13631489, 8192, 0, 8192);
	expect_fail(it, 53, 0, "unaligned disk_bytenr 13631489");
	reg_item(it, 1, 0, 8192, 13631488, 8000, 0, 8192);
	expect_fail(it, 53, 0, "unaligned disk_num_bytes 8000");
	reg_item(it, 1, 0, 8192, 13631488, 8192, 512, 4096);
	expect_fail(it, 53, 0, "unaligned offset 512");
	reg_item(it, 1, 0, 8192, 13631488, 8192, 0, 100);
	expect_fail(it, 53, 0, "unaligned num_bytes 100");
	reg_item(it, 2, 0, 1000, 13631488, 8192, 0, 4096);
	expect_fail(it, 53, 0, "unaligned ram_bytes 1000");
	reg_item(it, 1, 0, 8192, 0, 0, 0, UINT64_MAX - 4095);
	expect_fail(it, 53, 8192, "extent end overflows");
	/* references outside the extent they name */
	reg_item(it, 1, 0, 8192, 13631488, 8192, 4096, 8192);
	expect_fail(it, 53, 0, "reference [4096, 12288) past the extent's disk_num_bytes 8192");
	reg_item(it, 1, 0, 8192, 13631488, 0, 0, 4096);
	expect_fail(it, 53, 0, "disk_num_bytes 0");
	reg_item(it, 1, 0, 8192, UINT64_MAX - 4095, 8192, 0, 4096);
	expect_fail(it, 53, 0, "overflows");
	reg_item(it, 1, 0, 8192, 4096, 8192, UINT64_MAX - 4095, 8192);
	expect_fail(it, 53, 0, "overflows");
	/* compressed extents are bounded to 128 KiB both ways */
	reg_item(it, 1, 3, 131072, 13631488, 135168, 0, 131072);
	expect_fail(it, 53, 0, "disk_num_bytes 135168, expect <= 131072");
	reg_item(it, 1, 3, 135168, 13631488, 65536, 0, 131072);
	expect_fail(it, 53, 0, "ram_bytes 135168, expect 1..131072");
	reg_item(it, 1, 1, 0, 13631488, 65536, 0, 0);
	expect_fail(it, 53, 0, "ram_bytes 0");
	reg_item(it, 1, 2, 65536, 13631488, 16384, 32768, 65536);
	expect_fail(it, 53, 0, "reference [32768, 98304) past the extent's ram_bytes 65536");
	/* holes and prealloc are not read: their disk fields are not checked */
	struct bi_extent e;
	reg_item(it, 2, 0, 8192, 13631488, 4096, 4096, 8192);
	assert_int_equal(bi_extent_parse(it, 53, 0, SS, &e, why, sizeof(why)), 0);
}

/* --------------------------------------------------- range composition */

/* Synthetic sources: disk byte at logical L; decoded byte i of a
 * compressed extent at B; inline payload byte i. */
static uint8_t disk_byte(uint64_t l)
{
	return (uint8_t)(l * 2654435761u >> 13) | 1;
}

static uint8_t comp_byte(uint64_t bytenr, uint64_t i)
{
	return (uint8_t)((bytenr >> 12) * 31 + i * 7) | 0x80;
}

static uint8_t inl_byte(uint64_t i)
{
	return (uint8_t)(0x41 + i % 26);
}

/* Per-byte model: the last item starting at or before x serves x if it
 * reaches it, else x is zero. */
static uint8_t model_byte(const struct bi_extent *v, size_t n, uint64_t x)
{
	const struct bi_extent *f = NULL;
	for (size_t i = 0; i < n; i++)
		if (v[i].file_offset <= x)
			f = &v[i];
	if (!f || x >= f->end)
		return 0;
	uint64_t rel = x - f->file_offset;
	switch (f->kind) {
	case BI_EXT_INLINE:
		return rel < f->ram_bytes ? inl_byte(rel) : 0;
	case BI_EXT_DISK:
		return disk_byte(f->disk_bytenr + f->offset + rel);
	case BI_EXT_COMPRESSED:
		return comp_byte(f->disk_bytenr, f->offset + rel);
	default:
		return 0;
	}
}

/* The reader's walk: items in key order, each cut where the next begins. */
static void compose(const struct bi_extent *v, size_t n, uint64_t pos, uint64_t end,
		    uint8_t *out)
{
	const uint64_t base = pos;
	memset(out, 0xee, end - pos);
	for (size_t i = 0; i < n && pos < end; i++) {
		uint64_t next = i + 1 < n ? v[i + 1].file_offset : UINT64_MAX;
		struct bi_piece p[3];
		size_t k = bi_extent_pieces(&v[i], next, pos, end, p);
		assert_true(k <= 3);
		for (size_t j = 0; j < k; j++) {
			assert_int_equal(p[j].pos, pos);	/* contiguous */
			assert_true(p[j].len > 0 && p[j].pos + p[j].len <= end);
			for (uint64_t b = 0; b < p[j].len; b++) {
				uint8_t c = 0;
				if (p[j].kind == BI_EXT_DISK)
					c = disk_byte(p[j].src + b);
				else if (p[j].kind == BI_EXT_COMPRESSED)
					c = comp_byte(v[i].disk_bytenr, p[j].src + b);
				else if (p[j].kind == BI_EXT_INLINE)
					c = inl_byte(p[j].src + b);
				out[p[j].pos + b - base] = c;
			}
			pos += p[j].len;
		}
	}
	if (pos < end)
		memset(out + (pos - base), 0, end - pos);
}

static void parse_into(struct bi_extent *e, const uint8_t *it, uint32_t size, uint64_t off)
{
	int rc = bi_extent_parse(it, size, off, SS, e, why, sizeof(why));
	if (rc)
		fail_msg("parse failed: %s", why);
}

static void check_layout(const struct bi_extent *v, size_t n, uint64_t isize)
{
	uint8_t *got = malloc(isize), *want = malloc(isize);
	assert_non_null(got);
	assert_non_null(want);
	for (uint64_t x = 0; x < isize; x++)
		want[x] = model_byte(v, n, x);
	compose(v, n, 0, isize, got);
	assert_memory_equal(got, want, isize);
	/* every start and length on a 1000-byte grid, plus sector edges */
	uint32_t seed = 1;
	for (int t = 0; t < 400; t++) {
		seed = seed * 1103515245 + 12345;
		uint64_t a = (seed >> 8) % isize;
		seed = seed * 1103515245 + 12345;
		uint64_t b = a + (seed >> 8) % (isize - a) + 1;
		if (t < 40)
			a = (uint64_t)t * SS / 4 % isize, b = isize;
		compose(v, n, a, b, got);
		if (memcmp(got, want + a, b - a) != 0)
			fail_msg("range [%llu, %llu) differs from the model", (unsigned long long)a,
				 (unsigned long long)b);
	}
	free(got);
	free(want);
}

static void test_compose(void **state)
{
	(void)state;
	uint8_t it[128];
	struct bi_extent v[8];
	char payload[3000];
	for (int i = 0; i < 3000; i++)
		payload[i] = (char)inl_byte((uint64_t)i);

	/* inline (3000 bytes, zeros to the sector end), a gap, a partial
	 * reference, a compressed partial reference, a hole item, prealloc,
	 * then zeros to i_size */
	uint8_t inl[3100];
	uint32_t n = inline_item(inl, 0, 3000, payload, 3000);
	parse_into(&v[0], inl, n, 0);
	reg_item(it, 1, 0, 65536, 1 << 20, 65536, 8192, 16384);
	parse_into(&v[1], it, 53, 8192);
	reg_item(it, 1, 3, 131072, 2 << 20, 32768, 4096, 20480);
	parse_into(&v[2], it, 53, 24576);
	reg_item(it, 1, 0, 12288, 0, 0, 0, 12288);
	parse_into(&v[3], it, 53, 45056);
	reg_item(it, 2, 0, 8192, 3 << 20, 8192, 0, 8192);
	parse_into(&v[4], it, 53, 57344);
	check_layout(v, 5, 80000);

	/* overlapping items: A [0, 64K) of disk, B [16K, 24K) compressed, C at
	 * 48K: bytes in [24K, 48K) are zeros (B is the last item before them
	 * and ends at 24K), A's data shows again nowhere after 16K */
	reg_item(it, 1, 0, 65536, 5 << 20, 65536, 0, 65536);
	parse_into(&v[0], it, 53, 0);
	reg_item(it, 1, 1, 8192, 6 << 20, 4096, 0, 8192);
	parse_into(&v[1], it, 53, 16384);
	reg_item(it, 1, 0, 65536, 7 << 20, 65536, 4096, 8192);
	parse_into(&v[2], it, 53, 49152);
	check_layout(v, 3, 70000);
	uint8_t b[8];
	compose(v, 3, 30000, 30008, b);
	for (int i = 0; i < 8; i++)
		assert_int_equal(b[i], 0);

	/* an inline extent followed by a regular one at the next sector */
	n = inline_item(inl, 0, 100, payload, 100);
	parse_into(&v[0], inl, n, 0);
	reg_item(it, 1, 0, 4096, 9 << 20, 4096, 0, 4096);
	parse_into(&v[1], it, 53, 4096);
	check_layout(v, 2, 12000);

	/* no items at all */
	check_layout(v, 0, 5000);
}

/* ------------------------------------------------------- kernel images */

struct image {
	uint8_t *data;
	size_t len;
};

static void load_image(const char *name, struct image *img)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/extent/%s.img.zst", TESTDATA, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	uint8_t *z = malloc((size_t)n);
	assert_non_null(z);
	assert_int_equal(fread(z, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	unsigned long long size = ZSTD_getFrameContentSize(z, (size_t)n);
	assert_true(size != ZSTD_CONTENTSIZE_ERROR && size != ZSTD_CONTENTSIZE_UNKNOWN);
	img->data = malloc(size);
	assert_non_null(img->data);
	img->len = ZSTD_decompress(img->data, size, z, (size_t)n);
	assert_false(ZSTD_isError(img->len));
	assert_int_equal(img->len, size);
	free(z);
}

struct logbuf {
	char last[1024];
	int damage;
};

static void log_fn(void *ctx, bool damage, const char *msg)
{
	struct logbuf *l = ctx;
	if (damage) {
		l->damage++;
		snprintf(l->last, sizeof(l->last), "%s", msg);
	}
}

static btrfsimg_fs *open_image(const struct image *img, unsigned flags, struct logbuf *log)
{
	struct btrfsimg_open_opts o;
	btrfsimg_open_opts_init(&o);
	o.flags = flags;
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, &o), 0);
	if (log)
		btrfsimg_set_log(fs, log_fn, log);
	assert_int_equal(btrfsimg_add_device_mem(fs, img->data, img->len, "test.img"), 0);
	int rc = btrfsimg_open(fs);
	if (rc)
		fail_msg("open: %s", btrfsimg_errmsg(fs));
	return fs;
}

struct kfile {
	uint64_t subvol, ino, size;
	char sha[65], path[256];
};

static size_t load_files(const char *name, struct kfile **out)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/extent/%s.img.files", TESTDATA, name);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = 0, cap = 0;
	struct kfile *v = NULL, k;
	while (fscanf(f, "%lu %lu %lu %64s %255s", &k.subvol, &k.ino, &k.size, k.sha, k.path) == 5) {
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[n++] = k;
	}
	fclose(f);
	assert_true(n > 0);
	*out = v;
	return n;
}

static void sha_hex(const uint8_t *data, size_t len, char out[65])
{
	uint8_t d[32];
	crypto_hash_sha256(d, data, len);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static uint8_t *read_whole(btrfsimg_fs *fs, const struct kfile *k, int *rc)
{
	uint8_t *buf = malloc(k->size + 100);
	assert_non_null(buf);
	size_t got = 0;
	*rc = btrfsimg_file_read(fs, k->subvol, k->ino, 0, buf, k->size + 100, &got);
	if (*rc == 0 && got != k->size)
		fail_msg("%s: read %zu bytes, size %lu", k->path, got, k->size);
	return buf;
}

struct hashing {
	crypto_hash_sha256_state st;
	uint64_t next;
};

static int hash_chunk(void *ctx, uint64_t offset, const uint8_t *data, size_t len)
{
	struct hashing *h = ctx;
	assert_int_equal(offset, h->next);
	h->next += len;
	crypto_hash_sha256_update(&h->st, data, len);
	return 0;
}

static void check_stream(btrfsimg_fs *fs, const struct kfile *k)
{
	struct hashing h = { .next = 0 };
	crypto_hash_sha256_init(&h.st);
	int rc = bi_file_stream(fs, k->subvol, k->ino, 0, UINT64_MAX, hash_chunk, &h);
	if (rc)
		fail_msg("%s: stream: %s", k->path, btrfsimg_errmsg(fs));
	assert_int_equal(h.next, k->size);
	uint8_t d[32];
	char hexd[65];
	crypto_hash_sha256_final(&h.st, d);
	for (int i = 0; i < 32; i++)
		snprintf(hexd + 2 * i, 3, "%02x", d[i]);
	if (strcmp(hexd, k->sha) != 0)
		fail_msg("%s: streamed sha256 %s, kernel %s", k->path, hexd, k->sha);
}

/* Pieces at odd offsets through one bi_file (its cursor moves both ways),
 * then past the end. */
static void check_pieces(btrfsimg_fs *fs, const struct kfile *k, const uint8_t *whole)
{
	struct bi_file *f;
	assert_int_equal(bi_file_open(fs, k->subvol, k->ino, &f), 0);
	assert_int_equal(bi_file_size(f), k->size);
	uint8_t *buf = malloc(300000);
	assert_non_null(buf);
	uint32_t seed = (uint32_t)k->ino;
	size_t got;
	for (int t = 0; t < 60 && k->size; t++) {
		seed = seed * 1103515245 + 12345;
		uint64_t off = (seed >> 4) % k->size;
		seed = seed * 1103515245 + 12345;
		size_t len = (seed >> 4) % (t % 3 ? 5000 : 300000);
		int rc = bi_file_pread(f, off, buf, len, &got);
		if (rc)
			fail_msg("%s: pread %lu+%zu: %s", k->path, (unsigned long)off, len,
				 btrfsimg_errmsg(fs));
		size_t want = k->size - off < len ? (size_t)(k->size - off) : len;
		assert_int_equal(got, want);
		if (memcmp(buf, whole + off, got) != 0)
			fail_msg("%s: pread %lu+%zu differs", k->path, (unsigned long)off, len);
	}
	assert_int_equal(bi_file_pread(f, k->size, buf, 10, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(bi_file_pread(f, k->size + 12345, buf, 10, &got), 0);
	assert_int_equal(got, 0);
	bi_file_close(f);
	free(buf);
}

static void check_image(const char *name)
{
	struct image img;
	load_image(name, &img);
	struct logbuf log = { "", 0 };
	btrfsimg_fs *fs = open_image(&img, 0, &log);
	uint64_t damage0 = btrfsimg_damage_count(fs);	/* opening is not ours to judge */
	log.damage = 0;
	struct kfile *v;
	size_t n = load_files(name, &v);
	for (size_t i = 0; i < n; i++) {
		int rc;
		uint8_t *whole = read_whole(fs, &v[i], &rc);
		if (rc)
			fail_msg("%s: %s", v[i].path, btrfsimg_errmsg(fs));
		char h[65];
		sha_hex(whole, v[i].size, h);
		if (strcmp(h, v[i].sha) != 0)
			fail_msg("%s (ino %lu): sha256 %s, kernel %s", v[i].path, v[i].ino, h,
				 v[i].sha);
		check_stream(fs, &v[i]);
		check_pieces(fs, &v[i], whole);
		free(whole);
	}
	if (log.damage || btrfsimg_damage_count(fs) != damage0)
		fail_msg("%s: damage reported on an intact image: %s", name, log.last);
	btrfsimg_fs_free(fs);
	free(v);
	free(img.data);
}

static void test_kernel_image(void **state)
{
	(void)state;
	check_image("kernel");
}

static void test_dup_image(void **state)
{
	(void)state;
	check_image("dup");
}

static void test_misuse(void **state)
{
	(void)state;
	struct image img;
	load_image("kernel", &img);
	btrfsimg_fs *fs = open_image(&img, 0, NULL);
	uint8_t buf[16];
	size_t got = 99;
	assert_int_equal(btrfsimg_file_read(fs, 5, 256, 0, buf, sizeof(buf), &got), -EINVAL);
	assert_non_null(strstr(btrfsimg_errmsg(fs), "directory"));
	assert_int_equal(got, 0);
	assert_int_equal(btrfsimg_file_read(fs, 5, 999999, 0, buf, sizeof(buf), &got), -ENOENT);
	assert_int_equal(btrfsimg_file_read(fs, 5, 257, 0, NULL, 1, &got), -EINVAL);
	assert_int_equal(btrfsimg_file_read(NULL, 5, 257, 0, buf, 1, &got), -EINVAL);
	btrfsimg_fs_free(fs);
	free(img.data);
}

/* ------------------------------------------------------ corrupted data */

struct target {
	uint64_t ino, fpos, logical, phys[2];
	int ncopies;
};

static size_t load_targets(const char *name, struct target *t, size_t max)
{
	char path[1024], line[256];
	snprintf(path, sizeof(path), "%s/extent/%s", TESTDATA, name);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		int k = sscanf(line, "%lu %lu %lu %lu %lu", &t[n].ino, &t[n].fpos, &t[n].logical,
			       &t[n].phys[0], &t[n].phys[1]);
		assert_true(k >= 4);
		t[n++].ncopies = k - 3;
	}
	fclose(f);
	return n;
}

static const struct kfile *find_file(const struct kfile *v, size_t n, uint64_t ino)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].subvol == 5 && v[i].ino == ino)
			return &v[i];
	fail_msg("inode %lu not in the file list", ino);
	return NULL;
}

static void expect_eio(btrfsimg_fs *fs, const struct kfile *k, const struct target *t)
{
	int rc;
	free(read_whole(fs, k, &rc));
	assert_int_equal(rc, -EIO);
	const char *m = btrfsimg_errmsg(fs);
	char ino[64], logical[64];
	snprintf(ino, sizeof(ino), "inode=%lu ", t->ino);
	snprintf(logical, sizeof(logical), "logical=%lu,", t->logical);
	if (!strstr(m, "data checksum mismatch: subvol=5 ") || !strstr(m, ino) ||
	    !strstr(m, logical) || !strstr(m, "have 0x") || !strstr(m, "expect 0x"))
		fail_msg("unexpected message: %s", m);
}

/* DUP: damage copy 1, then both. */
static void test_corrupt_dup(void **state)
{
	(void)state;
	struct image img;
	load_image("dup", &img);
	struct kfile *v;
	size_t n = load_files("dup", &v);
	struct target t[8];
	size_t nt = load_targets("dup.img.corrupt", t, 8);
	assert_true(nt >= 2);
	for (size_t i = 0; i < nt; i++) {
		assert_int_equal(t[i].ncopies, 2);
		const struct kfile *k = find_file(v, n, t[i].ino);
		img.data[t[i].phys[0] + 100] ^= 0x5a;
		struct logbuf log = { "", 0 };
		btrfsimg_fs *fs = open_image(&img, 0, &log);
		uint64_t damage0 = btrfsimg_damage_count(fs);
		log.damage = 0;
		int rc;
		uint8_t *whole = read_whole(fs, k, &rc);
		if (rc)
			fail_msg("%s: %s", k->path, btrfsimg_errmsg(fs));
		char h[65];
		sha_hex(whole, k->size, h);
		assert_string_equal(h, k->sha);
		free(whole);
		assert_true(log.damage >= 1);
		assert_true(btrfsimg_damage_count(fs) > damage0);
		if (!strstr(log.last, "data checksum mismatch") || !strstr(log.last, "copy 1/2") ||
		    !strstr(log.last, "read from copy 2"))
			fail_msg("unexpected damage report: %s", log.last);
		btrfsimg_fs_free(fs);

		img.data[t[i].phys[1] + 100] ^= 0x5a;
		fs = open_image(&img, 0, NULL);
		expect_eio(fs, k, &t[i]);
		btrfsimg_fs_free(fs);
		img.data[t[i].phys[0] + 100] ^= 0x5a;
		img.data[t[i].phys[1] + 100] ^= 0x5a;
	}
	free(v);
	free(img.data);
}

/* Every sector of copy 1 of two files damaged (one file's checksums span
 * three csum leaves, the other has 200 extents): each sector must be
 * caught, reported once, and read from copy 2. */
static void test_corrupt_every_sector(void **state)
{
	(void)state;
	struct image img;
	load_image("dup", &img);
	struct kfile *v;
	size_t n = load_files("dup", &v);
	char path[1024], line[256];
	snprintf(path, sizeof(path), "%s/extent/dup.img.extents", TESTDATA);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	uint64_t ino, fpos, logical, len, p1, p2, want_damage[2] = { 0, 0 }, inos[2] = { 0, 0 };
	while (fgets(line, sizeof(line), f)) {
		assert_int_equal(sscanf(line, "%lu %lu %lu %lu %lu %lu", &ino, &fpos, &logical, &len,
					&p1, &p2), 6);
		int k = inos[0] == 0 || inos[0] == ino ? 0 : 1;
		inos[k] = ino;
		for (uint64_t o = 0; o < len; o += SS)
			img.data[p1 + o + (o / SS) % SS] ^= 0xff;
		want_damage[k] += len / SS;
	}
	fclose(f);
	assert_true(inos[0] && inos[1]);
	for (int k = 0; k < 2; k++) {
		const struct kfile *kf = find_file(v, n, inos[k]);
		struct logbuf log = { "", 0 };
		btrfsimg_fs *fs = open_image(&img, 0, &log);
		log.damage = 0;
		int rc;
		uint8_t *whole = read_whole(fs, kf, &rc);
		if (rc)
			fail_msg("%s: %s", kf->path, btrfsimg_errmsg(fs));
		char h[65];
		sha_hex(whole, kf->size, h);
		assert_string_equal(h, kf->sha);
		free(whole);
		if ((uint64_t)log.damage != want_damage[k])
			fail_msg("%s: %d damage reports, expect one per sector: %lu", kf->path,
				 log.damage, want_damage[k]);
		assert_non_null(strstr(log.last, "copy 1/2"));
		btrfsimg_fs_free(fs);
	}
	free(v);
	free(img.data);
}

/* NODATASUM inodes (nodatasum mount, chattr +C) are read unverified: the
 * damaged byte comes through, with no error and no damage report. */
static void test_corrupt_nodatasum(void **state)
{
	(void)state;
	struct image img;
	load_image("kernel", &img);
	struct kfile *v;
	size_t n = load_files("kernel", &v);
	struct target t[8];
	size_t nt = load_targets("kernel.img.nocsum", t, 8);
	assert_int_equal(nt, 2);
	for (size_t i = 0; i < nt; i++) {
		const struct kfile *k = find_file(v, n, t[i].ino);
		img.data[t[i].phys[0] + 100] ^= 0x5a;
		struct logbuf log = { "", 0 };
		btrfsimg_fs *fs = open_image(&img, 0, &log);
		uint64_t damage0 = btrfsimg_damage_count(fs);
		int rc;
		uint8_t *whole = read_whole(fs, k, &rc);
		if (rc)
			fail_msg("%s: %s", k->path, btrfsimg_errmsg(fs));
		assert_int_equal(btrfsimg_damage_count(fs), damage0);
		char h[65];
		sha_hex(whole, k->size, h);
		assert_string_not_equal(h, k->sha);
		whole[100] ^= 0x5a;	/* undo the damage: the rest is the kernel's */
		sha_hex(whole, k->size, h);
		assert_string_equal(h, k->sha);
		free(whole);
		btrfsimg_fs_free(fs);
		img.data[t[i].phys[0] + 100] ^= 0x5a;
	}
	free(v);
	free(img.data);
}

/* Single copy: -EIO; without verification the damaged bytes come through. */
static void test_corrupt_single(void **state)
{
	(void)state;
	struct image img;
	load_image("kernel", &img);
	struct kfile *v;
	size_t n = load_files("kernel", &v);
	struct target t[8];
	size_t nt = load_targets("kernel.img.corrupt", t, 8);
	assert_true(nt >= 1);
	for (size_t i = 0; i < nt; i++) {
		assert_int_equal(t[i].ncopies, 1);
		const struct kfile *k = find_file(v, n, t[i].ino);
		img.data[t[i].phys[0] + 100] ^= 0x5a;
		btrfsimg_fs *fs = open_image(&img, 0, NULL);
		expect_eio(fs, k, &t[i]);
		btrfsimg_fs_free(fs);

		fs = open_image(&img, BTRFSIMG_OPEN_NO_DATA_VERIFY, NULL);
		int rc;
		uint8_t *whole = read_whole(fs, k, &rc);
		assert_int_equal(rc, 0);
		char h[65];
		sha_hex(whole, k->size, h);
		assert_string_not_equal(h, k->sha);
		free(whole);
		btrfsimg_fs_free(fs);
		img.data[t[i].phys[0] + 100] ^= 0x5a;
	}
	free(v);
	free(img.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_fail_header),
		cmocka_unit_test(test_parse_fail_inline),
		cmocka_unit_test(test_parse_fail_regular),
		cmocka_unit_test(test_compose),
		cmocka_unit_test(test_kernel_image),
		cmocka_unit_test(test_dup_image),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_corrupt_dup),
		cmocka_unit_test(test_corrupt_every_sector),
		cmocka_unit_test(test_corrupt_single),
		cmocka_unit_test(test_corrupt_nodatasum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
