/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay, in memory.
 *
 * After an fsync the kernel writes the fsynced inodes' items into one log
 * tree per subvolume (found through the log root tree, superblock
 * log_root) instead of committing. A crash leaves log_root != 0, and the
 * next mount replays the log into the fs trees before anything is shown.
 * These files compute what that replay produces, as overlays (btrfs/overlay.c)
 * over the fs trees and the csum tree; the image is never written.
 *
 * This file holds the walks (which log item is replayed when, and by which
 * operation), the checks every log passes first, and the entry points:
 * bi_lr_replay (pure, on item sources) and bi_log_replay (on an open
 * image). The state replay works on is in state.c, the operations in
 * ops.c; state.h is what the three share.
 *
 * The replay follows the kernel's (fs/btrfs/tree-log.c) step by step,
 * because its result is defined by that procedure rather than by a simpler
 * rule: three walks over every log tree (subvolumes in descending id
 * order), then a link count fixup per subvolume:
 *
 *   1 INODES     for each INODE_ITEM: drop xattrs not in the log, for a
 *                directory unlink the entries of the logged index ranges
 *                (DIR_LOG_INDEX items) that are not in the log, copy the
 *                inode item, truncate a regular file's extents past i_size,
 *                and remember the inode for the fixup
 *   2 DIR_INDEX  for each DIR_INDEX: add the name unless its inode ref is
 *                logged (added in walk 3) or its inode does not exist
 *   3 ALL        xattrs are copied; inode refs add their names (first
 *                unlinking conflicting ones) and replace the ref items;
 *                file extents drop the range they cover and are inserted,
 *                with their checksums
 *   fixup        nlink := the number of names (refs + extrefs); an inode
 *                left with none becomes an orphan, which mount removes
 *
 * State (state.c): a view per tree = the tree's own items plus an
 * ordered map (AVL) of replaced items and tombstones. An in-memory inode
 * lives while it is referenced, as the kernel's do during replay (nothing
 * is cached: the superblock is not active yet, so the last iput evicts).
 *
 * Approximations, each for a reason:
 *  - when replay itself unlinks a name, the kernel sets the inode's ctime
 *    and the directory's mtime and ctime to the current time (the mount
 *    time, which no image records); they keep their previous values here.
 *    It shows only where the inode's or directory's own item was replayed
 *    before the unlink (testdata/logtree/links.volatile);
 *  - the csum tree's item boundaries differ from the kernel's (which
 *    extends neighbouring items); every sector's checksum is the same;
 *  - orphans replay creates are removed as a read-write mount's orphan
 *    cleanup removes them (a read-only mount leaves them, unreachable);
 *    orphans already in the committed state are left alone;
 *  - a name linking a subvolume's root directory, which the kernel never
 *    logs (it commits instead), is refused rather than emulated.
 * Log items must pass the kernel's tree-checker rules (btrfs/tree_checker.c),
 * as the kernel checks every log leaf it reads.
 *
 * Bounds: every item is parsed "header fits, then whole entry fits"; the
 * map's memory is limited (max_bytes) and so is the work (max_steps), so a
 * hostile log fails with a message instead of exhausting memory or time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logreplay/state.h"

#include "base/grow.h"
#include "base/csum.h"
#include "base/cursor.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree_checker.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "logreplay/replay.h"

#define DEFAULT_MAX_BYTES (256ull << 20)
#define DEFAULT_MAX_STEPS (1ull << 27)

enum { ST_INODES = 1, ST_DIR_INDEX = 2, ST_ALL = 3 };

/* ------------------------------------------------- walk 1: inode items */

/* Walk 1, one inode item. */
static int replay_inode(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	uint64_t ino = li->key.objectid;
	uint32_t mode = bi_le32(li->data + INODE_MODE);
	int rc = bi_lr_xattr_deletes(cx, ino);
	if (rc == 0 && bi_lr_is_dir(mode))
		rc = bi_lr_dir_deletes(cx, ino, false);
	if (rc == 0)
		rc = bi_lr_overwrite_inode(cx, li);
	if (rc == 0 && bi_lr_is_reg(mode)) {
		/* extents past i_size go now: prealloc past EOF is logged
		 * and replayed after this */
		struct lr_inode *in = NULL;
		uint64_t found, ss = cx->p->sectorsize;
		rc = bi_lr_iget_must(cx, ino, &in);
		if (rc == 0)
			rc = bi_lr_drop_extents(cx, ino, (in->size + ss - 1) & ~(ss - 1),
						UINT64_MAX, &found);
		if (rc == 0) {
			in->nbytes -= found;
			rc = bi_lr_iupdate(cx, in);
		}
		if (in)
			bi_lr_iput(cx, in);
	}
	return rc ? rc : bi_lr_fixup_add(cx, ino);
}

