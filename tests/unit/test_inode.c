/* SPDX-License-Identifier: MIT */
/*
 * Inodes against independent truth:
 *  - INODE_ITEM, INODE_REF and INODE_EXTREF bytes built here from the
 *    on-disk layout (every field a distinct value, so a wrong offset shows),
 *    valid and damaged one field at a time; each damage must fail with a
 *    reason naming the check;
 *  - the kernel's view of testdata/dir/dir.img.zst (testdata/dir/gen-dir.sh,
 *    gen_dir_record.py): statx of every path (mode, nlink, uid, gid, size, rdev,
 *    st_blocks, four times), FS_IOC_GETVERSION (i_generation), the stub
 *    directories' synthetic stat, name_to_handle_at bytes and types with
 *    flags 0 and AT_HANDLE_CONNECTABLE, listxattr/getxattr in order,
 *    readlink, and each inode's names as getdents64 listed them (parent
 *    directory, name, position) — 651 of them for links/t0, most in
 *    INODE_EXTREF items.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "dir_expect.h"

static char why[256];

/* ------------------------------------------------------------- parsers */

/* struct btrfs_inode_item, by hand: generation 0, transid 8, size 16,
 * nbytes 24, block_group 32, nlink 40, uid 44, gid 48, mode 52, rdev 56,
 * flags 64, sequence 72, reserved[4] 80, atime 112, ctime 124, mtime 136,
 * otime 148 (each u64 sec + u32 nsec), 160 bytes. */
static void inode_item(uint8_t *it, uint32_t mode, uint32_t nlink, uint64_t flags)
{
	memset(it, 0xee, 160);
	bi_put_le64(it + 0, 11);
	bi_put_le64(it + 8, 12);
	bi_put_le64(it + 16, 13);
	bi_put_le64(it + 24, 14);
	bi_put_le64(it + 32, 15);
	bi_put_le32(it + 40, nlink);
	bi_put_le32(it + 44, 1000);
	bi_put_le32(it + 48, 100);
	bi_put_le32(it + 52, mode);
	bi_put_le64(it + 56, 0x10203);
	bi_put_le64(it + 64, flags);
	bi_put_le64(it + 72, 18);
	bi_put_le64(it + 112, (uint64_t)-1); /* atime before 1970 */
	bi_put_le32(it + 120, 999999999);
	bi_put_le64(it + 124, 21);
	bi_put_le32(it + 132, 22);
	bi_put_le64(it + 136, 23);
	bi_put_le32(it + 144, 24);
	bi_put_le64(it + 148, 25);
	bi_put_le32(it + 156, 26);
}

static void expect_inode_fail(const uint8_t *it, uint32_t size, uint64_t max_gen,
			      const char *what)
{
	struct btrfsimg_inode o;
	int rc = bi_inode_parse(it, size, 5, 300, max_gen, &o, why, sizeof(why));
	if (rc != -EUCLEAN || !strstr(why, what))
		fail_msg("expected -EUCLEAN with \"%s\", have %d \"%s\"", what, rc, why);
}

