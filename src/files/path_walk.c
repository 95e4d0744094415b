// SPDX-License-Identifier: MIT
/*
 * The walk iterator (btrfsimg_walk_*): every path under a start as a
 * process walking the mounted filesystem sees them, depth-first in readdir
 * (DIR_INDEX) order, crossing into subvolumes, stub directories empty.
 * The one traversal behind the CLI's walk, bodyfile and extract and the
 * Python binding's Filesystem.walk().
 *
 * A stack of frames, one per open directory (frame i is the directory at
 * depth i of the current path), each holding that directory's listing.
 * Listing a directory waits for the call after its own record, so that a
 * caller can skip it (btrfsimg_walk_skip) and errors come in path order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/grow.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/salvage.h"
#include "files/dir.h"
#include "files/inode.h"
#include "files/orphans.h"

struct frame {
	struct btrfsimg_walk_entry self; /* the directory's record (for POST) */
	struct btrfsimg_dirent *e;	 /* its listing; names in @names */
	size_t n, cap, next;
	uint8_t *names;
	size_t names_len, names_cap;
	size_t path_len; /* the directory's path */
};

struct btrfsimg_walk {
	btrfsimg_fs *fs;
	uint64_t subvol;
	unsigned flags;
	size_t max_depth;
	struct frame *fr;
	size_t nfr, frcap;
	char *start; /* the start path (the start's ent.name points into it) */
	uint8_t *path;
	size_t path_len, path_cap;
	struct btrfsimg_walk_entry cur;
	bool started, descend, done;
	struct bi_root root; /* the last subvolume's root (inode_of) */
	bool have_root;
};

/* The path of the directory at @base bytes, then @name in its safe form
 * (base/name.h): a damaged name never reads as a separator or a step
 * up, and a NUL in it never ends the path. */
static int path_set(struct btrfsimg_walk *w, size_t base, const uint8_t *name, size_t len)
{
	size_t need = base + BI_NAME_SAFE_MAX(len) + 2;
	if (bi_grow((void **)&w->path, &w->path_cap, need, 1))
		return -ENOMEM;
	w->path_len = base;
	if (base)
		w->path[w->path_len++] = '/';
	if (base == 0 && len == 0) /* the start: "" */
		w->path[0] = '\0';
	else
		w->path_len += bi_name_safe(name, len, (char *)w->path + w->path_len,
					    w->path_cap - w->path_len);
	return 0;
}

static void path_cut(struct btrfsimg_walk *w, size_t len)
{
	w->path_len = len;
	w->path[len] = '\0';
}

/* btrfsimg_readdir callback: the entry and its name (into the arena; the
 * name pointers are set once the listing is complete). */
static int collect(void *ctx, const struct btrfsimg_dirent *d)
{
	struct frame *f = ctx;
	if (bi_grow((void **)&f->e, &f->cap, f->n + 1, sizeof(*f->e)))
		return -ENOMEM;
	if (bi_grow((void **)&f->names, &f->names_cap, f->names_len + d->name_len, 1))
		return -ENOMEM;
	struct btrfsimg_dirent *e = &f->e[f->n++];
	*e = *d;
	memcpy(f->names + f->names_len, d->name, d->name_len);
	e->name = (const uint8_t *)(uintptr_t)f->names_len; /* offset for now */
	f->names_len += d->name_len;
	return 0;
}

static void frame_free(struct frame *f)
{
	free(f->e);
	free(f->names);
}

/* Length of the first @k components of @path (the path of ancestor k). */
static size_t prefix_len(const uint8_t *path, size_t len, size_t k)
{
	size_t i = 0;
	for (; i < len && k; i++)
		k -= path[i] == '/';
	return k ? len : (i ? i - 1 : 0);
}

static int error_rec(struct btrfsimg_walk *w, int rc, const char *op,
		     const struct btrfsimg_walk_entry **out)
{
	struct btrfsimg_walk_entry *c = &w->cur;
	c->kind = BTRFSIMG_WALK_ERROR;
	c->path = w->path;
	c->path_len = w->path_len;
	c->error = rc;
	c->op = op;
	*out = c;
	return 1;
}

/* Too deep, or one of its own ancestors (a corrupt entry naming an
 * ancestor would loop forever): the message, and true. */