/* ---------------------------------------------- walk 2: directory entries */

/* delete_conflicting_dir_entry */
static int dent_conflict(struct lr_ctx *cx, struct lr_inode *dir, const struct lr_dent *have,
			 const struct lr_dent *want, bool exists, bool *match)
{
	if (bi_key_cmp(&have->loc, &want->loc) == 0 && have->type == want->type) {
		*match = true;
		return 0;
	}
	return exists ? bi_lr_drop_entry(cx, dir, have, false) : 0;
}

/* insert_one_name: -ENOENT when the inode does not exist (skipped). */
static int insert_one_name(struct lr_ctx *cx, struct lr_inode *dir, const bi_key *loc,
			   const uint8_t *name, uint16_t len, uint64_t index)
{
	struct lr_inode *in;
	int rc = bi_lr_iget(cx, loc->objectid, &in);
	if (rc)
		return rc;
	rc = bi_lr_add_link(cx, dir, in, name, len, true, index);
	bi_lr_iput(cx, in);
	return rc;
}

/* replay_one_dir_item / replay_one_name, for a logged DIR_INDEX item. */
static int replay_dir_index(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	struct lr_dent e, de;
	if (bi_lr_dent_at(li->key.type, li->data, li->size, 0, &e) < 0)
		return bi_lr_corrupt_item(cx, &li->key, "bad dir index entry in the log");
	struct lr_inode *dir;
	int rc = bi_lr_iget_must(cx, li->key.objectid, &dir);
	if (rc)
		return rc;
	struct lr_item it;
	bool exists = false, dmatch = false, imatch = false, added = false;
	rc = bi_view_get(cx, cx->fs, &e.loc, &it);
	if (rc > 0) {
		exists = true;
		bi_lr_item_free(&it);
	}
	if (rc >= 0 && (rc = bi_lr_find_dir_item(cx, dir->ino, e.name, e.name_len, &it, &de)) > 0) {
		rc = dent_conflict(cx, dir, &de, &e, exists, &dmatch);
		bi_lr_item_free(&it);
	}
	if (rc >= 0 && (rc = bi_lr_find_dir_index(cx, dir->ino, li->key.offset, e.name, e.name_len,
					     &it, &de)) > 0) {
		rc = dent_conflict(cx, dir, &de, &e, exists, &imatch);
		bi_lr_item_free(&it);
	}
	if (rc < 0 || (dmatch && imatch))
		goto out;
	/* a name whose inode ref is logged is added in walk 3 */
	bi_key rk = { e.loc.objectid, KT_INODE_REF, dir->ino };
	bi_key xk = { e.loc.objectid, KT_INODE_EXTREF, bi_extref_hash(dir->ino, e.name, e.name_len) };
	rc = bi_lr_log_has_ref(cx, &rk, 0, e.name, e.name_len);
	if (rc == 0)
		rc = bi_lr_log_has_ref(cx, &xk, dir->ino, e.name, e.name_len);
	if (rc)
		goto out;
	rc = insert_one_name(cx, dir, &e.loc, e.name, e.name_len, li->key.offset);
	added = rc == 0;
	if (rc == -ENOENT || rc == -EEXIST)
		rc = 0;
	/* a new name of a non-directory: its link count is fixed up later */
	if (rc == 0 && added && (e.type & ~FT_ENCRYPTED) != FT_DIR)
		rc = bi_lr_fixup_add(cx, e.loc.objectid);
out:
	bi_lr_iput(cx, dir);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------- walk 3: inode refs */

/* inode_in_dir: both the index and the name entry point at @ino. */
static int inode_in_dir(struct lr_ctx *cx, uint64_t dir, uint64_t ino, uint64_t index,
			const uint8_t *name, uint16_t len)
{
	struct lr_item it;
	struct lr_dent e;
	int rc = bi_lr_find_dir_index(cx, dir, index, name, len, &it, &e);
	if (rc <= 0)
		return rc;
	bool ok = e.loc.objectid == ino;
	bi_lr_item_free(&it);
	if (!ok)
		return 0;
	rc = bi_lr_find_dir_item(cx, dir, name, len, &it, &e);
	if (rc <= 0)
		return rc;
	ok = e.loc.objectid == ino;
	bi_lr_item_free(&it);
	return ok;
}

/* unlink_refs_not_in_log / unlink_extrefs_not_in_log: unlink the first
 * name of @it (an item of the tree) in @dir that the log does not hold;
 * -EAGAIN after an unlink. */
static int unlink_unlogged(struct lr_ctx *cx, const struct lr_item *it, struct lr_inode *dir,
			   struct lr_inode *in)
{
	bool ext = it->key.type == KT_INODE_EXTREF;
	struct lr_ref r;
	for (uint32_t pos = 0; pos < it->size; pos += r.len) {
		if (bi_lr_ref_at(ext, it->key.offset, it->data, it->size, pos, &r) < 0)
			return bi_lr_corrupt_item(cx, &it->key, "bad inode ref");
		if (ext && r.parent != dir->ino)
			continue;
		bi_key lk = it->key;
		if (ext)
			lk.offset = bi_extref_hash(dir->ino, r.name, r.name_len);
		int rc = bi_lr_log_has_ref(cx, &lk, dir->ino, r.name, r.name_len);
		if (rc < 0)
			return rc;
		if (rc > 0)
			continue;
		in->nlink++;
		rc = bi_lr_unlink_name(cx, dir, in, r.name, r.name_len);
		return rc ? rc : -EAGAIN;
	}
	return 0;
}

/* __add_inode_ref, the part before the "again" label repeats: unlink the
 * names of @in in @dir that the log does not hold. 1: @in is the root
 * directory's own back reference (nothing to do). */
static int unlink_conflicting_refs(struct lr_ctx *cx, struct lr_inode *dir,
				   struct lr_inode *in, const struct lr_ref *want)
{
	bi_key k = { in->ino, KT_INODE_REF, dir->ino };
	struct lr_item it;
	struct lr_ref r;
	int rc = bi_view_get(cx, cx->fs, &k, &it);
	if (rc > 0) {
		rc = k.objectid == k.offset ? 1 : unlink_unlogged(cx, &it, dir, in);
		bi_lr_item_free(&it);
	}
	if (rc)
		return rc;
	k = (bi_key){ in->ino, KT_INODE_EXTREF, bi_extref_hash(dir->ino, want->name, want->name_len) };
	if ((rc = bi_view_get(cx, cx->fs, &k, &it)) <= 0)
		return rc;
	rc = bi_lr_ref_find(true, k.offset, it.data, it.size, dir->ino, want->name,
			    want->name_len, &r);
	if (rc > 0)
		rc = unlink_unlogged(cx, &it, dir, in);
	else if (rc < 0)
		rc = bi_lr_corrupt_item(cx, &k, "bad inode extref");
	bi_lr_item_free(&it);
	return rc;
}

/* __add_inode_ref, then the link itself (add_inode_ref's loop body). */
static int add_ref_name(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
			const struct lr_ref *r)
{
	int rc;
	while ((rc = unlink_conflicting_refs(cx, dir, in, r)) == -EAGAIN)
		;
	if (rc)
		return rc;
	struct lr_item it;
	struct lr_dent e;
	/* a conflicting index, then a conflicting name */
	rc = bi_lr_find_dir_index(cx, dir->ino, r->index, r->name, r->name_len, &it, &e);
	if (rc > 0) {
		rc = bi_lr_drop_entry(cx, dir, &e, false);
		bi_lr_item_free(&it);
	}
	if (rc == 0 &&
	    (rc = bi_lr_find_dir_item(cx, dir->ino, r->name, r->name_len, &it, &e)) > 0) {
		rc = bi_lr_drop_entry(cx, dir, &e, false);
		bi_lr_item_free(&it);
	}
	if (rc == 0)
		rc = bi_lr_add_link(cx, dir, in, r->name, r->name_len, false, r->index);
	return rc ? rc : bi_lr_iupdate(cx, in);
}

/* unlink_old_inode_refs: names in the tree's item under the log item's key
 * that the log's item does not hold are unlinked. */
static int unlink_old_refs(struct lr_ctx *cx, const struct bi_lr_item *li, struct lr_inode *in)
{
	bool ext = li->key.type == KT_INODE_EXTREF;
	for (;;) {
		struct lr_item it;
		struct lr_ref r, lr;
		int rc = bi_view_get(cx, cx->fs, &li->key, &it);
		if (rc <= 0)
			return rc;
		bool again = false;
		rc = 0;
		for (uint32_t pos = 0; pos < it.size && rc == 0 && !again; pos += r.len) {
			if (bi_lr_ref_at(ext, li->key.offset, it.data, it.size, pos, &r) < 0) {
				rc = bi_lr_corrupt_item(cx, &it.key, "bad inode ref");
				break;
			}
			rc = bi_lr_ref_find(ext, li->key.offset, li->data, li->size, r.parent,
					    r.name, r.name_len, &lr);
			if (rc != 0) {
				rc = rc < 0 ? bi_lr_corrupt_item(cx, &li->key,
								 "bad inode ref in the log")
					    : 0;
				continue;
			}
			struct lr_inode *dir;
			rc = bi_lr_iget_must(cx, r.parent, &dir);
			if (rc == 0) {
				rc = bi_lr_unlink_name(cx, dir, in, r.name, r.name_len);
				bi_lr_iput(cx, dir);
			}
			again = true;
		}
		bi_lr_item_free(&it);
		if (rc || !again)
			return rc;
	}
}

/* add_inode_ref: a logged INODE_REF / INODE_EXTREF item. */
static int replay_ref(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	bool ext = li->key.type == KT_INODE_EXTREF;
	struct lr_ref r;
	uint64_t parent = li->key.offset;
	if (ext && li->size == 0)
		return 0;	/* no parent to look up: the kernel finds none */
	if (bi_lr_ref_at(ext, li->key.offset, li->data, li->size, 0, &r) < 0)
		return bi_lr_corrupt_item(cx, &li->key, "bad inode ref in the log");
	parent = r.parent;
	struct lr_inode *dir = NULL, *in = NULL;
	/* a parent directory that was not logged and does not exist: skip */
	int rc = bi_lr_iget(cx, parent, &dir);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rc = bi_lr_iget_must(cx, li->key.objectid, &in);
	for (uint32_t pos = 0; rc == 0 && pos < li->size; pos += r.len) {
		if (bi_lr_ref_at(ext, li->key.offset, li->data, li->size, pos, &r) < 0) {
			rc = bi_lr_corrupt_item(cx, &li->key, "bad inode ref in the log");
			break;
		}
		if (!dir && (rc = bi_lr_iget(cx, r.parent, &dir)) == -ENOENT) {
			rc = 0;
			continue;
		}
		if (rc == 0)
			rc = inode_in_dir(cx, dir->ino, in->ino, r.index, r.name, r.name_len);
		if (rc == 0) {
			rc = add_ref_name(cx, dir, in, &r);
			if (rc == 1)	/* the root directory's own ref: leave it */
				goto out;
		}
		rc = rc > 0 ? 0 : rc;	/* already linked */
		if (ext) {
			bi_lr_iput(cx, dir);
			dir = NULL;
		}
	}
	if (rc == 0)
		rc = unlink_old_refs(cx, li, in);
	if (rc == 0)
		rc = bi_lr_overwrite(cx, li);
out:
	bi_lr_iput(cx, dir);
	bi_lr_iput(cx, in);
	return rc == 1 ? 0 : rc;
}

/* ------------------------------------------------------------ driver */

static int replay_item(struct lr_ctx *cx, const struct bi_lr_item *li)
{
	uint8_t t = li->key.type;
	int rc = 0;
	cx->cur = li->key;
	if (t == KT_INODE_ITEM) {
		if (li->size != INODE_ITEM_SIZE)
			return bi_lr_corrupt_item(cx, &li->key, "inode item size is not 160 (log)");
		/* no links: an O_TMPFILE, or unlinked while open; the parent's
		 * replay removes it, so all its items are skipped */
		cx->ignore = bi_le32(li->data + INODE_NLINK) == 0;
		if (!cx->ignore && cx->stage == ST_INODES)
			rc = replay_inode(cx, li);
	}
	if (rc || cx->ignore)
		return rc;
	if (t == KT_DIR_INDEX && cx->stage == ST_DIR_INDEX)
		return replay_dir_index(cx, li);
	if (cx->stage != ST_ALL)
		return 0;
	if (t == KT_XATTR_ITEM)
		return bi_lr_overwrite(cx, li);
	if (t == KT_INODE_REF || t == KT_INODE_EXTREF)
		return replay_ref(cx, li);
	if (t == KT_EXTENT_DATA)
		return bi_lr_replay_extent(cx, li);
	return 0;
}

static int replay_log(struct lr_ctx *cx)
{
	for (size_t i = 0; i < cx->log->n; i++) {
		int rc = replay_item(cx, &cx->log->items[i]);
		if (rc < 0 && !cx->why[0])	/* an errno the kernel aborts on */
			rc = bi_lr_fail(cx, rc == -ENOMEM ? rc : -EUCLEAN,
					"the kernel's replay fails here (error %d)", rc);
		if (rc < 0)
			return rc;
	}
	if (cx->stage != ST_ALL)
		return 0;
	cx->cur = (bi_key){ 0, 0, 0 };
	return bi_lr_fixups(cx);
}

/* ------------------------------------------------- checks, entry point */

static int check_log(const struct bi_lr_params *p, const struct bi_lr_log *l, char *why,
		     size_t whylen);

static bool is_fs_tree(uint64_t id)
{
	return id == OBJ_FS_TREE || (id >= OBJ_FIRST_FREE && id <= OBJ_LAST_FREE);
}

static int check_args(const struct bi_lr_params *p, const struct bi_lr_log *logs, size_t n,
		      char *why, size_t whylen)
{
	uint32_t ss = p->sectorsize;
	if (ss < 512 || ss > 65536 || (ss & (ss - 1)) || p->nodesize < 4096 ||
	    p->nodesize > 65536 || p->csum_size == 0 || p->csum_size > CSUM_SIZE_MAX) {
		snprintf(why, whylen, "bad replay parameters");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!is_fs_tree(logs[i].root)) {
			snprintf(why, whylen, "log tree for %" PRIu64 ", which is not a subvolume",
				 logs[i].root);
			return -EUCLEAN;
		}
		for (size_t j = 0; j < i; j++)
			if (logs[j].root == logs[i].root) {
				snprintf(why, whylen, "two log trees for subvolume %" PRIu64,
					 logs[i].root);
				return -EUCLEAN;
			}
		int rc = check_log(p, &logs[i], why, whylen);
		if (rc)
			return rc;
	}
	return 0;
}

