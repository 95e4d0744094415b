/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay against independent truth:
 *  - hand-built trees and logs (items assembled here byte by byte from the
 *    on-disk layout), each with the result worked out by hand from the
 *    kernel's replay procedure (tree-log.c): which items change, to which
 *    bytes, and which disappear; plus hostile logs that must fail with a
 *    message naming the check (bad ranges, disorder, limits);
 *  - crash images made by the kernel (testdata/logtree/, gen-logtree.sh there):
 *    the superblock has log_root != 0. The kernel's own replay of each (a
 *    mount, then unmount) is the truth for every fs tree item (keys and
 *    bytes) and for every data checksum (per sector: item boundaries are
 *    free); and the kernel's views recorded after replay and with
 *    rescue=nologreplay are the truth for what the public API shows (stat
 *    fields, contents, symlinks, xattrs, readdir order), with and without
 *    BTRFSIMG_OPEN_NO_LOG_REPLAY. NAME.volatile lists the fields the
 *    kernel sets to the mount time during replay (not knowable offline).
 * The images are unpacked with libzstd into sparse temporary files (the
 * replayed image is a zstd patch against the crash image).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <zstd.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree.h"
#include "logreplay/replay.h"
#include "unpack.h"

#define T 8u			/* replay transaction */
#define MIB (1024u * 1024u)

/* ============================================================ builders */

/* An item list being built (keys added in any order, sorted on use). */
struct items {
	struct bi_lr_item v[64];
	uint8_t buf[64][4096];
	size_t n;
};

static int item_cmp(const void *a, const void *b)
{
	return bi_key_cmp(&((const struct bi_lr_item *)a)->key, &((const struct bi_lr_item *)b)->key);
}

static void add(struct items *s, uint64_t o, uint8_t t, uint64_t off, const void *d, uint32_t n)
{
	assert_true(s->n < 64 && n <= 4096);
	memcpy(s->buf[s->n], d, n);
	s->v[s->n] = (struct bi_lr_item){ { o, t, off }, s->buf[s->n], n };
	s->n++;
}

static void sort_items(struct items *s)
{
	/* the data pointers move with the entries, the buffers stay */
	qsort(s->v, s->n, sizeof(s->v[0]), item_cmp);
}

/* INODE_ITEM with the fields the cases vary; times derive from @t. */
static void inode(uint8_t *b, uint64_t gen, uint64_t transid, uint64_t size, uint64_t nbytes,
		  uint32_t nlink, uint32_t mode, uint64_t seq, uint32_t t)
{
	memset(b, 0, 160);
	bi_put_le64(b + INODE_GENERATION, gen);
	bi_put_le64(b + INODE_TRANSID, transid);
	bi_put_le64(b + INODE_SIZE_OFF, size);
	bi_put_le64(b + INODE_NBYTES, nbytes);
	bi_put_le32(b + INODE_NLINK, nlink);
	bi_put_le32(b + INODE_MODE, mode);
	bi_put_le64(b + INODE_SEQUENCE, seq);
	for (int i = 0; i < 4; i++) {
		bi_put_le64(b + INODE_ATIME + 12 * i, 1700000000u + t + (uint32_t)i);
		bi_put_le32(b + INODE_ATIME + 12 * i + 8, 1000u * t + (uint32_t)i);
	}
}

/* One dir entry {location key, transid, data_len, name_len, type, name}. */
static uint32_t dent(uint8_t *b, uint64_t ino, uint8_t type, const char *name, uint64_t transid)
{
	uint16_t n = (uint16_t)strlen(name);
	memset(b, 0, 30);
	bi_put_le64(b, ino);
	b[8] = KT_INODE_ITEM;
	bi_put_le64(b + 17, transid);
	b[27] = (uint8_t)n;
	b[29] = type;
	memcpy(b + 30, name, n);
	return 30u + n;
}

static uint32_t xattr(uint8_t *b, const char *name, const char *value, uint64_t transid)
{
	uint16_t n = (uint16_t)strlen(name), v = (uint16_t)strlen(value);
	memset(b, 0, 30);
	bi_put_le64(b + 17, transid);
	b[25] = (uint8_t)v;
	b[27] = (uint8_t)n;
	b[29] = FT_XATTR;
	memcpy(b + 30, name, n);
	memcpy(b + 30 + n, value, v);
	return 30u + n + v;
}

static uint32_t iref(uint8_t *b, uint64_t index, const char *name)
{
	uint16_t n = (uint16_t)strlen(name);
	bi_put_le64(b, index);
	b[8] = (uint8_t)n;
	b[9] = 0;
	memcpy(b + 10, name, n);
	return 10u + n;
}

static void reg(uint8_t *b, uint64_t gen, uint64_t bytenr, uint64_t disk, uint64_t off,
		uint64_t num, uint64_t ram)
{
	memset(b, 0, 53);
	bi_put_le64(b + FE_GENERATION, gen);
	bi_put_le64(b + FE_RAM_BYTES, ram);
	b[FE_TYPE] = FE_TYPE_REG;
	bi_put_le64(b + FE_DISK_BYTENR, bytenr);
	bi_put_le64(b + FE_DISK_NUM_BYTES, disk);
	bi_put_le64(b + FE_OFFSET, off);
	bi_put_le64(b + FE_NUM_BYTES, num);
}

static uint64_t h(const char *name)
{
	return bi_name_hash(name, strlen(name));
}

/* ========================================================= pure replays */

struct replay {
	struct items base, log, csum, ext;
	struct bi_lr_array a_base, a_csum, a_ext;
	struct bi_log_overlay *ovl;
	char why[512];
};

