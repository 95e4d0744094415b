// SPDX-License-Identifier: MIT
/*
 * visit_tree: the library's walk iterator (btrfsimg_walk_*) driven with a
 * callback per path, plus what the CLI adds: the progress bar and the
 * per-entry errors on stderr.
 */
#include "common/visit.h"

#include "common/progress.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void report(btrfsimg_fs *fs, const struct btrfsimg_walk_entry *e, uint64_t *errors)
{
	int plen = (int)(e->path_len ? e->path_len : 1);
	const char *path = e->path_len ? (const char *)e->path : ".";
	const char *msg = btrfsimg_errmsg(fs);
	if (e->op)
		fprintf(stderr, "btrfsimg: %.*s: %s: %s\n", plen, path, e->op,
			*msg ? msg : strerror(-e->error));
	else /* not descending: the message says why */
		fprintf(stderr, "btrfsimg: %.*s: %s\n", plen, path, msg);
	(*errors)++;
}

/* An entry whose name cannot be a path component (btrfsimg_name_damage):
 * the walk shows it by its safe form; say where it is and what is wrong. */
static void report_name(const struct btrfsimg_walk_entry *e, uint64_t *errors)
{
	char m[1024];
	if (e->is_start || !btrfsimg_name_damage(e->dir_subvol, e->dir_objectid, &e->ent, m,
						 sizeof(m)))
		return;
	fprintf(stderr, "btrfsimg: %.*s: %s\n", (int)e->path_len, (const char *)e->path, m);
	(*errors)++;
}

static void node_of(const struct btrfsimg_walk_entry *e, struct visit_node *n)
{
	*n = (struct visit_node){ .path = e->path,
				  .path_len = e->path_len,
				  .depth = e->depth,
				  .is_start = e->is_start,
				  .ent = e->ent,
				  .subvol = e->subvol,
				  .objectid = e->objectid,
				  .stub = e->stub,
				  .inode = e->inode,
				  .dir_subvol = e->dir_subvol,
				  .dir_objectid = e->dir_objectid,
				  .dir_tree_subvol = e->dir_subvol,
				  .dir_inode = e->dir_inode,
				  .entry = e };
}

int visit_tree(btrfsimg_fs *fs, const struct visit_opts *o, visit_fn fn, void *ctx,
	       uint64_t *errors)
{
	bool post = o->post_dirs && o->post;
	struct btrfsimg_walk_opts wo = { .subvol = o->subvol,
					 .path = o->path,
					 .objectid = o->objectid,
					 .flags = post ? BTRFSIMG_WALK_POST_DIRS : 0 };
	btrfsimg_walk *w;
	int rc = btrfsimg_walk_open(fs, &wo, &w);
	uint64_t count = 0;
	double done = 0; /* inodes' worth of the paths so far: 1/nlink each */
	const struct btrfsimg_walk_entry *e;
	while (rc >= 0 && (rc = btrfsimg_walk_next(w, &e)) > 0) {
		struct visit_node n;
		if (e->kind == BTRFSIMG_WALK_ERROR) {
			report(fs, e, errors);
			continue;
		}
		if (e->kind == BTRFSIMG_WALK_PATH)
			report_name(e, errors);
		node_of(e, &n);
		if (e->kind == BTRFSIMG_WALK_POST) {
			rc = o->post(ctx, &n);
			continue;
		}
		if (e->is_start && e->objectid == 256 && !e->stub) /* a subvolume's root */
			progress_inodes_total(fs, e->subvol, true);
		if (!e->stub)
			done += 1.0 / (e->inode.nlink ? e->inode.nlink : 1);
		progress_tick("paths", ++count, done);
		rc = fn(ctx, &n);
		if (rc > 0)
			btrfsimg_walk_skip(w);
	}
	progress_done();
	btrfsimg_walk_close(w);
	return rc < 0 ? rc : 0;
}
