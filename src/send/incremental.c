// SPDX-License-Identifier: MIT
/*
 * Incremental send streams: from a parent snapshot the receiving side
 * holds to the one sent, only what changed (the inodes whose items differ
 * between the two trees, found through the blocks they share).
 *
 * Renames are where incremental streams go wrong (two names swapped, a
 * directory moved below its former child, a name taken over by a new
 * inode), so every inode whose own name changes is first moved out of the
 * way to its orphan name at the top, every name that goes is unlinked,
 * and new inodes are made at their orphan names; then directories are
 * moved to their new paths shallowest first and everything else after
 * them, when every parent is in place; directories that went are removed
 * once emptied; data, xattrs, owners, modes and times come last. Paths
 * are always computed as the receiving side has them at that moment: the
 * parent snapshot's tree, with each inode moved so far at its new place.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btrfsimg.h"

#include "base/cursor.h"
#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "btrfs/treecmp.h"
#include "send/commands.h"
#include "send/incremental.h"
#include "send/paths.h"

#define FALLOC_KEEP_SIZE_PUNCH 3	/* FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE */

/* Where an object is on the receiving side when it is not where the
 * parent snapshot has it. */
struct place {
	bool set;
	uint64_t parent;
	struct bi_bytes name;
};

struct change {
	uint64_t id;
	struct bi_inode_links a, b;	/* the inode in the parent, in the one sent */
	bool same;			/* one inode on both sides (same generation) */
	struct place old, now;		/* the parent's object (when not same), the sent one */
	bool rmdir;
};

struct incr {
	struct bi_send *s;
	struct change *c;
	size_t n, cap;
	struct bi_bytes from, to;	/* scratch paths */
};

enum side { OLD, NEW };

/* ----------------------------------------------------------- changes */

static int note_changed(void *ctx, const bi_key *k, const struct bi_cmp_side *a,
			const struct bi_cmp_side *b)
{
	(void)a;
	(void)b;
	struct incr *in = ctx;
	if (k->objectid < OBJ_FIRST_FREE || k->objectid > OBJ_LAST_FREE)
		return 0;
	if (in->n && in->c[in->n - 1].id == k->objectid)
		return 0;
	int rc = bi_grow((void **)&in->c, &in->cap, in->n + 1, sizeof(*in->c));
	if (rc < 0)
		return rc;
	in->c[in->n++] = (struct change){ .id = k->objectid };
	return 0;
}

static struct change *find(struct incr *in, uint64_t id)
{
	size_t lo = 0, hi = in->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (in->c[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < in->n && in->c[lo].id == id ? &in->c[lo] : NULL;
}

static int load_changes(struct incr *in)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		c->a.subvol = in->s->parent->id;
		c->b.subvol = in->s->sv->id;
		rc = bi_inode_links_load(in->s->fs, &c->a, c->id);
		if (rc == 0)
			rc = bi_inode_links_load(in->s->fs, &c->b, c->id);
		c->same = c->a.exists && c->b.exists && c->a.ino.generation == c->b.ino.generation;
	}
	return rc;
}

/* ------------------------------------------------------ current paths */

static const struct place *place_of(struct incr *in, uint64_t dir, enum side side)
{
	struct change *c = find(in, dir);
	if (!c)
		return NULL;
	if (c->same)
		return &c->now;
	return side == OLD ? &c->old : &c->now;
}

struct place_ask {
	struct incr *in;
	enum side side;
};

static int placed(void *ctx, uint64_t dir, uint64_t *parent, const uint8_t **name, size_t *len)
{
	struct place_ask *a = ctx;
	const struct place *p = place_of(a->in, dir, a->side);
	if (!p || !p->set)
		return 0;
	*parent = p->parent;
	*name = p->name.p;
	*len = p->name.len;
	return 1;
}

/* Directory @dir's path on the receiving side now: the parent snapshot's
 * tree, with what has moved so far where it went. */
static int dir_now(struct incr *in, uint64_t dir, enum side side, struct bi_bytes *out)
{
	struct place_ask a = { in, side };
	return bi_dir_path_placed(in->s->fs, in->s->parent->id, dir, placed, &a, out);
}