static int run(struct replay *r, uint64_t max_bytes, uint64_t max_steps)
{
	struct bi_lr_params p = { T, 4096, 16384, 4, true, true, max_bytes, max_steps };
	sort_items(&r->base);
	sort_items(&r->log);
	sort_items(&r->csum);
	sort_items(&r->ext);
	r->a_base = (struct bi_lr_array){ r->base.v, r->base.n };
	r->a_csum = (struct bi_lr_array){ r->csum.v, r->csum.n };
	r->a_ext = (struct bi_lr_array){ r->ext.v, r->ext.n };
	struct bi_lr_log l = { 5, r->log.v, r->log.n, { 0 } };
	bi_lr_src_array(&l.base, &r->a_base);
	struct bi_lr_trees t;
	bi_lr_src_array(&t.csum, &r->a_csum);
	bi_lr_src_array(&t.extent, &r->a_ext);
	return bi_lr_replay(&p, &l, 1, &t, &r->ovl, r->why, sizeof(r->why));
}

static const struct bi_log_overlay *ovl_of(const struct replay *r, uint64_t root)
{
	for (const struct bi_log_overlay *o = r->ovl; o; o = o->next)
		if (o->root == root)
			return o;
	return NULL;
}

/* The overlay of @root holds exactly @puts (with these bytes) and hides
 * exactly the keys @dels. */
static void expect(const struct replay *r, uint64_t root, struct items *puts,
		   const bi_key *dels, size_t ndels)
{
	const struct bi_log_overlay *o = ovl_of(r, root);
	sort_items(puts);
	size_t np = o ? o->nputs : 0, nd = o ? o->ndels : 0;
	if (np != puts->n)
		fail_msg("root %llu: %zu puts, expected %zu", (unsigned long long)root, np, puts->n);
	for (size_t i = 0; i < np; i++) {
		const struct bi_ovl_put *p = &o->puts[i];
		const struct bi_lr_item *e = &puts->v[i];
		if (bi_key_cmp(&p->key, &e->key) || p->size != e->size ||
		    memcmp(p->data, e->data, e->size))
			fail_msg("root %llu put %zu: have (%llu %u %llu) size %u, expected (%llu %u %llu) size %u%s",
				 (unsigned long long)root, i, (unsigned long long)p->key.objectid,
				 p->key.type, (unsigned long long)p->key.offset, p->size,
				 (unsigned long long)e->key.objectid, e->key.type,
				 (unsigned long long)e->key.offset, e->size,
				 bi_key_cmp(&p->key, &e->key) ? "" : " (bytes differ)");
	}
	if (nd != ndels)
		fail_msg("root %llu: %zu deletions, expected %zu", (unsigned long long)root, nd, ndels);
	for (size_t i = 0; i < nd; i++)
		if (bi_key_cmp(&o->dels[i].start, &dels[i]) || bi_key_cmp(&o->dels[i].end, &dels[i]))
			fail_msg("root %llu deletion %zu: have (%llu %u %llu)", (unsigned long long)root,
				 i, (unsigned long long)o->dels[i].start.objectid, o->dels[i].start.type,
				 (unsigned long long)o->dels[i].start.offset);
}

static void root_dir(struct items *s, uint64_t size, uint64_t seq)
{
	uint8_t b[160];
	inode(b, 3, 7, size, 16384, 1, 040755, seq, 1);
	add(s, 256, KT_INODE_ITEM, 0, b, 160);
	uint8_t r[16];
	add(s, 256, KT_INODE_REF, 256, r, iref(r, 0, ".."));
}

/* A new file with inline data, logged with its name: walk 1 inserts the
 * inode (nbytes 0: the log's value is not used for a new inode), walk 3
 * links the name (DIR_ITEM and DIR_INDEX with the replay transid, the
 * directory grows by 2 * name length and its sequence by one) and inserts
 * the inline extent (nbytes += ram_bytes); the fixup counts one name. */
static void test_new_file(void **state)
{
	(void)state;
	static struct replay r;
	memset(&r, 0, sizeof(r));
	uint8_t b[512];
	root_dir(&r.base, 0, 1);
	inode(b, 8, 8, 5, 999, 1, 0100644, 4, 2);
	add(&r.log, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r.log, 257, KT_INODE_REF, 256, b, iref(b, 2, "f"));
	memset(b, 0, 21);
	bi_put_le64(b + FE_GENERATION, 8);
	bi_put_le64(b + FE_RAM_BYTES, 5);
	memcpy(b + 21, "hello", 5);
	add(&r.log, 257, KT_EXTENT_DATA, 0, b, 26);
	assert_int_equal(run(&r, 0, 0), 0);

	static struct items want;
	memset(&want, 0, sizeof(want));
	inode(b, 3, T, 2, 16384, 1, 040755, 2, 1);
	add(&want, 256, KT_INODE_ITEM, 0, b, 160);
	add(&want, 256, KT_DIR_ITEM, h("f"), b, dent(b, 257, FT_REG_FILE, "f", T));
	add(&want, 256, KT_DIR_INDEX, 2, b, dent(b, 257, FT_REG_FILE, "f", T));
	inode(b, 8, T, 5, 5, 1, 0100644, 4, 2);
	add(&want, 257, KT_INODE_ITEM, 0, b, 160);
	add(&want, 257, KT_INODE_REF, 256, b, iref(b, 2, "f"));
	memset(b, 0, 21);
	bi_put_le64(b + FE_GENERATION, 8);
	bi_put_le64(b + FE_RAM_BYTES, 5);
	memcpy(b + 21, "hello", 5);
	add(&want, 257, KT_EXTENT_DATA, 0, b, 26);
	expect(&r, 5, &want, NULL, 0);
	assert_null(ovl_of(&r, OBJ_CSUM_TREE));
	bi_lr_overlays_free(r.ovl);
}

