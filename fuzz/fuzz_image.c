// SPDX-License-Identifier: MIT
/*
 * Whole-image target: open a sparse image (fuzz/sparse_image.h), then do
 * what the CLI does: superblock, subvolumes, a bounded walk of every
 * subvolume with inode, xattr, symlink and content reads, and the inode
 * enumeration. Any result is fine; crashes, hangs, leaks and sanitizer
 * reports are not. Invariant checked: the handle always has a message
 * after a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sparse_image.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)
#define MAX_NODES 4000
#define MAX_READ (1u << 20)

struct budget {
	btrfsimg_fs *fs;
	unsigned nodes;
	uint8_t *buf;
};

static int on_xattr(void *ctx, const uint8_t *n, size_t nl, const uint8_t *v, size_t vl)
{
	(void)ctx;
	CHECK(nl == 0 || n);
	CHECK(vl == 0 || v);
	return 0;
}

static void visit_inode(struct budget *b, uint64_t subvol, uint64_t obj, int depth);

static int on_dirent(void *ctx, const struct btrfsimg_dirent *d)
{
	struct budget *b = ((void **)ctx)[0];
	int depth = *(int *)((void **)ctx)[1];
	CHECK(d->name_len == 0 || d->name);
	if (++b->nodes > MAX_NODES)
		return 1;
	if (d->kind != BTRFSIMG_TARGET_STUB)
		visit_inode(b, d->target_subvol, d->target_objectid, depth + 1);
	return 0;
}

static void visit_inode(struct budget *b, uint64_t subvol, uint64_t obj, int depth)
{
	struct btrfsimg_inode ino;
	if (depth > 64 || btrfsimg_inode_get(b->fs, subvol, obj, &ino) < 0)
		return;
	btrfsimg_xattrs(b->fs, subvol, obj, on_xattr, NULL);
	if (S_ISDIR(ino.mode)) {
		void *ctx[2] = { b, &depth };
		btrfsimg_readdir(b->fs, subvol, obj, on_dirent, ctx);
	} else if (S_ISLNK(ino.mode)) {
		uint8_t *t = NULL;
		size_t len;
		if (btrfsimg_readlink(b->fs, subvol, obj, &t, &len) == 0)
			free(t);
	} else if (S_ISREG(ino.mode)) {
		size_t got = 0;
		if (btrfsimg_file_read(b->fs, subvol, obj, 0, b->buf, MAX_READ, &got) == 0)
			CHECK(got <= MAX_READ);
	}
	uint32_t type;
	uint8_t fh[40];
	int len = btrfsimg_file_handle(b->fs, subvol, obj, subvol, 256, true, &type, fh);
	CHECK(len < 0 || len <= 40);
}

static int on_inode(void *ctx, const struct btrfsimg_inode_entry *e)
{
	unsigned *n = ctx;
	CHECK(!e->reachable || e->path);
	return ++*n > 20000;
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
	CHECK(btrfsimg_add_device_io(fs, sparse_read, &im, im.size, "fuzz") == 0);
	if (btrfsimg_open(fs) < 0) {
		CHECK(*btrfsimg_errmsg(fs));
		goto out;
	}
	struct btrfsimg_super_info si;
	CHECK(btrfsimg_super(fs, &si) == 0);
	struct btrfsimg_subvol *v = NULL;
	size_t n = 0;
	b.fs = fs;
	b.buf = malloc(MAX_READ);
	if (b.buf && btrfsimg_subvols(fs, &v, &n) == 0) {
		for (size_t i = 0; i < n && b.nodes < MAX_NODES; i++)
			visit_inode(&b, v[i].id, 256, 0);
		btrfsimg_subvols_free(v, n);
	}
	unsigned count = 0;
	btrfsimg_inodes(fs, 0, on_inode, &count);
out:
	free(b.buf);
	btrfsimg_fs_free(fs);
	sparse_free(&im);
	return 0;
}
