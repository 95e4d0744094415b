/* SPDX-License-Identifier: MIT */
/*
 * Who owns a byte range: device -> logical (the chunk map in reverse),
 * logical -> extent items (extent tree, 2) -> back references -> the
 * inodes whose EXTENT_DATA items point into the range, in every
 * subvolume, with a path from the top level.
 *
 * The extent tree keys data and metadata by logical start:
 *
 *   (B, EXTENT_ITEM 168, length)   refs u64, generation u64, flags u64
 *                                  (DATA 1, TREE_BLOCK 2), [tree_block_info
 *                                  18 bytes for non-skinny tree blocks],
 *                                  then inline refs: type u8 and
 *       TREE_BLOCK_REF 176 root u64 | SHARED_BLOCK_REF 182 parent u64 |
 *       EXTENT_DATA_REF 178 root, objectid, offset u64, count u32 |
 *       SHARED_DATA_REF 184 parent u64, count u32 | EXTENT_OWNER_REF 172 root
 *   (B, METADATA_ITEM 169, level)  skinny tree block, same body, no info
 *   (B, 176 root) (B, 182 parent) (B, 178 hash: the data ref's 28 bytes)
 *   (B, 184 parent: count u32)     keyed refs, right after their item.
 *
 * An EXTENT_DATA_REF names (root, inode, file offset of the extent's
 * start) as of when it was written; a snapshot shares the leaf instead of
 * adding a ref, and a SHARED_DATA_REF names a leaf, not a root. So each
 * reference gives an inode number and where its items start, and every
 * subvolume is asked whether that inode has items pointing into the
 * range: inode numbers survive snapshots, and a reflink to another inode
 * adds its own reference. What is reported was found in a live tree;
 * nothing is inferred.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
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
#include "files/extent.h"

#define KT_TREE_BLOCK_REF 176
#define KT_EXTENT_DATA_REF 178
#define KT_SHARED_BLOCK_REF 182
#define KT_SHARED_DATA_REF 184
#define KT_EXTENT_OWNER_REF 172
#define EXTENT_FLAG_DATA 1ull
#define EXTENT_FLAG_TREE_BLOCK 2ull
#define MAX_EXTENT (128ull << 20)	/* BTRFS_MAX_EXTENT_SIZE: a data extent's most */
#define MAX_REFS 4096			/* references followed per extent */
#define PATH_DEPTH 4096

/* One reference: an inode and where its items' file offsets start. */
struct ref {
	uint64_t root, ino, offset;
};

struct owners {
	struct btrfsimg_fs *fs;
	btrfsimg_owner_fn fn;
	void *ctx;
	struct btrfsimg_subvol *subvols;
	size_t nsubvols;
	bool has_device;
	uint64_t devid, physical, base; /* physical of logical @base */
	/* the extent being gathered */
	bool have;
	struct btrfsimg_owner ext;
	bool data;
	struct ref *refs;
	size_t nrefs, refcap;
	uint64_t *parents;	/* SHARED_DATA_REF leaves */
	size_t nparents, parcap;
	bool found;		/* a FILE record was given for it */
	char *path;
	size_t pathcap;
};

const char *btrfsimg_owner_kind_name(int kind)
{
	static const char *const names[] = { "file",   "extent",   "tree-block", "free",
					     "parity", "unmapped", "recovered" };
	return kind >= 0 && kind < (int)(sizeof(names) / sizeof(names[0])) ? names[kind] : NULL;
}

static int emit(struct owners *o, struct btrfsimg_owner *r)
{
	r->has_device = o->has_device;
	if (o->has_device) {
		r->devid = o->devid;
		r->physical = o->physical + (r->logical - o->base);
	}
	return o->fn(o->ctx, r);
}

/* ---------------------------------------------------------------- paths */

static int grow(struct owners *o, size_t need)
{
	if (bi_grow((void **)&o->path, &o->pathcap, need, 1))
		return bi_err(o->fs, -ENOMEM, "out of memory for a path");
	return 0;
}

