/* SPDX-License-Identifier: MIT */
/*
 * Directories against independent truth:
 *  - DIR_ITEM / DIR_INDEX / XATTR_ITEM bytes built here from the on-disk
 *    layout (30-byte header, name, data; several entries per item), valid
 *    and damaged one field at a time (truncated header, name or data past
 *    the end, name_len 0 and 256, bad types and location keys); every
 *    damage must fail with a reason naming the check. The hash-collision
 *    chain uses three names the kernel itself stored in one DIR_ITEM of
 *    the test image (their common hash 0x5f247fc8 computed by
 *    testdata/dir/gen_dir_record.py's own CRC-32C);
 *  - the kernel's view of testdata/dir/dir.img.zst (testdata/dir/gen-dir.sh,
 *    gen_dir_record.py): getdents64 order, d_ino, d_type and positions (index)
 *    for readdir; statx st_ino and stx_subvol (absent for stubs) for what
 *    readdir, lookup and path lookup say an entry leads to; statx or the
 *    errno of paths with "..", ".", repeated and trailing '/';
 *  - four damaged copies (d/moved's ROOT_ITEM with refs 0 or re-keyed
 *    away, its ROOT_REF with another dirid or name): the kernel showed a
 *    stub each time, and so must lookup.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dir_expect.h"

static char why[256];

/* Append one entry at @p; returns its size. */
static size_t entry(uint8_t *p, uint64_t obj, uint8_t ltype, uint64_t loff, uint8_t type,
		    const void *name, uint16_t nlen, const void *data, uint16_t dlen)
{
	bi_put_le64(p, obj);
	p[8] = ltype;
	bi_put_le64(p + 9, loff);
	bi_put_le64(p + 17, 77); /* transid */
	bi_put_le16(p + 25, dlen);
	bi_put_le16(p + 27, nlen);
	p[29] = type;
	memcpy(p + 30, name, nlen);
	if (dlen)
		memcpy(p + 30 + nlen, data, dlen);
	return 30u + nlen + dlen;
}

static void expect_fail(const uint8_t *item, uint32_t size, uint8_t key_type, const char *what)
{
	struct bi_dir_entry e;
	uint32_t pos = 0;
	int rc;
	while ((rc = bi_dir_item_next(item, size, key_type, &pos, &e, why, sizeof(why))) > 0)
		;
	if (rc != -EUCLEAN || !strstr(why, what))
		fail_msg("expected -EUCLEAN with \"%s\", have %d \"%s\"", what, rc, why);
}

/* ------------------------------------------------------------- parsers */

static void test_entry_fields(void **state)
{
	(void)state;
	uint8_t it[64];
	size_t n = entry(it, 261, KT_INODE_ITEM, 0, FT_REG_FILE, "hello", 5, NULL, 0);
	struct bi_dir_entry e;
	uint32_t pos = 0;
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_DIR_INDEX, &pos, &e, why,
					  sizeof(why)), 1);
	assert_int_equal(e.location.objectid, 261);
	assert_int_equal(e.location.type, KT_INODE_ITEM);
	assert_int_equal(e.location.offset, 0);
	assert_int_equal(e.transid, 77);
	assert_int_equal(e.type, FT_REG_FILE);
	assert_int_equal(e.name_len, 5);
	assert_ptr_equal(e.name, it + 30);
	assert_int_equal(e.data_len, 0);
	assert_int_equal(e.offset, 0);
	assert_int_equal(pos, 35);
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_DIR_INDEX, &pos, &e, why,
					  sizeof(why)), 0);
	/* the fscrypt flag bit is not part of the type */
	it[29] = FT_DIR | FT_ENCRYPTED;
	pos = 0;
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_DIR_INDEX, &pos, &e, why,
					  sizeof(why)), 1);
	assert_int_equal(e.type, FT_DIR);
	/* a subvolume entry: (child, ROOT_ITEM, -1) */
	n = entry(it, 257, KT_ROOT_ITEM, UINT64_MAX, FT_DIR, "sv", 2, NULL, 0);
	pos = 0;
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_DIR_ITEM, &pos, &e, why,
					  sizeof(why)), 1);
	assert_int_equal(e.location.type, KT_ROOT_ITEM);
	assert_int_equal(e.location.offset, UINT64_MAX);
}