/* The kernel's tree-checker runs on every log leaf it reads; a leaf that
 * fails stops the replay. The same checks, on every item, up front. */
static int check_log_item(const struct bi_lr_params *p, uint64_t root,
			  const struct bi_lr_item *li, char *why, size_t whylen)
{
	struct btrfsimg_inode ino;
	struct bi_ref_entry re;
	struct bi_extent ext;
	uint32_t pos = 0;
	int rc = 0;
	switch (li->key.type) {
	case KT_INODE_ITEM:
		return bi_inode_parse(li->data, li->size, root, li->key.objectid, p->transid, &ino,
				      why, whylen);
	case KT_DIR_ITEM:
	case KT_DIR_INDEX:
	case KT_XATTR_ITEM:
		rc = bi_dir_item_check(li->data, li->size, &li->key, why, whylen);
		return rc < 0 ? rc : 0;
	case KT_INODE_REF:
		while ((rc = bi_iref_next(li->data, li->size, li->key.offset, &pos, &re, why,
					  whylen)) > 0)
			;
		return rc;
	case KT_INODE_EXTREF:
		while ((rc = bi_extref_next(li->data, li->size, &pos, &re, why, whylen)) > 0)
			;
		return rc;
	case KT_EXTENT_DATA:
		return bi_extent_parse(li->data, li->size, li->key.offset, p->sectorsize, &ext, why,
				       whylen);
	case KT_EXTENT_CSUM:
		if (li->size && li->size % p->csum_size == 0)
			return 0;
		snprintf(why, whylen, "checksum item size %u not a multiple of %u", li->size,
			 p->csum_size);
		return -EUCLEAN;
	}
	return 0;
}