static int link_now(struct incr *in, const struct bi_link *l, enum side side,
		    struct bi_bytes *out)
{
	int rc = dir_now(in, l->parent, side, out);
	if (rc == 0 && out->len)
		rc = bi_bytes_put(out, "/", 1);
	return rc < 0 ? rc : bi_bytes_put(out, l->name, l->len);
}

static int place_set(struct place *p, uint64_t parent, const uint8_t *name, size_t len)
{
	p->set = true;
	p->parent = parent;
	p->name.len = 0;
	return bi_bytes_put(&p->name, name, len);
}

/* ------------------------------------------------- 1: out of the way
 * (paths name the parent snapshot's objects: side OLD) */

static int path_cmd(struct incr *in, enum bi_send_cmd cmd, const struct bi_bytes *path)
{
	bi_cmd_start(&in->s->st, cmd);
	bi_send_attr_path(&in->s->st, SEND_A_PATH, path);
	return bi_cmd_send(&in->s->st);
}

/* Link @l of @ino to its orphan name, where @p then says it is. */
static int to_orphan(struct incr *in, const struct bi_link *l, enum side side, struct place *p,
		     const struct btrfsimg_inode *ino)
{
	int rc = link_now(in, l, side, &in->from);
	if (rc == 0)
		rc = bi_send_orphan_name(in->s, ino, &in->to);
	if (rc == 0)
		rc = bi_send_rename(in->s, &in->from, &in->to);
	return rc < 0 ? rc : place_set(p, OBJ_FIRST_FREE, in->to.p, in->to.len);
}

static int unlink_link(struct incr *in, const struct bi_link *l, enum side side)
{
	int rc = link_now(in, l, side, &in->from);
	return rc < 0 ? rc : path_cmd(in, SEND_C_UNLINK, &in->from);
}

static int clear_same(struct incr *in, struct change *c)
{
	if (S_ISDIR(c->b.ino.mode)) {
		if (c->a.nlinks && !bi_has_link(&c->b, &c->a.links[0]))
			return to_orphan(in, &c->a.links[0], OLD, &c->now, &c->a.ino);
		return 0;
	}
	bool kept = false;
	for (size_t i = 0; i < c->a.nlinks; i++)
		kept |= bi_has_link(&c->b, &c->a.links[i]);
	bool keep_one = !kept && c->b.nlinks > 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < c->a.nlinks; i++) {
		if (bi_has_link(&c->b, &c->a.links[i]))
			continue;
		if (keep_one) {
			rc = to_orphan(in, &c->a.links[i], OLD, &c->now, &c->a.ino);
			keep_one = false;
		} else {
			rc = unlink_link(in, &c->a.links[i], OLD);
		}
	}
	return rc;
}

static int clear_gone(struct incr *in, struct change *c)
{
	if (S_ISDIR(c->a.ino.mode)) {
		c->rmdir = c->a.nlinks > 0;
		return c->rmdir ? to_orphan(in, &c->a.links[0], OLD, &c->old, &c->a.ino) : 0;
	}
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < c->a.nlinks; i++)
		rc = unlink_link(in, &c->a.links[i], OLD);
	return rc;
}

/* ---------------------------------------------------- 2 and 3: place */

static int create_new(struct incr *in, struct change *c)
{
	int rc = bi_send_orphan_name(in->s, &c->b.ino, &in->to);
	if (rc == 0)
		rc = bi_send_create(in->s, &c->b.ino, &in->to);
	return rc < 0 ? rc : place_set(&c->now, OBJ_FIRST_FREE, in->to.p, in->to.len);
}

struct by_depth {
	size_t depth;
	struct change *c;
};

static int depth_cmp(const void *x, const void *y)
{
	const struct by_depth *a = x, *b = y;
	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	return a->c->id < b->c->id ? -1 : a->c->id > b->c->id;
}

/* A directory waiting at its orphan name goes to its new path: every
 * shallower one is in place by then. */
