/* SPDX-License-Identifier: MIT */
/*
 * Log tree replay: what its three files share (private to them).
 *
 *   state.c  the state replay works on: the map of changed items over a
 *              tree (a view), the in-memory inodes, the log item parsers,
 *              and the overlays emitted at the end
 *   ops.c   the kernel's replay operations on that state: links and
 *              unlinks, inode item and directory deletes, file extents and
 *              checksums, the link count fixup
 *   replay.c  the walks over the log trees in the kernel's order, the
 *              checks up front, and the entry points (bi_lr_replay,
 *              bi_log_replay)
 *
 * Everything here works on one replay context (struct lr_ctx). A function
 * returning int gives 0 (or 1 / 0 for "found" / "absent" where it says
 * so) or a negative errno; on failure the context's message says what and
 * where (bi_lr_fail keeps the first one).
 */
#ifndef BI_LOGSHARED_H
#define BI_LOGSHARED_H

#include "base/err.h"
#include "base/key.h"
#include "base/ondisk.h"
#include "btrfs/tree.h"
#include "logreplay/replay.h"

#define M_FMT 0170000u
#define M_DIR 0040000u
#define M_REG 0100000u

/* One replaced item or tombstone of a view's map (an AVL tree). */
struct lr_node {
	bi_key key;
	uint8_t *data;
	uint32_t size;
	bool del;		/* tombstone: hides the tree's item */
	int8_t in_base;		/* the tree has this key: 1, 0, -1 unknown */
	int8_t h;
	struct lr_node *l, *r;
};

/* An item read from a view: data is a malloc'd copy (bi_lr_item_free). */
struct lr_item {
	bi_key key;
	uint8_t *data;
	uint32_t size;
};

/* A tree as replay sees it: its own items (base) under the map. */
struct lr_view {
	uint64_t id;
	struct bi_lr_src base;
	struct lr_node *map;
};

struct lr_inode {
	uint64_t ino;
	int refs;
	uint8_t item[INODE_ITEM_SIZE];	/* as read; fields below are the live ones */
	uint32_t nlink, mode;
	uint64_t size, nbytes, seq;
	struct lr_inode *next;
};

struct lr_ctx {
	const struct bi_lr_params *p;
	struct lr_view *fs;
	struct lr_view csum;
	struct lr_view ext;	/* reference counts of data extents (not emitted) */
	const struct bi_lr_log *log;
	struct lr_inode *held;
	uint64_t bytes, max_bytes, steps, max_steps;
	int stage;
	bool ignore;		/* the kernel's wc->ignore_cur_inode */
	bi_key cur;		/* log item being replayed */
	char *why;
	size_t whylen;
};

/* One entry of a DIR_ITEM / DIR_INDEX / XATTR_ITEM item. */
struct lr_dent {
	bi_key loc;
	uint8_t type;
	uint16_t name_len;
	const uint8_t *name;
	uint32_t off, len;
};

/* One name of an INODE_REF (parent = key offset) or INODE_EXTREF item. */
struct lr_ref {
	uint64_t parent, index;
	uint16_t name_len;
	const uint8_t *name;
	uint32_t off, len;
};

/* A file extent item's fields. */
struct lr_fe {
	uint8_t type, compression;
	uint64_t ram_bytes, disk_bytenr, disk_num_bytes, offset, num_bytes;
	uint64_t end;		/* btrfs_drop_extents' extent_end */
};

static inline bool bi_lr_is_dir(uint32_t mode)
{
	return (mode & M_FMT) == M_DIR;
}

static inline bool bi_lr_is_reg(uint32_t mode)
{
	return (mode & M_FMT) == M_REG;
}

/* ---------------------------------------------- state.c: keys, the map */

/* The next (previous) key; false when @k is the last (first) one. */
bool bi_lr_key_next(const bi_key *k, bi_key *out);
bool bi_lr_key_prev(const bi_key *k, bi_key *out);
/* The map's node with key @k, or NULL. */
struct lr_node *bi_lr_map_find(struct lr_node *t, const bi_key *k);
/* First node >= k (ceil) or last node <= k (floor), tombstones included. */
struct lr_node *bi_lr_map_bound(struct lr_node *t, const bi_key *k, bool ceil);
void bi_lr_map_free(struct lr_node *t);