static int check_log(const struct bi_lr_params *p, const struct bi_lr_log *l, char *why,
		     size_t whylen)
{
	char msg[384];
	for (size_t k = 0; k < l->n; k++) {
		const bi_key *key = &l->items[k].key;
		int rc = k && bi_key_cmp(&l->items[k - 1].key, key) >= 0
				 ? (snprintf(msg, sizeof(msg), "keys out of order"), -EUCLEAN)
				 : check_log_item(p, l->root, &l->items[k], msg, sizeof(msg));
		if (rc < 0) {
			snprintf(why, whylen,
				 "corrupt log tree of %" PRIu64 ": item %zu (%" PRIu64
				 " %u %" PRIu64 "): %s",
				 l->root, k, key->objectid, key->type, key->offset, msg);
			return -EUCLEAN;
		}
	}
	return 0;
}

/* The kernel replays log trees in descending subvolume id order. */
static size_t *replay_order(const struct bi_lr_log *logs, size_t n)
{
	size_t *o = malloc((n + 1) * sizeof(*o));
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		while (j > 0 && logs[o[j - 1]].root < logs[i].root) {
			o[j] = o[j - 1];
			j--;
		}
		o[j] = i;
	}
	return o;
}

/* The three walks over every log, in the kernel's order. */
static int replay_all(struct lr_ctx *cx, const struct bi_lr_log *logs, size_t nlogs,
		      struct lr_view *views, const size_t *order)
{
	int rc = 0;
	for (cx->stage = ST_INODES; cx->stage <= ST_ALL && rc == 0; cx->stage++)
		for (size_t k = 0; k < nlogs && rc == 0; k++) {
			size_t i = order[k];
			if (!logs[i].base.first)
				continue;	/* the subvolume is gone */
			cx->fs = &views[i];
			cx->log = &logs[i];
			rc = replay_log(cx);
		}
	return rc;
}