static int place_dirs(struct incr *in)
{
	struct by_depth *v = calloc(in->n ? in->n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		if (!c->b.exists || !S_ISDIR(c->b.ino.mode) || !c->now.set || !c->b.nlinks)
			continue;
		rc = bi_dir_path(in->s->fs, in->s->sv->id, c->id, &in->to);
		size_t d = 1;
		for (size_t k = 0; k < in->to.len; k++)
			d += in->to.p[k] == '/';
		v[n++] = (struct by_depth){ d, c };
	}
	qsort(v, n, sizeof(*v), depth_cmp);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		struct change *c = v[k].c;
		const struct bi_link *l = &c->b.links[0];
		rc = dir_now(in, c->id, NEW, &in->from);
		if (rc == 0)
			rc = link_now(in, l, NEW, &in->to);
		if (rc == 0)
			rc = bi_send_rename(in->s, &in->from, &in->to);
		if (rc == 0)
			rc = place_set(&c->now, l->parent, l->name, l->len);
	}
	free(v);
	return rc;
}

static int link_cmd(struct incr *in, const struct bi_bytes *existing, const struct bi_link *l)
{
	int rc = link_now(in, l, NEW, &in->to);
	if (rc < 0)
		return rc;
	bi_cmd_start(&in->s->st, SEND_C_LINK);
	bi_send_attr_path(&in->s->st, SEND_A_PATH, &in->to);
	bi_send_attr_path(&in->s->st, SEND_A_PATH_LINK, existing);
	return bi_cmd_send(&in->s->st);
}

static bool is_place(const struct place *p, const struct bi_link *l)
{
	return p->set && p->parent == l->parent && p->name.len == l->len &&
	       memcmp(p->name.p, l->name, l->len) == 0;
}

/* A name the sent object has on the receiving side now: where it was
 * placed, else one it kept from the parent. */
static int file_now(struct incr *in, const struct change *c, struct bi_bytes *out)
{
	for (size_t i = 0; i < c->b.nlinks; i++) {
		const struct bi_link *l = &c->b.links[i];
		if (is_place(&c->now, l) || (c->same && !c->now.set && bi_has_link(&c->a, l)))
			return link_now(in, l, NEW, out);
	}
	out->len = 0;
	return bi_bytes_put(out, "", 0); /* the root directory */
}

/* A file's new names: from its orphan name to the first, the rest as
 * links from a name it has by then. */
static int place_file(struct incr *in, struct change *c)
{
	const struct bi_inode_links *a = c->same ? &c->a : NULL;
	int rc = 0;
	for (size_t i = 0; c->now.set && i < c->b.nlinks; i++) {
		const struct bi_link *l = &c->b.links[i];
		if (a && bi_has_link(a, l))
			continue;
		rc = link_now(in, l, NEW, &in->to);
		if (rc == 0)
			rc = bi_send_rename(in->s, &c->now.name, &in->to);
		if (rc == 0)
			rc = place_set(&c->now, l->parent, l->name, l->len);
		break;
	}
	struct bi_bytes have = { 0 };
	for (size_t i = 0; rc == 0 && i < c->b.nlinks; i++) {
		const struct bi_link *l = &c->b.links[i];
		if ((a && bi_has_link(a, l)) || is_place(&c->now, l))
			continue;
		if (!have.len)
			rc = file_now(in, c, &have);
		if (rc == 0)
			rc = link_cmd(in, &have, l);
	}
	free(have.p);
	return rc;
}

/* ----------------------------------------------------- 5: what is in */

/* What a stretch of a file reads from: the same data extent at the same
 * place, or zeros (a hole or preallocated space), is the same bytes; inline
 * data is compared by the bytes it gives, so it counts as changed. */
struct seg {
	uint64_t lo, hi;
	int kind;		/* 0 zeros, 1 extent, 2 inline */
	uint64_t disk_bytenr;
	int64_t shift;		/* extent position - file offset */
	int compression;
};

struct segs {
	struct seg *v;
	size_t n, cap;
};

