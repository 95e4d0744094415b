// SPDX-License-Identifier: MIT
/*
 * Whole-image target: open a sparse image (fuzz/sparse_image.h), then do
 * what the CLI does: superblock, subvolumes, a bounded walk of every
 * subvolume with inode, name, xattr, symlink and content reads, the walk
 * iterator's paths (never a "", "." or ".." component, a damaged name in its
 * safe form, which leads back to its bytes), a lookup of
 * every entry by name (DIR_ITEM, beside readdir's DIR_INDEX) and of stubs,
 * the inode enumeration with each scheme's numbers and a path lookup of its
 * first paths, the whole-filesystem collision analysis, and each file's
 * extent map with the owners of its first data byte. Any result is
 * fine; crashes, hangs, leaks and sanitizer reports are not. Invariants
 * checked: the handle always has a message after a failure, log messages
 * are never empty, presented numbers follow the formulas, and collision
 * counts are consistent (a group holds two or more inodes, examples are
 * groups of the report).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "btrfsimg_inum.h"
#include "sparse_image.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define MAX_NODES 4000
#define MAX_READ (1u << 20)
#define MAX_PATH_LOOKUPS 200
#define MAX_EXAMPLES 3
#define MAX_EXTENT_RECORDS 4096
#define MAX_OWNER_QUERIES 32

struct budget {
	btrfsimg_fs *fs;
	unsigned nodes, owner_queries;
	uint8_t *buf;
};

static int on_owner(void *ctx, const struct btrfsimg_owner *o)
{
	unsigned *n = ctx;
	CHECK(btrfsimg_owner_kind_name(o->kind));
	CHECK(o->kind != BTRFSIMG_OWNER_FILE || o->path);
	return ++*n > 256;
}

/* The extent map: records in file order, no gap (a compressed extent's
 * parts repeat its range), at most 4 copies, coverage within the bytes;
 * then the owners of the first data byte, which must include something. */
static void check_extents(struct budget *b, uint64_t subvol, uint64_t obj)
{
	btrfsimg_extents *it;
	if (btrfsimg_extents_open(b->fs, subvol, obj, BTRFSIMG_EXTENTS_CSUM, &it) < 0)
		return;
	const struct btrfsimg_extent *e;
	uint64_t end = 0, logical = 0;
	unsigned n = 0;
	bool have_logical = false;
	while (n++ < MAX_EXTENT_RECORDS && btrfsimg_extents_next(it, &e) > 0) {
		CHECK(e->file_offset == end || (e->compression && e->file_offset + e->length == end));
		CHECK(e->length > 0 && e->ncopies <= BTRFSIMG_EXTENT_COPIES_MAX);
		CHECK(e->csum_bytes <= e->disk_length && btrfsimg_csum_cover_name(e->csum));
		end = e->file_offset + e->length;
		if (!have_logical && e->type == BTRFSIMG_EXTENT_REGULAR) {
			logical = e->logical;
			have_logical = true;
		}
	}
	btrfsimg_extents_close(it);
	int cover = btrfsimg_file_csum_cover(b->fs, subvol, obj, NULL, NULL);
	CHECK(cover < 0 || btrfsimg_csum_cover_name(cover));
	if (have_logical && b->owner_queries++ < MAX_OWNER_QUERIES) {
		unsigned seen = 0;
		int rc = btrfsimg_owners_logical(b->fs, logical, 1, on_owner, &seen);
		CHECK(rc != 0 || seen > 0);
	}
}

static int on_xattr(void *ctx, const uint8_t *n, size_t nl, const uint8_t *v, size_t vl)
{
	(void)ctx;
	CHECK(nl == 0 || n);
	CHECK(vl == 0 || v);
	return 0;
}

static int on_name(void *ctx, uint64_t parent, uint64_t index, const uint8_t *n, size_t nl)
{
	(void)ctx;
	(void)parent;
	(void)index;
	CHECK(nl == 0 || n);
	return 0;
}

static void on_log(void *ctx, bool damage, const char *msg)
{
	(void)ctx;
	(void)damage;
	CHECK(msg && *msg);
}

