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
#include <stdio.h>
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

/* The handles the two sides are read through: one handle for two
 * snapshots, two for one subvolume at two generations. */
struct two {
	btrfsimg_fs *a, *b;
};

/* The generation a handle shows: the one asked for, else the superblock's. */
static uint64_t shown_generation(const btrfsimg_fs *fs)
{
	return fs->want_gen ? fs->want_gen : fs->sb.info.generation;
}

/* ------------------------------------------ inodes whose items differ */

/* Inodes @lo .. @hi, whose items one side could not read. */
struct unread {
	uint64_t lo, hi;
};

struct changed {
	uint64_t *ids;
	size_t n, cap;
	const struct two *fs;
	uint64_t subvol[2];	/* --from's, --to's */
	struct unread *unread;
	size_t nunread, capunread;
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

static void key_str(const bi_key *k, char *out, size_t len)
{
	if (k)
		snprintf(out, len, "(%" PRIu64 " %u %" PRIu64 ")", k->objectid, k->type, k->offset);
	else
		snprintf(out, len, "the end");
}

/* A subtree one side could not read (an older generation's block written
 * over since, a checksum): the inodes with keys in it are not compared,
 * said as damage on that side's handle; the rest of the diff stands. */
static int note_unread(void *ctx, bool side_b, const bi_key *lo, const bi_key *hi, int rc)
{
	(void)rc;
	struct changed *c = ctx;
	btrfsimg_fs *fs = side_b ? c->fs->b : c->fs->a;
	int grc = bi_grow((void **)&c->unread, &c->capunread, c->nunread + 1,
			  sizeof(*c->unread));
	if (grc < 0)
		return grc;
	struct unread *u = &c->unread[c->nunread++];
	u->lo = lo->objectid;
	u->hi = !hi ? UINT64_MAX : hi->type || hi->offset ? hi->objectid : hi->objectid - 1;
	char a[64], b[64];
	key_str(lo, a, sizeof(a));
	key_str(hi, b, sizeof(b));
	bi_damage(fs,
		  "diff: subvolume %" PRIu64 " at generation %" PRIu64 ": keys %s to %s not read "
		  "(%s): inodes %" PRIu64 " to %" PRIu64 " not compared",
		  c->subvol[side_b], shown_generation(fs), a, b, fs->err, u->lo, u->hi);
	return 0;
}

/* The inodes that changed less those a side could not read whole. */
static void drop_unread(struct changed *c)
{
	size_t k = 0;
	for (size_t i = 0; i < c->n; i++) {
		bool unread = false;
		for (size_t j = 0; j < c->nunread && !unread; j++)
			unread = c->ids[i] >= c->unread[j].lo && c->ids[i] <= c->unread[j].hi;
		if (!unread)
			c->ids[k++] = c->ids[i];
	}
	c->n = k;
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
static int xattrs_differ(const struct two *fs, const struct bi_inode_links *a,
			 const struct bi_inode_links *b, bool *differ)
{
	struct xattr_list xa = { 0 }, xb = { 0 };
	int rc = btrfsimg_xattrs(fs->a, a->subvol, a->ino.objectid, put_xattr, &xa);
	if (rc == 0)
		rc = btrfsimg_xattrs(fs->b, b->subvol, b->ino.objectid, put_xattr, &xb);
	*differ = xa.count != xb.count || xa.flat.len != xb.flat.len ||
		  (xa.flat.len && memcmp(xa.flat.p, xb.flat.p, xa.flat.len) != 0);
	free(xa.flat.p);
	free(xb.flat.p);
	return rc;
}

static int targets_differ(const struct two *fs, const struct bi_inode_links *a,
			  const struct bi_inode_links *b, bool *differ)
{
	uint8_t *ta = NULL, *tb = NULL;
	size_t la = 0, lb = 0;
	int rc = btrfsimg_readlink(fs->a, a->subvol, a->ino.objectid, &ta, &la);
	if (rc == 0)
		rc = btrfsimg_readlink(fs->b, b->subvol, b->ino.objectid, &tb, &lb);
	*differ = la != lb || (la && memcmp(ta, tb, la) != 0);
	free(ta);
	free(tb);
	return rc;
}

/* The EXTENT_DATA items of both: the same items are the same bytes. */
static int extent_items_equal(const struct two *fs, const struct bi_inode_links *a,
			      const struct bi_inode_links *b, bool *equal)
{
	struct bi_root ra, rb;
	int rc = bi_root_find(fs->a, a->subvol, &ra);
	if (rc == 0)
		rc = bi_root_find(fs->b, b->subvol, &rb);
	if (rc < 0)
		return rc;
	bi_key lo = { a->ino.objectid, KT_EXTENT_DATA, 0 };
	bi_key hi = { a->ino.objectid, KT_EXTENT_DATA, UINT64_MAX };
	struct bi_iter ia, ib;
	rc = bi_iter_start(fs->a, &ia, &ra, &lo, &hi);
	if (rc < 0)
		return rc;
	rc = bi_iter_start(fs->b, &ib, &rb, &lo, &hi);
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

static int bytes_differ(const struct two *fs, const struct bi_inode_links *a,
			const struct bi_inode_links *b, bool *differ)
{
	uint8_t *pa = malloc(COMPARE_PIECE), *pb = malloc(COMPARE_PIECE);
	int rc = pa && pb ? 0 : -ENOMEM;
	*differ = false;
	for (uint64_t off = 0; rc == 0 && off < a->ino.size && !*differ;) {
		size_t want = a->ino.size - off < COMPARE_PIECE ? (size_t)(a->ino.size - off)
								: COMPARE_PIECE;
		size_t ga = 0, gb = 0;
		rc = btrfsimg_file_read(fs->a, a->subvol, a->ino.objectid, off, pa, want, &ga);
		if (rc == 0)
			rc = btrfsimg_file_read(fs->b, b->subvol, b->ino.objectid, off, pb, want,
						&gb);
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

static int content_differs(const struct two *fs, const struct bi_inode_links *a,
			   const struct bi_inode_links *b, bool *differ)
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
	if (a->ino.size > btrfsimg_file_size_bound(fs->a))
		return bi_err(fs->a, -EFBIG,
			      "diff: inode %" PRIu64 ": size %" PRIu64
			      " past what the devices can hold (%" PRIu64 "): not compared",
			      a->ino.objectid, a->ino.size, btrfsimg_file_size_bound(fs->a));
	return bytes_differ(fs, a, b, differ);
}

static bool same_time(const struct btrfsimg_timespec *a, const struct btrfsimg_timespec *b)
{
	return a->sec == b->sec && a->nsec == b->nsec;
}

static int fields_differ(const struct two *fs, const struct bi_inode_links *a,
			 const struct bi_inode_links *b, unsigned *fields)
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
static int rows_both(const struct two *fs, struct rows *r, const struct bi_inode_links *a,
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
			rc = bi_link_path(fs->b, b->subvol, came, &row->path);
		return rc < 0 ? rc : bi_link_path(fs->a, a->subvol, gone, &row->old_path);
	}
	for (size_t i = 0; rc == 0 && i < a->nlinks; i++)
		if (!bi_has_link(b, &a->links[i]))
			rc = row_link(fs->a, r, BTRFSIMG_CHANGE_DELETED, 0, a, &a->links[i]);
	for (size_t i = 0; rc == 0 && i < b->nlinks; i++)
		if (!bi_has_link(a, &b->links[i]))
			rc = row_link(fs->b, r, BTRFSIMG_CHANGE_ADDED, 0, b, &b->links[i]);
	if (rc < 0 || !fields)
		return rc;
	if (b->ino.objectid == OBJ_FIRST_FREE) {
		struct row *row;
		return row_add(r, BTRFSIMG_CHANGE_MODIFIED, fields, b->ino.objectid, &row);
	}
	return kept || came ? row_fields(fs->b, r, fields, a, b, kept != NULL) : 0;
}

static int rows_for(const struct two *fs, struct rows *r, struct bi_inode_links *a,
		    struct bi_inode_links *b, uint64_t objectid)
{
	int rc = bi_inode_links_load(fs->a, a, objectid);
	if (rc == 0)
		rc = bi_inode_links_load(fs->b, b, objectid);
	if (rc < 0)
		return rc;
	if (a->exists && b->exists && a->ino.generation != b->ino.generation) {
		rc = rows_whole(fs->a, r, BTRFSIMG_CHANGE_DELETED, a);
		return rc < 0 ? rc : rows_whole(fs->b, r, BTRFSIMG_CHANGE_ADDED, b);
	}
	if (a->exists && b->exists)
		return rows_both(fs, r, a, b);
	if (a->exists)
		return rows_whole(fs->a, r, BTRFSIMG_CHANGE_DELETED, a);
	if (b->exists)
		return rows_whole(fs->b, r, BTRFSIMG_CHANGE_ADDED, b);
	return 0;
}

static void rows_drop(struct rows *r, size_t from)
{
	for (size_t i = from; i < r->n; i++) {
		free(r->v[i].path.p);
		free(r->v[i].old_path.p);
	}
	r->n = from;
}

/* rows_for, an inode whose items, path or data cannot be read (a block
 * or extent of an older generation written over since) left out with a
 * word of damage rather than ending the diff. */
static int rows_or_damage(const struct two *fs, struct rows *r, struct bi_inode_links *a,
			  struct bi_inode_links *b, uint64_t objectid)
{
	size_t before = r->n;
	fs->a->err[0] = '\0';
	fs->b->err[0] = '\0';
	int rc = rows_for(fs, r, a, b, objectid);
	if (rc != -EIO && rc != -EUCLEAN)
		return rc;
	rows_drop(r, before);
	bool on_a = fs->a->err[0] != '\0';
	btrfsimg_fs *bad = on_a ? fs->a : fs->b;
	bi_damage(bad,
		  "diff: subvolume %" PRIu64 " at generation %" PRIu64 ": inode %" PRIu64
		  " not compared: %s",
		  on_a ? a->subvol : b->subvol, shown_generation(bad), objectid, bad->err);
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
	rows_drop(r, 0);
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

static int check_handles(btrfsimg_fs *from_fs, btrfsimg_fs *to_fs, btrfsimg_change_fn fn)
{
	if (!from_fs || !to_fs)
		return to_fs ? bi_err(to_fs, -EINVAL, "diff: no --from handle given") : -EINVAL;
	if (!bi_opened(to_fs, "btrfsimg_diff_between"))
		return -EINVAL;
	if (!bi_opened(from_fs, "btrfsimg_diff_between"))
		return bi_err(to_fs, -EINVAL, "btrfsimg_diff_between: the --from handle is not open");
	if (!fn)
		return bi_err(to_fs, -EINVAL, "diff: no callback given");
	if (from_fs != to_fs && memcmp(from_fs->sb.info.fsid, to_fs->sb.info.fsid, 16) != 0) {
		char a[37], b[37];
		bi_uuid_str(from_fs->sb.info.fsid, a);
		bi_uuid_str(to_fs->sb.info.fsid, b);
		return bi_err(to_fs, -EINVAL,
			      "diff: the two handles read two filesystems, have fsid %s expect %s",
			      a, b);
	}
	return 0;
}

/* A failure on the --from handle, said on the --to handle where the
 * caller looks, with the generation it read. */
static int from_side_failed(btrfsimg_fs *from_fs, btrfsimg_fs *to_fs, int rc)
{
	if (rc >= 0 || from_fs == to_fs || !from_fs->err[0])
		return rc;
	return bi_err(to_fs, rc, "%s (the --from side, generation %" PRIu64 ")", from_fs->err,
		      shown_generation(from_fs));
}

static int diff_trees(const struct two *fs, uint64_t from, uint64_t to, btrfsimg_change_fn fn,
		      void *ctx, struct btrfsimg_diff_stats *stats)
{
	struct bi_root ra, rb;
	int rc = fs_tree(fs->a, from, "--from", &ra);
	if (rc == 0)
		rc = fs_tree(fs->b, to, "--to", &rb);
	if (rc < 0)
		return rc;
	struct changed ch = { .fs = fs, .subvol = { from, to } };
	struct bi_treecmp_stats st = { 0 };
	rc = bi_tree_compare_across(fs->a, &ra, fs->b, &rb, note_changed, note_unread, &ch, &st);
	drop_unread(&ch);
	struct rows r = { 0 };
	struct bi_inode_links a = { .subvol = from }, b = { .subvol = to };
	for (size_t i = 0; rc == 0 && i < ch.n; i++)
		rc = rows_or_damage(fs, &r, &a, &b, ch.ids[i]);
	bi_inode_links_clear(&a);
	bi_inode_links_clear(&b);
	if (stats) {
		stats->inodes_compared = ch.n;
		stats->blocks_read = st.blocks_read;
		stats->subtrees_shared = st.subtrees_shared;
	}
	free(ch.ids);
	free(ch.unread);
	if (rc == 0)
		rc = rows_report(&r, fn, ctx);
	rows_free(&r);
	return rc;
}

int btrfsimg_diff_between(btrfsimg_fs *from_fs, uint64_t from, btrfsimg_fs *to_fs, uint64_t to,
			  btrfsimg_change_fn fn, void *ctx, struct btrfsimg_diff_stats *stats)
{
	int rc = check_handles(from_fs, to_fs, fn);
	if (rc < 0)
		return rc;
	/* which handle a failure's message is on: the one set from here on */
	from_fs->err[0] = '\0';
	to_fs->err[0] = '\0';
	const struct two fs = { from_fs, to_fs };
	rc = diff_trees(&fs, from, to, fn, ctx, stats);
	return from_side_failed(from_fs, to_fs, rc);
}

int btrfsimg_diff(btrfsimg_fs *fs, uint64_t from, uint64_t to, btrfsimg_change_fn fn,
		  void *ctx, struct btrfsimg_diff_stats *stats)
{
	return btrfsimg_diff_between(fs, from, fs, to, fn, ctx, stats);
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