/* A logged directory with the range [2, 3] logged and only "b" in it:
 * "a" was deleted before the fsync. Walk 1 unlinks it (its DIR_ITEM,
 * DIR_INDEX and INODE_REF go, the directory shrinks by 2 and both
 * sequences grow) before copying the directory's inode item, whose size
 * stays the tree's and whose sequence is the log's. "b" matches and is
 * left alone. The fixup finds no name for "a"'s inode: it becomes an
 * orphan, and mount's orphan cleanup removes its items. */
static void test_dir_range_delete(void **state)
{
	(void)state;
	static struct replay r;
	memset(&r, 0, sizeof(r));
	uint8_t b[512];
	root_dir(&r.base, 4, 1);
	add(&r.base, 256, KT_DIR_ITEM, h("a"), b, dent(b, 257, FT_REG_FILE, "a", 7));
	add(&r.base, 256, KT_DIR_ITEM, h("b"), b, dent(b, 258, FT_REG_FILE, "b", 7));
	add(&r.base, 256, KT_DIR_INDEX, 2, b, dent(b, 257, FT_REG_FILE, "a", 7));
	add(&r.base, 256, KT_DIR_INDEX, 3, b, dent(b, 258, FT_REG_FILE, "b", 7));
	inode(b, 7, 7, 0, 0, 1, 0100644, 1, 3);
	add(&r.base, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r.base, 257, KT_INODE_REF, 256, b, iref(b, 2, "a"));
	inode(b, 7, 7, 0, 0, 1, 0100644, 1, 4);
	add(&r.base, 258, KT_INODE_ITEM, 0, b, 160);
	add(&r.base, 258, KT_INODE_REF, 256, b, iref(b, 3, "b"));

	inode(b, 3, 8, 2, 0, 1, 040755, 5, 5);
	add(&r.log, 256, KT_INODE_ITEM, 0, b, 160);
	bi_put_le64(b, 3);
	add(&r.log, 256, KT_DIR_LOG_INDEX, 2, b, 8);
	add(&r.log, 256, KT_DIR_INDEX, 3, b, dent(b, 258, FT_REG_FILE, "b", 8));
	assert_int_equal(run(&r, 0, 0), 0);

	static struct items want;
	memset(&want, 0, sizeof(want));
	inode(b, 3, T, 2, 16384, 1, 040755, 5, 5);
	add(&want, 256, KT_INODE_ITEM, 0, b, 160);
	const bi_key dels[] = { { 256, KT_DIR_ITEM, h("a") }, { 256, KT_DIR_INDEX, 2 },
				{ 257, KT_INODE_ITEM, 0 }, { 257, KT_INODE_REF, 256 } };
	expect(&r, 5, &want, dels, 4);
	bi_lr_overlays_free(r.ovl);
}

/* A 4 KiB write into the middle of a 1 MiB extent: the extent is split
 * around the logged one (front keeps offset 0, the tail at 260K points
 * 260K into the same disk extent), nbytes stays 1 MiB (4K dropped, 4K
 * added), the new extent's checksum comes from the log. With the whole
 * range rewritten instead, the old extent loses its last reference: it is
 * freed and its checksums go too. */
static void extent_base(struct replay *r)
{
	uint8_t b[1024];
	root_dir(&r->base, 2, 1);
	inode(b, 7, 7, MIB, MIB, 1, 0100644, 1, 6);
	add(&r->base, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r->base, 257, KT_INODE_REF, 256, b, iref(b, 2, "f"));
	reg(b, 7, 0x40000000, MIB, 0, MIB, MIB);
	add(&r->base, 257, KT_EXTENT_DATA, 0, b, 53);
	for (uint32_t i = 0; i < 256; i++)
		bi_put_le32(b + 4 * i, 0x1000 + i);
	add(&r->csum, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, 0x40000000, b, 1024);
	bi_put_le64(b, 1);
	bi_put_le64(b + 8, 7);
	bi_put_le64(b + 16, 1);	/* data */
	add(&r->ext, 0x40000000, KT_EXTENT_ITEM, MIB, b, 24);
	inode(b, 7, 8, MIB, 0, 1, 0100644, 2, 7);
	add(&r->log, 257, KT_INODE_ITEM, 0, b, 160);
}

static void test_extent_split(void **state)
{
	(void)state;
	static struct replay r;
	memset(&r, 0, sizeof(r));
	uint8_t b[1024];
	extent_base(&r);
	reg(b, 8, 0x50000000, 4096, 0, 4096, 4096);
	add(&r.log, 257, KT_EXTENT_DATA, 262144, b, 53);
	bi_put_le32(b, 0xaabbccdd);
	add(&r.log, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, 0x50000000, b, 4);
	assert_int_equal(run(&r, 0, 0), 0);

	static struct items want, wcsum;
	memset(&want, 0, sizeof(want));
	memset(&wcsum, 0, sizeof(wcsum));
	inode(b, 7, T, MIB, MIB, 1, 0100644, 2, 7);
	add(&want, 257, KT_INODE_ITEM, 0, b, 160);
	reg(b, 7, 0x40000000, MIB, 0, 262144, MIB);
	add(&want, 257, KT_EXTENT_DATA, 0, b, 53);
	reg(b, 8, 0x50000000, 4096, 0, 4096, 4096);
	add(&want, 257, KT_EXTENT_DATA, 262144, b, 53);
	reg(b, 7, 0x40000000, MIB, 266240, MIB - 266240, MIB);
	add(&want, 257, KT_EXTENT_DATA, 266240, b, 53);
	expect(&r, 5, &want, NULL, 0);
	bi_put_le32(b, 0xaabbccdd);
	add(&wcsum, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, 0x50000000, b, 4);
	expect(&r, OBJ_CSUM_TREE, &wcsum, NULL, 0);
	bi_lr_overlays_free(r.ovl);
}