static void test_inode_fields(void **state)
{
	(void)state;
	uint8_t it[161];
	struct btrfsimg_inode o;
	inode_item(it, S_IFREG | 04755, 3, 0x80000001ull | (1ull << 32));
	assert_int_equal(bi_inode_parse(it, 160, 257, 300, 12, &o, why, sizeof(why)), 0);
	assert_int_equal(o.subvol, 257);
	assert_int_equal(o.objectid, 300);
	assert_int_equal(o.generation, 11);
	assert_int_equal(o.transid, 12);
	assert_int_equal(o.size, 13);
	assert_int_equal(o.nbytes, 14);
	assert_int_equal(o.nlink, 3);
	assert_int_equal(o.uid, 1000);
	assert_int_equal(o.gid, 100);
	assert_int_equal(o.mode, S_IFREG | 04755);
	assert_int_equal(o.rdev, 0x10203);
	/* bit 31 (ROOT_ITEM_INIT) is known; the high half holds ro-compat
	 * flags (VERITY), which a read-only reader does not refuse */
	assert_int_equal(o.flags, 0x80000001ull | (1ull << 32));
	assert_int_equal(o.sequence, 18);
	assert_int_equal(o.atime.sec, -1);
	assert_int_equal(o.atime.nsec, 999999999);
	assert_int_equal(o.ctime.sec, 21);
	assert_int_equal(o.ctime.nsec, 22);
	assert_int_equal(o.mtime.sec, 23);
	assert_int_equal(o.mtime.nsec, 24);
	assert_int_equal(o.otime.sec, 25);
	assert_int_equal(o.otime.nsec, 26);
	/* every valid file type */
	const uint32_t types[] = { S_IFSOCK, S_IFLNK, S_IFREG, S_IFBLK, S_IFCHR, S_IFIFO };
	for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++) {
		inode_item(it, types[i] | 0644, 1, 0);
		assert_int_equal(bi_inode_parse(it, 160, 5, 300, 0, &o, why, sizeof(why)), 0);
	}
	inode_item(it, S_IFDIR | 0755, 1, 0);
	assert_int_equal(bi_inode_parse(it, 160, 5, 300, 0, &o, why, sizeof(why)), 0);
}

static void test_inode_bad(void **state)
{
	(void)state;
	uint8_t it[161];
	inode_item(it, S_IFREG | 0644, 1, 0);
	expect_inode_fail(it, 159, 0, "invalid inode item size, have 159 expect 160");
	expect_inode_fail(it, 161, 0, "invalid inode item size, have 161 expect 160");
	expect_inode_fail(it, 160, 10, "invalid inode generation, have 11 expect <= 10");
	expect_inode_fail(it, 160, 11, "invalid inode transid, have 12 expect <= 11");
	inode_item(it, S_IFREG | 0644 | 0x10000, 1, 0);
	expect_inode_fail(it, 160, 0, "unknown mode bits");
	const uint32_t bad[] = { 0, 0170000, 0030000, 0050000, 0070000, 0110000, 0160000 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		inode_item(it, bad[i] | 0644, 1, 0);
		expect_inode_fail(it, 160, 0, "invalid file type in mode");
	}
	inode_item(it, S_IFDIR | 0755, 2, 0);
	expect_inode_fail(it, 160, 0, "invalid nlink for a directory, have 2 expect <= 1");
	inode_item(it, S_IFREG | 0644, 1, 1u << 12);
	expect_inode_fail(it, 160, 0, "unknown inode flags, have 0x1000");
	inode_item(it, S_IFREG | 0644, 1, 1u << 30); /* runtime-only NOINLINE never reaches disk */
	expect_inode_fail(it, 160, 0, "unknown inode flags, have 0x40000000");
	/* i_size above MAX_LFS_FILESIZE (2^63 - 1, the kernel's s_maxbytes) */
	inode_item(it, S_IFREG | 0644, 1, 0);
	bi_put_le64(it + 16, 1ull << 63);
	expect_inode_fail(it, 160, 0, "invalid inode size, have 9223372036854775808");
	bi_put_le64(it + 16, (1ull << 63) - 1);
	struct btrfsimg_inode o;
	assert_int_equal(bi_inode_parse(it, 160, 5, 300, 0, &o, why, sizeof(why)), 0);
}

static size_t iref(uint8_t *p, uint64_t index, const char *name)
{
	size_t n = strlen(name);
	bi_put_le64(p, index);
	bi_put_le16(p + 8, (uint16_t)n);
	memcpy(p + 10, name, n);
	return 10 + n;
}

static size_t extref(uint8_t *p, uint64_t parent, uint64_t index, const char *name)
{
	size_t n = strlen(name);
	bi_put_le64(p, parent);
	bi_put_le64(p + 8, index);
	bi_put_le16(p + 16, (uint16_t)n);
	memcpy(p + 18, name, n);
	return 18 + n;
}