static void visit_inode(struct budget *b, uint64_t subvol, uint64_t obj, int depth);

struct dir_walk {
	struct budget *b;
	uint64_t subvol, dir;
	int depth;
};

static int on_dirent(void *ctx, const struct btrfsimg_dirent *d)
{
	struct dir_walk *w = ctx;
	CHECK(d->name_len == 0 || d->name);
	if (++w->b->nodes > MAX_NODES)
		return 1;
	/* The copy in DIR_ITEM may disagree on a hostile image: no check. */
	struct btrfsimg_dirent found;
	btrfsimg_lookup(w->b->fs, w->subvol, w->dir, d->name, d->name_len, &found);
	if (d->kind == BTRFSIMG_TARGET_STUB) {
		struct btrfsimg_inode stub;
		btrfsimg_stub_inode(w->b->fs, w->subvol, w->dir, &stub);
	} else {
		visit_inode(w->b, d->target_subvol, d->target_objectid, w->depth + 1);
	}
	return 0;
}

static void visit_inode(struct budget *b, uint64_t subvol, uint64_t obj, int depth)
{
	struct btrfsimg_inode ino;
	if (depth > 64 || btrfsimg_inode_get(b->fs, subvol, obj, &ino) < 0)
		return;
	btrfsimg_xattrs(b->fs, subvol, obj, on_xattr, NULL);
	btrfsimg_inode_names(b->fs, subvol, obj, on_name, NULL);
	if (S_ISDIR(ino.mode)) {
		struct dir_walk w = { b, subvol, obj, depth };
		btrfsimg_readdir(b->fs, subvol, obj, on_dirent, &w);
	} else if (S_ISLNK(ino.mode)) {
		uint8_t *t = NULL;
		size_t len;
		if (btrfsimg_readlink(b->fs, subvol, obj, &t, &len) == 0)
			free(t);
	} else if (S_ISREG(ino.mode)) {
		size_t got = 0;
		if (btrfsimg_file_read(b->fs, subvol, obj, 0, b->buf, MAX_READ, &got) == 0)
			CHECK(got <= MAX_READ);
		check_extents(b, subvol, obj);
	}
	uint32_t type;
	uint8_t fh[40];
	int len = btrfsimg_file_handle(b->fs, subvol, obj, subvol, 256, true, &type, fh);
	CHECK(len < 0 || len <= 40);
}

/* The walk iterator as walk, bodyfile and extract drive it: no path holds
 * an empty, "." or ".." component or a NUL (a damaged name is in its safe
 * form), and the safe form of a damaged name leads back to its bytes. */
static void check_walk(btrfsimg_fs *fs)
{
	struct btrfsimg_walk_opts o = { .subvol = 5 };
	btrfsimg_walk *w;
	const struct btrfsimg_walk_entry *e;
	if (btrfsimg_walk_open(fs, &o, &w) < 0)
		return;
	for (unsigned n = 0; n < MAX_NODES && btrfsimg_walk_next(w, &e) > 0; n++) {
		const char *p = (const char *)e->path;
		CHECK(strlen(p) == e->path_len);
		for (size_t i = 0, len; i < e->path_len; i += len + 1) {
			len = strcspn(p + i, "/");
			CHECK(len && !(len == 1 && p[i] == '.') &&
			      !(len == 2 && p[i] == '.' && p[i + 1] == '.'));
		}
		if (e->kind != BTRFSIMG_WALK_PATH || e->is_start ||
		    !btrfsimg_name_problem(e->ent.name, e->ent.name_len))
			continue;
		char safe[3 * 255 + 2], m[1024];
		uint8_t raw[256];
		size_t rl = 0, sl = btrfsimg_name_safe(e->ent.name, e->ent.name_len, safe,
						       sizeof(safe));
		CHECK(sl < sizeof(safe) && sl <= e->path_len &&
		      memcmp(p + e->path_len - sl, safe, sl) == 0);
		CHECK(btrfsimg_name_raw(safe, sl, raw, sizeof(raw), &rl) == 0);
		CHECK(rl == e->ent.name_len && memcmp(raw, e->ent.name, rl) == 0);
		CHECK(btrfsimg_name_damage(e->dir_subvol, e->dir_objectid, &e->ent, m,
					   sizeof(m)) > 0);
	}
	btrfsimg_walk_close(w);
}

