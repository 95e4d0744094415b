// SPDX-License-Identifier: MIT
/*
 * Tree block checker and key order. Blocks are built here byte by byte
 * from the on-disk layout (header 101 bytes, items of 25 bytes whose data
 * offsets count from the end of the header and pack down from the end),
 * then damaged one field at a time; each damage must be caught with a
 * message naming the check and have vs expected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "btrfs/leafwalk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "unpack.h"

#define NS 4096u
#define BYTENR 30408704ull

static const uint8_t fsid[16] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

static void put_key(uint8_t *p, uint64_t obj, uint8_t type, uint64_t off)
{
	bi_put_le64(p, obj);
	p[8] = type;
	bi_put_le64(p + 9, off);
}

static void header(uint8_t *b, uint8_t level, uint32_t n)
{
	memset(b, 0, NS);
	memcpy(b + 32, fsid, 16);
	bi_put_le64(b + 48, BYTENR);
	bi_put_le64(b + 80, 7);	/* generation */
	bi_put_le64(b + 88, 5);	/* owner */
	bi_put_le32(b + 96, n);
	b[100] = level;
}

/* A leaf with items (256,1,0) (256,12,256) (257,1,0), sizes 160, 14, 160. */
static void good_leaf(uint8_t *b)
{
	static const uint32_t size[3] = { 160, 14, 160 };
	static const uint64_t obj[3] = { 256, 256, 257 };
	static const uint8_t type[3] = { 1, 12, 1 };
	static const uint64_t off[3] = { 0, 256, 0 };
	header(b, 0, 3);
	uint32_t end = NS - 101;
	for (int i = 0; i < 3; i++) {
		uint8_t *it = b + 101 + 25 * i;
		put_key(it, obj[i], type[i], off[i]);
		end -= size[i];
		bi_put_le32(it + 17, end);
		bi_put_le32(it + 21, size[i]);
	}
}

static void good_node(uint8_t *b)
{
	header(b, 1, 2);
	put_key(b + 101, 256, 1, 0);
	bi_put_le64(b + 101 + 17, 1 << 20);
	bi_put_le64(b + 101 + 25, 6);
	put_key(b + 101 + 33, 300, 1, 0);
	bi_put_le64(b + 101 + 33 + 17, 2 << 20);
	bi_put_le64(b + 101 + 33 + 25, 6);
}

static char why[512];

static int check(const uint8_t *b, const struct bi_expect *e)
{
	why[0] = '\0';
	return bi_block_check(b, NS, BYTENR, fsid, e, why, sizeof(why));
}

static void expect_fail(const uint8_t *b, const struct bi_expect *e, const char *msg)
{
	assert_int_equal(check(b, e), -EUCLEAN);
	if (!strstr(why, msg))
		fail_msg("message '%s' lacks '%s'", why, msg);
}

static void test_valid_blocks(void **state)
{
	(void)state;
	uint8_t b[NS];
	good_leaf(b);
	bi_key first = { 256, 1, 0 };
	struct bi_expect e = { 5, 7, 0, &first };
	assert_int_equal(check(b, &e), 0);
	assert_int_equal(check(b, NULL), 0);
	good_node(b);
	e.level = 1;
	assert_int_equal(check(b, &e), 0);
	header(b, 0, 0);	/* an empty leaf (an empty tree's root) is valid */
	assert_int_equal(check(b, NULL), 0);
}

static void test_header_checks(void **state)
{
	(void)state;
	uint8_t b[NS];
	good_leaf(b);
	bi_put_le64(b + 48, BYTENR + 4096);
	expect_fail(b, NULL, "bad bytenr, have 30412800 expect 30408704");
	good_leaf(b);
	b[32] ^= 1;
	expect_fail(b, NULL, "bad fsid, have dfadbeef-");
	good_leaf(b);
	b[100] = 8;
	expect_fail(b, NULL, "bad level, have 8 expect < 8");
	good_leaf(b);
	struct bi_expect e = { 5, 0, 1, NULL };
	expect_fail(b, &e, "bad level, have 0 expect 1");
	e = (struct bi_expect){ 5, 9, -1, NULL };
	expect_fail(b, &e, "bad generation, have 7 expect 9");
	good_leaf(b);
	bi_put_le32(b + 96, (NS - 101) / 25 + 1);	/* 160 items cannot fit in 3995 bytes */
	expect_fail(b, NULL, "bad nritems, have 160 expect <= 159");
	header(b, 1, 0);
	expect_fail(b, NULL, "have 0 expect > 0 in a node");
	good_node(b);
	bi_put_le32(b + 96, (NS - 101) / 33 + 1);
	expect_fail(b, NULL, "bad nritems, have 122 expect <= 121");
}