static void test_iref(void **state)
{
	(void)state;
	uint8_t it[700];
	size_t n = iref(it, 2, "f");
	n += iref(it + n, 3, "link1");
	struct bi_ref_entry e;
	uint32_t pos = 0;
	assert_int_equal(bi_iref_next(it, (uint32_t)n, 257, &pos, &e, why, sizeof(why)), 1);
	assert_int_equal(e.parent, 257);
	assert_int_equal(e.index, 2);
	assert_int_equal(e.name_len, 1);
	assert_ptr_equal(e.name, it + 10);
	assert_int_equal(bi_iref_next(it, (uint32_t)n, 257, &pos, &e, why, sizeof(why)), 1);
	assert_int_equal(e.index, 3);
	assert_int_equal(e.name_len, 5);
	assert_ptr_equal(e.name, it + 21);
	assert_memory_equal(e.name, "link1", 5);
	assert_int_equal(bi_iref_next(it, (uint32_t)n, 257, &pos, &e, why, sizeof(why)), 0);
	assert_int_equal(pos, n);
	/* damage */
	pos = 0;
	assert_int_equal(bi_iref_next(it, 10, 257, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "invalid inode ref item size, have 10 expect > 10"));
	pos = 11;
	assert_int_equal(bi_iref_next(it, (uint32_t)n - 1, 257, &pos, &e, why, sizeof(why)),
			 -EUCLEAN);
	assert_non_null(strstr(why, "inode ref name crosses item boundary, have 26 expect <= 25"));
	assert_int_equal(pos, 11);
	pos = 11;
	assert_int_equal(bi_iref_next(it, 15, 257, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "inode ref header crosses item boundary, have 21 expect <= 15"));
	bi_put_le16(it + 8, 0);
	pos = 0;
	assert_int_equal(bi_iref_next(it, (uint32_t)n, 257, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "invalid inode ref name length, have 0 expect 1..255"));
	bi_put_le16(it + 8, 256);
	pos = 0;
	assert_int_equal(bi_iref_next(it, 700, 257, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "have 256"));
}

static void test_extref(void **state)
{
	(void)state;
	uint8_t it[600];
	char longname[256];
	memset(longname, 'n', 255);
	longname[255] = '\0';
	size_t n = extref(it, 256, 700, longname);
	n += extref(it + n, 300, 701, "x");
	struct bi_ref_entry e;
	uint32_t pos = 0;
	assert_int_equal(bi_extref_next(it, (uint32_t)n, &pos, &e, why, sizeof(why)), 1);
	assert_int_equal(e.parent, 256);
	assert_int_equal(e.index, 700);
	assert_int_equal(e.name_len, 255);
	assert_ptr_equal(e.name, it + 18);
	assert_int_equal(bi_extref_next(it, (uint32_t)n, &pos, &e, why, sizeof(why)), 1);
	assert_int_equal(e.parent, 300);
	assert_int_equal(e.index, 701);
	assert_ptr_equal(e.name, it + 273 + 18);
	assert_int_equal(bi_extref_next(it, (uint32_t)n, &pos, &e, why, sizeof(why)), 0);
	/* the kernel accepts an empty EXTREF item */
	pos = 0;
	assert_int_equal(bi_extref_next(it, 0, &pos, &e, why, sizeof(why)), 0);
	pos = 273;
	assert_int_equal(bi_extref_next(it, 273 + 17, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "inode extref header crosses item boundary, have 291 expect <= 290"));
	pos = 0;
	assert_int_equal(bi_extref_next(it, 272, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "inode extref name crosses item boundary, have 273 expect <= 272"));
	bi_put_le16(it + 16, 0);
	pos = 0;
	assert_int_equal(bi_extref_next(it, (uint32_t)n, &pos, &e, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "invalid inode extref name length, have 0"));
}

/* ------------------------------------------------------ image vs kernel */