static void test_extent_freed(void **state)
{
	(void)state;
	static struct replay r;
	memset(&r, 0, sizeof(r));
	uint8_t b[1024];
	extent_base(&r);
	reg(b, 8, 0x60000000, MIB, 0, MIB, MIB);
	add(&r.log, 257, KT_EXTENT_DATA, 0, b, 53);
	for (uint32_t i = 0; i < 256; i++)
		bi_put_le32(b + 4 * i, 0x2000 + i);
	add(&r.log, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, 0x60000000, b, 1024);
	assert_int_equal(run(&r, 0, 0), 0);

	static struct items want, wcsum;
	memset(&want, 0, sizeof(want));
	memset(&wcsum, 0, sizeof(wcsum));
	inode(b, 7, T, MIB, MIB, 1, 0100644, 2, 7);
	add(&want, 257, KT_INODE_ITEM, 0, b, 160);
	reg(b, 8, 0x60000000, MIB, 0, MIB, MIB);
	add(&want, 257, KT_EXTENT_DATA, 0, b, 53);
	expect(&r, 5, &want, NULL, 0);
	for (uint32_t i = 0; i < 256; i++)
		bi_put_le32(b + 4 * i, 0x2000 + i);
	add(&wcsum, OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, 0x60000000, b, 1024);
	const bi_key gone = { OBJ_EXTENT_CSUM, KT_EXTENT_CSUM, 0x40000000 };
	expect(&r, OBJ_CSUM_TREE, &wcsum, &gone, 1);
	bi_lr_overlays_free(r.ovl);
}

/* Xattrs: the tree's names the log does not hold are dropped (walk 1),
 * the log's items replace the tree's (walk 3). An inode logged with no
 * links is skipped altogether, its extents too. */
static void test_xattrs_and_unlinked(void **state)
{
	(void)state;
	static struct replay r;
	memset(&r, 0, sizeof(r));
	uint8_t b[512];
	root_dir(&r.base, 2, 1);
	inode(b, 7, 7, 0, 0, 1, 0100644, 1, 8);
	add(&r.base, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r.base, 257, KT_INODE_REF, 256, b, iref(b, 2, "f"));
	add(&r.base, 257, KT_XATTR_ITEM, h("user.a"), b, xattr(b, "user.a", "1", 7));
	add(&r.base, 257, KT_XATTR_ITEM, h("user.b"), b, xattr(b, "user.b", "2", 7));
	inode(b, 7, 8, 0, 0, 1, 0100644, 3, 9);
	add(&r.log, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r.log, 257, KT_XATTR_ITEM, h("user.b"), b, xattr(b, "user.b", "33", 8));
	inode(b, 8, 8, 4096, 0, 0, 0100644, 1, 10);
	add(&r.log, 300, KT_INODE_ITEM, 0, b, 160);
	reg(b, 8, 0x70000000, 4096, 0, 4096, 4096);
	add(&r.log, 300, KT_EXTENT_DATA, 0, b, 53);
	assert_int_equal(run(&r, 0, 0), 0);

	static struct items want;
	memset(&want, 0, sizeof(want));
	inode(b, 7, T, 0, 0, 1, 0100644, 3, 9);
	add(&want, 257, KT_INODE_ITEM, 0, b, 160);
	add(&want, 257, KT_XATTR_ITEM, h("user.b"), b, xattr(b, "user.b", "33", 8));
	const bi_key gone = { 257, KT_XATTR_ITEM, h("user.a") };
	expect(&r, 5, &want, &gone, 1);
	bi_lr_overlays_free(r.ovl);
}

/* Hostile or impossible logs fail with a message naming the problem. */
static void expect_error(struct replay *r, int code, const char *what, uint64_t max_bytes,
			 uint64_t max_steps)
{
	int rc = run(r, max_bytes, max_steps);
	if (rc != code || !strstr(r->why, what))
		fail_msg("expected %d with \"%s\", have %d \"%s\"", code, what, rc, r->why);
	assert_null(r->ovl);
}