/* The three names the kernel put into one DIR_ITEM (coll/ in dir.img). */
static const uint8_t c1[] = "c73cf256d";
static const uint8_t c2[] = { 'c', 'd', 'd', 'a', '1', '4', '9', '4', 'c', 0xfd, 0x10, 0x26, 0x96 };
static const uint8_t c3[] = { 'c', '8', 'f', '4', 'd', '3', 'e', '2', '7', 0x3e, 0x23, 0xa2, 0xbf };
#define COLL_HASH 0x5f247fc8u

static void test_collision_chain(void **state)
{
	(void)state;
	uint8_t it[256];
	size_t n = 0;
	n += entry(it + n, 272, KT_INODE_ITEM, 0, FT_REG_FILE, c1, 9, NULL, 0);
	n += entry(it + n, 273, KT_INODE_ITEM, 0, FT_REG_FILE, c2, sizeof(c2), NULL, 0);
	n += entry(it + n, 274, KT_INODE_ITEM, 0, FT_REG_FILE, c3, sizeof(c3), NULL, 0);
	assert_int_equal(n, 3 * 30 + 9 + 13 + 13);
	bi_key k = { 259, KT_DIR_ITEM, COLL_HASH };
	assert_int_equal(bi_dir_item_check(it, (uint32_t)n, &k, why, sizeof(why)), 3);
	struct bi_dir_entry e;
	uint32_t pos = 0;
	uint64_t want[] = { 272, 273, 274 };
	size_t offs[] = { 0, 39, 82 };
	for (int i = 0; i < 3; i++) {
		assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_DIR_ITEM, &pos, &e, why,
						  sizeof(why)), 1);
		assert_int_equal(e.location.objectid, want[i]);
		assert_int_equal(e.offset, offs[i]);
		assert_true(e.name >= it && e.name + e.name_len <= it + n);
	}
	assert_int_equal(pos, n);
	/* the same bytes under another hash fail, naming the entry */
	k.offset = COLL_HASH + 1;
	assert_int_equal(bi_dir_item_check(it, (uint32_t)n, &k, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "name hash mismatch"));
	/* DIR_INDEX items carry no hash */
	k.type = KT_DIR_INDEX;
	assert_int_equal(bi_dir_item_check(it, (uint32_t)n, &k, why, sizeof(why)), 3);
	/* the last entry cut short: the walk gives two, then fails */
	pos = 0;
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n - 1, KT_DIR_ITEM, &pos, &e, why,
					  sizeof(why)), 1);
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n - 1, KT_DIR_ITEM, &pos, &e, why,
					  sizeof(why)), 1);
	uint32_t before = pos;
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n - 1, KT_DIR_ITEM, &pos, &e, why,
					  sizeof(why)), -EUCLEAN);
	assert_int_equal(pos, before);
	assert_non_null(strstr(why, "dir item data crosses item boundary, have 125 expect <= 124"));
}

static void test_bad_entries(void **state)
{
	(void)state;
	uint8_t it[600];
	size_t n = entry(it, 261, KT_INODE_ITEM, 0, FT_REG_FILE, "name", 4, NULL, 0);
	expect_fail(it, 29, KT_DIR_INDEX, "dir item header crosses item boundary, have 30 expect <= 29");
	expect_fail(it, (uint32_t)n - 1, KT_DIR_INDEX, "dir item data crosses item boundary");
	/* a second, truncated header after a good entry */
	memcpy(it + n, it, 10);
	expect_fail(it, (uint32_t)n + 10, KT_DIR_INDEX, "header crosses item boundary, have 64");
	bi_put_le16(it + 27, 0);
	expect_fail(it, (uint32_t)n, KT_DIR_INDEX, "invalid dir item name length, have 0");
	bi_put_le16(it + 27, 256);
	expect_fail(it, 600, KT_DIR_INDEX, "invalid dir item name length, have 256 expect 1..255");
	bi_put_le16(it + 27, 200); /* a valid length, the name past the end */
	expect_fail(it, (uint32_t)n, KT_DIR_INDEX, "data crosses item boundary, have 230 expect <= 34");
	n = entry(it, 261, KT_INODE_ITEM, 0, FT_REG_FILE, "name", 4, "xy", 2);
	expect_fail(it, (uint32_t)n, KT_DIR_ITEM, "dir item with data, have 2 bytes expect 0");
	n = entry(it, 261, KT_INODE_ITEM, 0, 0, "name", 4, NULL, 0);
	expect_fail(it, (uint32_t)n, KT_DIR_ITEM, "invalid dir item type, have 0");
	it[29] = 9;
	expect_fail(it, (uint32_t)n, KT_DIR_ITEM, "invalid dir item type, have 9");
	it[29] = FT_XATTR;
	expect_fail(it, (uint32_t)n, KT_DIR_ITEM, "does not fit key type 84");
	it[29] = FT_REG_FILE;
	expect_fail(it, (uint32_t)n, KT_XATTR_ITEM, "xattr location key not zero");
	it[8] = 2; /* location type */
	expect_fail(it, (uint32_t)n, KT_DIR_INDEX, "invalid location key type, have 2");
	n = entry(it, 255, KT_INODE_ITEM, 0, FT_REG_FILE, "name", 4, NULL, 0);
	expect_fail(it, (uint32_t)n, KT_DIR_INDEX, "invalid location objectid, have 255");
	n = entry(it, 300, KT_INODE_ITEM, 1, FT_REG_FILE, "name", 4, NULL, 0);
	expect_fail(it, (uint32_t)n, KT_DIR_INDEX, "invalid location key offset, have 1");
	n = entry(it, 1, KT_ROOT_ITEM, UINT64_MAX, FT_DIR, "name", 4, NULL, 0);
	expect_fail(it, (uint32_t)n, KT_DIR_INDEX, "invalid location root id, have 1");
	bi_key k = { 256, KT_DIR_INDEX, 2 };
	assert_int_equal(bi_dir_item_check(it, 0, &k, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "empty dir item"));
}

