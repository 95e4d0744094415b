// SPDX-License-Identifier: MIT
/*
 * btrfsimg inodes: every inode with what today's kernel presents and what
 * the 2021 proposals would present (inumbits=N, the nfsd uniquifier,
 * numdevs=2, the "tree:ino" /proc form).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "nest.h"
#include "progress.h"

struct inodes_ctx {
	struct cli *c;
	struct nest nest;
	unsigned bits;
	uint64_t count;
	/* per-subvolume constants, recomputed when the subvolume changes */
	uint64_t cur, overlay, uniq;
	int dev;
};

static void switch_subvol(struct inodes_ctx *x, uint64_t subvol)
{
	x->cur = subvol;
	x->overlay = btrfsimg_overlay(subvol, x->bits);
	x->uniq = btrfsimg_uniquifier(subvol);
	x->dev = nest_dev(&x->nest, subvol);
}

static size_t u64_dec(uint64_t v, char *out)
{
	char b[24];
	int i = sizeof(b);
	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(out, b + i, sizeof(b) - (size_t)i);
	return sizeof(b) - (size_t)i;
}

static void put_json(struct inodes_ctx *x, const struct btrfsimg_inode_entry *e)
{
	const struct btrfsimg_inode *i = &e->inode;
	char proc[48];
	struct jw w;
	jw_begin(&w, stdout);
	jw_u64(&w, "subvol", i->subvol);
	jw_u64(&w, "objectid", i->objectid);
	jw_u64(&w, "st_ino", i->objectid);
	jw_u64(&w, "tree_id", i->subvol);
	jw_u64(&w, "inumbits", x->bits);
	jw_u64(&w, "overlay", x->overlay);
	jw_u64(&w, "ino", btrfsimg_presented(i->objectid, x->overlay));
	jw_u64(&w, "uniquifier", x->uniq);
	jw_u64(&w, "nfs_fileid", btrfsimg_presented(i->objectid, x->uniq));
	if (x->dev < 0)
		jw_null(&w, "numdevs2_dev");
	else
		jw_u64(&w, "numdevs2_dev", (uint64_t)x->dev);
	jw_key(&w, "proc_ino");
	jw_raw(&w, "\"", 1);
	jw_raw(&w, proc, u64_dec(i->subvol, proc));
	jw_raw(&w, ":", 1);
	jw_raw(&w, proc, u64_dec(i->objectid, proc));
	jw_raw(&w, "\"", 1);
	jw_u64(&w, "generation", i->generation);
	jw_u64(&w, "mode", i->mode);
	jw_u64(&w, "nlink", i->nlink);
	jw_u64(&w, "size", i->size);
	jw_str(&w, "path", e->path);
	jw_bool(&w, "reachable", e->reachable);
	jw_end(&w);
}

static void put_text(struct inodes_ctx *x, const struct btrfsimg_inode_entry *e)
{
	const struct btrfsimg_inode *i = &e->inode;
	printf("%6" PRIu64 " %10" PRIu64 "  ino %#18" PRIx64 "  nfs %#18" PRIx64 "  %s%s\n",
	       i->subvol, i->objectid, btrfsimg_presented(i->objectid, x->overlay),
	       btrfsimg_presented(i->objectid, x->uniq), e->path ? e->path : "<unreachable>",
	       e->reachable || !e->path ? "" : " [nlink 0]");
}

static int on_inode(void *ctx, const struct btrfsimg_inode_entry *e)
{
	struct inodes_ctx *x = ctx;
	if (e->inode.subvol != x->cur)
		switch_subvol(x, e->inode.subvol);
	progress_tick("inodes", ++x->count);
	if (x->c->json)
		put_json(x, e);
	else
		put_text(x, e);
	return 0;
}

int cmd_inodes(struct cli *c)
{
	struct inodes_ctx x = { .c = c, .bits = c->inumbits >= 0 ? (unsigned)c->inumbits : 56,
				.cur = 0 };
	int rc = nest_load(c->fs, c->have_mount_subvol ? c->mount_subvol : 0, &x.nest);
	if (rc < 0)
		return cli_fail(c, rc, "inodes");
	switch_subvol(&x, 5);
	x.cur = 0;
	if (!c->json)
		printf("%6s %10s  %-22s  %-22s  %s\n", "subvol", "objectid",
		       "inumbits ino", "nfsd fileid", "path");
	rc = btrfsimg_inodes(c->fs, c->have_subvol ? c->subvol : 0, on_inode, &x);
	progress_done();
	nest_free(&x.nest);
	if (rc < 0)
		return cli_fail(c, rc, "inodes");
	return cli_status(c);
}