struct enumeration {
	btrfsimg_fs *fs;
	unsigned n;
};

static int on_inode(void *ctx, const struct btrfsimg_inode_entry *e,
		    const struct btrfsimg_inode_numbers *p)
{
	struct enumeration *en = ctx;
	uint64_t sv = e->inode.subvol, obj = e->inode.objectid;
	CHECK(!e->reachable || e->path);
	CHECK(!e->path || strlen(e->path) == e->path_len);
	CHECK(p->st_ino == obj && p->tree_id == sv && p->inumbits == 56);
	CHECK(p->overlay == btrfsimg_inumbits_overlay(sv,
	      56) && p->uniquifier == btrfsimg_uniquifier(sv));
	CHECK(p->ino == (obj == p->overlay ? obj : obj ^ p->overlay));
	CHECK(p->nfs_fileid == (obj == p->uniquifier ? obj : obj ^ p->uniquifier));
	CHECK(p->numdevs2_dev >= -1 && p->numdevs2_dev <= 1);
	if (e->path && en->n < MAX_PATH_LOOKUPS) {
		/* the path comes from INODE_REFs, the lookup goes through
		 * DIR_ITEMs: a hostile image may make them disagree */
		struct btrfsimg_dirent d;
		btrfsimg_path_lookup(en->fs, 5, e->path, &d);
	}
	return ++en->n > 20000;
}

static void check_collisions(btrfsimg_fs *fs)
{
	struct btrfsimg_fs_collisions *c = NULL;
	if (btrfsimg_collisions(fs, 0, MAX_EXAMPLES, &c) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		btrfsimg_fs_collisions_free(c);
		return;
	}
	CHECK(c->report->nresults == BTRFSIMG_COLLIDE_SCHEMES);
	for (size_t i = 0; i < c->report->nresults; i++) {
		const struct btrfsimg_collide_result *r = &c->report->results[i];
		CHECK((r->groups == 0) == (r->inodes == 0) && r->inodes >= 2 * r->groups);
		CHECK(r->inodes <= c->inodes + c->stubs);
		CHECK(r->nexamples <= MAX_EXAMPLES && r->nexamples <= r->groups);
		for (size_t g = 0; g < r->nexamples; g++)
			CHECK(r->examples[g].size >= 2 && r->examples[g].size <= r->inodes);
	}
	btrfsimg_fs_collisions_free(c);
}

/* Send streams and diffs of the first subvolumes: whatever the trees
 * say, a stream starts with its header and stops when the writer says so
 * (a budget of bytes), a diff's rows have a kind and named fields. */
#define MAX_STREAM (4u << 20)
#define MAX_SENDS 3

struct stream_budget {
	uint64_t bytes;
	bool header_seen;
};

static int count_stream(void *ctx, const void *buf, size_t len)
{
	struct stream_budget *s = ctx;
	if (s->bytes == 0)
		s->header_seen = len >= 13 && memcmp(buf, "btrfs-stream", 13) == 0;
	s->bytes += len;
	return s->bytes > MAX_STREAM ? -EFBIG : 0;
}

static int on_change(void *ctx, const struct btrfsimg_change *c)
{
	(void)ctx;
	CHECK(btrfsimg_change_name(c->kind));
	CHECK(c->path || !c->path_len);
	for (unsigned bit = 1; bit && bit <= c->fields; bit <<= 1)
		CHECK(!(c->fields & bit) || btrfsimg_diff_field_name(bit));
	CHECK((c->kind == BTRFSIMG_CHANGE_RENAMED) == (c->old_path != NULL));
	return 0;
}