static bool stop_descent(struct btrfsimg_walk *w, const struct btrfsimg_walk_entry *n)
{
	if (n->depth >= w->max_depth) {
		bi_err(w->fs, -ELOOP, "deeper than %zu directories: not descending", w->max_depth);
		return true;
	}
	for (size_t a = 0; a < w->nfr; a++) {
		const struct btrfsimg_walk_entry *s = &w->fr[a].self;
		if (s->subvol != n->subvol || s->objectid != n->objectid)
			continue;
		int alen = (int)prefix_len(n->path, n->path_len, a);
		bi_err(w->fs, -ELOOP,
		       "directory loop: it is %llu:%llu, its ancestor '%.*s': not descending",
		       (unsigned long long)n->subvol, (unsigned long long)n->objectid,
		       alen ? alen : 1, alen ? (const char *)n->path : ".");
		return true;
	}
	return false;
}

/* Damaged mode (the listing failed, the filesystem was opened by a
 * salvage, whose trees may miss leaves without an error, or the
 * directory is a synthesized root): the listing has the inodes its back
 * references place in it (btrfsimg_readdir); a subvolume root gets the
 * made-up BTRFSIMG_LOST_FOUND when some inode's chain of parents breaks.
 * Costs nothing on a filesystem read whole. */
static int add_orphans(struct btrfsimg_walk *w, struct frame *f)
{
	struct btrfsimg_dirent d;
	int rc = bi_orphans_lost_found(w->fs, f->self.subvol, f->self.objectid, &d);
	return rc > 0 ? collect(f, &d) : rc;
}

static int nothing(void *ctx, const struct btrfsimg_dirent *e)
{
	(void)ctx;
	(void)e;
	return 0;
}

/* The walk's damaged mode for the root of @subvol, asked by a front end
 * that lists with btrfsimg_readdir. */
static bool root_damaged(btrfsimg_fs *fs, uint64_t subvol)
{
	struct bi_root r;
	struct btrfsimg_inode ino;
	if (bi_salvage_trees_rebuilt(fs))
		return true;
	if (bi_root_find(fs, subvol, &r) < 0)
		return false;
	if (bi_inode_read(fs, &r, OBJ_FIRST_FREE, &ino) == 0 && ino.synthesized)
		return true;
	return btrfsimg_readdir(fs, subvol, OBJ_FIRST_FREE, nothing, NULL) < 0;
}

int btrfsimg_lost_found(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir,
			struct btrfsimg_dirent *out)
{
	if (!fs || !out || !bi_opened(fs, __func__))
		return -EINVAL;
	if (dir != OBJ_FIRST_FREE || !root_damaged(fs, subvol))
		return 0;
	return bi_orphans_lost_found(fs, subvol, dir, out);
}

/* List the directory of the last record (w->cur) into a new frame: 0, or
 * the readdir error (what was listed before it is kept), or -ENOMEM. */
static int descend(struct btrfsimg_walk *w)
{
	if (bi_grow((void **)&w->fr, &w->frcap, w->nfr + 1, sizeof(*w->fr)))
		return -ENOMEM;
	struct frame *f = &w->fr[w->nfr++];
	*f = (struct frame){ .self = w->cur, .path_len = w->path_len };
	int rc, more = 0;
	if (f->self.ent.kind == BTRFSIMG_TARGET_LOST && !f->self.is_start) {
		rc = bi_orphans_lost(w->fs, f->self.subvol, f->self.objectid, collect, f);
	} else {
		rc = btrfsimg_readdir(w->fs, f->self.subvol, f->self.objectid, collect, f);
		if (rc != -ENOMEM &&
		    (rc < 0 || bi_salvage_trees_rebuilt(w->fs) || f->self.inode.synthesized))
			more = add_orphans(w, f);
	}
	for (size_t i = 0; i < f->n; i++)
		f->e[i].name = f->names + (uintptr_t)f->e[i].name;
	if (more == -ENOMEM)
		return more;
	return rc < 0 ? rc : 0;
}

/* btrfsimg_inode_get, keeping the subvolume's root across calls (a root
 * tree lookup per path was a sixth of a walk's lookups' time). Objectid 2
 * goes through btrfsimg_inode_get for its message. */
static int root_of(struct btrfsimg_walk *w, uint64_t subvol)
{
	if (!w->have_root || w->root.id != subvol) {
		w->have_root = false;
		int rc = bi_root_find(w->fs, subvol, &w->root);
		if (rc < 0)
			return rc;
		w->have_root = true;
	}
	return 0;
}

static int inode_of(struct btrfsimg_walk *w, uint64_t subvol, uint64_t objectid,
		    struct btrfsimg_inode *out)
{
	if (objectid == OBJ_EMPTY_SUBVOL_DIR)
		return btrfsimg_inode_get(w->fs, subvol, objectid, out);
	int rc = root_of(w, subvol);
	return rc < 0 ? rc : bi_inode_read(w->fs, &w->root, objectid, out);
}