static void test_xattr_entries(void **state)
{
	(void)state;
	uint8_t it[400], val[300];
	for (int i = 0; i < 300; i++)
		val[i] = (uint8_t)i;
	size_t n = entry(it, 0, 0, 0, FT_XATTR, "user.a", 6, val, 300);
	n += entry(it + n, 0, 0, 0, FT_XATTR, "user.empty", 10, NULL, 0);
	struct bi_dir_entry e;
	uint32_t pos = 0;
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_XATTR_ITEM, &pos, &e, why,
					  sizeof(why)), 1);
	assert_int_equal(e.data_len, 300);
	assert_ptr_equal(e.data, it + 36);
	assert_memory_equal(e.data, val, 300);
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_XATTR_ITEM, &pos, &e, why,
					  sizeof(why)), 1);
	assert_int_equal(e.data_len, 0);
	assert_ptr_equal(e.data, it + n);
	assert_int_equal(bi_dir_item_next(it, (uint32_t)n, KT_XATTR_ITEM, &pos, &e, why,
					  sizeof(why)), 0);
	/* value running past the item */
	expect_fail(it, 30 + 6 + 299, KT_XATTR_ITEM, "dir item data crosses item boundary");
	/* the hash covers the name only */
	bi_key k = { 261, KT_XATTR_ITEM, bi_name_hash("user.a", 6) };
	assert_int_equal(bi_dir_item_check(it, 336, &k, why, sizeof(why)), 1);
}

static void test_root_ref(void **state)
{
	(void)state;
	uint8_t it[40];
	struct bi_root_ref r;
	bi_put_le64(it, 257);
	bi_put_le64(it + 8, 4);
	bi_put_le16(it + 16, 5);
	memcpy(it + 18, "moved", 5);
	assert_int_equal(bi_root_ref_parse(it, 23, &r, why, sizeof(why)), 0);
	assert_int_equal(r.dirid, 257);
	assert_int_equal(r.sequence, 4);
	assert_int_equal(r.name_len, 5);
	assert_ptr_equal(r.name, it + 18);
	assert_int_equal(bi_root_ref_parse(it, 22, &r, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "root ref name crosses item boundary, have 23 expect <= 22"));
	assert_int_equal(bi_root_ref_parse(it, 17, &r, why, sizeof(why)), -EUCLEAN);
}

/* ------------------------------------------------------ image vs kernel */

static uint8_t ft_to_dt(uint8_t ft)
{
	static const uint8_t map[] = { 0, 8, 4, 2, 6, 1, 12, 10 };
	return ft < sizeof(map) ? map[ft] : 0xff;
}

struct ents {
	struct btrfsimg_dirent v[1024];
	uint8_t names[1024][256];
	size_t n;
};

static int collect(void *ctx, const struct btrfsimg_dirent *e)
{
	struct ents *es = ctx;
	if (es->n == 1024)
		return -ENOMEM;
	es->v[es->n] = *e;
	memcpy(es->names[es->n], e->name, e->name_len);
	es->v[es->n].name = es->names[es->n];
	es->n++;
	return 0;
}

