/* SPDX-License-Identifier: MIT */
/*
 * The root tree: where every other tree starts (ROOT_ITEM), how subvolumes
 * hang together (ROOT_REF / ROOT_BACKREF), which are deleted but not yet
 * cleaned (ORPHAN items, refs == 0), and the default subvolume (the
 * "default" DIR_ITEM in the root tree directory, objectid 6).
 *
 * A subvolume's path is its parent's path, then the path of the directory
 * holding it inside the parent (the INODE_REF chain up to that subvolume's
 * root directory, 256), then its own name from the ROOT_BACKREF. Chains are
 * bounded, so a corrupt loop is an error rather than a hang.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrfs/root.h"

#include "base/grow.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "btrfs/tree.h"

#define PATH_DEPTH_MAX 4096 /* directory levels; PATH_MAX allows ~2048 */

static bool is_fs_tree(uint64_t id)
{
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE);
}

/* Decode a ROOT_ITEM's location; checks the fields a reader relies on. */
static int root_from_item(struct btrfsimg_fs *fs, uint64_t id, const uint8_t *p, uint32_t size,
			  struct bi_root *out)
{
	if (size < RI_SIZE_V1)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root item: root=%" PRIu64 ", size %u expect >= %u", id, size,
			      RI_SIZE_V1);
	out->id = id;
	out->bytenr = bi_le64(p + RI_BYTENR);
	out->generation = bi_le64(p + RI_GENERATION);
	out->level = p[RI_LEVEL];
	if (out->level >= MAX_LEVEL)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root item: root=%" PRIu64 ", level %u expect < %d", id,
			      out->level, MAX_LEVEL);
	if (out->bytenr == 0 || out->bytenr % fs->sectorsize)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root item: root=%" PRIu64 ", bytenr %" PRIu64
			      " not aligned to %u",
			      id, out->bytenr, fs->sectorsize);
	return 0;
}

int bi_root_find(struct btrfsimg_fs *fs, uint64_t id, struct bi_root *out)
{
	if (id == OBJ_ROOT_TREE) {
		*out = fs->root_tree;
		return 0;
	}
	if (id == OBJ_CHUNK_TREE) {
		*out = fs->chunk_tree;
		return 0;
	}
	if (id == OBJ_TREE_LOG) {
		if (!fs->sb.info.log_root)
			return bi_err(fs, -ENOENT, "no log tree (superblock log_root is 0)");
		/* The log root is written one transaction after the last commit. */
		*out = (struct bi_root){ id, fs->sb.info.log_root, 0, fs->sb.info.log_root_level };
		return 0;
	}
	for (size_t i = 0; i < fs->nsalvage_roots; i++)
		if (fs->salvage_roots[i].id == id) { /* newer than the root tree's, verified */
			*out = fs->salvage_roots[i];
			return 0;
		}
	bi_key min = { id, KT_ROOT_ITEM, 0 }, max = { id, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc > 0)
		rc = root_from_item(fs, id, item.data, item.size, out);
	else if (rc == 0)
		rc = bi_err(fs, -ENOENT, "tree %" PRIu64 " not found in the root tree", id);
	bi_iter_end(&it);
	return rc;
}

/* ------------------------------------------------------------ subvolumes */

struct sv_list {
	struct btrfsimg_subvol *v;
	uint8_t *state; /* per entry: SV_TODO, SV_BUSY, SV_DONE */
	size_t n, cap;
};

