/* SPDX-License-Identifier: MIT */
/*
 * Inodes: INODE_ITEM (key (ino, 1, 0), 160 bytes), their names
 * (INODE_REF (ino, 12, parent dir) and INODE_EXTREF (ino, 13, hash)),
 * xattrs (XATTR_ITEM (ino, 24, name hash), dir-item layout), symlink
 * targets, the kernel's in-memory stub directory and file handles.
 *
 * Every item is checked as the kernel's tree-checker checks it before a
 * field is used; names are 1..255 bytes. A name or value handed to a
 * caller always lies inside the item it came from.
 *
 * INODE_REF item, several entries back to back:
 *   +0 index u64 | +8 name_len u16 | +10 name ...  | next entry ...
 * INODE_EXTREF item, several entries back to back (hash collisions):
 *   +0 parent u64 | +8 index u64 | +16 name_len u16 | +18 name ... | next
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files/inode.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/root.h"
#include "btrfs/salvage.h"
#include "btrfs/tree.h"
#include "files/orphans.h"

/* File handle types (include/linux/exportfs.h) and flags name_to_handle_at
 * ORs in (FILEID_IS_CONNECTABLE, FILEID_IS_DIR). */
#define FH_WITHOUT_PARENT 0x4d
#define FH_WITH_PARENT 0x4e
#define FH_WITH_PARENT_ROOT 0x4f
#define FH_IS_CONNECTABLE 0x10000u
#define FH_IS_DIR 0x20000u

/* ---------------------------------------------------------- pure parsers */

/* ------------------------------------------------------------- inodes */

int bi_inode_read(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t objectid,
		  struct btrfsimg_inode *out)
{
	bi_key k = { objectid, KT_INODE_ITEM, 0 };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &k, &k);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc == 0)
		rc = bi_err(fs, -ENOENT, "no inode %" PRIu64 " in subvolume %" PRIu64, objectid,
			    r->id);
	if (rc > 0)
		rc = bi_inode_item(fs, r, &item, out);
	bi_iter_end(&it);
	/* a subvolume whose root directory is lost still walks */
	return rc < 0 ? bi_orphans_root_dir(fs, r->id, objectid, rc, out) : rc;
}

int bi_inode_item(struct btrfsimg_fs *fs, const struct bi_root *r, const struct bi_item *item,
		  struct btrfsimg_inode *out)
{
	char why[192];
	int rc = bi_inode_parse(item->data, item->size, r->id, item->key.objectid,
				fs->sb.info.generation + 1, out, why, sizeof(why));
	if (rc < 0)
		rc = bi_item_err(fs, rc, "inode item", r->id, item->block, item->slot, "%s", why);
	/* a directory's lost entries are found by back references; a
	 * file's lost extents or xattrs are not: never shown short */
	if (rc == 0 && fs->nsalvage_cut && !S_ISDIR(out->mode) &&
	    bi_salvage_cut(fs, r->id, item->key.objectid))
		rc = bi_err(fs, -EIO, "inode %" PRIu64 " of tree %" PRIu64 ": its items run to the "
			    "edge of a leaf found by scanning, next to keys lost with the tree's "
			    "lost leaves (salvage): not read, its extents and xattrs may be "
			    "incomplete", item->key.objectid, r->id);
	return rc;
}

/* The root of @subvol, refusing objectid 2 (no INODE_ITEM exists for it). */
static int inode_root(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
		      struct bi_root *r)
{
	if (objectid == OBJ_EMPTY_SUBVOL_DIR)
		return bi_err(
			fs, -ENOENT,
			"subvolume %" PRIu64
			" objectid 2 is the kernel's in-memory stub directory (no inode item); see btrfsimg_stub_inode()",
			subvol);
	return bi_root_find(fs, subvol, r);
}

int btrfsimg_inode_get(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
		       struct btrfsimg_inode *out)
{
	if (!fs || !out)
		return -EINVAL;
	struct bi_root r;
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = inode_root(fs, subvol, objectid, &r);
	if (rc == 0)
		rc = bi_inode_read(fs, &r, objectid, out);
	return rc;
}

