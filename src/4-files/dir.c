/* SPDX-License-Identifier: MIT */
/*
 * Directories, as the kernel shows them.
 *
 * readdir walks DIR_INDEX items (dir, 96, index) in ascending index from 2
 * (0 and 1 are "." and ".."), taking the first entry of each item, and
 * reports d_ino = location.objectid: for an entry naming a subvolume
 * (location (child, ROOT_ITEM, -1)) that is the child's id, not 256.
 * lookup hashes the name and reads DIR_ITEM (dir, 84, hash), whose item
 * holds every entry with that hash, back to back.
 *
 * Where an entry leads (fixup_tree_root_location): an INODE_ITEM location
 * is an inode of the same subvolume. A ROOT_ITEM location leads to the
 * child's root directory only if the root tree holds ROOT_REF (dir's
 * subvolume, 156, child) whose dirid is the directory and whose name is the
 * entry's, and the child's ROOT_ITEM exists with refs > 0; otherwise (a
 * snapshot of a subvolume that held nested ones, a deleted child) the
 * kernel builds an empty in-memory directory, objectid 2, in the
 * directory's own subvolume: a stub.
 *
 * One DIR_ITEM / DIR_INDEX / XATTR_ITEM entry:
 *   +0 location key (objectid u64, type u8, offset u64) | +17 transid u64
 *   +25 data_len u16 | +27 name_len u16 | +29 type u8 | +30 name | data
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "4-files/dir.h"

#include "0-base/csum.h"
#include "0-base/cursor.h"
#include "0-base/err.h"
#include "0-base/handle.h"
#include "0-base/key.h"
#include "0-base/name.h"
#include "0-base/ondisk.h"
#include "3-btrfs/check.h"
#include "3-btrfs/root.h"
#include "3-btrfs/tree.h"
#include "4-files/inode.h"

/* ---------------------------------------------------------- pure parsers */

/* ------------------------------------------------------------ helpers */

/* A name for messages: printable ASCII kept, other bytes as \xHH, cut
 * with "..." to fit @cap. */
static const char *esc(const uint8_t *name, size_t len, char *buf, size_t cap)
{
	size_t o = 0, i = 0;
	for (; i < len && o + 8 < cap; i++) {
		uint8_t c = name[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
	}
	if (i < len)
		o += (size_t)snprintf(buf + o, cap - o, "...");
	buf[o] = '\0';
	return buf;
}

/* The last ROOT_ITEM of @id (the kernel searches offset -1): *found, refs
 * and root_dirid. */
static int child_root(struct btrfsimg_fs *fs, uint64_t id, bool *found, uint32_t *refs,
		      uint64_t *dirid)
{
	bi_key min = { id, KT_ROOT_ITEM, 0 }, max = { id, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	*found = false;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		if (item.size < RI_SIZE_V1) {
			rc = bi_item_err(fs, -EUCLEAN, "root item", 1, item.block, item.slot,
					 "size %u expect >= %u", item.size, RI_SIZE_V1);
			break;
		}
		*found = true;
		*refs = bi_le32(item.data + RI_REFS);
		*dirid = bi_le64(item.data + RI_ROOT_DIRID);
		rc = 0;
	}
	bi_iter_end(&it);
	return rc;
}

/* Does ROOT_REF (subvol, 156, child) name this entry of @dir? */
static int root_ref_matches(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			    const struct btrfsimg_dirent *e, bool *match)
{
	bi_key k = { subvol, KT_ROOT_REF, e->location_objectid };
	struct bi_iter it;
	struct bi_item item;
	struct bi_root_ref ref;
	char why[160];
	*match = false;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &k, &k);
	if (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = bi_root_ref_parse(item.data, item.size, &ref, why, sizeof(why));
		if (rc < 0)
			rc = bi_item_err(fs, rc, "root ref", 1, item.block, item.slot, "%s", why);
		else
			*match = ref.dirid == dir && ref.name_len == e->name_len &&
				 memcmp(ref.name, e->name, e->name_len) == 0;
	}
	bi_iter_end(&it);
	return rc < 0 ? rc : 0;
}