static void target_of(struct dx *x, const char *path, uint64_t *sv, uint64_t *obj)
{
	struct btrfsimg_dirent d;
	int rc = btrfsimg_path_lookup(x->fs, 5, path, &d);
	if (rc < 0)
		fail_msg("path_lookup '%s': %d %s", path, rc, btrfsimg_errmsg(x->fs));
	*sv = d.target_subvol;
	*obj = d.target_objectid;
}

/* btrfs stores i_rdev as is: the kernel's internal dev_t, MKDEV() =
 * major << 20 | minor (not new_encode_dev: chr 1:3 is stored 0x100003). */
static uint64_t encode_dev(uint32_t major, uint32_t minor)
{
	return (uint64_t)major << 20 | minor;
}

static void check_time(const struct dx_rec *s, int tok, const struct btrfsimg_timespec *t,
		       const char *what)
{
	if ((uint64_t)t->sec != dx_u64(&s->t[tok]) || t->nsec != dx_u64(&s->t[tok + 1]))
		fail_msg("%s %s: kernel %s.%s, have %lld.%u", s->t[1].p, what, s->t[tok].p,
			 s->t[tok + 1].p, (long long)t->sec, t->nsec);
}

static void check_stat(struct dx *x, const struct dx_rec *s)
{
	uint64_t sv, obj;
	struct btrfsimg_inode o;
	bool stub = s->t[3].p[0] == '-';
	target_of(x, s->t[1].p, &sv, &obj);
	if (stub) {
		uint64_t psv, pobj;
		char *parent = dx_dirname(s->t[1].p);
		target_of(x, parent, &psv, &pobj);
		free(parent);
		assert_int_equal(psv, sv);
		assert_int_equal(btrfsimg_inode_get(x->fs, sv, obj, &o), -ENOENT);
		assert_int_equal(btrfsimg_stub_inode(x->fs, psv, pobj, &o), 0);
		assert_int_equal(o.subvol, sv);
	} else {
		int rc = btrfsimg_inode_get(x->fs, sv, obj, &o);
		if (rc < 0)
			fail_msg("inode_get %s: %d %s", s->t[1].p, rc, btrfsimg_errmsg(x->fs));
		assert_int_equal(o.subvol, dx_u64(&s->t[3]));
	}
	assert_int_equal(o.objectid, dx_u64(&s->t[2]));
	assert_int_equal(o.mode, dx_u64(&s->t[4]));
	assert_int_equal(o.nlink, dx_u64(&s->t[5]));
	assert_int_equal(o.uid, dx_u64(&s->t[6]));
	assert_int_equal(o.gid, dx_u64(&s->t[7]));
	assert_int_equal(o.size, dx_u64(&s->t[8]));
	assert_int_equal(o.rdev, encode_dev((uint32_t)dx_u64(&s->t[9]), (uint32_t)dx_u64(&s->t[10])));
	/* st_blocks = ALIGN(nbytes, sectorsize) >> 9 (4 KiB sectors here) */
	assert_int_equal(((o.nbytes + 4095) & ~4095ull) >> 9, dx_u64(&s->t[11]));
	check_time(s, 12, &o.atime, "atime");
	if (!stub) { /* a stub's mtime, ctime, btime are the time of lookup */
		check_time(s, 14, &o.mtime, "mtime");
		check_time(s, 16, &o.ctime, "ctime");
		check_time(s, 18, &o.otime, "btime");
	}
	if (s->t[20].p[0] != '-')
		assert_int_equal(o.generation & 0xffffffffu, dx_u64(&s->t[20]));
	if (stub)
		assert_int_equal(o.generation, 0);
}

