// SPDX-License-Identifier: MIT
/*
 * Root items, root refs and backrefs, through what reads them: bi_root_find
 * (ROOT_ITEM -> tree location), btrfsimg_subvols (ROOT_ITEM, ROOT_BACKREF,
 * ORPHAN_ITEM, then the path walk through the fs tree), bi_dir_resolve
 * (ROOT_REF, then the child's ROOT_ITEMs), btrfsimg_default_subvol and
 * bi_root_ref_parse. The input describes a root tree leaf and one fs tree
 * leaf, built into an in-memory handle (16 KiB nodes, crc32c, blocks at
 * logical 16384 and 32768 of one single-profile chunk):
 *
 *   bytes 0-7  generation of both blocks (le64)
 *   records to the end, each:
 *     u8  bit 0: 0 the root tree, 1 the fs tree
 *     u8  objectid: < 240: 256 + v; 240 ORPHAN (-5); 241..251: v - 240
 *         (1..11); 252 TREE_LOG (-6); 253 TREE_RELOC (-8); 254 LAST_FREE;
 *         255: a u64 follows
 *     u8  key type
 *     u8  n (0..8), then n bytes of the key offset (little-endian)
 *     u16 item size (capped to what is left), then the item
 *
 * Keys are sorted, duplicates dropped (the first wins), items that do not
 * fit the leaf dropped. Every answer is compared with a reference computed
 * here from the items (the first ROOT_ITEM of a tree locates it; a short
 * root item or an empty or overlong backref name is corrupt; ORPHAN or
 * refs 0 marks deleted; v2 fields only when generation_v2 matches; the
 * default is the "default" DIR_ITEM of directory 6, else 5; a ROOT_REF
 * whose dirid and name match makes an entry reach the child's root
 * directory when the child's last ROOT_ITEM has refs > 0, else a stub).
 * Seeds: the root trees of the committed images (gen_struct_seeds.py).
 */
#include <stdlib.h>
#include <string.h>

#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "image/dev.h"
#include "btrfs/tree_checker.h"
#include "btrfs/chunk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "files/dir.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define NODESIZE 16384u
#define MAX_ITEMS ((NODESIZE - HDR_SIZE) / ITEM_SIZE)
#define ROOT_BLOCK 16384u
#define FS_BLOCK 32768u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct it {
	bi_key key;
	const uint8_t *data;
	uint32_t size;
	size_t idx;
};

struct leaf {
	struct it v[MAX_ITEMS];
	size_t n;
};

static const uint8_t fsid[16] = "fuzz_rootitem!!";

static bool take(const uint8_t **p, const uint8_t *end, size_t n)
{
	if ((size_t)(end - *p) < n)
		return false;
	*p += n;
	return true;
}

static uint64_t objectid(uint8_t v, const uint8_t **p, const uint8_t *end, bool *ok)
{
	static const uint64_t special[] = { (uint64_t)-6, (uint64_t)-8, OBJ_LAST_FREE };
	if (v < 240)
		return 256 + v;
	if (v == 240)
		return OBJ_ORPHAN;
	if (v < 252)
		return v - 240u;
	if (v < 255)
		return special[v - 252];
	const uint8_t *q = *p;
	*ok = take(p, end, 8);
	return *ok ? bi_le64(q) : 0;
}

static int it_cmp(const void *a, const void *b)
{
	const struct it *x = a, *y = b;
	int c = bi_key_cmp(&x->key, &y->key);
	return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sort, drop repeated keys, keep what fits one leaf. */
static void finish(struct leaf *l)
{
	qsort(l->v, l->n, sizeof(l->v[0]), it_cmp);
	size_t out = 0, used = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (out && !bi_key_cmp(&l->v[out - 1].key, &l->v[i].key))
			continue;
		if (HDR_SIZE + (out + 1) * ITEM_SIZE + used + l->v[i].size > NODESIZE)
			break;
		used += l->v[i].size;
		l->v[out++] = l->v[i];
	}
	l->n = out;
}

