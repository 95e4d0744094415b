// SPDX-License-Identifier: MIT
/*
 * What changed between two snapshots of one subvolume (btrfsimg_diff).
 *
 * The two fs trees are compared through their shared blocks
 * (btrfs/treecmp.c): only the inodes with an item that differs are looked
 * at, each in both trees (a snapshot keeps its inodes' objectids). A
 * change belongs to the inode whose own link (parent directory, name)
 * changed, so moving a directory is one row and what lies below it is not
 * mentioned unless it changed itself. An inode whose creation generation
 * differs is another inode that reuses the number: deleted and added.
 * Contents are compared by bytes where the extent items differ: rewriting
 * a file with the same bytes is no change.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btrfsimg.h"

#include "base/err.h"
#include "base/ondisk.h"
#include "btrfs/root.h"
#include "btrfs/tree.h"
#include "btrfs/treecmp.h"
#include "send/paths.h"

#define COMPARE_PIECE (256u << 10)

/* ------------------------------------------ inodes whose items differ */

struct changed {
	uint64_t *ids;
	size_t n, cap;
};

static int note_changed(void *ctx, const bi_key *k, const struct bi_cmp_side *a,
			const struct bi_cmp_side *b)
{
	(void)a;
	(void)b;
	struct changed *c = ctx;
	if (k->objectid < OBJ_FIRST_FREE || k->objectid > OBJ_LAST_FREE)
		return 0;
	if (c->n && c->ids[c->n - 1] == k->objectid)
		return 0;
	int rc = bi_grow((void **)&c->ids, &c->cap, c->n + 1, sizeof(*c->ids));
	if (rc < 0)
		return rc;
	c->ids[c->n++] = k->objectid;
	return 0;
}

/* ------------------------------------------------------- the fields */

struct xattr_list {
	struct bi_bytes flat;	/* name, value, each with its length before it */
	size_t count;
};

static int put_xattr(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
		     size_t vlen)
{
	struct xattr_list *x = ctx;
	uint64_t lens[2] = { nlen, vlen };
	int rc = bi_bytes_put(&x->flat, lens, sizeof(lens));
	if (rc == 0)
		rc = bi_bytes_put(&x->flat, name, nlen);
	if (rc == 0)
		rc = bi_bytes_put(&x->flat, value, vlen);
	x->count++;
	return rc;
}

/* Both lists are in key order (name hash, then entry order), the same
 * for the same set of names: equal sets give equal bytes. */
static int xattrs_differ(btrfsimg_fs *fs, const struct bi_inode_links *a, const struct bi_inode_links *b,
			 bool *differ)
{
	struct xattr_list xa = { 0 }, xb = { 0 };
	int rc = btrfsimg_xattrs(fs, a->subvol, a->ino.objectid, put_xattr, &xa);
	if (rc == 0)
		rc = btrfsimg_xattrs(fs, b->subvol, b->ino.objectid, put_xattr, &xb);
	*differ = xa.count != xb.count || xa.flat.len != xb.flat.len ||
		  (xa.flat.len && memcmp(xa.flat.p, xb.flat.p, xa.flat.len) != 0);
	free(xa.flat.p);
	free(xb.flat.p);
	return rc;
}

static int targets_differ(btrfsimg_fs *fs, const struct bi_inode_links *a, const struct bi_inode_links *b,
			  bool *differ)
{
	uint8_t *ta = NULL, *tb = NULL;
	size_t la = 0, lb = 0;
	int rc = btrfsimg_readlink(fs, a->subvol, a->ino.objectid, &ta, &la);
	if (rc == 0)
		rc = btrfsimg_readlink(fs, b->subvol, b->ino.objectid, &tb, &lb);
	*differ = la != lb || (la && memcmp(ta, tb, la) != 0);
	free(ta);
	free(tb);
	return rc;
}

/* The EXTENT_DATA items of both: the same items are the same bytes. */
static int extent_items_equal(btrfsimg_fs *fs, const struct bi_inode_links *a, const struct bi_inode_links *b,
			      bool *equal)
{
	struct bi_root ra, rb;
	int rc = bi_root_find(fs, a->subvol, &ra);
	if (rc == 0)
		rc = bi_root_find(fs, b->subvol, &rb);
	if (rc < 0)
		return rc;
	bi_key lo = { a->ino.objectid, KT_EXTENT_DATA, 0 };
	bi_key hi = { a->ino.objectid, KT_EXTENT_DATA, UINT64_MAX };
	struct bi_iter ia, ib;
	rc = bi_iter_start(fs, &ia, &ra, &lo, &hi);
	if (rc < 0)
		return rc;
	rc = bi_iter_start(fs, &ib, &rb, &lo, &hi);
	*equal = true;
	while (rc == 0) {
		struct bi_item x, y;
		int ga = bi_iter_next(&ia, &x);
		int gb = ga < 0 ? ga : bi_iter_next(&ib, &y);
		if (ga < 0 || gb < 0) {
			rc = ga < 0 ? ga : gb;
			break;
		}
		if (!ga && !gb)
			break;
		if (ga != gb || bi_key_cmp(&x.key, &y.key) || x.size != y.size ||
		    memcmp(x.data, y.data, x.size) != 0) {
			*equal = false;
			break;
		}
	}
	bi_iter_end(&ib);
	bi_iter_end(&ia);
	return rc;
}