static void test_item_checks(void **state)
{
	(void)state;
	uint8_t b[NS];
	good_leaf(b);
	bi_put_le32(b + 101 + 21, 161);	/* slot 0 grows past the end of the block */
	expect_fail(b, NULL, "slot 0: item data past end, have 3996 expect <= 3995");
	good_leaf(b);
	bi_put_le32(b + 101 + 25 + 21, 15);	/* slot 1 runs into slot 0's data */
	expect_fail(b, NULL, "slot 1: item data overlaps slot 0");
	good_leaf(b);
	bi_put_le32(b + 101 + 50 + 17, 10);	/* slot 2's data inside the item table */
	expect_fail(b, NULL, "slot 2: item data overlaps the item table, have offset 10 expect >= 75");
	good_leaf(b);
	bi_put_le32(b + 101 + 17, UINT32_MAX - 5);	/* offset + size overflows 32 bits */
	expect_fail(b, NULL, "slot 0: item data past end");
	good_leaf(b);
	put_key(b + 101 + 50, 256, 12, 256);	/* slot 2 repeats slot 1's key */
	expect_fail(b, NULL, "slot 2: bad key order, have (256 12 256) after (256 12 256)");
	good_leaf(b);
	put_key(b + 101 + 25, 255, 200, 0);	/* slot 1 goes backwards */
	expect_fail(b, NULL, "slot 1: bad key order");
}

static void test_node_checks(void **state)
{
	(void)state;
	uint8_t b[NS];
	good_node(b);
	bi_put_le64(b + 101 + 33 + 17, 0);
	expect_fail(b, NULL, "slot 1: null block pointer");
	good_node(b);
	bi_put_le64(b + 101 + 25, 0);
	expect_fail(b, NULL, "slot 0: pointer generation 0");
	good_node(b);
	put_key(b + 101 + 33, 256, 1, 0);
	expect_fail(b, NULL, "slot 1: bad key order");
	good_node(b);
	bi_key first = { 256, 1, 1 };
	struct bi_expect e = { 5, 0, -1, &first };
	expect_fail(b, &e, "bad first key, have (256 1 0) expect (256 1 1)");
}

static void test_key_order(void **state)
{
	(void)state;
	bi_key a = { 256, 1, 0 }, b = { 256, 1, 1 }, c = { 256, 12, 0 }, d = { 257, 0, 0 };
	bi_key big = { UINT64_MAX, 255, UINT64_MAX };
	assert_true(bi_key_cmp(&a, &b) < 0);
	assert_true(bi_key_cmp(&b, &c) < 0);	/* type before offset */
	assert_true(bi_key_cmp(&c, &d) < 0);	/* objectid first */
	assert_true(bi_key_cmp(&d, &big) < 0);
	assert_true(bi_key_cmp(&big, &a) > 0);
	assert_int_equal(bi_key_cmp(&c, &c), 0);
	uint8_t raw[17];
	put_key(raw, 0x0102030405060708ull, 0x54, 0x1112131415161718ull);
	bi_key k;
	bi_key_read(raw, &k);
	assert_true(k.objectid == 0x0102030405060708ull && k.type == 0x54 &&
		    k.offset == 0x1112131415161718ull);
}

/* ------------------------------------------ iteration that skips leaves */