const struct btrfsimg_subvol *btrfsimg_subvol_find(const struct btrfsimg_subvol *v, size_t n,
						   uint64_t id)
{
	size_t lo = 0, hi = v ? n : 0; /* ids arrive in ascending order */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].id == id)
			return &v[mid];
		if (v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct btrfsimg_subvol *sv_find(struct sv_list *l, uint64_t id)
{
	const struct btrfsimg_subvol *s = btrfsimg_subvol_find(l->v, l->n, id);
	return s ? &l->v[s - l->v] : NULL;
}

static void fill_from_root_item(struct btrfsimg_subvol *s, const uint8_t *p, uint32_t size)
{
	s->generation = bi_le64(p + RI_GENERATION);
	s->flags = bi_le64(p + RI_FLAGS);
	s->readonly = s->flags & ROOT_SUBVOL_RDONLY;
	s->bytenr = bi_le64(p + RI_BYTENR);
	s->level = p[RI_LEVEL];
	s->deleted = bi_le32(p + RI_REFS) == 0;
	/* The v2 fields are meaningful only when generation_v2 matches. */
	if (size < RI_SIZE || bi_le64(p + RI_GENERATION_V2) != s->generation)
		return;
	memcpy(s->uuid, p + RI_UUID, 16);
	memcpy(s->parent_uuid, p + RI_PARENT_UUID, 16);
	memcpy(s->received_uuid, p + RI_RECEIVED_UUID, 16);
	s->ctransid = bi_le64(p + RI_CTRANSID);
	s->cgen = bi_le64(p + RI_OTRANSID);
	s->otime_sec = (int64_t)bi_le64(p + RI_OTIME);
	s->otime_nsec = bi_le32(p + RI_OTIME + 8);
}

/* A snapshot's ROOT_ITEM has the transid it was taken in as its key offset,
 * a created subvolume's 0 (kernel fs/btrfs/transaction.c
 * create_pending_snapshot(): key.offset = trans->transid; btrfs-progs
 * cmds/subvolume-list.c filter_snapshot(), -s: root_offset != 0). */
static int sv_add(struct btrfsimg_fs *fs, struct sv_list *l, const bi_key *key, const uint8_t *p,
		  uint32_t size)
{
	uint64_t id = key->objectid;
	if (l->n && l->v[l->n - 1].id == id) {
		/* a second ROOT_ITEM (e.g. reloc) for the same id */
		l->v[l->n - 1].snapshot |= key->offset != 0;
		return 0;
	}
	if (size < RI_SIZE_V1)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root item: root=%" PRIu64 ", size %u expect >= %u", id, size,
			      RI_SIZE_V1);
	if (bi_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return bi_err(fs, -ENOMEM, "out of memory listing subvolumes");
	struct btrfsimg_subvol *s = &l->v[l->n++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->snapshot = key->offset != 0;
	fill_from_root_item(s, p, size);
	for (size_t i = 0; i < fs->nsalvage_roots; i++)
		if (fs->salvage_roots[i].id == id) { /* the root read instead (salvage.c) */
			s->generation = fs->salvage_roots[i].generation;
			s->bytenr = fs->salvage_roots[i].bytenr;
			s->level = fs->salvage_roots[i].level;
		}
	return 0;
}

static int sv_backref(struct btrfsimg_fs *fs, struct sv_list *l, const struct bi_item *it)
{
	struct btrfsimg_subvol *s = sv_find(l, it->key.objectid);
	if (!s || s->id == OBJ_FS_TREE)
		return 0; /* no root item to attach it to; the top level has no parent */
	struct bi_cur c = bi_cur_make(it->data, it->size);
	uint16_t nlen = bi_u16(&c, RR_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, RR_SIZE, nlen);
	if (c.bad || nlen == 0)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root backref: block=%" PRIu64
			      " slot=%u, name length %u, item size %u",
			      it->block, it->slot, nlen, it->size);
	if (s->path)
		return 0; /* the kernel allows one; keep the first (even with parent 0) */
	s->parent_id = it->key.offset;
	s->dirid = bi_le64(it->data + RR_DIRID);
	size_t cap = BI_NAME_SAFE_MAX(nlen) + 1; /* a damaged name: its safe form */
	s->path = malloc(cap);
	if (!s->path)
		return bi_err(fs, -ENOMEM, "out of memory");
	bi_name_safe(name, nlen, s->path, cap);
	return 0;
}

static int sv_orphan(struct sv_list *l, const struct bi_item *it)
{
	struct btrfsimg_subvol *s = sv_find(l, it->key.offset);
	if (s)
		s->deleted = true;
	return 0;
}

/* One pass over the root tree collects root items, backrefs and orphans. */
static int sv_scan(struct btrfsimg_fs *fs, struct sv_list *l)
{
	bi_key min = { OBJ_FS_TREE, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type == KT_ROOT_ITEM && is_fs_tree(item.key.objectid))
			rc = sv_add(fs, l, &item.key, item.data, item.size);
		else if (item.key.type == KT_ROOT_BACKREF)
			rc = sv_backref(fs, l, &item);
		else if (item.key.objectid == OBJ_ORPHAN && item.key.type == KT_ORPHAN_ITEM)
			rc = sv_orphan(l, &item);
	}
	bi_iter_end(&it);
	return rc;
}