/* An entry of directory @dir leading to an inode of the same subvolume:
 * its inode, with its backref to @dir checked in the same descent. */
static int child_of(struct btrfsimg_walk *w, uint64_t dir, const struct btrfsimg_dirent *d,
		    struct btrfsimg_inode *out)
{
	if (d->target_objectid == OBJ_EMPTY_SUBVOL_DIR)
		return btrfsimg_inode_get(w->fs, d->target_subvol, d->target_objectid, out);
	int rc = root_of(w, d->target_subvol);
	return rc < 0 ? rc : bi_dir_child_inode(w->fs, &w->root, dir, d, out);
}

/* A walk started at a file by its path is that one record: its path is
 * the file's name (as `find FILE` prints it), not the empty path a start
 * directory has, whose children are named relative to it. */
static int start_name(struct btrfsimg_walk *w, const char *path)
{
	size_t end = strlen(path);
	while (end && path[end - 1] == '/')
		end--;
	size_t from = end;
	while (from && path[from - 1] != '/')
		from--;
	int rc = path_set(w, 0, (const uint8_t *)path + from, end - from);
	w->cur.path = w->path;
	w->cur.path_len = w->path_len;
	return rc;
}

static int start(struct btrfsimg_walk *w, const struct btrfsimg_walk_opts *o)
{
	struct btrfsimg_walk_entry *n = &w->cur;
	const char *path = w->start = strdup(o->path ? o->path : "");
	int rc = path ? path_set(w, 0, (const uint8_t *)"", 0) : -ENOMEM;
	if (rc < 0)
		return rc;
	*n = (struct btrfsimg_walk_entry){ .kind = BTRFSIMG_WALK_PATH,
					   .path = w->path,
					   .is_start = true };
	if (o->objectid) {
		n->subvol = o->subvol;
		n->objectid = o->objectid;
	} else if (*path == '\0' || strspn(path, "/") == strlen(path)) {
		n->subvol = o->subvol;
		n->objectid = 256;
	} else {
		rc = btrfsimg_path_lookup(w->fs, o->subvol, path, &n->ent);
		if (rc < 0)
			return rc;
		n->subvol = n->ent.target_subvol;
		n->objectid = n->ent.target_objectid;
		n->stub = n->ent.kind == BTRFSIMG_TARGET_STUB;
	}
	n->dir_subvol = n->subvol;
	n->dir_objectid = n->objectid;
	if (!n->stub) {
		rc = btrfsimg_inode_get(w->fs, n->subvol, n->objectid, &n->inode);
		if (rc < 0 || o->objectid || S_ISDIR(n->inode.mode) || !*path)
			return rc;
		return start_name(w, path);
	}
	/* a stub takes owner and atime from the directory holding it */
	char *parent = strdup(path);
	if (!parent)
		return -ENOMEM;
	char *slash = strrchr(parent, '/');
	*(slash ? slash : parent) = '\0';
	struct btrfsimg_dirent pd;
	rc = btrfsimg_path_lookup(w->fs, o->subvol, parent, &pd);
	free(parent);
	if (rc == 0)
		rc = btrfsimg_stub_inode(w->fs, pd.target_subvol, pd.target_objectid, &n->inode);
	return rc;
}