static void resolve(struct dx *x, const char *path, struct btrfsimg_dirent *d)
{
	int rc = btrfsimg_path_lookup(x->fs, 5, path, d);
	if (rc < 0)
		fail_msg("path_lookup '%s': %d %s", path, rc, btrfsimg_errmsg(x->fs));
}

/* What the kernel's stat said about @path matches where @d leads. */
static void check_target(const struct dx_rec *s, const struct btrfsimg_dirent *d,
			 const char *path)
{
	if (!s)
		return;
	uint64_t ino = dx_u64(&s->t[2]);
	if (s->t[3].p[0] == '-') {
		if (d->kind != BTRFSIMG_TARGET_STUB || d->target_objectid != 2 || ino != 2)
			fail_msg("%s: kernel shows a stub, have kind %d target %llu:%llu", path,
				 d->kind, (unsigned long long)d->target_subvol,
				 (unsigned long long)d->target_objectid);
		return;
	}
	uint64_t sv = dx_u64(&s->t[3]);
	if (d->kind == BTRFSIMG_TARGET_STUB || d->target_subvol != sv || d->target_objectid != ino)
		fail_msg("%s: kernel stat %llu:%llu, have kind %d %llu:%llu", path,
			 (unsigned long long)sv, (unsigned long long)ino, d->kind,
			 (unsigned long long)d->target_subvol, (unsigned long long)d->target_objectid);
	bool subvol_entry = d->location_type == KT_ROOT_ITEM;
	assert_int_equal(d->kind, subvol_entry ? BTRFSIMG_TARGET_SUBVOL : BTRFSIMG_TARGET_INODE);
}

/* One F record: readdir of that directory against its E records. */
static size_t check_dir(struct dx *x, size_t f, struct ents *es)
{
	const struct dx_tok *dir = &x->v[f].t[1];
	struct btrfsimg_dirent d;
	resolve(x, dir->p, &d);
	es->n = 0;
	int rc = btrfsimg_readdir(x->fs, d.target_subvol, d.target_objectid, collect, es);
	if (rc < 0)
		fail_msg("readdir '%s': %d %s", dir->p, rc, btrfsimg_errmsg(x->fs));
	size_t k = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		if (r->tag != 'E' || r->t[1].n != dir->n || memcmp(r->t[1].p, dir->p, dir->n))
			continue;
		if (k >= es->n)
			fail_msg("readdir '%s': %zu entries, the kernel lists more", dir->p, es->n);
		const struct btrfsimg_dirent *e = &es->v[k++];
		assert_int_equal(e->name_len, r->t[2].n);
		assert_memory_equal(e->name, r->t[2].p, e->name_len);
		assert_int_equal(e->location_objectid, dx_u64(&r->t[3]));
		assert_int_equal(ft_to_dt(e->file_type), dx_u64(&r->t[4]));
		assert_int_equal(e->index, dx_u64(&r->t[5]));
		char *p = dx_join(dir, &r->t[2]);
		check_target(dx_stat(x, p, strlen(p)), e, p);
		/* lookup by name (DIR_ITEM) leads to the same place */
		struct btrfsimg_dirent l;
		rc = btrfsimg_lookup(x->fs, d.target_subvol, d.target_objectid, r->t[2].p,
				     r->t[2].n, &l);
		if (rc < 0)
			fail_msg("lookup '%s': %d %s", p, rc, btrfsimg_errmsg(x->fs));
		assert_ptr_equal(l.name, r->t[2].p);
		assert_int_equal(l.location_objectid, e->location_objectid);
		assert_int_equal(l.file_type, e->file_type);
		assert_int_equal(l.kind, e->kind);
		assert_int_equal(l.target_subvol, e->target_subvol);
		assert_int_equal(l.target_objectid, e->target_objectid);
		free(p);
	}
	assert_int_equal(k, es->n);
	return k;
}

static void test_readdir_lookup(void **state)
{
	struct dx *x = *state;
	struct ents *es = malloc(sizeof(*es));
	assert_non_null(es);
	size_t dirs = 0, ents = 0, stubs = 0;
	for (size_t i = 0; i < x->n; i++) {
		if (x->v[i].tag != 'F')
			continue;
		const struct dx_rec *s = dx_stat(x, x->v[i].t[1].p, x->v[i].t[1].n);
		stubs += s && s->t[3].p[0] == '-';
		ents += check_dir(x, i, es);
		dirs++;
	}
	free(es);
	/* the image has what gen-dir.sh says it has */
	assert_true(dirs >= 25);
	assert_true(ents >= 700);
	assert_int_equal(stubs, 7);
}

