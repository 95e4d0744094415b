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

#include "files/dir.h"

#include "base/grow.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/root.h"
#include "btrfs/salvage.h"
#include "btrfs/tree.h"
#include "files/inode.h"
#include "files/orphans.h"

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

/* Directory @dir of @r must exist and be a directory: 0 (*@made_up: it
 * is a synthesized root, its entries then read in damaged mode), or a
 * negative errno. */
static int need_dir(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
		    bool *made_up)
{
	struct btrfsimg_inode ino;
	int rc = bi_inode_read(fs, r, dir, &ino);
	if (rc == 0 && !S_ISDIR(ino.mode))
		rc = bi_err(fs, -ENOTDIR,
			    "inode %" PRIu64 " of subvolume %" PRIu64
			    " is not a directory (mode 0%o)",
			    dir, r->id, ino.mode);
	*made_up = rc == 0 && ino.synthesized;
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

/* ------------------------------------------- one directory, cross-checked
 *
 * A name is held three times (btrfs check's rules, check/main.c and
 * check/mode-lowmem.c): DIR_ITEM (dir, 84, name hash) for lookup,
 * DIR_INDEX (dir, 96, index) for readdir, and the child's INODE_REF
 * (child, 12, dir) {index, name} or INODE_EXTREF back. All three must
 * agree on name, location, type and index. Where they do not, the kernel
 * lists what DIR_INDEX holds and opens what DIR_ITEM holds; so do we, and
 * every front end gives that one answer, each disagreement reported as
 * damage:
 *  - an index whose item (same name) leads elsewhere: listed, leading
 *    where the item leads (what stat/open of the listed path reach);
 *  - an index whose name has no item: left out (stat of it fails);
 *  - an index repeating a name already listed: left out (one path, once);
 *  - an item no index lists: not listed (readdir does not show it),
 *    lookup still finds it.
 * DIR_ITEM and DIR_INDEX of one directory are neighbours in key order (84,
 * then 96, nothing between), so one pass of the iterator reads both. */

#define NO_ITEM UINT32_MAX

/* One entry of either kind, copied out of its leaf. */
struct dent {
	bi_key key;		/* the item's: (dir, 84, hash) or (dir, 96, index) */
	bi_key loc;
	uint64_t block;
	uint32_t slot;
	uint32_t item;		/* an index's item entry (same name), or NO_ITEM */
	uint32_t via;		/* an index's item entry that says where it leads, or
				   NO_ITEM: where it says itself */
	size_t name_off;	/* into bi_dlist.names */
	uint16_t name_len;
	uint8_t type;
	bool taken;		/* an item: listed by an index */
	bool shown;		/* an index: listed */
};

struct bi_dlist {
	struct btrfsimg_fs *fs;
	uint64_t subvol, dir;
	struct dent *v[2];	/* [0] DIR_ITEM entries in key order, [1] DIR_INDEX */
	size_t n[2], cap[2];
	uint8_t *names;
	size_t names_len, names_cap;
	uint32_t *slots;	/* open addressing over v[0] by location objectid: entry + 1 */
	size_t mask, slots_cap;
	bool cut;		/* the listing stopped at an error */
	bool busy;		/* fs->dirs in use (a callback listing again gets its own) */
};

/* Listings larger than this many entries give their memory back after. */
#define DL_KEEP 65536

static void dl_free(struct bi_dlist *dl)
{
	if (!dl)
		return;
	free(dl->v[0]);
	free(dl->v[1]);
	free(dl->names);
	free(dl->slots);
	free(dl);
}

void bi_dir_bufs_free(struct btrfsimg_fs *fs)
{
	dl_free(fs->dirs);
	fs->dirs = NULL;
}

/* The handle's buffers, reused from directory to directory: fresh ones for
 * each cost a walk a third more time in page faults (freed memory went
 * back to the system and came back zeroed). NULL: no memory. */
static struct bi_dlist *dl_take(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir)
{
	struct bi_dlist *dl = fs->dirs;
	if (!dl || dl->busy) {
		dl = calloc(1, sizeof(*dl));
		if (!dl)
			return NULL;
		if (!fs->dirs)
			fs->dirs = dl;
	}
	dl->fs = fs;
	dl->subvol = subvol;
	dl->dir = dir;
	dl->n[0] = dl->n[1] = dl->names_len = 0;
	dl->cut = false;
	dl->busy = true;
	return dl;
}

static void dl_give(struct bi_dlist *dl)
{
	struct btrfsimg_fs *fs = dl->fs;
	dl->busy = false;
	if (dl != fs->dirs)
		dl_free(dl);
	else if (dl->cap[0] + dl->cap[1] > DL_KEEP)
		bi_dir_bufs_free(fs);
}

static int dl_add(struct bi_dlist *dl, int k, const struct bi_item *it, const struct bi_dir_entry *d)
{
	if (dl->n[k] >= NO_ITEM ||
	    bi_grow((void **)&dl->v[k], &dl->cap[k], dl->n[k] + 1, sizeof(struct dent)) < 0 ||
	    bi_grow((void **)&dl->names, &dl->names_cap, dl->names_len + d->name_len, 1) < 0)
		return bi_err(dl->fs, -ENOMEM, "out of memory listing directory %" PRIu64, dl->dir);
	dl->v[k][dl->n[k]++] = (struct dent){ .key = it->key, .loc = d->location,
					      .block = it->block, .slot = it->slot,
					      .item = NO_ITEM, .via = NO_ITEM, .name_off = dl->names_len,
					      .name_len = d->name_len, .type = d->type };
	memcpy(dl->names + dl->names_len, d->name, d->name_len);
	dl->names_len += d->name_len;
	return 0;
}

static const uint8_t *dl_name(const struct bi_dlist *dl, const struct dent *e)
{
	return dl->names + e->name_off;
}

static const char *type_name(uint8_t t)
{
	return t == KT_INODE_ITEM ? "INODE_ITEM" : t == KT_ROOT_ITEM ? "ROOT_ITEM" : "?";
}

/* "(D DIR_INDEX I) at block B slot S -> (X INODE_ITEM) type T", for messages. */
static const char *dent_str(const struct dent *e, char *buf, size_t cap)
{
	snprintf(buf, cap,
		 "(%" PRIu64 " %s %" PRIu64 ") at block %" PRIu64 " slot %u -> (%" PRIu64
		 " %s) type %u",
		 e->key.objectid, e->key.type == KT_DIR_ITEM ? "DIR_ITEM" : "DIR_INDEX",
		 e->key.offset, e->block, e->slot, e->loc.objectid, type_name(e->loc.type),
		 e->type);
	return buf;
}

/* Does an entry of this item before @d (from v[0][@from]) have its name? */
static bool dl_seen(const struct bi_dlist *dl, size_t from, const struct bi_dir_entry *d)
{
	for (size_t i = from; i < dl->n[0]; i++)
		if (dl->v[0][i].name_len == d->name_len &&
		    memcmp(dl_name(dl, &dl->v[0][i]), d->name, d->name_len) == 0)
			return true;
	return false;
}

/* A DIR_ITEM: every entry, after the kernel's checks (bi_dir_item_check's,
 * in the same pass). A damaged item is reported and its names left out
 * (their indexes then have no item); it does not end the listing. */
static int dl_read_item(struct bi_dlist *dl, const struct bi_item *it)
{
	char why[192];
	struct bi_dir_entry d;
	uint32_t pos = 0;
	size_t n0 = dl->n[0], names0 = dl->names_len;
	int rc;
	while ((rc = bi_dir_item_next(it->data, it->size, KT_DIR_ITEM, &pos, &d, why,
				      sizeof(why))) > 0) {
		uint64_t h = bi_name_hash(d.name, d.name_len);
		if (h != it->key.offset) {
			rc = bi_why(why, sizeof(why),
				    "name hash mismatch with key (entry at %u), have 0x%" PRIx64
				    " expect 0x%" PRIx64,
				    d.offset, h, it->key.offset);
			break;
		}
		if (dl_seen(dl, n0, &d))
			bi_damage(dl->fs,
				  "corrupt dir item: root=%" PRIu64 " block=%" PRIu64
				  " slot=%u, name at %u repeats an earlier entry: lookup finds the "
				  "first only, this one is left out",
				  dl->subvol, it->block, it->slot, d.offset);
		else if ((d.location.type == KT_INODE_ITEM || d.location.type == KT_ROOT_ITEM) &&
			 (rc = dl_add(dl, 0, it, &d)) < 0)
			return rc;
	}
	if (rc == 0 && pos == 0)
		rc = bi_why(why, sizeof(why), "empty dir item, have %u bytes expect >= %u", it->size,
			    DI_SIZE);
	if (rc < 0) {
		dl->n[0] = n0;
		dl->names_len = names0;
		bi_damage(dl->fs,
			  "corrupt dir item: root=%" PRIu64 " block=%" PRIu64
			  " slot=%u, %s: its names are left out of directory %" PRIu64,
			  dl->subvol, it->block, it->slot, why, dl->dir);
	}
	return 0;
}

/* A DIR_INDEX: what bi_dir_item_check does for one (every entry parses,
 * at least one; no name hash to compare), keeping the first entry, the
 * only one btrfs_real_readdir uses. */
static int dl_read_index(struct bi_dlist *dl, const struct bi_item *it)
{
	char why[192];
	struct bi_dir_entry first, d;
	uint32_t pos = 0;
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
		return bi_item_err(dl->fs, rc, "dir index", dl->subvol, it->block, it->slot, "%s",
				   why);
	return dl_add(dl, 1, it, &first);
}

/* Both runs of the directory, in key order: 0, or the first error (what
 * was read before it is kept, dl->cut set). */
static int dl_read(struct bi_dlist *dl, const struct bi_root *r)
{
	bi_key min = { dl->dir, KT_DIR_ITEM, 0 }, max = { dl->dir, KT_DIR_INDEX, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(dl->fs, &it, r, &min, &max);
	/* Each directory is listed once per walk: its leaves need not stay in
	 * the cache (keeping them cost a walk 8% more time in page faults). */
	if (rc == 0)
		bi_iter_stream(&it);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		if (item.key.type == KT_DIR_ITEM)
			rc = dl_read_item(dl, &item);
		else if (item.key.type == KT_DIR_INDEX && item.key.offset >= 2)
			rc = dl_read_index(dl, &item); /* 0 and 1 are "." and ".." */
		else
			rc = 0;
	}
	bi_iter_end(&it);
	dl->cut = rc < 0;
	return rc;
}

/* Items by location objectid: an agreeing index finds its item there
 * without hashing its name. */
static size_t obj_slot(uint64_t objectid, size_t mask)
{
	return (size_t)((objectid * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static int dl_hash(struct bi_dlist *dl)
{
	size_t want = 16;
	while (want < 2 * dl->n[0])
		want *= 2;
	if (bi_grow((void **)&dl->slots, &dl->slots_cap, want, sizeof(*dl->slots)) < 0)
		return bi_err(dl->fs, -ENOMEM, "out of memory listing directory %" PRIu64, dl->dir);
	memset(dl->slots, 0, want * sizeof(*dl->slots));
	dl->mask = want - 1;
	for (size_t i = 0; i < dl->n[0]; i++) {
		size_t s = obj_slot(dl->v[0][i].loc.objectid, dl->mask);
		while (dl->slots[s])
			s = (s + 1) & dl->mask;
		dl->slots[s] = (uint32_t)i + 1;
	}
	return 0;
}

static bool same_name(const struct bi_dlist *dl, const struct dent *a, const struct dent *b)
{
	return a->name_len == b->name_len &&
	       memcmp(dl_name(dl, a), dl_name(dl, b), a->name_len) == 0;
}

/* The DIR_ITEM entry named as index @x, or NO_ITEM: first among the items
 * leading where @x does (the usual case), else by name hash, a binary
 * search (items are in key order: by hash). Names are unique among items
 * (dl_seen), so both ways find the entry lookup finds. */
static uint32_t dl_find(const struct bi_dlist *dl, const struct dent *x)
{
	if (!dl->n[0])
		return NO_ITEM;
	/* bounded: a hostile directory can point every entry at one inode */
	size_t probes = 0;
	for (size_t s = obj_slot(x->loc.objectid, dl->mask); dl->slots[s] && probes++ < 64;
	     s = (s + 1) & dl->mask) {
		const struct dent *d = &dl->v[0][dl->slots[s] - 1];
		if (d->loc.objectid == x->loc.objectid && same_name(dl, d, x))
			return dl->slots[s] - 1;
	}
	uint64_t h = bi_name_hash(dl_name(dl, x), x->name_len);
	size_t lo = 0, hi = dl->n[0];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (dl->v[0][mid].key.offset < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < dl->n[0] && dl->v[0][lo].key.offset == h; lo++)
		if (same_name(dl, &dl->v[0][lo], x))
			return (uint32_t)lo;
	return NO_ITEM;
}

static bool same_target(const struct dent *a, const struct dent *b)
{
	return a->loc.objectid == b->loc.objectid && a->loc.type == b->loc.type &&
	       a->type == b->type;
}

static void dl_damage(struct bi_dlist *dl, const struct dent *x, const struct dent *d,
		      const char *what)
{
	char nb[96], xs[160], ds[160];
	bi_damage(dl->fs,
		  "directory entries disagree: subvolume %" PRIu64 " directory %" PRIu64
		  " name '%s': %s%s%s%s, %s",
		  dl->subvol, dl->dir, esc(dl_name(dl, x ? x : d), (x ? x : d)->name_len, nb,
					   sizeof(nb)),
		  x ? "dir index " : "", x ? dent_str(x, xs, sizeof(xs)) : "",
		  x && d ? ", dir item " : d ? "dir item " : "", d ? dent_str(d, ds, sizeof(ds)) : "",
		  what);
}

/* Which index is listed, and where it leads (see the rule above). Agreeing
 * pairs first, so that a stray index naming a listed name is the one left
 * out whatever the index order. */
static void dl_match(struct bi_dlist *dl)
{
	for (size_t i = 0; i < dl->n[1]; i++) {
		struct dent *x = &dl->v[1][i];
		x->item = dl_find(dl, x);
		if (x->item != NO_ITEM && !dl->v[0][x->item].taken &&
		    same_target(x, &dl->v[0][x->item]))
			x->shown = dl->v[0][x->item].taken = true;
	}
	for (size_t i = 0; i < dl->n[1]; i++) {
		struct dent *x = &dl->v[1][i];
		struct dent *d = x->item == NO_ITEM ? NULL : &dl->v[0][x->item];
		if (x->shown)
			continue;
		if (!d) {
			dl_damage(dl, x, NULL, "no dir item has the name: left out (lookup "
					       "cannot reach it)");
		} else if (d->taken) {
			dl_damage(dl, x, d, "the name is listed already: left out");
		} else {
			dl_damage(dl, x, d, "listed leading where the dir item (lookup) leads");
			x->via = x->item;
			x->shown = d->taken = true;
		}
	}
	for (size_t i = 0; i < dl->n[0] && !dl->cut; i++)
		if (!dl->v[0][i].taken)
			dl_damage(dl, NULL, &dl->v[0][i],
				  "no dir index lists it: not listed (lookup finds it)");
}

static int dl_emit(struct bi_dlist *dl, btrfsimg_dirent_fn fn, void *ctx)
{
	struct btrfsimg_dirent e;
	int rc = 0;
	for (size_t i = 0; i < dl->n[1] && rc == 0; i++) {
		const struct dent *x = &dl->v[1][i];
		if (!x->shown)
			continue;
		const struct dent *t = x->via == NO_ITEM ? x : &dl->v[0][x->via];
		e = (struct btrfsimg_dirent){ .name = dl_name(dl, x), .name_len = x->name_len,
					      .index = x->key.offset,
					      .location_objectid = t->loc.objectid,
					      .location_type = t->loc.type, .file_type = t->type };
		rc = bi_dir_resolve(dl->fs, dl->subvol, dl->dir, &e);
		/* readdir's d_ino and d_type stay the index's, as the kernel's */
		e.location_objectid = x->loc.objectid;
		e.location_type = x->loc.type;
		e.file_type = x->type;
		if (rc == 0)
			rc = fn(ctx, &e);
	}
	return rc;
}

/* ------------------------------------------------------------- readdir */

/* The listing, and in damaged mode (@damaged: the listing failed, or a
 * salvage opened the filesystem, whose trees may miss leaves without an
 * error) the inodes whose back references name the directory at an index
 * it lacks, at that index (files/orphans.h). A filesystem read whole pays
 * nothing. */
static int emit(struct bi_dlist *dl, bool damaged, btrfsimg_dirent_fn fn, void *ctx)
{
	struct bi_orphans_merge m;
	if (!damaged || bi_orphans_merge_begin(dl->fs, dl->subvol, dl->dir, fn, ctx, &m) < 0)
		return dl_emit(dl, fn, ctx);
	int rc = dl_emit(dl, bi_orphans_merge_fn, &m);
	return rc ? rc : bi_orphans_merge_end(&m);
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
	bool made_up;
	if ((rc = need_dir(fs, &r, dir, &made_up)) < 0)
		return rc;
	struct bi_dlist *dl = dl_take(fs, subvol, dir);
	if (!dl)
		return bi_err(fs, -ENOMEM, "out of memory listing directory %" PRIu64, dir);
	/* On an error, what was read before it is still listed. */
	int read_rc = dl_read(dl, &r);
	if (read_rc == -ENOMEM)
		rc = read_rc;
	else
		rc = dl_hash(dl);
	if (rc == 0) {
		dl_match(dl);
		rc = emit(dl, read_rc < 0 || bi_salvage_trees_rebuilt(fs) || made_up, fn, ctx);
	}
	dl_give(dl);
	return rc != 0 ? rc : read_rc;
}

/* ------------------------------------------------------------ backrefs */

/* Does INODE_REF / INODE_EXTREF @it name (@dir, @name)? 1 (*index set) or
 * 0; a damaged item is reported and names nothing. */
static int ref_item_find(struct btrfsimg_fs *fs, uint64_t subvol, const struct bi_item *it,
			 uint64_t dir, const uint8_t *name, size_t len, uint64_t *index)
{
	bool ext = it->key.type == KT_INODE_EXTREF;
	struct bi_ref_entry e;
	uint32_t pos = 0;
	char why[192];
	int rc;
	while ((rc = ext ? bi_extref_next(it->data, it->size, &pos, &e, why, sizeof(why))
			 : bi_iref_next(it->data, it->size, it->key.offset, &pos, &e, why,
					sizeof(why))) > 0)
		if (e.parent == dir && e.name_len == len && memcmp(e.name, name, len) == 0) {
			*index = e.index;
			return 1;
		}
	if (rc < 0)
		bi_damage(fs, "corrupt %s: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s",
			  ext ? "inode extref" : "inode ref", subvol, it->block, it->slot, why);
	return 0;
}

/* Search [@min, @max] of @r for a backref naming (@dir, @name). */
static int ref_find(struct btrfsimg_fs *fs, const struct bi_root *r, const bi_key *min,
		    const bi_key *max, uint64_t dir, const uint8_t *name, size_t len,
		    uint64_t *index)
{
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, min, max), found = 0;
	while (rc == 0 && !found && (rc = bi_iter_next(&it, &item)) > 0) {
		found = ref_item_find(fs, r->id, &item, dir, name, len, index);
		rc = 0;
	}
	bi_iter_end(&it);
	return rc < 0 ? rc : found;
}

/* The INODE_EXTREF of (@ino, @dir, @name): where names go once INODE_REF
 * (ino, 12, dir) is full. */
static int extref_find(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t ino,
		       uint64_t dir, const uint8_t *name, size_t len, uint64_t *index)
{
	bi_key k = { ino, KT_INODE_EXTREF, bi_extref_hash(dir, name, len) };
	return ref_find(fs, r, &k, &k, dir, name, len, index);
}

static void ref_damage(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
		       const struct btrfsimg_dirent *e, bool found, uint64_t index)
{
	char nb[96];
	if (found)
		bi_damage(fs,
			  "directory entries disagree: subvolume %" PRIu64 " directory %" PRIu64
			  " name '%s': dir index (%" PRIu64 " DIR_INDEX %" PRIu64 ") leads to (%" PRIu64
			  " INODE_ITEM), its inode ref (%" PRIu64 " INODE_REF %" PRIu64
			  ") has index %" PRIu64,
			  subvol, dir, esc(e->name, e->name_len, nb, sizeof(nb)), dir, e->index,
			  e->target_objectid, e->target_objectid, dir, index);
	else
		bi_damage(fs,
			  "directory entries disagree: subvolume %" PRIu64 " directory %" PRIu64
			  " name '%s': dir index (%" PRIu64 " DIR_INDEX %" PRIu64 ") leads to (%" PRIu64
			  " INODE_ITEM), which has no inode ref or extref to directory %" PRIu64
			  " by that name",
			  subvol, dir, esc(e->name, e->name_len, nb, sizeof(nb)), dir, e->index,
			  e->target_objectid, dir);
}

int bi_dir_child_inode(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
		       const struct btrfsimg_dirent *e, struct btrfsimg_inode *out)
{
	uint64_t ino = e->target_objectid, index = 0;
	/* INODE_ITEM (ino, 1, 0) and INODE_REF (ino, 12, dir) are neighbours
	 * (only refs to lower directories between): one descent reads both. */
	bi_key min = { ino, KT_INODE_ITEM, 0 }, max = { ino, KT_INODE_REF, dir };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &min, &max), found = 0;
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc == 0 || (rc > 0 && item.key.type != KT_INODE_ITEM))
		rc = bi_err(fs, -ENOENT, "no inode %" PRIu64 " in subvolume %" PRIu64, ino,
			    r->id);
	if (rc > 0)
		rc = bi_inode_item(fs, r, &item, out);
	while (rc == 0 && !found && (rc = bi_iter_next(&it, &item)) > 0) {
		if (item.key.offset == dir)
			found = ref_item_find(fs, r->id, &item, dir, e->name, e->name_len, &index);
		rc = 0;
	}
	bi_iter_end(&it);
	if (rc == 0 && !found)
		found = extref_find(fs, r, ino, dir, e->name, e->name_len, &index);
	if (found < 0)
		return found;
	if (rc == 0 && (!found || index != e->index))
		ref_damage(fs, r->id, dir, e, found, index);
	return rc;
}

/* The index ROOT_REF (subvol, 156, child) gives a subvolume entry (its
 * sequence): 1, or 0 without one (bi_dir_resolve made the entry a stub). */
static int root_ref_index(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t child,
			  uint64_t *index)
{
	bi_key k = { subvol, KT_ROOT_REF, child };
	struct bi_iter it;
	struct bi_item item;
	struct bi_root_ref ref;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &k, &k), found = 0;
	if (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0 &&
	    bi_root_ref_parse(item.data, item.size, &ref, NULL, 0) == 0) {
		*index = ref.sequence;
		found = 1;
	}
	bi_iter_end(&it);
	return rc < 0 ? rc : found;
}