static bool parse(const uint8_t *d, size_t size, struct leaf l[2])
{
	const uint8_t *p = d + 8, *end = d + size;
	l[0].n = l[1].n = 0;
	for (size_t idx = 0; p < end; idx++) {
		const uint8_t *h = p;
		bool ok = true;
		if (!take(&p, end, 3))
			break;
		struct it t = { .idx = idx };
		t.key.objectid = objectid(h[1], &p, end, &ok);
		t.key.type = h[2];
		const uint8_t *nb = p;
		if (!ok || !take(&p, end, 1) || *nb > 8 || !take(&p, end, *nb))
			break;
		for (int k = 0; k < *nb; k++)
			t.key.offset |= (uint64_t)nb[1 + k] << (8 * k);
		const uint8_t *sz = p;
		if (!take(&p, end, 2))
			break;
		t.size = bi_le16(sz);
		if (t.size > (size_t)(end - p))
			t.size = (uint32_t)(end - p);
		t.data = p;
		p += t.size;
		struct leaf *lf = &l[h[0] & 1];
		if (lf->n == MAX_ITEMS)
			return false;
		lf->v[lf->n++] = t;
	}
	finish(&l[0]);
	finish(&l[1]);
	return true;
}

static void build_leaf(uint8_t *blk, const struct leaf *l, uint64_t bytenr, uint64_t gen,
		       uint64_t owner)
{
	memset(blk, 0, NODESIZE);
	memcpy(blk + HDR_FSID, fsid, 16);
	bi_put_le64(blk + HDR_BYTENR, bytenr);
	bi_put_le64(blk + HDR_GENERATION, gen);
	bi_put_le64(blk + HDR_OWNER, owner);
	bi_put_le32(blk + HDR_NRITEMS, (uint32_t)l->n);
	uint32_t off = NODESIZE - HDR_SIZE;
	for (size_t i = 0; i < l->n; i++) {
		uint8_t *e = blk + HDR_SIZE + i * ITEM_SIZE;
		off -= l->v[i].size;
		bi_put_le64(e, l->v[i].key.objectid);
		e[8] = l->v[i].key.type;
		bi_put_le64(e + 9, l->v[i].key.offset);
		bi_put_le32(e + ITEM_OFFSET, off);
		bi_put_le32(e + ITEM_DSIZE, l->v[i].size);
		memcpy(blk + HDR_SIZE + off, l->v[i].data, l->v[i].size);
	}
	bi_csum(CSUM_TYPE_CRC32C, blk + HDR_FSID, NODESIZE - HDR_FSID, blk);
}

static struct btrfsimg_fs *mem_fs(const struct leaf l[2], uint64_t gen)
{
	static uint8_t dev[4 * NODESIZE];
	struct btrfsimg_fs *fs;
	if (btrfsimg_fs_new(&fs, NULL))
		return NULL;
	memset(dev, 0, sizeof(dev));
	build_leaf(dev + ROOT_BLOCK, &l[0], ROOT_BLOCK, gen, OBJ_ROOT_TREE);
	build_leaf(dev + FS_BLOCK, &l[1], FS_BLOCK, gen, OBJ_FS_TREE);
	char why[256];
	struct bi_chunk *c = calloc(1, sizeof(*c) + sizeof(c->stripes[0]));
	fs->chunks = bi_chunk_map_new();
	fs->cache = bi_cache_new(1 << 20);
	if (c) {
		*c = (struct bi_chunk){ 0, sizeof(dev), BG_METADATA, 65536, 1, 1 };
		c->stripes[0] = (struct bi_stripe){ 1, 0, { 0 } };
	}
	if (!fs->chunks || !fs->cache || !c || bi_chunk_map_insert(fs->chunks, c, why, sizeof(why)) ||
	    btrfsimg_add_device_mem(fs, dev, sizeof(dev), NULL)) {
		btrfsimg_fs_free(fs);
		return NULL;
	}
	fs->devs[0].member = true;
	fs->devs[0].devid = 1;
	fs->nodesize = NODESIZE;
	fs->sectorsize = 4096;
	fs->csum_type = CSUM_TYPE_CRC32C;
	fs->csum_size = 4;
	memcpy(fs->meta_fsid, fsid, 16);
	fs->root_tree = (struct bi_root){ OBJ_ROOT_TREE, ROOT_BLOCK, gen, 0 };
	fs->opened = true;
	return fs;
}

/* ---------------------------------------------------------- reference */

static bool is_fs_tree(uint64_t id)
{
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE);
}

static const struct it *find(const struct leaf *l, uint64_t obj, uint8_t type, bool last)
{
	const struct it *r = NULL;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].key.objectid == obj && l->v[i].key.type == type) {
			r = &l->v[i];
			if (!last)
				break;
		}
	return r;
}

static bool ref_ok(const struct it *t)
{
	return t->size >= RR_SIZE && bi_le16(t->data + RR_NAME_LEN) <= t->size - RR_SIZE;
}