static void test_inode_get(void **state)
{
	struct dx *x = *state;
	size_t n = 0, stubs = 0;
	for (size_t i = 0; i < x->n; i++) {
		if (x->v[i].tag != 'S')
			continue;
		check_stat(x, &x->v[i]);
		stubs += x->v[i].t[3].p[0] == '-';
		n++;
	}
	assert_true(n >= 65);
	assert_int_equal(stubs, 7);
	struct btrfsimg_inode o;
	assert_int_equal(btrfsimg_inode_get(x->fs, 5, 2, &o), -ENOENT);
	assert_non_null(strstr(btrfsimg_errmsg(x->fs), "btrfsimg_stub_inode"));
	assert_int_equal(btrfsimg_inode_get(x->fs, 5, 100000, &o), -ENOENT);
	assert_int_equal(btrfsimg_inode_get(x->fs, 424242, 256, &o), -ENOENT);
	uint64_t sv, obj;
	target_of(x, "d/f", &sv, &obj);
	assert_int_equal(btrfsimg_stub_inode(x->fs, sv, obj, &o), -ENOTDIR);
}

/* struct btrfs_fid by hand: objectid, root, gen (u32, low half kept),
 * parent objectid, parent gen, parent root; little-endian. */
static void test_file_handle_vectors(void **state)
{
	(void)state;
	uint8_t b[40];
	uint32_t type;
	static const uint8_t plain[20] = { 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0x00, 0x01, 0, 0,
					   0, 0, 0, 0, 0x78, 0x56, 0x34, 0x12 };
	assert_int_equal(btrfsimg_file_handle_encode(256, 258, 0xabcd12345678ull, 0100644, 256,
						     257, 9, false, &type, b), 20);
	assert_int_equal(type, 0x4d);
	assert_memory_equal(b, plain, 20);
	assert_int_equal(btrfsimg_file_handle_encode(256, 258, 0x12345678, 0100644, 256, 257, 9,
						     true, &type, b), 32);
	assert_int_equal(type, 0x1004e);
	static const uint8_t with_parent[12] = { 0x01, 0x01, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0 };
	assert_memory_equal(b, plain, 20);
	assert_memory_equal(b + 20, with_parent, 12);
	assert_int_equal(btrfsimg_file_handle_encode(256, 258, 0x12345678, 0100644, 5, 257, 9,
						     true, &type, b), 40);
	assert_int_equal(type, 0x1004f);
	static const uint8_t root[8] = { 5, 0, 0, 0, 0, 0, 0, 0 };
	assert_memory_equal(b + 32, root, 8);
	/* a directory never carries its parent */
	assert_int_equal(btrfsimg_file_handle_encode(256, 258, 0x12345678, 040755, 5, 257, 9,
						     true, &type, b), 20);
	assert_int_equal(type, 0x3004d);
	assert_int_equal(btrfsimg_file_handle_encode(1, 2, 3, 0, 4, 5, 6, true, NULL, b),
			 -EINVAL);
}