static int bytes_differ(btrfsimg_fs *fs, const struct bi_inode_links *a, const struct bi_inode_links *b,
			bool *differ)
{
	uint8_t *pa = malloc(COMPARE_PIECE), *pb = malloc(COMPARE_PIECE);
	int rc = pa && pb ? 0 : -ENOMEM;
	*differ = false;
	for (uint64_t off = 0; rc == 0 && off < a->ino.size && !*differ;) {
		size_t want = a->ino.size - off < COMPARE_PIECE ? (size_t)(a->ino.size - off)
								: COMPARE_PIECE;
		size_t ga = 0, gb = 0;
		rc = btrfsimg_file_read(fs, a->subvol, a->ino.objectid, off, pa, want, &ga);
		if (rc == 0)
			rc = btrfsimg_file_read(fs, b->subvol, b->ino.objectid, off, pb, want, &gb);
		if (rc == 0 && (ga != gb || memcmp(pa, pb, ga) != 0))
			*differ = true;
		if (rc == 0 && ga == 0)
			break;
		off += ga;
	}
	free(pa);
	free(pb);
	return rc;
}

static int content_differs(btrfsimg_fs *fs, const struct bi_inode_links *a, const struct bi_inode_links *b,
			   bool *differ)
{
	if (a->ino.size != b->ino.size) {
		*differ = true;
		return 0;
	}
	bool equal;
	int rc = extent_items_equal(fs, a, b, &equal);
	if (rc < 0 || equal) {
		*differ = false;
		return rc;
	}
	if (a->ino.size > btrfsimg_file_size_bound(fs))
		return bi_err(fs, -EFBIG,
			      "diff: inode %" PRIu64 ": size %" PRIu64
			      " past what the devices can hold (%" PRIu64 "): not compared",
			      a->ino.objectid, a->ino.size, btrfsimg_file_size_bound(fs));
	return bytes_differ(fs, a, b, differ);
}

static bool same_time(const struct btrfsimg_timespec *a, const struct btrfsimg_timespec *b)
{
	return a->sec == b->sec && a->nsec == b->nsec;
}

static int fields_differ(btrfsimg_fs *fs, const struct bi_inode_links *a, const struct bi_inode_links *b,
			 unsigned *fields)
{
	const struct btrfsimg_inode *x = &a->ino, *y = &b->ino;
	unsigned f = 0;
	if (x->size != y->size)
		f |= BTRFSIMG_DIFF_SIZE;
	if (x->mode != y->mode)
		f |= BTRFSIMG_DIFF_MODE;
	if (x->uid != y->uid)
		f |= BTRFSIMG_DIFF_UID;
	if (x->gid != y->gid)
		f |= BTRFSIMG_DIFF_GID;
	if (!same_time(&x->mtime, &y->mtime))
		f |= BTRFSIMG_DIFF_MTIME;
	if (x->rdev != y->rdev)
		f |= BTRFSIMG_DIFF_RDEV;
	bool d = false;
	int rc = 0;
	if (S_ISREG(x->mode) && S_ISREG(y->mode)) {
		rc = content_differs(fs, a, b, &d);
		if (d)
			f |= BTRFSIMG_DIFF_CONTENT;
	}
	if (rc == 0 && S_ISLNK(x->mode) && S_ISLNK(y->mode)) {
		rc = targets_differ(fs, a, b, &d);
		if (d)
			f |= BTRFSIMG_DIFF_TARGET;
	}
	if (rc == 0) {
		rc = xattrs_differ(fs, a, b, &d);
		if (d)
			f |= BTRFSIMG_DIFF_XATTRS;
	}
	*fields = f;
	return rc;
}

/* --------------------------------------------------------------- rows */

struct row {
	int kind;
	unsigned fields;
	uint64_t objectid;
	struct bi_bytes path, old_path;
};

struct rows {
	struct row *v;
	size_t n, cap;
};