static void check_root_find(struct btrfsimg_fs *fs, const struct leaf *l, uint64_t id)
{
	if (id == OBJ_ROOT_TREE || id == OBJ_CHUNK_TREE || id == OBJ_TREE_LOG)
		return;
	struct bi_root r;
	int rc = bi_root_find(fs, id, &r);
	const struct it *t = find(l, id, KT_ROOT_ITEM, false);
	if (!t) {
		CHECK(rc == -ENOENT && fs->err[0]);
		return;
	}
	if (t->size < RI_SIZE_V1 || t->data[RI_LEVEL] >= MAX_LEVEL ||
	    !bi_le64(t->data + RI_BYTENR) || bi_le64(t->data + RI_BYTENR) % 4096) {
		CHECK(rc == -EUCLEAN && fs->err[0]);
		return;
	}
	CHECK(rc == 0 && r.id == id && r.bytenr == bi_le64(t->data + RI_BYTENR));
	CHECK(r.generation == bi_le64(t->data + RI_GENERATION) && r.level == t->data[RI_LEVEL]);
}

static void check_default(struct btrfsimg_fs *fs, const struct leaf *l)
{
	uint64_t id = 0;
	int rc = btrfsimg_default_subvol(fs, &id);
	const struct it *t = NULL;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].key.objectid == OBJ_ROOT_TREE_DIR && l->v[i].key.type == KT_DIR_ITEM &&
		    l->v[i].key.offset == bi_name_hash("default", 7))
			t = &l->v[i];
	if (!t)
		CHECK(rc == 0 && id == OBJ_FS_TREE);
	else if (t->size < DI_SIZE)
		CHECK(rc == -EUCLEAN);
	else
		CHECK(rc == 0 && id == bi_le64(t->data + DI_LOCATION));
}

/* What btrfsimg_subvols must list. Returns false if the items are corrupt
 * in a way the listing must refuse. */
static bool ref_subvols(const struct leaf *l, struct btrfsimg_subvol *v, size_t *n)
{
	static bool named[MAX_ITEMS];
	memset(named, 0, sizeof(named));
	*n = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct it *t = &l->v[i];
		struct btrfsimg_subvol *s = NULL;
		for (size_t j = 0; j < *n; j++)
			if (v[j].id == (t->key.type == KT_ORPHAN_ITEM ? t->key.offset : t->key.objectid))
				s = &v[j];
		if (t->key.objectid < OBJ_FS_TREE)
			continue;
		if (t->key.type == KT_ROOT_ITEM && is_fs_tree(t->key.objectid) && !s) {
			if (t->size < RI_SIZE_V1)
				return false;
			s = &v[(*n)++];
			memset(s, 0, sizeof(*s));
			s->id = t->key.objectid;
			s->generation = bi_le64(t->data + RI_GENERATION);
			s->flags = bi_le64(t->data + RI_FLAGS);
			s->bytenr = bi_le64(t->data + RI_BYTENR);
			s->level = t->data[RI_LEVEL];
			s->deleted = bi_le32(t->data + RI_REFS) == 0;
			if (t->size >= RI_SIZE &&
			    bi_le64(t->data + RI_GENERATION_V2) == s->generation) {
				memcpy(s->uuid, t->data + RI_UUID, 16);
				s->ctransid = bi_le64(t->data + RI_CTRANSID);
				s->cgen = bi_le64(t->data + RI_OTRANSID);
			}
		} else if (t->key.type == KT_ROOT_BACKREF && s && s->id != OBJ_FS_TREE) {
			/* the top level has no parent: its backrefs are ignored */
			if (!ref_ok(t) || bi_le16(t->data + RR_NAME_LEN) == 0)
				return false;
			if (!named[s - v]) { /* the first backref wins, even with parent 0 */
				named[s - v] = true;
				s->parent_id = t->key.offset;
				s->dirid = bi_le64(t->data + RR_DIRID);
			}
		} else if (t->key.type == KT_ORPHAN_ITEM && t->key.objectid == OBJ_ORPHAN && s) {
			s->deleted = true;
		}
	}
	return true;
}