static void test_hostile(void **state)
{
	(void)state;
	static struct replay r;
	uint8_t b[512];

	/* a logged range that ends before it starts: the kernel loops */
	memset(&r, 0, sizeof(r));
	root_dir(&r.base, 0, 1);
	inode(b, 3, 8, 0, 0, 1, 040755, 2, 1);
	add(&r.log, 256, KT_INODE_ITEM, 0, b, 160);
	bi_put_le64(b, 1);
	add(&r.log, 256, KT_DIR_LOG_INDEX, 5, b, 8);
	expect_error(&r, -EUCLEAN, "ends before it starts", 0, 0);

	/* a name in a directory that exists neither in the tree nor the log */
	memset(&r, 0, sizeof(r));
	root_dir(&r.base, 0, 1);
	add(&r.log, 400, KT_DIR_INDEX, 2, b, dent(b, 401, FT_REG_FILE, "x", 8));
	expect_error(&r, -EUCLEAN, "inode 400 does not exist", 0, 0);

	/* an inode ref whose name runs past the item (the tree-checker rule) */
	memset(&r, 0, sizeof(r));
	root_dir(&r.base, 0, 1);
	inode(b, 8, 8, 0, 0, 1, 0100644, 1, 2);
	add(&r.log, 257, KT_INODE_ITEM, 0, b, 160);
	uint32_t n = iref(b, 2, "name");
	b[8] = 200;
	add(&r.log, 257, KT_INODE_REF, 256, b, n);
	expect_error(&r, -EUCLEAN, "inode ref name crosses item boundary", 0, 0);

	/* keys out of order */
	memset(&r, 0, sizeof(r));
	root_dir(&r.base, 0, 1);
	inode(b, 8, 8, 0, 0, 1, 0100644, 1, 2);
	add(&r.log, 258, KT_INODE_ITEM, 0, b, 160);
	add(&r.log, 257, KT_INODE_ITEM, 0, b, 160);
	struct bi_lr_params p = { T, 4096, 16384, 4, true, true, 0, 0 };
	struct bi_lr_array a = { r.base.v, r.base.n };
	struct bi_lr_log l = { 5, r.log.v, r.log.n, { 0 } };
	bi_lr_src_array(&l.base, &a);
	struct bi_lr_trees t;
	struct bi_lr_array e = { NULL, 0 };
	bi_lr_src_array(&t.csum, &e);
	bi_lr_src_array(&t.extent, &e);
	assert_int_equal(bi_lr_replay(&p, &l, 1, &t, &r.ovl, r.why, sizeof(r.why)), -EUCLEAN);
	assert_non_null(strstr(r.why, "out of order"));

	/* the memory and work limits */
	memset(&r, 0, sizeof(r));
	root_dir(&r.base, 0, 1);
	inode(b, 8, 8, 5, 0, 1, 0100644, 4, 2);
	add(&r.log, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r.log, 257, KT_INODE_REF, 256, b, iref(b, 2, "f"));
	expect_error(&r, -ENOMEM, "limit reached", 300, 0);
	memset(&r, 0, sizeof(r));
	root_dir(&r.base, 0, 1);
	inode(b, 8, 8, 5, 0, 1, 0100644, 4, 2);
	add(&r.log, 257, KT_INODE_ITEM, 0, b, 160);
	add(&r.log, 257, KT_INODE_REF, 256, b, iref(b, 2, "f"));
	expect_error(&r, -E2BIG, "limit reached", 0, 5);
}

/* ======================================================= kernel images */

struct image {
	char *crash, *replayed;
};

static void image_unpack(const char *name, struct image *im)
{
	char a[512], b[512];
	snprintf(a, sizeof(a), "%s/logtree/%s.crash.img.zst", TESTDATA, name);
	snprintf(b, sizeof(b), "%s/logtree/%s.replayed.patch.zst", TESTDATA, name);
	im->crash = unpack_zst(a, NULL);
	im->replayed = unpack_zst(b, im->crash);
}

static void image_free(struct image *im)
{
	unlink(im->crash);
	unlink(im->replayed);
	free(im->crash);
	free(im->replayed);
}

static btrfsimg_fs *open_image(const char *path, unsigned flags)
{
	struct btrfsimg_open_opts o;
	btrfsimg_open_opts_init(&o);
	o.flags = flags;
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, &o), 0);
	assert_int_equal(btrfsimg_add_device_file(fs, path), 0);
	if (btrfsimg_open(fs) != 0)
		fail_msg("open %s: %s", path, btrfsimg_errmsg(fs));
	return fs;
}

/* ---- item-level comparison */

struct ilist {
	struct btrfsimg_key *k;
	uint8_t **d;
	uint32_t *n;
	size_t len, cap;
};

static int collect(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t n)
{
	struct ilist *l = ctx;
	if (l->len == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->k = realloc(l->k, l->cap * sizeof(*l->k));
		l->d = realloc(l->d, l->cap * sizeof(*l->d));
		l->n = realloc(l->n, l->cap * sizeof(*l->n));
	}
	l->k[l->len] = *k;
	l->d[l->len] = malloc(n ? n : 1);
	memcpy(l->d[l->len], d, n);
	l->n[l->len++] = n;
	return 0;
}

static void ilist_free(struct ilist *l)
{
	for (size_t i = 0; i < l->len; i++)
		free(l->d[i]);
	free(l->k);
	free(l->d);
	free(l->n);
	memset(l, 0, sizeof(*l));
}

static void walk_tree(btrfsimg_fs *fs, uint64_t tree, struct ilist *l)
{
	struct btrfsimg_key lo = { 0, 0, 0 }, hi = { UINT64_MAX, 255, UINT64_MAX };
	if (btrfsimg_tree_walk(fs, tree, &lo, &hi, collect, l) != 0)
		fail_msg("walk tree %llu: %s", (unsigned long long)tree, btrfsimg_errmsg(fs));
}

/* Fields the kernel sets to the mount time (NAME.volatile lines
 * "subvol ino field # why"): field is ctime or mtime. */
struct volatile_set {
	uint64_t subvol[16], ino[16];
	char field[16][8];
	size_t n;
};

static void load_volatile(const char *name, struct volatile_set *v)
{
	char path[512], line[512];
	snprintf(path, sizeof(path), "%s/logtree/%s.volatile", TESTDATA, name);
	memset(v, 0, sizeof(*v));
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && v->n < 16) {
		unsigned long long s, i;
		if (line[0] != '#' &&
		    sscanf(line, "%llu %llu %7s", &s, &i, v->field[v->n]) == 3) {
			v->subvol[v->n] = s;
			v->ino[v->n++] = i;
		}
	}
	fclose(f);
}