struct first_name {
	uint64_t parent;
	char name[256];
	bool got;
};

static int take_first(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name,
		      size_t len)
{
	(void)index;
	struct first_name *f = ctx;
	f->parent = parent;
	snprintf(f->name, sizeof(f->name), "%.*s", (int)(len < 255 ? len : 255), name);
	f->got = true;
	return 1;
}

/* Prepend "/name" to o->path, which holds the @len bytes after @at. */
static int prepend(struct owners *o, size_t *at, const char *name)
{
	size_t n = strlen(name) + 1;
	if (n > *at)
		return -ENAMETOOLONG;
	*at -= n;
	o->path[*at] = '/';
	memcpy(o->path + *at + 1, name, n - 1);
	return 0;
}

/* The path of @ino in @subvol from the top level, into o->path: the
 * subvolume's own path, then first names up to its root directory. */
static int path_of(struct owners *o, uint64_t subvol, uint64_t ino)
{
	const size_t cap = 65536;
	int rc = grow(o, cap);
	if (rc < 0)
		return rc;
	size_t at = cap - 1;
	o->path[at] = '\0';
	for (int depth = 0; ino != 256 && depth < PATH_DEPTH; depth++) {
		struct first_name f = { 0 };
		rc = btrfsimg_inode_names(o->fs, subvol, ino, take_first, &f);
		if (rc < 0 || !f.got || f.parent == ino) {
			char tag[64];
			snprintf(tag, sizeof(tag), "<%" PRIu64 ":%" PRIu64 ">", subvol, ino);
			rc = prepend(o, &at, tag);
			ino = 256;
			break;
		}
		if ((rc = prepend(o, &at, f.name)) < 0)
			break;
		ino = f.parent;
	}
	const struct btrfsimg_subvol *s = btrfsimg_subvol_find(o->subvols, o->nsubvols, subvol);
	char tag[40];
	snprintf(tag, sizeof(tag), "<%" PRIu64 ">", subvol);
	const char *sp = s && s->path ? s->path : tag;
	size_t n = strlen(sp);
	if (rc == 0 && n <= at) {
		at -= n;
		memcpy(o->path + at, sp, n);
	}
	memmove(o->path, o->path + at + (o->path[at] == '/'), cap - at - (o->path[at] == '/'));
	return 0;
}

/* ------------------------------------------------------------- files */

/* Report the items of inode @ino in @subvol that point into extent ext at
 * [lo, hi). Items referring to the extent start at @ref_off or later
 * (key offset = ref offset + the item's offset into the extent, below
 * MAX_EXTENT). An inode that is not there is no owner, not an error. */
static int file_items(struct owners *o, uint64_t subvol, uint64_t ino, uint64_t ref_off,
		      uint64_t lo, uint64_t hi)
{
	struct bi_file *f;
	uint64_t bytenr = o->ext.extent_bytenr;
	if (bi_file_open(o->fs, subvol, ino, &f) < 0)
		return 0;
	uint64_t pos = ref_off, stop = ref_off > UINT64_MAX - MAX_EXTENT ? UINT64_MAX
								    : ref_off + MAX_EXTENT;
	int rc = 0;
	while (rc == 0 && pos < stop) {
		const struct bi_extent *e;
		uint64_t next;
		if (bi_file_extent_at(f, pos, &e, &next) < 0 || !e || e->file_offset >= stop)
			break;
		uint64_t vis_end = e->end < next ? e->end : next;
		if (e->type != FE_TYPE_INLINE && e->disk_bytenr == bytenr && vis_end > e->file_offset) {
			struct btrfsimg_owner r = o->ext;
			uint64_t a, b;
			if (e->compression) {
				a = lo;
				b = hi;
				r.file_offset = e->file_offset;
				r.file_length = vis_end - e->file_offset;
			} else {
				uint64_t s = bytenr + e->offset, t = s + (vis_end - e->file_offset);
				a = lo > s ? lo : s;
				b = hi < t ? hi : t;
				r.file_offset = e->file_offset + (a - s);
				r.file_length = b > a ? b - a : 0;
			}
			if (b > a) {
				r.kind = BTRFSIMG_OWNER_FILE;
				r.logical = a;
				r.length = b - a;
				r.subvol = subvol;
				r.objectid = ino;
				r.extent_type = e->type == FE_TYPE_PREALLOC ? BTRFSIMG_EXTENT_PREALLOC
									    : BTRFSIMG_EXTENT_REGULAR;
				r.compression = e->compression;
				r.item_generation = e->generation;
				if ((rc = path_of(o, subvol, ino)) == 0) {
					r.path = o->path;
					rc = emit(o, &r);
				}
				o->found = true;
			}
		}
		pos = vis_end > pos ? vis_end : pos + 1;
	}
	bi_file_close(f);
	return rc;
}