static void test_path_lookup(void **state)
{
	struct dx *x = *state;
	size_t n = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		struct btrfsimg_dirent d;
		if (r->tag == 'S') {
			resolve(x, r->t[1].p, &d);
			check_target(r, &d, r->t[1].p);
			const char *last = strrchr(r->t[1].p, '/');
			last = last ? last + 1 : r->t[1].p;
			assert_ptr_equal(d.name, last);
			n++;
			continue;
		}
		if (r->tag != 'P')
			continue;
		int rc = btrfsimg_path_lookup(x->fs, 5, r->t[1].p, &d);
		if (strcmp(r->t[2].p, "ERR") == 0) {
			int want = strcmp(r->t[3].p, "ENOENT") == 0 ? -ENOENT : -ENOTDIR;
			if (rc != want)
				fail_msg("'%s': kernel %s, have %d", r->t[1].p, r->t[3].p, rc);
			continue;
		}
		if (rc < 0)
			fail_msg("'%s': %d %s", r->t[1].p, rc, btrfsimg_errmsg(x->fs));
		struct dx_rec s = *r; /* P path ino subvol: the S layout's first fields */
		check_target(&s, &d, r->t[1].p);
		n++;
	}
	assert_true(n >= 77);
}

static void test_dots_and_stubs(void **state)
{
	struct dx *x = *state;
	struct btrfsimg_dirent d, e;
	/* "" and "/" are the start root; ".." stays there like "/.." */
	const char *roots[] = { "", "/", "..", "../..", "d/../..", "./" };
	for (size_t i = 0; i < sizeof(roots) / sizeof(*roots); i++) {
		assert_int_equal(btrfsimg_path_lookup(x->fs, 5, roots[i], &d), 0);
		assert_int_equal(d.target_subvol, 5);
		assert_int_equal(d.target_objectid, 256);
		assert_int_equal(d.kind, BTRFSIMG_TARGET_INODE);
		assert_int_equal(d.file_type, FT_DIR);
	}
	/* paths inside a subvolume, from its own root */
	assert_int_equal(btrfsimg_path_lookup(x->fs, 258, "nested/b", &d), 0);
	resolve(x, "sv1/nested/b", &e);
	assert_int_equal(d.target_subvol, e.target_subvol);
	assert_int_equal(d.target_objectid, e.target_objectid);
	assert_int_equal(btrfsimg_path_lookup(x->fs, 258, "..", &d), 0);
	assert_int_equal(d.target_subvol, 258);
	/* a stub is empty: readdir gives nothing, lookup finds nothing */
	resolve(x, "snap1/nested", &d);
	assert_int_equal(d.kind, BTRFSIMG_TARGET_STUB);
	struct ents *es = malloc(sizeof(*es));
	assert_non_null(es);
	es->n = 0;
	assert_int_equal(btrfsimg_readdir(x->fs, d.target_subvol, 2, collect, es), 0);
	assert_int_equal(es->n, 0);
	free(es);
	assert_int_equal(btrfsimg_lookup(x->fs, d.target_subvol, 2, "b", 1, &e), -ENOENT);
	assert_non_null(strstr(btrfsimg_errmsg(x->fs), "stub directory"));
	/* misuse and absent names */
	resolve(x, "d/f", &d);
	assert_int_equal(btrfsimg_readdir(x->fs, 5, d.target_objectid, collect, NULL), -ENOTDIR);
	assert_int_equal(btrfsimg_lookup(x->fs, 5, 256, "d", 0, &e), -EINVAL);
	assert_int_equal(btrfsimg_lookup(x->fs, 5, 256, ".", 1, &e), -ENOENT);
	assert_int_equal(btrfsimg_lookup(x->fs, 5, 256, "..", 2, &e), -ENOENT);
	assert_int_equal(btrfsimg_lookup(x->fs, 5, 256, "no\xff", 3, &e), -ENOENT);
	assert_non_null(strstr(btrfsimg_errmsg(x->fs), "'no\\xff' in directory 256"));
	assert_int_equal(btrfsimg_readdir(x->fs, 999, 256, collect, NULL), -ENOENT);
}

/* lookup walks the whole collision chain: each of the three names is
 * found, and a fourth name with the same hash is not. */