static int row_add(struct rows *r, int kind, unsigned fields, uint64_t objectid,
		   struct row **out)
{
	int rc = bi_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v));
	if (rc < 0)
		return rc;
	*out = &r->v[r->n++];
	**out = (struct row){ .kind = kind, .fields = fields, .objectid = objectid };
	return 0;
}

static int row_link(btrfsimg_fs *fs, struct rows *r, int kind, unsigned fields,
		    const struct bi_inode_links *s, const struct bi_link *l)
{
	struct row *row;
	int rc = row_add(r, kind, fields, s->ino.objectid, &row);
	return rc < 0 ? rc : bi_link_path(fs, s->subvol, l, &row->path);
}

/* Every link of @s as one row of @kind (an inode only one side has). */
static int rows_whole(btrfsimg_fs *fs, struct rows *r, int kind, const struct bi_inode_links *s)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < s->nlinks; i++)
		rc = row_link(fs, r, kind, 0, s, &s->links[i]);
	return rc;
}

static bool bytes_before(const struct bi_bytes *x, const struct bi_bytes *y)
{
	int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
	return c < 0 || (c == 0 && x->len < y->len);
}

/* The fields row of an inode with links on both sides, under the smallest
 * path (bytewise) of the links it kept (@kept), else of those it gained:
 * which name a row gives must not hang on the order of the inode's refs. */
static int row_fields(btrfsimg_fs *fs, struct rows *r, unsigned fields,
		      const struct bi_inode_links *a, const struct bi_inode_links *b, bool kept)
{
	struct bi_bytes p = { 0 }, best = { 0 };
	bool have = false;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < b->nlinks; i++) {
		if (bi_has_link(a, &b->links[i]) != kept)
			continue;
		rc = bi_link_path(fs, b->subvol, &b->links[i], &p);
		if (rc == 0 && (!have || bytes_before(&p, &best))) {
			struct bi_bytes t = best;
			best = p;
			p = t;
			have = true;
		}
	}
	struct row *row;
	if (rc == 0 && have)
		rc = row_add(r, BTRFSIMG_CHANGE_MODIFIED, fields, b->ino.objectid, &row);
	if (rc == 0 && have) {
		row->path = best;
		best = (struct bi_bytes){ 0 };
	}
	free(p.p);
	free(best.p);
	return rc;
}

/* An inode both sides have: a rename when exactly one link went and one
 * came (the fields that differ go with it), else a row per link gone or
 * come and the fields on a row of their own at a link it kept. */
static int rows_both(btrfsimg_fs *fs, struct rows *r, const struct bi_inode_links *a,
		     const struct bi_inode_links *b)
{
	unsigned fields;
	int rc = fields_differ(fs, a, b, &fields);
	const struct bi_link *gone = NULL, *came = NULL, *kept = NULL;
	size_t ngone = 0, ncame = 0;
	for (size_t i = 0; rc == 0 && i < a->nlinks; i++)
		if (!bi_has_link(b, &a->links[i]) && ngone++ == 0)
			gone = &a->links[i];
	for (size_t i = 0; rc == 0 && i < b->nlinks; i++) {
		if (bi_has_link(a, &b->links[i]))
			kept = kept ? kept : &b->links[i];
		else if (ncame++ == 0)
			came = &b->links[i];
	}
	if (rc < 0)
		return rc;
	if (ngone == 1 && ncame == 1) {
		struct row *row;
		rc = row_add(r, BTRFSIMG_CHANGE_RENAMED, fields, b->ino.objectid, &row);
		if (rc == 0)
			rc = bi_link_path(fs, b->subvol, came, &row->path);
		return rc < 0 ? rc : bi_link_path(fs, a->subvol, gone, &row->old_path);
	}
	for (size_t i = 0; rc == 0 && i < a->nlinks; i++)
		if (!bi_has_link(b, &a->links[i]))
			rc = row_link(fs, r, BTRFSIMG_CHANGE_DELETED, 0, a, &a->links[i]);
	for (size_t i = 0; rc == 0 && i < b->nlinks; i++)
		if (!bi_has_link(a, &b->links[i]))
			rc = row_link(fs, r, BTRFSIMG_CHANGE_ADDED, 0, b, &b->links[i]);
	if (rc < 0 || !fields)
		return rc;
	if (b->ino.objectid == OBJ_FIRST_FREE) {
		struct row *row;
		return row_add(r, BTRFSIMG_CHANGE_MODIFIED, fields, b->ino.objectid, &row);
	}
	return kept || came ? row_fields(fs, r, fields, a, b, kept != NULL) : 0;
}

