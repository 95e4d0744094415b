// SPDX-License-Identifier: MIT
/* Inodes' links and their paths (see paths.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "send/paths.h"

#include "base/err.h"
#include "base/ondisk.h"

#define PATH_DEPTH_MAX 4096	/* more than PATH_MAX can hold: a loop */

int bi_bytes_put(struct bi_bytes *b, const void *d, size_t n)
{
	if (n > SIZE_MAX - b->len - 1)
		return -ENOMEM;
	int rc = bi_grow((void **)&b->p, &b->cap, b->len + n + 1, 1);
	if (rc < 0)
		return rc;
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}




static int add_link(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name,
		    size_t len)
{
	(void)index;
	struct bi_inode_links *s = ctx;
	int rc = bi_grow((void **)&s->links, &s->cap, s->nlinks + 1, sizeof(*s->links));
	if (rc < 0)
		return rc;
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, name, len);
	s->links[s->nlinks++] = (struct bi_link){ parent, copy, len };
	return 0;
}

void bi_inode_links_clear(struct bi_inode_links *s)
{
	for (size_t i = 0; i < s->nlinks; i++)
		free(s->links[i].name);
	free(s->links);
	uint64_t subvol = s->subvol;
	memset(s, 0, sizeof(*s));
	s->subvol = subvol;
}

int bi_inode_links_load(btrfsimg_fs *fs, struct bi_inode_links *s, uint64_t objectid)
{
	bi_inode_links_clear(s);
	int rc = btrfsimg_inode_get(fs, s->subvol, objectid, &s->ino);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	s->exists = true;
	if (objectid == OBJ_FIRST_FREE)
		return 0; /* the root's stored name ".." is no link */
	rc = btrfsimg_inode_names(fs, s->subvol, objectid, add_link, s);
	return rc == -ENOENT ? 0 : rc;
}

bool bi_same_link(const struct bi_link *a, const struct bi_link *b)
{
	return a->parent == b->parent && a->len == b->len && memcmp(a->name, b->name, a->len) == 0;
}

bool bi_has_link(const struct bi_inode_links *s, const struct bi_link *l)
{
	for (size_t i = 0; i < s->nlinks; i++)
		if (bi_same_link(&s->links[i], l))
			return true;
	return false;
}

/* -------------------------------------------------------------- paths */


struct first_name {
	uint64_t parent;
	struct bi_bytes *name;
	bool found;
};

static int take_first(void *ctx, uint64_t parent, uint64_t index, const uint8_t *name,
		      size_t len)
{
	(void)index;
	struct first_name *f = ctx;
	if (f->found)
		return 0;
	f->found = true;
	f->parent = parent;
	f->name->len = 0;
	return bi_bytes_put(f->name, name, len);
}

int bi_bytes_prepend(struct bi_bytes *out, const uint8_t *name, size_t len)
{
	struct bi_bytes t = { 0 };
	int rc = bi_bytes_put(&t, name, len);
	if (rc == 0 && out->len)
		rc = bi_bytes_put(&t, "/", 1);
	if (rc == 0 && out->len)
		rc = bi_bytes_put(&t, out->p, out->len);
	if (rc < 0) {
		free(t.p);
		return rc;
	}
	free(out->p);
	*out = t;
	return 0;
}

int bi_dir_path_placed(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir, bi_place_fn place,
		       void *ctx, struct bi_bytes *out)
{
	out->len = 0;
	int rc = bi_bytes_put(out, "", 0);
	struct bi_bytes name = { 0 };
	for (int depth = 0; rc == 0 && dir != OBJ_FIRST_FREE; depth++) {
		if (depth == PATH_DEPTH_MAX) {
			rc = bi_err(fs, -ELOOP,
				    "subvolume %" PRIu64 " directory %" PRIu64
				    ": no way to the root in %d steps (a directory loop)",
				    subvol, dir, PATH_DEPTH_MAX);
			break;
		}
		uint64_t parent;
		const uint8_t *n;
		size_t len;
		if (place && place(ctx, dir, &parent, &n, &len)) {
			rc = bi_bytes_prepend(out, n, len);
			dir = parent;
			continue;
		}
		struct first_name f = { 0, &name, false };
		rc = btrfsimg_inode_names(fs, subvol, dir, take_first, &f);
		if (rc == 0 && !f.found)
			rc = bi_err(fs, -EUCLEAN,
				    "subvolume %" PRIu64 " directory %" PRIu64
				    " has no name (INODE_REF) leading to the root",
				    subvol, dir);
		if (rc == 0)
			rc = bi_bytes_prepend(out, name.p, name.len);
		dir = f.parent;
	}
	free(name.p);
	return rc;
}

int bi_dir_path(btrfsimg_fs *fs, uint64_t subvol, uint64_t dir, struct bi_bytes *out)
{
	return bi_dir_path_placed(fs, subvol, dir, NULL, NULL, out);
}

int bi_link_path(btrfsimg_fs *fs, uint64_t subvol, const struct bi_link *l, struct bi_bytes *out)
{
	int rc = bi_dir_path(fs, subvol, l->parent, out);
	if (rc == 0 && out->len)
		rc = bi_bytes_put(out, "/", 1);
	return rc < 0 ? rc : bi_bytes_put(out, l->name, l->len);
}