/* names.img: directories big enough that their entries fill whole leaves. */
static btrfsimg_fs *open_names(char **img)
{
	*img = unpack_zst(TESTDATA "/files/names.img.zst", NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, *img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	return fs;
}

static void close_names(btrfsimg_fs *fs, char *img)
{
	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
}

/* The rule inode_enum.c uses: past one objectid's names, before the next
 * objectid's INODE_ITEM. */
static bool only_entries(const bi_key *lo, const bi_key *hi)
{
	return lo->type > KT_INODE_EXTREF &&
	       (hi->objectid == lo->objectid ||
		(hi->objectid == lo->objectid + 1 && hi->type <= KT_INODE_ITEM));
}

struct walked {
	bi_key keys[8192];
	size_t n, leaves;
};

/* Keys of every INODE_ITEM/REF/EXTREF, and how many leaves were visited. */
static void walk_names(btrfsimg_fs *fs, const struct bi_root *r, bool skip, struct walked *w)
{
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint64_t last_block = 0;
	w->n = w->leaves = 0;
	assert_int_equal(bi_iter_start(fs, &it, r, &min, &max), 0);
	if (skip)
		bi_iter_skip_leaves(&it, only_entries);
	while (bi_iter_next(&it, &item) > 0) {
		w->leaves += item.block != last_block;
		last_block = item.block;
		if (item.key.type <= KT_INODE_EXTREF && w->n < 8192)
			w->keys[w->n++] = item.key;
	}
	bi_iter_end(&it);
}

/* names.img has directories big enough that their entries fill whole
 * leaves (4 KiB nodes): skipping those must not lose one inode item or
 * name, and must visit fewer leaves. The truth is the walk without skips. */
static void test_iter_skip_leaves(void **state)
{
	(void)state;
	char *img;
	btrfsimg_fs *fs = open_names(&img);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	struct walked *all = calloc(1, sizeof(*all)), *some = calloc(1, sizeof(*some));
	walk_names(fs, &r, false, all);
	walk_names(fs, &r, true, some);
	assert_true(all->n > 100 && all->n < 8192);
	assert_int_equal(some->n, all->n);
	for (size_t i = 0; i < all->n; i++) /* not memcmp: keys have padding */
		assert_int_equal(bi_key_cmp(&some->keys[i], &all->keys[i]), 0);
	assert_true(some->leaves < all->leaves);
	print_message("leaves: %zu of %zu\n", some->leaves, all->leaves);
	free(all);
	free(some);
	close_names(fs, img);
}

/* ------------------------------------------ the leaf walk's one descent */

enum { MAXLEAVES = 4096 };

/* The leaves the iterator reads, in order, with each one's first key. */
static size_t iter_leaves(btrfsimg_fs *fs, const struct bi_root *r, bool skip, uint64_t *at,
			  bi_key *first)
{
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	size_t n = 0;
	assert_int_equal(bi_iter_start(fs, &it, r, &min, &max), 0);
	if (skip)
		bi_iter_skip_leaves(&it, only_entries);
	while (bi_iter_next(&it, &item) > 0 && n < MAXLEAVES)
		if (n == 0 || at[n - 1] != item.block) {
			at[n] = item.block;
			first[n++] = item.key;
		}
	bi_iter_end(&it);
	return n;
}

/* The leaf walk and the iterator share one descent: with or without
 * skipped leaves, the walk must hand out exactly the leaves the iterator
 * reads, in the same order, each with the key its parent gives it. */
static void test_leafwalk_same_leaves(void **state)
{
	(void)state;
	char *img;
	btrfsimg_fs *fs = open_names(&img);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	uint64_t *at = calloc(MAXLEAVES, sizeof(*at));
	bi_key *first = calloc(MAXLEAVES, sizeof(*first));
	for (int skip = 0; skip < 2; skip++) {
		size_t n = iter_leaves(fs, &r, skip, at, first);
		bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX };
		struct bi_leafwalk lw;
		assert_int_equal(bi_leafwalk_start(fs, &lw, &r, &min, &max,
						   skip ? only_entries : NULL), 0);
		assert_true(lw.p.top >= 2);
		struct bi_leaf_ptr ptr;
		size_t i = 0;
		int rc;
		while ((rc = bi_leafwalk_next_ptr(&lw, &ptr)) > 0) {
			assert_true(i < n);
			assert_int_equal(ptr.bytenr, at[i]);
			assert_int_equal(ptr.first, i == 0);
			if (i > 0) /* the first leaf's items start at min, not at its key */
				assert_int_equal(bi_key_cmp(&ptr.first_key, &first[i]), 0);
			i++;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(i, n);
		assert_true(n > 3);
		bi_leafwalk_end(&lw);
		print_message("%s: %zu leaves\n", skip ? "skipping" : "all", n);
	}
	free(at);
	free(first);
	close_names(fs, img);
}

/* ------------------------------------------------ streaming iteration */

struct item_sum {
	bi_key key;
	uint64_t block, fnv;	/* FNV-1a of the item's bytes */
};

static uint64_t fnv1a(const uint8_t *p, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static size_t walk_sums(btrfsimg_fs *fs, const struct bi_root *r, bool stream,
			struct item_sum *out, size_t max)
{
	bi_key min = { 0, 0, 0 }, hi = { UINT64_MAX, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	size_t n = 0;
	assert_int_equal(bi_iter_start(fs, &it, r, &min, &hi), 0);
	if (stream)
		bi_iter_stream(&it);
	int rc;
	while ((rc = bi_iter_next(&it, &item)) > 0 && n < max)
		out[n++] = (struct item_sum){ item.key, item.block, fnv1a(item.data, item.size) };
	assert_int_equal(rc, n < max ? 0 : 1);
	bi_iter_end(&it);
	return n;
}

/* A streamed walk hands each leaf's buffer to the next leaf: every item
 * must still read the same as in a cached walk, and a leaf someone else
 * holds must not be recycled under them. */
static void test_iter_stream(void **state)
{
	(void)state;
	char *img;
	btrfsimg_fs *fs = open_names(&img);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	enum { MAX = 1 << 16 };
	struct item_sum *cached = calloc(MAX, sizeof(*cached));
	struct item_sum *streamed = calloc(MAX, sizeof(*streamed));
	size_t n = walk_sums(fs, &r, false, cached, MAX);
	assert_true(n > 1000 && n < MAX);
	/* hold a leaf from the middle of the tree through the streamed walk */
	struct bi_block *held;
	assert_int_equal(bi_block_read(fs, cached[n / 2].block, NULL, &held), 0);
	uint8_t *copy = malloc(held->size);
	memcpy(copy, held->data, held->size);
	size_t leaves = 0;
	for (int pass = 0; pass < 2; pass++) { /* the second starts on a spare buffer */
		assert_int_equal(walk_sums(fs, &r, true, streamed, MAX), n);
		leaves = 0;
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(bi_key_cmp(&streamed[i].key, &cached[i].key), 0);
			assert_true(streamed[i].fnv == cached[i].fnv);
			assert_true(streamed[i].block == cached[i].block);
			leaves += i == 0 || cached[i].block != cached[i - 1].block;
		}
	}
	assert_true(leaves > 10);
	assert_memory_equal(held->data, copy, held->size);
	bi_block_put(fs, held);
	free(copy);
	free(cached);
	free(streamed);
	close_names(fs, img);
}

/* ---------------------------------------------------- prefetching reads */

/* Which pages of @fd the page cache holds, read (mincore: bit 0 of each
 * byte of the malloc'd *vec). Returns the number of pages. */
static size_t residency(int fd, unsigned char **vec)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), pages = ((size_t)st.st_size + pg - 1) / pg;
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	*vec = malloc(pages);
	assert_int_equal(mincore(map, (size_t)st.st_size, *vec), 0);
	munmap(map, (size_t)st.st_size);
	return pages;
}