int btrfsimg_walk_open(btrfsimg_fs *fs, const struct btrfsimg_walk_opts *o, btrfsimg_walk **out)
{
	*out = NULL;
	if (!bi_opened(fs, "btrfsimg_walk_open"))
		return -EINVAL;
	struct btrfsimg_walk *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fs = fs;
	w->subvol = o->subvol;
	w->flags = o->flags;
	w->max_depth = o->max_depth ? o->max_depth : BTRFSIMG_WALK_DEPTH_MAX;
	int rc = start(w, o);
	if (rc == 0 && fs->nsalvage_asof)
		w->cur.as_of_generation = bi_salvage_as_of(fs, w->cur.subvol, w->cur.objectid);
	if (rc < 0) {
		btrfsimg_walk_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

void btrfsimg_walk_skip(btrfsimg_walk *w)
{
	w->descend = false;
}

int btrfsimg_walk_next(btrfsimg_walk *w, const struct btrfsimg_walk_entry **out)
{
	int rc;
	*out = NULL;
	if (w->done)
		return 0;
	if (!w->started) {
		w->started = true;
		w->descend = S_ISDIR(w->cur.inode.mode) && !w->cur.stub;
		*out = &w->cur;
		return 1;
	}
	if (w->descend) {
		w->descend = false;
		if (stop_descent(w, &w->cur))
			return error_rec(w, -ELOOP, NULL, out);
		rc = descend(w);
		if (rc == -ENOMEM)
			goto fatal;
		if (rc < 0)
			return error_rec(w, rc, "readdir", out);
	}
	while (w->nfr) {
		struct frame *f = &w->fr[w->nfr - 1];
		struct btrfsimg_walk_entry *n = &w->cur;
		if (f->next == f->n) {
			path_cut(w, f->path_len);
			*n = f->self;
			frame_free(f);
			w->nfr--;
			if (!(w->flags & BTRFSIMG_WALK_POST_DIRS))
				continue;
			n->kind = BTRFSIMG_WALK_POST;
			n->path = w->path;
			n->dir_inode = w->nfr ? &w->fr[w->nfr - 1].self.inode : NULL;
			*out = n;
			return 1;
		}
		const struct btrfsimg_dirent *d = &f->e[f->next++];
		if ((rc = path_set(w, f->path_len, d->name, d->name_len)) < 0)
			goto fatal;
		/* field by field, every one: zeroing the whole record first
		 * (the inode then overwritten) cost more than the rest */
		n->kind = BTRFSIMG_WALK_PATH;
		n->path = w->path;
		n->path_len = w->path_len;
		n->depth = w->nfr;
		n->is_start = false;
		n->stub = d->kind == BTRFSIMG_TARGET_STUB;
		n->ent = *d;
		n->subvol = d->target_subvol;
		n->objectid = d->target_objectid;
		n->dir_subvol = f->self.subvol;
		n->dir_objectid = f->self.objectid;
		n->dir_inode = &f->self.inode;
		n->error = 0;
		n->op = NULL;
		n->lost_found = f->self.lost_found || d->kind == BTRFSIMG_TARGET_LOST;
		n->as_of_generation = w->fs->nsalvage_asof
					      ? bi_salvage_as_of(w->fs, n->subvol, n->objectid)
					      : 0;
		rc = 0;
		if (d->kind == BTRFSIMG_TARGET_LOST)
			bi_orphans_dir_inode(n->objectid, &n->inode);
		else if (f->self.ent.kind == BTRFSIMG_TARGET_LOST && !f->self.objectid)
			rc = inode_of(w, n->subvol, n->objectid, &n->inode); /* no back reference */
		else if (n->stub)
			rc = btrfsimg_stub_inode(w->fs, f->self.subvol, f->self.objectid,
						 &n->inode);
		else if (d->kind == BTRFSIMG_TARGET_INODE)
			rc = child_of(w, f->self.objectid, d, &n->inode);
		else
			rc = inode_of(w, n->subvol, n->objectid, &n->inode);
		if (rc == -ENOMEM)
			goto fatal;
		if (rc < 0) {
			memset(&n->inode, 0, sizeof(n->inode)); /* not half a read */
			return error_rec(w, rc, "inode", out);
		}
		w->descend = S_ISDIR(n->inode.mode) && !n->stub;
		*out = n;
		return 1;
	}
	w->done = true;
	return 0;
fatal:
	w->done = true;
	return bi_err(w->fs, rc, "walk: %s", strerror(-rc));
}

void btrfsimg_walk_close(btrfsimg_walk *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nfr; i++)
		frame_free(&w->fr[i]);
	free(w->fr);
	free(w->path);
	free(w->start);
	free(w);
}

/* A child of a listed directory is encoded from the inodes the walk holds
 * (two lookups fewer per path); the start and stub directories go through
 * the lookup, which knows the stub's rules. */
int btrfsimg_walk_handle(btrfsimg_fs *fs, const struct btrfsimg_walk_entry *e, bool connectable,
			 uint32_t *type, uint8_t out[40])
{
	if (!e)
		return -EINVAL;
	/* a synthesized inode's generation, which a handle holds, is unknown */
	if (e->inode.synthesized || (connectable && e->dir_inode && e->dir_inode->synthesized))
		return -ENODATA;
	if (e->dir_inode && !e->stub)
		return btrfsimg_file_handle_encode(e->subvol, e->objectid, e->inode.generation,
						   e->inode.mode, e->dir_subvol, e->dir_objectid,
						   e->dir_inode->generation, connectable, type, out);
	return btrfsimg_file_handle(fs, e->subvol, e->objectid, e->dir_subvol, e->dir_objectid,
				    connectable, type, out);
}