/* ------------------------------------------ state.c: errors, the views */

void bi_lr_item_free(struct lr_item *it);
/* Record the first failure, with where it happened; returns @rc. */
int bi_lr_fail(struct lr_ctx *cx, int rc, const char *fmt, ...) BI_PRINTF(3, 4);
/* -EUCLEAN, naming item @k of the current fs tree and @what is wrong. */
int bi_lr_corrupt_item(struct lr_ctx *cx, const bi_key *k, const char *what);

/* The first (last) item of @v's own tree in [min, max], map ignored:
 * 1 with *out (free it), 0 if none. */
int bi_lr_src_get(struct lr_ctx *cx, struct lr_view *v, bool last, const bi_key *min,
		  const bi_key *max, struct lr_item *out);
/* The merged view: first (last) item with min <= key <= max, or the item
 * at @k. 1 with *out (free it), 0 if none. Each counts as a step. */
int bi_view_first(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		  struct lr_item *out);
int bi_view_last(struct lr_ctx *cx, struct lr_view *v, const bi_key *min, const bi_key *max,
		 struct lr_item *out);
int bi_view_get(struct lr_ctx *cx, struct lr_view *v, const bi_key *k, struct lr_item *out);
/* Set (copying @data) or delete the item at @k; both charge the limits. */
int bi_view_put(struct lr_ctx *cx, struct lr_view *v, const bi_key *k, const void *data,
		uint32_t size);
int bi_view_del(struct lr_ctx *cx, struct lr_view *v, const bi_key *k);
/* Replace @it by itself without bytes [off, off + len); nothing left:
 * delete it (btrfs_truncate_item / btrfs_del_item). */
int bi_view_cut(struct lr_ctx *cx, struct lr_view *v, const struct lr_item *it, uint32_t off,
		uint32_t len);
/* Put @k := @it (may be absent: NULL) with @add appended. */
int bi_view_append(struct lr_ctx *cx, struct lr_view *v, const bi_key *k,
		   const struct lr_item *it, const uint8_t *add, uint32_t n);
/* Add view @v's changes to @list as an overlay (none if unchanged); the
 * map's item data moves into it. */
int bi_lr_emit(struct lr_ctx *cx, struct lr_view *v, struct bi_log_overlay **list);

/* ------------------------------------------- state.c: the log, parsers */

/* Index of the first log item >= @k (l->n if none). */
size_t bi_lr_log_lower(const struct bi_lr_log *l, const bi_key *k);
/* Entry / name at byte @pos of an item: 0 or -EUCLEAN (no message). */
int bi_lr_dent_at(uint8_t key_type, const uint8_t *d, uint32_t size, uint32_t pos,
		  struct lr_dent *e);
int bi_lr_ref_at(bool ext, uint64_t key_off, const uint8_t *d, uint32_t size, uint32_t pos,
		 struct lr_ref *r);
/* btrfs_match_dir_item_name: 1 and *e when found, 0 if not, -EUCLEAN. */
int bi_lr_dent_find(uint8_t key_type, const uint8_t *d, uint32_t size, const uint8_t *name,
		    uint16_t len, struct lr_dent *e);
/* btrfs_find_name_in_backref / _ext_backref (@parent checked for extrefs). */
int bi_lr_ref_find(bool ext, uint64_t key_off, const uint8_t *d, uint32_t size,
		   uint64_t parent, const uint8_t *name, uint16_t len, struct lr_ref *r);
/* Does the log hold the name (with @parent for extrefs) under key @k? */
int bi_lr_log_has_ref(struct lr_ctx *cx, const bi_key *k, uint64_t parent,
		      const uint8_t *name, uint16_t len);
int bi_lr_log_has_dent(struct lr_ctx *cx, const bi_key *k, const uint8_t *name,
		       uint16_t len);
int bi_lr_fe_parse(struct lr_ctx *cx, const bi_key *k, const uint8_t *d, uint32_t size,
		   struct lr_fe *fe);
