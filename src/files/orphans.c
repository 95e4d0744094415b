// SPDX-License-Identifier: MIT
/*
 * Paths from the inodes' own back references (orphans.h): where a leaf
 * of a directory's entries (DIR_INDEX, DIR_ITEM) is lost and the inodes it
 * named survive, each inode still says where it was: its INODE_REF (key
 * (ino, 12, parent), then index and name per link) or INODE_EXTREF (key
 * (ino, 13, hash), then parent, index and name per link). Followed up to
 * the subvolume root (256), they give the exact path and the readdir
 * position (the index) the lost entry had; the directory's listing
 * (btrfsimg_readdir, which every front end shares) has such an inode at
 * that index, and a lookup finds it. Where a parent's own items are lost too,
 * the chain breaks: its children are listed under the made-up directory
 * BTRFSIMG_LOST_FOUND, in one directory per lost parent named by its true
 * inode number.
 *
 * The index is built only in damaged mode (a listing failed, or a salvage
 * opened the filesystem), one pass
 * over the subvolume's tree; an unreadable leaf is stepped over (the next
 * objectid tried, a bounded number of times), so the items after it count.
 * Its memory follows the number of inodes and links of the subvolume.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files/orphans.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/key.h"
#include "base/search.h"
#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/tree_checker.h"
#include "btrfs/tree.h"

/* Unreadable stretches of one tree stepped over before the index is
 * said incomplete. */
#define STEP_OVER_MAX 4096u

struct link {
	uint64_t parent, child, index;
	size_t name_off;
	uint16_t name_len;
	bool subvol;	/* @child is a subvolume (a ROOT_REF), not an inode */
};

struct ino {
	uint64_t objectid;
	uint32_t mode;
	bool linked;	/* has a back reference */
};

struct bi_orphans {
	uint64_t subvol;
	struct ino *ino;
	size_t nino, icap;
	struct link *ln;
	size_t nln, lcap;
	uint8_t *names;
	size_t names_len, names_cap;
	size_t stepped;
	bool any_lost;
	bool root_said;	/* the synthesized root directory said */
	struct bi_orphans *next;
};

static void bi_orphans_free_one(struct bi_orphans *o)
{
	free(o->ino);
	free(o->ln);
	free(o->names);
	free(o);
}

static int add_link(struct bi_orphans *o, uint64_t parent, uint64_t child, uint64_t index,
		    const uint8_t *name, uint16_t len)
{
	if (bi_grow((void **)&o->ln, &o->lcap, o->nln + 1, sizeof(*o->ln)) ||
	    bi_grow((void **)&o->names, &o->names_cap, o->names_len + len, 1))
		return -ENOMEM;
	o->ln[o->nln++] = (struct link){ parent, child, index, o->names_len, len, false };
	memcpy(o->names + o->names_len, name, len);
	o->names_len += len;
	return 0;
}

/* One INODE_REF (@ext false) or INODE_EXTREF item: every link in it the
 * parser passes (a damaged tail is left out), but an empty name, which no
 * path can hold. */
static int take_refs(struct bi_orphans *o, const struct bi_item *it, bool ext)
{
	struct bi_ref_entry e;
	uint32_t pos = 0;
	char why[192];
	while ((ext ? bi_extref_next(it->data, it->size, &pos, &e, why, sizeof(why))
		    : bi_iref_next(it->data, it->size, it->key.offset, &pos, &e, why,
				   sizeof(why))) > 0)
		if (e.name_len &&
		    add_link(o, e.parent, it->key.objectid, e.index, e.name, e.name_len) < 0)
			return -ENOMEM;
	return 0;
}

static int take_item(struct bi_orphans *o, const struct bi_item *it)
{
	if (it->key.type == KT_INODE_REF || it->key.type == KT_INODE_EXTREF)
		return take_refs(o, it, it->key.type == KT_INODE_EXTREF);
	if (it->key.type != KT_INODE_ITEM || it->size < INODE_ITEM_SIZE)
		return 0;
	if (o->nino && o->ino[o->nino - 1].objectid == it->key.objectid)
		return 0;
	if (bi_grow((void **)&o->ino, &o->icap, o->nino + 1, sizeof(*o->ino)))
		return -ENOMEM;
	o->ino[o->nino++] = (struct ino){ it->key.objectid, bi_le32(it->data + 52), false };
	return 0;
}

/* Can the last key of @r be reached? Not when its root (or every path
 * from it) is unreadable: then stepping over is of no use. */