static void check_send_diff(btrfsimg_fs *fs, const struct btrfsimg_subvol *v, size_t n)
{
	uint64_t ids[MAX_SENDS];
	size_t k = 0;
	for (size_t i = 0; i < n && k < MAX_SENDS; i++)
		if (v[i].path && !v[i].deleted)
			ids[k++] = v[i].id;
	for (size_t i = 0; i < k; i++) {
		struct stream_budget s = { 0, false };
		struct btrfsimg_send_opts o = { .size = sizeof(o), .subvol = ids[i],
						.parent = i ? ids[0] : 0,
						.proto = i == 2 ? 2 : 1,
						.flags = i == 2 ? BTRFSIMG_SEND_COMPRESSED_DATA : 0 };
		int rc = btrfsimg_send(fs, &o, count_stream, &s, NULL);
		CHECK(s.bytes == 0 || s.header_seen);
		CHECK(rc == 0 || rc == -EFBIG || *btrfsimg_errmsg(fs));
		if (i)
			btrfsimg_diff(fs, ids[0], ids[i], on_change, NULL, NULL);
	}
}

/* Several filesystems on the device (mkfs over an old one): the scan
 * lists each, and each not current opens by its fsid (rebuilt from its
 * own blocks) or says why not; at most two, to bound the time. */
static void check_other_fsids(struct sparse_image *im)
{
	btrfsimg_fs *fs = NULL;
	struct btrfsimg_found_fs found[4];
	size_t n = 0, tried = 0;
	if (btrfsimg_fs_new(&fs, NULL) < 0)
		return;
	btrfsimg_set_log(fs, on_log, NULL);
	CHECK(btrfsimg_add_device_io(fs, sparse_read, im, im->size, "fuzz") == 0);
	int rc = btrfsimg_scan_filesystems(fs, found, 4, &n);
	CHECK(rc == 0 || *btrfsimg_errmsg(fs));
	btrfsimg_fs_free(fs);
	for (size_t i = 0; rc == 0 && i < n && i < 4 && tried < 2; i++) {
		char hex[33];
		if (found[i].current || !found[i].blocks)
			continue;
		tried++;
		for (int k = 0; k < 16; k++)
			snprintf(hex + 2 * k, 3, "%02x", found[i].metadata_uuid[k]);
		if (btrfsimg_fs_new(&fs, NULL) < 0)
			return;
		btrfsimg_set_log(fs, on_log, NULL);
		CHECK(btrfsimg_set_fsid(fs, hex) == 0);
		CHECK(btrfsimg_add_device_io(fs, sparse_read, im, im->size, "fuzz") == 0);
		if (btrfsimg_open(fs) == 0)
			check_walk(fs);
		else
			CHECK(*btrfsimg_errmsg(fs));
		btrfsimg_fs_free(fs);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sparse_image im;
	if (sparse_parse(data, size, &im) < 0)
		return 0;
	if (im.fix_csums)
		sparse_fix_csums(&im);
	btrfsimg_fs *fs = NULL;
	struct budget b = { 0 };
	if (btrfsimg_fs_new(&fs, NULL) < 0)
		goto out;
	btrfsimg_set_log(fs, on_log, NULL);
	CHECK(btrfsimg_add_device_io(fs, sparse_read, &im, im.size, "fuzz") == 0);
	if (btrfsimg_open(fs) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		goto out;
	}
	struct btrfsimg_super_info si;
	CHECK(btrfsimg_super(fs, &si) == 0);
	/* the superblock may name more devices; the one given is one of them */
	CHECK(btrfsimg_missing_devices(fs) < si.num_devices);
	struct btrfsimg_subvol *v = NULL;
	size_t n = 0;
	b.fs = fs;
	b.buf = malloc(MAX_READ);
	if (b.buf && btrfsimg_subvols(fs, &v, &n) == 0) {
		for (size_t i = 0; i < n && b.nodes < MAX_NODES; i++)
			visit_inode(&b, v[i].id, 256, 0);
		check_send_diff(fs, v, n);
		btrfsimg_subvols_free(v, n);
	}
	check_walk(fs);
	struct enumeration en = { fs, 0 };
	btrfsimg_inodes_presented(fs, 0, 56, 0, on_inode, &en);
	check_collisions(fs);
out:
	free(b.buf);
	btrfsimg_fs_free(fs);
	check_other_fsids(&im);
	sparse_free(&im);
	return 0;
}