int bi_dir_resolve(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
		   struct btrfsimg_dirent *e)
{
	e->kind = BTRFSIMG_TARGET_INODE;
	e->target_subvol = subvol;
	e->target_objectid = e->location_objectid;
	if (e->location_type != KT_ROOT_ITEM)
		return 0;
	bool match = false, found = false;
	uint32_t refs = 0;
	uint64_t dirid = 0;
	int rc = root_ref_matches(fs, subvol, dir, e, &match);
	if (rc == 0 && match)
		rc = child_root(fs, e->location_objectid, &found, &refs, &dirid);
	if (rc < 0)
		return rc;
	if (match && found && refs > 0) {
		e->kind = BTRFSIMG_TARGET_SUBVOL;
		e->target_subvol = e->location_objectid;
		e->target_objectid = dirid;
	} else {
		e->kind = BTRFSIMG_TARGET_STUB;
		e->target_objectid = OBJ_EMPTY_SUBVOL_DIR;
	}
	return 0;
}

/* Directory @dir of @r must exist and be a directory. */
static int need_dir(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir)
{
	struct btrfsimg_inode ino;
	int rc = bi_inode_read(fs, r, dir, &ino);
	if (rc == 0 && !S_ISDIR(ino.mode))
		rc = bi_err(fs, -ENOTDIR,
			    "inode %" PRIu64 " of subvolume %" PRIu64
			    " is not a directory (mode 0%o)",
			    dir, r->id, ino.mode);
	return rc;
}

static void entry_to_dirent(const struct bi_dir_entry *d, struct btrfsimg_dirent *e)
{
	memset(e, 0, sizeof(*e));
	e->name = d->name;
	e->name_len = d->name_len;
	e->location_objectid = d->location.objectid;
	e->location_type = d->location.type;
	e->file_type = d->type;
}

/* ------------------------------------------------------------- readdir */

static int readdir_item(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			const struct bi_item *it, struct btrfsimg_dirent *e)
{
	char why[192];
	struct bi_dir_entry first, d;
	uint32_t pos = 0;
	/* What bi_dir_item_check does for a DIR_INDEX item (every entry
	 * parses, at least one; no name hash to compare), in the same pass
	 * that takes the first entry. */
	int rc = bi_dir_item_next(it->data, it->size, KT_DIR_INDEX, &pos, &first, why, sizeof(why));
	if (rc == 0)
		rc = bi_why(why, sizeof(why), "empty dir item, have %u bytes expect >= %u",
			    it->size, DI_SIZE);
	while (rc > 0)
		rc = bi_dir_item_next(it->data, it->size, KT_DIR_INDEX, &pos, &d, why, sizeof(why));
	if (rc == 0 && first.location.type != KT_INODE_ITEM && first.location.type != KT_ROOT_ITEM)
		rc = bi_why(why, sizeof(why), "location key type %u cannot be looked up",
			    first.location.type);
	if (rc < 0)
		return bi_item_err(fs, rc, "dir index", subvol, it->block, it->slot, "%s", why);
	/* btrfs_real_readdir uses only the first entry of a DIR_INDEX item. */
	entry_to_dirent(&first, e);
	e->index = it->key.offset;
	return bi_dir_resolve(fs, subvol, dir, e);
}