/* How many pages of @path the page cache holds, read. */
static size_t resident_pages(const char *path)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	unsigned char *vec;
	size_t pages = residency(fd, &vec), n = 0;
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	close(fd);
	return n;
}

/* Drop @path from the page cache; false if the kernel kept any of it
 * (tmpfs, or pages in use), when residency tells nothing. */
static bool evict(const char *path)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	return resident_pages(path) == 0;
}

/* What the page cache holds of @path, as the tree blocks there name
 * themselves: the bytenr in the header of every resident page. The cache
 * says where a prefetch read; the block's own header says what it is. */
static size_t resident_bytenrs(const char *path, uint64_t *out, size_t max)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM); /* read only what is there */
	unsigned char *vec;
	size_t pages = residency(fd, &vec), pg = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	for (size_t i = 0; i < pages && n < max; i++) {
		uint8_t hdr[HDR_SIZE];
		if ((vec[i] & 1) && pread(fd, hdr, sizeof(hdr), (off_t)(i * pg)) == (ssize_t)sizeof(hdr))
			out[n++] = bi_le64(hdr + HDR_BYTENR);
	}
	free(vec);
	close(fd);
	return n;
}

static bool has(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* resident_bytenrs once every block of @want is in it, or after 10 s. The
 * page cache shows a page only once its read has completed, and on a busy
 * disk (tests run in parallel) that takes a while; a hint never given
 * never shows, as nothing else reads this file. */
static size_t wait_resident(const char *path, const uint64_t *want, size_t nwant, uint64_t *out,
			    size_t max)
{
	for (int tries = 0;; tries++) {
		size_t n = resident_bytenrs(path, out, max), i = 0;
		while (i < nwant && has(out, n, want[i]))
			i++;
		if (i == nwant || tries == 200)
			return n;
		usleep(50 * 1000);
	}
}

/* bi_tree_last against a full walk: for a key equal to every item's, one
 * just below it, one before all and one after all, the last item at or
 * before it. */
static void test_tree_last(void **state)
{
	(void)state;
	char *img;
	btrfsimg_fs *fs = open_names(&img);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	enum { MAX = 1 << 16 };
	struct item_sum *all = calloc(MAX, sizeof(*all));
	size_t n = walk_sums(fs, &r, false, all, MAX);
	assert_true(n > 1000 && r.level > 0);
	bi_key k, got;
	for (size_t i = 0; i < n; i += 7) {
		assert_int_equal(bi_tree_last(fs, &r, &all[i].key, &got), 0);
		assert_int_equal(bi_key_cmp(&got, &all[i].key), 0);
		k = all[i].key;	/* just below item i: item i - 1 */
		if (k.offset) {
			k.offset--;
		} else if (k.type) {
			k.type--;
			k.offset = UINT64_MAX;
		} else {
			continue;
		}
		if (i == 0) {
			assert_int_equal(bi_tree_last(fs, &r, &k, &got), -ENOENT);
			continue;
		}
		assert_int_equal(bi_tree_last(fs, &r, &k, &got), 0);
		assert_int_equal(bi_key_cmp(&got, &all[i - 1].key), 0);
	}
	k = (bi_key){ 0, 0, 0 };
	assert_int_equal(bi_tree_last(fs, &r, &k, &got), -ENOENT);
	k = (bi_key){ UINT64_MAX, 255, UINT64_MAX };
	assert_int_equal(bi_tree_last(fs, &r, &k, &got), 0);
	assert_int_equal(bi_key_cmp(&got, &all[n - 1].key), 0);
	/* the public form: the highest inode number, below the reserved range */
	uint64_t high = 0, want = 0;
	for (size_t i = 0; i < n; i++)
		if (all[i].key.objectid <= OBJ_LAST_FREE)
			want = all[i].key.objectid;
	assert_int_equal(btrfsimg_highest_objectid(fs, 5, &high), 0);
	assert_int_equal(high, want);
	assert_int_equal(btrfsimg_highest_objectid(fs, 4242, &high), -ENOENT);
	free(all);
	close_names(fs, img);
}

/* A streamed walk asks the kernel for the leaves ahead of it: on the first
 * leaf it reads under each level-1 node, every later leaf of that node it
 * will read is in the page cache, and no leaf it skips is; so is the next
 * level-1 node. The library's own reads go
 * without kernel readahead (FADV_RANDOM on its descriptor), so what is
 * resident is what was asked for. */
static void test_stream_prefetch(void **state)
{
	(void)state;
	char *img;
	btrfsimg_fs *fs = open_names(&img);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	assert_int_equal(posix_fadvise(fs->devs[0].fd, 0, 0, POSIX_FADV_RANDOM), 0);
	if (!evict(img)) {
		close_names(fs, img);
		skip();
	}
	bi_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	assert_int_equal(bi_iter_start(fs, &it, &r, &min, &max), 0);
	bi_iter_skip_leaves(&it, only_entries);
	bi_iter_stream(&it);
	enum { MAXRES = 1 << 16, MAXPTR = 4096 };
	uint64_t *res = malloc(MAXRES * sizeof(*res));
	uint64_t *want = malloc(MAXPTR * sizeof(*want)), *skip = malloc(MAXPTR * sizeof(*skip));
	size_t wanted = 0, skipped = 0, nodes = 0;
	uint64_t node1 = it.p.nodes[1]->bytenr;
	while (bi_iter_next(&it, &item) > 0) {
		if (it.p.nodes[1]->bytenr == node1)
			continue;
		/* the first leaf read under a new level-1 node */
		assert_true(it.p.top >= 2);
		node1 = it.p.nodes[1]->bytenr;
		nodes++;
		const struct bi_block *node = it.p.nodes[1];
		size_t nwant = 0, nskip = 0;
		for (uint32_t s = it.p.slots[1] + 1; s < node->nritems && nwant < MAXPTR - 1; s++) {
			bi_key lo, hi;
			uint64_t ptr, gen, next_ptr;
			bi_node_ptr(node, s, &lo, &ptr, &gen);
			bool skip_it = false;
			if (s + 1 < node->nritems) {
				bi_node_ptr(node, s + 1, &hi, &next_ptr, &gen);
				skip_it = only_entries(&lo, &hi);
			}
			if (skip_it)
				skip[nskip++] = ptr;
			else
				want[nwant++] = ptr;
		}
		wanted += nwant;
		skipped += nskip;
		if (it.p.slots[2] + 1 < it.p.nodes[2]->nritems) {
			bi_key k;
			uint64_t gen;
			bi_node_ptr(it.p.nodes[2], it.p.slots[2] + 1, &k, &want[nwant++], &gen);
		}
		size_t nres = wait_resident(img, want, nwant, res, MAXRES);
		for (size_t i = 0; i < nwant; i++)
			assert_true(has(res, nres, want[i]));
		for (size_t i = 0; i < nskip; i++)
			assert_false(has(res, nres, skip[i]));
	}
	print_message("%zu level-1 nodes: %zu leaves asked for before their turn, %zu skipped "
		      "and not read\n", nodes, wanted, skipped);
	assert_true(nodes > 3 && wanted > 5 && skipped > 5);
	free(want);
	free(skip);
	bi_iter_end(&it);
	free(res);
	close_names(fs, img);
}

/* The prefetch lands where the filesystem is: inside a partition, at the
 * partition's start plus the chunk's physical offset. */
static void test_prefetch_in_partition(void **state)
{
	(void)state;
	char *img = unpack_zst(TESTDATA "/images/gpt1/disk.img.zst", NULL);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, img), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	assert_true(fs->devs[0].base > 0);
	assert_int_equal(posix_fadvise(fs->devs[0].fd, 0, 0, POSIX_FADV_RANDOM), 0);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	bool clean = evict(img);
	uint64_t res[64];
	if (clean) {
		bi_prefetch(fs, r.bytenr, fs->nodesize);
		size_t n = wait_resident(img, &r.bytenr, 1, res, 64);
		assert_true(has(res, n, r.bytenr));
		assert_true(n <= fs->nodesize / (size_t)sysconf(_SC_PAGESIZE));
	}
	btrfsimg_fs_free(fs);
	unlink(img);
	free(img);
	if (!clean)
		skip();
}