static bool ref_seen(const struct ref *v, size_t n, uint64_t ino, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].ino == ino && v[i].offset == off)
			return true;
	return false;
}

/* Each distinct (inode, offset) the references give, asked of every
 * subvolume (and of the reference's own root if it is none of them). */
static int resolve_refs(struct owners *o, uint64_t lo, uint64_t hi)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < o->nrefs; i++) {
		const struct ref *r = &o->refs[i];
		if (ref_seen(o->refs, i, r->ino, r->offset))
			continue;
		bool own = false;
		for (size_t s = 0; rc == 0 && s < o->nsubvols; s++) {
			own |= o->subvols[s].id == r->root;
			rc = file_items(o, o->subvols[s].id, r->ino, r->offset, lo, hi);
		}
		if (rc == 0 && !own && r->root)
			rc = file_items(o, r->root, r->ino, r->offset, lo, hi);
	}
	return rc;
}

static int add_ref(struct owners *o, uint64_t root, uint64_t ino, uint64_t off)
{
	if (o->nrefs >= MAX_REFS)
		return 0; /* said once, when the extent is flushed */
	if (bi_grow((void **)&o->refs, &o->refcap, o->nrefs + 1, sizeof(*o->refs)))
		return bi_err(o->fs, -ENOMEM, "out of memory for back references");
	o->refs[o->nrefs++] = (struct ref){ root, ino, off };
	return 0;
}

static int add_parent(struct owners *o, uint64_t leaf)
{
	if (o->nparents >= MAX_REFS)
		return 0;
	if (bi_grow((void **)&o->parents, &o->parcap, o->nparents + 1, sizeof(*o->parents)))
		return bi_err(o->fs, -ENOMEM, "out of memory for back references");
	o->parents[o->nparents++] = leaf;
	return 0;
}

/* A SHARED_DATA_REF's leaf: its items pointing at the extent give refs. */
static int shared_leaf(struct owners *o, uint64_t leaf)
{
	struct bi_expect e = { 0, 0, 0, NULL };
	struct bi_block *b;
	if (bi_block_read(o->fs, leaf, &e, &b) < 0) {
		bi_damage(o->fs, "owner: extent %" PRIu64 ": shared data ref leaf %" PRIu64
			  " unreadable: %s", o->ext.extent_bytenr, leaf, btrfsimg_errmsg(o->fs));
		return 0;
	}
	int rc = 0;
	for (uint32_t s = 0; rc == 0 && s < b->nritems; s++) {
		bi_key k;
		const uint8_t *data;
		uint32_t size;
		struct bi_extent x;
		char why[160];
		bi_leaf_item(b, s, &k, &data, &size);
		if (k.type != KT_EXTENT_DATA ||
		    bi_extent_parse(data, size, k.offset, o->fs->sectorsize, &x, why, sizeof(why)) < 0)
			continue;
		if (x.type != FE_TYPE_INLINE && x.disk_bytenr == o->ext.extent_bytenr)
			rc = add_ref(o, b->owner, k.objectid, k.offset - x.offset);
	}
	bi_block_put(o->fs, b);
	return rc;
}