/* The index the backref of a looked-up entry gives: 1 (*index), 0 none
 * (reported), or an error. */
static int lookup_index(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
			const struct btrfsimg_dirent *e, uint64_t item_hash, uint64_t *index)
{
	uint64_t ino = e->location_objectid;
	char nb[96];
	if (e->kind == BTRFSIMG_TARGET_SUBVOL)
		return root_ref_index(fs, r->id, ino, index);
	bi_key k = { ino, KT_INODE_REF, dir };
	int found = ref_find(fs, r, &k, &k, dir, e->name, e->name_len, index);
	if (found == 0)
		found = extref_find(fs, r, ino, dir, e->name, e->name_len, index);
	if (found == 0)
		bi_damage(fs,
			  "directory entries disagree: subvolume %" PRIu64 " directory %" PRIu64
			  " name '%s': dir item (%" PRIu64 " DIR_ITEM %" PRIu64 ") -> (%" PRIu64
			  " INODE_ITEM), which has no inode ref or extref to directory %" PRIu64
			  " by that name",
			  r->id, dir, esc(e->name, e->name_len, nb, sizeof(nb)), dir, item_hash, ino,
			  dir);
	return found;
}

/* A name lookup found (DIR_ITEM) must be listed too: the child's backref
 * gives the index (ROOT_REF's sequence for a subvolume), and DIR_INDEX
 * (dir, 96, index) must hold the same name and location. Reported as
 * damage; the lookup's answer stands (it is the kernel's). */