static int rows_for(btrfsimg_fs *fs, struct rows *r, struct bi_inode_links *a, struct bi_inode_links *b,
		    uint64_t objectid)
{
	int rc = bi_inode_links_load(fs, a, objectid);
	if (rc == 0)
		rc = bi_inode_links_load(fs, b, objectid);
	if (rc < 0)
		return rc;
	if (a->exists && b->exists && a->ino.generation != b->ino.generation) {
		rc = rows_whole(fs, r, BTRFSIMG_CHANGE_DELETED, a);
		return rc < 0 ? rc : rows_whole(fs, r, BTRFSIMG_CHANGE_ADDED, b);
	}
	if (a->exists && b->exists)
		return rows_both(fs, r, a, b);
	if (a->exists)
		return rows_whole(fs, r, BTRFSIMG_CHANGE_DELETED, a);
	if (b->exists)
		return rows_whole(fs, r, BTRFSIMG_CHANGE_ADDED, b);
	return 0;
}

static int path_cmp(const struct bi_bytes *a, const struct bi_bytes *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->p, b->p, n) : 0;
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

static int row_cmp(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	int c = path_cmp(&a->path, &b->path);
	return c ? c : a->kind - b->kind;
}

static void rows_free(struct rows *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].path.p);
		free(r->v[i].old_path.p);
	}
	free(r->v);
}

static int rows_report(struct rows *r, btrfsimg_change_fn fn, void *ctx)
{
	if (r->n > 1)
		qsort(r->v, r->n, sizeof(*r->v), row_cmp);
	for (size_t i = 0; i < r->n; i++) {
		const struct row *w = &r->v[i];
		struct btrfsimg_change c = {
			.kind = w->kind,
			.fields = w->fields,
			.objectid = w->objectid,
			.path = w->path.p ? w->path.p : (const uint8_t *)"",
			.path_len = w->path.len,
			.old_path = w->old_path.p,
			.old_path_len = w->old_path.len,
		};
		int rc = fn(ctx, &c);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- API */

static int fs_tree(btrfsimg_fs *fs, uint64_t id, const char *which, struct bi_root *out)
{
	if (id != 5 && (id < OBJ_FIRST_FREE || id > OBJ_LAST_FREE))
		return bi_err(fs, -EINVAL, "diff: %s %" PRIu64 " is not a subvolume id", which,
			      id);
	int rc = bi_root_find(fs, id, out);
	if (rc == -ENOENT)
		return bi_err(fs, rc, "diff: %s subvolume %" PRIu64 " not found", which, id);
	return rc;
}

int btrfsimg_diff(btrfsimg_fs *fs, uint64_t from, uint64_t to, btrfsimg_change_fn fn,
		  void *ctx, struct btrfsimg_diff_stats *stats)
{
	if (!fn)
		return bi_err(fs, -EINVAL, "diff: no callback given");
	struct bi_root ra, rb;
	int rc = fs_tree(fs, from, "--from", &ra);
	if (rc == 0)
		rc = fs_tree(fs, to, "--to", &rb);
	if (rc < 0)
		return rc;
	struct changed ch = { 0 };
	struct bi_treecmp_stats st;
	rc = bi_tree_compare(fs, &ra, &rb, note_changed, &ch, &st);
	struct rows r = { 0 };
	struct bi_inode_links a = { .subvol = from }, b = { .subvol = to };
	for (size_t i = 0; rc == 0 && i < ch.n; i++)
		rc = rows_for(fs, &r, &a, &b, ch.ids[i]);
	bi_inode_links_clear(&a);
	bi_inode_links_clear(&b);
	if (stats) {
		stats->inodes_compared = ch.n;
		stats->blocks_read = st.blocks_read;
		stats->subtrees_shared = st.subtrees_shared;
	}
	free(ch.ids);
	if (rc == 0)
		rc = rows_report(&r, fn, ctx);
	rows_free(&r);
	return rc;
}

const char *btrfsimg_change_name(int kind)
{
	switch (kind) {
	case BTRFSIMG_CHANGE_ADDED:
		return "added";
	case BTRFSIMG_CHANGE_DELETED:
		return "deleted";
	case BTRFSIMG_CHANGE_RENAMED:
		return "renamed";
	case BTRFSIMG_CHANGE_MODIFIED:
		return "modified";
	}
	return NULL;
}

const char *btrfsimg_diff_field_name(unsigned bit)
{
	static const char *const names[] = { "content", "size", "mode", "uid", "gid",
					     "mtime", "xattrs", "target", "rdev" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (bit == 1u << i)
			return names[i];
	return NULL;
}