/* ------------------------------------------------------- extent items */

/* Inline refs after the item's 24 bytes (and tree_block_info). */
static int inline_refs(struct owners *o, struct bi_cur *c, size_t at, const struct bi_item *it)
{
	int rc = 0;
	while (rc == 0 && at < c->len) {
		uint8_t type = bi_u8(c, at);
		if (type == KT_EXTENT_DATA_REF) {
			rc = add_ref(o, bi_u64(c, at + 1), bi_u64(c, at + 9), bi_u64(c, at + 17));
			at += 1 + 28;
		} else if (type == KT_SHARED_DATA_REF) {
			rc = add_parent(o, bi_u64(c, at + 1));
			at += 1 + 12;
		} else if (type == KT_TREE_BLOCK_REF) {
			if (!o->ext.tree_root)
				o->ext.tree_root = bi_u64(c, at + 1);
			at += 9;
		} else if (type == KT_SHARED_BLOCK_REF || type == KT_EXTENT_OWNER_REF) {
			at += 9;
		} else {
			return bi_item_err(o->fs, -EUCLEAN, "leaf", OBJ_EXTENT_TREE, it->block,
					   it->slot, "extent %" PRIu64 ": inline ref of type %u at"
					   " byte %zu, expect 172, 176, 178, 182 or 184",
					   it->key.objectid, type, at);
		}
		if (c->bad)
			return bi_item_err(o->fs, -EUCLEAN, "leaf", OBJ_EXTENT_TREE, it->block,
					   it->slot, "extent %" PRIu64 ": inline ref past the item's"
					   " %zu bytes", it->key.objectid, c->len);
	}
	return rc;
}

static int start_extent(struct owners *o, const struct bi_item *it)
{
	struct bi_cur c = bi_cur_make(it->data, it->size);
	bool skinny = it->key.type == KT_METADATA_ITEM;
	memset(&o->ext, 0, sizeof(o->ext));
	o->have = true;
	o->found = false;
	o->nrefs = o->nparents = 0;
	o->ext.extent_bytenr = it->key.objectid;
	o->ext.extent_bytes = skinny ? o->fs->nodesize : it->key.offset;
	o->ext.extent_generation = bi_u64(&c, 8);
	uint64_t flags = bi_u64(&c, 16);
	if (c.bad)
		return bi_item_err(o->fs, -EUCLEAN, "leaf", OBJ_EXTENT_TREE, it->block, it->slot,
				   "extent item %" PRIu64 " of %u bytes, expect >= 24",
				   it->key.objectid, it->size);
	o->data = (flags & EXTENT_FLAG_DATA) && !skinny;
	size_t at = 24 + ((flags & EXTENT_FLAG_TREE_BLOCK) && !skinny ? 18 : 0);
	return inline_refs(o, &c, at, it);
}

static int keyed_ref(struct owners *o, const struct bi_item *it)
{
	struct bi_cur c = bi_cur_make(it->data, it->size);
	int rc = 0;
	if (it->key.type == KT_EXTENT_DATA_REF)
		rc = add_ref(o, bi_u64(&c, 0), bi_u64(&c, 8), bi_u64(&c, 16));
	else if (it->key.type == KT_SHARED_DATA_REF)
		rc = add_parent(o, it->key.offset);
	else if (it->key.type == KT_TREE_BLOCK_REF && !o->ext.tree_root)
		o->ext.tree_root = it->key.offset;
	if (rc == 0 && c.bad)
		rc = bi_item_err(o->fs, -EUCLEAN, "leaf", OBJ_EXTENT_TREE, it->block, it->slot,
				 "extent data ref of %u bytes, expect 28", it->size);
	return rc;
}