static bool end_reads(struct btrfsimg_fs *fs, const struct bi_root *r)
{
	bi_key max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &max, &max);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	bi_iter_end(&it);
	return rc >= 0;
}

/* The whole tree of @r from @from; on an unreadable stretch, again from
 * the next objectid after the last item read (no inode is below 256,
 * the first a subvolume hands out). */
static int read_tree(struct btrfsimg_fs *fs, struct bi_orphans *o, const struct bi_root *r)
{
	bi_key from = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	for (;;) {
		struct bi_iter it;
		struct bi_item item;
		int rc = bi_iter_start(fs, &it, r, &from, &max);
		while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
			rc = take_item(o, &item) < 0 ? -ENOMEM : 0;
			from = item.key;
		}
		bi_iter_end(&it);
		if (rc == 0 || rc == -ENOMEM)
			return rc;
		if (++o->stepped > STEP_OVER_MAX || from.objectid == UINT64_MAX ||
		    (o->stepped == 1 && !end_reads(fs, r)))
			return 0; /* said by the caller */
		from = (bi_key){ from.objectid < OBJ_FIRST_FREE ? OBJ_FIRST_FREE : from.objectid + 1,
				 0, 0 };
	}
}

/* The subvolumes below @o's directories: each ROOT_REF (subvol, 156,
 * child) of the root tree, the kernel's back reference of a subvolume
 * entry (the directory, the index and the name it had), whose child
 * subvolume is there. Unreadable: none (said by the tree read). */
static int read_root_refs(struct btrfsimg_fs *fs, struct bi_orphans *o)
{
	bi_key min = { o->subvol, KT_ROOT_REF, 0 }, max = { o->subvol, KT_ROOT_REF, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	struct bi_root_ref ref;
	struct bi_root child;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (bi_root_ref_parse(item.data, item.size, &ref, NULL, 0) < 0 || !ref.name_len ||
		    bi_root_find(fs, item.key.offset, &child) < 0)
			continue;
		rc = add_link(o, ref.dirid, item.key.offset, ref.sequence, ref.name, ref.name_len);
		if (rc == 0)
			o->ln[o->nln - 1].subvol = true;
	}
	bi_iter_end(&it);
	return rc == -ENOMEM ? rc : 0;
}

static int link_cmp(const void *pa, const void *pb)
{
	const struct link *a = pa, *b = pb;
	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1;
	if (a->index != b->index)
		return a->index < b->index ? -1 : 1;
	return a->child < b->child ? -1 : a->child > b->child;
}

static struct ino *find_ino(const struct bi_orphans *o, uint64_t objectid)
{
	size_t lo = bi_lower_bound_field(o->ino, o->nino, sizeof(*o->ino),
					 offsetof(struct ino, objectid), objectid);
	return lo < o->nino && o->ino[lo].objectid == objectid ? &o->ino[lo] : NULL;
}

/* Is @objectid a directory whose children are not lost: it has items,
 * or it is the root, synthesized where its own are lost. */
static bool parent_there(const struct bi_orphans *o, uint64_t objectid)
{
	return objectid == OBJ_FIRST_FREE || find_ino(o, objectid);
}

/* Which inodes have a back reference, and whether any is lost: a link to
 * a parent without items, or an inode (not the root) without a link. */
static void mark(struct bi_orphans *o)
{
	if (o->nln > 1)
		qsort(o->ln, o->nln, sizeof(*o->ln), link_cmp);
	for (size_t i = 0; i < o->nln; i++) {
		if (o->ln[i].subvol)
			continue; /* a subvolume is not lost with an inode of this tree */
		struct ino *c = find_ino(o, o->ln[i].child);
		if (c)
			c->linked = true;
		if (c && !parent_there(o, o->ln[i].parent) && o->ln[i].parent != o->ln[i].child)
			o->any_lost = true;
	}
	for (size_t i = 0; i < o->nino; i++)
		o->any_lost |= !o->ino[i].linked && o->ino[i].objectid != OBJ_FIRST_FREE;
}