int btrfsimg_stub_inode(btrfsimg_fs *fs, uint64_t subvol, uint64_t parent_dir,
			struct btrfsimg_inode *out)
{
	if (!fs || !out)
		return -EINVAL;
	struct bi_root r;
	struct btrfsimg_inode p;
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = inode_root(fs, subvol, parent_dir, &r);
	if (rc == 0)
		rc = bi_inode_read(fs, &r, parent_dir, &p);
	if (rc == 0 && !S_ISDIR(p.mode))
		rc = bi_err(fs, -ENOTDIR,
			    "inode %" PRIu64 " of subvolume %" PRIu64 " is not a directory",
			    parent_dir, subvol);
	if (rc < 0)
		return rc;
	/* new_simple_dir(): only these come from disk (the parent's); mtime,
	 * ctime and btime are the time of the lookup, left 0 here. */
	memset(out, 0, sizeof(*out));
	out->subvol = subvol;
	out->objectid = OBJ_EMPTY_SUBVOL_DIR;
	out->mode = S_IFDIR | 0755;
	out->nlink = 1;
	out->uid = p.uid;
	out->gid = p.gid;
	out->atime = p.atime;
	return 0;
}

/* -------------------------------------------------------------- names */

static int names_item(struct btrfsimg_fs *fs, const struct bi_item *it, uint64_t subvol,
		      btrfsimg_name_fn fn, void *ctx, size_t *count)
{
	bool ext = it->key.type == KT_INODE_EXTREF;
	struct bi_ref_entry e;
	uint32_t pos = 0;
	char why[192];
	int rc;
	for (;;) {
		rc = ext ? bi_extref_next(it->data, it->size, &pos, &e, why, sizeof(why))
			 : bi_iref_next(it->data, it->size, it->key.offset, &pos, &e, why,
					sizeof(why));
		if (rc <= 0)
			break;
		(*count)++;
		if ((rc = fn(ctx, e.parent, e.index, e.name, e.name_len)) != 0)
			return rc;
	}
	if (rc < 0)
		return bi_item_err(fs, rc, ext ? "inode extref" : "inode ref", subvol, it->block,
				   it->slot, "%s", why);
	return 0;
}