/* Report the gathered extent's part of [lo, hi). */
static int flush(struct owners *o, uint64_t lo, uint64_t hi)
{
	o->have = false;
	struct btrfsimg_owner *x = &o->ext;
	uint64_t a = lo > x->extent_bytenr ? lo : x->extent_bytenr;
	uint64_t end = x->extent_bytenr + x->extent_bytes, b = hi < end ? hi : end;
	if (end < x->extent_bytenr || b <= a)
		return 0;
	x->logical = a;
	x->length = b - a;
	if (!o->data) {
		x->kind = BTRFSIMG_OWNER_TREE_BLOCK;
		struct btrfsimg_owner r = *x;
		return emit(o, &r);
	}
	if (o->nrefs >= MAX_REFS || o->nparents >= MAX_REFS)
		bi_damage(o->fs, "owner: extent %" PRIu64 " has more than %d references;"
			  " the first %d followed", x->extent_bytenr, MAX_REFS, MAX_REFS);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < o->nparents; i++)
		rc = shared_leaf(o, o->parents[i]);
	if (rc == 0)
		rc = resolve_refs(o, a, b);
	if (rc == 0 && !o->found) {
		struct btrfsimg_owner r = *x;
		r.kind = BTRFSIMG_OWNER_EXTENT;
		if (o->nrefs) {
			r.subvol = o->refs[0].root;
			r.objectid = o->refs[0].ino;
			r.file_offset = o->refs[0].offset;
		}
		rc = emit(o, &r);
	}
	return rc;
}

static int free_part(struct owners *o, uint64_t a, uint64_t b)
{
	if (b <= a)
		return 0;
	struct btrfsimg_owner r = { .kind = BTRFSIMG_OWNER_FREE, .logical = a, .length = b - a };
	return emit(o, &r);
}

/* The start of the last extent item at or before @l (or @floor). One
 * path down per step; a step skips a whole extent's keyed refs. */
static int extent_floor(struct owners *o, const struct bi_root *root, uint64_t l,
			uint64_t floor, uint64_t *out)
{
	bi_key max = { l, 255, UINT64_MAX }, k;
	*out = floor;
	for (int step = 0; step < 64; step++) {
		int rc = bi_tree_last(o->fs, root, &max, &k);
		if (rc == -ENOENT)
			return 0;
		if (rc < 0)
			return rc;
		if (k.objectid < floor)
			return 0;
		if (k.type == KT_EXTENT_ITEM || k.type == KT_METADATA_ITEM) {
			*out = k.objectid;
			return 0;
		}
		max = k.type > KT_METADATA_ITEM
			      ? (bi_key){ k.objectid, KT_METADATA_ITEM, UINT64_MAX }
			      : (bi_key){ k.objectid - 1, 255, UINT64_MAX };
		if (k.objectid == 0)
			return 0;
	}
	return 0;
}