static int build(struct btrfsimg_fs *fs, uint64_t subvol, struct bi_orphans **out)
{
	struct bi_root r;
	int rc = bi_root_find(fs, subvol, &r);
	if (rc < 0)
		return rc;
	struct bi_orphans *o = calloc(1, sizeof(*o));
	if (!o)
		return bi_err(fs, -ENOMEM, "orphans: out of memory");
	o->subvol = subvol;
	rc = read_tree(fs, o, &r);
	if (rc == 0)
		rc = read_root_refs(fs, o);
	if (rc < 0) {
		bi_orphans_free_one(o);
		return bi_err(fs, rc, "orphans: out of memory");
	}
	mark(o);
	bi_damage(fs, "subvolume %" PRIu64 ": the inodes' back references read to place what "
		  "directory entries miss: %zu inodes, %zu links%s", subvol, o->nino, o->nln,
		  o->stepped > STEP_OVER_MAX ? "; more unreadable stretches than looked past: "
					       "the rest not placed" : "");
	o->next = fs->orphans;
	fs->orphans = o;
	*out = o;
	return 0;
}

static int index_of(struct btrfsimg_fs *fs, uint64_t subvol, struct bi_orphans **out)
{
	for (struct bi_orphans *o = fs->orphans; o; o = o->next)
		if (o->subvol == subvol) {
			*out = o;
			return 0;
		}
	return build(fs, subvol, out);
}

/* The first link of @parent. */
static size_t first_link(const struct bi_orphans *o, uint64_t parent)
{
	return bi_lower_bound_field(o->ln, o->nln, sizeof(*o->ln), offsetof(struct link, parent),
				    parent);
}

static uint8_t file_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return 1;
	case S_IFDIR: return FT_DIR;
	case S_IFCHR: return 3;
	case S_IFBLK: return 4;
	case S_IFIFO: return 5;
	case S_IFSOCK: return 6;
	case S_IFLNK: return 7;
	default: return 0;
	}
}

/* Link @l as an entry to @fn: an inode @c of this subvolume, or a
 * subvolume's root directory. */
static int put_link(const struct bi_orphans *o, const struct link *l, const struct ino *c,
		    btrfsimg_dirent_fn fn, void *ctx)
{
	struct btrfsimg_dirent d = { .name = o->names + l->name_off,
				     .name_len = l->name_len,
				     .index = l->index,
				     .location_objectid = l->child,
				     .location_type = KT_INODE_ITEM,
				     .file_type = c ? file_type(c->mode) : FT_DIR,
				     .kind = BTRFSIMG_TARGET_INODE,
				     .target_subvol = o->subvol,
				     .target_objectid = l->child };
	if (l->subvol) {
		d.location_type = KT_ROOT_ITEM;
		d.kind = BTRFSIMG_TARGET_SUBVOL;
		d.target_subvol = l->child;
		d.target_objectid = OBJ_FIRST_FREE;
	}
	return fn(ctx, &d);
}

/* Does link @l lead somewhere: its inode has items, or it is a
 * subvolume's. */
static bool child_there(const struct bi_orphans *o, const struct link *l)
{
	return l->subvol || find_ino(o, l->child);
}

/* The entries of directory @dir of @subvol by back references: the
 * inodes whose INODE_REF or INODE_EXTREF name it as their parent, each
 * passed to @fn in index order. 0, what @fn returned when not 0, or a
 * negative errno. */
static int children_of(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			       btrfsimg_dirent_fn fn, void *ctx)
{
	struct bi_orphans *o;
	int rc = index_of(fs, subvol, &o);
	for (size_t i = rc == 0 ? first_link(o, dir) : 0; rc == 0 && i < o->nln; i++) {
		const struct link *l = &o->ln[i];
		if (l->parent != dir)
			break;
		if (!child_there(o, l) || (l->child == dir && !l->subvol))
			continue;
		rc = put_link(o, l, l->subvol ? NULL : find_ino(o, l->child), fn, ctx);
	}
	return rc;
}

int bi_orphans_any_lost(struct btrfsimg_fs *fs, uint64_t subvol, bool *any)
{
	struct bi_orphans *o;
	int rc = index_of(fs, subvol, &o);
	*any = rc == 0 && o->any_lost;
	return rc;
}

/* A made-up entry named @name: a lost parent's directory, or an inode
 * without back reference. */
static int put_made_up(const struct bi_orphans *o, const char *name, uint64_t objectid,
		       uint32_t mode, bool lost_dir, btrfsimg_dirent_fn fn, void *ctx)
{
	struct btrfsimg_dirent d = { .name = (const uint8_t *)name,
				     .name_len = strlen(name),
				     .location_objectid = objectid,
				     .location_type = KT_INODE_ITEM,
				     .file_type = file_type(mode),
				     .kind = lost_dir ? BTRFSIMG_TARGET_LOST : BTRFSIMG_TARGET_INODE,
				     .target_subvol = o->subvol,
				     .target_objectid = objectid };
	return fn(ctx, &d);
}

