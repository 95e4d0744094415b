/* SPDX-License-Identifier: MIT */
/*
 * Enumerate every inode of one subvolume (or of all) with one path each.
 *
 * One ordered pass over the fs tree collects, per objectid, the INODE_ITEM
 * and its first name (INODE_REF, else INODE_EXTREF: parent directory plus
 * name). Records come out sorted by objectid, so a parent is found by
 * binary search and each directory's path is built once and reused by its
 * children. A name chain that does not reach the subvolume's root
 * directory (orphans, corrupt references, loops) leaves the inode
 * unreachable rather than failing the whole enumeration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PATH_DEPTH_MAX_INODES 2048	/* PATH_MAX bytes nest at most ~2048 deep */

struct irec {
	struct btrfsimg_inode ino;
	uint64_t parent;	/* 0: no name seen */
	uint32_t name_off;	/* into the names arena */
	uint16_t name_len;
	int32_t path_state;	/* 0 unresolved, 1 resolving, 2 done */
	char *path;		/* directories: cached full path; NULL unreachable */
};

struct ilist {
	struct irec *v;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

static void ilist_free(struct ilist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	free(l->names);
}

static int add_inode(struct btrfsimg_fs *fs, struct ilist *l, uint64_t subvol,
		     const struct bi_item *it)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		void *v = realloc(l->v, cap * sizeof(*l->v));
		if (!v)
			return bi_err(fs, -ENOMEM, "out of memory listing inodes of %llu",
				      (unsigned long long)subvol);
		l->v = v;
		l->cap = cap;
	}
	struct irec *r = &l->v[l->n];
	memset(r, 0, sizeof(*r));
	char why[160];
	if (bi_inode_parse(it->data, it->size, subvol, it->key.objectid,
			   fs->sb.info.generation + 1, &r->ino, why, sizeof(why)) < 0) {
		/* one bad inode is skipped and reported; the others still count */
		bi_damage(fs, "corrupt inode item: root=%llu block=%llu slot=%u, %s",
			  (unsigned long long)subvol, (unsigned long long)it->block, it->slot, why);
		return 0;
	}
	l->n++;
	return 0;
}

static int add_name(struct btrfsimg_fs *fs, struct ilist *l, uint64_t parent, const uint8_t *name,
		    uint16_t len)
{
	struct irec *r = &l->v[l->n - 1];
	if (l->names_len + len > l->names_cap) {
		size_t cap = l->names_cap ? l->names_cap * 2 : 65536;
		while (cap < l->names_len + len)
			cap *= 2;
		char *v = realloc(l->names, cap);
		if (!v)
			return bi_err(fs, -ENOMEM, "out of memory for names");
		l->names = v;
		l->names_cap = cap;
	}
	memcpy(l->names + l->names_len, name, len);
	r->parent = parent;
	r->name_off = (uint32_t)l->names_len;
	r->name_len = len;
	l->names_len += len;
	return 0;
}

/* First entry of an INODE_REF (key offset = parent) or INODE_EXTREF item. */
static int take_ref(struct btrfsimg_fs *fs, struct ilist *l, uint64_t subvol,
		    const struct bi_item *it)
{
	if (!l->n || l->v[l->n - 1].ino.objectid != it->key.objectid || l->v[l->n - 1].parent)
		return 0; /* no inode item before it, or a name is known already */
	struct bi_cur c = bi_cur_make(it->data, it->size);
	bool ext = it->key.type == KT_INODE_EXTREF;
	size_t hdr = ext ? EXTREF_SIZE : IREF_SIZE;
	uint16_t nlen = bi_u16(&c, ext ? EXTREF_NAME_LEN : IREF_NAME_LEN);
	const uint8_t *name = bi_bytes(&c, hdr, nlen);
	uint64_t parent = ext ? bi_u64(&c, EXTREF_PARENT) : it->key.offset;
	if (c.bad || nlen == 0 || nlen > 255)
		return bi_err(fs, -EUCLEAN,
			      "corrupt inode %s: root=%llu block=%llu slot=%u, name length %u, item size %u",
			      ext ? "extref" : "ref", (unsigned long long)subvol,
			      (unsigned long long)it->block, it->slot, nlen, it->size);
	return add_name(fs, l, parent, name, nlen);
}

static int collect(struct btrfsimg_fs *fs, const struct bi_root *r, struct ilist *l)
{
	bi_key min = { OBJ_FIRST_FREE, 0, 0 }, max = { OBJ_LAST_FREE, 255, UINT64_MAX };
	struct bi_iter it;
	struct bi_item item;
	int rc = bi_iter_start(fs, &it, r, &min, &max);
	while (rc == 0 && (rc = bi_iter_next(&it, &item)) > 0) {
		if (item.key.type == KT_INODE_ITEM)
			rc = add_inode(fs, l, r->id, &item);
		else if (item.key.type == KT_INODE_REF || item.key.type == KT_INODE_EXTREF)
			rc = take_ref(fs, l, r->id, &item);
		else
			rc = 0;
	}
	bi_iter_end(&it);
	return rc;
}