static bool is_volatile(const struct volatile_set *v, uint64_t subvol, uint64_t ino,
			const char *field)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->subvol[i] == subvol && v->ino[i] == ino && !strcmp(v->field[i], field))
			return true;
	return false;
}

/* An INODE_ITEM with its volatile times copied from @ref. */
static void mask_inode(const struct volatile_set *v, uint64_t subvol, uint64_t ino, uint8_t *d,
		       const uint8_t *ref)
{
	if (is_volatile(v, subvol, ino, "ctime"))
		memcpy(d + INODE_CTIME, ref + INODE_CTIME, 12);
	if (is_volatile(v, subvol, ino, "mtime"))
		memcpy(d + INODE_MTIME, ref + INODE_MTIME, 12);
}

static void compare_tree(btrfsimg_fs *ours, btrfsimg_fs *kern, uint64_t tree,
			 const struct volatile_set *v)
{
	struct ilist a = { 0 }, b = { 0 };
	walk_tree(ours, tree, &a);
	walk_tree(kern, tree, &b);
	for (size_t i = 0; i < a.len || i < b.len; i++) {
		if (i >= a.len || i >= b.len || bi_key_cmp(&a.k[i], &b.k[i]))
			fail_msg("tree %llu item %zu: have (%llu %u %llu), kernel (%llu %u %llu)",
				 (unsigned long long)tree, i,
				 i < a.len ? (unsigned long long)a.k[i].objectid : 0ull,
				 i < a.len ? a.k[i].type : 0,
				 i < a.len ? (unsigned long long)a.k[i].offset : 0ull,
				 i < b.len ? (unsigned long long)b.k[i].objectid : 0ull,
				 i < b.len ? b.k[i].type : 0,
				 i < b.len ? (unsigned long long)b.k[i].offset : 0ull);
		if (a.k[i].type == KT_INODE_ITEM && a.n[i] == 160 && b.n[i] == 160)
			mask_inode(v, tree, a.k[i].objectid, a.d[i], b.d[i]);
		if (a.n[i] != b.n[i] || memcmp(a.d[i], b.d[i], a.n[i]))
			fail_msg("tree %llu item (%llu %u %llu): bytes differ from the kernel's",
				 (unsigned long long)tree, (unsigned long long)a.k[i].objectid,
				 a.k[i].type, (unsigned long long)a.k[i].offset);
	}
	ilist_free(&a);
	ilist_free(&b);
}

/* Checksums per sector: (logical, csum) pairs in order. */
struct sums {
	uint64_t *at;
	uint32_t *sum;
	size_t n, cap;
};

static int collect_sums(void *ctx, const struct btrfsimg_key *k, const uint8_t *d, uint32_t n)
{
	struct sums *s = ctx;
	if (k->objectid != OBJ_EXTENT_CSUM || k->type != KT_EXTENT_CSUM)
		return 0;
	for (uint32_t i = 0; i + 4 <= n; i += 4) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->at = realloc(s->at, s->cap * sizeof(*s->at));
			s->sum = realloc(s->sum, s->cap * sizeof(*s->sum));
		}
		s->at[s->n] = k->offset + (uint64_t)i / 4 * 4096;
		s->sum[s->n++] = bi_le32(d + i);
	}
	return 0;
}

static void compare_csums(btrfsimg_fs *ours, btrfsimg_fs *kern)
{
	struct sums a = { 0 }, b = { 0 };
	struct btrfsimg_key lo = { 0, 0, 0 }, hi = { UINT64_MAX, 255, UINT64_MAX };
	assert_int_equal(btrfsimg_tree_walk(ours, OBJ_CSUM_TREE, &lo, &hi, collect_sums, &a), 0);
	assert_int_equal(btrfsimg_tree_walk(kern, OBJ_CSUM_TREE, &lo, &hi, collect_sums, &b), 0);
	for (size_t i = 0; i < a.n || i < b.n; i++)
		if (i >= a.n || i >= b.n || a.at[i] != b.at[i] || a.sum[i] != b.sum[i])
			fail_msg("checksum %zu: have %llu:%08x, kernel %llu:%08x", i,
				 i < a.n ? (unsigned long long)a.at[i] : 0ull, i < a.n ? a.sum[i] : 0,
				 i < b.n ? (unsigned long long)b.at[i] : 0ull, i < b.n ? b.sum[i] : 0);
	free(a.at);
	free(a.sum);
	free(b.at);
	free(b.sum);
}

/* ---- the kernel's view through the public API (gen_logtree_view.py's format) */

struct names {
	char **hex;
	uint8_t **raw;
	size_t *len;
	uint64_t *ino;
	int *kind;
	uint64_t *sub;
	size_t n, cap;
};

static void hexcat(char *out, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + strlen(out), "%02x", p[i]);
}

static int collect_dirent(void *ctx, const struct btrfsimg_dirent *e)
{
	struct names *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->hex = realloc(l->hex, l->cap * sizeof(*l->hex));
		l->raw = realloc(l->raw, l->cap * sizeof(*l->raw));
		l->len = realloc(l->len, l->cap * sizeof(*l->len));
		l->ino = realloc(l->ino, l->cap * sizeof(*l->ino));
		l->kind = realloc(l->kind, l->cap * sizeof(*l->kind));
		l->sub = realloc(l->sub, l->cap * sizeof(*l->sub));
	}
	l->hex[l->n] = calloc(1, 2 * e->name_len + 1);
	hexcat(l->hex[l->n], e->name, e->name_len);
	l->raw[l->n] = malloc(e->name_len + 1);
	memcpy(l->raw[l->n], e->name, e->name_len);
	l->len[l->n] = e->name_len;
	l->ino[l->n] = e->target_objectid;
	l->sub[l->n] = e->target_subvol;
	l->kind[l->n++] = e->kind;
	return 0;
}