static void check_subvols(struct btrfsimg_fs *fs, const struct leaf *l)
{
	static struct btrfsimg_subvol want[MAX_ITEMS];
	size_t nwant, n = 7;
	struct btrfsimg_subvol *v = (void *)1;
	bool ok = ref_subvols(l, want, &nwant);
	int rc = btrfsimg_subvols(fs, &v, &n);
	if (rc < 0) {
		CHECK(v == NULL && n == 0 && fs->err[0]);
		CHECK(rc == -EUCLEAN || rc == -ENOENT || rc == -EIO);
		CHECK(ok || rc == -EUCLEAN);
		return;
	}
	CHECK(ok && n == nwant);
	for (size_t i = 0; i < n; i++) {
		const struct btrfsimg_subvol *s = &v[i], *w = &want[i];
		CHECK(s->id == w->id && s->generation == w->generation && s->flags == w->flags);
		CHECK(s->bytenr == w->bytenr && s->level == w->level && s->deleted == w->deleted);
		CHECK(s->readonly == ((w->flags & ROOT_SUBVOL_RDONLY) != 0));
		CHECK(!memcmp(s->uuid, w->uuid, 16) && s->ctransid == w->ctransid &&
		      s->cgen == w->cgen);
		CHECK(s->parent_id == w->parent_id && s->dirid == w->dirid);
		if (s->id == OBJ_FS_TREE && i == 0)
			CHECK(s->path && !s->path[0]);
		if (s->path && s->id != OBJ_FS_TREE) {
			const struct btrfsimg_subvol *p = NULL;
			for (size_t j = 0; j < n; j++)
				if (v[j].id == s->parent_id)
					p = &v[j];
			CHECK(p && p->path && strlen(s->path) >= strlen(p->path));
		}
	}
	btrfsimg_subvols_free(v, n);
}

/* A directory entry named as ROOT_REF @t says, and one that differs. */
static void check_resolve(struct btrfsimg_fs *fs, const struct leaf *l, const struct it *t)
{
	struct bi_root_ref ref;
	char why[256] = "";
	int prc = bi_root_ref_parse(t->data, t->size, &ref, why, sizeof(why));
	CHECK(prc == (ref_ok(t) ? 0 : -EUCLEAN));
	if (prc < 0) {
		CHECK(why[0]);
		return;
	}
	CHECK(ref.dirid == bi_le64(t->data + RR_DIRID) && ref.name == t->data + RR_SIZE);
	CHECK(ref.sequence == bi_le64(t->data + RR_SEQUENCE) &&
	      ref.name_len == bi_le16(t->data + RR_NAME_LEN));
	if (t->key.type != KT_ROOT_REF)
		return;
	uint64_t child = t->key.offset;
	bool short_item = false;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].key.objectid == child && l->v[i].key.type == KT_ROOT_ITEM &&
		    l->v[i].size < RI_SIZE_V1)
			short_item = true;
	const struct it *last = find(l, child, KT_ROOT_ITEM, true);
	for (int miss = 0; miss < 2; miss++) {
		struct btrfsimg_dirent e = { .name = ref.name, .name_len = ref.name_len,
					     .location_objectid = child,
					     .location_type = KT_ROOT_ITEM };
		int rc = bi_dir_resolve(fs, t->key.objectid, ref.dirid + miss, &e);
		if (!miss && short_item) {
			CHECK(rc == -EUCLEAN && fs->err[0]);
			continue;
		}
		CHECK(rc == 0);
		if (!miss && last && bi_le32(last->data + RI_REFS) > 0) {
			CHECK(e.kind == BTRFSIMG_TARGET_SUBVOL && e.target_subvol == child);
			CHECK(e.target_objectid == bi_le64(last->data + RI_ROOT_DIRID));
		} else {
			CHECK(e.kind == BTRFSIMG_TARGET_STUB && e.target_subvol == t->key.objectid);
			CHECK(e.target_objectid == OBJ_EMPTY_SUBVOL_DIR);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct leaf l[2];
	if (size < 8 || size > 65536 || !parse(data, size, l))
		return 0;
	struct btrfsimg_fs *fs = mem_fs(l, bi_le64(data));
	if (!fs)
		return 0;
	check_subvols(fs, &l[0]);
	check_default(fs, &l[0]);
	check_root_find(fs, &l[0], OBJ_FS_TREE);
	check_root_find(fs, &l[0], OBJ_FIRST_FREE);
	int budget = 32;
	for (size_t i = 0; i < l[0].n && budget > 0; i++) {
		const struct it *t = &l[0].v[i];
		if (t->key.type == KT_ROOT_ITEM && (i == 0 || l[0].v[i - 1].key.objectid !=
							     t->key.objectid)) {
			check_root_find(fs, &l[0], t->key.objectid);
			budget--;
		} else if (t->key.type == KT_ROOT_REF || t->key.type == KT_ROOT_BACKREF) {
			check_resolve(fs, &l[0], t);
			budget--;
		}
	}
	btrfsimg_fs_free(fs);
	return 0;
}