static void test_collision_lookup(void **state)
{
	struct dx *x = *state;
	struct btrfsimg_dirent dir, e;
	resolve(x, "coll", &dir);
	const uint8_t *names[] = { c1, c2, c3 };
	size_t lens[] = { 9, sizeof(c2), sizeof(c3) };
	for (int i = 0; i < 3; i++) {
		assert_int_equal(bi_name_hash(names[i], lens[i]), COLL_HASH);
		assert_int_equal(btrfsimg_lookup(x->fs, 5, dir.target_objectid, names[i], lens[i],
						 &e), 0);
		assert_int_equal(e.location_objectid, 272 + i);
	}
	/* a fourth name with the same hash, not stored: walked past, not found */
	uint8_t c4[] = { 'c', 'z', 'z', 'z', 'z', 0, 0, 0, 0 };
	/* forge the last 4 bytes so that the hash matches (CRC-32C is linear) */
	uint32_t target = COLL_HASH, s;
	for (int i = 0; i < 32; i++)
		target = target & 0x80000000u ? ((target ^ 0x82F63B78u) << 1) | 1 : target << 1;
	s = bi_crc32c_raw(0xFFFFFFFEu, c4, 5) ^ target;
	for (int i = 0; i < 4; i++)
		c4[5 + i] = (uint8_t)(s >> (8 * i));
	assert_int_equal(bi_name_hash(c4, 9), COLL_HASH);
	assert_int_equal(btrfsimg_lookup(x->fs, 5, dir.target_objectid, c4, 9, &e), -ENOENT);
}

/* Damaged copies of the image (gen_dir_record.py CRAFTS), patched in memory with
 * the bytes gen-dir.sh wrote (new leaf checksum included), against what the
 * kernel said d/moved is on each: a stub every time. */
static void check_craft(struct dx *x, const char *variant)
{
	uint8_t saved[64];
	size_t off[64], n = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		if (r->tag != 'Z' || strcmp(r->t[1].p, variant))
			continue;
		assert_true(n < 64);
		off[n] = dx_u64(&r->t[2]);
		assert_true(off[n] < x->img_len);
		saved[n] = x->img[off[n]];
		x->img[off[n]] = (uint8_t)strtoul(r->t[3].p, NULL, 16);
		n++;
	}
	assert_true(n >= 4);
	btrfsimg_fs *fs;
	assert_int_equal(btrfsimg_fs_new(&fs, NULL), 0);
	assert_int_equal(btrfsimg_add_device_mem(fs, x->img, x->img_len, variant), 0);
	assert_int_equal(btrfsimg_open(fs), 0);
	size_t checked = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct dx_rec *r = &x->v[i];
		if (r->tag != 'K' || strcmp(r->t[1].p, variant))
			continue;
		struct btrfsimg_dirent d;
		int rc = btrfsimg_path_lookup(fs, 5, r->t[2].p, &d);
		if (strcmp(r->t[3].p, "ERR") == 0) {
			assert_string_equal(r->t[4].p, "ENOENT");
			assert_int_equal(rc, -ENOENT);
		} else if (rc < 0) {
			fail_msg("%s %s: %d %s", variant, r->t[2].p, rc, btrfsimg_errmsg(fs));
		} else {
			assert_int_equal(d.target_objectid, dx_u64(&r->t[3]));
			assert_int_equal(d.kind == BTRFSIMG_TARGET_STUB, r->t[4].p[0] == '-');
			if (d.kind == BTRFSIMG_TARGET_STUB)
				assert_int_equal(d.target_subvol, 5);
		}
		checked++;
	}
	btrfsimg_fs_free(fs);
	while (n--)
		x->img[off[n]] = saved[n];
	assert_int_equal(checked, 2);
}

static void test_damaged_subvol_refs(void **state)
{
	check_craft(*state, "refs0");
	check_craft(*state, "noitem");
	check_craft(*state, "dirid");
	check_craft(*state, "name");
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
		cmocka_unit_test(test_entry_fields),
		cmocka_unit_test(test_collision_chain),
		cmocka_unit_test(test_bad_entries),
		cmocka_unit_test(test_xattr_entries),
		cmocka_unit_test(test_root_ref),
	};
	const struct CMUnitTest image[] = {
		cmocka_unit_test(test_readdir_lookup),
		cmocka_unit_test(test_path_lookup),
		cmocka_unit_test(test_dots_and_stubs),
		cmocka_unit_test(test_collision_lookup),
		cmocka_unit_test(test_damaged_subvol_refs),
	};
	int rc = cmocka_run_group_tests_name("dir items", pure, NULL, NULL);
	return rc | cmocka_run_group_tests_name("dir image", image, setup, teardown);
}