/* After the replay: orphan cleanup, freed extents, the overlays. */
static int finish(struct lr_ctx *cx, struct lr_view *views, size_t nlogs,
		  struct bi_log_overlay **out)
{
	int rc = 0;
	cx->stage = 0;
	for (size_t i = 0; i < nlogs && rc == 0; i++) {
		cx->fs = &views[i];
		rc = views[i].map ? bi_lr_orphan_cleanup(cx) : 0;
		if (rc == 0)
			rc = bi_lr_emit(cx, &views[i], out);
	}
	cx->fs = NULL;
	if (rc == 0)
		rc = bi_lr_free_extents(cx, cx->ext.map);
	return rc ? rc : bi_lr_emit(cx, &cx->csum, out);
}

int bi_lr_replay(const struct bi_lr_params *p, const struct bi_lr_log *logs, size_t nlogs,
		 const struct bi_lr_trees *trees, struct bi_log_overlay **out, char *why,
		 size_t whylen)
{
	*out = NULL;
	why[0] = '\0';
	int rc = check_args(p, logs, nlogs, why, whylen);
	if (rc)
		return rc;
	struct lr_ctx cx = { .p = p, .csum = { OBJ_CSUM_TREE, trees->csum, NULL },
			     .ext = { OBJ_EXTENT_TREE, trees->extent, NULL }, .why = why,
			     .whylen = whylen };
	cx.max_bytes = p->max_bytes ? p->max_bytes : DEFAULT_MAX_BYTES;
	cx.max_steps = p->max_steps ? p->max_steps : DEFAULT_MAX_STEPS;
	struct lr_view *views = calloc(nlogs + 1, sizeof(*views));
	size_t *order = replay_order(logs, nlogs);
	if (views && order) {
		for (size_t i = 0; i < nlogs; i++)
			views[i] = (struct lr_view){ logs[i].root, logs[i].base, NULL };
		rc = replay_all(&cx, logs, nlogs, views, order);
		if (rc == 0)
			rc = finish(&cx, views, nlogs, out);
	} else {
		rc = bi_lr_fail(&cx, -ENOMEM, "out of memory");
	}
	if (rc) {
		bi_lr_overlays_free(*out);
		*out = NULL;
	}
	while (cx.held)		/* only after a failure */
		bi_lr_iput(&cx, cx.held);
	for (size_t i = 0; views && i < nlogs; i++)
		bi_lr_map_free(views[i].map);
	bi_lr_map_free(cx.csum.map);
	bi_lr_map_free(cx.ext.map);
	free(views);
	free(order);
	return rc;
}