/* Prepend "name/" of @dir's first INODE_REF and move to its parent dir. */
static int dir_step(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t *dir, char **path)
{
	bi_key min = { *dir, KT_INODE_REF, 0 }, max = { *dir, KT_INODE_REF, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &min, &max);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc == 0)
		rc = bi_err(fs, -ENOENT, "root=%" PRIu64 ": directory %" PRIu64 " has no INODE_REF",
			    r->id, *dir);
	if (rc > 0) {
		struct bi_cur c = bi_cur_make(item.data, item.size);
		uint16_t nlen = bi_u16(&c, IREF_NAME_LEN);
		const uint8_t *name = bi_bytes(&c, IREF_SIZE, nlen);
		size_t old = strlen(*path), safe = c.bad ? 0 : bi_name_safe(name, nlen, NULL, 0);
		char *p = c.bad ? NULL : malloc(old + safe + 2);
		if (!p) {
			rc = bi_item_err(fs, c.bad ? -EUCLEAN : -ENOMEM, "inode ref", r->id,
					 item.block, item.slot, "name length %u, item size %u",
					 nlen, item.size);
		} else {
			bi_name_safe(name, nlen, p, safe + 1); /* a damaged name: its safe form */
			p[safe] = '/';
			memcpy(p + safe + 1, *path, old + 1);
			free(*path);
			*path = p;
			*dir = item.key.offset;
			rc = 0;
		}
	}
	bi_iter_end(&it);
	return rc;
}

/* Path of directory @dir inside subvolume @parent, relative to its root,
 * with a trailing '/' unless empty. */
static int dir_path(struct btrfsimg_fs *fs, uint64_t parent, uint64_t dir, char **out)
{
	struct bi_root r;
	int rc = bi_root_find(fs, parent, &r);
	char *path = strdup("");
	if (!path)
		return bi_err(fs, -ENOMEM, "out of memory");
	for (int depth = 0; rc == 0 && dir != OBJ_FIRST_FREE; depth++) {
		if (depth >= PATH_DEPTH_MAX)
			rc = bi_err(fs, -EUCLEAN,
				    "root=%" PRIu64 ": directory chain from %" PRIu64
				    " too deep (loop?)",
				    parent, dir);
		else
			rc = dir_step(fs, &r, &dir, &path);
	}
	if (rc < 0) {
		free(path);
		return rc;
	}
	*out = path;
	return 0;
}

enum { SV_TODO, SV_BUSY, SV_DONE };
#define SV_DEPTH_MAX 2048 /* a path of PATH_MAX bytes nests at most ~2048 deep */

static void sv_unreachable(struct btrfsimg_subvol *s)
{
	free(s->path);
	s->path = NULL;
}

/* Prefix s->path (its own name, from the backref) with the parent's path
 * and the directory path inside the parent. Unreachable ones get NULL. */