/* A checksum item's range [k->offset, *end). */
int bi_lr_csum_range(struct lr_ctx *cx, const bi_key *k, uint32_t size, uint64_t *end);

/* --------------------------------------- state.c: the in-memory inodes */

/* btrfs_iget: the held inode (one more reference), or a fresh one read
 * from the view. -ENOENT (no message) if the inode item does not exist. */
int bi_lr_iget(struct lr_ctx *cx, uint64_t ino, struct lr_inode **out);
/* bi_lr_iget, where a missing inode is corrupt (the kernel aborts). */
int bi_lr_iget_must(struct lr_ctx *cx, uint64_t ino, struct lr_inode **out);
/* Drop a reference (NULL is fine); the last one frees the inode. */
void bi_lr_iput(struct lr_ctx *cx, struct lr_inode *in);
/* btrfs_update_inode: the in-memory inode into its item. */
int bi_lr_iupdate(struct lr_ctx *cx, struct lr_inode *in);

/* ------------------------------------------------ ops.c: names, inodes */

/* link_to_fixup_dir: remember @ino for the link count fixup. */
int bi_lr_fixup_add(struct lr_ctx *cx, uint64_t ino);
/* The entry named @name in @dir's DIR_ITEM (DIR_INDEX @index) item: 1
 * with *it (free it) and *e, 0 if absent. */
int bi_lr_find_dir_item(struct lr_ctx *cx, uint64_t dir, const uint8_t *name, uint16_t len,
			struct lr_item *it, struct lr_dent *e);
int bi_lr_find_dir_index(struct lr_ctx *cx, uint64_t dir, uint64_t index,
			 const uint8_t *name, uint16_t len, struct lr_item *it,
			 struct lr_dent *e);
/* btrfs_add_link during log recovery (@backref: insert the inode ref too):
 * -EEXIST / -EOVERFLOW as the kernel returns them. */
int bi_lr_add_link(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
		   const uint8_t *name, uint16_t len, bool backref, uint64_t index);
/* btrfs_unlink_inode (times are left alone). */
int bi_lr_unlink_name(struct lr_ctx *cx, struct lr_inode *dir, struct lr_inode *in,
		      const uint8_t *name, uint16_t len);
/* drop_one_dir_item: unlink the entry's inode, keeping it for the fixup. */
int bi_lr_drop_entry(struct lr_ctx *cx, struct lr_inode *dir, const struct lr_dent *e,
		     bool extra_link);
/* overwrite_item: the log's item replaces the tree's (not for inodes). */
int bi_lr_overwrite(struct lr_ctx *cx, const struct bi_lr_item *li);

/* ---------------------------------- ops.c: inode items, their deletes */

/* replay_xattr_deletes: drop the inode's xattrs the log does not hold. */
int bi_lr_xattr_deletes(struct lr_ctx *cx, uint64_t ino);
/* replay_dir_deletes: unlink the entries of the logged index ranges that
 * the log does not hold (@del_all: every entry). */
int bi_lr_dir_deletes(struct lr_ctx *cx, uint64_t dirid, bool del_all);
/* overwrite_item for an inode item. */
int bi_lr_overwrite_inode(struct lr_ctx *cx, const struct bi_lr_item *li);

/* ------------------------------------------ ops.c: extents, checksums */

/* btrfs_drop_extents(start, end): *found gets the allocated bytes dropped. */
int bi_lr_drop_extents(struct lr_ctx *cx, uint64_t ino, uint64_t start, uint64_t end,
		       uint64_t *found);
/* replay_one_extent: drop what the logged extent covers, insert it. */
int bi_lr_replay_extent(struct lr_ctx *cx, const struct bi_lr_item *li);
/* free_freed_extents: the checksums of data extents left without a
 * reference go (in-order walk of the extent view's map from @n). */
int bi_lr_free_extents(struct lr_ctx *cx, struct lr_node *n);

/* ------------------------------------- ops.c: the link count fixup */

/* fixup_inode_link_counts, for the current fs tree. */
int bi_lr_fixups(struct lr_ctx *cx);
/* What mount's orphan cleanup does to the inodes replay orphaned. */
int bi_lr_orphan_cleanup(struct lr_ctx *cx);

#endif