struct xa {
	char (*s)[200];
	size_t n;
};

static void sha256_hex(const void *d, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;
	EVP_Digest(d, n, md, &len, EVP_sha256(), NULL);
	out[0] = '\0';
	hexcat(out, md, 32);
}

static int collect_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *v,
			 size_t vlen)
{
	struct xa *x = ctx;
	x->s = realloc(x->s, (x->n + 1) * sizeof(*x->s));
	char *s = x->s[x->n++];
	s[0] = '\0';
	hexcat(s, name, nlen < 60 ? nlen : 60);
	char d[65];
	sha256_hex(v, vlen, d);
	strcat(s, "=");
	strcat(s, d);
	return 0;
}

static int strcmp_qsort(const void *a, const void *b)
{
	return strcmp(a, b);
}

static char *file_sha(btrfsimg_fs *fs, uint64_t sv, uint64_t ino, uint64_t size)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	uint8_t *buf = malloc(1 << 20);
	for (uint64_t off = 0; off < size;) {
		size_t got = 0;
		int rc = btrfsimg_file_read(fs, sv, ino, off, buf, 1 << 20, &got);
		if (rc != 0 || got == 0)
			fail_msg("read %llu/%llu at %llu: %s", (unsigned long long)sv,
				 (unsigned long long)ino, (unsigned long long)off, btrfsimg_errmsg(fs));
		EVP_DigestUpdate(md, buf, got);
		off += got;
	}
	unsigned char out[32];
	unsigned int len;
	EVP_DigestFinal_ex(md, out, &len);
	EVP_MD_CTX_free(md);
	free(buf);
	char *s = calloc(1, 65);
	hexcat(s, out, 32);
	return s;
}

/* One line of gen_logtree_view.py for inode (sv, ino) at hex path @hex. */
static char *view_line(btrfsimg_fs *fs, uint64_t sv, uint64_t ino, const char *hex)
{
	struct btrfsimg_inode in;
	if (btrfsimg_inode_get(fs, sv, ino, &in) != 0)
		fail_msg("inode %llu/%llu: %s", (unsigned long long)sv, (unsigned long long)ino,
			 btrfsimg_errmsg(fs));
	char *sha = (in.mode & 0170000) == 0100000 ? file_sha(fs, sv, ino, in.size) : strdup("-");
	char *target = calloc(1, 2 * 4096 + 2);
	if ((in.mode & 0170000) == 0120000) {
		uint8_t *t;
		size_t tl;
		assert_int_equal(btrfsimg_readlink(fs, sv, ino, &t, &tl), 0);
		hexcat(target, t, tl);
		free(t);
	} else {
		strcpy(target, "-");
	}
	struct xa x = { 0 };
	assert_int_equal(btrfsimg_xattrs(fs, sv, ino, collect_xattr, &x), 0);
	if (x.n)
		qsort(x.s, x.n, sizeof(*x.s), strcmp_qsort);
	size_t cap = 2 * 4096 + 1024 + x.n * 200 + strlen(hex);
	char *line = malloc(cap);
	int k = snprintf(line, cap,
			 "%s\t%llu\t%o\t%u\t%u\t%u\t%llu\t%llu\t%lld.%09u\t%lld.%09u\t%lld.%09u\t%lld.%09u\t%s\t%s\t",
			 hex, (unsigned long long)ino, in.mode, in.nlink, in.uid, in.gid,
			 (unsigned long long)in.size,
			 (unsigned long long)(((in.mode & 0170000) == 020000 ||
					       (in.mode & 0170000) == 060000) ? in.rdev : 0),
			 (long long)in.atime.sec, in.atime.nsec, (long long)in.mtime.sec,
			 in.mtime.nsec, (long long)in.ctime.sec, in.ctime.nsec,
			 (long long)in.otime.sec, in.otime.nsec, sha, target);
	for (size_t i = 0; i < x.n; i++)
		k += snprintf(line + k, cap - (size_t)k, "%s%s", i ? "," : "", x.s[i]);
	if (!x.n)
		snprintf(line + k, cap - (size_t)k, "-");
	free(x.s);
	free(sha);
	free(target);
	return line;
}

struct lines {
	char **l;
	uint64_t *ino;
	size_t n, cap;
};

static void push_line(struct lines *ls, char *line, uint64_t ino)
{
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 256;
		ls->l = realloc(ls->l, ls->cap * sizeof(*ls->l));
		ls->ino = realloc(ls->ino, ls->cap * sizeof(*ls->ino));
	}
	ls->ino[ls->n] = ino;
	ls->l[ls->n++] = line;
}