static void test_file_handles(void **state)
{
	struct dx *x = *state;
	size_t n = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		if ((r->tag != 'H' && r->tag != 'C') || r->t[2].p[0] == '-')
			continue;
		uint64_t sv, obj, psv, pobj;
		char *parent = dx_dirname(r->t[1].p);
		target_of(x, r->t[1].p, &sv, &obj);
		target_of(x, parent, &psv, &pobj);
		free(parent);
		uint8_t buf[40], want[40];
		uint32_t type = 0;
		int len = btrfsimg_file_handle(x->fs, sv, obj, psv, pobj, r->tag == 'C', &type, buf);
		size_t wn = dx_hexbytes(&r->t[3], want, sizeof(want));
		if (len != (int)wn || type != dx_u64(&r->t[2]) || memcmp(buf, want, wn))
			fail_msg("%c %s: kernel type 0x%llx len %zu, have 0x%x len %d", r->tag,
				 r->t[1].p, (unsigned long long)dx_u64(&r->t[2]), wn, type, len);
		/* the same bytes from the inodes alone (what walk does) */
		struct btrfsimg_inode me = { 0 }, dir = { 0 };
		if (obj != 2) /* stubs encode generation 0 */
			assert_int_equal(btrfsimg_inode_get(x->fs, sv, obj, &me), 0);
		else
			me.mode = S_IFDIR | 0755;
		assert_int_equal(btrfsimg_inode_get(x->fs, psv, pobj, &dir), 0);
		len = btrfsimg_file_handle_encode(sv, obj, me.generation, me.mode, psv, pobj,
						  dir.generation, r->tag == 'C', &type, buf);
		if (len != (int)wn || type != dx_u64(&r->t[2]) || memcmp(buf, want, wn))
			fail_msg("%c %s: encoded from inodes: kernel type 0x%llx len %zu, have 0x%x "
				 "len %d", r->tag, r->t[1].p, (unsigned long long)dx_u64(&r->t[2]),
				 wn, type, len);
		n++;
	}
	assert_true(n >= 120);
	/* struct btrfs_fid (fs/btrfs/export.h) of objectid 257, root 5, generation
	 * 7, little-endian: 01 01 00.. | 05 00.. | 07 00 00 00, type 0x4d */
	uint8_t buf[40];
	uint32_t type;
	uint64_t sv, obj;
	target_of(x, "d", &sv, &obj);
	assert_int_equal(btrfsimg_file_handle(x->fs, sv, obj, 0, 0, false, &type, buf), 20);
	static const uint8_t vec[20] = { 1, 1, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0 };
	assert_memory_equal(buf, vec, 20);
	assert_int_equal(type, 0x4d);
	/* a parent in another subvolume: btrfs_encode_fh's 0x4f, 40 bytes */
	target_of(x, "d/f", &sv, &obj);
	assert_int_equal(btrfsimg_file_handle(x->fs, sv, obj, 258, 256, true, &type, buf), 40);
	assert_int_equal(type, 0x1004f);
	assert_int_equal(buf[32], 2);
	assert_int_equal(buf[33], 1);
}

struct xa {
	struct dx *x;
	size_t at, n; /* next X record to match, matches so far */
	const char *path;
};

static const struct dx_rec *next_x(struct xa *a)
{
	for (; a->at < a->x->n; a->at++) {
		const struct dx_rec *r = &a->x->v[a->at];
		if (r->tag == 'X' && strcmp(r->t[1].p, a->path) == 0)
			return &a->x->v[a->at++];
	}
	return NULL;
}

static int xattr_cb(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *val, size_t vlen)
{
	struct xa *a = ctx;
	const struct dx_rec *r = next_x(a);
	if (!r)
		fail_msg("%s: more xattrs than the kernel lists", a->path);
	assert_int_equal(nlen, r->t[2].n);
	assert_memory_equal(name, r->t[2].p, nlen);
	uint8_t want[4096];
	size_t wn = r->t[3].p[0] == '-' ? 0 : dx_hexbytes(&r->t[3], want, sizeof(want));
	assert_int_equal(vlen, wn);
	if (wn)
		assert_memory_equal(val, want, wn);
	a->n++;
	return 0;
}

static void test_xattrs(void **state)
{
	struct dx *x = *state;
	size_t total = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *s = &x->v[i];
		if (s->tag != 'S' || s->t[3].p[0] == '-')
			continue;
		uint64_t sv, obj;
		target_of(x, s->t[1].p, &sv, &obj);
		struct xa a = { x, i, 0, s->t[1].p };
		int rc = btrfsimg_xattrs(x->fs, sv, obj, xattr_cb, &a);
		if (rc < 0)
			fail_msg("xattrs %s: %d %s", s->t[1].p, rc, btrfsimg_errmsg(x->fs));
		if (next_x(&a)) /* the kernel listed one more */
			fail_msg("%s: fewer xattrs than the kernel lists", s->t[1].p);
		total += a.n;
	}
	assert_int_equal(total, 3 * 7 * 2); /* d/f and two links, in 5 and in snap5 */
	assert_int_equal(btrfsimg_xattrs(x->fs, 5, 2, xattr_cb, NULL), -ENOENT);
	assert_int_equal(btrfsimg_xattrs(x->fs, 5, 99999, xattr_cb, NULL), -ENOENT);
}