/* Logical [lo, hi) inside chunk @c. */
static int chunk_part(struct owners *o, const struct bi_chunk *c, uint64_t lo, uint64_t hi)
{
	struct bi_root root;
	int rc = bi_root_find(o->fs, OBJ_EXTENT_TREE, &root);
	if (rc < 0)
		return rc;
	uint64_t from;
	if ((rc = extent_floor(o, &root, lo, c->logical, &from)) < 0)
		return rc;
	bi_key min = { from, 0, 0 }, max = { hi - 1, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint64_t pos = lo;
	o->have = false;
	rc = bi_iter_start(o->fs, &it, &root, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		bool ext = item.key.type == KT_EXTENT_ITEM || item.key.type == KT_METADATA_ITEM;
		if (o->have && (ext || item.key.objectid != o->ext.extent_bytenr)) {
			uint64_t end = o->ext.extent_bytenr + o->ext.extent_bytes;
			if ((rc = flush(o, lo, hi)) < 0)
				break;
			pos = end > pos ? end : pos;
		}
		if (ext) {
			uint64_t len = item.key.type == KT_METADATA_ITEM ? o->fs->nodesize
									 : item.key.offset;
			if (item.key.objectid + len <= lo)
				continue;
			if (item.key.objectid > pos && (rc = free_part(o, pos, item.key.objectid)) < 0)
				break;
			rc = start_extent(o, &item);
		} else if (o->have && item.key.objectid == o->ext.extent_bytenr) {
			rc = keyed_ref(o, &item);
		}
	}
	bi_iter_end(&it);
	if (rc == 0 && o->have) {
		uint64_t end = o->ext.extent_bytenr + o->ext.extent_bytes;
		rc = flush(o, lo, hi);
		pos = end > pos ? end : pos;
	}
	if (rc == 0 && pos < hi)
		rc = free_part(o, pos, hi);
	return rc;
}

/* The first chunk starting after @l, or NULL. */
static const struct bi_chunk *chunk_after(const struct bi_chunk_map *m, uint64_t l)
{
	const struct bi_chunk *best = NULL;
	for (size_t i = 0; i < bi_chunk_map_count(m); i++) {
		const struct bi_chunk *c = bi_chunk_map_at(m, i);
		if (c->logical > l && (!best || c->logical < best->logical))
			best = c;
	}
	return best;
}

static int logical_range(struct owners *o, uint64_t l, uint64_t end)
{
	int rc = 0;
	while (rc == 0 && l < end) {
		const struct bi_chunk *c = bi_chunk_lookup(o->fs->chunks, l);
		if (!c) {
			const struct bi_chunk *n = chunk_after(o->fs->chunks, l);
			uint64_t stop = n && n->logical < end ? n->logical : end;
			struct btrfsimg_owner r = { .kind = BTRFSIMG_OWNER_UNMAPPED, .logical = l,
						    .length = stop - l };
			rc = emit(o, &r);
			l = stop;
			continue;
		}
		uint64_t cend = c->logical + c->length, stop = cend < end ? cend : end;
		rc = chunk_part(o, c, l, stop);
		l = stop;
	}
	return rc;
}

static int owners_begin(struct owners *o, struct btrfsimg_fs *fs, btrfsimg_owner_fn fn,
			void *ctx)
{
	memset(o, 0, sizeof(*o));
	o->fs = fs;
	o->fn = fn;
	o->ctx = ctx;
	return btrfsimg_subvols(fs, &o->subvols, &o->nsubvols);
}

static void owners_end(struct owners *o)
{
	btrfsimg_subvols_free(o->subvols, o->nsubvols);
	free(o->refs);
	free(o->parents);
	free(o->path);
}

static int check_args(struct btrfsimg_fs *fs, uint64_t start, uint64_t len, btrfsimg_owner_fn fn,
		      const char *what)
{
	uint64_t end;
	if (!fs || !fn || !bi_opened(fs, what))
		return -EINVAL;
	if (len == 0 || !bi_add_ok(start, len, &end))
		return bi_err(fs, -EINVAL, "%s: range of %" PRIu64 " bytes at %" PRIu64
			      " is empty or wraps around", what, len, start);
	return 0;
}

int btrfsimg_owners_logical(btrfsimg_fs *fs, uint64_t logical, uint64_t len,
			    btrfsimg_owner_fn fn, void *ctx)
{
	int rc = check_args(fs, logical, len, fn, "owners");
	if (rc < 0)
		return rc;
	struct owners o;
	if ((rc = owners_begin(&o, fs, fn, ctx)) == 0)
		rc = logical_range(&o, logical, logical + len);
	owners_end(&o);
	return rc;
}

/* The chunk and stripe of device @devid holding @physical; else *next the
 * start of the next stripe on the device (UINT64_MAX: none). */
static const struct bi_chunk *stripe_at(struct btrfsimg_fs *fs, uint64_t devid,
					uint64_t physical, uint32_t *idx, uint64_t *next,
					bool *known)
{
	*next = UINT64_MAX;
	for (size_t i = 0; i < bi_chunk_map_count(fs->chunks); i++) {
		const struct bi_chunk *c = bi_chunk_map_at(fs->chunks, i);
		for (uint32_t s = 0; s < c->num_stripes; s++) {
			if (c->stripes[s].devid != devid)
				continue;
			*known = true;
			uint64_t l, n;
			if (bi_chunk_map_reverse(c, s, physical, &l, &n) >= 0) {
				*idx = s;
				return c;
			}
			if (c->stripes[s].offset > physical && c->stripes[s].offset < *next)
				*next = c->stripes[s].offset;
		}
	}
	return NULL;
}

static int device_range(struct owners *o, uint64_t devid, uint64_t p, uint64_t end)
{
	int rc = 0;
	bool known = bi_dev_by_id(o->fs, devid) != NULL;
	o->has_device = true;
	o->devid = devid;
	while (rc == 0 && p < end) {
		uint32_t idx = 0;
		uint64_t next, l = 0, n = 0;
		const struct bi_chunk *c = stripe_at(o->fs, devid, p, &idx, &next, &known);
		if (!known)
			return bi_err(o->fs, -ENOENT, "no device %" PRIu64
				      " (neither supplied nor in a chunk's stripes)", devid);
		if (!c) {
			uint64_t stop = next < end ? next : end;
			struct btrfsimg_owner r = { .kind = BTRFSIMG_OWNER_UNMAPPED, .length = stop - p,
						    .has_device = true, .devid = devid, .physical = p };
			rc = o->fn(o->ctx, &r);
			p = stop;
			continue;
		}
		int par = bi_chunk_map_reverse(c, idx, p, &l, &n);
		uint64_t take = n < end - p ? n : end - p;
		if (par == 1) {
			struct btrfsimg_owner r = { .kind = BTRFSIMG_OWNER_PARITY, .logical = l,
						    .length = n, .has_device = true, .devid = devid,
						    .physical = p };
			rc = o->fn(o->ctx, &r);
			uint64_t so = (p - c->stripes[idx].offset) % c->stripe_len;
			take = c->stripe_len - so < end - p ? c->stripe_len - so : end - p;
		} else {
			o->physical = p;
			o->base = l;
			rc = logical_range(o, l, l + take);
		}
		p += take ? take : 1;
	}
	return rc;
}

int btrfsimg_owners_device(btrfsimg_fs *fs, uint64_t devid, uint64_t physical, uint64_t len,
			   btrfsimg_owner_fn fn, void *ctx)
{
	int rc = check_args(fs, physical, len, fn, "owners");
	if (rc < 0)
		return rc;
	struct owners o;
	if ((rc = owners_begin(&o, fs, fn, ctx)) == 0)
		rc = device_range(&o, devid, physical, physical + len);
	owners_end(&o);
	return rc;
}

int btrfsimg_owners_image(btrfsimg_fs *fs, const char *image, uint64_t offset, uint64_t len,
			  btrfsimg_owner_fn fn, void *ctx)
{
	int rc = check_args(fs, offset, len, fn, "owners");
	if (rc < 0)
		return rc;
	const struct bi_dev *d = NULL;
	size_t members = 0;
	for (size_t i = 0; i < fs->ndevs; i++) {
		const struct bi_dev *x = &fs->devs[i];
		if (!x->member)
			continue;
		members++;
		if (image ? strcmp(x->name, image) == 0 : members == 1)
			d = x;
	}
	if (!d || (!image && members != 1))
		return bi_err(fs, -ENOENT, "%s", image ? "no device was added by that name"
						: "several devices: name the image");
	if (d->vol)
		return bi_err(fs, -EOPNOTSUPP, "image '%s': btrfs lies under LUKS or LVM"
			      " there, so an image offset has no linear way back; ask by device"
			      " (devid %" PRIu64 ") instead", d->name, d->devid);
	if (offset < d->base || offset - d->base >= d->size)
		return bi_err(fs, -ENOENT, "image '%s' offset %" PRIu64 " is outside the"
			      " filesystem (bytes %" PRIu64 " to %" PRIu64 ")", d->name, offset,
			      d->base, d->base + d->size);
	uint64_t n = d->size - (offset - d->base) < len ? d->size - (offset - d->base) : len;
	return btrfsimg_owners_device(fs, d->devid, offset - d->base, n, fn, ctx);
}
