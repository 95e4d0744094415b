/* SPDX-License-Identifier: MIT */
/*
 * Enumerate every inode of one subvolume (or of all) with one path each.
 *
 * One ordered pass over the fs tree reads, per objectid, the INODE_ITEM and
 * its first name (INODE_REF, else INODE_EXTREF: parent directory plus
 * name). Inodes are reported in objectid order as the pass goes: an inode
 * whose parent directories have all been read is reported at once, so a
 * million-inode tree is streamed and only its directories are kept (their
 * paths are built once and reused by their children). An inode whose
 * parent has a higher objectid (renamed into a newer directory) waits, with
 * every inode after it, until that parent is read. A name chain that does
 * not reach the subvolume's root directory (orphans, corrupt references,
 * loops) leaves the inode unreachable rather than failing the enumeration.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/err.h"
#include "base/handle.h"
#include "base/key.h"
#include "base/name.h"
#include "base/ondisk.h"
#include "image/ring.h"
#include "btrfs/tree_checker.h"
#include "btrfs/leafwalk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "files/inode_enum_pool.h"

#define PATH_DEPTH_MAX_INODES 2048 /* PATH_MAX bytes nest at most ~2048 deep */

struct irec {
	struct btrfsimg_inode ino;
	uint64_t parent;   /* 0: no name seen */
	uint32_t name_off; /* into the list's names arena */
	uint16_t name_len;
	bool name_bad;	    /* bi_name_problem finds fault with the name */
	int32_t path_state; /* directories: 0 unresolved, 1 resolving, 2 done */
	char *path;	    /* directories: cached full path; NULL unreachable */
	size_t path_len;
};