int btrfsimg_readdir(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir, btrfsimg_dirent_fn fn,
		     void *ctx)
{
	if (!fs || !fn)
		return -EINVAL;
	struct bi_root r;
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = bi_root_find(fs, subvol, &r);
	if (rc < 0 || dir == OBJ_EMPTY_SUBVOL_DIR)
		return rc; /* a stub directory is empty */
	if ((rc = need_dir(fs, &r, dir)) < 0)
		return rc;
	bi_key min = { dir, KT_DIR_INDEX, 2 }, max = { dir, KT_DIR_INDEX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	struct btrfsimg_dirent e;
	rc = bi_iter_start(fs, &it, &r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = readdir_item(fs, subvol, dir, &item, &e);
		if (rc == 0)
			rc = fn(ctx, &e);
	}
	bi_iter_end(&it);
	return rc;
}

/* -------------------------------------------------------------- lookup */

struct raw_find {
	const uint8_t *name;
	size_t len;
	struct btrfsimg_dirent e;
	bool found;
};

static int raw_find(void *ctx, const struct btrfsimg_dirent *e)
{
	struct raw_find *f = ctx;
	if (e->name_len != f->len || memcmp(e->name, f->name, f->len) != 0)
		return 0;
	f->e = *e;
	f->found = true;
	return 1;
}

/* @name is the safe form of a damaged name (0-base/name.h): the entry
 * readdir shows under it, found by its raw bytes in the listing (no hash
 * of the forged name need match). -ENOENT if it is no such form or no
 * entry has those bytes. */
static int lookup_damaged(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
			  const uint8_t *name, size_t len, struct btrfsimg_dirent *out)
{
	uint8_t raw[BI_NAME_MAX];
	struct raw_find f = { .name = raw };
	if (!memchr(name, '%', len) ||
	    bi_name_raw((const char *)name, len, raw, sizeof(raw), &f.len) < 0)
		return -ENOENT;
	int rc = btrfsimg_readdir(fs, r->id, dir, raw_find, &f);
	if (rc < 0 || !f.found)
		return rc < 0 ? rc : -ENOENT;
	*out = f.e;
	out->name = name; /* as lookups give it: the caller's bytes, index 0 */
	out->name_len = len;
	out->index = 0;
	return 0;
}

static int lookup_in(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
		     const uint8_t *name, size_t len, struct btrfsimg_dirent *out)
{
	bi_key k = { dir, KT_DIR_ITEM, bi_name_hash(name, len) };
	struct bi_iter it;
	struct bi_item item;
	struct bi_dir_entry d;
	char why[192], nb[96];
	bool found = false;
	uint32_t pos = 0;
	int rc = bi_iter_start(fs, &it, r, &k, &k);
	if (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = bi_dir_item_check(item.data, item.size, &item.key, why, sizeof(why));
		while (rc > 0 && !found &&
		       (rc = bi_dir_item_next(item.data, item.size, KT_DIR_ITEM, &pos, &d, why,
					      sizeof(why))) > 0)
			found = d.name_len == len && memcmp(d.name, name, len) == 0;
		if (found && d.location.type != KT_INODE_ITEM && d.location.type != KT_ROOT_ITEM)
			rc = bi_why(why, sizeof(why), "location key type %u cannot be looked up",
				    d.location.type);
		if (rc < 0)
			rc = bi_item_err(fs, rc, "dir item", r->id, item.block, item.slot, "%s",
					 why);
	}
	bi_iter_end(&it);
	if (rc < 0)
		return rc;
	if (!found && (rc = lookup_damaged(fs, r, dir, name, len, out)) != -ENOENT)
		return rc;
	if (!found)
		return bi_err(fs, -ENOENT,
			      "no entry '%s' in directory %" PRIu64 " of subvolume %" PRIu64,
			      esc(name, len, nb, sizeof(nb)), dir, r->id);
	entry_to_dirent(&d, out);
	out->name = name; /* the caller's bytes, not the borrowed leaf's */
	return bi_dir_resolve(fs, r->id, dir, out);
}

int btrfsimg_lookup(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir, const void *name,
		    size_t name_len, struct btrfsimg_dirent *out)
{
	if (!fs || !name || !name_len || !out)
		return -EINVAL;
	struct bi_root r;
	char nb[96];
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = bi_root_find(fs, subvol, &r);
	if (rc == 0 && (dir == OBJ_EMPTY_SUBVOL_DIR || name_len > BI_NAME_MAX))
		rc = bi_err(fs, -ENOENT, "no entry '%s' in %s %" PRIu64 " of subvolume %" PRIu64,
			    esc(name, name_len, nb, sizeof(nb)),
			    dir == OBJ_EMPTY_SUBVOL_DIR ? "stub directory" : "directory", dir,
			    subvol);
	if (rc == 0)
		rc = need_dir(fs, &r, dir);
	if (rc == 0)
		rc = lookup_in(fs, &r, dir, name, name_len, out);
	return rc;
}

/* --------------------------------------------------------- path lookup */

struct walk {
	struct btrfsimg_fs *fs;
	const char *path;
	struct btrfsimg_dirent *stack;	/* stack[0] is the start root */
	size_t depth;
	struct bi_root root;		/* of stack[depth].target_subvol */
};

static int step(struct walk *w, const char *comp, size_t len)
{
	struct btrfsimg_dirent *cur = &w->stack[w->depth];
	int rc = 0;
	if (cur->kind == BTRFSIMG_TARGET_STUB || len > BI_NAME_MAX)
		return bi_err(w->fs, -ENOENT, "path '%s': no entry '%.*s'%s", w->path,
			      (int)(comp + len - w->path), w->path,
			      len > BI_NAME_MAX ? " (name over 255 bytes)" : " (stub directory)");
	if (w->root.id != cur->target_subvol)
		rc = bi_root_find(w->fs, cur->target_subvol, &w->root);
	if (rc == 0)
		rc = lookup_in(w->fs, &w->root, cur->target_objectid, (const uint8_t *)comp, len,
			       &w->stack[w->depth + 1]);
	if (rc == 0)
		w->depth++;
	return rc;
}

static size_t count_components(const char *p)
{
	size_t n = 0;
	for (; *p; p++)
		n += *p != '/' && (p[1] == '/' || p[1] == '\0');
	return n;
}

int btrfsimg_path_lookup(btrfsimg_fs *fs, uint64_t subvol, const char *path,
			 struct btrfsimg_dirent *out)
{
	if (!fs || !path || !out)
		return -EINVAL;
	struct walk w = { .fs = fs, .path = path };
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = bi_root_find(fs, subvol, &w.root);
	if (rc < 0)
		return rc;
	w.stack = calloc(count_components(path) + 1, sizeof(*w.stack));
	if (!w.stack)
		return bi_err(fs, -ENOMEM, "out of memory resolving a path");
	w.stack[0] = (struct btrfsimg_dirent){
		.name = (const uint8_t *)path, .location_objectid = OBJ_FIRST_FREE,
		.location_type = KT_INODE_ITEM, .file_type = FT_DIR,
		.kind = BTRFSIMG_TARGET_INODE, .target_subvol = subvol,
		.target_objectid = OBJ_FIRST_FREE };
	const char *p = path;
	while (rc == 0 && *p) {
		size_t len = strcspn(p, "/");
		if (len && w.stack[w.depth].file_type != FT_DIR) /* "." and ".." too */
			rc = bi_err(fs, -ENOTDIR, "path '%s': '%.*s' is not a directory", path,
				    (int)(p - path), path);
		else if (len == 2 && p[0] == '.' && p[1] == '.')
			w.depth -= w.depth > 0; /* ".." is the dcache parent: where we came from */
		else if (len && !(len == 1 && p[0] == '.'))
			rc = step(&w, p, len);
		p += len + (p[len] == '/');
	}
	/* "file/": a trailing slash wants a directory, as path walk does. */
	if (rc == 0 && p > path && p[-1] == '/' && w.stack[w.depth].file_type != FT_DIR)
		rc = bi_err(fs, -ENOTDIR, "path '%s': not a directory", path);
	if (rc == 0)
		*out = w.stack[w.depth];
	free(w.stack);
	return rc;
}