/* ------------------------------------------------- the filesystem glue */

#define LOG_MAX_BYTES (512ull << 20)	/* a log tree larger than this is refused */

/* A tree of the image as a replay source (no overlay exists yet). */
struct fs_src {
	struct btrfsimg_fs *fs;
	struct bi_root root;
};

static int copy_out(const uint8_t *d, uint32_t n, uint8_t **data, uint32_t *size)
{
	*data = malloc(n ? n : 1);
	if (!*data)
		return -ENOMEM;
	memcpy(*data, d, n);
	*size = n;
	return 1;
}

static int fs_first(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		    uint8_t **data, uint32_t *size)
{
	struct fs_src *s = ctx;
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(s->fs, &it, &s->root, min, max);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc > 0) {
		*key = item.key;
		rc = copy_out(item.data, item.size, data, size);
	}
	bi_iter_end(&it);
	return rc;
}

/* Keys of block @b that are <= @k. */
static uint32_t count_le(const struct bi_block *b, const bi_key *k)
{
	uint32_t lo = 0, hi = b->nritems, per = b->level ? KP_SIZE : ITEM_SIZE;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		bi_key mk;
		bi_key_read(b->data + HDR_SIZE + (size_t)mid * per, &mk);
		if (bi_key_cmp(&mk, k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One descent: a node's pointer keys are its children's first keys, so
 * the last pointer <= max leads to the leaf holding the last item <= max. */
static int fs_last(void *ctx, const bi_key *min, const bi_key *max, bi_key *key,
		   uint8_t **data, uint32_t *size)
{
	struct fs_src *s = ctx;
	bi_key fk;
	struct bi_expect e = { s->root.id, s->root.generation, s->root.level, NULL };
	uint64_t bytenr = s->root.bytenr, gen;
	for (;;) {
		struct bi_block *b;
		int rc = bi_block_read(s->fs, bytenr, &e, &b);
		if (rc < 0)
			return rc;
		uint32_t n = count_le(b, max);
		if (n && b->level == 0) {
			const uint8_t *d;
			uint32_t sz;
			bi_leaf_item(b, n - 1, key, &d, &sz);
			rc = bi_key_cmp(key, min) < 0 ? 0 : copy_out(d, sz, data, size);
		} else if (n) {
			bi_node_ptr(b, n - 1, &fk, &bytenr, &gen);
			e = (struct bi_expect){ s->root.id, gen, b->level - 1, &fk };
		}
		bool leaf = b->level == 0;
		bi_block_put(s->fs, b);
		if (!n || leaf)
			return n ? rc : 0;
	}
}

/* The logs found in the log root tree, with their subvolumes. */
struct log_set {
	struct bi_lr_log *logs;
	struct fs_src *srcs;
	size_t n, cap;
	uint64_t bytes;
};

static void log_set_free(struct log_set *ls)
{
	for (size_t i = 0; i < ls->n; i++) {
		for (size_t j = 0; j < ls->logs[i].n; j++)
			free((void *)ls->logs[i].items[j].data);
		free((void *)ls->logs[i].items);
	}
	free(ls->logs);
	free(ls->srcs);
}

/* Root item fields (ROOT_ITEM of a log or a subvolume). */
static int root_loc(struct btrfsimg_fs *fs, uint64_t id, const uint8_t *d, uint32_t size,
		    struct bi_root *r, uint32_t *refs)
{
	if (size < RI_SIZE_V1)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root item for tree %" PRIu64 ": size %u expect >= %u", id,
			      size, RI_SIZE_V1);
	*r = (struct bi_root){ id, bi_le64(d + RI_BYTENR), bi_le64(d + RI_GENERATION), d[RI_LEVEL] };
	*refs = bi_le32(d + RI_REFS);
	if (r->level >= MAX_LEVEL || !r->bytenr || r->bytenr % fs->sectorsize)
		return bi_err(fs, -EUCLEAN,
			      "corrupt root item for tree %" PRIu64 ": level %u bytenr %" PRIu64,
			      id, r->level, r->bytenr);
	return 0;
}

/* Every item of tree @r, copied. */
static int load_tree(struct btrfsimg_fs *fs, const struct bi_root *r, struct bi_lr_log *l,
		     uint64_t *bytes)
{
	bi_key lo = { 0, 0, 0 }, hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct bi_lr_item *v = NULL;
	size_t cap = 0;
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &lo, &hi);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		*bytes += item.size + sizeof(*v);
		if (*bytes > LOG_MAX_BYTES) {
			rc = bi_err(fs, -EUCLEAN, "log trees hold more than %" PRIu64 " bytes",
				    (uint64_t)LOG_MAX_BYTES);
			break;
		}
		if (bi_grow((void **)&v, &cap, l->n + 1, sizeof(*v))) {
			rc = -ENOMEM;
			break;
		}
		uint8_t *d = malloc(item.size ? item.size : 1);
		if (!d) {
			rc = -ENOMEM;
			break;
		}
		memcpy(d, item.data, item.size);
		v[l->n++] = (struct bi_lr_item){ item.key, d, item.size };
	}
	bi_iter_end(&it);
	l->items = v;
	return rc;
}