struct ilist {
	struct irec *v;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

struct iwalk {
	struct btrfsimg_fs *fs;
	uint64_t subvol;
	const char *root_path; /* NULL for a deleted subvolume */
	size_t root_len;
	btrfsimg_inode_entry_fn fn;
	void *ctx;
	struct ilist dirs;    /* every directory read so far, ascending objectid */
	struct ilist pending; /* read, waiting for a parent not read yet */
	struct irec cur;      /* the objectid being read */
	uint8_t cur_name[255];
	const uint8_t *name; /* cur's name: cur_name, or in the leaf being played */
	bool have_cur;
	uint64_t seen_max;  /* every objectid <= this one is complete */
	size_t last_parent; /* index into dirs: siblings come in runs */
	char *buf;	    /* path of the inode being reported */
	size_t cap;
	const char *buf_dir; /* the directory path buf starts with (and "/"), or NULL */
	char damage[192];   /* its name_damage */
	int stop; /* the callback's non-zero return */
};

static void ilist_free(struct ilist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	free(l->names);
}

/* Append @r with its name copied into the list's arena. */
static int ilist_push(struct btrfsimg_fs *fs, struct ilist *l, const struct irec *r,
		      const uint8_t *name)
{
	if (bi_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return bi_err(fs, -ENOMEM, "out of memory listing inodes");
	if (bi_grow((void **)&l->names, &l->names_cap, l->names_len + r->name_len, 1))
		return bi_err(fs, -ENOMEM, "out of memory for names");
	struct irec *d = &l->v[l->n++];
	*d = *r;
	d->name_off = (uint32_t)l->names_len;
	if (r->name_len) /* nameless (no ref yet): the arena may not exist */
		memcpy(l->names + l->names_len, name, r->name_len);
	l->names_len += r->name_len;
	return 0;
}

static struct irec *find_rec(const struct ilist *l, uint64_t objectid)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid].ino.objectid == objectid)
			return &l->v[mid];
		if (l->v[mid].ino.objectid < objectid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct irec *find_dir(struct iwalk *w, uint64_t objectid)
{
	if (w->last_parent < w->dirs.n && w->dirs.v[w->last_parent].ino.objectid == objectid)
		return &w->dirs.v[w->last_parent];
	struct irec *d = find_rec(&w->dirs, objectid);
	if (d)
		w->last_parent = (size_t)(d - w->dirs.v);
	return d;
}

/* Short copies (names, paths) byte by byte: libc's memcpy for a length
 * known only at run time took a fifth of an inodes run on the bench
 * machine (its AVX-512 variant), more than the copying itself. */
static inline void copy_short(char *dst, const char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/* dir + "/" + name into @out (no separator after the empty top-level
 * path), a damaged name (@bad: bi_name_problem says why) in its safe form
 * (base/name.h); @dir NULL: its @dlen bytes and the "/" are there already.
 * Returns the length, or -1 when out of memory. */
static ssize_t join_into(char **out, size_t *cap, const char *dir, size_t dlen, const char *name,
			 size_t nlen, bool bad)
{
	size_t need = dlen + (bad ? BI_NAME_SAFE_MAX(nlen) : nlen) + 2;
	if (need > *cap) {
		char *p = realloc(*out, need);
		if (!p)
			return -1;
		*out = p;
		*cap = need;
	}
	char *p = *out;
	size_t at = dlen;
	if (dir) {
		copy_short(p, dir, dlen);
		if (dlen)
			p[at] = '/';
	}
	at += dlen != 0;
	if (bad)
		return (ssize_t)(at + bi_name_safe((const uint8_t *)name, nlen, p + at, need - at));
	copy_short(p + at, name, nlen);
	p[at + nlen] = '\0';
	return (ssize_t)(at + nlen);
}

/* The path of an inode named @name in directory @d into w->buf. Siblings
 * come in runs: the directory's part is still there from the last one
 * (a directory's path is never freed or changed while the walk lasts, so
 * the same pointer means the same bytes). */
static ssize_t path_into(struct iwalk *w, const struct irec *d, const char *name, size_t nlen,
			 bool bad)
{
	size_t at = d->path_len + (d->path_len != 0);
	if (w->buf_dir != d->path || at + nlen + 1 > w->cap)
		w->buf_dir = NULL;
	ssize_t n = join_into(&w->buf, &w->cap, w->buf_dir ? NULL : d->path, d->path_len, name,
			      nlen, bad);
	w->buf_dir = n < 0 ? NULL : d->path;
	return n;
}

static void set_dir_path(struct irec *c, const struct irec *base, const char *names, int *err)
{
	size_t cap = 0;
	const char *name = names + c->name_off;
	ssize_t n = join_into(&c->path, &cap, base->path, base->path_len, name, c->name_len,
			      c->name_bad);
	if (n < 0) {
		*err = -ENOMEM;
		free(c->path);
		c->path = NULL;
		return;
	}
	c->path_len = (size_t)n;
}

/*
 * Path of a directory record, cached on it. Iterative: walk up to the
 * first ancestor with a known state, then fill paths back down, so a deep
 * or looping chain costs no stack. Only called once every ancestor is read.
 */
static const struct irec *dir_path(struct iwalk *w, struct irec *r, int *err)
{
	struct irec *chain[PATH_DEPTH_MAX_INODES];
	size_t n = 0;
	struct irec *cur = r;
	while (cur && cur->path_state == 0 && n < PATH_DEPTH_MAX_INODES) {
		cur->path_state = 1;
		chain[n++] = cur;
		if (cur->ino.objectid == OBJ_FIRST_FREE)
			break;
		cur = cur->parent ? find_rec(&w->dirs, cur->parent) : NULL;
	}
	const struct irec *base = NULL;
	if (n && chain[n - 1]->ino.objectid == OBJ_FIRST_FREE) {
		n--;
		if (w->root_path && !(chain[n]->path = strdup(w->root_path)))
			*err = -ENOMEM;
		chain[n]->path_len = w->root_len;
		chain[n]->path_state = 2;
		base = chain[n]->path ? chain[n] : NULL;
	} else if (cur && cur->path_state == 2 && cur->path) {
		base = cur;
	}
	while (n--) {
		struct irec *c = chain[n];
		if (base && !*err)
			set_dir_path(c, base, w->dirs.names, err);
		c->path_state = 2;
		base = c->path ? c : NULL;
	}
	return r->path ? r : NULL;
}

/*
 * Whether the path of an inode named in directory @parent can be settled
 * now: every ancestor up to a settled one has been read, or the chain
 * already breaks (a missing or non-directory parent among those read).
 */
static bool settled(struct iwalk *w, uint64_t parent)
{
	for (int depth = 0; parent && depth < PATH_DEPTH_MAX_INODES; depth++) {
		if (parent > w->seen_max)
			return false;
		const struct irec *d = find_dir(w, parent);
		if (!d || d->path_state == 2 || d->ino.objectid == OBJ_FIRST_FREE)
			return true;
		parent = d->parent;
	}
	return true;
}

static int report(struct iwalk *w, const struct irec *r, const char *name)
{
	struct btrfsimg_inode_entry e = { .inode = r->ino };
	int err = 0;
	if (r->ino.objectid == OBJ_FIRST_FREE) {
		e.path = w->root_path;
		e.path_len = w->root_len;
	} else if (r->parent) {
		struct irec *p = find_dir(w, r->parent);
		const struct irec *d = p ? dir_path(w, p, &err) : NULL;
		const char *why =
			r->name_bad ? bi_name_problem((const uint8_t *)name, r->name_len) : NULL;
		ssize_t n = d ? path_into(w, d, name, r->name_len, why != NULL) : 0;
		if (n < 0)
			err = -ENOMEM;
		else if (d) {
			e.path = w->buf;
			e.path_len = (size_t)n;
		}
		if (why) { /* its own name; a damaged ancestor was said with its own inode */
			snprintf(w->damage, sizeof(w->damage),
				 "subvolume %" PRIu64 " INODE_REF (%" PRIu64 " 12 %" PRIu64 "), %s",
				 r->ino.subvol, r->ino.objectid, r->parent, why);
			e.name_damage = w->damage;
		}
	}
	if (err)
		return bi_err(w->fs, err, "out of memory building paths");
	e.reachable = e.path != NULL && r->ino.nlink > 0;
	w->stop = w->fn(w->ctx, &e);
	return 0;
}

/* Report waiting inodes, in order, as far as their parents allow (all of
 * them once the tree is read: @final). */
static int drain(struct iwalk *w, bool final)
{
	struct ilist *q = &w->pending;
	size_t i = 0;
	int rc = 0;
	while (rc == 0 && !w->stop && i < q->n && (final || settled(w, q->v[i].parent))) {
		rc = report(w, &q->v[i], q->names + q->v[i].name_off);
		i++;
	}
	if (i == q->n) {
		q->n = 0;
		q->names_len = 0;
	} else if (i) {
		memmove(q->v, q->v + i, (q->n - i) * sizeof(*q->v));
		q->n -= i;
	}
	return rc;
}

/* The current objectid is complete: keep it if it is a directory, then
 * report it now or queue it behind the others waiting. */
static int finish_cur(struct iwalk *w)
{
	if (!w->have_cur)
		return 0;
	w->have_cur = false;
	struct irec *r = &w->cur;
	w->seen_max = r->ino.objectid;
	int rc = 0;
	if (S_ISDIR(r->ino.mode))
		rc = ilist_push(w->fs, &w->dirs, r, w->name);
	if (rc == 0 && w->pending.n == 0 && settled(w, r->parent))
		return report(w, r, (const char *)w->name);
	if (rc == 0)
		rc = ilist_push(w->fs, &w->pending, r, w->name);
	return rc ? rc : drain(w, false);
}

static int take_inode(struct iwalk *w, const struct bi_item *it)
{
	int rc = finish_cur(w);
	if (rc < 0 || w->stop)
		return rc;
	struct btrfsimg_fs *fs = w->fs;
	/* bi_inode_parse fills .ino; a memset of the whole record per inode
	 * showed as 9% of an inodes run */
	struct irec *r = &w->cur;
	r->parent = 0;
	r->name_off = 0;
	r->name_len = 0;
	r->name_bad = false;
	r->path_state = 0;
	r->path = NULL;
	r->path_len = 0;
	char why[160];
	if (bi_inode_parse(it->data, it->size, w->subvol, it->key.objectid,
			   fs->sb.info.generation + 1, &w->cur.ino, why, sizeof(why)) < 0) {
		/* one bad inode is skipped and reported; the others still count */
		bi_damage(fs, "corrupt inode item: root=%" PRIu64 " block=%" PRIu64 " slot=%u, %s",
			  w->subvol, it->block, it->slot, why);
		return 0;
	}
	w->have_cur = true;
	return 0;
}

/* First entry of an INODE_REF (key offset = parent) or INODE_EXTREF item. */
static void take_ref(struct iwalk *w, const struct bi_item *it)
{
	if (!w->have_cur || w->cur.ino.objectid != it->key.objectid || w->cur.parent)
		return; /* no inode item before it, or a name is known already */
	uint64_t parent;
	const uint8_t *name;
	uint16_t nlen;
	char why[256];
	if (!bi_ipool_ref_first(&it->key, it->data, it->size, it->block, it->slot, w->subvol,
				&parent, &name, &nlen, why, sizeof(why))) {
		bi_damage(w->fs, "%s", why); /* unusable; a later name may serve */
		return;
	}
	copy_short((char *)w->cur_name, (const char *)name, nlen);
	w->name = w->cur_name;
	w->cur.parent = parent;
	w->cur.name_len = nlen;
	w->cur.name_bad = bi_name_problem(name, nlen) != NULL;
}

/* A leaf whose keys all lie past one objectid's names and before the next
 * objectid's INODE_ITEM (a large directory's DIR_ITEM and DIR_INDEX runs:
 * a third of a big tree) holds nothing this pass wants. */
static bool only_dir_entries(const bi_key *lo, const bi_key *hi)
{
	if (lo->type <= KT_INODE_EXTREF)
		return false;
	return hi->objectid == lo->objectid ||
	       (hi->objectid == lo->objectid + 1 && hi->type <= KT_INODE_ITEM);
}

static int walk_tree(struct iwalk *w, const struct bi_root *r)
{
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(w->fs, &it, r, &min, &max);
	bi_iter_skip_leaves(&it, only_dir_entries);
	bi_iter_stream(&it);
	while (rc == 0 && !w->stop && (rc = bi_iter_next(&it, &item)) > 0) {
		rc = 0;
		if (item.key.type == KT_INODE_ITEM)
			rc = take_inode(w, &item);
		else if (item.key.type == KT_INODE_REF || item.key.type == KT_INODE_EXTREF)
			take_ref(w, &item);
	}
	bi_iter_end(&it);
	if (rc == 0 && !w->stop)
		rc = finish_cur(w);
	w->seen_max = UINT64_MAX;
	if (rc == 0 && !w->stop)
		rc = drain(w, true);
	return rc;
}

/* ------------------------------------------------- leaves parsed in parallel
 *
 * The walk above on more than one core: workers (inode_enum_pool.c) check and
 * parse the leaves into events; this thread plays them, in leaf order,
 * through the same state, so the output and the messages do not change.
 */

/* Play one parsed leaf's events through the walk's state, as walk_tree
 * does with its items. */
static int merge_leaf(struct iwalk *w, const struct bi_root *r, const struct bi_ipool *p,
		      struct bi_islot *s, bool *started, bi_key *last)
{
	if (s->fallback) { /* as the walk would have read it, messages and all */
		struct bi_expect e = { r->id, s->at.generation, 0, &s->at.first_key };
		int rc = bi_block_read(w->fs, s->at.bytenr, &e, &s->leaf);
		if (rc < 0)
			return rc;
		s->held = true;
		s->from = s->at.first ? bi_leaf_slot(s->leaf, &p->min) : 0;
		bi_ipool_parse_leaf(p, s);
	}
	if (s->rc)
		return bi_err(w->fs, s->rc, "out of memory listing inodes");
	if (s->has_first) {
		if (*started && bi_key_cmp(&s->first, last) <= 0)
			return bi_item_err(w->fs, -EUCLEAN, "leaf", r->id, s->leaf->bytenr, s->from,
					   "key (%" PRIu64 " %u %" PRIu64
					   ") not after the previous leaf's (%" PRIu64
					   " %u %" PRIu64 ")",
					   s->first.objectid, s->first.type, s->first.offset,
					   last->objectid, last->type, last->offset);
		*started = true;
		*last = s->last;
	}
	int rc = 0;
	for (size_t i = 0; i < s->nev && rc == 0 && !w->stop; i++) {
		const struct bi_iev *e = &s->ev[i];
		if (e->kind == IEV_INODE || e->kind == IEV_INODE_BAD) {
			rc = finish_cur(w);
			if (rc < 0 || w->stop)
				break;
		}
		if (e->kind == IEV_INODE) {
			struct irec *c = &w->cur;
			c->ino = e->ino;
			c->parent = e->parent;
			c->name_off = 0;
			c->name_len = e->name_len;
			c->name_bad = e->name_bad;
			c->path_state = 0;
			c->path = NULL;
			c->path_len = 0;
			/* read where the worker copied it (the slot's text:
			 * once, when the path is built), unless it outlives
			 * the leaf: see below */
			w->name = (const uint8_t *)s->text + e->msg_off;
			w->have_cur = true;
		} else if (e->kind == IEV_REF) {
			struct bi_item it = { e->ref.key, e->ref.data, e->ref.size, s->leaf->bytenr,
					      e->ref.slot };
			take_ref(w, &it);
		} else {
			bi_damage(w->fs, "%s", s->text + e->msg_off);
		}
	}
	/* the leaf is given back after this: a name still wanted is kept */
	if (w->have_cur && w->name != w->cur_name) {
		copy_short((char *)w->cur_name, (const char *)w->name, w->cur.name_len);
		w->name = w->cur_name;
	}
	return rc;
}

static int walk_tree_par(struct iwalk *w, const struct bi_root *r, struct bi_ipool *p)
{
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct btrfsimg_fs *fs = w->fs;
	struct bi_leafwalk lw;
	int rc = bi_leafwalk_start(fs, &lw, r, &min, &max, only_dir_entries);
	if (rc < 0)
		return rc;
	if (lw.p.top == 0) { /* one leaf: nothing to share out */
		bi_leafwalk_end(&lw);
		return walk_tree(w, r);
	}
	/* no leaf is queued: the workers read these after the next one is */
	p->subvol = w->subvol;
	p->max_gen = fs->sb.info.generation + 1;
	p->min = min;
	p->max = max;
	p->csum_type = fs->csum_type;
	p->csum_size = fs->csum_size;
	memcpy(p->fsid, fs->meta_fsid, sizeof(p->fsid));
	if (p->nodesize != fs->nodesize) { /* a pool serves one handle: never */
		for (size_t i = 0; i < IPOOL_RING; i++) {
			free(p->ring[i].buf);
			p->ring[i].buf = NULL;
		}
		free(p->spare.buf);
		p->spare.buf = NULL;
		p->nodesize = fs->nodesize;
	}
	atomic_store(&p->batch, IPOOL_BATCH);
	p->aio = bi_aio_open(IPOOL_RING, true);
	p->aio_refused = false;
	p->aio_last = false;
	p->hot = 0;
	/* a leaf is in the cache, or read around it: no hints, unless one is
	 * read through the cache after all (bi_ipool_queue) */
	lw.p.no_leaf_hints = p->aio != NULL;
	bool walking = true, started = false, end = false;
	bi_key last = { 0, 0, 0 };
	int walk_rc = 0;
	char *walk_msg = NULL; /* a failed read's message, for when the merge gets there */
	while (rc == 0 && !w->stop && !end) {
		enum bi_ipool_next what = bi_ipool_step(p, fs, walking);
		if (what == BI_IPOOL_DONE)
			break;
		if (what == BI_IPOOL_AGAIN)
			continue;
		if (what == BI_IPOOL_READ) {
			struct bi_leaf_ptr at;
			int lr = bi_leafwalk_next_ptr(&lw, &at);
			if (lr > 0) {
				bi_ipool_queue(p, fs, &lw, &at);
				continue;
			}
			walking = false;
			atomic_store(&p->batch, 1); /* the last leaves: no full batch */
			bi_ipool_wake(p);
			walk_rc = lr;
			if (lr < 0 && !(walk_msg = strdup(fs->err)))
				rc = bi_err(fs, -ENOMEM, "out of memory listing inodes");
			continue;
		}
		struct bi_islot *s = &p->ring[p->head % IPOOL_RING];
		rc = merge_leaf(w, r, p, s, &started, &last);
		end = s->end;
		bi_ipool_done(p, fs);
	}
	bi_ipool_drop(p, fs);
	bi_aio_close(p->aio);
	p->aio = NULL;
	bi_leafwalk_end(&lw);
	if (rc == 0 && !w->stop && !end && walk_rc < 0)
		rc = bi_err(fs, walk_rc, "%s", walk_msg); /* every leaf before it was played */
	free(walk_msg);
	if (rc == 0 && !w->stop)
		rc = finish_cur(w);
	w->seen_max = UINT64_MAX;
	if (rc == 0 && !w->stop)
		rc = drain(w, true);
	return rc;
}

/* The library's error (< 0), else the callback's stop value in *stop. */
static int inodes_of(struct btrfsimg_fs *fs, const struct btrfsimg_subvol *sv,
		     btrfsimg_inode_entry_fn fn, void *ctx, struct bi_ipool **pool, bool *no_pool,
		     int *stop)
{
	struct bi_root r;
	struct iwalk w = { .fs = fs,
			   .subvol = sv->id,
			   .fn = fn,
			   .ctx = ctx,
			   .root_path = sv->deleted ? NULL : sv->path };
	w.root_len = w.root_path ? strlen(w.root_path) : 0;
	int rc = bi_root_find(fs, sv->id, &r);
	/* a tree of one leaf has nothing to share out; a log overlay's items
	 * are merged by the iterator */
	bool par = rc == 0 && r.level > 0 && !bi_overlay_for(fs, r.id);
	if (par && !*pool && !*no_pool && !(*pool = bi_ipool_new()))
		*no_pool = true;
	if (rc == 0)
		rc = par && *pool ? walk_tree_par(&w, &r, *pool) : walk_tree(&w, &r);
	*stop = w.stop;
	ilist_free(&w.dirs);
	ilist_free(&w.pending);
	free(w.buf);
	return rc;
}

int btrfsimg_inodes(btrfsimg_fs *fs, uint64_t subvol, btrfsimg_inode_entry_fn fn, void *ctx)
{
	if (!fs || !fn)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct btrfsimg_subvol *v = NULL;
	size_t n = 0;
	int rc = btrfsimg_subvols(fs, &v, &n);
	bool found = false, no_pool = false;
	struct bi_ipool *pool = NULL; /* started with the first tree that needs it */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (subvol && v[i].id != subvol)
			continue;
		found = true;
		int stop = 0;
		rc = inodes_of(fs, &v[i], fn, ctx, &pool, &no_pool, &stop);
		if (rc < 0 && rc != -ENOMEM && !subvol) {
			/* one damaged subvolume must not hide the others */
			bi_damage(fs, "subvolume %" PRIu64 ": %s", v[i].id, fs->err);
			rc = 0;
		}
		if (stop)
			rc = stop; /* the callback's word ends the walk, as it is */
	}
	if (rc == 0 && subvol && !found)
		rc = bi_err(fs, -ENOENT, "no subvolume %" PRIu64, subvol);
	bi_ipool_free(pool);
	btrfsimg_subvols_free(v, n);
	return rc;
}

int btrfsimg_highest_objectid(btrfsimg_fs *fs, uint64_t subvol, uint64_t *out)
{
	if (!fs || !out)
		return -EINVAL;
	if (!bi_opened(fs, __func__))
		return -EINVAL;
	struct bi_root r;
	int rc = bi_root_find(fs, subvol, &r);
	if (rc < 0)
		return rc;
	bi_key max = { OBJ_LAST_FREE, 255, UINT64_MAX }, last;
	rc = bi_tree_last(fs, &r, &max, &last);
	if (rc == -ENOENT || (rc == 0 && last.objectid < OBJ_FIRST_FREE)) {
		*out = OBJ_FIRST_FREE;
		return 0;
	}
	if (rc == 0)
		*out = last.objectid;
	return rc;
}