static void test_readlink(void **state)
{
	struct dx *x = *state;
	size_t n = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		if (r->tag != 'L')
			continue;
		uint64_t sv, obj;
		target_of(x, r->t[1].p, &sv, &obj);
		uint8_t *t = NULL;
		size_t len = 0;
		int rc = btrfsimg_readlink(x->fs, sv, obj, &t, &len);
		if (rc < 0)
			fail_msg("readlink %s: %d %s", r->t[1].p, rc, btrfsimg_errmsg(x->fs));
		assert_int_equal(len, r->t[2].n);
		assert_memory_equal(t, r->t[2].p, len);
		assert_int_equal(t[len], 0);
		free(t);
		n++;
	}
	assert_int_equal(n, 4);
	uint64_t sv, obj;
	uint8_t *t = (uint8_t *)"x";
	size_t len = 1;
	target_of(x, "d/f", &sv, &obj);
	assert_int_equal(btrfsimg_readlink(x->fs, sv, obj, &t, &len), -EINVAL);
	assert_null(t);
	assert_int_equal(len, 0);
}

/* ---- names: each inode's (parent, index, name) set vs getdents64 ---- */

struct name {
	uint64_t sv, ino, parent, index;
	const char *name;
	size_t len;
};

static int name_cmp(const void *a, const void *b)
{
	const struct name *x = a, *y = b;
	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return 0;
}

struct got {
	struct name v[1024];
	size_t n;
};

static int name_cb(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name, size_t len)
{
	struct got *g = ctx;
	assert_true(g->n < 1024);
	g->v[g->n++] = (struct name){ 0, 0, parent, index, (const char *)name, len };
	return 0;
}

static int by_inode(const void *a, const void *b)
{
	const struct name *x = a, *y = b;
	if (x->sv != y->sv)
		return x->sv < y->sv ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return name_cmp(a, b);
}

/* Every E record whose entry is an inode of the directory's subvolume
 * (not a subvolume, not a stub) is one name of that inode. */
static size_t kernel_names(struct dx *x, struct name *v)
{
	size_t n = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		if (r->tag != 'E')
			continue;
		uint64_t dsv, dobj;
		target_of(x, r->t[1].p, &dsv, &dobj);
		char *p = dx_join(&r->t[1], &r->t[2]);
		const struct dx_rec *s = dx_stat(x, p, strlen(p));
		free(p);
		if (s && (s->t[3].p[0] == '-' || dx_u64(&s->t[3]) != dsv))
			continue;
		v[n++] = (struct name){ dsv, dx_u64(&r->t[3]), dobj, dx_u64(&r->t[5]), r->t[2].p,
					r->t[2].n };
	}
	qsort(v, n, sizeof(*v), by_inode);
	return n;
}

static void test_inode_names(void **state)
{
	struct dx *x = *state;
	struct name *v = calloc(4096, sizeof(*v));
	struct got *g = malloc(sizeof(*g));
	assert_non_null(v);
	assert_non_null(g);
	size_t n = kernel_names(x, v), inodes = 0, most = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && v[j].sv == v[i].sv && v[j].ino == v[i].ino)
			j++;
		g->n = 0;
		int rc = btrfsimg_inode_names(x->fs, v[i].sv, v[i].ino, name_cb, g);
		if (rc < 0)
			fail_msg("names %llu:%llu: %d %s", (unsigned long long)v[i].sv,
				 (unsigned long long)v[i].ino, rc, btrfsimg_errmsg(x->fs));
		assert_int_equal(g->n, j - i);
		qsort(g->v, g->n, sizeof(*g->v), name_cmp);
		for (size_t k = 0; k < g->n; k++) {
			assert_int_equal(g->v[k].parent, v[i + k].parent);
			assert_int_equal(g->v[k].index, v[i + k].index);
			assert_int_equal(g->v[k].len, v[i + k].len);
			assert_memory_equal(g->v[k].name, v[i + k].name, g->v[k].len);
		}
		most = g->n > most ? g->n : most;
		inodes++;
		i = j;
	}
	assert_int_equal(most, 651);
	assert_true(inodes >= 40);
	/* a subvolume root's one stored name is "..", parent itself, index 0 */
	g->n = 0;
	assert_int_equal(btrfsimg_inode_names(x->fs, 258, 256, name_cb, g), 0);
	assert_int_equal(g->n, 1);
	assert_int_equal(g->v[0].parent, 256);
	assert_int_equal(g->v[0].index, 0);
	assert_int_equal(g->v[0].len, 2);
	assert_memory_equal(g->v[0].name, "..", 2);
	assert_int_equal(btrfsimg_inode_names(x->fs, 5, 99999, name_cb, g), -ENOENT);
	free(v);
	free(g);
}