/* The top of lost+found: each lost parent once (links are sorted by
 * parent), then each inode with no link. */
static int list_top(const struct bi_orphans *o, btrfsimg_dirent_fn fn, void *ctx)
{
	char name[24];
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < o->nln; i++) {
		const struct link *l = &o->ln[i];
		if ((i && o->ln[i - 1].parent == l->parent) || parent_there(o, l->parent))
			continue;
		bool any = false; /* a child that survives */
		for (size_t k = i; k < o->nln && o->ln[k].parent == l->parent && !any; k++)
			any = (o->ln[k].child != l->parent || o->ln[k].subvol) &&
			      child_there(o, &o->ln[k]);
		snprintf(name, sizeof(name), "%" PRIu64, l->parent);
		if (any)
			rc = put_made_up(o, name, l->parent, S_IFDIR, true, fn, ctx);
	}
	for (size_t i = 0; rc == 0 && i < o->nino; i++) {
		const struct ino *c = &o->ino[i];
		if (c->linked || c->objectid == OBJ_FIRST_FREE)
			continue;
		snprintf(name, sizeof(name), "#%" PRIu64, c->objectid);
		rc = put_made_up(o, name, c->objectid, c->mode, false, fn, ctx);
	}
	return rc;
}

int bi_orphans_lost(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t parent,
		    btrfsimg_dirent_fn fn, void *ctx)
{
	struct bi_orphans *o;
	int rc = index_of(fs, subvol, &o);
	if (rc < 0)
		return rc;
	if (parent == 0)
		return list_top(o, fn, ctx);
	return children_of(fs, subvol, parent, fn, ctx);
}

int bi_orphans_merge_begin(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			   btrfsimg_dirent_fn fn, void *ctx, struct bi_orphans_merge *m)
{
	*m = (struct bi_orphans_merge){ .dir = dir, .fn = fn, .ctx = ctx };
	int rc = index_of(fs, subvol, &m->o);
	if (rc == 0)
		m->next = first_link(m->o, dir);
	return rc;
}

/* The links of the directory before index @upto (all: UINT64_MAX), those
 * a listed entry has the index of left out. */
static int merge_upto(struct bi_orphans_merge *m, uint64_t upto, bool listed)
{
	const struct bi_orphans *o = m->o;
	int rc = 0;
	for (; rc == 0 && m->next < o->nln; m->next++) {
		const struct link *l = &o->ln[m->next];
		if (l->parent != m->dir || l->index > upto || (l->index == upto && !listed))
			break;
		if (child_there(o, l) && (l->child != m->dir || l->subvol) &&
		    !(listed && l->index == upto))
			rc = put_link(o, l, l->subvol ? NULL : find_ino(o, l->child), m->fn, m->ctx);
	}
	return rc;
}

int bi_orphans_merge_fn(void *ctx, const struct btrfsimg_dirent *e)
{
	struct bi_orphans_merge *m = ctx;
	int rc = merge_upto(m, e->index, true);
	return rc ? rc : m->fn(m->ctx, e);
}

int bi_orphans_merge_end(struct bi_orphans_merge *m)
{
	return merge_upto(m, UINT64_MAX, false);
}

struct find {
	const uint8_t *name;
	size_t len;
	struct btrfsimg_dirent *out;
};

static int find_name(void *ctx, const struct btrfsimg_dirent *d)
{
	struct find *f = ctx;
	if (d->name_len != f->len || memcmp(d->name, f->name, f->len) != 0)
		return 0;
	*f->out = *d;
	f->out->name = f->name; /* as lookups give it: the caller's bytes */
	return 1;
}

int bi_orphans_lookup(struct btrfsimg_fs *fs, const struct btrfsimg_dirent *dir,
		      const uint8_t *name, size_t len, struct btrfsimg_dirent *out)
{
	struct find f = { name, len, out };
	uint64_t subvol = dir->target_subvol, ino = dir->target_objectid;
	bool any = false;
	int rc;
	if (dir->kind == BTRFSIMG_TARGET_LOST) {
		rc = bi_orphans_lost(fs, subvol, ino, find_name, &f);
	} else if (ino == OBJ_FIRST_FREE && len == strlen(BTRFSIMG_LOST_FOUND) &&
		   memcmp(name, BTRFSIMG_LOST_FOUND, len) == 0) {
		rc = bi_orphans_any_lost(fs, subvol, &any);
		if (rc == 0 && any)
			*out = (struct btrfsimg_dirent){ .name = name, .name_len = len,
							 .file_type = FT_DIR,
							 .kind = BTRFSIMG_TARGET_LOST,
							 .target_subvol = subvol };
		rc = rc < 0 ? rc : any;
	} else {
		rc = children_of(fs, subvol, ino, find_name, &f);
	}
	return rc < 0 ? rc : rc > 0 ? 0 : -ENOENT;
}