static int sv_resolve(struct btrfsimg_fs *fs, struct sv_list *l, struct btrfsimg_subvol *s,
		      int depth)
{
	uint8_t *st = &l->state[s - l->v];
	if (*st == SV_DONE)
		return 0;
	if (*st == SV_BUSY || depth > SV_DEPTH_MAX) {
		sv_unreachable(s); /* a loop of backrefs: no path leads here */
		*st = SV_DONE;
		return 0;
	}
	*st = SV_BUSY;
	struct btrfsimg_subvol *p = s->parent_id ? sv_find(l, s->parent_id) : NULL;
	int rc = p ? sv_resolve(fs, l, p, depth + 1) : 0;
	char *dir = NULL;
	if (rc == 0 && p && p->path)
		rc = dir_path(fs, p->id, s->dirid, &dir);
	if (rc == 0 && dir) {
		size_t len = strlen(p->path) + strlen(dir) + strlen(s->path) + 2;
		char *full = malloc(len);
		if (!full)
			rc = bi_err(fs, -ENOMEM, "out of memory");
		else
			snprintf(full, len, "%s%s%s%s", p->path, *p->path ? "/" : "", dir, s->path);
		free(s->path);
		s->path = full;
	} else if (rc == 0 && s->id != OBJ_FS_TREE) {
		sv_unreachable(s);
	}
	free(dir);
	*st = SV_DONE;
	return rc;
}

static bool zero_uuid(const uint8_t u[16])
{
	static const uint8_t zero[16];
	return memcmp(u, zero, 16) == 0;
}

/* The source of a snapshot: the first subvolume in list order, other than
 * itself, whose uuid is its parent_uuid (btrfs-progs prints the parent
 * uuid; the subvolume holding it may be gone). */
static void sv_sources(struct sv_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		struct btrfsimg_subvol *s = &l->v[i];
		if (zero_uuid(s->parent_uuid))
			continue;
		for (size_t j = 0; j < l->n && !s->snapshot_of; j++)
			if (j != i && memcmp(l->v[j].uuid, s->parent_uuid, 16) == 0)
				s->snapshot_of = l->v[j].id;
	}
}

void btrfsimg_subvols_free(struct btrfsimg_subvol *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

int btrfsimg_subvols(btrfsimg_fs *fs, struct btrfsimg_subvol **out, size_t *n)
{
	if (!fs || !out || !n)
		return -EINVAL;
	*out = NULL; /* so that freeing after a failure is always safe */
	*n = 0;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct sv_list l = { 0 };
	int rc = sv_scan(fs, &l);
	if (rc == 0 && l.n && l.v[0].id == OBJ_FS_TREE && !(l.v[0].path = strdup("")))
		rc = bi_err(fs, -ENOMEM, "out of memory");
	if (rc == 0 && !(l.state = calloc(l.n + 1, 1)))
		rc = bi_err(fs, -ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < l.n; i++)
		rc = sv_resolve(fs, &l, &l.v[i], 0);
	free(l.state);
	if (rc == 0)
		sv_sources(&l);
	if (rc < 0) {
		btrfsimg_subvols_free(l.v, l.n);
		return rc;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}

int btrfsimg_default_subvol(btrfsimg_fs *fs, uint64_t *id)
{
	if (!fs || !id)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	static const char name[] = "default";
	bi_key k = { OBJ_ROOT_TREE_DIR, KT_DIR_ITEM, bi_name_hash(name, 7) };
	uint8_t *d;
	uint32_t size;
	int rc = bi_tree_get(fs, &fs->root_tree, &k, &d, &size);
	if (rc == -ENOENT) {
		*id = OBJ_FS_TREE;
		return 0;
	}
	if (rc < 0)
		return rc;
	if (size < DI_SIZE) {
		free(d);
		return bi_err(fs, -EUCLEAN, "corrupt default dir item: size %u expect >= %u", size,
			      DI_SIZE);
	}
	*id = bi_le64(d + DI_LOCATION);
	free(d);
	return 0;
}

int btrfsimg_tree_walk(btrfsimg_fs *fs, uint64_t tree_id, const struct btrfsimg_key *min,
		       const struct btrfsimg_key *max, btrfsimg_item_fn fn, void *ctx)
{
	if (!fs || !min || !max || !fn)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct bi_root root;
	int rc = bi_root_find(fs, tree_id, &root);
	if (rc < 0)
		return rc;
	struct bi_iter it;
	struct bi_item item;
	rc = bi_iter_start(fs, &it, &root, min, max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = fn(ctx, &item.key, item.data, item.size);
	bi_iter_end(&it);
	return rc;
}