static int file_segs(struct btrfsimg_fs *fs, uint64_t subvol, uint64_t ino, struct segs *out)
{
	btrfsimg_extents *it;
	int rc = btrfsimg_extents_open(fs, subvol, ino, 0, &it);
	if (rc < 0)
		return rc;
	const struct btrfsimg_extent *e;
	while ((rc = btrfsimg_extents_next(it, &e)) > 0) {
		rc = bi_grow((void **)&out->v, &out->cap, out->n + 1, sizeof(*out->v));
		if (rc < 0)
			break;
		struct seg s = { e->file_offset, e->file_offset + e->length, 0, 0, 0, 0 };
		if (e->type == BTRFSIMG_EXTENT_REGULAR && e->disk_bytenr) {
			s.kind = 1;
			s.disk_bytenr = e->disk_bytenr;
			s.shift = (int64_t)(e->extent_offset - e->item_offset);
			s.compression = e->compression;
		} else if (e->type == BTRFSIMG_EXTENT_INLINE) {
			s.kind = 2;
		}
		out->v[out->n++] = s;
	}
	btrfsimg_extents_close(it);
	return rc < 0 ? rc : 0;
}

static bool same_source(const struct seg *a, const struct seg *b)
{
	if (a->kind != b->kind || a->kind == 2)
		return false;
	return a->kind == 0 || (a->disk_bytenr == b->disk_bytenr && a->shift == b->shift &&
				a->compression == b->compression);
}

struct range {
	uint64_t lo, hi;
};

static int add_range(struct range **v, size_t *n, size_t *cap, uint64_t lo, uint64_t hi)
{
	if (*n && (*v)[*n - 1].hi == lo) {
		(*v)[*n - 1].hi = hi;
		return 0;
	}
	int rc = bi_grow((void **)v, cap, *n + 1, sizeof(**v));
	if (rc == 0)
		(*v)[(*n)++] = (struct range){ lo, hi };
	return rc;
}

/* Where the sent file does not read from what the parent's did: the two
 * lists of stretches walked side by side, up to the new size. */
static int changed_ranges(const struct segs *a, const struct segs *b, uint64_t size,
			  struct range **out, size_t *n)
{
	size_t i = 0, j = 0, cap = 0;
	*out = NULL;
	*n = 0;
	static const struct seg zeros = { 0, UINT64_MAX, 0, 0, 0, 0 };
	for (uint64_t pos = 0; pos < size;) {
		while (i < a->n && a->v[i].hi <= pos)
			i++;
		while (j < b->n && b->v[j].hi <= pos)
			j++;
		const struct seg *x = i < a->n && a->v[i].lo <= pos ? &a->v[i] : &zeros;
		const struct seg *y = j < b->n && b->v[j].lo <= pos ? &b->v[j] : &zeros;
		uint64_t end = size;
		if (x != &zeros && x->hi < end)
			end = x->hi;
		else if (x == &zeros && i < a->n && a->v[i].lo < end)
			end = a->v[i].lo;
		if (y != &zeros && y->hi < end)
			end = y->hi;
		else if (y == &zeros && j < b->n && b->v[j].lo < end)
			end = b->v[j].lo;
		if (end <= pos)
			end = pos + 1; /* never stand still on a malformed list */
		if (!same_source(x, y)) {
			int rc = add_range(out, n, &cap, pos, end);
			if (rc < 0)
				return rc;
		}
		pos = end;
	}
	return 0;
}