static int lookup_check(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
			const struct btrfsimg_dirent *e, uint64_t item_hash)
{
	uint64_t index = 0;
	if (e->kind == BTRFSIMG_TARGET_STUB)
		return 0; /* no ROOT_REF names it: nothing to compare */
	int found = lookup_index(fs, r, dir, e, item_hash, &index);
	if (found <= 0)
		return found;
	bi_key ik = { dir, KT_DIR_INDEX, index };
	struct bi_iter it;
	struct bi_item item;
	struct bi_dir_entry d;
	uint32_t pos = 0;
	bool same = false, bad = false;
	char why[192], nb[96];
	int rc = bi_iter_start(fs, &it, r, &ik, &ik);
	if (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = bi_dir_item_next(item.data, item.size, KT_DIR_INDEX, &pos, &d, why, sizeof(why));
		if ((bad = rc < 0))
			bi_damage(fs, "corrupt dir index: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s",
				  r->id, item.block, item.slot, why);
		same = rc > 0 && d.name_len == e->name_len &&
		       memcmp(d.name, e->name, d.name_len) == 0 &&
		       d.location.objectid == e->location_objectid &&
		       d.location.type == e->location_type && d.type == e->file_type;
		rc = 0;
	}
	bi_iter_end(&it);
	if (rc == 0 && !same && !bad)
		bi_damage(fs,
			  "directory entries disagree: subvolume %" PRIu64 " directory %" PRIu64
			  " name '%s': dir item (%" PRIu64 " DIR_ITEM %" PRIu64 ") -> (%" PRIu64
			  " %s), its backref gives index %" PRIu64 " but dir index (%" PRIu64
			  " DIR_INDEX %" PRIu64 ") %s",
			  r->id, dir, esc(e->name, e->name_len, nb, sizeof(nb)), dir, item_hash,
			  e->location_objectid, type_name(e->location_type), index, dir, index,
			  pos ? "holds another name or location: readdir lists that instead"
			      : "is missing: readdir does not list the name");
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

/* @name is the safe form of a damaged name (base/name.h): the entry
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

static int lookup_entry(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
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
	rc = bi_dir_resolve(fs, r->id, dir, out);
	if (rc == 0)
		rc = lookup_check(fs, r, dir, out, k.offset);
	return rc;
}

/* Is @dir the subvolume's root directory, synthesized (damaged mode)?
 * Asked only once a name is not found. */
static bool root_made_up(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir)
{
	struct btrfsimg_inode ino;
	char keep[sizeof(fs->err)];
	snprintf(keep, sizeof(keep), "%s", fs->err);
	bool made_up = dir == OBJ_FIRST_FREE && bi_inode_read(fs, r, dir, &ino) == 0 &&
		       ino.synthesized;
	snprintf(fs->err, sizeof(fs->err), "%s", keep); /* the lookup's message */
	return made_up;
}

/* Entry @name of @dir; damaged (the entry unreadable, or a salvage's
 * tree, which may miss leaves without an error), where a listing puts an
 * inode by its back references (files/orphans.h), a lookup finds it. */
static int lookup_in(struct btrfsimg_fs *fs, const struct bi_root *r, uint64_t dir,
		     const uint8_t *name, size_t len, struct btrfsimg_dirent *out)
{
	int rc = lookup_entry(fs, r, dir, name, len, out);
	if (rc >= 0 || rc == -ENOMEM ||
	    (rc == -ENOENT && !bi_salvage_trees_rebuilt(fs) && !root_made_up(fs, r, dir)))
		return rc;
	struct btrfsimg_dirent d = { .kind = BTRFSIMG_TARGET_INODE, .target_subvol = r->id,
				     .target_objectid = dir };
	char why[sizeof(fs->err)];
	snprintf(why, sizeof(why), "%s", fs->err);
	if (bi_orphans_lookup(fs, &d, name, len, out) < 0) {
		snprintf(fs->err, sizeof(fs->err), "%s", why); /* the entry's own error */
		return rc;
	}
	bi_damage(fs, "%s; found by its inode's back reference instead", why);
	return 0;
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
	bool made_up;
	if (rc == 0)
		rc = need_dir(fs, &r, dir, &made_up);
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
	if (rc == 0 && cur->kind == BTRFSIMG_TARGET_LOST) /* made up: only back references */
		rc = bi_orphans_lookup(w->fs, cur, (const uint8_t *)comp, len,
				       &w->stack[w->depth + 1]);
	else if (rc == 0)
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