void bi_orphans_dir_inode(uint64_t objectid, struct btrfsimg_inode *out)
{
	*out = (struct btrfsimg_inode){ .objectid = objectid, .nlink = 1,
					.mode = S_IFDIR | 0500 };
}

/* Items of the subvolume survive that say its root directory was there:
 * an inode whose back reference names it, or any inode at all (every
 * inode of a subvolume hangs below its root). */
static bool root_was_there(const struct bi_orphans *o)
{
	size_t i = first_link(o, OBJ_FIRST_FREE);
	return o->nino || (i < o->nln && o->ln[i].parent == OBJ_FIRST_FREE);
}

int bi_orphans_root_dir(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t objectid, int rc,
			struct btrfsimg_inode *out)
{
	if (objectid != OBJ_FIRST_FREE || rc == -ENOMEM || rc == -EINVAL)
		return rc;
	char why[sizeof(fs->err)];
	snprintf(why, sizeof(why), "%s", fs->err);
	struct bi_orphans *o;
	int irc = index_of(fs, subvol, &o);
	if (irc == -ENOMEM)
		return irc;
	if (irc < 0 || !root_was_there(o)) {
		snprintf(fs->err, sizeof(fs->err), "%s", why); /* the inode's own error */
		return rc;
	}
	*out = (struct btrfsimg_inode){ .subvol = subvol, .objectid = objectid, .nlink = 1,
					.mode = S_IFDIR | 0755, .synthesized = true };
	if (!o->root_said)
		bi_damage(fs, "subvolume %" PRIu64 ": its root directory (inode %" PRIu64 ") is "
			  "lost (%s) while %zu inodes of its tree survive: synthesized: a directory, "
			  "mode 040755 assumed, owner, size and times unknown; listed from what "
			  "survives of its entries and the back references naming it",
			  subvol, objectid, why, o->nino);
	o->root_said = true;
	return 0;
}

int bi_orphans_lost_found(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			  struct btrfsimg_dirent *out)
{
	bool any = false;
	int rc = dir == OBJ_FIRST_FREE ? bi_orphans_any_lost(fs, subvol, &any) : 0;
	if (rc < 0 || !any)
		return rc;
	*out = (struct btrfsimg_dirent){ .name = (const uint8_t *)BTRFSIMG_LOST_FOUND,
					 .name_len = strlen(BTRFSIMG_LOST_FOUND),
					 .index = UINT64_MAX,
					 .file_type = FT_DIR,
					 .kind = BTRFSIMG_TARGET_LOST,
					 .target_subvol = subvol };
	return 1;
}

int btrfsimg_lost_readdir(btrfsimg_fs *fs, uint64_t subvol, uint64_t parent,
			  btrfsimg_dirent_fn fn, void *ctx)
{
	if (!fs || !fn || !bi_opened(fs, __func__))
		return -EINVAL;
	return bi_orphans_lost(fs, subvol, parent, fn, ctx);
}

int btrfsimg_lost_lookup(btrfsimg_fs *fs, uint64_t subvol, uint64_t parent, const void *name,
			 size_t name_len, struct btrfsimg_dirent *out)
{
	if (!fs || !name || !out || !bi_opened(fs, __func__))
		return -EINVAL;
	struct btrfsimg_dirent d = { .kind = BTRFSIMG_TARGET_LOST, .target_subvol = subvol,
				     .target_objectid = parent };
	return bi_orphans_lookup(fs, &d, name, name_len, out);
}

void btrfsimg_lost_dir_inode(uint64_t subvol, uint64_t parent, struct btrfsimg_inode *out)
{
	bi_orphans_dir_inode(parent, out);
	out->subvol = subvol;
}

void bi_orphans_free(struct btrfsimg_fs *fs)
{
	while (fs->orphans) {
		struct bi_orphans *o = fs->orphans;
		fs->orphans = o->next;
		bi_orphans_free_one(o);
	}
}