/* Bytes that are a hole in the file sent but held data before. */
static int send_hole(struct incr *in, const struct change *c, const struct bi_bytes *path,
		     uint64_t lo, uint64_t hi)
{
	if (hi > c->a.ino.size)
		hi = c->a.ino.size; /* past the old end they read as zeros already */
	if (lo >= hi)
		return 0;
	struct bi_stream *st = &in->s->st;
	if (st->proto >= 2) {
		bi_cmd_start(st, SEND_C_FALLOCATE);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr_u32(st, SEND_A_FALLOCATE_MODE, FALLOC_KEEP_SIZE_PUNCH);
		bi_attr_u64(st, SEND_A_FILE_OFFSET, lo);
		bi_attr_u64(st, SEND_A_SIZE, hi - lo);
		return bi_cmd_send(st);
	}
	memset(in->s->buf, 0, SEND_WRITE_PIECE);
	for (uint64_t off = lo; off < hi;) {
		size_t n = hi - off < SEND_WRITE_PIECE ? (size_t)(hi - off) : SEND_WRITE_PIECE;
		bi_cmd_start(st, SEND_C_WRITE);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr_u64(st, SEND_A_FILE_OFFSET, off);
		bi_attr_data(st, in->s->buf, n);
		int rc = bi_cmd_send(st);
		if (rc < 0)
			return rc;
		off += n;
	}
	return 0;
}

static int send_range(struct incr *in, const struct change *c, const struct bi_bytes *path,
		      uint64_t lo, uint64_t hi)
{
	for (uint64_t pos = lo; pos < hi;) {
		uint64_t ds, de;
		int rc = btrfsimg_file_data(in->s->fs, in->s->sv->id, c->id, pos, &ds, &de);
		if (rc == -ENXIO)
			ds = de = hi;
		else if (rc < 0)
			return rc;
		if (ds > hi)
			ds = hi;
		if (de > hi)
			de = hi;
		if (ds > pos)
			rc = send_hole(in, c, path, pos, ds);
		if (rc == 0 && de > ds)
			rc = bi_send_write(in->s, &c->b.ino, path, ds, de);
		if (rc < 0)
			return rc;
		pos = de > ds ? de : hi;
	}
	return 0;
}

/* The changed stretches @v (ascending, apart): each data extent of the
 * sent file wholly inside one goes out as a full stream sends it (a clone
 * of what the receiving side holds, an encoded write), as the kernel's
 * send does; the rest (parts of extents, inline data, holes) as bytes or
 * punched holes. One pass over the file's extents for all stretches. */
static int send_changes(struct incr *in, const struct change *c, const struct bi_bytes *path,
			const struct range *v, size_t n)
{
	btrfsimg_extents *it;
	int rc = btrfsimg_extents_open(in->s->fs, c->b.subvol, c->id, 0, &it);
	if (rc < 0)
		return rc;
	const struct btrfsimg_extent *e = NULL;
	bool more = true;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint64_t pos = v[i].lo;
		while (rc == 0) {
			if (e && e->file_offset + e->length <= pos)
				e = NULL;
			if (!e) {
				rc = more ? btrfsimg_extents_next(it, &e) : 0;
				more = rc > 0;
				if (rc <= 0) {
					e = NULL;
					break;
				}
				rc = 0;
				continue;
			}
			uint64_t end = e->file_offset + e->length;
			if (e->file_offset >= v[i].hi || end > v[i].hi)
				break; /* reaches past this stretch: its bytes go as they are */
			if (e->type == BTRFSIMG_EXTENT_REGULAR && e->disk_bytenr && e->file_offset >= pos) {
				if (e->file_offset > pos)
					rc = send_range(in, c, path, pos, e->file_offset);
				if (rc == 0)
					rc = bi_send_extent(in->s, &c->b.ino, path, e);
				pos = end;
			}
			e = NULL;
		}
		if (rc == 0 && pos < v[i].hi)
			rc = send_range(in, c, path, pos, v[i].hi);
	}
	btrfsimg_extents_close(it);
	return rc;
}

static int data_changes(struct incr *in, const struct change *c, const struct bi_bytes *path)
{
	struct segs a = { 0 }, b = { 0 };
	int rc = file_segs(in->s->fs, c->a.subvol, c->id, &a);
	if (rc == 0)
		rc = file_segs(in->s->fs, c->b.subvol, c->id, &b);
	struct range *v = NULL;
	size_t n = 0;
	if (rc == 0)
		rc = changed_ranges(&a, &b, c->b.ino.size, &v, &n);
	if (rc == 0)
		rc = send_changes(in, c, path, v, n);
	if (rc == 0 && c->a.ino.size != c->b.ino.size) {
		struct bi_stream *st = &in->s->st;
		bi_cmd_start(st, SEND_C_TRUNCATE);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr_u64(st, SEND_A_SIZE, c->b.ino.size);
		rc = bi_cmd_send(st);
	}
	free(v);
	free(a.v);
	free(b.v);
	return rc;
}