/* The subvolume's fs tree, or a missing one (deleted: root refs 0). */
static int subvol_src(struct btrfsimg_fs *fs, uint64_t id, struct fs_src *s, bool *found)
{
	bi_key lo = { id, KT_ROOT_ITEM, 0 }, hi = { id, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	uint32_t refs = 0;
	int rc = bi_iter_start(fs, &it, &fs->root_tree, &lo, &hi);
	if (rc == 0)
		rc = bi_iter_next(&it, &item);
	if (rc > 0)
		rc = root_loc(fs, id, item.data, item.size, &s->root, &refs);
	bi_iter_end(&it);
	s->fs = fs;
	*found = rc == 0 && refs > 0;
	return rc < 0 ? rc : 0;
}

static int add_log(struct btrfsimg_fs *fs, struct log_set *ls, const struct bi_item *item)
{
	if (ls->n == ls->cap) {
		/* two arrays of one length: each grown from the same capacity */
		size_t cap = ls->cap, cap2 = ls->cap;
		if (bi_grow((void **)&ls->logs, &cap, ls->n + 1, sizeof(*ls->logs)) ||
		    bi_grow((void **)&ls->srcs, &cap2, ls->n + 1, sizeof(*ls->srcs)))
			return -ENOMEM;
		ls->cap = cap < cap2 ? cap : cap2;
		for (size_t i = 0; i < ls->n; i++)	/* the sources moved */
			ls->logs[i].base.ctx = &ls->srcs[i];
	}
	uint64_t id = item->key.offset;
	struct bi_root r;
	uint32_t refs;
	bool found;
	struct bi_lr_log *l = &ls->logs[ls->n];
	struct fs_src *s = &ls->srcs[ls->n];
	*l = (struct bi_lr_log){ .root = id };
	int rc = root_loc(fs, OBJ_TREE_LOG, item->data, item->size, &r, &refs);
	if (rc == 0)
		rc = load_tree(fs, &r, l, &ls->bytes);
	ls->n++;	/* owns what load_tree allocated, even on failure */
	if (rc == 0 && is_fs_tree(id))
		rc = subvol_src(fs, id, s, &found);
	if (rc == 0 && is_fs_tree(id) && found)
		l->base = (struct bi_lr_src){ fs_first, fs_last, s };
	return rc;
}

static int load_logs(struct btrfsimg_fs *fs, struct log_set *ls)
{
	/* the log root tree is written in the transaction after the last commit */
	struct bi_root r = { OBJ_TREE_LOG, fs->sb.info.log_root, fs->sb.info.generation + 1,
			     fs->sb.info.log_root_level };
	bi_key lo = { OBJ_TREE_LOG, KT_ROOT_ITEM, 0 }, hi = { OBJ_TREE_LOG, KT_ROOT_ITEM, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, &r, &lo, &hi);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0)
		rc = add_log(fs, ls, &item);
	bi_iter_end(&it);
	return rc;
}