static void walk_view(btrfsimg_fs *fs, uint64_t sv, uint64_t dir, const char *hex,
		      struct lines *out)
{
	struct names l = { 0 };
	if (btrfsimg_readdir(fs, sv, dir, collect_dirent, &l) != 0)
		fail_msg("readdir %llu/%llu: %s", (unsigned long long)sv, (unsigned long long)dir,
			 btrfsimg_errmsg(fs));
	for (size_t i = 0; i < l.n; i++) {
		size_t n = strlen(hex) + strlen(l.hex[i]) + 4;
		char *p = malloc(n);
		snprintf(p, n, "%s%s%s", strcmp(hex, ".") ? hex : "", strcmp(hex, ".") ? "2f" : "",
			 l.hex[i]);
		/* the kernel's lookup goes through the DIR_ITEM, readdir the DIR_INDEX */
		struct btrfsimg_dirent d;
		if (btrfsimg_lookup(fs, sv, dir, l.raw[i], l.len[i], &d) != 0 ||
		    d.target_objectid != l.ino[i] || d.target_subvol != l.sub[i])
			fail_msg("lookup of %s in %llu/%llu: %s", l.hex[i], (unsigned long long)sv,
				 (unsigned long long)dir, btrfsimg_errmsg(fs));
		struct btrfsimg_inode in;
		assert_int_equal(btrfsimg_inode_get(fs, l.sub[i], l.ino[i], &in), 0);
		push_line(out, view_line(fs, l.sub[i], l.ino[i], p), l.ino[i]);
		if ((in.mode & 0170000) == 040000 && l.kind[i] == BTRFSIMG_TARGET_INODE)
			walk_view(fs, sv, l.ino[i], p, out);
		free(p);
		free(l.hex[i]);
		free(l.raw[i]);
	}
	free(l.hex);
	free(l.raw);
	free(l.len);
	free(l.ino);
	free(l.kind);
	free(l.sub);
}

/* Compare with the recorded view, tab-separated field by field (fields 9
 * and 10 are mtime and ctime; volatile ones are skipped). */
static void compare_view(btrfsimg_fs *fs, uint64_t sv, const char *file,
			 const struct volatile_set *v)
{
	struct lines ours = { 0 };
	push_line(&ours, view_line(fs, sv, 256, "."), 256);
	walk_view(fs, sv, 256, ".", &ours);
	FILE *f = fopen(file, "r");
	if (!f)
		fail_msg("cannot open %s", file);
	size_t cap = 1 << 20, i = 0;
	char *want = malloc(cap);
	for (; fgets(want, (int)cap, f); i++) {
		want[strcspn(want, "\n")] = '\0';
		if (i >= ours.n)
			fail_msg("%s line %zu: missing from our view: %.80s", file, i + 1, want);
		char *a = ours.l[i], *b = want;
		for (int field = 0; a && b; field++) {
			char *ta = strchr(a, '\t'), *tb = strchr(b, '\t');
			size_t la = ta ? (size_t)(ta - a) : strlen(a), lb = tb ? (size_t)(tb - b) : strlen(b);
			bool skip = (field == 9 && is_volatile(v, sv, ours.ino[i], "mtime")) ||
				    (field == 10 && is_volatile(v, sv, ours.ino[i], "ctime"));
			if (!skip && (la != lb || memcmp(a, b, la)))
				fail_msg("%s line %zu field %d:\nhave %.*s\nwant %.*s\n(line %s)", file,
					 i + 1, field, (int)la, a, (int)lb, b, ours.l[i]);
			a = ta ? ta + 1 : NULL;
			b = tb ? tb + 1 : NULL;
		}
	}
	if (i != ours.n)
		fail_msg("%s: %zu lines, our view has %zu", file, i, ours.n);
	fclose(f);
	free(want);
	for (size_t k = 0; k < ours.n; k++)
		free(ours.l[k]);
	free(ours.l);
	free(ours.ino);
}

static void test_image(const char *name)
{
	struct image im;
	struct volatile_set v;
	image_unpack(name, &im);
	load_volatile(name, &v);
	btrfsimg_fs *ours = open_image(im.crash, 0);
	btrfsimg_fs *kern = open_image(im.replayed, 0);
	btrfsimg_fs *nolog = open_image(im.crash, BTRFSIMG_OPEN_NO_LOG_REPLAY);
	struct btrfsimg_super_info sb;
	assert_int_equal(btrfsimg_super(ours, &sb), 0);
	assert_true(sb.log_root != 0);
	assert_int_equal(btrfsimg_damage_count(ours), 0);

	struct btrfsimg_subvol *svs;
	size_t n;
	assert_int_equal(btrfsimg_subvols(kern, &svs, &n), 0);
	for (size_t i = 0; i < n; i++) {
		char path[512];
		compare_tree(ours, kern, svs[i].id, &v);
		snprintf(path, sizeof(path), "%s/logtree/%s.view.%llu.txt", TESTDATA, name,
			 (unsigned long long)svs[i].id);
		compare_view(ours, svs[i].id, path, &v);
		snprintf(path, sizeof(path), "%s/logtree/%s.nolog.view.%llu.txt", TESTDATA, name,
			 (unsigned long long)svs[i].id);
		compare_view(nolog, svs[i].id, path, &(struct volatile_set){ 0 });
	}
	compare_csums(ours, kern);
	btrfsimg_subvols_free(svs, n);
	btrfsimg_fs_free(ours);
	btrfsimg_fs_free(kern);
	btrfsimg_fs_free(nolog);
	image_free(&im);
}

static void test_ops(void **state)
{
	(void)state;
	test_image("ops");
}

static void test_links(void **state)
{
	(void)state;
	test_image("links");
}

static void test_extents(void **state)
{
	(void)state;
	test_image("extents");
}

static void test_holes(void **state)
{
	(void)state;
	test_image("holes");
}

static void test_misc(void **state)
{
	(void)state;
	test_image("misc");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_file),
		cmocka_unit_test(test_dir_range_delete),
		cmocka_unit_test(test_extent_split),
		cmocka_unit_test(test_extent_freed),
		cmocka_unit_test(test_xattrs_and_unlinked),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_ops),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_extents),
		cmocka_unit_test(test_holes),
		cmocka_unit_test(test_misc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