struct xattr_set {
	struct bi_bytes *names, *values;
	size_t n, cap, vcap;
};

static int take_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		      size_t vlen)
{
	struct xattr_set *x = ctx;
	size_t cap = x->cap;
	int rc = bi_grow((void **)&x->names, &x->cap, x->n + 1, sizeof(*x->names));
	if (rc == 0)
		rc = bi_grow((void **)&x->values, &cap, x->n + 1, sizeof(*x->values));
	if (rc < 0)
		return rc;
	x->names[x->n] = (struct bi_bytes){ 0 };
	x->values[x->n] = (struct bi_bytes){ 0 };
	x->n++;
	rc = bi_bytes_put(&x->names[x->n - 1], name, nlen);
	return rc < 0 ? rc : bi_bytes_put(&x->values[x->n - 1], value, vlen);
}

static void xattr_set_free(struct xattr_set *x)
{
	for (size_t i = 0; i < x->n; i++) {
		free(x->names[i].p);
		free(x->values[i].p);
	}
	free(x->names);
	free(x->values);
}

static bool same_bytes(const struct bi_bytes *a, const struct bi_bytes *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

/* -1 if @x has no xattr @name, else its index. */
static long xattr_at(const struct xattr_set *x, const struct bi_bytes *name)
{
	for (size_t i = 0; i < x->n; i++)
		if (same_bytes(&x->names[i], name))
			return (long)i;
	return -1;
}

static int xattr_changes(struct incr *in, const struct change *c, const struct bi_bytes *path)
{
	struct xattr_set a = { 0 }, b = { 0 };
	struct bi_stream *st = &in->s->st;
	int rc = btrfsimg_xattrs(in->s->fs, c->a.subvol, c->id, take_xattr, &a);
	if (rc == 0)
		rc = btrfsimg_xattrs(in->s->fs, c->b.subvol, c->id, take_xattr, &b);
	for (size_t i = 0; rc == 0 && i < a.n; i++) {
		if (xattr_at(&b, &a.names[i]) >= 0)
			continue;
		bi_cmd_start(st, SEND_C_REMOVE_XATTR);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr(st, SEND_A_XATTR_NAME, a.names[i].p, a.names[i].len);
		rc = bi_cmd_send(st);
	}
	for (size_t i = 0; rc == 0 && i < b.n; i++) {
		long k = xattr_at(&a, &b.names[i]);
		if (k >= 0 && same_bytes(&a.values[k], &b.values[i]))
			continue;
		bi_cmd_start(st, SEND_C_SET_XATTR);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr(st, SEND_A_XATTR_NAME, b.names[i].p, b.names[i].len);
		bi_attr(st, SEND_A_XATTR_DATA, b.values[i].p, b.values[i].len);
		rc = bi_cmd_send(st);
	}
	xattr_set_free(&a);
	xattr_set_free(&b);
	return rc;
}

static int owner_mode_changes(struct incr *in, const struct change *c,
			      const struct bi_bytes *path)
{
	const struct btrfsimg_inode *x = &c->a.ino, *y = &c->b.ino;
	struct bi_stream *st = &in->s->st;
	int rc = 0;
	if (x->uid != y->uid || x->gid != y->gid) {
		bi_cmd_start(st, SEND_C_CHOWN);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr_u64(st, SEND_A_UID, y->uid);
		bi_attr_u64(st, SEND_A_GID, y->gid);
		rc = bi_cmd_send(st);
	}
	/* after chown, which clears set-id bits, as the kernel's send orders them */
	if (rc == 0 && !S_ISLNK(y->mode) &&
	    (x->mode != y->mode || x->uid != y->uid || x->gid != y->gid)) {
		bi_cmd_start(st, SEND_C_CHMOD);
		bi_send_attr_path(st, SEND_A_PATH, path);
		bi_attr_u64(st, SEND_A_MODE, y->mode & 07777);
		rc = bi_cmd_send(st);
	}
	return rc;
}

static int contents(struct incr *in, struct change *c)
{
	struct bi_bytes path = { 0 };
	int rc = S_ISDIR(c->b.ino.mode) ? dir_now(in, c->id, NEW, &path) : file_now(in, c, &path);
	if (rc == 0 && !c->same) {
		if (S_ISREG(c->b.ino.mode))
			rc = bi_send_survive(in->s, bi_send_data(in->s, &c->b.ino, &path),
					     &c->b.ino, &path);
		if (rc == 0)
			rc = bi_send_owner_mode(in->s, &c->b.ino, &path);
	} else if (rc == 0) {
		if (S_ISREG(c->b.ino.mode))
			rc = bi_send_survive(in->s, data_changes(in, c, &path), &c->b.ino, &path);
		if (rc == 0)
			rc = xattr_changes(in, c, &path);
		if (rc == 0)
			rc = owner_mode_changes(in, c, &path);
	}
	if (rc == 0)
		rc = bi_send_times(in->s, &c->b.ino, &path);
	in->s->stats->inodes++;
	free(path.p);
	return rc;
}

/* The root directory's times: its entries came and went under orphan
 * names even when it did not change. */
static int root_times(struct incr *in)
{
	if (find(in, OBJ_FIRST_FREE))
		return 0;
	struct btrfsimg_inode root;
	int rc = btrfsimg_inode_get(in->s->fs, in->s->sv->id, OBJ_FIRST_FREE, &root);
	struct bi_bytes path = { 0 };
	if (rc == 0)
		rc = bi_bytes_put(&path, "", 0);
	if (rc == 0)
		rc = bi_send_times(in->s, &root, &path);
	free(path.p);
	return rc;
}

/* ------------------------------------------------------------ driver */

static int phases(struct incr *in)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		if (c->same)
			rc = clear_same(in, c);
		else if (c->a.exists)
			rc = clear_gone(in, c);
	}
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		if (c->b.exists && !c->same && c->b.nlinks)
			rc = create_new(in, c);
	}
	if (rc == 0)
		rc = place_dirs(in);
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		if (c->b.exists && c->b.nlinks && !S_ISDIR(c->b.ino.mode))
			rc = place_file(in, c);
	}
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		if (!c->rmdir)
			continue;
		rc = dir_now(in, c->id, OLD, &in->from);
		if (rc == 0)
			rc = path_cmd(in, SEND_C_RMDIR, &in->from);
	}
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		struct change *c = &in->c[i];
		if (c->b.exists && (c->b.nlinks || c->id == OBJ_FIRST_FREE))
			rc = contents(in, c);
	}
	return rc == 0 ? root_times(in) : rc;
}

int bi_send_incremental(struct bi_send *s)
{
	struct bi_root ra, rb;
	int rc = bi_root_find(s->fs, s->parent->id, &ra);
	if (rc == 0)
		rc = bi_root_find(s->fs, s->sv->id, &rb);
	if (rc < 0)
		return rc;
	struct incr in = { .s = s };
	struct bi_treecmp_stats st;
	rc = bi_tree_compare(s->fs, &ra, &rb, note_changed, &in, &st);
	if (rc == 0)
		rc = load_changes(&in);
	if (rc == 0)
		rc = bi_send_subvol(s);
	if (rc == 0)
		rc = phases(&in);
	if (rc == 0) {
		bi_cmd_start(&s->st, SEND_C_END);
		rc = bi_cmd_send(&s->st);
	}
	for (size_t i = 0; i < in.n; i++) {
		bi_inode_links_clear(&in.c[i].a);
		bi_inode_links_clear(&in.c[i].b);
		free(in.c[i].old.name.p);
		free(in.c[i].now.name.p);
	}
	free(in.c);
	free(in.from.p);
	free(in.to.p);
	return rc;
}