/* The csum and extent trees as sources; either may be absent. */
static int global_trees(struct btrfsimg_fs *fs, struct bi_lr_trees *t, struct fs_src *csum,
			struct fs_src *ext, struct bi_lr_array *empty)
{
	*csum = *ext = (struct fs_src){ fs, { 0 } };
	*t = (struct bi_lr_trees){ { fs_first, fs_last, csum }, { fs_first, fs_last, ext } };
	int rc = bi_root_find(fs, OBJ_CSUM_TREE, &csum->root);
	if (rc == -ENOENT)
		bi_lr_src_array(&t->csum, empty);
	if (rc && rc != -ENOENT)
		return rc;
	rc = bi_root_find(fs, OBJ_EXTENT_TREE, &ext->root);
	if (rc == -ENOENT)
		t->extent.first = NULL;	/* reference counts unknown: nothing is freed */
	return rc == -ENOENT ? 0 : rc;
}

static struct bi_lr_params replay_params(const struct btrfsimg_fs *fs, uint64_t log_bytes)
{
	uint64_t inc = fs->sb.info.incompat_flags;
	return (struct bi_lr_params){
		.transid = fs->sb.info.generation + 1,
		.sectorsize = fs->sectorsize,
		.nodesize = fs->nodesize,
		.csum_size = fs->csum_size,
		.no_holes = inc & INCOMPAT_NO_HOLES,
		.extended_iref = inc & INCOMPAT_EXTENDED_IREF,
		.max_bytes = DEFAULT_MAX_BYTES > 16 * log_bytes ? 0 : 16 * log_bytes,
	};
}

static void count_replayed(struct btrfsimg_fs *fs, const struct bi_log_overlay *o)
{
	fs->log_info.replayed = true;
	for (; o; o = o->next) {
		fs->log_info.items += o->nputs + o->ndels;
		if (o->root != OBJ_CSUM_TREE)
			fs->log_info.subvols++;
	}
}

int btrfsimg_log_info(btrfsimg_fs *fs, struct btrfsimg_log_info *out)
{
	if (!fs || !out)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	*out = fs->log_info;
	return 0;
}

int bi_log_replay(struct btrfsimg_fs *fs)
{
	fs->log_info = (struct btrfsimg_log_info){ .present = fs->sb.info.log_root != 0,
						   .generation = fs->sb.info.generation + 1 };
	if ((fs->opts.flags & BTRFSIMG_OPEN_NO_LOG_REPLAY) || !fs->sb.info.log_root)
		return 0;
	if (fs->overlays)
		return bi_err(fs, -EINVAL, "log replay: overlays exist already");
	struct log_set ls = { 0 };
	struct fs_src csum, ext;
	struct bi_lr_array empty = { NULL, 0 };
	struct bi_lr_trees trees;
	struct bi_log_overlay *ovl = NULL;
	char why[768] = "";
	fs->err[0] = '\0';
	int rc = load_logs(fs, &ls);
	if (rc == 0)
		rc = global_trees(fs, &trees, &csum, &ext, &empty);
	if (rc == 0) {
		struct bi_lr_params p = replay_params(fs, ls.bytes);
		rc = bi_lr_replay(&p, ls.logs, ls.n, &trees, &ovl, why, sizeof(why));
	}
	log_set_free(&ls);
	if (rc == 0) {
		struct bi_log_overlay **tail = &fs->overlays;
		while (*tail)
			tail = &(*tail)->next;
		*tail = ovl;
		count_replayed(fs, ovl);
		bi_info(fs,
			"replayed the log tree of generation %" PRIu64 ": %" PRIu64
			" items in %" PRIu64 " subvolumes",
			fs->log_info.generation, fs->log_info.items, fs->log_info.subvols);
		return 0;
	}
	/* The kernel refuses to mount such an image; show what was committed. */
	bi_damage(fs, "log tree not replayed (error %d; the kernel would not mount this image), "
		  "showing the last committed state: %s%s%s", rc, why,
		  why[0] && fs->err[0] ? "; " : "", fs->err);
	fs->err[0] = '\0';
	return 0;
}