/* Pages of @path the page cache holds, once it holds @want of them or
 * after 10 s (see wait_resident). */
static size_t wait_pages(const char *path, size_t want)
{
	for (int tries = 0;; tries++) {
		size_t n = resident_pages(path);
		if (n >= want || tries == 200)
			return n;
		usleep(50 * 1000);
	}
}

/* RAID0 metadata: a run of two stripes' length lies half on each device,
 * and both halves are asked for. */
static void test_prefetch_raid0(void **state)
{
	(void)state;
	char *dev[2] = { unpack_zst(TESTDATA "/images/raid0/dev1.img.zst", NULL),
			 unpack_zst(TESTDATA "/images/raid0/dev2.img.zst", NULL) };
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(btrfsimg_add_device_file(fs, dev[i]), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	struct bi_root r;
	assert_int_equal(bi_root_find(fs, 5, &r), 0);
	const struct bi_chunk *c = bi_chunk_lookup(fs->chunks, r.bytenr);
	assert_non_null(c);
	assert_true(c->num_stripes == 2 && c->length >= 2 * c->stripe_len);
	bool clean = true;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(posix_fadvise(fs->devs[i].fd, 0, 0, POSIX_FADV_RANDOM), 0);
		clean = clean && evict(dev[i]);
	}
	if (clean) {
		bi_prefetch(fs, c->logical, 2 * c->stripe_len);
		size_t want = c->stripe_len / (size_t)sysconf(_SC_PAGESIZE);
		for (int i = 0; i < 2; i++)
			assert_int_equal(wait_pages(dev[i], want), want);
	}
	btrfsimg_fs_free(fs);
	for (int i = 0; i < 2; i++) {
		unlink(dev[i]);
		free(dev[i]);
	}
	if (!clean)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_blocks),  cmocka_unit_test(test_header_checks),
		cmocka_unit_test(test_item_checks),   cmocka_unit_test(test_node_checks),
		cmocka_unit_test(test_key_order),     cmocka_unit_test(test_iter_skip_leaves),
		cmocka_unit_test(test_leafwalk_same_leaves),
		cmocka_unit_test(test_iter_stream),   cmocka_unit_test(test_tree_last),
		cmocka_unit_test(test_stream_prefetch),
		cmocka_unit_test(test_prefetch_in_partition), cmocka_unit_test(test_prefetch_raid0),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