static struct irec *find_rec(struct ilist *l, uint64_t objectid)
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

static char *join(const char *dir, const char *name, size_t nlen)
{
	size_t dlen = strlen(dir);
	char *p = malloc(dlen + nlen + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, dlen);
	size_t at = dlen;
	if (dlen)
		p[at++] = '/';
	memcpy(p + at, name, nlen);
	p[at + nlen] = '\0';
	return p;
}

/*
 * Path of a directory record, cached on it. Iterative: walk up to the
 * first ancestor with a known state, then fill paths back down, so a deep
 * or looping chain costs no stack.
 */
static const char *dir_path(struct ilist *l, struct irec *r, const char *root_path, int *err)
{
	struct irec *chain[PATH_DEPTH_MAX_INODES];
	size_t n = 0;
	struct irec *cur = r;
	while (cur && cur->path_state == 0 && n < PATH_DEPTH_MAX_INODES) {
		cur->path_state = 1;
		chain[n++] = cur;
		if (cur->ino.objectid == OBJ_FIRST_FREE)
			break;
		cur = cur->parent ? find_rec(l, cur->parent) : NULL;
	}
	const char *base = NULL;
	if (n && chain[n - 1]->ino.objectid == OBJ_FIRST_FREE) {
		n--;
		if (root_path && !(chain[n]->path = strdup(root_path)))
			*err = -ENOMEM;
		chain[n]->path_state = 2;
		base = chain[n]->path;
	} else if (cur && cur->path_state == 2) {
		base = cur->path;
	}
	while (n--) {
		struct irec *c = chain[n];
		c->path = base && !*err ? join(base, l->names + c->name_off, c->name_len) : NULL;
		if (base && !c->path)
			*err = -ENOMEM;
		c->path_state = 2;
		base = c->path;
	}
	return r->path;
}

static int emit(struct btrfsimg_fs *fs, struct ilist *l, const char *root_path,
		btrfsimg_inode_entry_fn fn, void *ctx)
{
	int rc = 0, err = 0;
	for (size_t i = 0; rc == 0 && i < l->n; i++) {
		struct irec *r = &l->v[i];
		struct btrfsimg_inode_entry e = { .inode = r->ino };
		char *own = NULL;
		if (r->ino.objectid == OBJ_FIRST_FREE) {
			e.path = root_path;
		} else if (r->parent) {
			struct irec *p = find_rec(l, r->parent);
			const char *pp = p ? dir_path(l, p, root_path, &err) : NULL;
			if (pp && !(own = join(pp, l->names + r->name_off, r->name_len)))
				err = -ENOMEM;
			e.path = own;
		}
		if (err)
			return bi_err(fs, err, "out of memory building paths");
		e.reachable = e.path != NULL && r->ino.nlink > 0;
		rc = fn(ctx, &e);
		free(own);
	}
	return rc;
}

static int inodes_of(struct btrfsimg_fs *fs, const struct btrfsimg_subvol *sv,
		     btrfsimg_inode_entry_fn fn, void *ctx)
{
	struct bi_root r;
	struct ilist l = { 0 };
	int rc = bi_root_find(fs, sv->id, &r);
	if (rc == 0)
		rc = collect(fs, &r, &l);
	if (rc == 0)
		rc = emit(fs, &l, sv->deleted ? NULL : sv->path, fn, ctx);
	ilist_free(&l);
	return rc;
}

int btrfsimg_inodes(btrfsimg_fs *fs, uint64_t subvol, btrfsimg_inode_entry_fn fn, void *ctx)
{
	if (!fs || !fn)
		return -EINVAL;
	if (!fs->opened)
		return bi_err(fs, -EINVAL, "btrfsimg_inodes: filesystem not open");
	struct btrfsimg_subvol *v = NULL;
	size_t n = 0;
	int rc = btrfsimg_subvols(fs, &v, &n);
	bool found = false;
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		if (subvol && v[i].id != subvol)
			continue;
		found = true;
		rc = inodes_of(fs, &v[i], fn, ctx);
		if (rc < 0 && rc != -ENOMEM && !subvol) {
			/* one damaged subvolume must not hide the others */
			bi_damage(fs, "subvolume %llu: %s", (unsigned long long)v[i].id, fs->err);
			rc = 0;
		}
	}
	if (rc >= 0 && subvol && !found)
		rc = bi_err(fs, -ENOENT, "no subvolume %llu", (unsigned long long)subvol);
	btrfsimg_subvols_free(v, n);
	return rc;
}
