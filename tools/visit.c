// SPDX-License-Identifier: MIT
#include "visit.h"

#include "progress.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VISIT_DEPTH_MAX 4096	/* PATH_MAX-long paths nest at most ~2048 deep */

struct entry {
	struct btrfsimg_dirent d;
	uint8_t *name;
};

struct entries {
	struct entry *v;
	size_t n, cap;
};

struct walker {
	btrfsimg_fs *fs;
	const struct visit_opts *o;
	visit_fn fn;
	void *ctx;
	uint64_t *errors;
	uint64_t count;
	double done;		/* inodes' worth of the paths so far: 1/nlink each */
	uint8_t *path;
	size_t path_len, path_cap;
	struct { uint64_t subvol, objectid; } *anc;	/* directories on the current path */
};

static void report(struct walker *w, const char *what, int rc)
{
	const char *msg = btrfsimg_errmsg(w->fs);
	fprintf(stderr, "btrfsimg: %.*s: %s: %s\n", (int)(w->path_len ? w->path_len : 1),
		w->path_len ? (const char *)w->path : ".", what, *msg ? msg : strerror(-rc));
	(*w->errors)++;
}

static int collect(void *ctx, const struct btrfsimg_dirent *d)
{
	struct entries *es = ctx;
	if (es->n == es->cap) {
		size_t cap = es->cap ? es->cap * 2 : 64;
		void *v = realloc(es->v, cap * sizeof(*es->v));
		if (!v)
			return -ENOMEM;
		es->v = v;
		es->cap = cap;
	}
	struct entry *e = &es->v[es->n];
	e->d = *d;
	e->name = malloc(d->name_len ? d->name_len : 1);
	if (!e->name)
		return -ENOMEM;
	memcpy(e->name, d->name, d->name_len);
	e->d.name = e->name;
	es->n++;
	return 0;
}

static void entries_free(struct entries *es)
{
	for (size_t i = 0; i < es->n; i++)
		free(es->v[i].name);
	free(es->v);
}

static int path_push(struct walker *w, const uint8_t *name, size_t len, size_t *saved)
{
	*saved = w->path_len;
	size_t need = w->path_len + len + 2;
	if (need > w->path_cap) {
		size_t cap = w->path_cap ? w->path_cap : 256;
		while (cap < need)
			cap *= 2;
		uint8_t *p = realloc(w->path, cap);
		if (!p)
			return -ENOMEM;
		w->path = p;
		w->path_cap = cap;
	}
	if (w->path_len)
		w->path[w->path_len++] = '/';
	memcpy(w->path + w->path_len, name, len);
	w->path_len += len;
	w->path[w->path_len] = '\0';
	return 0;
}

/* Depth of the directory on the current path that is @subvol:@obj, or
 * SIZE_MAX: a corrupt entry naming an ancestor would loop forever. */
static size_t ancestor_depth(const struct walker *w, size_t depth, uint64_t subvol, uint64_t obj)
{
	for (size_t i = 0; i < depth; i++)
		if (w->anc[i].subvol == subvol && w->anc[i].objectid == obj)
			return i;
	return SIZE_MAX;
}

/* Length of the first @k components of @path (the path of ancestor k). */
static size_t prefix_len(const uint8_t *path, size_t len, size_t k)
{
	size_t i = 0;
	for (; i < len && k; i++)
		k -= path[i] == '/';
	return k ? len : (i ? i - 1 : 0);
}

static bool stop_descent(struct walker *w, const struct visit_node *n)
{
	int plen = (int)n->path_len;
	const char *path = (const char *)n->path;
	if (n->depth >= VISIT_DEPTH_MAX) {
		fprintf(stderr, "btrfsimg: %.*s: deeper than %d directories: not descending\n",
			plen, path, VISIT_DEPTH_MAX);
	} else {
		size_t a = ancestor_depth(w, n->depth, n->subvol, n->objectid);
		if (a == SIZE_MAX)
			return false;
		int alen = (int)prefix_len(n->path, n->path_len, a);
		fprintf(stderr, "btrfsimg: %.*s: directory loop: it is %llu:%llu, its ancestor '%.*s': not descending\n",
			plen, path, (unsigned long long)n->subvol, (unsigned long long)n->objectid,
			alen ? alen : 1, alen ? path : ".");
	}
	(*w->errors)++;
	return true;
}

static int visit_node(struct walker *w, struct visit_node *n);