int btrfsimg_inode_names(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
			 btrfsimg_name_fn fn, void *ctx)
{
	if (!fs || !fn)
		return -EINVAL;
	struct bi_root r;
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = inode_root(fs, subvol, objectid, &r);
	if (rc < 0)
		return rc;
	bi_key min = { objectid, KT_INODE_REF, 0 }, max = { objectid, KT_INODE_EXTREF, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	size_t count = 0;
	rc = bi_iter_start(fs, &it, &r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = names_item(fs, &item, subvol, fn, ctx, &count);
	bi_iter_end(&it);
	if (rc == 0 && count == 0) {
		struct btrfsimg_inode ino; /* no names: say -ENOENT if no such inode */
		rc = bi_inode_read(fs, &r, objectid, &ino);
	}
	return rc;
}

/* ------------------------------------------------------------- xattrs */

static int xattr_item(struct btrfsimg_fs *fs, const struct bi_item *it, uint64_t subvol,
		      btrfsimg_xattr_fn fn, void *ctx, size_t *count)
{
	char why[192];
	struct bi_dir_entry e;
	uint32_t pos = 0;
	int rc = bi_dir_item_check(it->data, it->size, &it->key, why, sizeof(why));
	if (rc < 0)
		return bi_item_err(fs, rc, "xattr item", subvol, it->block, it->slot, "%s", why);
	/* bi_dir_item_check accepted every entry: the walk cannot fail. */
	while (bi_dir_item_next(it->data, it->size, KT_XATTR_ITEM, &pos, &e, NULL, 0) > 0) {
		(*count)++;
		if ((rc = fn(ctx, e.name, e.name_len, e.data, e.data_len)) != 0)
			return rc;
	}
	return 0;
}

int btrfsimg_xattrs(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, btrfsimg_xattr_fn fn,
		    void *ctx)
{
	if (!fs || !fn)
		return -EINVAL;
	struct bi_root r;
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = inode_root(fs, subvol, objectid, &r);
	if (rc < 0)
		return rc;
	bi_key min = { objectid, KT_XATTR_ITEM, 0 }, max = { objectid, KT_XATTR_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	size_t count = 0;
	rc = bi_iter_start(fs, &it, &r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = xattr_item(fs, &item, subvol, fn, ctx, &count);
	bi_iter_end(&it);
	if (rc == 0 && count == 0) {
		struct btrfsimg_inode ino; /* none: say -ENOENT if no such inode */
		rc = bi_inode_read(fs, &r, objectid, &ino);
	}
	return rc;
}

/* ----------------------------------------------------------- symlinks */

/* -------------------------------------------------------- file handles */

/* i_generation and mode of an object; the stub (2) has generation 0. */
static int handle_inode(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
			uint32_t *gen, uint32_t *mode)
{
	struct bi_root r;
	int rc = bi_root_find(fs, subvol, &r);
	if (rc < 0)
		return rc;
	if (objectid == OBJ_EMPTY_SUBVOL_DIR) {
		*gen = 0;
		*mode = S_IFDIR | 0755;
		return 0;
	}
	struct btrfsimg_inode ino;
	if ((rc = bi_inode_read(fs, &r, objectid, &ino)) < 0)
		return rc;
	*gen = (uint32_t)ino.generation; /* i_generation is 32 bits */
	*mode = ino.mode;
	return 0;
}

/*
 * struct btrfs_fid (packed, little-endian):
 *   +0 objectid u64 | +8 root u64 | +16 gen u32 | +20 parent objectid u64
 *   +28 parent gen u32 | +32 parent root u64 | +40
 * 20 bytes without a parent, 32 with one in the same root, 40 otherwise.
 */
int btrfsimg_file_handle_encode(uint64_t subvol, uint64_t objectid, uint64_t generation,
				uint32_t mode, uint64_t parent_subvol, uint64_t parent_objectid,
				uint64_t parent_generation, bool connectable, uint32_t *type,
				uint8_t out[40])
{
	if (!type || !out)
		return -EINVAL;
	bi_put_le64(out, objectid);
	bi_put_le64(out + 8, subvol);
	bi_put_le32(out + 16, (uint32_t)generation); /* i_generation is 32 bits */
	*type = FH_WITHOUT_PARENT;
	if (!connectable)
		return 20;
	/* exportfs encodes a parent only for non-directories. */
	*type |= FH_IS_CONNECTABLE;
	if (S_ISDIR(mode)) {
		*type |= FH_IS_DIR;
		return 20;
	}
	bi_put_le64(out + 20, parent_objectid);
	bi_put_le32(out + 28, (uint32_t)parent_generation);
	if (parent_subvol == subvol) {
		*type = FH_IS_CONNECTABLE | FH_WITH_PARENT;
		return 32;
	}
	bi_put_le64(out + 32, parent_subvol);
	*type = FH_IS_CONNECTABLE | FH_WITH_PARENT_ROOT;
	return 40;
}

int btrfsimg_file_handle(btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid,
			 uint64_t parent_subvol, uint64_t parent_objectid, bool connectable,
			 uint32_t *type, uint8_t out[40])
{
	if (!fs || !type || !out)
		return -EINVAL;
	uint32_t gen = 0, mode = 0, pgen = 0, pmode = 0;
	int rc = bi_opened(fs, __func__) ? 0 : -EINVAL;
	if (rc == 0)
		rc = handle_inode(fs, subvol, objectid, &gen, &mode);
	/* exportfs reads the parent only for a connectable non-directory */
	if (rc == 0 && connectable && !S_ISDIR(mode))
		rc = handle_inode(fs, parent_subvol, parent_objectid, &pgen, &pmode);
	if (rc < 0)
		return rc;
	return btrfsimg_file_handle_encode(subvol, objectid, gen, mode, parent_subvol,
					   parent_objectid, pgen, connectable, type, out);
}