/* links/t0's names overflow its INODE_REF into INODE_EXTREF items, each
 * keyed by the extref hash of (parent, name). */
struct extref_count {
	size_t items, entries, bad_hash;
};

static int count_extrefs(void *ctx, const struct btrfsimg_key *key, const uint8_t *data,
			 uint32_t size)
{
	struct extref_count *c = ctx;
	struct bi_ref_entry e;
	uint32_t pos = 0;
	c->items++;
	while (bi_extref_next(data, size, &pos, &e, why, sizeof(why)) > 0) {
		c->entries++;
		c->bad_hash += bi_extref_hash(e.parent, e.name, e.name_len) != key->offset;
	}
	return 0;
}

static void test_extref_on_disk(void **state)
{
	struct dx *x = *state;
	uint64_t sv, obj;
	target_of(x, "links/t0", &sv, &obj);
	struct btrfsimg_key min = { obj, KT_INODE_EXTREF, 0 }, max = { obj, KT_INODE_EXTREF, UINT64_MAX };
	struct extref_count c = { 0 };
	assert_int_equal(btrfsimg_tree_walk(x->fs, sv, &min, &max, count_extrefs, &c), 0);
	assert_true(c.entries > 500);
	assert_int_equal(c.bad_hash, 0);
}

struct stopper {
	int seen, at;
	uint64_t last_subvol;
	int subvols;
};

static int stop_after(void *ctx, const struct btrfsimg_inode_entry *e)
{
	struct stopper *s = ctx;
	s->subvols += e->inode.subvol != s->last_subvol;
	s->last_subvol = e->inode.subvol;
	return ++s->seen == s->at ? 7 : 0;
}

/* A callback's non-zero return ends the whole enumeration (not only its
 * subvolume) and comes back as it is, positive or negative. */
static void test_inodes_stop(void **state)
{
	struct dx *x = *state;
	struct stopper all = { 0, -1, 0, 0 };
	assert_int_equal(btrfsimg_inodes(x->fs, 0, stop_after, &all), 0);
	assert_true(all.seen > 10 && all.subvols > 1);
	for (int at = 1; at <= all.seen; at += all.seen / 7 + 1) {
		struct stopper s = { 0, at, 0, 0 };
		assert_int_equal(btrfsimg_inodes(x->fs, 0, stop_after, &s), 7);
		assert_int_equal(s.seen, at);
	}
}

static int setup(void **state)
{
	*state = dx_open();
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	dx_free(*state);
	return 0;
}

int main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_inode_fields),
		cmocka_unit_test(test_inode_bad),
		cmocka_unit_test(test_iref),
		cmocka_unit_test(test_extref),
		cmocka_unit_test(test_file_handle_vectors),
	};
	const struct CMUnitTest image[] = {
		cmocka_unit_test(test_inode_get),
		cmocka_unit_test(test_file_handles),
		cmocka_unit_test(test_xattrs),
		cmocka_unit_test(test_readlink),
		cmocka_unit_test(test_inode_names),
		cmocka_unit_test(test_extref_on_disk),
		cmocka_unit_test(test_inodes_stop),
	};
	int rc = cmocka_run_group_tests_name("inode items", pure, NULL, NULL);
	return rc | cmocka_run_group_tests_name("inode image", image, setup, teardown);
}