static int visit_children(struct walker *w, struct visit_node *dir)
{
	struct entries es = { 0 };
	int rc = btrfsimg_readdir(w->fs, dir->subvol, dir->objectid, collect, &es);
	if (rc < 0) {
		report(w, "readdir", rc);
		rc = 0; /* what was listed before the failure is still shown */
	}
	for (size_t i = 0; rc >= 0 && i < es.n; i++) {
		struct btrfsimg_dirent *d = &es.v[i].d;
		size_t saved;
		if ((rc = path_push(w, d->name, d->name_len, &saved)) < 0)
			break;
		struct visit_node c = { .path = w->path, .path_len = w->path_len,
					.depth = dir->depth + 1, .ent = *d,
					.subvol = d->target_subvol, .objectid = d->target_objectid,
					.stub = d->kind == BTRFSIMG_TARGET_STUB,
					.dir_subvol = dir->subvol, .dir_objectid = dir->objectid,
					.dir_tree_subvol = dir->subvol,
					.dir_inode = &dir->inode };
		rc = 0;
		if (c.stub)
			rc = btrfsimg_stub_inode(w->fs, dir->subvol, dir->objectid, &c.inode);
		else
			rc = btrfsimg_inode_get(w->fs, c.subvol, c.objectid, &c.inode);
		if (rc < 0)
			report(w, "inode", rc);
		if (rc == 0)
			rc = visit_node(w, &c);
		else
			rc = 0;
		w->path_len = saved;
		w->path[saved] = '\0';
	}
	entries_free(&es);
	return rc;
}

static int visit_node(struct walker *w, struct visit_node *n)
{
	if (!n->stub)
		w->done += 1.0 / (n->inode.nlink ? n->inode.nlink : 1);
	progress_tick("paths", ++w->count, w->done);
	int rc = w->fn(w->ctx, n);
	if (rc != 0 || !S_ISDIR(n->inode.mode) || n->stub)
		return rc < 0 ? rc : 0;
	if (stop_descent(w, n))
		return 0;
	w->anc[n->depth].subvol = n->subvol;
	w->anc[n->depth].objectid = n->objectid;
	rc = visit_children(w, n);
	if (rc >= 0 && w->o->post_dirs && w->o->post) {
		struct visit_node copy = *n;
		copy.path = w->path;
		rc = w->o->post(w->ctx, &copy);
	}
	return rc;
}

static int start_node(struct walker *w, struct visit_node *n)
{
	const char *path = w->o->path ? w->o->path : "";
	memset(n, 0, sizeof(*n));
	n->is_start = true;
	n->path = w->path;
	if (w->o->objectid) {
		n->subvol = w->o->subvol;
		n->objectid = w->o->objectid;
	} else if (*path == '\0' || strspn(path, "/") == strlen(path)) {
		n->subvol = w->o->subvol;
		n->objectid = 256;
	} else {
		int rc = btrfsimg_path_lookup(w->fs, w->o->subvol, path, &n->ent);
		if (rc < 0)
			return rc;
		n->subvol = n->ent.target_subvol;
		n->objectid = n->ent.target_objectid;
		n->stub = n->ent.kind == BTRFSIMG_TARGET_STUB;
	}
	n->dir_subvol = n->subvol;
	n->dir_objectid = n->objectid;
	if (!n->stub)
		return btrfsimg_inode_get(w->fs, n->subvol, n->objectid, &n->inode);
	/* a stub takes owner and atime from the directory holding it */
	char *parent = strdup(path);
	if (!parent)
		return -ENOMEM;
	char *slash = strrchr(parent, '/');
	*(slash ? slash : parent) = '\0';
	struct btrfsimg_dirent pd;
	int rc = btrfsimg_path_lookup(w->fs, w->o->subvol, parent, &pd);
	free(parent);
	if (rc == 0)
		rc = btrfsimg_stub_inode(w->fs, pd.target_subvol, pd.target_objectid, &n->inode);
	return rc;
}

int visit_tree(btrfsimg_fs *fs, const struct visit_opts *o, visit_fn fn, void *ctx,
	       uint64_t *errors)
{
	struct walker w = { .fs = fs, .o = o, .fn = fn, .ctx = ctx, .errors = errors };
	w.anc = calloc(VISIT_DEPTH_MAX + 1, sizeof(*w.anc));
	uint8_t empty = 0;
	int rc = w.anc ? path_push(&w, &empty, 0, &(size_t){ 0 }) : -ENOMEM;
	struct visit_node start;
	if (rc == 0)
		rc = start_node(&w, &start);
	if (rc == 0 && start.objectid == 256 && !start.stub) /* a subvolume's root */
		progress_inodes_total(fs, start.subvol, true);
	if (rc == 0)
		rc = visit_node(&w, &start);
	progress_done();
	free(w.anc);
	free(w.path);
	return rc;
}
